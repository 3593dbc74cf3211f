"""Fetch from the closest replica (KIP-392): consume rate from the leader against a same-rack follower.

One 3-broker cluster (real ZooKeeper and broker processes), each broker in its own rack, with
``replica.selector.class`` set to Kafka's RackAwareReplicaSelector. A topic of one partition on all
three brokers is loaded with ``--size-mib`` of incompressible values (acks=all). Then, in each of
``--rounds`` rounds, alternating:

1. ``leader``: a confluent-kafka consumer with no ``client.rack`` reads the whole partition from
   the leader;
2. ``follower``: the same with ``client.rack`` set to a follower's rack, which the leader names as
   the preferred read replica, so the records come from the follower.

Each rate is the partition's log bytes over the time from assign to the last message; ``ratio`` is
follower / leader per round (the goal is 0.9-1.1: the closest replica costs nothing). The leader's
CPU seconds (user + system, from /proc) during each read show the load moved off it.

    .venv/bin/python benchmarks/fetch_from_follower.py [--size-mib 256] [--rounds 3]

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

from cluster_support import LocalCluster, start_cluster
from confluent_kafka import Consumer, Producer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fetch_sessions import cpu_seconds

VALUE_BYTES = 1024
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def load(cluster: LocalCluster, topic: str, count: int) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 20,
                  "queue.buffering.max.messages": 200_000})
    for _ in range(count):
        while True:
            try:
                p.produce(topic, os.urandom(VALUE_BYTES), partition=0)
                break
            except BufferError:
                p.poll(0.1)
    assert p.flush(120) == 0


def read_all(cluster: LocalCluster, topic: str, count: int, rack: str | None, leader_pid: int) -> tuple[float, float]:
    """(seconds to read every record, the leader's CPU seconds meanwhile)."""
    conf = {"bootstrap.servers": cluster.bootstrap, "group.id": "bench-ffr", "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760, "fetch.queue.backoff.ms": 10}
    if rack is not None:
        conf["client.rack"] = rack
    c = Consumer(conf)
    cpu0 = cpu_seconds(leader_pid)
    t0 = time.perf_counter()
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    deadline = t0 + 600
    while got < count and time.perf_counter() < deadline:
        got += sum(1 for m in c.consume(min(100_000, count - got), 1.0) if m.error() is None)
    elapsed = time.perf_counter() - t0
    cpu = cpu_seconds(leader_pid) - cpu0
    c.close()
    if got != count:
        raise RuntimeError(f"read {got} of {count}")
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    count = args.size_mib * 1024 * 1024 // VALUE_BYTES
    mb = count * VALUE_BYTES / 1e6
    out: dict[str, object] = {"benchmark": "fetch_from_follower", "size_mib": args.size_mib, "rounds": args.rounds}
    with tempfile.TemporaryDirectory(prefix="hw-ffr-", dir=os.environ.get("BENCH_DIR")) as tmp:
        cluster = start_cluster(Path(tmp), 3, {"replica.selector.class": SELECTOR, "log.segment.bytes": str(256 << 20)},
                                broker_props=lambda broker_id, _port: {"broker.rack": f"rack-{broker_id}"})
        try:
            cluster.create_topic("ffr", 1, 3)
            cluster.wait_full_isr(["ffr"], 1)
            load(cluster, "ffr", count)
            leader = cluster.leaders("ffr")[0]
            follower = next(b for b in sorted(cluster.brokers) if b != leader)
            rates: dict[str, list[float]] = {"leader": [], "follower": []}
            cpu: dict[str, list[float]] = {"leader": [], "follower": []}
            for r in range(args.rounds):
                for name, rack in (("leader", None), ("follower", f"rack-{follower}")):
                    elapsed, leader_cpu = read_all(cluster, "ffr", count, rack, cluster.pid(leader))
                    rates[name].append(mb / elapsed)
                    cpu[name].append(leader_cpu)
                    print(f"round {r} {name}: {rates[name][-1]:.1f} MB/s, leader CPU {leader_cpu:.2f} s",
                          file=sys.stderr)
            out.update({
                "leader_mb_s": round(statistics.median(rates["leader"]), 1),
                "follower_mb_s": round(statistics.median(rates["follower"]), 1),
                "ratios": [round(f / lead, 2) for f, lead in zip(rates["follower"], rates["leader"], strict=True)],
                "leader_cpu_s_reading_from_leader": round(statistics.median(cpu["leader"]), 2),
                "leader_cpu_s_reading_from_follower": round(statistics.median(cpu["follower"]), 2),
            })
        finally:
            cluster.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
