"""A partition's log: an ordered list of segments in ``<log dir>/<topic>-<partition>/``.

Rules:
- Offsets increase from the first segment's base offset to ``log_end_offset`` (LEO), with no gaps,
  except where the cleaner removed records of a compacted topic (``cleaner.py``): a segment may
  then end before the next one begins, but segments never overlap.
- ``log_start_offset <= high_watermark <= log_end_offset`` after every operation.
- Only the last segment (the active one) is appended to; it is rolled before an append that would
  overflow segment.bytes, when it is older than segment.ms less its random segment.jitter.ms, when
  its offset or time index holds what segment.index.bytes allows, or when relative offsets would
  overflow int32.
- A leader append is validated and converted first (``validator.py``): the topic's compression.type,
  message.timestamp.type and timestamp window. A follower appends the leader's bytes as they are.
- Nothing is written for an append that is rejected, and a failed write leaves the file as it was.
- A segment leaving the log (retention, truncation, a cleaner's swap: ``retention.py``) is renamed
  ``*.deleted``; ``delete_expired_files`` closes its fds and unlinks its files only
  ``file.delete.delay.ms`` later, and never within ``SEND_GRACE_MS`` of a read, so a ``FileSlice``
  handed to the server stays valid while it is being sent.
- Open files: only the active segment's ``.log`` stays open. Index files are written at each
  sync and closed; an older segment's ``.log`` is opened by a read and closed by
  ``release_idle_files`` once nobody read it for ``max(file.delete.delay.ms, IDLE_FILE_MS)``.
- All methods run on one thread, except ``flush`` and ``flush_through`` which may run on another
  (one at a time, under ``_flush_lock``): they touch only duplicated fds, taken under ``_lock``, and
  index files under ``_lock`` plus each index's own lock; every change to the segment list and every
  close of an fd happens under ``_lock``.
- Segment files are never preallocated, whatever ``preallocate`` says: every rule here (and recovery)
  takes a file's length as the end of its last batch.

Segments leaving the log are in ``retention.py`` (with their rules), timestamp lookups in
``timestamps.py``, producer-state snapshots in ``producer_snapshots.py``, transaction markers, the
aborted-transaction index and what recovery rebuilds of them in ``transactions.py``.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import random
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterator
from pathlib import Path

from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.records.batch import BatchHeader, CorruptRecordError, assign_offsets, crc_ok, iter_batches
from headwater.records.records import build_marker_batch
from headwater.storage import retention, timestamps, transactions
from headwater.storage.checkpoint import LEADER_EPOCH_CHECKPOINT
from headwater.storage.config import LogConfig
from headwater.storage.epochs import LeaderEpochCache
from headwater.storage.files import fsync_dir, fsync_file
from headwater.storage.index import IndexCorruptError
from headwater.storage.producer_snapshots import (
    rebuild_producer_state,
    recover_segment,
    snapshot_offsets,
    snapshot_path,
    write_snapshot,
)
from headwater.storage.producers import (
    AppendOrigin as AppendOrigin,  # re-exported: callers name the origin of an append with it
)
from headwater.storage.producers import CompletedTxn, ProducerEntry, ProducerStateManager, tracks_producer
from headwater.storage.segment import (
    DELETED_SUFFIX,
    LOG_SUFFIX,
    MAX_RELATIVE_OFFSET,
    LogSegment,
    parse_offset_name,
)
from headwater.storage.swap import complete_interrupted_swaps
from headwater.storage.validator import validate_and_convert
from headwater.values import value

log = logging.getLogger(__name__)

TMP_SUFFIX = ".tmp"
IDLE_FILE_MS = 60_000
"""A segment behind the active one keeps its ``.log`` descriptor at least this long after a read."""
SEND_GRACE_MS = 5_000
"""A descriptor is never closed sooner than this after a read handed it out, whatever
file.delete.delay.ms says: the server may still be sending from it, and closing an fd under
asyncio's sendfile leaves that send hanging rather than failing."""


