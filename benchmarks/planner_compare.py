"""Side by side: headwater's planner, Yelp kafka-utils' PartitionCountBalancer and a minimum-move MIP.

Every planner gets the same generated cluster; every result is scored by headwater's evaluator
(``headwater.planner.engine.evaluate_plan``), which only sees the snapshot and the final replica lists.

- headwater: the PySpark job (``local[2]``, one session for all cases; start-up reported apart).
- Yelp: kafka-utils 4.1.0 with kafka-python 1.4.7 in its own venv (built on first use under
  ~/.cache/headwater-bench/yelp-venv). ``rebalance()`` with replication groups, brokers and leaders for
  add/skewed; ``decommission_brokers()`` for a removed or dead broker (what its CLI does).
- MIP: HiGHS, binary x[p, b] for every partition and allowed broker; minimise added replicas subject
  to RF, at most ceil(RF / racks) replicas per rack, nothing on removed/dead brokers, and every broker's
  replica count within floor/ceil of its even share (rack-capped, the same band headwater targets).

Prints ONE JSON line on stdout; progress goes to stderr. Run by hand:
    .venv/bin/python benchmarks/planner_compare.py [--sizes 240,2000,10000] [--mip-time-limit 600]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
warnings.filterwarnings("ignore")

from headwater.planner.engine import LocalEngine, build_report, evaluate_plan, run_plan, setup  # noqa: E402
from headwater.planner.generate import ClusterSpec, generate  # noqa: E402
from headwater.planner.model import Goal, PlanOptions, max_per_rack  # noqa: E402
from headwater.planner.snapshot import Snapshot, orig_cols, write_snapshot  # noqa: E402
from headwater.planner.targets import rack_aware_targets  # noqa: E402

CACHE = Path(os.environ.get("HEADWATER_BENCH_CACHE", Path.home() / ".cache" / "headwater-bench"))
YELP_VENV = CACHE / "yelp-venv"
YELP_PINS = ["kafka-utils==4.1.0", "kafka-python==1.4.7", "pyyaml", "typing_extensions", "six"]

YELP_DRIVER = r"""
import argparse, json, sys
from kafka_utils.kafka_cluster_manager.cluster_info.cluster_topology import ClusterTopology
from kafka_utils.kafka_cluster_manager.cluster_info.partition_count_balancer import PartitionCountBalancer
from kafka_utils.kafka_cluster_manager.cluster_info.partition_measurer import PartitionMeasurer

doc = json.load(sys.stdin)
sizes = {(t, p): s for t, p, _, s in doc["partitions"]}

class SizeMeasurer(PartitionMeasurer):
    def get_weight(self, name):
        return float(sizes[name]) or 1.0
    def get_size(self, name):
        return float(sizes[name]) or 1.0

assignment = {(t, p): reps for t, p, reps, _ in doc["partitions"]}
brokers = {int(b): {"host": "h%s" % b, "rack": r} for b, r in doc["brokers"].items()}
args = argparse.Namespace(replication_groups=True, brokers=True, leaders=True, max_partition_movements=None,
                          max_movement_size=None, max_leader_changes=None)
measurer = SizeMeasurer(None, brokers, assignment, args)
ct = ClusterTopology(assignment, brokers, measurer, lambda b: b.metadata["rack"])
balancer = PartitionCountBalancer(ct, args)
if doc["decommission"]:
    balancer.decommission_brokers(doc["decommission"])
else:
    balancer.rebalance()
