"""Scale run: 1,000,000 partitions x RF 3 on 1,000 brokers in 20 racks, planned by ``headwater plan``.

The cluster: 950 loaded brokers (one of them dead) plus 50 new empty ones, lognormal sizes, rack-distinct
replica sets. The plan is made by the real command (``python -m headwater.planner.cli``, Spark
``local[*]``) in a child process; this script samples the resident memory of that process and all its
descendants (the Spark JVM, the Python workers) every 0.2 s and reports the peak.

Prints ONE JSON line on stdout (generation time, Spark start-up, plan and report times from the
command's own timings, wall time, peak memory, and the plan's headline figures). Run by hand:
    .venv/bin/python benchmarks/planner_scale.py [--partitions 1000000] [--brokers 1000] [--racks 20]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from headwater.planner.generate import generate_large  # noqa: E402
from headwater.planner.snapshot import write_snapshot  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")


def tree_rss_bytes(root: int) -> int:
    """Resident bytes of ``root`` and every descendant (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                parts = fh.read().rsplit(")", 1)[1].split()
            children.setdefault(int(parts[1]), []).append(int(entry))
        except (OSError, IndexError):
            continue
    total = 0
    stack = [root]
    while stack:
        pid = stack.pop()
        try:
            with open(f"/proc/{pid}/statm") as fh:
                total += int(fh.read().split()[1]) * PAGE
        except OSError:
            pass
        stack.extend(children.get(pid, []))
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=1_000_000)
    ap.add_argument("--brokers", type=int, default=1000)
    ap.add_argument("--racks", type=int, default=20)
    ap.add_argument("--new-brokers", type=int, default=50)
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--keep", action="store_true", help="keep the snapshot and plan files")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="planner-scale-"))
    t0 = time.perf_counter()
    brokers, frame = generate_large(
        args.partitions,
        args.brokers - args.new_brokers,
        args.racks,
        3,
        seed=7,
        new_brokers=args.new_brokers,
        dead=1,
    )
    snapshot = work / "cluster.parquet"
    write_snapshot(snapshot, brokers, frame)
    gen_s = time.perf_counter() - t0
    del frame
    print(
        f"generated {args.partitions} partitions in {gen_s:.1f} s -> {snapshot}", file=sys.stderr, flush=True
    )
    plan_path = work / "plan.json"
    cmd = [
        sys.executable,
        "-m",
        "headwater.planner.cli",
        "--snapshot",
        str(snapshot),
        "--master",
        args.master,
        "--format",
        "json",
        "-o",
        str(plan_path),
        "--spark-conf",
        "spark.driver.memory=3g",
    ]
    env = dict(os.environ, PYTHONPATH=str(REPO), PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    t1 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=str(work))
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss_bytes(proc.pid))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    wall_s = time.perf_counter() - t1
    done.set()
    sampler.join()
    if proc.returncode != 0:
        print(err.decode()[-4000:], file=sys.stderr)
        raise SystemExit(f"headwater plan failed with exit code {proc.returncode}")
    report = json.loads(out.decode().strip().splitlines()[-1])
    timings = report.get("timings_s", {})
    result = {
        "benchmark": "planner_scale",
        "partitions": args.partitions,
        "rf": 3,
        "brokers": args.brokers,
        "racks": args.racks,
        "scenario": f"{args.new_brokers} new brokers, 1 dead broker, rebalance",
        "master": args.master,
        "cores": os.cpu_count(),
        "generate_s": round(gen_s, 1),
        "spark_start_s": timings.get("spark_start_s"),
        "plan_s": timings.get("plan_s"),
        "report_and_write_s": timings.get("report_s"),
        "plan_plus_report_s": round((timings.get("plan_s") or 0) + (timings.get("report_s") or 0), 1),
        "command_wall_s": round(wall_s, 1),
        "peak_rss_gib": round(peak / 2**30, 2),
        "buckets": report.get("rounds", {}).get("buckets"),
        "rounds": report.get("rounds"),
        "replica_moves": report["replica_moves"],
        "bytes_moved": report["bytes_moved"],
        "rack_violations_after": report["violations"]["rack_after"],
        "replicas_on_dead_after": report["violations"]["replicas_on_removed_or_dead"],
        "replicas_max_min_after": [
            report["balance"]["after"]["replicas"]["max"],
            report["balance"]["after"]["replicas"]["min"],
        ],
        "leaders_max_min_after": [
            report["balance"]["after"]["leaders"]["max"],
            report["balance"]["after"]["leaders"]["min"],
        ],
        "bytes_cv_after": report["balance"]["after"]["bytes"]["cv"],
        "balancedness": [report["balancedness"]["before"], report["balancedness"]["after"]],
        "plan_file_bytes": plan_path.stat().st_size,
    }
    if not args.keep:
        for f in work.iterdir():
            f.unlink()
        work.rmdir()
    print(json.dumps(result, separators=(",", ":")))


if __name__ == "__main__":
    main()