@value
class AppendResult:
    base_offset: int  # offset of the first record written (or of the original, for a duplicate)
    last_offset: int
    max_timestamp: int
    duplicate: bool = False  # a retried idempotent batch: nothing was written
    # What Produce answers as log_append_time_ms: the append time on a LogAppendTime topic, else -1;
    # for a duplicate, the original batch's max timestamp (Kafka's UnifiedLog.append sets
    # logAppendTime to the duplicate's timestamp whatever the topic's timestamp type).
    log_append_time: int = -1


@value
class FileSlice:
    """A byte range of a segment file, servable with ``os.sendfile``."""

    fileno: int
    position: int
    length: int

    def read(self) -> bytes:
        chunks = []
        pos, left = self.position, self.length
        while left > 0:
            chunk = os.pread(self.fileno, left, pos)
            if not chunk:
                break
            chunks.append(chunk)
            pos += len(chunk)
            left -= len(chunk)
        return b"".join(chunks)


@value
class ReadResult:
    slices: list[FileSlice]  # whole batches, in order; empty when nothing to return
    size_bytes: int

    def read(self) -> bytes:
        return b"".join(s.read() for s in self.slices)


_EMPTY_READ = ReadResult([], 0)


def _remove_segment(seg: LogSegment) -> None:
    seg.close()
    for path in seg.paths():
        path.unlink(missing_ok=True)


