"""The log cleaner: keeps the latest record per key in logs with ``cleanup.policy`` holding ``compact``.

Kafka's algorithm (``LogCleaner``), in three parts:

Choosing (``cleanable_range``, ``choose``): a log's *clean* part runs from its start to the
cleaner's checkpoint (``cleaner-offset-checkpoint`` in its log dir); its *dirty* part from there
to the first segment that may not be cleaned yet: the active one, one that reaches past the high
watermark, or one with a record newer than ``min.compaction.lag.ms``. The cleaner takes the log
with the highest dirty ratio (dirty bytes / all bytes up to that point) above
``min.cleanable.dirty.ratio``, or one whose oldest dirty record is older than
``max.compaction.lag.ms``.

Cleaning (pure functions over batches: ``OffsetMap``, ``map_batch``, ``filter_batch``):
1. build a map key -> latest offset over the dirty part, segment by segment, stopping after the
   segment that fills ``log.cleaner.dedupe.buffer.size`` (the rest waits for the next run);
2. rewrite every segment from the log start to the end of the mapped part, in groups of at most
   ``segment.bytes``, keeping a record when no later offset for its key is in the map. A tombstone
   (null value) is kept as long as its segment's largest timestamp is newer than the *delete
   horizon*: the largest timestamp of the clean part minus ``delete.retention.ms``, so a consumer
   that reads the log within ``delete.retention.ms`` of it becoming clean still sees the delete.
   A record without a key (written before the topic was compacted) is dropped.
   Batches keep their header (offsets, timestamps, producer id, epoch, sequence); an idempotent
   producer's last batch stays even when empty so its sequence state survives a reload; and the
   last batch of a group stays (empty) when the group would otherwise be empty (see ``swap.py``)
   or when the group reaches the end of the cleanable part, so the log never ends in a gap.
3. record the end of the mapped part as the log's new checkpoint.

Transactions: unlike Kafka, which drops aborted transactions' records and then their markers, this
cleaner keeps every control batch and every transactional batch whole, and never maps a
transactional record (an aborted one must not hide an older committed value). It cleans only below
the last stable offset, as Kafka does. A segment with aborted transactions starts a new group, so
the cleaned segment at its base offset keeps its transaction index file (``retention.replace_segments``).

Files (``write_group``, ``PartitionLog.replace_segments``, ``swap.py``): each group is written as
``.cleaned`` files, fsynced, renamed ``.swap`` (the commit point), then swapped in by the log
(``replace_segments``, on the event loop). The cleaner reads the old segments through descriptors
of its own, opened when the plan is made, so the log may close or rename them meanwhile.

Threads: ``plan_clean`` and ``PartitionLog.replace_segments`` run where the log's other methods
run (the event loop); ``build_offset_map`` and ``write_group`` touch only the plan's descriptors
and new files, and run on the cleaner's thread (``headwater/server/cleaner.py``).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.records.batch import HEADER_SIZE, BatchHeader, CorruptRecordError, parse_header
from headwater.records.records import batch_records, iter_records, rebuild_batch
from headwater.storage.checkpoint import read_offsets, write_offsets
from headwater.storage.config import LONG_MAX
from headwater.storage.files import fsync_dir, pread_upto
from headwater.storage.log import PartitionLog
from headwater.storage.producers import tracks_sequence
from headwater.storage.segment import MAX_RELATIVE_OFFSET, LogSegment
from headwater.storage.swap import CLEANED_SUFFIX, SWAP_SUFFIX, segment_files

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
DEFAULT_DEDUPE_BUFFER_BYTES = 128 << 20  # log.cleaner.dedupe.buffer.size, Kafka's default
# What one map entry costs beyond its key's bytes: a dict slot, a bytes object and an int object.
MAP_ENTRY_OVERHEAD_BYTES = 100
READ_CHUNK_BYTES = 4 << 20
# The cleaner's thread lets go of the GIL after this many records. Otherwise Python hands the GIL to
# the waiting event loop only every 5 ms (sys.getswitchinterval), and on a busy machine the loop then
# also waits for a CPU. On a shared 2-core machine (load average 9 to 11) the 99th percentile lateness
# of a 1 ms timer on the loop during a clean was 37-160 ms without this and 4.5-27 ms with it, idle
# 2-5 ms (benchmarks/cleaner_throughput.py, loop_stall_ms; noisy, several runs each).
YIELD_EVERY_RECORDS = 256
NO_HORIZON_MS = -(1 << 63)  # nothing is clean yet: every tombstone stays


class CleanerAborted(Exception):
    """The broker is stopping, or the log went away, while its cleaning was under way."""


# ---- the pure part: map and keep -------------------------------------------------------------


class OffsetMap:
    """key -> the latest offset seen for it, with a memory budget like Kafka's dedupe buffer."""

    def __init__(self, capacity_bytes: int = DEFAULT_DEDUPE_BUFFER_BYTES) -> None:
        self.capacity_bytes = capacity_bytes
        self.offsets: dict[bytes, int] = {}
        self.used_bytes = 0
        self.records = 0

    def put(self, key: bytes, offset: int) -> None:
        if key not in self.offsets:
            self.used_bytes += len(key) + MAP_ENTRY_OVERHEAD_BYTES
        self.offsets[key] = offset  # offsets arrive in increasing order: the last one wins
        self.records += 1

    def latest(self, key: bytes) -> int | None:
        return self.offsets.get(key)

    @property
    def full(self) -> bool:
        return self.used_bytes >= self.capacity_bytes

    def __len__(self) -> int:
        return len(self.offsets)


