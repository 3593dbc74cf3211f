"""Exactly-once writes (exactlyOnce=true): a task's output is committed once, whatever fails.

Four levels, cheapest first:
- the task function alone (no Spark): a zombie attempt's open transaction is fenced and aborted,
  a task whose write is recorded writes nothing, a new batch or job writes again;
- a stream in the shared session whose last micro-batch is replayed (its commit-log entry deleted,
  the state a driver crash between the tasks' commits and Spark's commit log leaves): the
  exactly-once sink skips, the at-least-once sink writes the batch twice;
- a stream in its own Spark process, killed with SIGKILL while one task's transaction is open and
  the other task has committed, then restarted from its checkpoint (``eos_app.py``);
- a batch write in its own Spark process (``local[2,2]``: a failed task is retried) whose task
  fails once mid-way through its rows.
The outputs are read read_committed (librdkafka, and the data source with
kafka.isolation.level=read_committed) and must hold each input record exactly once. The source's
read_committed reads are also checked against aborted and open transactions.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as ClientTopicPartition
from confluent_kafka.admin import AdminClient
from conftest import REPO, Broker, produce, running_broker

from headwater.spark.options import parse_write_options
from headwater.spark.transactional import (
    TaskWrite,
    decode_record,
    record_group,
    transactional_id,
    write_transactional,
)

APP = Path(__file__).with_name("eos_app.py")
SPARK_APP_TIMEOUT_S = 240


@pytest.fixture(scope="module")
def broker(broker: Broker) -> Iterator[Broker]:
    """Exactly-once writes stand on headwater's transactions: these tests run against headwater
    whichever broker HEADWATER_TEST_BROKER names for the rest of the Spark tests."""
    if broker.kind == "headwater":
        yield broker
        return
    with running_broker("headwater") as headwater:
        yield headwater


def read_topic(broker: Broker, topic: str, partitions: int, isolation: str) -> list[tuple[int, bytes]]:
    """Every record of the topic from offset 0 up to its end (the LSO for read_committed)."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    consumer.assign([ClientTopicPartition(topic, p, 0) for p in range(partitions)])
    records: list[tuple[int, bytes]] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"{topic} did not reach its end in 60 s"
            for m in consumer.consume(10_000, 0.5):
                if m.error() is None:
                    records.append((m.partition(), bytes(m.value())))
                    at_end.discard(m.partition())
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                else:
                    raise AssertionError(m.error())
    finally:
        consumer.close()
    return records


def recorded(broker: Broker, group: str) -> list[tuple[str, int] | None]:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], require_stable=True)[
            group
        ].result()
    except KafkaException:
        return []
    return [decode_record(tp.metadata) for tp in result.topic_partitions or []]


def eos_options(broker: Broker, topic: str, prefix: str, **extra: str) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": broker.bootstrap,
        "topic": topic,
        "exactlyOnce": "true",
        "transactionalIdPrefix": prefix,
        **extra,
    }


def rows(values: list[bytes]) -> pa.RecordBatch:
    return pa.record_batch([pa.array(values, pa.binary())], names=["value"])


