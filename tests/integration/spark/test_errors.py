"""Failures give a clear error, or with failOnDataLoss=false a skip: never silently wrong data."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition as ClientTopicPartition
from confluent_kafka.admin import AdminClient
from conftest import Broker, free_port, produce

from headwater.spark import TopicDataSource
from headwater.spark.fetcher import read_range
from headwater.spark.options import parse_read_options
from headwater.spark.ranges import OffsetRange
from headwater.spark.schema import read_schema


def load(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.read.format("headwater").option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def delete_records_before(broker: Broker, topic: str, partition: int, offset: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.delete_records([ClientTopicPartition(topic, partition, offset)]).values():
        future.result(timeout=30)


def test_unreachable_broker(spark: Any) -> None:
    closed = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(Exception, match=f"listing topics failed against kafka.bootstrap.servers={closed}"):
        load(
            spark,
            closed,
            subscribe="anything",
            metadataTimeoutMs="1000",
            **{"fetchOffset.numRetries": "2", "fetchOffset.retryIntervalMs": "100"},
        ).count()
    assert time.monotonic() - started < 30


def test_missing_topic_batch_and_stream(spark: Any, broker: Broker, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="topic 'no-such-topic' does not exist"):
        load(spark, broker.bootstrap, subscribe="no-such-topic").count()
    query = (
        spark.readStream.format("headwater")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", "no-such-topic")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .start()
    )
    with pytest.raises(Exception, match="topic 'no-such-topic' does not exist"):
        query.awaitTermination(60)
    # Asking must not have created it (a broker with auto-create would, for a named Metadata request).
    assert (
        "no-such-topic"
        not in AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics
    )


def test_offsets_beyond_the_log(spark: Any, broker: Broker, new_topic: Callable[..., str]) -> None:
    topic = new_topic(2)
    acked = produce(broker, topic, ((None, f"v{i}".encode(), i % 2) for i in range(100)))
    starting = json.dumps({topic: {"0": 500, "1": -2}})
    with pytest.raises(Exception, match=f"starting offset 500 of {topic}-0 is beyond the end of the log"):
        load(spark, broker.bootstrap, subscribe=topic, startingOffsets=starting).count()
    skipped = load(spark, broker.bootstrap, subscribe=topic, startingOffsets=starting, failOnDataLoss="false")
    assert sorted(r.offset for r in skipped.collect()) == sorted(p.offset for p in acked if p.partition == 1)
    ending = json.dumps({topic: {"0": 10, "1": 900}})
    with pytest.raises(Exception, match=f"ending offset 900 of {topic}-1 is beyond the end of the log"):
        load(spark, broker.bootstrap, subscribe=topic, endingOffsets=ending).count()
    with pytest.raises(Exception, match="must give every partition read"):
        load(spark, broker.bootstrap, subscribe=topic, startingOffsets=json.dumps({topic: {"0": 1}})).count()


def test_deleted_records_batch(spark: Any, broker: Broker, new_topic: Callable[..., str]) -> None:
    topic = new_topic(1)
    produce(broker, topic, ((None, f"v{i}".encode(), 0) for i in range(100)))
    delete_records_before(broker, topic, 0, 40)
    starting = json.dumps({topic: {"0": 10}})
    with pytest.raises(Exception, match=rf"offsets \[10, 40\) of {topic}-0 are no longer in the log"):
        load(spark, broker.bootstrap, subscribe=topic, startingOffsets=starting).count()
    rest = load(spark, broker.bootstrap, subscribe=topic, startingOffsets=starting, failOnDataLoss="false")
    assert sorted(r.offset for r in rest.collect()) == list(range(40, 100))


def test_deleted_records_under_a_stream(
    spark: Any, broker: Broker, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """The checkpoint points at records that are gone by the restart: the task sees it."""
    topic = new_topic(1)
    produce(broker, topic, ((None, f"a{i}".encode(), 0) for i in range(20)))

    def run(fail_on_data_loss: str, checkpoint: Path, out: list[int]) -> Any:
        def collect(batch: Any, batch_id: int) -> None:
            out.extend(r.offset for r in batch.collect())

        query = (
            spark.readStream.format("headwater")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("failOnDataLoss", fail_on_data_loss)
            .load()
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        return query

    strict: list[int] = []
    lenient: list[int] = []
    first = run("true", tmp_path / "strict", strict)
    first.awaitTermination(60)
    assert strict == list(range(20))
    lenient_first = run("false", tmp_path / "lenient", lenient)
    lenient_first.awaitTermination(60)
    assert lenient == list(range(20))
    produce(broker, topic, ((None, f"b{i}".encode(), 0) for i in range(30)))
    delete_records_before(broker, topic, 0, 35)
    with pytest.raises(Exception, match=rf"offsets \[20, 35\) of {topic}-0 are no longer in the log"):
        run("true", tmp_path / "strict", strict).awaitTermination(60)
    run("false", tmp_path / "lenient", lenient).awaitTermination(60)
    assert lenient == list(range(20)) + list(range(35, 50))


def test_data_loss_skips_are_logged(
    broker: Broker, new_topic: Callable[..., str], caplog: pytest.LogCaptureFixture
) -> None:
    """failOnDataLoss=false skips lost records with a warning, on the driver and in a task.

    Spark runs planning and tasks in its Python workers, whose log lines go to the executor's
    stderr; here the same code runs in this process so the warnings can be read back.
    """
    topic = new_topic(1)
    produce(broker, topic, ((None, f"v{i}".encode(), 0) for i in range(100)))
    delete_records_before(broker, topic, 0, 40)
    options = {
        "kafka.bootstrap.servers": broker.bootstrap,
        "subscribe": topic,
        "startingoffsets": json.dumps({topic: {"0": 10}}),
        "failondataloss": "false",
    }
    caplog.set_level(logging.WARNING, logger="headwater.spark")

    # Planning (the driver's side): the range starts where the log now starts.
    reader = TopicDataSource(options).reader(read_schema(False))
    ranges = list(reader.partitions())
    assert [(r.from_offset, r.until_offset) for r in ranges] == [(40, 100)]
    planned = [r.getMessage() for r in caplog.records if r.name == "headwater.spark"]
    assert any(
        f"offsets [10, 40) of {topic}-0 are no longer in the log" in m and "failOnDataLoss=false" in m
        for m in planned
    ), planned

    # A task whose range was planned before the deletion: it skips to the log start, logs it,
    # and reads the rest exactly.
    caplog.clear()
    opts = parse_read_options(options, streaming=False)
    rows = [
        offset
        for batch in read_range(OffsetRange(topic, 0, 10, 100), opts)
        for offset in batch.column("offset").to_pylist()
    ]
    assert rows == list(range(40, 100))
    skipped = [r.getMessage() for r in caplog.records if r.name == "headwater.spark"]
    assert any(f"skipping offsets [10, 40) of {topic}-0: the log now starts at 40" in m for m in skipped), (
        skipped
    )
