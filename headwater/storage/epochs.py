"""Leader epoch cache: for each leader epoch, the first offset written in it.

Replication uses it to answer OffsetForLeaderEpoch, which tells a follower where its log diverged.
Rules (Kafka's ``LeaderEpochFileCache``):
- entries are strictly increasing in both epoch and start offset;
- assigning (epoch, start) first drops every entry that would break that order, so a new leader's
  epoch always wins over stale entries after a truncation;
- truncating the log's end drops entries starting at or after the new end; raising the log start
  keeps the last entry at or below it and moves its start up to the new log start.
Changes are written to ``leader-epoch-checkpoint`` (atomically, with fsync) by ``sync``, which the
log runs before it moves its recovery point (flush, roll, close), not at every change: a controller
failover makes thousands of partitions change leader at once, and a file write per partition kept a
broker busy for seconds. This loses nothing on a crash: entries that start below the recovery
point were synced; entries above it are re-derived from the batches that recovery scans (and
dropped with them); an epoch without batches answers OffsetForLeaderEpoch as if it were absent.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from pathlib import Path

from headwater.storage.checkpoint import read_epochs, write_epochs

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[tuple[int, int]] = []
        self._unsynced = False
        self._lock = threading.Lock()  # sync may run on the log's flushing thread
        for epoch, start in read_epochs(path):
            self._put(epoch, start)

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    def latest_epoch(self) -> int | None:
        return self._entries[-1][0] if self._entries else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; return whether anything changed."""
        if epoch < 0:
            return False
        if self._entries:
            latest_epoch, latest_start = self._entries[-1]
            if latest_epoch == epoch and start_offset >= latest_start:
                return False
        self._put(epoch, start_offset)
        self._write()
        return True

    def _put(self, epoch: int, start_offset: int) -> None:
        self._entries = [(e, s) for e, s in self._entries if e < epoch and s < start_offset]
        self._entries.append((epoch, start_offset))

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest known epoch <= requested, the offset where the next epoch starts), Kafka's rules."""
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._entries[-1][0]:
            # The latest epoch is still being written: it ends at the log end.
            return requested_epoch, log_end_offset
        epochs = [e for e, _ in self._entries]
        higher = bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        higher_start = self._entries[higher][1]
        if higher == 0:
            # Older than anything we know: the follower must truncate to where our history begins.
            return requested_epoch, higher_start
        return epochs[higher - 1], higher_start

    def truncate_from_end(self, end_offset: int) -> None:
        if self._entries and self._entries[-1][1] >= end_offset:
            self._entries = [(e, s) for e, s in self._entries if s < end_offset]
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        below = [(e, s) for e, s in self._entries if s <= start_offset]
        if not below or (len(below) == 1 and below[0][1] == start_offset):
            return
        above = [(e, s) for e, s in self._entries if s > start_offset]
        self._entries = [(below[-1][0], start_offset), *above]
        self._write()

    def clear(self) -> None:
        self._entries = []
        self._write()

    def _write(self) -> None:
        with self._lock:
            self._unsynced = True

    def sync(self) -> None:
        """Make the last write durable (file and directory fsync); nothing to do if it already is."""
        with self._lock:
            if self._unsynced:
                write_epochs(self.path, list(self._entries))
                self._unsynced = False
