"""The example streaming pipeline (examples/topic_aggregation.py), stopped and restarted."""

from __future__ import annotations

import importlib.util
import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from confluent_kafka import Consumer, KafkaError
from confluent_kafka import TopicPartition as ClientTopicPartition
from conftest import REPO, Broker, produce


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "topic_aggregation", REPO / "examples" / "topic_aggregation.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_until(query: Any, total_rows: int, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if sum(p["numInputRows"] for p in query.recentProgress) >= total_rows:
                # The batch that read them has also written them once its progress is reported.
                return
            assert query.exception() is None, query.exception()
            time.sleep(0.2)
        raise AssertionError(f"the pipeline did not read {total_rows} records in {timeout_s} s")
    finally:
        query.stop()


def latest_totals(broker: Broker, topic: str, partitions: int) -> dict[str, dict[str, int]]:
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.partition.eof": True}
    )
    consumer.assign([ClientTopicPartition(topic, p, 0) for p in range(partitions)])
    totals: dict[str, dict[str, int]] = {}
    at_end: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while len(at_end) < partitions and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                if m.error() is not None:
                    assert m.error().code() == KafkaError._PARTITION_EOF
                    at_end.add(m.partition())
                    continue
                # Totals only grow, and each key's updates are in one partition, in order.
                record = json.loads(m.value())
                assert m.key() == record["key"].encode()
                totals[record["key"]] = record
    finally:
        consumer.close()
    return totals


def test_aggregation_survives_restart(
    spark: Any, broker: Broker, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    example = load_example()
    source, sink = new_topic(3), new_topic(2)
    checkpoint = str(tmp_path / "checkpoint")

    def records(start: int, count: int) -> list[tuple[bytes, bytes, None]]:
        return [(f"k{i % 4}".encode(), b"x" * (i % 7), None) for i in range(start, start + count)]

    first, second = records(0, 400), records(400, 300)
    produce(broker, source, first)
    options = {
        "bootstrap": broker.bootstrap,
        "input_topic": source,
        "output_topic": sink,
        "checkpoint": checkpoint,
    }
    run_until(example.start_pipeline(spark, trigger_seconds=0.5, **options), len(first))
    produce(broker, source, second)
    # The restarted query's progress counts only what it read itself.
    run_until(example.start_pipeline(spark, trigger_seconds=0.5, **options), len(second))

    everything = first + second
    want_records = Counter(key.decode() for key, _, _ in everything)
    want_bytes = Counter()
    for key, value, _ in everything:
        want_bytes[key.decode()] += len(value)
    got = latest_totals(broker, sink, 2)
    assert {k: v["records"] for k, v in got.items()} == dict(want_records)
    assert {k: v["bytes"] for k, v in got.items()} == dict(want_bytes)
