"""Keyed batches and a whole-log reader for the cleaner tests."""

from __future__ import annotations

from collections.abc import Sequence

from _storage_batches import build_batch
from kafka.record.default_records import DefaultRecordBatch

from headwater.storage import PartitionLog

Record = tuple[bytes | None, bytes | None]  # (key, value); a None value is a tombstone


def keyed_batch(
    records: Sequence[Record],
    *,
    timestamp_ms: int = 1_000,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytearray:
    return build_batch([(key, value, timestamp_ms + i) for i, (key, value) in enumerate(records)],
                       producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
                       compression=compression)


def read_all(plog: PartitionLog) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(offset, timestamp, key, value) of every record from the log start to the end."""
    data = plog.read(plog.log_start_offset, 1 << 30).read()
    out: list[tuple[int, int, bytes | None, bytes | None]] = []
    pos = 0
    while pos < len(data):
        length = int.from_bytes(data[pos + 8 : pos + 12], "big")
        batch = DefaultRecordBatch(bytes(data[pos : pos + 12 + length]))
        assert batch.validate_crc()
        out.extend((r.offset, r.timestamp, r.key, r.value) for r in batch)
        pos += 12 + length
    return out


def latest_per_key(records: list[tuple[int, int, bytes | None, bytes | None]]) -> dict[bytes, tuple[int, bytes | None]]:
    out: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, _ts, key, value in records:
        assert key is not None
        out[key] = (offset, value)
    return out
