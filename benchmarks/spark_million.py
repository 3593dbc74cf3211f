"""Issue #7's exactness acceptance at full size: 1,000,000 records read, 1,000,000 rows written.

    python benchmarks/spark_million.py [--records 1000000] [--bootstrap HOST:PORT]

1. A confluent-kafka Producer (idempotent, acks=all) writes N records with distinct keys and values
   of varying length (some keys null) to a 4-partition topic; every delivery report is kept, so the
   expected count and checksum come from what the cluster acknowledged (key, value, partition,
   offset of each record).
2. spark.read.format("headwater") reads the topic: count, the same checksum computed in Spark SQL,
   and the number of distinct (partition, offset) pairs (no record twice).
3. df.write.format("headwater") writes N rows (key k<i>, value sha256(i)); a confluent-kafka
   Consumer reads the topic back: count, distinct keys, and a checksum over key and value.
The checksum is the one the CI tests use (tests/integration/spark/conftest.py): the sum over the
records of crc32(key + value + "partition:offset"), which Spark computes with its crc32().
The CI tests run the same checks at 200,000 records; this script is the 1,000,000 acceptance.
Prints one JSON line on stdout ("exact": true when every check held); progress on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import sys
import time
import zlib

from confluent_kafka import Consumer, KafkaError, Message, Producer
from confluent_kafka import TopicPartition as ClientTopicPartition
from spark_read_write import REPO, create_topic, log, own_broker

PARTITIONS = 4
SPARK_CHECKSUM_SQL = (
    "sum(crc32(concat(coalesce(key, X''), coalesce(value, X''), "
    "cast(concat(cast(partition as string), ':', cast(offset as string)) as binary))))"
)


def record_checksum(key: bytes | None, value: bytes | None, partition: int, offset: int) -> int:
    return zlib.crc32((key or b"") + (value or b"") + f"{partition}:{offset}".encode())


def record(i: int) -> tuple[bytes | None, bytes]:
    # Every 97th key is null; values from 0 to 199 bytes, all different.
    key = None if i % 97 == 0 else b"key-%d" % i
    value = (b"%d:" % i + hashlib.sha256(b"%d" % i).digest() * 7)[: i % 200]
    return key, value


def produce_records(bootstrap: str, topic: str, n: int) -> tuple[int, int, float]:
    """Write n records; return (acknowledged, checksum of the acknowledged, seconds)."""
    failures: list[str] = []
    acked = 0
    checksum = 0

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        nonlocal acked, checksum
        if error is not None:
            failures.append(str(error))
            return
        acked += 1
        partition, offset = message.partition(), message.offset()
        assert partition is not None and offset is not None
        checksum += record_checksum(message.key(), message.value(), partition, offset)

    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5}
    )
    started = time.perf_counter()
    for i in range(n):
        key, value = record(i)
        while True:
            try:
                producer.produce(topic, key=key, value=value, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    remaining = producer.flush(600)
    elapsed = time.perf_counter() - started
    if remaining or failures:
        raise RuntimeError(f"confluent-kafka producer: {remaining} unacknowledged, failures {failures[:5]}")
    return acked, checksum, elapsed


def consume_all(bootstrap: str, topic: str) -> tuple[int, int, int]:
    """Read the whole topic with confluent-kafka: (records, distinct keys, checksum of key+value)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "spark-million-check",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    ends = {
        p: consumer.get_watermark_offsets(ClientTopicPartition(topic, p), timeout=10)[1]
        for p in range(PARTITIONS)
    }
    consumer.assign([ClientTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    count = 0
    keys: set[bytes | None] = set()
    checksum = 0
    done: set[int] = {p for p, end in ends.items() if end == 0}
    deadline = time.monotonic() + 600
    while len(done) < PARTITIONS and time.monotonic() < deadline:
        for m in consumer.consume(10_000, 1.0):
            error = m.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    done.add(m.partition() or 0)
                    continue
                raise RuntimeError(f"consumer: {error}")
            count += 1
            key, value = m.key(), m.value()
            keys.add(key)
            checksum += zlib.crc32((key or b"") + b"=" + (value or b""))
    consumer.close()
    if sum(ends.values()) != count:
        raise RuntimeError(f"read {count} records, the log ends say {sum(ends.values())}")
    return count, len(keys), checksum


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--bootstrap", default=None, help="use this cluster instead of starting a broker")
    args = parser.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    n = args.records
    checks: dict[str, bool] = {}

    with contextlib.ExitStack() as stack:
        bootstrap = args.bootstrap or stack.enter_context(own_broker("headwater"))
        topic = create_topic(bootstrap, PARTITIONS)
        log(f"producing {n} records to {topic} with confluent-kafka")
        acked, expected_sum, produce_s = produce_records(bootstrap, topic, n)
        log(f"produced {acked} in {produce_s:.1f} s")

        from pyspark.sql import SparkSession

        import headwater.spark

        spark = (
            SparkSession.builder.master("local[2]")
            .appName("headwater-spark-million")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            # A Python worker's handshake with the JVM can outlast the default 15 s on a busy machine.
            .config("spark.python.authenticate.socketTimeout", "120s")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        headwater.spark.register(spark)
        stack.callback(spark.stop)

        started = time.perf_counter()
        row = (
            spark.read.format("headwater")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .load()
            .selectExpr(
                "count(*) as n",
                f"{SPARK_CHECKSUM_SQL} as checksum",
                "count(distinct partition, offset) as positions",
            )
            .collect()[0]
        )
        read_s = time.perf_counter() - started
        checks["read_count"] = row.n == acked == n
        checks["read_checksum"] = row.checksum == expected_sum
        checks["read_no_duplicates"] = row.positions == n
        log(
            f"spark read {row.n} records in {read_s:.1f} s: checksum {row.checksum} (expected {expected_sum})"
        )

        out_topic = create_topic(bootstrap, PARTITIONS)
        df = spark.range(n, numPartitions=2).selectExpr(
            "concat('k', cast(id as string)) as key", "sha2(cast(id as string), 256) as value"
        )
        started = time.perf_counter()
        (
            df.write.format("headwater")
            .mode("append")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", out_topic)
            .save()
        )
        write_s = time.perf_counter() - started
        log(f"spark wrote {n} rows in {write_s:.1f} s; reading them back")
        count, distinct_keys, checksum = consume_all(bootstrap, out_topic)
        expected_write = sum(
            zlib.crc32(b"k%d=" % i + hashlib.sha256(b"%d" % i).hexdigest().encode()) for i in range(n)
        )
        checks["write_count"] = count == n
        checks["write_distinct_keys"] = distinct_keys == n
        checks["write_checksum"] = checksum == expected_write

    result = {
        "benchmark": "spark_million",
        "broker": "external" if args.bootstrap else "headwater",
        "records": n,
        "partitions": PARTITIONS,
        "spark_master": "local[2]",
        "confluent_produce_s": round(produce_s, 2),
        "spark_read_s": round(read_s, 2),
        "spark_read_records_per_s": round(n / read_s),
        "spark_write_s": round(write_s, 2),
        "spark_write_records_per_s": round(n / write_s),
        "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        "checks": checks,
        "exact": all(checks.values()),
    }
    print(json.dumps(result))
    return 0 if result["exact"] else 1


if __name__ == "__main__":
    sys.exit(main())