def test_task_fences_zombie_and_skips_recorded_write(broker: Broker, new_topic: Callable[..., str]) -> None:
    topic = new_topic(2)
    prefix = f"eos-unit-{uuid.uuid4().hex[:8]}"
    # Spark hands a data source its options with lower-case names.
    opts = parse_write_options({k.lower(): v for k, v in eos_options(broker, topic, prefix).items()})

    # A zombie: an earlier attempt of Spark partition 0 that wrote and never ended its transaction.
    zombie = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": transactional_id(prefix, 0)})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    for i in range(5):
        zombie.produce(topic, b"zombie-%d" % i, partition=i % 2)
    assert zombie.flush(30) == 0

    first = TaskWrite(partition=0, write_id="job-a", batch_id=0, attempt=1)
    values = [b"a-%d" % i for i in range(10)]
    result = write_transactional(iter([rows(values)]), opts, first)
    assert result.records == 10 and not result.skipped
    # The zombie was fenced: its commit fails fatally, its records were aborted.
    with pytest.raises(KafkaException) as fenced:
        zombie.commit_transaction(30)
    assert fenced.value.args[0].fatal()
    assert recorded(broker, record_group(prefix, 0)) == [("job-a", 0)]

    # Another attempt of the same task (its first committed, Spark did not learn it): no rows.
    again = write_transactional(iter([rows(values)]), opts, TaskWrite(0, "job-a", 0, attempt=2))
    assert again.skipped and again.records == 0
    # A later micro-batch and another job with the same prefix do write; empty input writes nothing.
    assert write_transactional(iter([rows([b"b-0"])]), opts, TaskWrite(0, "job-a", 1)).records == 1
    assert write_transactional(iter([rows([b"c-0"])]), opts, TaskWrite(0, "job-b", 0)).records == 1
    assert write_transactional(iter([rows([])]), opts, TaskWrite(0, "job-c", 0)).records == 0
    # Partition 1 of the same write has its own transactional.id and record.
    assert write_transactional(iter([rows([b"p1-0"])]), opts, TaskWrite(1, "job-a", 0)).records == 1

    committed = Counter(v for _, v in read_topic(broker, topic, 2, "read_committed"))
    assert committed == Counter([*values, b"b-0", b"c-0", b"p1-0"])
    everything = Counter(v for _, v in read_topic(broker, topic, 2, "read_uncommitted"))
    assert everything - committed == Counter(b"zombie-%d" % i for i in range(5))


def test_replayed_micro_batch_is_skipped(
    spark: Any, broker: Broker, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """The driver dies after the tasks of batch 2 committed and before Spark's commit log has it:
    the restarted query runs batch 2 again. Exactly-once: no duplicate; at-least-once: batch 2
    twice. The exactly-once output is also read back through the data source, read_committed."""
    source = new_topic(3)
    outputs = {"eos": new_topic(2), "alo": new_topic(2)}
    produce(broker, source, ((None, f"r{i}".encode(), i % 3) for i in range(300)))
    prefix = f"eos-replay-{uuid.uuid4().hex[:8]}"

    def run(mode: str) -> Any:
        writer = (
            spark.readStream.format("headwater")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "100")
            .load()
            .selectExpr("value")
            .writeStream.format("headwater")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", outputs[mode])
            .option("checkpointLocation", str(tmp_path / mode))
        )
        if mode == "eos":
            writer = writer.option("exactlyOnce", "true").option("transactionalIdPrefix", prefix)
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination(180)
        assert query.exception() is None, query.exception()
        return query

    for mode in outputs:
        run(mode)
        commits = tmp_path / mode / "commits"
        last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
        assert last == 2
        for stale in (commits / str(last), commits / f".{last}.crc"):
            stale.unlink(missing_ok=True)
        replay = run(mode)
        assert [p["batchId"] for p in replay.recentProgress] == [2]

    expected = Counter(f"r{i}".encode() for i in range(300))
    eos = Counter(v for _, v in read_topic(broker, outputs["eos"], 2, "read_committed"))
    assert eos == expected
    alo = Counter(v for _, v in read_topic(broker, outputs["alo"], 2, "read_uncommitted"))
    duplicated = alo - expected
    assert sum(duplicated.values()) == 100 and set(duplicated) <= set(expected)
    # One record per Spark partition that had rows, all of one query; the last names batch 2.
    records = [r for p in range(3) for r in recorded(broker, record_group(prefix, p))]
    assert records and all(r is not None for r in records)
    assert len({r[0] for r in records if r}) == 1 and max(r[1] for r in records if r) == 2

    through_source = (
        spark.read.format("headwater")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", outputs["eos"])
        .option("kafka.isolation.level", "read_committed")
        .load()
        .collect()
    )
    assert Counter(bytes(r.value) for r in through_source) == expected


