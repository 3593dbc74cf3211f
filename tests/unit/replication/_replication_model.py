"""An in-memory log for replication tests: one entry per offset holding the leader epoch that wrote it.

Its epoch cache follows ``headwater.storage.epochs.LeaderEpochCache`` (checked against it in
``test_replication_model.py``), so the cores see the same answers a real log gives.
"""

from __future__ import annotations

from bisect import bisect_right

from headwater.replication.types import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET


class ModelLog:
    def __init__(self, records: list[int] | None = None) -> None:
        self.records: list[int] = []  # records[offset] = epoch
        self.epochs: list[tuple[int, int]] = []  # (epoch, start offset), increasing in both
        self.high_watermark = 0
        for epoch in records or []:
            self.append(epoch)

    @property
    def log_end_offset(self) -> int:
        return len(self.records)

    @property
    def log_start_offset(self) -> int:
        return 0

    def latest_epoch(self) -> int | None:
        return self.epochs[-1][0] if self.epochs else None

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        if self.epochs and self.epochs[-1][0] == epoch and start_offset >= self.epochs[-1][1]:
            return
        self.epochs = [(e, s) for e, s in self.epochs if e < epoch and s < start_offset]
        self.epochs.append((epoch, start_offset))

    def append(self, epoch: int) -> None:
        self.assign_epoch(epoch, len(self.records))
        self.records.append(epoch)

    def append_entries(self, entries: list[int]) -> None:
        for epoch in entries:
            self.append(epoch)

    def truncate_to(self, offset: int) -> None:
        if offset >= len(self.records):
            return
        del self.records[offset:]
        self.epochs = [(e, s) for e, s in self.epochs if s < offset]
        self.high_watermark = min(self.high_watermark, offset)

    def end_offset_for_epoch(self, requested: int) -> tuple[int, int]:
        entries = self.epochs
        if requested == UNDEFINED_EPOCH or not entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested == entries[-1][0]:
            return requested, self.log_end_offset
        epochs = [e for e, _ in entries]
        higher = bisect_right(epochs, requested)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested, entries[0][1]
        return epochs[higher - 1], entries[higher][1]
