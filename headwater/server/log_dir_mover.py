"""Moves of replicas between this broker's log dirs (KIP-113): Kafka's ``ReplicaAlterLogDirsManager``
and its fetcher thread.

AlterReplicaLogDirs creates a future log in the target dir (``LogManager.create_future``) and hands
the partition to this mover, which copies the current log into it while producers and the
follower fetch loop keep appending to the current one, and swaps the two when they are equal
(``LogManager.replace_current_with_future``). What each step does is decided by
``replication.log_dir_move.next_action``; this module reads, appends, waits and swaps.

Rules:
- One partition copies at a time, the same one until it is done or gone, then the next in (topic,
  partition) order (Kafka's ``LocalLeaderEndPoint.selectPartitionToFetch``): each move finishes
  sooner, and a crash leaves one of them half done.
- A slice is at most ``SLICE_BYTES`` (``replica.fetch.max.bytes``' default, as Kafka's thread uses
  it) and at most one second of ``replica.alter.log.dirs.io.max.bytes.per.second``; the bytes are
  charged to that throttle, and no slice starts while it is in debt. The slice is read (and its
  CRCs checked) on a worker thread; the append, a page-cache write, runs on the event loop, where
  every other append of the log runs.
- After the read everything is checked again (the partition may have gone, the move been dropped,
  the future log changed); a stale slice is dropped. A current log truncated meanwhile is found by
  the next decision, which truncates the future log to match.
- A tail of at most ``INLINE_TAIL_BYTES`` is read on the loop, and the decision that follows it runs
  in the same step: a partition under steady produce load still reaches a moment when both logs
  end at the same offset, and the swap happens then, with no append in between.
- The swap waits (``RETRY_S``) while either log is being flushed on another thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.records import scan_valid_prefix
from headwater.replication.follower import Truncate, TruncateFullyAndStartAt
from headwater.replication.log_dir_move import Copy, LogEnds, MoveAction, Swap, next_action
from headwater.replication.throttle import ByteRateLimiter
from headwater.server.clock import now_ms
from headwater.storage import LogManager, PartitionLog, ReadResult

if TYPE_CHECKING:
    from headwater.server.replica_manager import Hosted

log = logging.getLogger(__name__)

SLICE_BYTES = 1024 * 1024
INLINE_TAIL_BYTES = 64 * 1024
RETRY_S = 0.05
ERROR_BACKOFF_S = 1.0
UNTHROTTLED = 2**63 - 1  # the config's default, Long.MAX_VALUE: no throttle

Key = tuple[str, int]


def _read_whole(result: ReadResult) -> bytes:
    """The slices' bytes, cut after the last whole batch whose CRC holds (a current log truncated
    during the read ends short)."""
    data = result.read()
    _batches, end = scan_valid_prefix(data, verify_crc=True)
    return data[:end]


def _ends(plog: PartitionLog) -> LogEnds:
    return LogEnds(plog.log_start_offset, plog.log_end_offset, plog.latest_epoch())


class LogDirMover:
    def __init__(self, logs: LogManager, partitions: Mapping[Key, Hosted],
                 swapped: Callable[[Hosted, PartitionLog], None]) -> None:
        self._logs = logs
        # The replica manager's map, read only: it alone adds and removes partitions.
        self._partitions = partitions
        self._swapped = swapped  # the replica manager takes the new current log
        self._moving: set[Key] = set()
        self._in_progress: Key | None = None
        self.limiter: ByteRateLimiter | None = None
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    @property
    def moving(self) -> frozenset[Key]:
        return frozenset(self._moving)

    def add(self, topic: str, partition: int) -> None:
        self._moving.add((topic, partition))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
        self._wakeup.set()

    def remove(self, topic: str, partition: int) -> None:
        self._moving.discard((topic, partition))

    def set_rate(self, bytes_per_s: int | None) -> None:
        """``replica.alter.log.dirs.io.max.bytes.per.second``; None (or the default) removes the throttle."""
        if bytes_per_s is None or bytes_per_s <= 0 or bytes_per_s >= UNTHROTTLED:
            self.limiter = None
        elif self.limiter is None:
            self.limiter = ByteRateLimiter(bytes_per_s, now_ms())
        else:
            self.limiter.set_rate(bytes_per_s, now_ms())
        self._wakeup.set()

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    # --- the copy loop ----------------------------------------------------------------------------

    def _pick(self) -> Key | None:
        if self._in_progress not in self._moving:
            self._in_progress = min(self._moving) if self._moving else None
            if self._in_progress is not None:
                log.info("beginning or resuming the copy of %s-%d to its future log; %d moves remaining",
                         *self._in_progress, len(self._moving))
        return self._in_progress

    async def _run(self) -> None:
        while not self._stopping:
            key = self._pick()
            if key is None:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            try:
                wait_s = await self._step(key)
            except KafkaError as exc:
                # A failing dir is taken offline by the log manager; the next step finds out.
                log.warning("moving %s-%d between log dirs: %s", key[0], key[1], exc)
                wait_s = ERROR_BACKOFF_S
            if wait_s > 0:
                self._wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), wait_s)

    def _live(self, key: Key) -> tuple[Hosted, PartitionLog] | None:
        hosted = self._partitions.get(key)
        future = self._logs.get_future(*key)
        if key not in self._moving or hosted is None or future is None or hosted.plog.closed or future.closed:
            self._moving.discard(key)
            return None
        return hosted, future

    async def _step(self, key: Key) -> float:
        """One decision and what it asks for; how long to wait before the next step."""
        live = self._live(key)
        if live is None:
            return 0
        hosted, future = live
        while True:  # more than once only after a tail copied inline
            current = hosted.plog
            action: MoveAction = next_action(_ends(future), _ends(current),
                                             current_end_offset_for_epoch=current.end_offset_for_epoch,
                                             future_end_offset_for_epoch=future.end_offset_for_epoch)
            if isinstance(action, Swap):
                return self._swap(key, hosted)
            if isinstance(action, Truncate):
                log.info("%s-%d: truncating the future log to %d to match the current log", *key, action.offset)
                future.truncate_to(action.offset)
                return 0
            if isinstance(action, TruncateFullyAndStartAt):
                future.truncate_fully_and_start_at(action.offset)
                return 0
            assert isinstance(action, Copy)
            now = now_ms()
            budget = SLICE_BYTES
            if self.limiter is not None:
                if self.limiter.quota_exceeded(now):
                    return self.limiter.throttle_time_ms(now) / 1000
                budget = max(1, min(SLICE_BYTES, int(self.limiter.rate_bytes_per_s)))
            result = current.read(action.offset, budget)
            if not result.slices:
                return RETRY_S
            inline = result.size_bytes <= INLINE_TAIL_BYTES
            if inline:
                data = _read_whole(result)
            else:
                data = await asyncio.to_thread(_read_whole, result)
                live = self._live(key)
                if live is None or live[0] is not hosted or live[1] is not future or hosted.plog is not current \
                        or future.log_end_offset != action.offset:
                    return 0  # stale: decide again
            if not data:
                return RETRY_S
            self._append(key, future, current, data)
            if not inline:
                return 0

    def _append(self, key: Key, future: PartitionLog, current: PartitionLog, data: bytes) -> None:
        try:
            future.append_as_follower(data)
        except KafkaError as exc:
            if exc.code != ErrorCode.OFFSET_OUT_OF_RANGE:
                raise
            # Batches below the future log's end: the current log's batches no longer line up with
            # the copied ones. Copy again from the start rather than keep anything doubtful.
            log.warning("%s-%d: %s; copying the partition again", *key, exc)
            future.truncate_fully_and_start_at(current.log_start_offset)
            return
        if self.limiter is not None:
            self.limiter.record(len(data), now_ms())
        # Kafka's future replica takes the current one's high watermark and log start on each fetch.
        future.high_watermark = current.high_watermark
        start = min(current.log_start_offset, future.log_end_offset)
        if start > future.log_start_offset:
            future.delete_records_before(start)

    def _swap(self, key: Key, hosted: Hosted) -> float:
        new = self._logs.replace_current_with_future(*key)
        if new is None:
            return RETRY_S  # a flush of either log runs on another thread
        self._moving.discard(key)
        self._swapped(hosted, new)
        return 0