def map_batch(offset_map: OffsetMap, batch: bytes | memoryview, header: BatchHeader, from_offset: int = 0) -> None:
    """Put every keyed record at ``from_offset`` or later of one batch into the map."""
    if header.is_control or header.is_transactional or header.record_count == 0 or header.last_offset < from_offset:
        return
    blob = batch_records(batch, header)
    base = header.base_offset
    for rec in iter_records(blob, header.record_count):
        offset = base + rec.offset_delta
        if rec.key is not None and offset >= from_offset:
            offset_map.put(rec.key, offset)


def keep_record(key: bytes | None, has_value: bool, offset: int, offset_map: OffsetMap, retain_tombstones: bool) -> bool:
    """Kafka's rule: the latest record for its key (or a key the map never saw), minus old tombstones."""
    if key is None:
        return False  # a compacted log has no use for it, and produce no longer accepts it
    latest = offset_map.latest(key)
    if latest is not None and offset < latest:
        return False
    return has_value or retain_tombstones


@dataclass(frozen=True)
class FilterResult:
    data: bytes | None  # the batch to write (the input itself when everything stayed); None: drop it
    kept: int
    dropped: int


def filter_batch(
    batch: bytes | memoryview,
    header: BatchHeader,
    offset_map: OffsetMap,
    *,
    retain_tombstones: bool,
    retain_empty: bool,
) -> FilterResult:
    """The batch with only the records ``keep_record`` keeps; see the module doc for ``retain_empty``."""
    if header.is_control or header.is_transactional:
        return FilterResult(bytes(batch), header.record_count, 0)  # markers and transactions stay whole
    blob = batch_records(batch, header)
    kept: list[tuple[int, int]] = []
    total = 0
    base = header.base_offset
    for rec in iter_records(blob, header.record_count):
        total += 1
        if keep_record(rec.key, rec.has_value, base + rec.offset_delta, offset_map, retain_tombstones):
            kept.append((rec.start, rec.end))
    if len(kept) == total and total:
        return FilterResult(bytes(batch), total, 0)
    if not kept:
        return FilterResult(rebuild_batch(batch, header, b"", 0) if retain_empty else None, 0, total)
    records = b"".join(blob[s:e] for s, e in _merge_runs(kept))
    return FilterResult(rebuild_batch(batch, header, records, len(kept)), len(kept), total - len(kept))