out = [[t, p, reps] for (t, p), reps in ct.assignment.items() if reps != assignment[(t, p)]]
json.dump(out, sys.stdout)
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def ensure_yelp() -> Path:
    python = YELP_VENV / "bin" / "python"
    probe = [str(python), "-c", "import kafka_utils, kafka; assert kafka.__version__ == '1.4.7'"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    log(f"building Yelp's venv in {YELP_VENV}")
    YELP_VENV.parent.mkdir(parents=True, exist_ok=True)
    base = "python3.11"
    subprocess.run([base, "-m", "venv", str(YELP_VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", *YELP_PINS], check=True)
    subprocess.run(probe, check=True)
    return python


def sets_of(snap: Snapshot) -> dict[tuple[str, int], list[int]]:
    f = snap.partitions
    m = f[orig_cols(snap.width)].to_numpy(dtype=np.int64)
    return {
        (str(t), int(p)): [int(x) for x in r if x >= 0]
        for t, p, r in zip(f["topic"], f["partition"], m, strict=True)
    }


def run_yelp(
    python: Path, snap: Snapshot, decommission: list[int]
) -> tuple[dict[tuple[str, int], list[int]], float]:
    sizes = dict(
        zip(
            zip(snap.partitions["topic"], snap.partitions["partition"], strict=True),
            snap.partitions["size_bytes"],
            strict=True,
        )
    )
    doc = {
        "brokers": {str(b.id): b.rack for b in snap.brokers},
        "partitions": [[t, p, reps, int(sizes[(t, p)])] for (t, p), reps in sets_of(snap).items()],
        "decommission": decommission,
    }
    t0 = time.perf_counter()
    # Yelp iterates over sets of strings, so its plan depends on Python's hash seed; pin it.
    env = dict(os.environ, PYTHONHASHSEED="0")
    proc = subprocess.run(
        [str(python), "-c", YELP_DRIVER], input=json.dumps(doc), capture_output=True, text=True, env=env
    )
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"Yelp failed: {proc.stderr[-2000:]}")
    return {(t, int(p)): reps for t, p, reps in json.loads(proc.stdout)}, elapsed


def mip_bands(snap: Snapshot, options: PlanOptions) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any]:
    """Per-broker [lo, hi] replica-count band: floor/ceil of the even (rack-capped) share."""
    eng = LocalEngine(snap)
    s = setup(eng, options)
    table = s.table
    m = snap.partitions[orig_cols(snap.width)].to_numpy(dtype=np.int64)
    pos = table.index_of(m)
    current = np.bincount(pos[pos >= 0], minlength=len(table))
    total = int((m >= 0).sum())
    cap = len(m) * max_per_rack(int((m >= 0).sum(axis=1).max()), s.n_racks_after)
    t = rack_aware_targets(current, s.holds, s.holds, total, np.zeros(len(table)), table.rack_index, cap)
    lo = np.zeros(len(table))
    hi = np.zeros(len(table))
    for r in np.unique(table.rack_index[s.holds]):
        mask = s.holds & (table.rack_index == r)
        share = t[mask].sum() / mask.sum()
        full = t[mask].sum() >= cap
        if not full:
            rest = s.holds & ~np.isin(
                table.rack_index,
                [
                    rr
                    for rr in np.unique(table.rack_index[s.holds])
                    if t[s.holds & (table.rack_index == rr)].sum() >= cap
                ],
            )
            share = t[rest].sum() / rest.sum()
        lo[mask], hi[mask] = np.floor(share), np.ceil(share)
    return lo, hi, s.holds, s


def run_mip(snap: Snapshot, options: PlanOptions, time_limit_s: float) -> dict[str, Any]:
    import highspy

    lo, hi, holds, s = mip_bands(snap, options)
    table = s.table
    m = snap.partitions[orig_cols(snap.width)].to_numpy(dtype=np.int64)
    pos = table.index_of(m)
    p_n = len(m)
    rf = (m >= 0).sum(axis=1)
    allowed = np.nonzero(holds)[0]
    a_n = len(allowed)
    rack = table.rack_index
    racks = np.unique(rack[allowed])
    rack_row = {int(r): i for i, r in enumerate(racks)}
    r_n = len(racks)
    # Columns: (p, allowed broker j), ordered p-major.
    cols_p = np.repeat(np.arange(p_n), a_n)
    cols_b = np.tile(allowed, p_n)
    current = np.zeros((p_n, len(table)), dtype=bool)
    rr, cc = np.nonzero(pos >= 0)
    current[rr, pos[rr, cc]] = True
    cost = (~current[cols_p, cols_b]).astype(np.float64)
    n_cols = len(cols_p)
    # Rows: P partition rows (= RF), P*R rack rows (<= maxper), B count rows (band).
    row_part = cols_p
    row_rack = (
        p_n + cols_p * r_n + np.array([rack_row[int(r)] for r in rack[allowed]])[np.tile(np.arange(a_n), p_n)]
    )
    row_cnt = p_n + p_n * r_n + np.searchsorted(allowed, cols_b)
    index = np.stack([row_part, row_rack, row_cnt], axis=1).ravel()
    start = np.arange(0, 3 * n_cols + 1, 3)
    maxper = -(-rf // len(racks))
    row_lo = np.concatenate([rf, np.zeros(p_n * r_n), lo[allowed]]).astype(np.float64)
    row_hi = np.concatenate([rf, np.repeat(maxper, r_n), hi[allowed]]).astype(np.float64)
    lp = highspy.HighsLp()
    lp.num_col_ = n_cols
    lp.num_row_ = len(row_lo)
    lp.col_cost_ = cost
    lp.col_lower_ = np.zeros(n_cols)
    lp.col_upper_ = np.ones(n_cols)
    lp.row_lower_ = row_lo
    lp.row_upper_ = row_hi
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = start.astype(np.int32)
    lp.a_matrix_.index_ = index.astype(np.int32)
    lp.a_matrix_.value_ = np.ones(3 * n_cols)
    lp.integrality_ = [highspy.HighsVarType.kInteger] * n_cols
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit_s))
    h.setOptionValue("threads", 2)
    t0 = time.perf_counter()
    h.passModel(lp)
    h.run()
    elapsed = time.perf_counter() - t0
    status = h.modelStatusToString(h.getModelStatus())
    info = h.getInfo()
    out: dict[str, Any] = {"status": status, "time_s": round(elapsed, 2), "vars": n_cols}
    if info.primal_solution_status < 2:
        out["plan"] = None
        return out
    x = np.asarray(h.getSolution().col_value) > 0.5
    chosen = x.reshape(p_n, a_n)
    plan: dict[tuple[str, int], list[int]] = {}
    topics = snap.partitions["topic"].tolist()
    parts = snap.partitions["partition"].tolist()
    for p in range(p_n):
        new = set(table.ids[allowed[chosen[p]]].tolist())
        old = [int(b) for b in m[p] if b >= 0]
        if new != set(old):
            kept = [b for b in old if b in new]
            plan[(str(topics[p]), int(parts[p]))] = kept + sorted(new - set(kept))
    out["plan"] = plan
    out["objective"] = float(info.objective_function_value)
    out["dual_bound"] = float(info.mip_dual_bound)
    out["gap"] = float(info.mip_gap)
    return out


def score(snap: Snapshot, plan: dict[tuple[str, int], list[int]], options: PlanOptions) -> dict[str, Any]:
    r = evaluate_plan(LocalEngine(snap), plan, options, 5, 50 * 1024 * 1024)
    after = r["balance"]["after"]
    return {
        "replica_moves": r["replica_moves"],
        "bytes_moved": r["bytes_moved"],
        "rack_violations": r["violations"]["rack_after"],
        "left_on_removed": r["violations"]["replicas_on_removed_or_dead"],
        "replicas_max_min": [after["replicas"]["max"], after["replicas"]["min"]],
        "leaders_max_min": [after["leaders"]["max"], after["leaders"]["min"]],
        "replicas_cv": after["replicas"]["cv"],
        "leaders_cv": after["leaders"]["cv"],
        "bytes_cv": after["bytes"]["cv"],
        "topic_spread_max": after["topic_spread_max"],
        "topic_spread_mean": after["topic_spread_mean"],
        "balancedness": r["balancedness"]["after"],
        "max_inbound_bytes": r["max_inbound"]["bytes"],
    }


def cases(sizes: list[int]) -> list[tuple[str, ClusterSpec, PlanOptions, list[int]]]:
    out = []
    for n in sizes:
        if n <= 500:
            brokers, racks, new, topics = 9, 3, 3, 8
        elif n <= 3000:
            brokers, racks, new, topics = 30, 3, 3, 40
        else:
            brokers, racks, new, topics = 60, 6, 6, 120
        base = {"racks": racks, "partitions": n, "topics": topics, "seed": n}
        out.append((f"add-{n}", ClusterSpec(brokers=brokers, new_brokers=new, **base), PlanOptions(), []))
        s = ClusterSpec(brokers=brokers + new, **base)
        out.append((f"remove-{n}", s, PlanOptions(goal=Goal.REMOVE_BROKERS, brokers=(2,)), [2]))
        s = ClusterSpec(brokers=brokers + new, dead_brokers=1, **base)
        out.append((f"dead-{n}", s, PlanOptions(goal=Goal.FIX_DEAD), [brokers + new]))
        s = ClusterSpec(brokers=brokers + new, sizes="exponential", skew=0.5, **base)
        out.append((f"skewed-{n}", s, PlanOptions(), []))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="240,2000,10000")
    ap.add_argument("--mip-time-limit", type=float, default=600.0)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    yelp_python = ensure_yelp()
    from headwater.planner.spark_engine import SparkEngine, spark_session

    t0 = time.perf_counter()
    spark = spark_session(args.master, {"spark.sql.shuffle.partitions": "2"})
    spark_start_s = time.perf_counter() - t0
    results = []
    tmp = Path(tempfile.mkdtemp(prefix="planner-compare-"))
    for name, spec, options, decommission in cases(sizes):
        snap = generate(spec)
        path = tmp / f"{name}.parquet"
        write_snapshot(path, snap.brokers, snap.partitions)
        t = time.perf_counter()
        engine = SparkEngine.from_file(spark, path)
        info = run_plan(engine, options)
        buf = io.StringIO()
        build_report(engine, info["setup"], options, 5, 50 * 1024 * 1024, buf)
        hw_time = time.perf_counter() - t
        doc = json.loads(buf.getvalue())
        hw_plan = {(e["topic"], e["partition"]): e["replicas"] for e in doc["partitions"]}
        hw = score(snap, hw_plan, options) | {"time_s": round(hw_time, 2)}
        yelp_plan, yelp_time = run_yelp(yelp_python, snap, [b for b in decommission])
        yelp = score(snap, yelp_plan, options) | {"time_s": round(yelp_time, 2)}
        mip = run_mip(snap, options, args.mip_time_limit)
        mip_plan = mip.pop("plan")
        mip_score = score(snap, mip_plan, options) if mip_plan is not None else None
        optimum = mip_score["replica_moves"] if mip_score else None
        exact = mip.get("status") == "Optimal"
        bound = optimum if exact else mip.get("dual_bound")
        better_or_equal = {
            "replicas_range": (hw["replicas_max_min"][0] - hw["replicas_max_min"][1])
            <= (yelp["replicas_max_min"][0] - yelp["replicas_max_min"][1]),
            "leaders_range": (hw["leaders_max_min"][0] - hw["leaders_max_min"][1])
            <= (yelp["leaders_max_min"][0] - yelp["leaders_max_min"][1]),
            "bytes_cv": hw["bytes_cv"] <= yelp["bytes_cv"] + 1e-9,
            "topic_spread_max": hw["topic_spread_max"] <= yelp["topic_spread_max"],
        }
        row = {
            "case": name,
            "partitions": spec.partitions,
            "brokers": spec.brokers + spec.new_brokers,
            "racks": spec.racks,
            "headwater": hw,
            "yelp": yelp,
            "mip": {**mip, **({"score": mip_score} if mip_score else {})},
            "moves_vs_optimum": round(hw["replica_moves"] / optimum, 4) if optimum else None,
            "moves_vs_bound": round(hw["replica_moves"] / bound, 4) if bound else None,
            "optimum_exact": exact,
            "balance_at_least_yelp": better_or_equal,
        }
        log(
            f"{name}: headwater {hw['replica_moves']} moves ({hw['time_s']} s), yelp {yelp['replica_moves']}, "
            f"mip {optimum} [{mip.get('status')}, {mip.get('time_s')} s]; ratio {row['moves_vs_optimum']}; "
            f"rack viol hw={hw['rack_violations']} yelp={yelp['rack_violations']}; balance>=yelp {better_or_equal}"
        )
        results.append(row)
    spark.stop()
    summary = {
        "benchmark": "planner_compare",
        "spark_master": args.master,
        "spark_start_s": round(spark_start_s, 2),
        "cases": results,
        "all_zero_rack_violations": all(r["headwater"]["rack_violations"] == 0 for r in results),
        "max_moves_vs_optimum": max((r["moves_vs_optimum"] or 0) for r in results),
        "balance_at_least_yelp_everywhere": all(all(r["balance_at_least_yelp"].values()) for r in results),
    }
    print(json.dumps(summary, separators=(",", ":")))


if __name__ == "__main__":
    main()
