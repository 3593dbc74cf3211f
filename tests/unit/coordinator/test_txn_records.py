"""__transaction_state record formats against Kafka's TransactionLogKey / TransactionLogValue schemas.

The expected bytes are built by hand from the JSON schemas (field by field, in schema order), and
cross-checked with kafka-python's generic schema codec fed the same schemas.
"""

from __future__ import annotations

import json
import struct
import types
from pathlib import Path
from typing import Any

import pytest

from headwater.coordinator.txn_records import (
    STATE_IDS,
    TxnRecordFormatError,
    TxnState,
    TxnValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

S = TxnState


def i8(n: int) -> bytes:
    return struct.pack(">b", n)


def i16(n: int) -> bytes:
    return struct.pack(">h", n)


def i32(n: int) -> bytes:
    return struct.pack(">i", n)


def i64(n: int) -> bytes:
    return struct.pack(">q", n)


def string(s: str) -> bytes:
    return i16(len(s.encode())) + s.encode()


ONGOING = TxnValue(producer_id=4001, producer_epoch=7, timeout_ms=60_000, state=S.ONGOING,
                   partitions=(("orders", 0), ("orders", 2), ("payments", 1)), last_update_ms=1_700_000_000_123,
                   start_ms=1_700_000_000_000)
EMPTY = TxnValue(4001, 8, 30_000, S.EMPTY, (), 1_700_000_000_500, -1)


def test_state_ids_are_kafkas() -> None:
    # TransactionState.fromId: the status byte of every state
    assert {s.value: i for s, i in STATE_IDS.items()} == {
        "Empty": 0, "Ongoing": 1, "PrepareCommit": 2, "PrepareAbort": 3, "CompleteCommit": 4, "CompleteAbort": 5,
        "Dead": 6, "PrepareEpochFence": 7}


def test_key_v0() -> None:
    # TransactionLog.keyToBytes: int16 version 0, then TransactionalId as an int16-length string
    assert encode_key("tx-é") == i16(0) + i16(5) + b"tx-\xc3\xa9"
    assert decode_key(encode_key("tx-é")) == "tx-é"


def test_value_v0_ongoing() -> None:
    # TransactionLogValue v0: ProducerId, ProducerEpoch, TransactionTimeoutMs, TransactionStatus,
    # TransactionPartitions [Topic, [PartitionIds]], TransactionLastUpdateTimestampMs, TransactionStartTimestampMs
    expected = (i16(0) + i64(4001) + i16(7) + i32(60_000) + i8(1)
                + i32(2) + string("orders") + i32(2) + i32(0) + i32(2) + string("payments") + i32(1) + i32(1)
                + i64(1_700_000_000_123) + i64(1_700_000_000_000))
    assert encode_value(ONGOING) == expected
    assert decode_value(expected) == ONGOING


def test_value_v0_empty_has_null_partitions_and_complete_an_empty_list() -> None:
    # TransactionLog.valueToBytes writes null partitions for Empty, the (cleared) set otherwise
    assert encode_value(EMPTY) == (i16(0) + i64(4001) + i16(8) + i32(30_000) + i8(0) + i32(-1)
                                   + i64(1_700_000_000_500) + i64(-1))
    done = TxnValue(4001, 7, 60_000, S.COMPLETE_COMMIT, (), 5, 3)
    assert encode_value(done) == i16(0) + i64(4001) + i16(7) + i32(60_000) + i8(4) + i32(0) + i64(5) + i64(3)
    assert decode_value(encode_value(done)) == done


def test_value_v1_flexible() -> None:
    # v1 (transaction.version >= 1): compact arrays/strings (length + 1 as unsigned varints) and
    # an empty tagged-field section after each struct
    expected = (i16(1) + i64(4001) + i16(7) + i32(60_000) + i8(1)
                + b"\x03" + b"\x07orders" + b"\x03" + i32(0) + i32(2) + b"\x00"
                + b"\x09payments" + b"\x02" + i32(1) + b"\x00"
                + i64(1_700_000_000_123) + i64(1_700_000_000_000) + b"\x00")
    assert encode_value(ONGOING, version=1) == expected
    assert decode_value(expected) == ONGOING
    empty_v1 = i16(1) + i64(4001) + i16(8) + i32(30_000) + i8(0) + b"\x00" + i64(1_700_000_000_500) + i64(-1) + b"\x00"
    assert encode_value(EMPTY, version=1) == empty_v1
    assert decode_value(empty_v1) == EMPTY


def test_v1_unknown_tagged_fields_are_skipped() -> None:
    # a newer Kafka adds tagged fields (4.0: PreviousProducerId, ...): a reader must step over them
    raw = bytearray(encode_value(ONGOING, version=1))
    raw[-1:] = b"\x02" + b"\x00\x08" + i64(12) + b"\x01\x02" + i16(3)
    assert decode_value(bytes(raw)) == ONGOING


def test_partitions_of_an_empty_record_are_ignored() -> None:
    # TransactionLog.readTxnRecordValue adds partitions only when the state is not Empty
    raw = i16(0) + i64(1) + i16(0) + i32(1000) + i8(0) + i32(1) + string("t") + i32(1) + i32(0) + i64(2) + i64(-1)
    assert decode_value(raw).partitions == ()


@pytest.mark.parametrize("raw", [
    i16(2) + i64(1),  # value version 2 does not exist in 3.9
    i16(0) + i64(1) + i16(0) + i32(1000) + i8(9) + i32(-1) + i64(2) + i64(-1),  # status 9
    i16(0) + i64(1) + i16(0),  # truncated
])
def test_unreadable_values(raw: bytes) -> None:
    with pytest.raises(TxnRecordFormatError):
        decode_value(raw)


def test_unknown_key_version() -> None:
    # readTxnRecordKey: any version but 0 is an UnknownKey, skipped on load
    with pytest.raises(TxnRecordFormatError):
        decode_key(i16(1) + string("x"))


# --- the same schemas through kafka-python's generic codec ---------------------------------------------------

KEY_SCHEMA = {"type": "data", "name": "TransactionLogKey", "validVersions": "0", "flexibleVersions": "none",
              "fields": [{"name": "TransactionalId", "type": "string", "versions": "0"}]}
VALUE_SCHEMA = {
    "type": "data", "name": "TransactionLogValue", "validVersions": "0-1", "flexibleVersions": "1+",
    "fields": [
        {"name": "ProducerId", "type": "int64", "versions": "0+"},
        {"name": "ProducerEpoch", "type": "int16", "versions": "0+"},
        {"name": "TransactionTimeoutMs", "type": "int32", "versions": "0+"},
        {"name": "TransactionStatus", "type": "int8", "versions": "0+"},
        {"name": "TransactionPartitions", "type": "[]PartitionsSchema", "versions": "0+", "nullableVersions": "0+",
         "fields": [{"name": "Topic", "type": "string", "versions": "0+"},
                    {"name": "PartitionIds", "type": "[]int32", "versions": "0+"}]},
        {"name": "TransactionLastUpdateTimestampMs", "type": "int64", "versions": "0+"},
        {"name": "TransactionStartTimestampMs", "type": "int64", "versions": "0+"},
    ]}


@pytest.fixture
def kafka_python_schemas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    api_data = pytest.importorskip("kafka.protocol.api_data")
    pkg = tmp_path / "hw_txn_log_schemas"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "TransactionLogKey.json").write_text(json.dumps(KEY_SCHEMA))
    (pkg / "TransactionLogValue.json").write_text(json.dumps(VALUE_SCHEMA))
    monkeypatch.syspath_prepend(str(tmp_path))

    # The class name picks the schema file of the package (ApiData's load_json).
    return tuple(types.new_class(name, (api_data.ApiData,), {"load_json": "hw_txn_log_schemas"})
                 for name in ("TransactionLogKey", "TransactionLogValue"))  # type: ignore[return-value]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python reads its schemas with read_text
@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("value", [ONGOING, EMPTY, TxnValue(9, 32767, 1, S.PREPARE_ABORT, (("a", 3),), 0, 0)])
def test_against_kafka_python(kafka_python_schemas: tuple[Any, Any], value: TxnValue, version: int) -> None:
    key_cls, value_cls = kafka_python_schemas
    assert encode_key("txn-1") == key_cls(transactional_id="txn-1").encode(version=0)
    topics: dict[str, list[int]] = {}
    for t, p in value.partitions:
        topics.setdefault(t, []).append(p)
    theirs = value_cls(
        producer_id=value.producer_id, producer_epoch=value.producer_epoch, transaction_timeout_ms=value.timeout_ms,
        transaction_status=STATE_IDS[value.state],
        transaction_partitions=None if value.state == S.EMPTY else [
            {"topic": t, "partition_ids": ps} for t, ps in sorted(topics.items())],
        transaction_last_update_timestamp_ms=value.last_update_ms,
        transaction_start_timestamp_ms=value.start_ms).encode(version=version)
    assert encode_value(value, version=version) == theirs
    assert decode_value(theirs) == value
