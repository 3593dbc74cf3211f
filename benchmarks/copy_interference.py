"""acks=all produce latency while an unthrottled reassignment copies a big partition (issue #26).

The cluster of ``adaptive_throttle.py`` (ZooKeeper and four brokers): ``load`` (leader 1, on
1,2,3, ``min.insync.replicas=2``) takes a steady acks=all producer (1 KiB messages, linger 1 ms);
``big`` (leader 1, ``--move-mib`` MiB) moves between {1,2,3} and {1,2,4}, so each move copies the
whole partition from broker 1 to the broker being added, with no throttle. Each of ``--repeat``
rounds measures ``--baseline-s`` seconds without a move, then one move. One JSON line: the
producer's p50/p99 in each window, the copy rates, the cores each broker and the
producer's process (librdkafka's threads and its loop) used in each window, the p99 during the moves over the p99 without
(medians of the rounds), and the read-back of ``load``, which must hold every acknowledged message.

    .venv/bin/python benchmarks/copy_interference.py [--move-mib 1024] [--repeat 3] [--copy-max-cpu-pressure 0.2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from adaptive_throttle import LoadProducer, Mover, load_and_big, percentile, set_defaults, start
from cluster_support import cpu_seconds  # on the path adaptive_throttle sets
from confluent_kafka import Consumer, TopicPartition

from headwater.admin.client import AdminClient
from headwater.admin.reassign import Cluster


def cpu_s(pids: dict[int, int]) -> dict[int, float]:
    """User + system CPU seconds of each broker so far (``/proc/PID/stat``)."""
    return {b: cpu_seconds([pid]) for b, pid in pids.items()}


def cores(before: dict[int, float], after: dict[int, float], seconds: float) -> dict[str, float]:
    """Cores each broker used over a window."""
    return {f"b{b}": round((after[b] - before[b]) / seconds, 2) for b in sorted(after)}


def read_back(bootstrap: str, topic: str, expected: int, timeout_s: float = 120) -> int:
    """Records of partition 0 from its start up to ``expected`` (or what arrived by the timeout)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "copy-interference-check",
                         "enable.auto.commit": False, "log_level": 3})
    consumer.assign([TopicPartition(topic, 0, 0)])
    count, deadline = 0, time.monotonic() + timeout_s
    try:
        while count < expected and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 1.0):
                if msg.error() is None:
                    count += 1
        # Anything past ``expected`` would be a duplicate of an acknowledged message.
        for msg in consumer.consume(10_000, 2.0):
            if msg.error() is None:
                count += 1
    finally:
        consumer.close()
    return count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--move-mib", type=int, default=1024)
    parser.add_argument("--load-mb", type=float, default=0.5, help="MB/s of the acks=all producer")
    parser.add_argument("--baseline-s", type=float, default=10)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--no-idempotence", action="store_true",
                        help="run the acks=all producer with enable.idempotence=false (see LoadProducer)")
    parser.add_argument("--copy-max-cpu-pressure", type=float, default=None,
                        help="set reassignment.copy.max.cpu.pressure cluster-wide (default: unset, no pause)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        cluster, _urls = start(Path(tmp))
        client = AdminClient(cluster.bootstrap, client_id="copy-interference")
        load: LoadProducer | None = None
        try:
            load = load_and_big(cluster, args.move_mib, args.load_mb, fill_timeout_s=180, idempotent=not args.no_idempotence)
            if args.copy_max_cpu_pressure is not None:
                set_defaults(cluster, {"reassignment.copy.max.cpu.pressure": str(args.copy_max_cpu_pressure)})
            mover = Mover(cluster, Cluster(client))
            rounds: list[dict[str, Any]] = []
            pids = {b: cluster.pid(b) for b in cluster.brokers}
            for _ in range(args.repeat):
                t0, c0, p0 = time.monotonic(), cpu_s(pids), cpu_seconds([load.pid])
                time.sleep(args.baseline_s)
                t1, c1, p1 = time.monotonic(), cpu_s(pids), cpu_seconds([load.pid])
                m0, m1, copy = mover.move()
                t2, c2, p2 = time.monotonic(), cpu_s(pids), cpu_seconds([load.pid])
                base, moving = load.window(t0, t1), load.window(m0, m1)  # these wait for late answers
                rounds.append({
                    "no_move": {"messages": len(base), "p50_ms": round(percentile(base, 0.5), 2),
                                "p99_ms": round(percentile(base, 0.99), 2), "cores": cores(c0, c1, t1 - t0),
                                "client_cores": round((p1 - p0) / (t1 - t0), 2)},
                    "move": {"seconds": round(m1 - m0, 1), "messages": len(moving),
                             "p50_ms": round(percentile(moving, 0.5), 2), "p99_ms": round(percentile(moving, 0.99), 2),
                             "copy_mb_per_s": round(copy / 1e6, 1), "cores": cores(c1, c2, t2 - t1),
                             "client_cores": round((p2 - p1) / (t2 - t1), 2)},
                })
                time.sleep(2)  # the old replica's deletion and the ISR change settle before the next window
            load.stop()
            acked = len(load.samples)
            errors = load.errors
            load = None
            found = read_back(cluster.bootstrap, "load", acked)
            base_p99 = statistics.median(r["no_move"]["p99_ms"] for r in rounds)
            move_p99 = statistics.median(r["move"]["p99_ms"] for r in rounds)
            print(json.dumps({
                "benchmark": "copy_interference", "move_mib": args.move_mib, "load_mb_per_s": args.load_mb,
                "idempotent": not args.no_idempotence, "copy_max_cpu_pressure": args.copy_max_cpu_pressure,
                "rounds": rounds, "no_move_p99_ms": base_p99, "move_p99_ms": move_p99,
                "p99_ratio": round(move_p99 / base_p99, 2),
                "p99_ratios": [round(r["move"]["p99_ms"] / r["no_move"]["p99_ms"], 2) for r in rounds],
                "copy_mb_per_s": statistics.median(r["move"]["copy_mb_per_s"] for r in rounds),
                "acknowledged": acked, "produce_errors": errors, "read_back": found, "all_read_back": found == acked,
            }), flush=True)
        finally:
            if load is not None:
                load.stop()
            client.close()
            cluster.stop()


if __name__ == "__main__":
    main()
