"""Produce throughput: acks=all to RF 3 against acks=1 to RF 1, in the same run on the same cluster.

Three brokers and ZooKeeper (local processes). Two topics of ``--partitions`` partitions: one RF 3
with ``min.insync.replicas=2`` written with acks=all, one RF 1 written with acks=1. Each gets
``--mib`` MiB of 1 KiB messages from one confluent-kafka producer (linger.ms=5); the time runs from
the first produce() to the last delivery report. Each phase also records the CPU seconds per MiB
of the brokers together (user + system, from /proc/PID/stat) and of the producer's process, since
on a small machine they share the cores, and the brokers' minor page faults per MiB. Prints one
JSON line.

    .venv/bin/python benchmarks/replicated_produce.py [--mib 64] [--partitions 6]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration" / "cluster"))

from cluster_support import cpu_seconds, minor_faults, start_cluster
from confluent_kafka import KafkaError, Message, Producer

MESSAGE_BYTES = 1024


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def produce(bootstrap: str, pids: list[int], topic: str, acks: str, count: int) -> dict[str, float]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                         "batch.size": 1_000_000, "queue.buffering.max.kbytes": 262_144,
                         "message.timeout.ms": 120_000})
    errors: list[KafkaError] = []
    delivered = 0

    def done(err: KafkaError | None, _msg: Message) -> None:
        nonlocal delivered
        if err is not None:
            errors.append(err)
        else:
            delivered += 1

    payload = bytes(MESSAGE_BYTES)
    brokers0, own0, faults0 = cpu_seconds(pids), own_cpu_seconds(), minor_faults(pids)
    t0 = time.monotonic()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, key=b"%d" % (i % 1000), value=payload, on_delivery=done)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(300) == 0
    elapsed = time.monotonic() - t0
    brokers, own = cpu_seconds(pids) - brokers0, own_cpu_seconds() - own0
    faults = minor_faults(pids) - faults0
    assert not errors and delivered == count, (errors[:3], delivered)
    mib = count * MESSAGE_BYTES / 2**20
    return {"seconds": round(elapsed, 2), "mib_per_s": round(mib / elapsed, 1),
            "msgs_per_s": round(count / elapsed), "broker_cpu_s_per_mib": round(brokers / mib, 4),
            "producer_cpu_s_per_mib": round(own / mib, 4), "broker_minor_faults_per_mib": round(faults / mib)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--partitions", type=int, default=6)
    args = ap.parse_args()
    count = args.mib * 2**20 // MESSAGE_BYTES
    with tempfile.TemporaryDirectory(prefix="hw-repl-produce-") as tmp:
        cluster = start_cluster(Path(tmp), 3)
        try:
            cluster.create_topic("rf3", args.partitions, 3, **{"min.insync.replicas": "2"})
            cluster.create_topic("rf1", args.partitions, 1)
            cluster.wait_full_isr(["rf3", "rf1"], args.partitions, timeout_s=60)
            pids = [cluster.pid(b.broker_id) for b in cluster.live()]
            rf3 = produce(cluster.bootstrap, pids, "rf3", "all", count)
            print(f"acks=all RF 3: {rf3}", file=sys.stderr)
            rf1 = produce(cluster.bootstrap, pids, "rf1", "1", count)
            print(f"acks=1 RF 1: {rf1}", file=sys.stderr)
        finally:
            cluster.stop()
    print(json.dumps({"benchmark": "replicated_produce", "mib": args.mib, "message_bytes": MESSAGE_BYTES,
                      "partitions": args.partitions, "acks_all_rf3": rf3, "acks_1_rf1": rf1,
                      "rf3_over_rf1": round(rf3["mib_per_s"] / rf1["mib_per_s"], 2)}))


if __name__ == "__main__":
    main()
