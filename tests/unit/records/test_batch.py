from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from headwater.records import (
    CorruptRecordError,
    UnsupportedMagicError,
    assign_offsets,
    iter_batches,
    parse_header,
    scan_valid_prefix,
)
from headwater.records.batch import (
    ATTRIBUTES_POS,
    HEADER_SIZE,
    MAGIC_POS,
    TIMESTAMP_TYPE_MASK,
    create_time_ms,
)


def batch(n: int = 3, compression: int = 0, producer_id: int = -1, base_sequence: int = -1) -> bytes:
    b = DefaultRecordBatchBuilder(2, compression, False, producer_id, 0 if producer_id >= 0 else -1, base_sequence, 1 << 20)
    for i in range(n):
        b.append(i, 1000 + i, b"k%d" % i, b"value %d " % i + b"x" * 200, [])
    return bytes(b.build())


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4])
def test_header_fields(compression: int) -> None:
    raw = batch(5, compression, producer_id=7, base_sequence=10)
    (pos, h), = list(iter_batches(raw))
    assert (pos, h.size, h.record_count, h.last_offset_delta, h.compression) == (0, len(raw), 5, 4, compression)
    assert [r.offset for r in DefaultRecordBatch(raw)] == [0, 1, 2, 3, 4]
    assert (h.producer_id, h.base_sequence, h.last_sequence) == (7, 10, 14)
    assert (h.base_timestamp, h.max_timestamp) == (1000, 1004)


def test_assign_offsets_keeps_crc_valid() -> None:
    raw = bytearray(batch(3) + batch(2))
    batches = list(iter_batches(raw))
    assert assign_offsets(raw, batches, 100, 9) == 105
    again = list(iter_batches(raw))  # CRC still checks: neither rewritten field is covered
    assert [h.base_offset for _, h in again] == [100, 103]
    assert all(h.partition_leader_epoch == 9 for _, h in again)
    records = list(DefaultRecordBatch(bytes(raw[: again[0][1].size])))
    assert [r.offset for r in records] == [100, 101, 102]


def test_crc_mismatch_and_bad_magic() -> None:
    raw = bytearray(batch())
    raw[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        list(iter_batches(raw))
    raw = bytearray(batch())
    raw[16] = 1
    with pytest.raises(UnsupportedMagicError):
        parse_header(raw)


def test_scan_valid_prefix_cuts_torn_tail() -> None:
    whole = batch(3) + batch(4)
    torn = whole + batch(5)[:-7]
    batches, end = scan_valid_prefix(torn)
    assert len(batches) == 2 and end == len(whole)


def test_create_time_is_the_first_records_stamp_unless_the_batch_is_log_append_time() -> None:
    raw = bytearray(batch(3))  # stamped 1000, 1001, 1002 by its producer
    assert create_time_ms(raw) == 1000
    assert create_time_ms(raw + batch(2)) == 1000  # the first batch's
    raw[ATTRIBUTES_POS + 1] |= TIMESTAMP_TYPE_MASK  # LogAppendTime: the broker's stamp, not the producer's
    assert create_time_ms(raw) is None
    assert create_time_ms(batch(3)[:HEADER_SIZE - 1]) is None
    v1 = bytearray(batch(3))
    v1[MAGIC_POS] = 1
    assert create_time_ms(v1) is None


@given(st.binary(max_size=300))
def test_garbage_never_crashes(data: bytes) -> None:
    with contextlib.suppress(CorruptRecordError):
        list(iter_batches(data))
    create_time_ms(data)
    _batches, end = scan_valid_prefix(data)
    assert 0 <= end <= len(data)
