"""Streaming reads through partition reassignments, on a real three-broker ZooKeeper cluster.

Issue #7's acceptance: a streaming query stopped and restarted from its checkpoint reads no record
twice and misses none, also when a reassignment of its input topic completes in between; and a
reassignment that moves the leaders to a broker that had no replica *while* the query runs is
transparent. The moves are started with ``headwater reassign --execute`` (KIP-455 through the
controller), exactly as an operator would. Every record carries its own number, and the output
goes to Spark's file sink, which is exactly-once for a replayable source: a duplicate or a gap in
the output is the source's doing.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message, Producer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cluster"))

from cluster_support import LocalCluster, run_cli, start_cluster, wait_for

# Both partitions start on brokers 1 and 2; the moves take each partition's leader out of its
# replica set and add broker 3, so the leader must move to a broker that had no copy of the data.
INITIAL_ASSIGNMENT = "1:2,2:1"
TARGET = {0: [3, 2], 1: [3, 1]}
PARTITIONS = 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    running = start_cluster(tmp_path_factory.mktemp("spark-reassign"), size=3)
    try:
        yield running
    finally:
        running.stop()


class NumberedProducer:
    """confluent-kafka, idempotent with acks=all; keeps the numbers the cluster acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.next = 0
        self.acked: set[int] = set()
        self.failures: list[str] = []
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
                "log_level": 3,
            }
        )

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        value = message.value()
        assert value is not None
        if error is None:
            self.acked.add(int(value))
        else:
            self.failures.append(f"{value!r}: {error}")

    def send(self, count: int) -> None:
        for _ in range(count):
            self._producer.produce(
                self.topic,
                value=b"%d" % self.next,
                partition=self.next % PARTITIONS,
                on_delivery=self._on_delivery,
            )
            self.next += 1
        self._producer.poll(0)

    def flush(self) -> None:
        assert self._producer.flush(120) == 0, "records still unacknowledged after 120 s"
        assert not self.failures, self.failures[:5]


def create_topic(cluster: LocalCluster, topic: str) -> None:
    run_cli(
        "topics",
        "--bootstrap-server",
        cluster.bootstrap,
        "--create",
        "--topic",
        topic,
        "--replica-assignment",
        INITIAL_ASSIGNMENT,
    )
    wait_for(
        lambda: (
            len(cluster.describe(topic)) == PARTITIONS and all(line.full for line in cluster.describe(topic))
        ),
        60,
        f"topic {topic} with full ISRs",
    )


def start_reassignment(cluster: LocalCluster, topic: str, tmp_path: Path) -> None:
    plan = tmp_path / f"{topic}-plan.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": topic, "partition": p, "replicas": replicas} for p, replicas in TARGET.items()
                ],
            }
        )
    )
    out = run_cli(
        "reassign",
        "--bootstrap-server",
        cluster.bootstrap,
        "--execute",
        "--reassignment-json-file",
        str(plan),
    )
    assert "Successfully started partition reassignments" in out, out


def wait_reassigned(cluster: LocalCluster, topic: str) -> None:
    """The moves are complete: the target replicas, all in sync, led by broker 3, nothing pending."""

    def done() -> bool:
        lines = {line.partition: line for line in cluster.describe(topic)}
        return all(
            list(lines[p].replicas) == replicas and lines[p].full and lines[p].leader == replicas[0]
            for p, replicas in TARGET.items()
        )

    wait_for(done, 120, f"the reassignment of {topic} to complete")
    out = run_cli("reassign", "--bootstrap-server", cluster.bootstrap, "--list")
    assert out.strip() == "No partition reassignments found.", out


def to_files(spark: Any, bootstrap: str, topic: str, out: Path, checkpoint: Path) -> Any:
    return (
        spark.readStream.format("headwater")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("partition", "offset", "cast(value as string) as value")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
    )


def numbers_read(spark: Any, out: Path) -> list[int]:
    return [int(row.value) for row in spark.read.parquet(str(out)).select("value").collect()]


def positions_read(spark: Any, out: Path) -> list[tuple[int, int]]:
    return [(row.partition, row.offset) for row in spark.read.parquet(str(out)).collect()]


def run_available_now(spark: Any, bootstrap: str, topic: str, out: Path, checkpoint: Path) -> None:
    query = to_files(spark, bootstrap, topic, out, checkpoint).trigger(availableNow=True).start()
    assert query.awaitTermination(180), "the availableNow query did not finish within 180 s"
    assert query.exception() is None


def test_restart_after_a_completed_reassignment_reads_each_record_once(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    topic = "spark-moved-between-runs"
    create_topic(cluster, topic)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    producer = NumberedProducer(cluster.bootstrap, topic)
    producer.send(500)
    producer.flush()

    run_available_now(spark, cluster.bootstrap, topic, out, checkpoint)
    assert sorted(numbers_read(spark, out)) == list(range(500))

    # Between the runs: more records, a complete move of every partition (the leaders go to
    # broker 3, which had no copy), then more records on the new leaders.
    producer.send(300)
    producer.flush()
    start_reassignment(cluster, topic, tmp_path)
    wait_reassigned(cluster, topic)
    producer.send(200)
    producer.flush()

    run_available_now(spark, cluster.bootstrap, topic, out, checkpoint)
    numbers = numbers_read(spark, out)
    assert len(numbers) == len(set(numbers)), "a record was read twice"
    assert set(numbers) == producer.acked == set(range(1000))
    positions = positions_read(spark, out)
    assert len(positions) == len(set(positions)) == 1000


def test_reassignment_while_the_stream_runs_is_transparent(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    topic = "spark-moved-while-reading"
    create_topic(cluster, topic)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    producer = NumberedProducer(cluster.bootstrap, topic)
    producer.send(200)
    producer.flush()

    query = (
        to_files(spark, cluster.bootstrap, topic, out, checkpoint)
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    stop_producing = threading.Event()

    def produce_steadily() -> None:
        # About 200 records a second, through the whole move and after it.
        while not stop_producing.is_set():
            producer.send(20)
            time.sleep(0.1)

    feeder = threading.Thread(target=produce_steadily, daemon=True)
    feeder.start()
    try:
        wait_for(lambda: any(p["numInputRows"] for p in query.recentProgress), 120, "the first micro-batch")
        start_reassignment(cluster, topic, tmp_path)
        wait_reassigned(cluster, topic)
        # The query keeps reading from the new leaders.
        moved_at = producer.next
        wait_for(
            lambda: query.exception() is None and _committed_beyond(query, moved_at),
            120,
            "the query to read records produced after the move",
        )
    finally:
        stop_producing.set()
        feeder.join(30)
    producer.flush()
    total = producer.next
    wait_for(
        lambda: query.exception() is None and _committed_total(query) >= total,
        120,
        "the query to catch up with every acknowledged record",
    )
    query.stop()
    assert query.exception() is None

    numbers = numbers_read(spark, out)
    assert len(numbers) == len(set(numbers)), "a record was read twice"
    assert set(numbers) == producer.acked == set(range(total))


def _committed_total(query: Any) -> int:
    """Records the query has read so far, by the end offsets of its last micro-batch."""
    progress = query.lastProgress
    if not progress or not progress["sources"]:
        return 0
    end = progress["sources"][0]["endOffset"]
    if isinstance(end, str):
        end = json.loads(end)
    return sum(int(offset) for partitions in end.values() for offset in partitions.values())


def _committed_beyond(query: Any, records: int) -> bool:
    return _committed_total(query) > records