def _merge_runs(ranges: list[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """Adjacent byte ranges joined, so a mostly-kept batch is copied in a few slices."""
    start, end = ranges[0]
    for s, e in ranges[1:]:
        if s == end:
            end = e
        else:
            yield start, end
            start, end = s, e
    yield start, end


# ---- choosing a log --------------------------------------------------------------------------


@dataclass(frozen=True)
class Cleanable:
    first_dirty: int  # the checkpoint, clamped to the log
    end_offset: int  # first offset that may not be cleaned now (a segment's base offset)
    clean_bytes: int
    dirty_bytes: int
    overdue: bool  # the oldest dirty record is older than max.compaction.lag.ms

    @property
    def ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def first_dirty_offset(plog: PartitionLog, checkpoint: int | None) -> int:
    """Kafka's rule: a checkpoint below the log start, past the end or missing means "from the start"."""
    start = plog.log_start_offset
    if checkpoint is None or checkpoint < start or checkpoint > plog.log_end_offset:
        return start
    return checkpoint


def cleanable_range(plog: PartitionLog, checkpoint: int | None, now_ms: int) -> Cleanable:
    """How much of ``plog`` is clean and how much may be cleaned now (whole segments)."""
    cfg = plog.config
    segs = plog.segments
    first_dirty = first_dirty_offset(plog, checkpoint)
    end = segs[-1].base_offset
    hw = plog.last_stable_offset  # nothing past an undecided transaction (Kafka's cleanableOffsets)
    for i, seg in enumerate(segs[:-1]):
        seg_end = segs[i + 1].base_offset
        too_new = cfg.min_compaction_lag_ms > 0 and seg.max_timestamp_ms > now_ms - cfg.min_compaction_lag_ms
        if seg_end > hw or too_new:
            end = seg.base_offset
            break
    end = max(end, first_dirty)
    clean = dirty = 0
    first_dirty_seg: LogSegment | None = None
    for i, seg in enumerate(segs[:-1]):
        seg_end = segs[i + 1].base_offset
        if seg_end <= first_dirty:
            clean += seg.size_bytes
        elif seg.base_offset < end:
            dirty += seg.size_bytes
            if first_dirty_seg is None:
                first_dirty_seg = seg
    overdue = False
    if first_dirty_seg is not None and cfg.max_compaction_lag_ms < LONG_MAX and first_dirty_seg.size_bytes:
        first_ts = first_dirty_seg.read_header(0).base_timestamp
        overdue = first_ts >= 0 and now_ms - first_ts > cfg.max_compaction_lag_ms
    return Cleanable(first_dirty, end, clean, dirty, overdue)


def choose(candidates: list[tuple[PartitionLog, Cleanable]]) -> tuple[PartitionLog, Cleanable] | None:
    """The log with the highest dirty ratio among those above their threshold or overdue."""
    eligible = [
        (plog, c)
        for plog, c in candidates
        if c.dirty_bytes > 0 and (c.ratio > plog.config.min_cleanable_dirty_ratio or c.overdue)
    ]
    if not eligible:
        return None
    return max(eligible, key=lambda pc: pc[1].ratio)


# ---- the plan and the file work --------------------------------------------------------------


@dataclass
class SegmentRef:
    """An old segment as the plan saw it, with a descriptor of the cleaner's own."""

    segment: LogSegment
    base_offset: int
    end_offset: int  # the next segment's base offset
    size_bytes: int
    max_timestamp_ms: int
    fd: int
    has_aborted: bool = False  # its transaction index is not empty: it starts a group


@dataclass
class CleanStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_kept: int = 0
    records_dropped: int = 0
    segments_replaced: int = 0
    groups_refused: int = 0  # the log changed under a group (retention, truncation): not swapped
    duration_s: float = 0.0


@dataclass
class CleanPlan:
    log: PartitionLog
    directory: Path
    first_dirty: int
    end_offset: int
    segments: list[SegmentRef]  # from the log's first segment up to end_offset
    delete_horizon_ms: int
    producer_last_offsets: dict[int, int]  # producer id -> last offset of its last batch
    segment_bytes: int
    index_interval_bytes: int
    map_capacity_bytes: int
    abort: threading.Event = field(default_factory=threading.Event)
    stats: CleanStats = field(default_factory=CleanStats)

    def close(self) -> None:
        for ref in self.segments:
            with contextlib.suppress(OSError):
                os.close(ref.fd)
        self.segments = []

    def check_abort(self) -> None:
        if self.abort.is_set():
            raise CleanerAborted(f"cleaning of {self.directory} was stopped")


def plan_clean(
    plog: PartitionLog, cleanable: Cleanable, map_capacity_bytes: int = DEFAULT_DEDUPE_BUFFER_BYTES
) -> CleanPlan | None:
    """Take what the cleaner needs from the log, on the log's thread; None when nothing is dirty."""
    segs = plog.segments
    refs: list[SegmentRef] = []
    clean_max_ts = NO_HORIZON_MS
    try:
        for i, seg in enumerate(segs[:-1]):
            if seg.base_offset >= cleanable.end_offset:
                break
            seg_end = segs[i + 1].base_offset
            if seg_end <= cleanable.first_dirty:
                clean_max_ts = max(clean_max_ts, seg.max_timestamp_ms)
            fd = os.open(seg.log_path, os.O_RDONLY)
            refs.append(SegmentRef(seg, seg.base_offset, seg_end, seg.size_bytes, seg.max_timestamp_ms, fd,
                                   len(seg.txn_index) > 0))
    except OSError as exc:
        for ref in refs:
            os.close(ref.fd)
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"planning a clean of {plog.directory}: {exc}") from exc
    if not any(r.end_offset > cleanable.first_dirty for r in refs):
        for ref in refs:
            os.close(ref.fd)
        return None
    horizon = NO_HORIZON_MS
    if clean_max_ts != NO_HORIZON_MS:
        horizon = clean_max_ts - plog.config.delete_retention_ms
    producers = {
        pid: entry.batches[-1].last_offset
        for pid, entry in plog.producer_state.producers.items()
        if entry.batches
    }
    return CleanPlan(
        log=plog,
        directory=plog.directory,
        first_dirty=cleanable.first_dirty,
        end_offset=cleanable.end_offset,
        segments=refs,
        delete_horizon_ms=horizon,
        producer_last_offsets=producers,
        segment_bytes=plog.config.segment_bytes,
        index_interval_bytes=plog.config.index_interval_bytes,
        map_capacity_bytes=map_capacity_bytes,
    )


def plan_still_valid(plan: CleanPlan) -> bool:
    """Whether the log still holds the planned segments as they were (retention, truncation or a
    close may have changed it while the cleaner read them)."""
    plog = plan.log
    if plog.closed:
        return False
    current = {id(s): s.size_bytes for s in plog.segments[:-1]}
    return all(current.get(id(r.segment)) == r.size_bytes for r in plan.segments)


def iter_segment_batches(plan: CleanPlan, ref: SegmentRef) -> Iterator[tuple[memoryview, BatchHeader]]:
    """Every batch of an old segment, read in large chunks through the plan's descriptor."""
    pos = 0
    records = 0
    while pos < ref.size_bytes:
        plan.check_abort()
        buf = pread_upto(ref.fd, min(READ_CHUNK_BYTES, ref.size_bytes - pos), pos)
        if not buf:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"segment {ref.base_offset} of {plan.directory} shrank")
        view = memoryview(buf)
        rel = 0
        while rel < len(buf):
            if len(buf) - rel < HEADER_SIZE:
                break
            try:
                header = parse_header(view, rel)
            except CorruptRecordError as exc:
                raise KafkaError(
                    ErrorCode.KAFKA_STORAGE_ERROR, f"segment {ref.base_offset} of {plan.directory}: {exc}"
                ) from None
            if rel + header.size > len(buf):
                if rel == 0:  # a batch larger than a chunk: read it whole
                    whole = pread_upto(ref.fd, header.size, pos)
                    if len(whole) < header.size:
                        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"torn batch in segment {ref.base_offset}")
                    yield memoryview(whole), header
                    rel = header.size
                break
            yield view[rel : rel + header.size], header
            rel += header.size
            records += header.record_count
            if records >= YIELD_EVERY_RECORDS:
                records = 0
                time.sleep(0)  # let the event loop's thread take the GIL (see YIELD_EVERY_RECORDS)
        plan.stats.bytes_read += rel
        pos += rel


