"""Build RecordBatch v2 bytes for the storage tests with kafka-python's builder."""

from __future__ import annotations

from collections.abc import Sequence

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

CODEC_NONE = 0
CODEC_GZIP = 1
CODEC_SNAPPY = 2
CODEC_LZ4 = 3
CODEC_ZSTD = 4


def build_batch(
    records: Sequence[tuple[bytes | None, bytes | None, int]],
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    compression: int = CODEC_NONE,
) -> bytearray:
    """One RecordBatch v2 of (key, value, timestamp) records."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for i, (key, value, ts) in enumerate(records):
        builder.append(i, timestamp=ts, key=key, value=value, headers=[])
    return bytearray(builder.build())


def make_batch(
    values: Sequence[bytes],
    timestamps: Sequence[int] | None = None,
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    compression: int = CODEC_NONE,
) -> bytearray:
    records = [(None, value, timestamps[i] if timestamps is not None else 1_000 + i) for i, value in enumerate(values)]
    return build_batch(records, producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
                       compression=compression)


def decode(data: bytes) -> list[tuple[int, int, bytes | None]]:
    """(offset, timestamp, value) of every record in concatenated batches."""
    out: list[tuple[int, int, bytes | None]] = []
    pos = 0
    while pos < len(data):
        length = int.from_bytes(data[pos + 8 : pos + 12], "big")
        batch = DefaultRecordBatch(bytes(data[pos : pos + 12 + length]))
        out.extend((r.offset, r.timestamp, r.value) for r in batch)
        pos += 12 + length
    return out
