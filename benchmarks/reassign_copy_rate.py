"""Reassignment copy rate: how fast a replica being added copies a partition, against a consumer.

One 4-broker cluster (real ZooKeeper and broker processes). A topic of one partition on brokers
[1, 2] is loaded with ``--size-mib`` of incompressible values. Then, in each of ``--rounds`` rounds:

1. ``consumer``: a confluent-kafka consumer reads the whole partition from its leader, from the
   first offset to the end; its rate is the partition's log bytes over the time from assign to the
   last message.
2. ``copy``: ``headwater reassign --execute`` moves the partition to a broker that does not hold it
   (no throttle); the rate is the partition's log bytes over the time from ``--execute`` returning to
   the adding replica holding all of them on disk (polled every 20 ms). ``--verify`` then waits for
   the move to finish, so the next round starts from a settled cluster.

``ratio`` is copy / consumer per round (the target is >= 0.8); the two are measured back to back
in the same run because the machine is shared and noisy. Then, for each ``--throttles`` value R,
the partition is moved with ``--throttle R`` and the copy's steady rate (between 25% and 85% of the
bytes, which leaves out the limiter's first-second burst) is reported as ``observed / R``; the
partition is first resized to about ``--throttled-seconds`` of copying at R.

Prints one JSON line on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration" / "cluster"))

from cluster_support import LocalCluster, run_cli, start_cluster
from confluent_kafka import Consumer, Producer, TopicPartition

MIB = 1024 * 1024


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def load(bootstrap: str, topic: str, size_bytes: int, value_bytes: int) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 1_000_000, "log_level": 3})
    value = os.urandom(value_bytes)
    count = size_bytes // value_bytes
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value=value, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(120) == 0
    return count


def consume_all(bootstrap: str, topic: str, messages: int) -> float:
    """Seconds for a consumer to read ``messages`` from offset 0."""
    # librdkafka's fetch sizes as they come (1 MiB per partition, 50 MiB per fetch), like the
    # follower's 1 MiB replica.fetch.max.bytes and 10 MiB replica.fetch.response.max.bytes.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{time.monotonic_ns()}",
                         "enable.auto.commit": False, "log_level": 3})
    try:
        start = time.monotonic()
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen = 0
        while seen < messages:
            batch = consumer.consume(num_messages=10_000, timeout=1.0)
            for m in batch:
                if m.error() is None:
                    seen += 1
            if time.monotonic() - start > 300:
                raise RuntimeError(f"consumer read only {seen} of {messages} messages")
        return time.monotonic() - start
    finally:
        consumer.close()


def plan_file(cluster: LocalCluster, topic: str, replicas: list[int]) -> Path:
    plan = cluster.data_dir / f"plan-{'-'.join(map(str, replicas))}.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": replicas}]}))
    return plan


def move(cluster: LocalCluster, topic: str, target: list[int], adding: int, size: int,
         throttle: int | None = None) -> list[tuple[float, int]]:
    """Reassign; return (seconds since --execute returned, adding replica's bytes) until it holds ``size``."""
    plan = plan_file(cluster, topic, target)
    args = ["reassign", "--bootstrap-server", cluster.bootstrap, "--execute", "--reassignment-json-file", str(plan)]
    if throttle is not None:
        args += ["--throttle", str(throttle)]
    run_cli(*args)
    start = time.monotonic()
    samples = [(0.0, 0)]
    while samples[-1][1] < size:
        time.sleep(0.02)
        samples.append((time.monotonic() - start, cluster.log_bytes(adding, topic)))
        if samples[-1][0] > 600:
            raise RuntimeError(f"copy stuck at {samples[-1][1]} of {size} bytes")
    deadline = time.monotonic() + 120
    while "is completed" not in run_cli("reassign", "--bootstrap-server", cluster.bootstrap, "--verify",
                                        "--reassignment-json-file", str(plan)):
        if time.monotonic() > deadline:
            raise RuntimeError("reassignment did not complete")
        time.sleep(0.2)
    return samples


def steady_rate(samples: list[tuple[float, int]], size: int, low: float = 0.25, high: float = 0.85) -> float:
    t0, b0 = next(s for s in samples if s[1] >= low * size)
    t1, b1 = next(s for s in samples if s[1] >= high * size)
    return (b1 - b0) / (t1 - t0)


def resize(cluster: LocalCluster, topic: str, leader: int, size_bytes: int, value_bytes: int) -> int:
    """Append until the partition holds about ``size_bytes``; return its log bytes."""
    have = cluster.log_bytes(leader, topic)
    if size_bytes > have:
        load(cluster.bootstrap, topic, size_bytes - have, value_bytes)
    return cluster.log_bytes(leader, topic)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--value-bytes", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--throttles", default="5000000,20000000", help="bytes/s, comma-separated ('' for none)")
    ap.add_argument("--throttled-seconds", type=float, default=12.0)
    args = ap.parse_args()

    topic = "copy"
    with tempfile.TemporaryDirectory(prefix="bench-reassign-") as tmp:
        # Removed replicas' files go at once, so a broker can take a partition back two moves later.
        cluster = start_cluster(Path(tmp), 4, {"replica.lag.time.max.ms": "30000", "file.delete.delay.ms": "0"})
        try:
            run_cli("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", topic,
                    "--replica-assignment", "1:2")
            t = time.monotonic()
            messages = load(cluster.bootstrap, topic, args.size_mib * MIB, args.value_bytes)
            say(f"loaded {messages} messages in {time.monotonic() - t:.1f} s")
            cluster.wait_full_isr([topic], 1)
            replicas, spare = [1, 2], [3, 4]
            rounds = []
            for r in range(args.rounds):
                size = cluster.log_bytes(replicas[0], topic)
                consumer_s = consume_all(cluster.bootstrap, topic, messages)
                adding = spare[0]
                target = [adding, replicas[1]]
                samples = move(cluster, topic, target, adding, size)
                copy_s = samples[-1][0]
                first_byte_s = next(s[0] for s in samples if s[1] > 0)
                consumer_rate, copy_rate = size / consumer_s, size / copy_s
                rounds.append({"bytes": size, "consumer_mb_s": round(consumer_rate / 1e6, 1),
                               "copy_mb_s": round(copy_rate / 1e6, 1),
                               "copy_after_first_byte_mb_s": round(size / (copy_s - first_byte_s) / 1e6, 1),
                               "ratio": round(copy_rate / consumer_rate, 3)})
                say(f"round {r + 1}: {rounds[-1]}")
                spare = [replicas[0], *spare[1:]]
                replicas = target
            throttled = []
            for rate in [int(x) for x in args.throttles.split(",") if x]:
                size = resize(cluster, topic, replicas[0], int(rate * args.throttled_seconds), args.value_bytes)
                adding = spare[0]
                target = [adding, replicas[1]]
                samples = move(cluster, topic, target, adding, size, throttle=rate)
                observed = steady_rate(samples, size)
                whole = size / samples[-1][0]
                throttled.append({"throttle_b_s": rate, "bytes": size, "observed_mb_s": round(observed / 1e6, 3),
                                  "accuracy": round(observed / rate, 3), "whole_copy_accuracy": round(whole / rate, 3)})
                say(f"throttle {rate}: {throttled[-1]}")
                spare = [replicas[0], *spare[1:]]
                replicas = target
        finally:
            cluster.stop()
    print(json.dumps({
        "benchmark": "reassign_copy_rate", "size_mib": args.size_mib, "value_bytes": args.value_bytes,
        "load_avg_1m": round(os.getloadavg()[0], 2), "rounds": rounds,
        "ratio_median": statistics.median(r["ratio"] for r in rounds) if rounds else None,
        "throttled": throttled,
    }))


if __name__ == "__main__":
    main()
