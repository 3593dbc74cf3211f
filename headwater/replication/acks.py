"""acks=all produces waiting for the high watermark of one partition (Kafka's ``DelayedProduce``).

Rules:
- Each waiting produce has a key (chosen by the shell), the offset the high watermark must reach
  (the batch's last offset + 1) and a deadline (arrival + the request's timeout).
- ``on_high_watermark(hw, error)`` completes, in order of required offset, every produce the high
  watermark has reached, with ``error`` (NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND from
  ``PartitionReplica.ack_error``).
- ``expire(now_ms)`` completes every produce whose deadline has come with REQUEST_TIMED_OUT.
- ``fail_all(error)`` completes everything, for a partition that stopped being led here.
- A key completes exactly once; completing removes it.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from headwater.protocol.errors import ErrorCode

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class AckCompletion(Generic[K]):
    key: K
    required_offset: int
    error: ErrorCode


@dataclass(frozen=True)
class _Waiting(Generic[K]):
    key: K
    required_offset: int
    deadline_ms: int
    seq: int  # matches this entry's heap items; older items of a reused key are stale


class PendingAcks(Generic[K]):
    def __init__(self) -> None:
        self._waiting: dict[K, _Waiting[K]] = {}
        self._seq = itertools.count()
        # Both heaps hold stale entries for keys already completed by the other; they are skipped.
        self._by_offset: list[tuple[int, int, K]] = []
        self._by_deadline: list[tuple[int, int, K]] = []

    def __len__(self) -> int:
        return len(self._waiting)

    def __contains__(self, key: object) -> bool:
        return key in self._waiting

    def add(self, key: K, required_offset: int, deadline_ms: int) -> None:
        if key in self._waiting:
            raise ValueError(f"{key!r} is already waiting")
        seq = next(self._seq)
        self._waiting[key] = _Waiting(key, required_offset, deadline_ms, seq)
        heapq.heappush(self._by_offset, (required_offset, seq, key))
        heapq.heappush(self._by_deadline, (deadline_ms, seq, key))

    def _live(self, seq: int, key: K) -> bool:
        w = self._waiting.get(key)
        return w is not None and w.seq == seq

    @property
    def next_deadline_ms(self) -> int | None:
        while self._by_deadline and not self._live(self._by_deadline[0][1], self._by_deadline[0][2]):
            heapq.heappop(self._by_deadline)
        return self._by_deadline[0][0] if self._by_deadline else None

    def _pop(self, key: K, error: ErrorCode) -> AckCompletion[K]:
        w = self._waiting.pop(key)
        return AckCompletion(key, w.required_offset, error)

    def on_high_watermark(self, high_watermark: int, error: ErrorCode = ErrorCode.NONE) -> list[AckCompletion[K]]:
        done: list[AckCompletion[K]] = []
        heap = self._by_offset
        while heap and heap[0][0] <= high_watermark:
            _, seq, key = heapq.heappop(heap)
            if self._live(seq, key):
                done.append(self._pop(key, error))
        return done

    def expire(self, now_ms: int) -> list[AckCompletion[K]]:
        done: list[AckCompletion[K]] = []
        heap = self._by_deadline
        while heap and heap[0][0] <= now_ms:
            _, seq, key = heapq.heappop(heap)
            if self._live(seq, key):
                done.append(self._pop(key, ErrorCode.REQUEST_TIMED_OUT))
        return done

    def fail_all(self, error: ErrorCode) -> list[AckCompletion[K]]:
        order = sorted(self._waiting.values(), key=lambda w: w.required_offset)
        self._waiting.clear()
        self._by_offset.clear()
        self._by_deadline.clear()
        return [AckCompletion(w.key, w.required_offset, error) for w in order]

    def validate_state(self) -> None:
        offsets = {(s, k) for _, s, k in self._by_offset}
        deadlines = {(s, k) for _, s, k in self._by_deadline}
        for key, w in self._waiting.items():
            assert (w.seq, key) in offsets and (w.seq, key) in deadlines
