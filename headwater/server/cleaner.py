"""The broker's log cleaner: ``headwater/storage/cleaner.py`` driven from the event loop.

Every broker cleans every compacted log it hosts, leader or follower (Kafka does the same: each
replica compacts its own copy). One log at a time: choosing the log, taking the plan and swapping
each cleaned group in run on the loop, where the log's other methods run; building the offset map
and writing the cleaned files (the reads, the CPU and the fsyncs) run on a worker thread, so
produce and fetch never wait for the cleaner.

Broker settings: ``log.cleaner.enable`` (default true), ``log.cleaner.backoff.ms`` (15000, the
pause when no log needs cleaning), ``log.cleaner.dedupe.buffer.size`` (128 MiB, the offset map's
budget per run).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Callable, Mapping
from typing import TypeVar

from headwater.protocol.errors import KafkaError
from headwater.server.metrics import CleanerFigures
from headwater.storage import LogManager, PartitionLog
from headwater.storage.cleaner import (
    DEFAULT_DEDUPE_BUFFER_BYTES,
    Cleanable,
    CleanerAborted,
    CleanerCheckpoints,
    CleanPlan,
    build_offset_map,
    choose,
    cleanable_range,
    discard_group_files,
    group_segments,
    next_checkpoint,
    plan_clean,
    plan_still_valid,
    write_group,
)
from headwater.storage.files import fsync_dir

log = logging.getLogger(__name__)

DEFAULT_BACKOFF_MS = 15_000
T = TypeVar("T")


class LogCleanerService:
    def __init__(self, logs: LogManager, props: Mapping[str, str], clock_ms: Callable[[], int]) -> None:
        self.logs = logs
        self.enabled = str(props.get("log.cleaner.enable", "true")).strip().lower() == "true"
        self.backoff_ms = int(props.get("log.cleaner.backoff.ms", DEFAULT_BACKOFF_MS))
        self.dedupe_buffer_bytes = int(props.get("log.cleaner.dedupe.buffer.size", DEFAULT_DEDUPE_BUFFER_BYTES))
        self._clock_ms = clock_ms
        self._checkpoints: CleanerCheckpoints | None = None
        self._plan: CleanPlan | None = None
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # Figures for the metrics endpoint (totals since start, and the last finished run).
        self.bytes_read = 0
        self.bytes_written = 0
        self.runs = 0
        self.last_run_duration_s = 0.0
        self.in_progress = False
        # Logs whose cleaning failed: skipped until the broker restarts, as Kafka does, so one bad
        # log does not fail every run. A log that merely changed under the cleaner is not put here.
        self.uncleanable: set[tuple[str, int]] = set()
        # The log each checkpoint entry belongs to. A log created after start-up (a new partition,
        # a replica moved back) starts with no checkpoint, whatever an older log of that name left.
        self._known: dict[tuple[str, int], weakref.ref[PartitionLog]] | None = None

    def figures(self) -> CleanerFigures:
        return CleanerFigures(self.bytes_read, self.bytes_written, self.runs, self.last_run_duration_s,
                              self.in_progress, len(self.uncleanable))

    def start(self) -> None:
        """After the logs are loaded; does nothing when ``log.cleaner.enable`` is false."""
        if self.enabled:
            self._init_checkpoints()
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Before the logs close: ask a clean in progress to stop, and wait for it."""
        self._stopping.set()
        if self._plan is not None:
            self._plan.abort.set()
        if self._task is not None:
            await self._task

    async def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                cleaned = await self.clean_one()
            except Exception:
                log.exception("log cleaner failed")
                cleaned = False
            if not cleaned:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), self.backoff_ms / 1000)

    def _init_checkpoints(self) -> None:
        """Read the checkpoint files; the logs open now are the ones their entries describe."""
        self._checkpoints = CleanerCheckpoints(self.logs.log_dirs)
        self._known = {(p.topic, p.partition): weakref.ref(p) for p in self.logs.all_logs()}

    def _candidates(self, now_ms: int) -> list[tuple[PartitionLog, Cleanable]]:
        assert self._checkpoints is not None and self._known is not None
        out = []
        for plog in self.logs.all_logs():
            key = (plog.topic, plog.partition)
            log_dir = self.logs.log_dir_of(plog)
            known = self._known.get(key)
            if known is None or known() is not plog:
                self._known[key] = weakref.ref(plog)
                self._checkpoints.forget(log_dir, plog.topic, plog.partition)
                self.uncleanable.discard(key)
            if plog.closed or not plog.config.compact or key in self.uncleanable:
                continue
            if self.logs.get_future(*key) is not None:
                continue  # moving between log dirs: Kafka pauses cleaning until the swap (abortAndPauseCleaning)
            checkpoint = self._checkpoints.get(log_dir, plog.topic, plog.partition)
            if plog.truncated_to is not None:
                # Kafka's maybeTruncateCheckpoint: what was written again after a truncation is dirty.
                if checkpoint is not None and checkpoint > plog.truncated_to:
                    checkpoint = plog.truncated_to
                    self._checkpoints.lower(log_dir, plog.topic, plog.partition, checkpoint)
                plog.truncated_to = None
            try:
                out.append((plog, cleanable_range(plog, checkpoint, now_ms)))
            except OSError as exc:
                self.logs.report_io_error(log_dir, exc)
            except KafkaError as exc:
                log.warning("cleaner skips %s-%d: %s", plog.topic, plog.partition, exc)
        return out

    @staticmethod
    async def _in_thread(plan: CleanPlan, fn: Callable[..., T], *args: object) -> T:
        """Run ``fn`` on a worker thread. If this task is cancelled meanwhile, the thread is told to
        stop and waited for, so it never works on after the plan's descriptors are closed."""
        future = asyncio.ensure_future(asyncio.to_thread(fn, *args))
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            plan.abort.set()
            with contextlib.suppress(BaseException):
                await future
            raise

    async def clean_one(self) -> bool:
        """Clean the dirtiest log that needs it; False when none did (or the clean was abandoned)."""
        if self._checkpoints is None:
            self._init_checkpoints()
        picked = choose(self._candidates(self._clock_ms()))
        if picked is None:
            return False
        plog, cleanable = picked
        plan = plan_clean(plog, cleanable, self.dedupe_buffer_bytes)
        if plan is None:
            return False
        self._plan = plan
        self.in_progress = True
        started = time.monotonic()
        read_before = written_before = 0
        try:
            offset_map, mapped_end = await self._in_thread(plan, build_offset_map, plan)
            for group in group_segments(plan.segments, mapped_end, plan.segment_bytes):
                base = group[0].base_offset
                try:
                    await self._in_thread(plan, write_group, plan, group, offset_map)
                except BaseException:
                    discard_group_files(plan.directory, base)
                    raise
                if self.logs.get(plog.topic, plog.partition) is not plog or plog.closed:
                    discard_group_files(plan.directory, base)
                    raise CleanerAborted(f"{plog.topic}-{plog.partition} went away during cleaning")
                if plog.replace_segments([r.segment for r in group], [r.size_bytes for r in group], base,
                                         sync_dir=False):
                    plan.stats.segments_replaced += len(group)
                    await asyncio.to_thread(fsync_dir, plan.directory)  # an fsync may take long: not on the loop
                else:
                    plan.stats.groups_refused += 1
                self.bytes_read += plan.stats.bytes_read - read_before
                self.bytes_written += plan.stats.bytes_written - written_before
                read_before, written_before = plan.stats.bytes_read, plan.stats.bytes_written
            live = {(p.topic, p.partition) for p in self.logs.all_logs() if self.logs.log_dir_of(p) == self.logs.log_dir_of(plog)}
            mapped_end = next_checkpoint(plan, mapped_end)
            assert self._checkpoints is not None
            await asyncio.to_thread(
                self._checkpoints.update, self.logs.log_dir_of(plog), plog.topic, plog.partition, mapped_end, live
            )
        except CleanerAborted as exc:
            log.info("log cleaner: %s", exc)
            return False
        except (KafkaError, OSError) as exc:
            gone = self.logs.get(plog.topic, plog.partition) is not plog  # deleted or moved meanwhile
            if gone or not plan_still_valid(plan) or self._stopping.is_set():
                log.info("log cleaner: %s-%d changed while it was cleaned (%s); retrying later",
                         plog.topic, plog.partition, exc)
                return False
            if isinstance(exc, OSError):
                # The disk, not the log: as Kafka's cleaner does, the whole dir goes offline
                # (LogDirFailureChannel), and the controller moves its partitions elsewhere.
                self.logs.report_io_error(self.logs.log_dir_of(plog), exc)
                return False
            self.uncleanable.add((plog.topic, plog.partition))
            log.error("log cleaner: %s-%d is marked uncleanable until restart: %s", plog.topic, plog.partition, exc)
            return False
        finally:
            self.bytes_read += plan.stats.bytes_read - read_before
            self.bytes_written += plan.stats.bytes_written - written_before
            plan.close()
            self._plan = None
            self.in_progress = False
        elapsed = time.monotonic() - started
        self.runs += 1
        self.last_run_duration_s = elapsed
        log.info(
            "cleaned %s-%d up to offset %d in %.2f s: read %d bytes, wrote %d, kept %d records, dropped %d",
            plog.topic, plog.partition, mapped_end, elapsed, plan.stats.bytes_read, plan.stats.bytes_written,
            plan.stats.records_kept, plan.stats.records_dropped,
        )
        return True
