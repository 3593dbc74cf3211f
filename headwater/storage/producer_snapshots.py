"""A partition log's producer-state snapshots: ``<offset>.snapshot`` files in the log's directory,
each the state of its producers (``producers.py``) as of that offset.

A snapshot is written at each roll (not fsynced: ``PartitionLog.flush`` fsyncs those past the
recovery point) and at a close that has something new to write; snapshots below the first segment
are deleted as newer ones are written. Loading and truncation rebuild the state from the newest
usable snapshot and the batch headers after it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from headwater.storage.files import write_atomic
from headwater.storage.producers import ProducerStateManager
from headwater.storage.segment import offset_file_name, parse_offset_name

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
    """State as of ``end_offset``: the newest usable snapshot, then the batch headers after it."""
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
            log.producer_state.producers = ProducerStateManager.from_snapshot(path.read_bytes())
        except (OSError, ValueError) as exc:
            _log.warning("%s: ignoring producer snapshot %s: %s", log.directory, path.name, exc)
            path.unlink(missing_ok=True)
            continue
        start = offset
        if offset == end_offset:
            log._snapshot_at = offset
        break
    for seg in log._segments:
        if seg.next_offset <= start or seg.base_offset >= end_offset:
            continue
        found = seg.locate(start)
        if found is None:
            continue
        for _, header in seg.iter_headers(found[0]):
            if header.base_offset >= end_offset:
                break
            log.producer_state.replay(header)