def build_offset_map(plan: CleanPlan) -> tuple[OffsetMap, int]:
    """Map the dirty part segment by segment; returns the map and the offset it covers up to."""
    offset_map = OffsetMap(plan.map_capacity_bytes)
    mapped_end = plan.first_dirty
    for ref in plan.segments:
        if ref.end_offset <= plan.first_dirty:
            continue
        try:
            for batch, header in iter_segment_batches(plan, ref):
                map_batch(offset_map, batch, header, plan.first_dirty)
        except CorruptRecordError as exc:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"segment {ref.base_offset} of {plan.directory}: {exc}") from exc
        mapped_end = ref.end_offset
        if offset_map.full:
            break  # whole segments only; the rest is dirty for the next run
    return offset_map, mapped_end


def group_segments(refs: list[SegmentRef], end_offset: int, max_bytes: int) -> list[list[SegmentRef]]:
    """Consecutive segments below ``end_offset`` in groups each at most ``max_bytes`` (or one segment)
    and spanning at most the offsets an index can address relative to the group's base; a segment
    with aborted transactions only ever starts a group (see the module doc)."""
    groups: list[list[SegmentRef]] = []
    current: list[SegmentRef] = []
    size = 0
    for ref in refs:
        if ref.base_offset >= end_offset:
            break
        fits = size + ref.size_bytes <= max_bytes and ref.end_offset - 1 - (current[0].base_offset if current else 0) <= MAX_RELATIVE_OFFSET
        if current and (not fits or ref.has_aborted):
            groups.append(current)
            current, size = [], 0
        current.append(ref)
        size += ref.size_bytes
    if current:
        groups.append(current)
    return groups


