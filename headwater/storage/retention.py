"""Segments leaving a partition log: retention (retention.ms, retention.bytes), DeleteRecords,
truncation, and the swap that puts a cleaned segment in place of the ones it replaces.

Plain functions over a ``PartitionLog`` (``log.py``), whose methods of the same names call them.

Rules:
- Retention and DeleteRecords remove whole segments from the start, only those wholly below the
  high watermark; when that is every segment, a roll first leaves an empty active one at the log
  end offset.
- A segment leaving the log is renamed ``*.deleted`` and queued on the log's pending deletes: its fds
  are closed and its files unlinked only ``file.delete.delay.ms`` later, and never within
  ``SEND_GRACE_MS`` of a read (``PartitionLog.delete_expired_files``), so a ``FileSlice`` handed to
  the server stays valid while it is being sent.
- A segment's transaction index leaves with it. A cleaned segment takes over the one of the old
  segment at its base offset: the cleaner keeps every transaction marker and starts a new group at
  each segment that has aborted transactions (``cleaner.group_segments``), so that index is the
  whole of the cleaned segment's.
- As everywhere in ``log.py``, every change to the segment list happens under the log's ``_lock``
  (a flush may run on another thread); a truncation counts itself in ``_truncations`` under it, so
  such a flush leaves the recovery point where the truncation put it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.storage.files import fsync_dir
from headwater.storage.index import IndexCorruptError
from headwater.storage.producer_snapshots import rebuild_producer_state, snapshot_offsets, snapshot_path
from headwater.storage.segment import LogSegment
from headwater.storage.swap import SWAP_SUFFIX, segment_files

if TYPE_CHECKING:
    from headwater.storage.log import PartitionLog

_log = logging.getLogger("headwater.storage.log")


def retire(log: PartitionLog, doomed: list[LogSegment]) -> None:
    """Take segments out of the log; their files go away after file.delete.delay.ms (see ``tick``)."""
    if not doomed:
        return
    due = log._clock_ms() + log.config.file_delete_delay_ms
    ids = {id(s) for s in doomed}
    with log._lock:
        log._segments = [s for s in log._segments if id(s) not in ids]
        log._bases = [s.base_offset for s in log._segments]
    for seg in doomed:
        seg.rename_deleted()
        log._pending_deletes.append((due, seg))
    fsync_dir(log.directory)


def advance_log_start(log: PartitionLog, offset: int) -> None:
    if offset > log._log_start_offset:
        log._log_start_offset = offset
        log._high_watermark = max(log._high_watermark, offset)
        log.epochs.truncate_from_start(offset)
        log.producer_state.on_high_watermark(log._high_watermark)


def delete_from_start(
    log: PartitionLog, should_delete: Callable[[LogSegment, LogSegment | None], bool], now_ms: int
) -> int:
    doomed: list[LogSegment] = []
    segs = log._segments
    leo = log.log_end_offset
    for i, seg in enumerate(segs):
        nxt = segs[i + 1] if i + 1 < len(segs) else None
        upper = nxt.base_offset if nxt is not None else leo
        if log._high_watermark < upper or (nxt is None and seg.size_bytes == 0):
            break
        if not should_delete(seg, nxt):
            break
        doomed.append(seg)
    if not doomed:
        return 0
    if len(doomed) == len(segs):
        log._roll(now_ms)  # the active segment expired too: keep an empty one at the LEO
    retire(log, doomed)
    advance_log_start(log, log._segments[0].base_offset)
    return len(doomed)


def enforce_retention(log: PartitionLog, now_ms: int) -> int:
    """Delete whole old segments by retention.ms and retention.bytes and below the log start."""
    log._check_open()
    cfg = log.config
    deleted = 0
    with log._io(f"retention in {log.directory}"):
        # A compacted topic deletes by time and size only with cleanup.policy=compact,delete.
        if cfg.retention_ms >= 0 and cfg.delete:
            deleted += delete_from_start(
                log, lambda seg, _: now_ms - seg.retention_timestamp_ms() > cfg.retention_ms, now_ms
            )
        if cfg.retention_bytes >= 0 and cfg.delete:
            excess = log.size_bytes - cfg.retention_bytes

            def over_size(seg: LogSegment, _: LogSegment | None) -> bool:
                nonlocal excess
                if excess - seg.size_bytes >= 0:
                    excess -= seg.size_bytes
                    return True
                return False

            if excess > 0:
                deleted += delete_from_start(log, over_size, now_ms)
        deleted += delete_from_start(
            log, lambda _, nxt: nxt is not None and nxt.base_offset <= log._log_start_offset, now_ms
        )
    return deleted


def delete_records_before(log: PartitionLog, offset: int) -> None:
    """Raise the log start offset (DeleteRecords); whole segments below it are deleted."""
    log._check_open()
    if offset > log._high_watermark:
        raise KafkaError(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"cannot delete records before {offset}: above the high watermark {log._high_watermark}",
        )
    if offset <= log._log_start_offset:
        return
    advance_log_start(log, offset)
    with log._io(f"deleting records in {log.directory}"):
        delete_from_start(log, lambda _, nxt: nxt is not None and nxt.base_offset <= offset, log._clock_ms())


def truncate_to(log: PartitionLog, offset: int) -> None:
    """Drop every record at ``offset`` or later (a follower's divergent tail)."""
    log._check_open()
    if offset >= log.log_end_offset:
        # Nothing to cut, but an epoch this replica started as leader and never wrote in (it lost
        # leadership first) must go, or its next fetch names that epoch and the leader answers the
        # same divergence forever (Kafka's UnifiedLog.truncateTo truncates the epoch cache here too).
        log.epochs.truncate_from_end(log.log_end_offset)
        return
    if offset < log._log_start_offset:
        truncate_fully_and_start_at(log, offset)
        return
    with log._io(f"truncating {log.directory}"):
        retire(log, [s for s in log._segments if s.base_offset > offset])
        active = log._active
        active.truncate_to(offset, log.config.index_interval_bytes)
        if active.size_bytes == 0:
            active.rolling_base_ms = None
        leo = log.log_end_offset
        log.epochs.truncate_from_end(leo)
        rebuild_producer_state(log, leo)
        # A cut inside the batch holding the log start removes that whole batch.
        log._log_start_offset = min(log._log_start_offset, leo)
        log._high_watermark = min(log._high_watermark, leo)
        with log._lock:
            # Counted once the cut is done: a flush that began before it, on another thread,
            # then finds the count changed and leaves the recovery point alone.
            log._recovery_point = min(log._recovery_point, leo)
            log._truncations += 1
        # The new end, which a cut inside a batch (or a cleaned gap) puts below ``offset``.
        log.truncated_to = leo if log.truncated_to is None else min(log.truncated_to, leo)


def truncate_fully_and_start_at(log: PartitionLog, offset: int) -> None:
    """Drop everything and start an empty log at ``offset``."""
    log._check_open()
    log.truncated_to = offset if log.truncated_to is None else min(log.truncated_to, offset)
    with log._io(f"truncating {log.directory}"):
        old = list(log._segments)
        for seg in old:
            seg.rename_deleted()
        new = LogSegment.create(log.directory, offset)
        new.roll_jitter_ms = log._random_jitter()
        due = log._clock_ms() + log.config.file_delete_delay_ms
        with log._lock:
            log._segments = [new]
            log._bases = [offset]
        log._pending_deletes.extend((due, seg) for seg in old)
        fsync_dir(log.directory)
        log._log_start_offset = offset
        log._high_watermark = offset
        with log._lock:
            log._recovery_point = offset
            log._truncations += 1  # as in truncate_to
        log.epochs.clear()
        log.producer_state.clear()
        log._snapshot_at = None
        for snap in snapshot_offsets(log.directory):
            snapshot_path(log.directory, snap).unlink(missing_ok=True)


def replace_segments(
    log: PartitionLog,
    old: list[LogSegment],
    old_sizes: list[int],
    base_offset: int,
    on_step: Callable[[str], None] | None = None,
    *,
    sync_dir: bool = True,
) -> bool:
    """Put the cleaned segment in ``<base_offset>.*.swap`` in place of ``old`` (see ``swap.py``).

    ``old`` must still be a run of the log's segments behind the active one with the sizes the
    cleaner read; when retention, truncation or a close changed that meanwhile, the swap files
    are deleted and False is returned. The old segments leave the way retention's do (renamed
    ``.deleted``, their descriptors closed later), so a ``FileSlice`` being sent stays valid.
    ``on_step`` is called after each file step (tests stop there to play a crash).
    ``sync_dir=False`` leaves the directory fsync to the caller (the broker's cleaner does it on
    its thread): every state a crash can leave before it is one ``swap.py`` recovers.
    """
    step = on_step or (lambda _name: None)
    segs = log._segments
    try:
        first = next(i for i, s in enumerate(segs) if s is old[0]) if old else -1
    except StopIteration:
        first = -1
    still_there = (
        first >= 0
        and first + len(old) < len(segs)  # never the active segment
        and all(segs[first + k] is seg for k, seg in enumerate(old))
        and [s.size_bytes for s in old] == old_sizes
        and old[0].base_offset == base_offset
        and not log._closed
    )
    if not still_there:
        for path in segment_files(log.directory, base_offset, SWAP_SUFFIX):
            path.unlink(missing_ok=True)
        return False
    with log._io(f"replacing cleaned segments in {log.directory}"):
        txn_index = old[0].txn_index  # same base offset, same file: see the module rules
        for seg in old:
            seg.rename_deleted(keep_txn_index=seg is old[0])
        step("old-renamed-deleted")
        for path in segment_files(log.directory, base_offset, SWAP_SUFFIX):
            os.replace(path, path.with_name(path.name[: -len(SWAP_SUFFIX)]))
            step(f"renamed-{path.name}")
        if sync_dir:
            fsync_dir(log.directory)
        new = LogSegment.open_existing(log.directory, base_offset)
        new.txn_index = txn_index
        try:
            new.load_and_check(txn_index=False)
        except (IndexCorruptError, OSError, KafkaError) as exc:
            _log.warning("%s: rebuilding the index of cleaned segment %d: %s", log.directory, base_offset, exc)
            new.rebuild_from_headers(log.config.index_interval_bytes)
        new.last_read_ms = log._clock_ms()
        due = log._clock_ms() + log.config.file_delete_delay_ms
        with log._lock:
            log._segments = [*segs[:first], new, *segs[first + len(old) :]]
            log._bases = [s.base_offset for s in log._segments]
        log._pending_deletes.extend((due, seg) for seg in old)
    return True
