"""Sparse offset and time indexes of one segment, in Kafka's file formats.

``.index``: 8-byte entries, relative offset int32 + file position int32. ``.timeindex``: 12-byte
entries, timestamp int64 + relative offset int32. Both are append-only and strictly increasing in
their key. The whole index lives in memory (``array`` of int64, 8 bytes per number) so lookups are a
bisect; the files exist so a clean restart does not have to scan the log, and so a person can inspect
them with Kafka's tools. Unlike Kafka the files are not preallocated: their size is always a whole
number of entries, which makes a torn index easy to detect on load.

No index keeps a file descriptor open. A broker with 10,000 partitions would otherwise hold two
more descriptors per partition than it needs (Kafka opens its index files lazily for the same
reason). Appended entries live in memory first and reach the file at the next ``sync`` (the
segment's fsync: a flush, a roll, a close), which opens the file, writes the entries not yet
written, fsyncs and closes it. That is enough for recovery: a log trusts the index files only
below its recovery point, and the recovery point moves only after a ``sync``; a shorter index is
still a valid sparse index, so a crash between appends and a ``sync`` loses nothing.
"""

from __future__ import annotations

import os
import struct
import threading
from abc import ABC, abstractmethod
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


class _IndexFile(ABC):
    """The file behind an index: entries ``[0, _written)`` are in it; ``sync`` writes the rest.

    ``_lock`` guards the in-memory entries against ``sync`` running on a flushing thread.
    """

    entry_bytes: int

    def __init__(self, path: Path) -> None:
        self.path = path
        self._written = 0
        self._dirty = False  # the file changed since its last fsync
        self._longer = False  # the file may hold entries past ``_written`` that memory dropped
        self._lock = threading.Lock()

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def _encode(self, start: int) -> bytes:
        """The file bytes of entries ``[start, len)``."""

    def _open(self) -> int:
        return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)

    def create_empty(self) -> None:
        """A new segment's index: an empty file (a stale one of the same name is cut to nothing)."""
        with self._lock:
            fd = self._open()
            try:
                os.ftruncate(fd, 0)
            finally:
                os.close(fd)
            self._written, self._dirty, self._longer = 0, True, False

    def create_later(self) -> None:
        """A new segment's index where no file of its name can exist (its directory was just made):
        the first ``sync`` creates the file. A new replica then creates one file instead of three,
        which is most of what a LeaderAndIsr creating thousands of replicas spends."""
        with self._lock:
            self._written, self._dirty, self._longer = 0, True, False

    def _read(self, missing_ok: bool) -> bytes | None:
        """The file's bytes; None when it is missing and ``missing_ok`` (an empty segment whose
        index was never synced, see ``create_later``)."""
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            if not missing_ok:
                raise
            return None

    def sync(self) -> None:
        """Write the entries appended since the last sync, then fsync the file."""
        with self._lock:
            pending = self._encode(self._written)
            if not pending and not self._dirty and not self._longer:
                return
            fd = self._open()
            try:
                if pending:
                    pwrite_all(fd, pending, self._written * self.entry_bytes)
                if self._longer:
                    os.ftruncate(fd, len(self) * self.entry_bytes)
                os.fsync(fd)
            finally:
                os.close(fd)
            self._written, self._dirty, self._longer = len(self), False, False

    def _forget(self) -> None:
        """Memory dropped every entry; the file keeps its old ones until the next rewrite or sync."""
        self._written, self._longer = 0, True

    def _loaded(self) -> None:
        self._written, self._dirty, self._longer = len(self), False, False

    def _rewrite(self, data: bytes) -> None:
        fd = self._open()
        try:
            pwrite_all(fd, data, 0)
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
        self._written, self._dirty, self._longer = len(data) // self.entry_bytes, True, False

    def _truncate_file(self, entries: int) -> None:
        if entries >= self._written:
            return  # the dropped entries never reached the file
        fd = self._open()
        try:
            os.ftruncate(fd, entries * self.entry_bytes)
        finally:
            os.close(fd)
        self._written, self._dirty = entries, True


class OffsetIndex(_IndexFile):
    entry_bytes = OFFSET_ENTRY_BYTES

    def __init__(self, path: Path, base_offset: int) -> None:
        super().__init__(path)
        self.base_offset = base_offset
        self.offsets = array("q")  # absolute offsets (stored relative in the file)
        self.positions = array("q")

    def __len__(self) -> int:
        return len(self.offsets)

    def _encode(self, start: int) -> bytes:
        return b"".join(_OFFSET_ENTRY.pack(o - self.base_offset, p)
                        for o, p in zip(self.offsets[start:], self.positions[start:], strict=True))

    def append(self, offset: int, position: int) -> None:
        with self._lock:
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
            with self._lock:
                del self.offsets[keep:]
                del self.positions[keep:]
                self._truncate_file(keep)

    def clear(self) -> None:
        with self._lock:
            self.offsets = array("q")
            self.positions = array("q")
            self._forget()

    def write_all(self) -> None:
        with self._lock:
            self._rewrite(self._encode(0))

    def load(self, log_size: int, *, missing_ok: bool = False) -> None:
        """Read the file; raise IndexCorruptError (or OSError if missing) when it cannot be trusted."""
        data = self._read(missing_ok)
        if data is None:
            self.clear()
            self.create_later()
            return
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
        with self._lock:
            self.offsets, self.positions = offsets, positions
            self._loaded()


class TimeIndex(_IndexFile):
    entry_bytes = TIME_ENTRY_BYTES

    def __init__(self, path: Path, base_offset: int) -> None:
        super().__init__(path)
        self.base_offset = base_offset
        self.timestamps = array("q")
        self.offsets = array("q")

    def __len__(self) -> int:
        return len(self.timestamps)

    def _encode(self, start: int) -> bytes:
        return b"".join(_TIME_ENTRY.pack(t, o - self.base_offset)
                        for t, o in zip(self.timestamps[start:], self.offsets[start:], strict=True))

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Append (max timestamp so far, offset of the batch holding it) when the maximum grew."""
        if timestamp < 0 or (self.timestamps and timestamp <= self.timestamps[-1]):
            return
        with self._lock:
            self.timestamps.append(timestamp)
            self.offsets.append(offset)

    def last_entry(self) -> tuple[int, int] | None:
        return (self.timestamps[-1], self.offsets[-1]) if self.timestamps else None

    def lookup_below(self, timestamp: int) -> int | None:
        """Offset of the last entry whose timestamp < ``timestamp``: no record at or before it can match."""
        i = bisect_left(self.timestamps, timestamp) - 1
        return self.offsets[i] if i >= 0 else None

    def clear(self) -> None:
        with self._lock:
            self.timestamps = array("q")
            self.offsets = array("q")
            self._forget()

    def write_all(self) -> None:
        with self._lock:
            self._rewrite(self._encode(0))

    def load(self, next_offset_bound: int | None = None, *, missing_ok: bool = False) -> None:
        data = self._read(missing_ok)
        if data is None:
            self.clear()
            self.create_later()
            return
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
        with self._lock:
            self.timestamps, self.offsets = timestamps, offsets
            self._loaded()