StepHook = Callable[[str], None]


def write_group(plan: CleanPlan, group: list[SegmentRef], offset_map: OffsetMap, on_step: StepHook | None = None) -> None:
    """Write the group's kept batches as ``<base>.*.cleaned``, fsync, and rename them ``.swap``."""
    step = on_step or (lambda _name: None)
    base = group[0].base_offset
    directory = plan.directory
    out = LogSegment.create(directory, base, CLEANED_SUFFIX)
    try:
        last: tuple[memoryview, BatchHeader] | None = None
        last_dropped = False
        pending: list[bytes] = []
        pending_plan: list[tuple[int, int, int, int, int]] = []
        pending_bytes = 0
        for ref in group:
            retain_tombstones = ref.max_timestamp_ms > plan.delete_horizon_ms
            for batch, header in iter_segment_batches(plan, ref):
                last = (batch, header)
                retain_empty = (
                    tracks_sequence(header)
                    and plan.producer_last_offsets.get(header.producer_id) == header.last_offset
                )
                try:
                    result = filter_batch(
                        batch, header, offset_map, retain_tombstones=retain_tombstones, retain_empty=retain_empty
                    )
                except CorruptRecordError as exc:
                    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"segment {ref.base_offset}: {exc}") from exc
                plan.stats.records_kept += result.kept
                plan.stats.records_dropped += result.dropped
                last_dropped = result.data is None
                if result.data is None:
                    continue
                pending_plan.append((pending_bytes, len(result.data), header.base_offset, header.last_offset, header.max_timestamp))
                pending.append(result.data)
                pending_bytes += len(result.data)
                if pending_bytes >= READ_CHUNK_BYTES:
                    out.append(b"".join(pending), pending_plan, plan.index_interval_bytes)
                    pending, pending_plan, pending_bytes = [], [], 0
        empty_output = out.size_bytes == 0 and not pending
        reaches_end = group[-1].end_offset >= plan.end_offset
        if last is not None and last_dropped and (empty_output or reaches_end):
            # Keep the last batch's header (empty) so that the segment still spans its range: an
            # empty segment could not be told apart in a swap, and a gap running up to an empty
            # active segment would leave a follower fetching inside it with nothing to read.
            batch, header = last
            empty = rebuild_batch(batch, header, b"", 0)
            pending_plan.append((0, len(empty), header.base_offset, header.last_offset, header.max_timestamp))
            pending.append(empty)
        if pending:
            out.append(b"".join(pending), pending_plan, plan.index_interval_bytes)
        out.finalize_time_index()
        step("cleaned-written")
        out.fsync()
        plan.stats.bytes_written += out.size_bytes
    finally:
        out.close()
    step("cleaned-synced")
    plan.check_abort()  # the rename to .swap commits the group: not once the broker asked to stop
    for path in segment_files(directory, base, CLEANED_SUFFIX):
        os.replace(path, path.with_name(path.name[: -len(CLEANED_SUFFIX)] + SWAP_SUFFIX))
        step(f"renamed-{path.name}")
    fsync_dir(directory)
    step("swap-synced")


