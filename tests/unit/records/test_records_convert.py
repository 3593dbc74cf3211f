"""Rebuilding a batch with another codec and stamping LogAppendTime: the byte-level half of a topic's
compression.type and message.timestamp.type (Kafka 3.9's LogValidator, MemoryRecordsBuilder and
DefaultRecordBatch.setMaxTimestamp). Every result is read back with kafka-python's decoder."""

from __future__ import annotations

import gzip
import struct

import crc32c
import pytest
from kafka import codec
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from headwater.records.batch import TIMESTAMP_TYPE_MASK, crc_ok, parse_header, set_max_timestamp
from headwater.records.records import (
    GZIP,
    LZ4,
    NO_COMPRESSION,
    SNAPPY,
    ZSTD,
    batch_records,
    compress,
    convert_batch,
    scan_records,
)

CODECS = [NO_COMPRESSION, GZIP, SNAPPY, LZ4, ZSTD]


def _batch(n: int = 4, codec: int = NO_COMPRESSION, *, producer_id: int = 11, base_sequence: int = 40,
           timestamps: list[int] | None = None, headers: bool = True) -> bytearray:
    b = DefaultRecordBatchBuilder(2, codec, False, producer_id, 3 if producer_id >= 0 else -1, base_sequence, 1 << 24)
    for i in range(n):
        ts = timestamps[i] if timestamps is not None else 1_000 + 7 * i
        b.append(i, timestamp=ts, key=None if i == 1 else b"k%d" % i, value=b"value %d " % i + b"x" * 300,
                 headers=[("h", b"%d" % i)] if headers else [])
    return bytearray(b.build())


def _read(raw: bytes | bytearray) -> list[tuple[int, int, int, bytes | None, bytes | None, list[tuple[str, bytes]]]]:
    batch = DefaultRecordBatch(bytes(raw))
    assert batch.validate_crc()
    return [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, list(r.headers)) for r in batch]


def _convert(raw: bytearray, codec: int, level: int | None = None, log_append_time_ms: int | None = None) -> bytearray:
    header = parse_header(raw)
    blob = batch_records(raw, header)
    return convert_batch(raw, header, blob, scan_records(blob, header.record_count), codec=codec, level=level,
                         log_append_time_ms=log_append_time_ms)


@pytest.mark.parametrize("source", CODECS)
@pytest.mark.parametrize("target", CODECS)
def test_convert_keeps_every_record_and_the_producer_fields(source: int, target: int) -> None:
    """LogValidator.buildRecordsAndAssignOffsets (Kafka 3.9) builds the new batch with the producer's
    producerId, producerEpoch and baseSequence and appends every validated record with its key,
    value, headers and timestamp; MemoryRecordsBuilder writes the target codec's id in the attributes."""
    raw = _batch(codec=source)
    before = parse_header(raw)
    out = _convert(raw, target)
    after = parse_header(out)
    assert crc_ok(out, 0, after)
    assert after.compression == target
    assert _read(out) == _read(raw)
    assert (after.producer_id, after.producer_epoch, after.base_sequence) == (11, 3, 40)
    assert (after.record_count, after.last_offset_delta) == (4, 3)
    assert (after.base_timestamp, after.max_timestamp) == (before.base_timestamp, before.max_timestamp)
    assert after.size == len(out)


def test_convert_uses_the_level() -> None:
    """KIP-390 (Kafka 3.8+): compression.zstd.level / compression.gzip.level reach the codec
    (LogConfig.getCompression builds Compression.zstd().level(...)). The records blob is kept
    byte for byte when it is already what MemoryRecordsBuilder writes, so the payload is exactly the
    codec's output at that level."""
    raw = _batch(n=50)
    blob = batch_records(raw, parse_header(raw))
    z1, z19 = _convert(raw, ZSTD, 1), _convert(raw, ZSTD, 19)
    assert bytes(z1[61:]) == compress(ZSTD, blob, 1)
    assert bytes(z19[61:]) == compress(ZSTD, blob, 19)
    assert z1[61:] != z19[61:]
    g1 = _convert(raw, GZIP, 1)
    assert bytes(g1[61:]) == gzip.compress(blob, compresslevel=1, mtime=0)
    assert gzip.decompress(bytes(_convert(raw, GZIP, None)[61:])) == blob  # -1: zlib's default


_DECODE = {NO_COMPRESSION: bytes, GZIP: codec.gzip_decode, SNAPPY: codec.snappy_decode, LZ4: codec.lz4_decode,
           ZSTD: codec.zstd_decode}


@pytest.mark.parametrize("codec_id", CODECS)
@pytest.mark.parametrize("level", [None, 1, 9])
def test_compress_round_trips_through_kafka_pythons_decoders(codec_id: int, level: int | None) -> None:
    data = b"abc" * 10_000 + bytes(range(256))
    assert _DECODE[codec_id](compress(codec_id, data, level)) == data


