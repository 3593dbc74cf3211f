"""Streaming reads: checkpointed offsets, restart, read limits, Trigger.AvailableNow, new partitions."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import Broker, Produced, produce


def stream(spark: Any, broker: Broker, **options: str) -> Any:
    reader = spark.readStream.format("headwater").option("kafka.bootstrap.servers", broker.bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load().selectExpr("topic", "partition", "offset", "value")


def to_parquet(df: Any, out: Path, checkpoint: Path) -> Any:
    # The file sink is exactly-once given a replayable source: any duplicate or gap in the
    # output is the source's doing.
    return (
        df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
    )


def input_rows(query: Any) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def keys(records: list[Produced], topic: str) -> set[tuple[str, int, int, bytes | None]]:
    return {(topic, p.partition, p.offset, p.value) for p in records}


def test_stop_and_restart_reads_each_record_once(
    spark: Any, broker: Broker, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    prefix = f"s{int(time.time() * 1000) % 10**8}"
    first = new_topic(3, prefix=prefix)
    options = {"subscribePattern": f"{prefix}-.*", "startingOffsets": "earliest"}
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    expected = keys(produce(broker, first, ((None, f"a{i}".encode(), i % 3) for i in range(300))), first)

    # Run 1: Trigger.AvailableNow with a read limit: three batches of 100, then it stops.
    query = (
        to_parquet(stream(spark, broker, maxOffsetsPerTrigger="100", **options), out, checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert input_rows(query) == [100, 100, 100]

    # Between runs: more records, and a new topic matching the pattern (new partitions).
    expected |= keys(produce(broker, first, ((None, f"b{i}".encode(), i % 3) for i in range(150))), first)
    second = new_topic(2, prefix=prefix)
    expected |= keys(produce(broker, second, ((None, f"c{i}".encode(), i % 2) for i in range(50))), second)

    # Run 2: a continuous query, stopped while records are still arriving.
    query = (
        to_parquet(stream(spark, broker, **options), out, checkpoint)
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    produced_live: list[Produced] = []

    def produce_while_running() -> None:
        for burst in range(6):
            produced_live.extend(
                produce(broker, first, ((None, f"d{burst}-{i}".encode(), i % 3) for i in range(40)))
            )
            time.sleep(0.3)

    producer = threading.Thread(target=produce_while_running)
    producer.start()
    deadline = time.monotonic() + 60
    while sum(input_rows(query)) < 200 and time.monotonic() < deadline:
        time.sleep(0.2)
    query.stop()
    producer.join()
    assert sum(input_rows(query)) >= 200, "the query made no progress"
    expected |= keys(produced_live, first)

    # Run 3: restart from the checkpoint and drain everything.
    expected |= keys(produce(broker, second, ((None, f"e{i}".encode(), i % 2) for i in range(30))), second)
    query = to_parquet(stream(spark, broker, **options), out, checkpoint).trigger(availableNow=True).start()
    query.awaitTermination(120)
    assert query.exception() is None

    rows = spark.read.parquet(str(out)).collect()
    seen = [(r.topic, r.partition, r.offset, bytes(r.value)) for r in rows]
    assert len(seen) == len(set(seen)), "a record was read twice"
    assert set(seen) == expected
    assert len(expected) == 300 + 150 + 50 + 240 + 30

    # The checkpoint holds the offsets in Spark's Kafka JSON form.
    offsets_dir = checkpoint / "offsets"
    last = max(offsets_dir.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    source_offsets = json.loads(last.read_text().splitlines()[-1])
    assert set(source_offsets) == {first, second}
    assert sum(source_offsets[first].values()) == 300 + 150 + 240


def test_stream_starts_at_latest_by_default(
    spark: Any, broker: Broker, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(2)
    produce(broker, topic, ((None, b"old", i % 2) for i in range(20)))
    collected: list[tuple[int, int, bytes]] = []

    def collect(batch: Any, batch_id: int) -> None:
        collected.extend((r.partition, r.offset, bytes(r.value)) for r in batch.collect())

    query = (
        stream(spark, broker, subscribe=topic)
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        # Wait for the first (empty) batch so the starting offsets are fixed, then produce.
        deadline = time.monotonic() + 60
        while not query.recentProgress and time.monotonic() < deadline:
            time.sleep(0.1)
        fresh = produce(broker, topic, ((None, b"new", i % 2) for i in range(10)))
        while len(collected) < 10 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        query.stop()
    assert sorted(collected) == sorted((p.partition, p.offset, b"new") for p in fresh)


def test_stream_to_topic(spark: Any, broker: Broker, new_topic: Callable[..., str], tmp_path: Path) -> None:
    """readStream -> writeStream, both format headwater: the output topic gets each record once."""
    source, sink = new_topic(3), new_topic(2)
    produced = produce(broker, source, ((f"k{i}".encode(), f"v{i}".encode(), i % 3) for i in range(250)))
    writer = (
        stream(spark, broker, subscribe=source, startingOffsets="earliest", maxOffsetsPerTrigger="100")
        .selectExpr("cast(offset as string) as key", "value", "partition % 2 as partition")
        .writeStream.format("headwater")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "cp"))
    )
    for name, value in broker.producer_tuning.items():
        writer = writer.option(f"kafka.{name}", value)
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination(120)
    assert query.exception() is None
    assert input_rows(query) == [100, 100, 50]
    copied = (
        spark.read.format("headwater")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", sink)
        .load()
        .collect()
    )
    assert sorted((bytes(r.value), int(bytes(r.key)), r.partition) for r in copied) == sorted(
        (p.value, p.offset, p.partition % 2) for p in produced
    )
