"""The pure parts of ``headwater groups``: assignment bytes, tables, --topic and --to-datetime parsing."""

from __future__ import annotations

import click
import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from headwater.admin.groups import decode_assignment, parse_datetime, parse_topic_partitions, table


def test_decode_assignment_reads_what_kafka_python_writes() -> None:
    A = ConsumerProtocolAssignment
    raw = A(version=0, assigned_partitions=[A.TopicPartition(topic="t", partitions=[0, 2]),
                                            A.TopicPartition(topic="u", partitions=[5])], user_data=b"").encode()
    assert decode_assignment(bytes(raw)) == {"t": [0, 2], "u": [5]}
    assert decode_assignment(b"") == {}
    assert decode_assignment(b"\x00\x00\x00\x00\x00\x01\x00") == {}  # truncated: nothing rather than garbage


def test_table_is_aligned_like_kafkas() -> None:
    assert table(["GROUP", "LAG"], [["g", "10"], ["longer-group", "-"]]) == [
        "GROUP        LAG", "g            10", "longer-group -"]


def test_parse_topic_partitions() -> None:
    assert parse_topic_partitions(["t", "u:0,3"]) == [("t", None), ("u", [0, 3])]
    with pytest.raises(click.BadParameter):
        parse_topic_partitions(["u:a"])
    with pytest.raises(click.BadParameter):
        parse_topic_partitions([":1"])


def test_parse_datetime() -> None:
    assert parse_datetime("1970-01-01T00:00:01.500") == 1500
    assert parse_datetime("1970-01-01T01:00:00.000+01:00") == 0
    assert parse_datetime("1970-01-01T00:00:00Z") == 0
    with pytest.raises(click.BadParameter):
        parse_datetime("yesterday")