def _raw_batch(records: list[bytes], *, base_ts: int, max_ts: int, attributes: int = 0) -> bytearray:
    """A batch around hand-written records (the builder only writes canonical ones)."""
    body = b"".join(records)
    head = struct.pack(">qiibIhiqqqhii", 0, 49 + len(body), 0, 2, 0, attributes, len(records) - 1, base_ts, max_ts,
                       -1, -1, -1, len(records))
    out = bytearray(head + body)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return out


def _zz(v: int) -> bytes:
    zz = (v << 1) ^ (v >> 63)
    out = bytearray()
    while zz >= 0x80:
        out.append((zz & 0x7F) | 0x80)
        zz >>= 7
    out.append(zz)
    return bytes(out)


def _record(ts_delta: int, offset_delta: int, key: bytes, value: bytes) -> bytes:
    body = b"\x00" + _zz(ts_delta) + _zz(offset_delta) + _zz(len(key)) + key + _zz(len(value)) + value + _zz(0)
    return _zz(len(body)) + body


def test_convert_renumbers_offsets_and_rebases_timestamps() -> None:
    """MemoryRecordsBuilder.appendWithOffset (Kafka 3.9) gives the records consecutive offsets
    (offsetCounter++) and takes the first record's timestamp as baseTimestamp, every record's delta
    being from it; recordWritten keeps the largest timestamp as maxTimestamp."""
    raw = _raw_batch([_record(10, 0, b"a", b"1"), _record(-5, 3, b"b", b"2"), _record(40, 7, b"c", b"3")],
                     base_ts=1_000, max_ts=1_040)
    struct.pack_into(">i", raw, 23, 2)  # last offset delta: 3 records
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    out = _convert(raw, ZSTD)
    h = parse_header(out)
    assert (h.base_timestamp, h.max_timestamp) == (1_010, 1_040)
    assert [(o, t, k, v) for o, t, _tt, k, v, _h in _read(out)] == [(0, 1_010, b"a", b"1"), (1, 995, b"b", b"2"),
                                                                  (2, 1_040, b"c", b"3")]


def test_convert_of_a_log_append_time_batch_gives_each_record_its_max_timestamp() -> None:
    """DefaultRecordBatch reads every record of a LogAppendTime batch as the batch's maxTimestamp;
    rebuilt as CreateTime those timestamps are what is kept."""
    raw = _raw_batch([_record(0, 0, b"a", b"1"), _record(5, 1, b"b", b"2")], base_ts=100, max_ts=9_000,
                     attributes=TIMESTAMP_TYPE_MASK)
    out = _convert(raw, LZ4)
    h = parse_header(out)
    assert not h.is_log_append_time and (h.base_timestamp, h.max_timestamp) == (9_000, 9_000)
    assert [t for _o, t, _tt, _k, _v, _h in _read(out)] == [9_000, 9_000]


def test_convert_to_log_append_time() -> None:
    """MemoryRecordsBuilder with TimestampType.LOG_APPEND_TIME writes logAppendTime as the batch's
    maxTimestamp and sets the timestamp-type attribute; the records keep their deltas from the
    first record's timestamp."""
    raw = _batch()
    out = _convert(raw, ZSTD, log_append_time_ms=77_777)
    h = parse_header(out)
    assert h.is_log_append_time and h.max_timestamp == 77_777 and h.base_timestamp == 1_000
    assert [(t, tt) for _o, t, tt, _k, _v, _h in _read(out)] == [(77_777, 1)] * 4


@pytest.mark.parametrize("codec", CODECS)
def test_set_max_timestamp_in_place(codec: int) -> None:
    """DefaultRecordBatch.setMaxTimestamp (Kafka 3.9): attributes from computeAttributes(compression,
    timestampType, ...), the max timestamp written, the CRC computed again; nothing when both
    already match."""
    raw = _batch(codec=codec)
    h = parse_header(raw)
    payload = bytes(raw[61:])
    assert set_max_timestamp(raw, 0, h, True, 123_456)
    after = parse_header(raw)
    assert crc_ok(raw, 0, after)
    assert after.is_log_append_time and after.max_timestamp == 123_456 and after.compression == codec
    assert after.base_timestamp == h.base_timestamp and bytes(raw[61:]) == payload
    assert [t for _o, t, _tt, _k, _v, _h in _read(raw)] == [123_456] * 4
    assert not set_max_timestamp(raw, 0, after, True, 123_456)
    assert set_max_timestamp(raw, 0, after, False, 2_000)
    back = parse_header(raw)
    assert not back.is_log_append_time and crc_ok(raw, 0, back)


def test_scan_records_fields() -> None:
    raw = _batch(n=3, headers=False)
    h = parse_header(raw)
    fields = scan_records(batch_records(raw, h), 3)
    assert [(f.offset_delta, f.timestamp_delta, f.key_length) for f in fields] == [(0, 0, 2), (1, 7, -1), (2, 14, 2)]
    assert all(f.value_length == len(b"value 0 ") + 300 for f in fields)
