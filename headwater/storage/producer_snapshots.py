"""A partition log's producer-state snapshots: ``<offset>.snapshot`` files in the log's directory,
each the state of its producers (``producers.py``) as of that offset.

A snapshot is written at each roll (not fsynced: ``PartitionLog.flush`` fsyncs those past the
recovery point) and at a close that has something new to write; snapshots below the first segment
are deleted as newer ones are written. Loading and truncation rebuild the state from the newest
usable snapshot and the batches after it (headers, and the record of each control batch: see
``transactions.py``); recovering a segment starts from the state as of its base offset (``state_at``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from headwater.records.batch import BatchHeader
from headwater.storage.files import fsync_dir, write_atomic
from headwater.storage.producers import ProducerStateManager
from headwater.storage.segment import LogSegment, offset_file_name, parse_offset_name
from headwater.storage.transactions import recover_batch, replay_segment

if TYPE_CHECKING:
    from headwater.storage.log import PartitionLog

_log = logging.getLogger("headwater.storage.log")

SNAPSHOT_SUFFIX = ".snapshot"


def snapshot_offsets(directory: Path) -> list[int]:
    """The offsets of the producer snapshots in ``directory``, oldest first."""
    found = []
    for path in directory.iterdir():
        offset = parse_offset_name(path.name, SNAPSHOT_SUFFIX)
        if offset is not None:
            found.append(offset)
    return sorted(found)


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / offset_file_name(offset, SNAPSHOT_SUFFIX)


def write_snapshot(log: PartitionLog, offset: int, *, durable: bool = True) -> None:
    write_atomic(snapshot_path(log.directory, offset), log.producer_state.to_snapshot(), durable=durable)
    log._snapshot_at = offset
    first_base = log._segments[0].base_offset
    for old in snapshot_offsets(log.directory):
        if old < first_base and old != offset:
            snapshot_path(log.directory, old).unlink(missing_ok=True)


def rebuild_producer_state(log: PartitionLog, end_offset: int) -> None:
    """State as of ``end_offset``: the newest usable snapshot, then the batches after it. Completed
    transactions whose marker is below the high watermark are stable at once."""
    log.producer_state.clear()
    log._snapshot_at = None
    first_base = log._segments[0].base_offset
    start = first_base
    for offset in reversed(snapshot_offsets(log.directory)):
        path = snapshot_path(log.directory, offset)
        if offset > end_offset:
            path.unlink(missing_ok=True)
            continue
        if offset < first_base:
            continue  # the batches between it and the log start are gone; scan from the start
        try:
            log.producer_state.load(ProducerStateManager.from_snapshot(path.read_bytes()))
        except (OSError, ValueError) as exc:
            _log.warning("%s: ignoring producer snapshot %s: %s", log.directory, path.name, exc)
            path.unlink(missing_ok=True)
            continue
        start = offset
        if offset == end_offset:
            log._snapshot_at = offset
        break
    for seg in log._segments:
        replay_segment(log.producer_state, seg, start, end_offset)
    log.producer_state.on_high_watermark(max(log._high_watermark, log._log_start_offset))


def state_at(directory: Path, segments: list[LogSegment], offset: int) -> ProducerStateManager:
    """The state as of ``offset`` (a segment's base, for its recovery) from the newest readable snapshot
    at or below it and the batches of ``segments`` (those before it) after that; changes no file."""
    state = ProducerStateManager()
    first_base = segments[0].base_offset if segments else offset
    start = first_base
    for snap in reversed(snapshot_offsets(directory)):
        if snap > offset or snap < first_base:
            continue
        try:
            state.load(ProducerStateManager.from_snapshot(snapshot_path(directory, snap).read_bytes()))
        except (OSError, ValueError):
            continue
        start = snap
        break
    for seg in segments:
        replay_segment(state, seg, start, offset)
    return state


def recover_segment(
    log: PartitionLog, seg: LogSegment, earlier: list[LogSegment], state: ProducerStateManager | None
) -> tuple[int, ProducerStateManager]:
    """Recover ``seg`` from its batches (CRCs, indexes, leader epochs, its transaction index); ``earlier``
    are the segments before it and ``state`` the producer state as of its base offset when known (the
    segment before was recovered too). Returns the bytes cut and the producer state as of its end."""
    if state is None:
        state = state_at(log.directory, earlier, seg.base_offset)
    created = False

    def on_batch(header: BatchHeader, batch: memoryview) -> None:
        nonlocal created
        log.epochs.assign(header.partition_leader_epoch, header.base_offset)
        created = recover_batch(state, seg, header, batch) or created

    cut = seg.recover(log.config.index_interval_bytes, on_batch)
    if cut:
        _log.warning("%s: cut %d bytes of torn or corrupt data from segment %d", log.directory, cut, seg.base_offset)
    seg.fsync()
    if created:
        fsync_dir(log.directory)  # a new transaction index file, trusted once the load ends
    return cut, state
