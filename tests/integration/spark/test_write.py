"""Writes: every row becomes exactly one acknowledged record, and failures are errors."""

from __future__ import annotations

import os
import time
import zlib
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError
from confluent_kafka import TopicPartition as ClientTopicPartition
from conftest import Broker

LARGE_ROWS = int(os.environ.get("HEADWATER_SPARK_LARGE_ROWS", "200000"))
LARGE_ROWS_TANSU = 10_000  # one record per batch against Tansu (see Broker.producer_tuning)


def writer(df: Any, broker: Broker, **options: str) -> Any:
    w = df.write.format("headwater").mode("append").option("kafka.bootstrap.servers", broker.bootstrap)
    for name, value in {**{f"kafka.{k}": v for k, v in broker.producer_tuning.items()}, **options}.items():
        w = w.option(name, value)
    return w


def consume_all(broker: Broker, topic: str, partitions: int, expected: int) -> list[Any]:
    """Every record in the topic: read until ``expected`` arrived, then a while longer for extras."""
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([ClientTopicPartition(topic, p, 0) for p in range(partitions)])
    records: list[Any] = []
    deadline = time.monotonic() + 60
    quiet_until: float | None = None
    try:
        while time.monotonic() < deadline:
            for m in consumer.consume(10_000, 0.5):
                if m.error() is None:
                    records.append(m)
                else:
                    assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
            if len(records) >= expected:
                quiet_until = quiet_until or time.monotonic() + 1.0
                if time.monotonic() > quiet_until:
                    break
        if broker.kind != "tansu":  # Tansu's high watermark is not exact (see conftest)
            ends = [
                consumer.get_watermark_offsets(ClientTopicPartition(topic, p), 10)[1]
                for p in range(partitions)
            ]
            assert sum(ends) == len(records)
    finally:
        consumer.close()
    return records


def test_write_key_value_topic_partition_headers(
    spark: Any, broker: Broker, new_topic: Callable[..., str]
) -> None:
    first, second = new_topic(3), new_topic(2)
    n = 3000
    df = spark.range(n).selectExpr(
        "cast(id as string) as key",
        "cast(concat('value-', id) as binary) as value",
        f"if(id % 2 = 0, '{first}', '{second}') as topic",
        "if(id % 5 = 0, cast(id % 2 as int), null) as partition",
        "array(named_struct('key', 'id', 'value', cast(cast(id as string) as binary))) as headers",
    )
    writer(df, broker).save()
    for topic, partitions, parity in ((first, 3, 0), (second, 2, 1)):
        got = consume_all(broker, topic, partitions, n // 2)
        ids = sorted(int(m.key()) for m in got)
        assert ids == [i for i in range(n) if i % 2 == parity]
        for m in got:
            i = int(m.key())
            assert m.value() == f"value-{i}".encode()
            assert m.headers() == [("id", str(i).encode())]
            if i % 5 == 0:
                assert m.partition() == i % 2
    # Unpartitioned keyed rows are spread by the key hash (murmur2, as Java's producer).
    spread = Counter(m.partition() for m in consume_all(broker, first, 3, n // 2))
    assert len(spread) == 3


def test_large_write_count_and_checksum(spark: Any, broker: Broker, new_topic: Callable[..., str]) -> None:
    rows = LARGE_ROWS if broker.kind != "tansu" else LARGE_ROWS_TANSU
    topic = new_topic(4)
    df = spark.range(rows).selectExpr(
        "cast(cast(id as string) as binary) as key", "cast(concat('payload-', id) as string) as value"
    )
    writer(df.repartition(2), broker, topic=topic).save()
    got = consume_all(broker, topic, 4, rows)
    assert len(got) == rows
    expected = sum(zlib.crc32(f"payload-{i}".encode()) for i in range(rows))
    assert sum(zlib.crc32(m.value()) for m in got) == expected
    assert len({m.key() for m in got}) == rows


def test_write_to_missing_topic_fails_clearly(spark: Any, broker: Broker) -> None:
    df = spark.range(3).selectExpr("cast(id as string) as value")
    with pytest.raises(Exception, match="topic 'no-such-topic' does not exist"):
        writer(df, broker, topic="no-such-topic").save()


def test_write_rejects_bad_input(spark: Any, broker: Broker, new_topic: Callable[..., str]) -> None:
    topic = new_topic(1)
    df = spark.range(3).selectExpr("cast(id as string) as key")
    with pytest.raises(Exception, match="needs a value column"):
        writer(df, broker, topic=topic).save()
    with pytest.raises(Exception, match="overwrite is not supported"):
        writer(spark.range(3).selectExpr("cast(id as string) as value"), broker, topic=topic).mode(
            "overwrite"
        ).save()
    with pytest.raises(Exception, match="column partition must be an int"):
        writer(spark.range(3).selectExpr("'x' as value", "id as partition"), broker, topic=topic).save()
