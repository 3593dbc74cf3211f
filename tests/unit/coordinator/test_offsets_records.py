"""__consumer_offsets record formats and the group -> partition mapping, against Kafka's."""

from __future__ import annotations

import pytest

from headwater.coordinator.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    RecordFormatError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    java_string_hashcode,
    partition_for,
    subscribed_topics,
)


@pytest.mark.parametrize(("s", "h"), [
    ("", 0),
    ("a", 97),
    ("hello", 99162322),
    ("polygenelubricants", -(2**31)),  # the classic String whose hashCode is Integer.MIN_VALUE
    ("\U0001F600", 0xD83D * 31 + 0xDE00),  # outside the BMP: two UTF-16 code units
    ("console-consumer-12345", java_string_hashcode("console-consumer-12345")),
])
def test_java_string_hashcode(s: str, h: int) -> None:
    assert java_string_hashcode(s) == h


def test_partition_for_follows_utils_abs() -> None:
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0
    assert partition_for("hello", 50) == 99162322 % 50
    # A negative hash: abs, then modulo.
    neg = next(s for s in (f"group-{i}" for i in range(1000)) if java_string_hashcode(s) < 0)
    assert partition_for(neg, 50) == abs(java_string_hashcode(neg)) % 50


def test_offset_records_are_kafkas_bytes() -> None:
    key = encode_offset_key(OffsetKey("g", "t", 3))
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    value = encode_offset_value(OffsetValue(42, 7, "m", 1000))
    assert value == (b"\x00\x03" + (42).to_bytes(8, "big") + (7).to_bytes(4, "big") + b"\x00\x01m"
                     + (1000).to_bytes(8, "big"))
    assert decode_key(key) == OffsetKey("g", "t", 3)
    assert decode_offset_value(value) == OffsetValue(42, 7, "m", 1000)
    # v1 (with the expire timestamp) and v0 are read too.
    v1 = b"\x00\x01" + (5).to_bytes(8, "big") + b"\x00\x00" + (9).to_bytes(8, "big") + (10).to_bytes(8, "big")
    assert decode_offset_value(v1) == OffsetValue(5, -1, "", 9)


def test_group_records_round_trip() -> None:
    value = GroupValue("consumer", 4, "range", "m-1", 123, (
        MemberValue("m-1", "i-1", "c", "/127.0.0.1", 30000, 10000, b"sub", b"asg"),
        MemberValue("m-2", None, "c", "/127.0.0.1", 30000, 10000, b"", b""),
    ))
    assert decode_group_value(encode_group_value(value)) == value
    assert decode_key(encode_group_key(GroupKey("g"))) == GroupKey("g")
    empty = GroupValue("consumer", 5, None, None, 9, ())
    assert decode_group_value(encode_group_value(empty)) == empty


def test_bad_records_are_refused() -> None:
    with pytest.raises(RecordFormatError):
        decode_key(b"\x00\x07\x00\x01g")
    with pytest.raises(RecordFormatError):
        decode_offset_value(b"\x00\x03\x00")
    with pytest.raises(RecordFormatError):
        decode_group_value(b"\x00\x09")


def test_subscribed_topics() -> None:
    sub = b"\x00\x01" + b"\x00\x00\x00\x02" + b"\x00\x01a" + b"\x00\x02bb" + b"\xff\xff\xff\xff"
    assert subscribed_topics(sub) == {"a", "bb"}
    assert subscribed_topics(b"\x00") == frozenset()
