"""Delivery latency at a fixed rate: acks=all to RF 3 against acks=1 to RF 1, in the same run.

Three brokers and ZooKeeper (local processes). Two topics of ``--partitions`` partitions: ``rf3``
(``min.insync.replicas=2``, written with acks=all and idempotence, Kafka 3's producer default) and
``rf1`` (written with acks=1). For each rate in ``--rates`` (MB/s of 1 KiB messages), one
confluent-kafka producer (linger.ms=5) sends to ``rf1`` and then to ``rf3`` for ``--seconds``
each; a message's latency runs from produce() to its delivery report, the first ``--warmup``
seconds left out. Also the brokers' CPU seconds (user + system, from /proc) per MB sent, and a
read-back of both topics: every acknowledged message must be there. Prints one JSON line.

``client_cores`` is what this process used, the producer's librdkafka threads included: its
idempotent producer busy-loops while a partition has five requests in flight (docs/performance.md,
"The load generator's spin"), and on this machine that CPU is the brokers'.

``--client-autogroup-nice N`` lowers this process's share of the CPU against the brokers. A nice
value set on threads does not: Linux schedules each session as one group (autogroup), every broker
runs in a session of its own, and a thread's nice only orders it within its group. The group's
own nice is ``/proc/self/autogroup``.

    .venv/bin/python benchmarks/replicated_latency.py [--rates 1,2,10] [--seconds 8] [--client-autogroup-nice 19]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration" / "cluster"))

from cluster_support import LocalCluster, cpu_seconds, start_cluster
from confluent_kafka import Consumer, Producer, TopicPartition

MESSAGE_BYTES = 1024


def percentile(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(len(values) * q))]


def run_rate(cluster: LocalCluster, pids: list[int], topic: str, acks: str, mb_per_s: float, seconds: float,
             warmup: float) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": cluster.bootstrap, "acks": acks, "linger.ms": 5}
    if acks == "all":
        conf["enable.idempotence"] = True
    producer = Producer(conf)
    rate = mb_per_s * 1_000_000 / MESSAGE_BYTES
    payload = os.urandom(MESSAGE_BYTES)
    latencies: list[float] = []
    errors: list[Any] = []
    counted_from = time.perf_counter() + warmup

    def make_cb(sent: float) -> Any:
        def cb(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(err)
            elif sent >= counted_from:
                latencies.append(time.perf_counter() - sent)
        return cb

    producer.list_topics(topic, timeout=10)  # connections and metadata before the clock starts
    cpu0 = cpu_seconds(pids)
    client_cpu0 = time.process_time()
    t0 = time.perf_counter()
    n = int(rate * seconds)
    i = 0
    while i < n:
        # Every millisecond, send what is due: the loop sleeps between rounds, so on a small
        # machine the load generator does not take the CPU the brokers are measured on.
        now = time.perf_counter()
        due = min(n, int((now - t0) * rate) + 1)
        while i < due:
            producer.produce(topic, key=b"%d" % (i % 64), value=payload, on_delivery=make_cb(now))
            i += 1
        producer.poll(0)
        time.sleep(0.001)
    left = producer.flush(60)
    cpu = cpu_seconds(pids) - cpu0
    client_cpu = time.process_time() - client_cpu0
    elapsed = time.perf_counter() - t0
    if left or errors:
        raise RuntimeError(f"{topic}: {left} undelivered, errors {errors[:3]}")
    latencies.sort()
    sent_mb = n * MESSAGE_BYTES / 1e6
    return {"messages": n, "p50_ms": round(percentile(latencies, 0.50) * 1000, 2),
            "p99_ms": round(percentile(latencies, 0.99) * 1000, 2),
            "max_ms": round(latencies[-1] * 1000, 2),
            "broker_cpu_s_per_mb": round(cpu / sent_mb, 4), "broker_cores": round(cpu / elapsed, 3),
            "client_cores": round(client_cpu / elapsed, 3)}


def read_back(bootstrap: str, topic: str, partitions: int) -> int:
    """Every record of the topic, read to the high watermark: acknowledged ones lost or written
    twice both show as a count other than the number sent."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{topic}", "enable.auto.commit": False,
                         "fetch.queue.backoff.ms": 10})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        pending = {p for p, end in ends.items() if end > 0}
        total = 0
        deadline = time.monotonic() + 120
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, timeout=1.0):
                if msg.error() is not None:
                    raise RuntimeError(f"{topic}: {msg.error()}")
                total += 1
                if msg.offset() + 1 >= ends[msg.partition()]:
                    pending.discard(msg.partition())
        return total
    finally:
        consumer.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="1,2,10", help="MB/s, comma-separated")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--client-autogroup-nice", type=int, default=None,
                    help="nice value of this process's scheduling group (see above)")
    args = ap.parse_args()
    if args.client_autogroup_nice is not None:
        Path("/proc/self/autogroup").write_text(str(args.client_autogroup_nice))
    rates = [float(r) for r in args.rates.split(",")]
    results: dict[str, Any] = {}
    sent = {"rf1": 0, "rf3": 0}
    with tempfile.TemporaryDirectory(prefix="hw-repl-latency-") as tmp:
        cluster = start_cluster(Path(tmp), 3)
        try:
            cluster.create_topic("rf3", args.partitions, 3, **{"min.insync.replicas": "2"})
            cluster.create_topic("rf1", args.partitions, 1)
            cluster.wait_full_isr(["rf3", "rf1"], args.partitions, timeout_s=60)
            pids = [cluster.pid(b.broker_id) for b in cluster.live()]
            for rate in rates:
                rf1 = run_rate(cluster, pids, "rf1", "1", rate, args.seconds, args.warmup)
                rf3 = run_rate(cluster, pids, "rf3", "all", rate, args.seconds, args.warmup)
                sent["rf1"] += rf1["messages"]
                sent["rf3"] += rf3["messages"]
                results[f"{rate:g}MBps"] = {"acks_1_rf1": rf1, "acks_all_rf3": rf3,
                                            "p99_ratio": round(rf3["p99_ms"] / rf1["p99_ms"], 2)}
                print(f"{rate:g} MB/s: acks=1 RF1 {rf1}; acks=all RF3 {rf3}", file=sys.stderr)
            counted = {t: read_back(cluster.bootstrap, t, args.partitions) for t in sent}
        finally:
            cluster.stop()
    print(json.dumps({"benchmark": "replicated_latency", "message_bytes": MESSAGE_BYTES, "seconds": args.seconds,
                      "client_autogroup_nice": args.client_autogroup_nice,
                      "warmup_s": args.warmup, "partitions": args.partitions, "rates": results,
                      "acknowledged": sent, "read_back": counted, "none_lost": counted == sent}))


if __name__ == "__main__":
    main()
