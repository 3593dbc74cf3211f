"""What incremental fetch sessions (KIP-227) save on an idle cluster of many partitions.

Three brokers and ZooKeeper (local processes), ``--partitions`` partitions (RF 2, topics of
``--per-topic``), twice in the same run: once as configured by default (followers fetch through
sessions) and once with ``max.incremental.fetch.session.cache.slots=0`` (every fetch names every
partition, as before sessions). With nothing produced, each follower still polls each of its
leaders about twice a second (max.wait.ms 500). Reported per setting, after ``--settle-s``: the
CPU seconds all brokers used over ``--measure-s`` of idleness (user + system, from /proc), and
``cpu_ratio`` = sessions / no sessions.

Prints one JSON line.

    .venv/bin/python benchmarks/fetch_sessions.py [--partitions 10000] [--per-topic 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration" / "cluster"))

from cluster_support import cpu_seconds, start_cluster
from reassign_scale import create, online

from headwater.admin.client import AdminClient


def idle_cpu(partitions: int, per_topic: int, props: dict[str, str], settle_s: float, measure_s: float) -> dict[str, float]:
    topics = [f"idle-{i:03d}" for i in range((partitions + per_topic - 1) // per_topic)]
    with tempfile.TemporaryDirectory(prefix="hw-fetch-sessions-") as tmp:
        cluster = start_cluster(Path(tmp), 3, {"default.replication.factor": "2", **props})
        try:
            brokers = sorted(cluster.brokers)
            with AdminClient(cluster.bootstrap, timeout_s=600) as client:
                t0 = time.monotonic()
                for i, name in enumerate(topics):
                    n = min(per_topic, partitions - i * per_topic)
                    create(client, name, [[brokers[p % 3], brokers[(p + 1) % 3]] for p in range(n)])
                while online(client, topics) < partitions:
                    time.sleep(0.5)
                created_s = time.monotonic() - t0
            time.sleep(settle_s)
            pids = [cluster.pid(b) for b in brokers]
            before = cpu_seconds(pids)
            time.sleep(measure_s)
            used = cpu_seconds(pids) - before
            return {"online_s": round(created_s, 1), "cpu_s": round(used, 2),
                    "cpu_share_of_one_core": round(used / measure_s, 3)}
        finally:
            cluster.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--per-topic", type=int, default=1000)
    ap.add_argument("--settle-s", type=float, default=15.0)
    ap.add_argument("--measure-s", type=float, default=30.0)
    args = ap.parse_args()
    out: dict[str, object] = {"benchmark": "fetch_sessions", "partitions": args.partitions, "rf": 2}
    for label, props in (("sessions", {}), ("no_sessions", {"max.incremental.fetch.session.cache.slots": "0"})):
        out[label] = idle_cpu(args.partitions, args.per_topic, props, args.settle_s, args.measure_s)
        print(f"{label}: {out[label]}", file=sys.stderr)
    with_s = out["sessions"]["cpu_s"]  # type: ignore[index]
    without = out["no_sessions"]["cpu_s"]  # type: ignore[index]
    out["cpu_ratio"] = round(with_s / without, 3) if without else None
    out["load_avg_1m"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