def test_source_reads_committed_records_only(spark: Any, broker: Broker, new_topic: Callable[..., str]) -> None:
    """kafka.isolation.level=read_committed: no record of an aborted transaction, and nothing from
    an open transaction's first record on (the last stable offset), until it commits."""
    topic = new_topic(2)
    txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"src-{topic}"})
    txn.init_transactions(30)
    for tag, commit in ((b"a", True), (b"b", False)):
        txn.begin_transaction()
        for i in range(10):
            txn.produce(topic, tag + b"%d" % i, partition=i % 2)
        assert txn.flush(30) == 0
        if commit:
            txn.commit_transaction(30)
        else:
            txn.abort_transaction(30)
    produce(broker, topic, ((None, b"plain-before", p) for p in (0, 1)))
    pending = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"open-{topic}"})
    pending.init_transactions(30)
    pending.begin_transaction()
    for i in range(4):
        pending.produce(topic, b"c%d" % i, partition=i % 2)
    assert pending.flush(30) == 0
    produce(broker, topic, ((None, b"plain-after", p) for p in (0, 1)))

    def read(isolation: str) -> Counter[bytes]:
        df = (
            spark.read.format("headwater")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic)
            .option("kafka.isolation.level", isolation)
            .option("kafkaConsumer.pollTimeoutMs", "20000")
            .load()
        )
        return Counter(bytes(r.value) for r in df.collect())

    a = Counter(b"a%d" % i for i in range(10))
    b = Counter(b"b%d" % i for i in range(10))
    c = Counter(b"c%d" % i for i in range(4))
    before, after = Counter({b"plain-before": 2}), Counter({b"plain-after": 2})
    assert read("read_committed") == a + before
    assert read("read_uncommitted") == a + b + before + c + after
    pending.commit_transaction(30)
    assert read("read_committed") == a + before + c + after


def run_app(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(APP), *args],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        # Its own process group: the kill takes the JVM and its Python workers along.
        start_new_session=True,
    )


def finish_app(proc: subprocess.Popen[bytes], timeout_s: float = SPARK_APP_TIMEOUT_S) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, _ = proc.communicate()
        raise AssertionError("the Spark app did not finish:\n" + out.decode(errors="replace")[-4000:]) from None
    text = out.decode(errors="replace")
    # A Java stack trace fills the tail: the exceptions' own lines name the cause.
    causes = [line for line in text.splitlines() if "Exception:" in line or "Error:" in line or "Caused by" in line]
    assert proc.returncode == 0, (f"the Spark app failed ({proc.returncode}):\n" + "\n".join(causes[:30])
                                  + f"\n--- the output's end ---\n{text[-6000:]}")
    return text


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def app_result(output: str) -> dict[str, Any]:
    lines = [line for line in output.splitlines() if line.startswith("RESULT ")]
    assert lines, output[-4000:]
    parsed: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    return parsed


