"""Sparse offset and time indexes of one segment, in Kafka's file formats.

``.index``: 8-byte entries, relative offset int32 + file position int32. ``.timeindex``: 12-byte
entries, timestamp int64 + relative offset int32. Both are append-only and strictly increasing in
their key. The whole index lives in memory (``array`` of int64, 8 bytes per number) so lookups are a
bisect; the files exist so a clean restart does not have to scan the log, and so a person can inspect
them with Kafka's tools. Unlike Kafka the files are not preallocated: their size is always a whole
number of entries, which makes a torn index easy to detect on load.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

from headwater.storage.files import pwrite_all

OFFSET_ENTRY_BYTES = 8
TIME_ENTRY_BYTES = 12
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class IndexCorruptError(ValueError):
    """An index file that does not match the rules above; the segment is rebuilt from the log."""


class _IndexFile:
    """Holds the optional fd used to append; only the active segment keeps it open."""

    entry_bytes: int

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def open_for_append(self) -> None:
        if self.fd is None:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def _write_entry(self, index: int, data: bytes) -> None:
        if self.fd is not None:
            pwrite_all(self.fd, data, index * self.entry_bytes)

    def _rewrite(self, data: bytes) -> None:
        fd = self.fd if self.fd is not None else os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            pwrite_all(fd, data, 0)
            os.ftruncate(fd, len(data))
        finally:
            if fd != self.fd:
                os.close(fd)

    def _truncate_file(self, entries: int) -> None:
        fd = self.fd if self.fd is not None else os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, entries * self.entry_bytes)
        finally:
            if fd != self.fd:
                os.close(fd)


class OffsetIndex(_IndexFile):
    entry_bytes = OFFSET_ENTRY_BYTES

    def __init__(self, path: Path, base_offset: int) -> None:
        super().__init__(path)
        self.base_offset = base_offset
        self.offsets = array("q")  # absolute offsets (stored relative in the file)
        self.positions = array("q")

    def __len__(self) -> int:
        return len(self.offsets)

    def append(self, offset: int, position: int) -> None:
        self._write_entry(len(self.offsets), _OFFSET_ENTRY.pack(offset - self.base_offset, position))
        self.offsets.append(offset)
        self.positions.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The entry with the largest offset <= ``offset``, else the segment start."""
        i = bisect_right(self.offsets, offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.offsets[i], self.positions[i]

    def floor_position(self, position: int) -> int:
        """The largest indexed batch position <= ``position`` (0 if none)."""
        i = bisect_right(self.positions, position) - 1
        return self.positions[i] if i >= 0 else 0

    def last_position(self) -> int:
        return self.positions[-1] if self.positions else 0

    def truncate_from_position(self, position: int) -> None:
        """Drop entries pointing at ``position`` or later (the log is being cut there)."""
        keep = bisect_left(self.positions, position)
        if keep < len(self.positions):
            del self.offsets[keep:]
            del self.positions[keep:]
            self._truncate_file(keep)

    def clear(self) -> None:
        self.offsets = array("q")
        self.positions = array("q")

    def write_all(self) -> None:
        data = b"".join(
            _OFFSET_ENTRY.pack(o - self.base_offset, p)
            for o, p in zip(self.offsets, self.positions, strict=True)
        )
        self._rewrite(data)

    def load(self, log_size: int) -> None:
        """Read the file; raise IndexCorruptError (or OSError if missing) when it cannot be trusted."""
        data = self.path.read_bytes()
        if len(data) % OFFSET_ENTRY_BYTES:
            raise IndexCorruptError(f"{self.path}: size {len(data)} is not a whole number of entries")
        offsets = array("q")
        positions = array("q")
        last_rel = last_pos = -1
        for rel, pos in _OFFSET_ENTRY.iter_unpack(data):
            if rel <= last_rel or pos <= last_pos or pos >= log_size:
                raise IndexCorruptError(f"{self.path}: entry ({rel}, {pos}) out of order or past the log end")
            offsets.append(self.base_offset + rel)
            positions.append(pos)
            last_rel, last_pos = rel, pos
        self.offsets, self.positions = offsets, positions


class TimeIndex(_IndexFile):
    entry_bytes = TIME_ENTRY_BYTES

    def __init__(self, path: Path, base_offset: int) -> None:
        super().__init__(path)
        self.base_offset = base_offset
        self.timestamps = array("q")
        self.offsets = array("q")

    def __len__(self) -> int:
        return len(self.timestamps)

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Append (max timestamp so far, offset of the batch holding it) when the maximum grew."""
        if timestamp < 0 or (self.timestamps and timestamp <= self.timestamps[-1]):
            return
        self._write_entry(len(self.timestamps), _TIME_ENTRY.pack(timestamp, offset - self.base_offset))
        self.timestamps.append(timestamp)
        self.offsets.append(offset)

    def last_entry(self) -> tuple[int, int] | None:
        return (self.timestamps[-1], self.offsets[-1]) if self.timestamps else None

    def lookup_below(self, timestamp: int) -> int | None:
        """Offset of the last entry whose timestamp < ``timestamp``: no record at or before it can match."""
        i = bisect_left(self.timestamps, timestamp) - 1
        return self.offsets[i] if i >= 0 else None

    def clear(self) -> None:
        self.timestamps = array("q")
        self.offsets = array("q")

    def write_all(self) -> None:
        data = b"".join(
            _TIME_ENTRY.pack(t, o - self.base_offset)
            for t, o in zip(self.timestamps, self.offsets, strict=True)
        )
        self._rewrite(data)

    def load(self, next_offset_bound: int | None = None) -> None:
        data = self.path.read_bytes()
        if len(data) % TIME_ENTRY_BYTES:
            raise IndexCorruptError(f"{self.path}: size {len(data)} is not a whole number of entries")
        timestamps = array("q")
        offsets = array("q")
        last_ts = -1
        for ts, rel in _TIME_ENTRY.iter_unpack(data):
            offset = self.base_offset + rel
            if ts <= last_ts or rel < 0 or (next_offset_bound is not None and offset >= next_offset_bound):
                raise IndexCorruptError(f"{self.path}: entry ({ts}, {rel}) out of order or past the log end")
            timestamps.append(ts)
            offsets.append(offset)
            last_ts = ts
        self.timestamps, self.offsets = timestamps, offsets
