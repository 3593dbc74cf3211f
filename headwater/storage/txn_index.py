"""A segment's aborted-transaction index: ``<base offset>.txnindex``, in Kafka's file format.

Each entry (34 bytes, big-endian) is one transaction that ended with an ABORT marker in this
segment: version int16 (0), producer id int64, first offset int64 (the transaction's first
record, possibly in an earlier segment), last offset int64 (the marker's offset) and the last
stable offset int64 when the marker was written. Entries are in marker order, so last offsets
increase. A read_committed fetch asks which of them overlap the offsets it returns
(``collect``, Kafka's ``TransactionIndex.collectAbortedTxns``).

Like the other indexes (``index.py``), the entries live in memory and reach the file at ``sync``
(a flush, a roll's flush, a close); no descriptor stays open. Unlike them it is not sparse: a
missing entry is a wrong answer. That is still safe, because the log trusts a segment's files
only below its recovery point, which moves only after a ``sync``; every segment from the one
holding the recovery point on is recovered from its batches, which rebuilds this index. The file
exists only once the segment has had an aborted transaction (Kafka creates it lazily too): a
missing file is an empty index.
"""

from __future__ import annotations

import os
import struct
import threading
from dataclasses import dataclass
from pathlib import Path

from headwater.storage.files import pwrite_all
from headwater.storage.index import IndexCorruptError

TXN_INDEX_SUFFIX = ".txnindex"
ENTRY_BYTES = 34
_ENTRY = struct.Struct(">hqqqq")
_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int


class TransactionIndex:
    def __init__(self, path: Path | None, base_offset: int) -> None:
        # ``path`` None: no file behind it (an old segment whose file a cleaned one took over).
        self.path = path
        self.base_offset = base_offset
        self.entries: list[AbortedTxn] = []
        self._written = 0  # entries [0, _written) are in the file
        self._dirty = False  # the file changed since its last fsync
        self._longer = False  # the file may hold entries past ``_written`` that memory dropped
        self._exists = False  # the file is known to exist (created or loaded)
        self._lock = threading.Lock()  # ``sync`` may run on a flushing thread

    def __len__(self) -> int:
        return len(self.entries)

    def append(self, txn: AbortedTxn) -> bool:
        """Add an entry; True when this created the file, whose directory entry the caller must
        fsync before the recovery point passes it."""
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            raise ValueError(
                f"{self.path}: aborted transaction ending at {txn.last_offset} is not after the last one "
                f"({self.entries[-1].last_offset})"
            )
        created = False
        with self._lock:
            if not self._exists and self.path is not None:
                # Created now, on the appending thread, so the next flush's directory fsync covers it.
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                os.close(fd)
                self._exists = created = True
            self.entries.append(txn)
        return created

    def collect(self, fetch_offset: int, upper_bound: int, out: list[AbortedTxn]) -> bool:
        """Append to ``out`` the entries overlapping ``[fetch_offset, upper_bound)``; True when no later
        segment can hold one (an entry's last stable offset reached ``upper_bound``)."""
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return True
        return False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at ``offset`` or later (the log is cut there)."""
        keep = len(self.entries)
        while keep and self.entries[keep - 1].last_offset >= offset:
            keep -= 1
        if keep == len(self.entries):
            return
        with self._lock:
            del self.entries[keep:]
            if keep < self._written:
                self._written, self._longer = keep, True

    def clear(self) -> None:
        """Forget every entry (recovery rebuilds them); the file follows at the next write."""
        with self._lock:
            self.entries = []
            self._written, self._longer = 0, True

    def _encode(self, start: int) -> bytes:
        return b"".join(
            _ENTRY.pack(_VERSION, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
            for t in self.entries[start:]
        )

    def sync(self) -> None:
        """Write the entries not in the file yet (cut what memory dropped), then fsync the file."""
        with self._lock:
            if self.path is None:
                return
            pending = self._encode(self._written)
            if not pending and not self._dirty and not (self._longer and self._exists):
                return
            if not self._exists and not self.entries:
                self._written, self._dirty, self._longer = 0, False, False
                return  # nothing to write and no file to cut: stay without one
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                if pending:
                    pwrite_all(fd, pending, self._written * ENTRY_BYTES)
                if self._longer:
                    os.ftruncate(fd, len(self.entries) * ENTRY_BYTES)
                os.fsync(fd)
            finally:
                os.close(fd)
            self._exists = True
            self._written, self._dirty, self._longer = len(self.entries), False, False

    def write_all(self) -> None:
        """Rewrite the file from memory (after recovery); a segment without entries or file stays without."""
        with self._lock:
            if self.path is None or (not self.entries and not self._exists and not self.path.exists()):
                self._written, self._longer = len(self.entries), False
                return
            data = self._encode(0)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                pwrite_all(fd, data, 0)
                os.ftruncate(fd, len(data))
            finally:
                os.close(fd)
            self._exists = True
            self._written, self._dirty, self._longer = len(self.entries), True, False

    def remove_stale(self) -> None:
        """A new segment: a file of its name left by an older one (an interrupted cleaner swap) goes."""
        if self.path is not None:
            self.path.unlink(missing_ok=True)
        self.entries, self._written, self._dirty, self._longer, self._exists = [], 0, False, False, False

    def load(self, next_offset: int) -> None:
        """Read the file (missing: empty); raise IndexCorruptError when it cannot be trusted: torn,
        an unknown version, entries out of order or with a marker outside ``[base, next_offset)``."""
        if self.path is None:
            return
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            with self._lock:
                self.entries, self._written, self._dirty, self._longer, self._exists = [], 0, False, False, False
            return
        if len(data) % ENTRY_BYTES:
            raise IndexCorruptError(f"{self.path}: size {len(data)} is not a whole number of entries")
        entries: list[AbortedTxn] = []
        last = -1
        for version, pid, first, last_offset, lso in _ENTRY.iter_unpack(data):
            if version != _VERSION:
                raise IndexCorruptError(f"{self.path}: unknown aborted transaction version {version}")
            if not (self.base_offset <= last_offset < next_offset) or last_offset <= last or first > last_offset:
                raise IndexCorruptError(
                    f"{self.path}: aborted transaction [{first}, {last_offset}] out of order or outside the segment"
                )
            entries.append(AbortedTxn(pid, first, last_offset, lso))
            last = last_offset
        with self._lock:
            self.entries = entries
            self._written, self._dirty, self._longer, self._exists = len(entries), False, False, True