class PartitionLog:
    def __init__(
        self,
        topic: str,
        partition: int,
        directory: Path,
        config: LogConfig,
        *,
        clock_ms: Callable[[], int],
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int = 0,
        clean_shutdown: bool = False,
        rng: random.Random | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.directory = directory
        self.config = config
        self._clock_ms = clock_ms
        self._rng = rng if rng is not None else random.Random()  # segment.jitter.ms draws
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()  # one flush at a time (appends may ask for one, so may the broker)
        self.last_flush_ms = clock_ms()  # when a flush last moved the recovery point (flush.ms counts from it)
        self._truncations = 0  # a flush on another thread does not move the recovery point past a truncation
        self.flush_due = False
        """Rolled since the last flush: the broker flushes it off the event loop (``LogManager.rolled_logs``)."""
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self.last_read_ms = 0  # the clock when a read last handed out slices of this log
        self._log_start_offset = log_start_offset
        self._high_watermark = high_watermark
        self._recovery_point = recovery_point
        self._closed = False
        # Told of every I/O error (the disk is full, failing or gone) before it becomes a
        # KAFKA_STORAGE_ERROR, so the log manager can take the whole directory offline.
        self.on_io_error: Callable[[OSError], None] | None = None
        # The lowest offset the log was truncated to since the cleaner last looked: its checkpoint
        # must not stay above records that were replaced (see LogCleanerService).
        self.truncated_to: int | None = None
        # The offset of the producer snapshot on disk that matches the state in memory (written or
        # loaded by this process): a close at that log end offset has nothing new to write.
        self._snapshot_at: int | None = None
        new_directory = not directory.exists()
        self._directory_unsynced = new_directory  # the log dir's entry for it, too
        directory.mkdir(parents=True, exist_ok=True)
        self.epochs = LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT)
        self.producer_state = ProducerStateManager()
        with self._io(f"loading {directory}"):
            self._load(recovery_point, log_start_offset, high_watermark, clean_shutdown, new_directory)

    @contextlib.contextmanager
    def _io(self, what: str) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            if self.on_io_error is not None:
                self.on_io_error(exc)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{what}: {exc}") from exc

    # ---- offsets ---------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self._high_watermark = min(max(offset, self._log_start_offset), self.log_end_offset)
        if self.producer_state.unreplicated:  # nothing to do (the hot path) unless a transaction ended
            self.producer_state.on_high_watermark(self._high_watermark)

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest transaction that is ongoing, or completed with its marker
        not yet below the high watermark, but not below the log start; None: no such transaction."""
        first = self.producer_state.first_unstable_offset
        return None if first is None else max(first, self._log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        """Kafka's ``UnifiedLog.lastStableOffset``: the first unstable offset when it is below the high
        watermark, else the high watermark. read_committed reads below it."""
        first = self.first_unstable_offset
        return first if first is not None and first < self._high_watermark else self._high_watermark

    def collect_aborted(self, fetch_offset: int, upper_bound: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of every aborted transaction overlapping ``[fetch_offset,
        upper_bound)``, as a read_committed fetch returns them (``transactions.collect_aborted``)."""
        return transactions.collect_aborted(self._segments, self._bases, fetch_offset, upper_bound)

    @property
    def recovery_point(self) -> int:
        return min(self._recovery_point, self.log_end_offset)

    @property
    def size_bytes(self) -> int:
        return sum(seg.size_bytes for seg in self._segments)

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def _active(self) -> LogSegment:
        return self._segments[-1]

    # ---- load and recovery -----------------------------------------------------------------------

    def _load(
        self, recovery_point: int, log_start_offset: int, high_watermark: int, clean: bool, new_directory: bool
    ) -> None:
        complete_interrupted_swaps(self.directory)  # before anything reads the segment files
        bases: list[int] = []
        for path in self.directory.iterdir():
            name = path.name
            if name.endswith(DELETED_SUFFIX) or name.endswith(TMP_SUFFIX):
                # Left over from a delete or an atomic write that a crash interrupted.
                path.unlink(missing_ok=True)
                continue
            base = parse_offset_name(name, LOG_SUFFIX)
            if base is not None:
                bases.append(base)
        bases.sort()
        segments = [LogSegment.open_existing(self.directory, b) for b in bases]
        # Without a clean shutdown, everything from the segment holding the recovery point on may
        # hold a torn tail; before it, data was fsynced and is trusted like after a clean shutdown.
        recover_from = len(segments) if clean else max(bisect_right(bases, recovery_point) - 1, 0)
        kept: list[LogSegment] = []
        recovered = False  # a segment was scanned batch by batch, re-deriving leader epochs
        state: ProducerStateManager | None = None  # as of the end of the segment recovered last
        for i, seg in enumerate(segments):
            cut = 0
            if i >= recover_from:
                cut, state, recovered = *recover_segment(self, seg, kept, state), True
            else:
                state = None
                try:
                    seg.load_and_check()
                except (IndexCorruptError, OSError, KafkaError) as exc:
                    log.warning("%s: rebuilding segment %d: %s", self.directory, seg.base_offset, exc)
                    cut, state, recovered = *recover_segment(self, seg, kept, None), True
            kept.append(seg)
            later = segments[i + 1 :]
            if cut or (later and later[0].base_offset < seg.next_offset):
                # A flaw inside a segment ends the log there: later segments cannot follow it.
                for dropped in later:
                    log.warning(
                        "%s: dropping segment %d after a torn tail", self.directory, dropped.base_offset
                    )
                    dropped.close()
                    for p in dropped.paths():
                        p.unlink(missing_ok=True)
                break
        self._segments = kept
        if not kept or log_start_offset > kept[-1].next_offset:
            # Nothing on disk, or everything below a log start offset that was already acknowledged.
            start = max(log_start_offset, kept[-1].next_offset if kept else 0)
            for seg in kept:
                seg.close()
                for p in seg.paths():
                    p.unlink(missing_ok=True)
            self._segments = [LogSegment.create(self.directory, start, new_directory=new_directory)]
            # Not fsynced now: creating 10,000 replicas at 3 fsyncs each kept a broker busy for
            # minutes. An empty log lost to an OS crash is recreated empty; flush syncs the
            # directories before the recovery point moves past anything written here.
            self._directory_unsynced = True
        self._bases = [s.base_offset for s in self._segments]
        for seg in self._segments:
            seg.roll_jitter_ms = self._random_jitter()
        active = self._active
        if active.size_bytes:
            first = active.read_header(0)
            active.rolling_base_ms = first.max_timestamp if first.max_timestamp >= 0 else self._clock_ms()
        self._log_start_offset = max(log_start_offset, self._segments[0].base_offset)
        leo = self.log_end_offset
        self.epochs.truncate_from_end(leo)
        self.epochs.truncate_from_start(self._log_start_offset)
        rebuild_producer_state(self, leo)
        if recovered:
            # What recovery re-derived must be on disk before the recovery point says LEO. The
            # truncations above alone wait for the next flush: they drop entries at or past the
            # log end (an epoch led without a write, the usual case after a leader election),
            # which a load drops again after a crash, and a durable write per partition made the
            # first restart of a broker with 10,000 partitions take seconds longer.
            self.epochs.sync()
        self._recovery_point = leo
        self.high_watermark = high_watermark
        for seg in self._segments[:-1]:
            seg.release_fd()  # checked (or recovered and fsynced); reopened by the first read

    # ---- appends ---------------------------------------------------------------------------------

    @staticmethod
    def _parse_batches(records: bytes | bytearray | memoryview,
                       max_batch_bytes: int | None = None) -> list[tuple[int, BatchHeader]]:
        """Every batch's header, each checked against ``max_batch_bytes`` before its CRC, in the
        order of Kafka's UnifiedLog.analyzeAndValidateRecords."""
        batches = []
        try:
            for pos, header in iter_batches(records, verify_crc=False):
                if max_batch_bytes is not None and header.size > max_batch_bytes:
                    raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                                     f"The record batch size is {header.size} bytes which exceeds the maximum "
                                     f"configured value of {max_batch_bytes}.")
                if not crc_ok(records, pos, header):
                    raise CorruptRecordError(f"record batch CRC mismatch at byte {pos}")
                batches.append((pos, header))
        except CorruptRecordError as exc:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
        if not batches:
            raise KafkaError(ErrorCode.INVALID_RECORD, "produce request has no record batches")
        return batches

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int,
        now_ms: int,
        *,
        max_batch_bytes: int | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> AppendResult:
        """Validate, convert as the topic's configs ask (``validator.py``), assign offsets in place
        (stamping ``leader_epoch``), write. See the module rules. ``max_batch_bytes``
        (max.message.bytes) is checked on a client's batches as they come, and again on batches the
        topic's compression.type rebuilt, as Kafka's UnifiedLog.append does after a recompression.
        ``origin``: a client's batches, or a coordinator's (transaction markers and offset commits:
        see ``producers.py``)."""
        self._check_open()
        if isinstance(records, bytes) or (isinstance(records, memoryview) and records.readonly):
            records = bytearray(records)  # offsets and epochs are written into the batches
        batches = self._parse_batches(records, max_batch_bytes if origin is AppendOrigin.CLIENT else None)
        for pos, header in batches:
            if header.record_count == 0 or header.record_count != header.last_offset_delta + 1:
                raise KafkaError(
                    ErrorCode.INVALID_RECORD,
                    f"batch at byte {pos}: record count {header.record_count} disagrees with last offset delta {header.last_offset_delta}",
                )
            if origin is AppendOrigin.CLIENT:
                transactions.check_client_batch(self, header)
        checked = validate_and_convert(records, batches, self.config, now_ms, f"{self.topic}-{self.partition}")
        records, batches = checked.records, checked.batches
        if checked.rebuilt and max_batch_bytes is not None:
            for _, header in batches:
                if header.size > max_batch_bytes:
                    raise KafkaError(
                        ErrorCode.MESSAGE_TOO_LARGE,
                        f"Message batch size is {header.size} bytes in append to partition {self.topic}-{self.partition} "
                        f"which exceeds the maximum configured size of {max_batch_bytes}.",
                    )
        leo = self.log_end_offset
        next_offset = leo
        staged: dict[int, ProducerEntry] = {}
        completed: list[CompletedTxn] = []
        plan: list[tuple[int, int, int, int, int]] = []
        max_ts = -1
        for pos, header in batches:
            base, last = next_offset, next_offset + header.last_offset_delta
            if tracks_producer(header):
                marker = transactions.leader_marker(records, pos, header) if header.is_control else None
                duplicate = self.producer_state.stage(
                    header, staged, base, last, completed, origin=origin, marker=marker
                )
                if duplicate is not None:
                    return AppendResult(
                        duplicate.first_offset, duplicate.last_offset, duplicate.max_timestamp, duplicate=True,
                        log_append_time=duplicate.max_timestamp,
                    )
            plan.append((pos, header.size, base, last, header.max_timestamp))
            max_ts = max(max_ts, header.max_timestamp)
            next_offset = last + 1
        assign_offsets(records, batches, leo, leader_epoch)
        self._write(records, plan, next_offset - 1, now_ms)
        self.producer_state.commit(staged)
        if completed:
            transactions.index_completed(self, self._active, self.producer_state, completed)
        self.epochs.assign(leader_epoch, leo)
        return AppendResult(leo, next_offset - 1, max_ts, log_append_time=checked.log_append_time_ms)

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                      leader_epoch: int, now_ms: int) -> AppendResult:
        """Append one end-transaction marker as the coordinator writes it (WriteTxnMarkers)."""
        marker = build_marker_batch(producer_id, producer_epoch, commit, coordinator_epoch, now_ms)
        return self.append_as_leader(marker, leader_epoch, now_ms, origin=AppendOrigin.COORDINATOR)

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendResult:
        """Append batches that already carry offsets and leader epochs, at or after the LEO.

        A batch may start after the LEO: the leader's cleaner removes records of a compacted
        topic, so a follower copying a cleaned part sees the same gaps (Kafka allows them too).
        """
        self._check_open()
        batches = self._parse_batches(records)
        expected = self.log_end_offset
        first = expected
        plan: list[tuple[int, int, int, int, int]] = []
        max_ts = -1
        for pos, header in batches:
            if header.base_offset < expected:
                raise KafkaError(
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                    f"replicated batch has base offset {header.base_offset}, below the log end {expected}",
                )
            plan.append((pos, header.size, header.base_offset, header.last_offset, header.max_timestamp))
            max_ts = max(max_ts, header.max_timestamp)
            expected = header.last_offset + 1
        self._write(records, plan, expected - 1, self._clock_ms())
        transactions.replay_follower_batches(self, records, batches)
        for _, header in batches:
            self.epochs.assign(header.partition_leader_epoch, header.base_offset)
        return AppendResult(first, expected - 1, max_ts)

    def _write(
        self,
        data: bytes | bytearray | memoryview,
        plan: list[tuple[int, int, int, int, int]],
        last_offset: int,
        now_ms: int,
    ) -> None:
        with self._io(f"appending to {self.directory}"):
            seg = self._active
            if self._should_roll(seg, len(data), last_offset, now_ms):
                seg = self._roll(now_ms)
            seg.append(data, plan, self.config.index_interval_bytes)
        if seg.rolling_base_ms is None:
            seg.rolling_base_ms = now_ms

    def _should_roll(self, seg: LogSegment, size: int, last_offset: int, now_ms: int) -> bool:
        """Kafka's LogSegment.shouldRoll: the segment would overflow segment.bytes, is older than
        segment.ms (or max.compaction.lag.ms) less its roll jitter, has a full offset or time index
        (segment.index.bytes), or cannot hold the offsets as int32 deltas. An empty segment never
        rolls (Kafka rolls it into an empty one at the same offset: the same thing)."""
        if seg.size_bytes == 0:
            return False
        cfg = self.config
        if seg.size_bytes + size > cfg.segment_bytes:
            return True
        if seg.rolling_base_ms is not None and now_ms - seg.rolling_base_ms > cfg.max_segment_ms - seg.roll_jitter_ms:
            return True
        if len(seg.offset_index) >= cfg.max_offset_index_entries or len(seg.time_index) >= cfg.max_time_index_entries:
            return True
        return last_offset - seg.base_offset > MAX_RELATIVE_OFFSET

    def _random_jitter(self) -> int:
        """A new segment's roll jitter (segment.jitter.ms), drawn once per segment as Kafka does."""
        return self.config.random_segment_jitter(self._rng.getrandbits(31))

    def roll(self) -> LogSegment:
        """Start a new active segment at the LEO (no-op if the active one is empty)."""
        with self._io(f"rolling {self.directory}"):
            return self._roll(self._clock_ms())

    def _roll(self, now_ms: int) -> LogSegment:
        """A new active segment. Nothing is fsynced here: a roll happens inside an append, and the
        old segment may hold a gigabyte the OS has not written back yet. ``flush_due`` asks the
        broker to flush off the event loop (Kafka schedules the same flush on its scheduler
        thread); until then the recovery point stays where it was, so a crash in between only
        makes recovery read more."""
        old = self._active
        if old.size_bytes == 0:
            return old
        new_base = old.next_offset
        old.finalize_time_index()
        # Checked by CRC on load: a snapshot an OS crash left torn is skipped for an older one.
        write_snapshot(self, new_base, durable=False)
        new = LogSegment.create(self.directory, new_base)
        new.roll_jitter_ms = self._random_jitter()
        self._directory_unsynced = True
        old.last_read_ms = now_ms  # consumers close behind the end read it next; keep it open a while
        with self._lock:
            self._segments.append(new)
            self._bases.append(new_base)
        self.flush_due = True
        return new

    # ---- reads -----------------------------------------------------------------------------------

    def read(
        self, fetch_offset: int, max_bytes: int, max_offset: int | None = None, min_one_batch: bool = True
    ) -> ReadResult:
        """Whole batches from the one holding ``fetch_offset``, as file slices. See the module rules."""
        leo = self._segments[-1].next_offset
        if fetch_offset < self._log_start_offset or fetch_offset > leo:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {fetch_offset} is outside [{self._log_start_offset}, {leo}] of {self.topic}-{self.partition}",
            )
        limit = leo if max_offset is None or max_offset > leo else max_offset
        if fetch_offset >= limit:
            return _EMPTY_READ
        segments = self._segments
        i = bisect_right(self._bases, fetch_offset) - 1
        # The descriptors handed out must outlive the slices (see SEND_GRACE_MS).
        now_ms = self.last_read_ms = self._clock_ms()
        for seg in segments[i:]:
            seg.last_read_ms = now_ms
        offset = fetch_offset
        slices: list[FileSlice] = []
        total = 0
        with self._io(f"reading {self.directory}"):
            while i < len(segments):
                seg = segments[i]
                found = seg.locate(offset)
                if found is None:
                    i += 1
                    continue
                start, base, first_size, _ = found
                if base >= limit:
                    break
                end = seg.end_position_before(limit)
                budget = max_bytes - total
                if end - start > budget:
                    cut = seg.boundary_at_or_before(start + budget, start) if budget > 0 else start
                    if cut == start and min_one_batch and not slices:
                        cut = start + first_size
                    if cut > start:
                        slices.append(FileSlice(seg.fd, start, cut - start))
                        total += cut - start
                    break
                slices.append(FileSlice(seg.fd, start, end - start))
                total += end - start
                if end < seg.size_bytes:
                    break
                offset = seg.next_offset
                i += 1
        return ReadResult(slices, total) if slices else _EMPTY_READ

    # ---- timestamps (timestamps.py) --------------------------------------------------------------

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``timestamp_ms``, or None."""
        with self._io(f"reading {self.directory}"):
            return timestamps.offset_for_timestamp(self._segments, self._log_start_offset, timestamp_ms)

    def legacy_offsets_before(self, timestamp_ms: int, max_num_offsets: int, now_ms: int) -> list[int]:
        """ListOffsets v0's answer (see ``timestamps.legacy_offsets_before``)."""
        with self._io(f"reading {self.directory}"):
            return timestamps.legacy_offsets_before(
                self._segments, self._log_start_offset, timestamp_ms, max_num_offsets, now_ms
            )

    def max_timestamp_offset(self) -> tuple[int, int]:
        """(offset, timestamp) of the first record with the largest timestamp; (-1, -1) if none."""
        with self._io(f"reading {self.directory}"):
            return timestamps.max_timestamp_offset(self._segments)

    # ---- leader epochs ---------------------------------------------------------------------------

    def latest_epoch(self) -> int | None:
        return self.epochs.latest_epoch()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.epochs.end_offset_for(epoch, self.log_end_offset)

    # ---- truncation, retention, deletion (retention.py) -------------------------------------------

    def replace_segments(
        self,
        old: list[LogSegment],
        old_sizes: list[int],
        base_offset: int,
        on_step: Callable[[str], None] | None = None,
        *,
        sync_dir: bool = True,
    ) -> bool:
        """Put the cleaned segment in ``<base_offset>.*.swap`` in place of ``old`` (see
        ``retention.replace_segments``); False, and the swap files deleted, if ``old`` changed."""
        return retention.replace_segments(self, old, old_sizes, base_offset, on_step, sync_dir=sync_dir)

    def truncate_to(self, offset: int) -> None:
        """Drop every record at ``offset`` or later (a follower's divergent tail)."""
        retention.truncate_to(self, offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop everything and start an empty log at ``offset``."""
        retention.truncate_fully_and_start_at(self, offset)

    def enforce_retention(self, now_ms: int) -> int:
        """Delete whole old segments by retention.ms and retention.bytes and below the log start."""
        return retention.enforce_retention(self, now_ms)

    def delete_records_before(self, offset: int) -> None:
        """Raise the log start offset (DeleteRecords); whole segments below it are deleted."""
        retention.delete_records_before(self, offset)


    def delete_expired_files(self, now_ms: int) -> int:
        """Close and unlink segments retired at least file.delete.delay.ms ago; returns how many."""
        due = self.take_expired_files(now_ms)
        for removal in due:
            removal()
        return len(due)

    def take_expired_files(self, now_ms: int) -> list[Callable[[], None]]:
        """The segments retired at least file.delete.delay.ms ago, no longer this log's: each as the
        closing and unlinking of its files, for the caller to run (on a worker thread, in the broker)."""
        if not self._pending_deletes or self._pending_deletes[0][0] > now_ms:
            return []
        due = [(t, s) for t, s in self._pending_deletes if t <= now_ms and now_ms - s.last_read_ms >= SEND_GRACE_MS]
        gone = {id(s) for _t, s in due}
        self._pending_deletes = [(t, s) for t, s in self._pending_deletes if id(s) not in gone]
        return [functools.partial(_remove_segment, seg) for _, seg in due]

    # ---- durability ------------------------------------------------------------------------------

    @property
    def unflushed_messages(self) -> int:
        """Offsets written since the recovery point (Kafka's LocalLog.unflushedMessages)."""
        return self.log_end_offset - self.recovery_point

    @property
    def flush_by_messages_due(self) -> bool:
        """flush.messages: as many messages as that are not fsynced. Kafka's UnifiedLog.append then
        flushes before it returns; the broker fsyncs on a worker thread before it answers
        (``ReplicaManager.append``), as no fsync runs on the event loop."""
        return self.unflushed_messages >= self.config.flush_messages

    def flush_by_time_due(self, now_ms: int) -> bool:
        """flush.ms: something is unflushed and the last flush is at least that old (Kafka's
        LogManager.flushDirtyLogs; the broker's housekeeping asks every second)."""
        return now_ms - self.last_flush_ms >= self.config.flush_ms and self.unflushed_messages > 0

    def flush_through(self, offset: int) -> None:
        """Flush unless the recovery point is at ``offset`` already (a flush that ran meanwhile covered
        it): many appends asking for a flush at once cost one fsync. Any thread."""
        with self._flush_lock:
            if self.recovery_point >= offset:
                return
            self._flush()

    def flush(self) -> None:
        """fsync everything past the recovery point, then move the recovery point to the log end
        offset seen at the start. Safe to call from another thread: a truncation meanwhile (on the
        event loop) leaves the recovery point where the truncation put it. One flush runs at a time."""
        with self._flush_lock:
            self._flush()

    def _flush(self) -> None:
        self.flush_due = False
        with self._lock:
            if self._closed:
                return
            target = self._segments[-1].next_offset
            truncations = self._truncations
            i = max(bisect_right(self._bases, self._recovery_point) - 1, 0)
            fds = [os.dup(fd) for seg in self._segments[i:] for fd in seg.fds_to_sync()]
            recovery_point = self._recovery_point
        try:
            with self._io(f"flushing {self.directory}"):
                for fd in fds:
                    os.fsync(fd)
                for offset in snapshot_offsets(self.directory):
                    if offset > recovery_point:  # written at a roll without an fsync
                        with contextlib.suppress(FileNotFoundError):
                            fsync_file(snapshot_path(self.directory, offset))
                if self._directory_unsynced:
                    self._directory_unsynced = False
                    fsync_dir(self.directory)
                    fsync_dir(self.directory.parent)
                self.epochs.sync()
                with self._lock:
                    # Under the lock: a segment retired meanwhile has renamed files and no longer counts.
                    for seg in self._segments[i:]:
                        seg.sync_indexes()
        finally:
            for fd in fds:
                os.close(fd)
        with self._lock:
            if self._truncations == truncations:
                if target > self._recovery_point:
                    self.last_flush_ms = self._clock_ms()
                self._recovery_point = max(self._recovery_point, target)

    @contextlib.contextmanager
    def flushes_held(self) -> Iterator[bool]:
        """Keep flushes on other threads out (they use the paths outside ``_lock``) without waiting
        for one: yields False, holding nothing, while a flush runs. ``rename_dir`` needs it held."""
        held = self._flush_lock.acquire(blocking=False)
        try:
            yield held
        finally:
            if held:
                self._flush_lock.release()

    def rename_dir(self, target: Path) -> None:
        """Rename this log's directory to ``target`` (in its log dir or another on the same file
        system), every file staying open: Kafka's ``UnifiedLog.renameDir``, used by the swap that
        ends a move between log dirs. Only inside ``flushes_held()``, so the event loop never
        waits for an fsync: the caller tries again when a flush was running."""
        with self._lock, self._io(f"renaming {self.directory} to {target.name}"):
            self.directory.rename(target)
            self.directory = target
            self.epochs.path = target / LEADER_EPOCH_CHECKPOINT
            for seg in self._segments:
                seg.relocate(target)
            for _due, seg in self._pending_deletes:
                seg.relocate(target)

    def release_idle_files(self, now_ms: int) -> int:
        """Close the ``.log`` descriptors of segments behind the active one that nobody read lately.

        A ``FileSlice`` handed out by ``read`` uses the descriptor after ``read`` returns, so one is
        closed only ``max(file.delete.delay.ms, IDLE_FILE_MS)`` after its last read, the same grace
        a deleted segment gets. The next read opens it again. Returns how many were closed.
        """
        if len(self._segments) == 1:
            return 0  # the usual case, and the broker asks every second for each of its logs
        idle_ms = max(self.config.file_delete_delay_ms, IDLE_FILE_MS)
        closed = 0
        with self._lock:
            for seg in self._segments[:-1]:
                if seg.has_fd and now_ms - seg.last_read_ms >= idle_ms:
                    seg.release_fd()
                    closed += 1
        return closed

    def close(self) -> None:
        if self._closed:
            return
        with self._io(f"closing {self.directory}"):
            active = self._active
            active.finalize_time_index()
            self.flush()
            if self._snapshot_at != self.log_end_offset:
                # An idle partition's state is already on disk as of its log end. Rewriting it is
                # a durable write, about 2 ms here: 20 s of shutdown for 10,000 partitions. Kafka
                # skips it too.
                write_snapshot(self, self.log_end_offset)
            with self._lock:
                self._closed = True
                for seg in self._segments:
                    seg.close()
            for _, seg in self._pending_deletes:
                seg.close()
                for path in seg.paths():
                    path.unlink(missing_ok=True)
            self._pending_deletes = []

    def close_without_flush(self) -> None:
        """Release fds only (the directory is being deleted)."""
        with self._lock:
            self._closed = True
            for seg in self._segments:
                seg.close()
        for _, seg in self._pending_deletes:
            seg.close()
        self._pending_deletes = []

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"log {self.topic}-{self.partition} is closed")

    def validate_state(self) -> None:
        """Assert the module's invariants (tests call it after every step)."""
        segs = self._segments
        assert segs, "a log always has an active segment"
        assert self._bases == [s.base_offset for s in segs]
        for a, b in itertools.pairwise(segs):
            # A gap only where the cleaner removed records at a segment's end.
            assert a.next_offset <= b.base_offset, f"overlap between segments {a.base_offset} and {b.base_offset}"
        for seg in segs:
            seg.validate()
        assert segs[0].base_offset <= self._log_start_offset <= self._high_watermark <= self.log_end_offset
        self.producer_state.validate_state(self._high_watermark)

    def __repr__(self) -> str:
        return f"PartitionLog({self.topic}-{self.partition}, start={self._log_start_offset}, end={self.log_end_offset})"
