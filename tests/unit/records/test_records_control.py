"""Transaction marker batches: what ``build_marker_batch`` writes parses as Kafka's
``MemoryRecords.withEndTransactionMarker`` batch (read with kafka-python's ``DefaultRecordBatch``),
and ``read_control_record`` reads the record back."""

from __future__ import annotations

import struct

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from headwater.records.batch import CorruptRecordError, crc_ok, parse_header
from headwater.records.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    ControlRecord,
    build_marker_batch,
    read_control_record,
    rebuild_batch,
)


@pytest.mark.parametrize("commit", [False, True])
def test_marker_batch_is_what_kafka_writes(commit: bool) -> None:
    raw = build_marker_batch(4242, 7, commit, 13, 1_700_000_000_000)
    header = parse_header(raw)
    assert crc_ok(raw, 0, header) and header.size == len(raw)
    # MemoryRecordsBuilder for an end marker: v2, transactional + control, no sequence, one record.
    assert (header.magic, header.attributes, header.record_count, header.last_offset_delta) == (2, 0x30, 1, 0)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4242, 7, -1)
    assert header.base_timestamp == header.max_timestamp == 1_700_000_000_000
    assert header.partition_leader_epoch == -1  # RecordBatch.NO_PARTITION_LEADER_EPOCH until the log assigns one

    batch = DefaultRecordBatch(bytes(raw))
    assert batch.validate_crc() and batch.is_control_batch and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4242, 7, -1)
    (record,) = list(batch)
    # ControlRecordType key: version 0, type (ABORT 0, COMMIT 1); EndTransactionMarker value:
    # version 0, coordinator epoch.
    assert (record.version, record.type) == (0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    assert record.commit is commit and record.abort is not commit
    assert struct.unpack(">hi", record.value) == (0, 13)
    assert record.timestamp == 1_700_000_000_000 and record.offset == 0

    assert read_control_record(raw, header) == ControlRecord(CONTROL_COMMIT if commit else CONTROL_ABORT, 13)


def test_an_emptied_control_batch_has_no_record() -> None:
    raw = build_marker_batch(1, 0, True, 0, 5)
    header = parse_header(raw)
    empty = rebuild_batch(raw, header, b"", 0)
    assert read_control_record(empty, parse_header(empty)) is None


def test_short_control_key_is_corrupt() -> None:
    # A control batch whose record key is two bytes: Kafka's ControlRecordType.parseTypeId refuses it.
    builder = DefaultRecordBatchBuilder(2, 0, True, 1, 0, -1, 1 << 20)
    builder.append(0, timestamp=5, key=b"\x00\x00", value=b"\x00\x00\x00\x00\x00\x00", headers=[])
    raw = bytearray(builder.build())
    attributes = struct.unpack_from(">h", raw, 21)[0] | 0x20
    struct.pack_into(">h", raw, 21, attributes)
    header = parse_header(raw)
    with pytest.raises(CorruptRecordError):
        read_control_record(raw, header)


def test_other_control_types_carry_no_coordinator_epoch() -> None:
    raw = build_marker_batch(1, 0, True, 9, 5)
    # Rewrite the key's type to LEADER_CHANGE (2): the same layout, so patch the byte and the CRC.
    key_at = raw.index(b"\x00\x00\x00\x01", 61)
    raw[key_at + 3] = 2
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    header = parse_header(raw)
    assert read_control_record(raw, header) == ControlRecord(2, -1)
