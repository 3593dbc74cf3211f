"""A paid reassignment throttle answers the throttled replica's fetch, and no other.

Kafka leaves a throttled follower's fetch to wait out ``replica.fetch.wait.max.ms`` (its
DelayedFetch does not count a throttled partition's bytes); headwater wakes that fetch when the
limiter's debt is paid, so a copy flows evenly (docs/replication.md). The in-sync followers of the
same partition have nothing new then: answering them would cost each a round trip in which an
acks=all produce to another partition of their session waits for their next fetch. Here a leader's
Fetch handler answers real v12 requests from an in-sync follower (2) and a replica being added (3).
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from _follower_fetch import MAX_BYTES, batch, follower_fetch

from headwater.protocol.errors import ErrorCode
from headwater.replication.partition import LeaderAndIsrState
from headwater.server.apis.fetch import FetchApis
from headwater.server.replica_manager import ReplicaManager
from headwater.storage.config import LogConfig
from headwater.storage.manager import LogManager

RATE = 2_000_000  # the reassignment throttle: two 1 MiB answers put it in debt for about 50 ms


def test_a_paid_throttle_wakes_the_replica_being_added_and_not_the_in_sync_follower(tmp_path: Path) -> None:
    async def scenario() -> None:
        logs = LogManager([tmp_path / "b1"], LogConfig(), clock_ms=lambda: 1_000_000)
        logs.load()
        ctx: Any = SimpleNamespace(config=SimpleNamespace(props={}), image=SimpleNamespace(topics={}),
                                   authz=SimpleNamespace(enabled=False))
        apis = FetchApis(ctx)
        leader = ReplicaManager(1, logs, replica_lag_time_max_ms=30_000, replica_fetch_backoff_ms=1000,
                                wake=apis.wake, wake_readers=apis.wake_readers, wake_replica=apis.wake_replica,
                                broker_address=lambda _b: None, controller_id=lambda: 9, broker_epoch=lambda: 1)
        ctx.replicas = leader
        state = LeaderAndIsrState(1, 0, (1, 2), 0, (1, 2, 3), adding_replicas=(3,))
        assert leader.become("t", 0, state, topic_id=uuid.UUID(int=1), config=LogConfig(), min_insync_replicas=1,
                             max_message_bytes=1 << 20) == ErrorCode.NONE
        hosted = leader.leader("t", 0)
        for i in range(40):  # about 4 MB
            leader.append(hosted, batch(i), 1, 30_000)
        end = hosted.plog.log_end_offset
        leader.set_reassignment_rate(RATE)
        loop = asyncio.get_running_loop()

        # The in-sync follower holds the whole log and waits for more.
        assert len((await follower_fetch(apis, 2, 0, max_wait_ms=0)).records) > 0
        in_sync = asyncio.ensure_future(follower_fetch(apis, 2, end, max_wait_ms=1_500))
        # The replica being added takes two 1 MiB answers, then its limiter is in debt.
        offset = 0
        for _ in range(2):
            part = await follower_fetch(apis, 3, offset, max_wait_ms=0)
            assert part.records
            offset = _next_offset(bytes(part.records))
        assert leader.leader_read_limit("t", 0, False, 3, MAX_BYTES) < MAX_BYTES
        started = loop.time()
        throttled = await follower_fetch(apis, 3, offset, max_wait_ms=1_500)
        assert throttled.records, "the paid throttle's wake-up answers the replica being added"
        assert loop.time() - started < 1.0
        assert not in_sync.done(), "the in-sync follower's fetch is not answered by another replica's throttle"
        quiet = await in_sync
        assert not quiet.records and loop.time() - started >= 1.0
        await leader.stop()
        logs.close()

    asyncio.run(scenario())


def _next_offset(records: bytes) -> int:
    """The offset after the last whole batch of ``records`` (base offset + last offset delta + 1)."""
    pos, nxt = 0, 0
    while pos + 61 <= len(records):
        base = int.from_bytes(records[pos:pos + 8], "big")
        length = int.from_bytes(records[pos + 8:pos + 12], "big")
        last_delta = int.from_bytes(records[pos + 23:pos + 27], "big")
        nxt = base + last_delta + 1
        pos += 12 + length
    return nxt