@pytest.mark.timeout(600)
def test_stream_killed_mid_transaction_and_restarted(
    broker: Broker, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Two queries, exactly-once and at-least-once, read the same two partitions; the task of
    input partition 1 is slowed down. SIGKILL the whole Spark process once partition 0's task
    has committed and partition 1's has written part of its rows, then restart from the
    checkpoints: the exactly-once output holds every record once (the restarted task fenced the
    killed one's transaction, the task that had committed skipped); the at-least-once output
    has partition 0's batch twice and part of partition 1's."""
    source = new_topic(2)
    outputs = {"eos": new_topic(2), "alo": new_topic(2)}
    per_partition = 200
    produce(broker, source, ((None, f"{p}-{i}".encode(), p) for p in (0, 1) for i in range(per_partition)))
    prefix = f"eos-kill-{uuid.uuid4().hex[:8]}"
    args = [
        "stream",
        "--bootstrap", broker.bootstrap,
        "--input", source,
        "--eos-output", outputs["eos"],
        "--alo-output", outputs["alo"],
        "--checkpoint", str(tmp_path / "cp"),
        "--prefix", prefix,
    ]
    proc = run_app(*args, "--slow-partition", "1")
    try:
        deadline = time.monotonic() + SPARK_APP_TIMEOUT_S
        while True:
            assert proc.poll() is None, "the Spark app ended before it was killed:\n" + (
                proc.stdout.read().decode(errors="replace")[-4000:] if proc.stdout else ""
            )
            assert time.monotonic() < deadline, "the queries did not get to the kill point"
            eos_committed = recorded(broker, record_group(prefix, 0))
            eos_all = read_topic(broker, outputs["eos"], 2, "read_uncommitted")
            alo_all = read_topic(broker, outputs["alo"], 2, "read_uncommitted")
            slow_eos = sum(v.startswith(b"1-") for _, v in eos_all)
            slow_alo = sum(v.startswith(b"1-") for _, v in alo_all)
            fast_alo = sum(v.startswith(b"0-") for _, v in alo_all)
            if eos_committed and fast_alo == per_partition and slow_eos >= 20 and slow_alo >= 20:
                break
            time.sleep(0.2)
        assert slow_eos < per_partition, "partition 1's task finished before the kill: slow it down more"
        kill_group(proc)
    finally:
        if proc.poll() is None:
            kill_group(proc)
    # Partition 1's transaction is open: read_committed sees only partition 0's rows so far.
    open_committed = Counter(v for _, v in read_topic(broker, outputs["eos"], 2, "read_committed"))
    assert set(open_committed) == {f"0-{i}".encode() for i in range(per_partition)}

    result = app_result(finish_app(run_app(*args)))
    expected = Counter(f"{p}-{i}".encode() for p in (0, 1) for i in range(per_partition))
    eos = Counter(v for _, v in read_topic(broker, outputs["eos"], 2, "read_committed"))
    assert eos == expected
    aborted = Counter(v for _, v in read_topic(broker, outputs["eos"], 2, "read_uncommitted")) - expected
    assert sum(aborted.values()) >= 20 and all(v.startswith(b"1-") for v in aborted)
    # The replayed batch: partition 0's task found its write recorded and skipped.
    assert result["eos"]["batches"] == [0], result
    alo = Counter(v for _, v in read_topic(broker, outputs["alo"], 2, "read_uncommitted"))
    duplicated = alo - expected
    assert set(alo) == set(expected)
    assert sum(v.startswith(b"0-") for v in duplicated.elements()) == per_partition
    print(f"at-least-once after the kill: {sum(duplicated.values())} duplicates; exactly-once: none, "
          f"{sum(aborted.values())} aborted records of the killed attempt")


@pytest.mark.timeout(600)
def test_batch_write_with_a_failed_task(broker: Broker, new_topic: Callable[..., str], tmp_path: Path) -> None:
    """df.write with exactlyOnce under local[2,2]: the first attempt of Spark partition 1 fails
    after the writer produced part of its rows; Spark retries it. The exactly-once output has each
    row once (the failed attempt's rows aborted); the at-least-once output has them twice."""
    outputs = {"eos": new_topic(2), "alo": new_topic(2)}
    prefix = f"eos-batch-{uuid.uuid4().hex[:8]}"
    rows_total = 4000
    output = finish_app(
        run_app(
            "batch",
            "--bootstrap", broker.bootstrap,
            "--eos-output", outputs["eos"],
            "--alo-output", outputs["alo"],
            "--prefix", prefix,
            "--rows", str(rows_total),
        )
    )
    result = app_result(output)
    expected = Counter(b"row-%d" % i for i in range(rows_total))
    eos = Counter(v for _, v in read_topic(broker, outputs["eos"], 2, "read_committed"))
    assert eos == expected
    aborted = Counter(v for _, v in read_topic(broker, outputs["eos"], 2, "read_uncommitted")) - expected
    alo = Counter(v for _, v in read_topic(broker, outputs["alo"], 2, "read_uncommitted"))
    assert set(alo) == set(expected)
    duplicated = alo - expected
    assert sum(aborted.values()) > 0, "the failed attempt wrote nothing before failing"
    assert sum(duplicated.values()) > 0
    assert result["attempts"] >= 2, result
    print(f"batch: failed attempt wrote {sum(aborted.values())} aborted records (exactly-once) and "
          f"{sum(duplicated.values())} duplicates (at-least-once)")

