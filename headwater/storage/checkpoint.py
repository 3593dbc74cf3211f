"""Kafka's text checkpoint files.

Format (``server-common/.../CheckpointFile``): a version line ``0``, a line with the entry count,
then one entry per line. The count frames the file: a file whose line count disagrees with it is
rejected rather than half-read. Files are replaced atomically, so that should only happen when
someone edits them by hand.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from headwater.storage.files import write_atomic

log = logging.getLogger(__name__)

CHECKPOINT_VERSION = 0
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


class CheckpointFormatError(ValueError):
    """A checkpoint file that does not parse."""


def _encode(lines: list[str]) -> bytes:
    return ("\n".join([str(CHECKPOINT_VERSION), str(len(lines)), *lines]) + "\n").encode()


def _decode(path: Path, fields_per_line: int) -> list[list[str]]:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    if len(lines) < 2:
        raise CheckpointFormatError(f"{path}: missing version or count line")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CheckpointFormatError(f"{path}: unsupported version {lines[0]!r}")
    try:
        count = int(lines[1])
    except ValueError:
        raise CheckpointFormatError(f"{path}: bad count line {lines[1]!r}") from None
    entries = [line.split() for line in lines[2:] if line.strip()]
    if len(entries) != count:
        raise CheckpointFormatError(f"{path}: expected {count} entries, found {len(entries)}")
    for entry in entries:
        if len(entry) != fields_per_line:
            raise CheckpointFormatError(f"{path}: bad entry {' '.join(entry)!r}")
    return entries


def write_offsets(path: Path, offsets: Mapping[tuple[str, int], int]) -> None:
    lines = [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    write_atomic(path, _encode(lines))


def read_offsets(path: Path) -> dict[tuple[str, int], int]:
    """Read ``topic partition offset`` entries; a missing or unreadable file reads as empty."""
    if not path.exists():
        return {}
    try:
        entries = _decode(path, 3)
        return {(topic, int(partition)): int(offset) for topic, partition, offset in entries}
    except (CheckpointFormatError, ValueError, UnicodeDecodeError) as exc:
        # An empty map is the safe reading: recovery re-scans everything, offsets fall back to the segments.
        log.warning("ignoring unreadable checkpoint %s: %s", path, exc)
        return {}


def write_epochs(path: Path, entries: list[tuple[int, int]], *, durable: bool = True) -> None:
    write_atomic(path, _encode([f"{epoch} {start}" for epoch, start in entries]), durable=durable)


def read_epochs(path: Path) -> list[tuple[int, int]]:
    if not path.exists():
        return []
    try:
        return [(int(epoch), int(start)) for epoch, start in _decode(path, 2)]
    except (CheckpointFormatError, ValueError, UnicodeDecodeError) as exc:
        # Recovery re-derives epochs from the batches it scans; the rest is the same as Kafka losing the file.
        log.warning("ignoring unreadable leader epoch checkpoint %s: %s", path, exc)
        return []
