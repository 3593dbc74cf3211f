"""Producer ids, handed out from blocks this broker claims durably.

Idempotent producers (InitProducerId without a transactional id) and the transaction coordinator
(a new transactional id, or one whose epoch ran out) draw from the same blocks, as Kafka's
ProducerIdManager serves both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable


class ProducerIds:
    def __init__(self, claim_block: Callable[[], Awaitable[tuple[int, int]]]) -> None:
        self._claim_block = claim_block
        self._next, self._end = 0, 0  # [next, end) of the block this broker owns

    async def next(self) -> int:
        if self._next >= self._end:
            # The whole block is claimed before any id of it goes out, so a restart never reuses
            # one: in ZooKeeper in a cluster (unique across brokers), else in the local image.
            self._next, self._end = await self._claim_block()
        nxt = self._next
        self._next += 1
        return nxt
