"""``make chaos``: every nemesis over many seeds, with the reassignment, topic create/delete and transactional
workloads, outside CI.

Environment:
  CHAOS_SEEDS     how many seeds (``20`` = 1..20), a range (``5-9``) or a list (``3,7,9``); default 5
  CHAOS_SEED      one seed (wins over CHAOS_SEEDS)
  CHAOS_NEMESES   comma-separated nemeses (chaos_run.NEMESES, ``mixed``, or ``kill-heal``); default all seven,
                  then mixed (which runs with self-healing on and includes kill-heal)
  CHAOS_REASSIGN  ``0`` to run without the reassignment workload; default on
  CHAOS_ROUNDS    faults per run; default 3
  CHAOS_CHURN     ``0`` to run without the topic create/delete workload; default on
  CHAOS_TXN       ``0`` to run without the transactional workload; default on
  CHAOS_JSON      a file to append one JSON line per run to (verdict, seed, each fault's unavailability
                  window); ``benchmarks/unavailability.py --from FILE`` summarizes it

``kill -USR1 <pid>`` prints every thread's stack (a run that seems stuck); SIGTERM or Ctrl-C stops
the brokers, ZooKeeper and the namespaces before exiting.

Prints one verdict per run and a summary (with each nemesis's unavailability p50/p99, and how many
self-healing runs saw a heal and a cancel); exits 1 if any run found a violation. The data directory
(broker and ZooKeeper logs, segment files) of a failing run is kept and named in its verdict.
"""

from __future__ import annotations

import faulthandler
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1] / "integration" / "cluster"))

from chaos_run import HEAL_NEMESIS, NEMESES, Scenario, run_scenario, summarize_windows


def parse_seeds(env: dict[str, str]) -> list[int]:
    if env.get("CHAOS_SEED"):
        return [int(env["CHAOS_SEED"])]
    spec = env.get("CHAOS_SEEDS", "5")
    if "," in spec:
        return [int(s) for s in spec.split(",") if s.strip()]
    if "-" in spec:
        lo, hi = spec.split("-", 1)
        return list(range(int(lo), int(hi) + 1))
    return list(range(1, int(spec) + 1))


def _interrupt(signum: int, _frame: object) -> None:
    # Unwind through run_scenario's finally blocks: the brokers, ZooKeeper and namespaces go too.
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # kill -USR1 <pid>: where is a stuck run?
    if os.geteuid() != 0:
        print("make chaos needs root: it creates network namespaces and nftables rules", file=sys.stderr)
        return 2
    seeds = parse_seeds(dict(os.environ))
    nemeses = [n.strip() for n in os.environ.get("CHAOS_NEMESES", ",".join([*NEMESES, "mixed"])).split(",") if n.strip()]
    unknown = set(nemeses) - {*NEMESES, "mixed", HEAL_NEMESIS}
    if unknown:
        print(f"unknown nemeses {sorted(unknown)}; known: {', '.join(NEMESES)}, mixed, {HEAL_NEMESIS}", file=sys.stderr)
        return 2
    reassign = os.environ.get("CHAOS_REASSIGN", "1") != "0"
    rounds = int(os.environ.get("CHAOS_ROUNDS", "3"))
    churn = os.environ.get("CHAOS_CHURN", "1") != "0"
    txn = os.environ.get("CHAOS_TXN", "1") != "0"
    json_path = os.environ.get("CHAOS_JSON")
    failed: list[str] = []
    windows: list[dict[str, object]] = []
    runs = 0
    healing_runs: list[dict[str, int]] = []  # the self-healing counts of each run that had it on
    for seed in seeds:
        for nemesis in nemeses:
            data_dir = Path(tempfile.mkdtemp(prefix=f"hwchaos-{nemesis}-{seed}-"))
            t0 = time.monotonic()
            try:
                outcome = run_scenario(Scenario(nemesis, seed, rounds=rounds, reassign=reassign, controller_share=0.3,
                                                churn=churn, txn=txn), data_dir,
                                       progress=lambda s: print(f"    {s}", file=sys.stderr, flush=True))
            except Exception as exc:  # the harness itself failed: keep going, report it
                failed.append(f"{nemesis} seed {seed}: harness error {type(exc).__name__}: {exc}")
                print(f"chaos nemesis={nemesis} seed={seed}: HARNESS ERROR {exc} (data kept in {data_dir})", flush=True)
                continue
            runs += 1
            faults = outcome.unavailability()
            windows += faults
            healing: dict[str, int] = {k: outcome.verdict.stats[k] for k in ("heals", "heal_moves", "cancels", "cancelled_moves",
                                                             "elections", "failed_ticks", "returns_mid_heal") if k in outcome.verdict.stats}
            if healing:
                healing_runs.append(healing)
            if json_path:
                with open(json_path, "a") as f:
                    f.write(json.dumps({"nemesis": nemesis, "seed": seed, "ok": outcome.ok,
                                        "violations": outcome.verdict.violations, "liveness": outcome.liveness,
                                        "faults": faults, **({"healing": healing} if healing else {})}) + "\n")
            print(outcome.report(), flush=True)
            print("  unavailability: " + ", ".join(
                f"{f['nemesis']} on p{f['partitions']} {f['window_ms']} ms" for f in faults), flush=True)
            print(f"  ({time.monotonic() - t0:.0f} s)", flush=True)
            if outcome.ok:
                shutil.rmtree(data_dir, ignore_errors=True)
            else:
                print(f"  data kept in {data_dir}", flush=True)
                failed.append(f"{nemesis} seed {seed} (data in {data_dir})")
    workloads = [w for w, on in (("reassignments", reassign), ("topic churn", churn), ("transactions", txn)) if on]
    print(f"\n{runs} runs over seeds {seeds[0]}..{seeds[-1]} x {', '.join(nemeses)}"
          f"{' with ' + ', '.join(workloads) if workloads else ''}: {len(failed)} failed")
    for f in failed:
        print(f"  FAILED {f}")
    if healing_runs:
        print(f"  self-healing on in {len(healing_runs)} runs: a heal in {sum(1 for h in healing_runs if h['heals'])}, "
              f"a cancel in {sum(1 for h in healing_runs if h['cancels'])}, a broker back mid-heal in "
              f"{sum(1 for h in healing_runs if h['returns_mid_heal'])}")
    for kind, row in summarize_windows(windows).items():
        print(f"  unavailability {kind}: p50 {row['p50_ms']} ms, p99 {row['p99_ms']} ms over {row['faults']} faults")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