def next_checkpoint(plan: CleanPlan, mapped_end: int) -> int:
    """Where the next run starts: the mapped end, or the old start again when a group was refused
    (its segments were not cleaned with this map, so the next map must cover these keys again)."""
    return plan.first_dirty if plan.stats.groups_refused else mapped_end


def discard_group_files(directory: Path, base: int) -> None:
    """Remove what ``write_group`` left for ``base`` after it failed or the swap was refused."""
    for suffix in (CLEANED_SUFFIX, SWAP_SUFFIX):
        for path in segment_files(directory, base, suffix):
            path.unlink(missing_ok=True)


def clean_log(
    plog: PartitionLog,
    cleanable: Cleanable,
    *,
    map_capacity_bytes: int = DEFAULT_DEDUPE_BUFFER_BYTES,
    on_step: StepHook | None = None,
) -> tuple[int, CleanStats] | None:
    """Clean one log in the calling thread (tests, benchmarks); returns (new checkpoint, stats).

    The broker runs the same steps, with the map and the file writing on its cleaner thread.
    """
    started = time.monotonic()
    plan = plan_clean(plog, cleanable, map_capacity_bytes)
    if plan is None:
        return None
    try:
        offset_map, mapped_end = build_offset_map(plan)
        for group in group_segments(plan.segments, mapped_end, plan.segment_bytes):
            base = group[0].base_offset
            try:
                write_group(plan, group, offset_map, on_step)
            except Exception:
                # The old segments are untouched until replace_segments. (A BaseException that is
                # not an Exception, like a test playing a crash, leaves the files for recovery.)
                discard_group_files(plan.directory, base)
                raise
            if plog.replace_segments([r.segment for r in group], [r.size_bytes for r in group], base, on_step):
                plan.stats.segments_replaced += len(group)
            else:
                plan.stats.groups_refused += 1
        plan.stats.duration_s = time.monotonic() - started
        return next_checkpoint(plan, mapped_end), plan.stats
    finally:
        plan.close()


# ---- the checkpoint file ---------------------------------------------------------------------


class CleanerCheckpoints:
    """``cleaner-offset-checkpoint`` of each log dir: where each log's dirty part starts."""

    def __init__(self, log_dirs: list[Path]) -> None:
        self._offsets: dict[Path, dict[tuple[str, int], int]] = {
            d: read_offsets(d / CLEANER_OFFSET_CHECKPOINT) for d in log_dirs
        }

    def get(self, log_dir: Path, topic: str, partition: int) -> int | None:
        return self._offsets.get(log_dir, {}).get((topic, partition))

    def forget(self, log_dir: Path, topic: str, partition: int) -> None:
        """Drop an entry in memory (its log is new); the next ``update`` writes the file without it."""
        self._offsets.get(log_dir, {}).pop((topic, partition), None)

    def lower(self, log_dir: Path, topic: str, partition: int, offset: int) -> None:
        """Move a checkpoint down in memory (after a truncation); the next ``update`` writes it."""
        entries = self._offsets.setdefault(log_dir, {})
        if entries.get((topic, partition), offset) >= offset:
            entries[(topic, partition)] = offset

    def update(self, log_dir: Path, topic: str, partition: int, offset: int, live: set[tuple[str, int]]) -> None:
        """Record ``offset`` and write the file, without logs that no longer exist (``live``)."""
        entries = self._offsets.setdefault(log_dir, {})
        entries[(topic, partition)] = offset
        for key in [k for k in entries if k not in live]:
            del entries[key]
        try:
            write_offsets(log_dir / CLEANER_OFFSET_CHECKPOINT, entries)
        except OSError as exc:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"writing the cleaner checkpoint in {log_dir}: {exc}") from exc
