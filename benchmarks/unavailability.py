"""Unavailability window per nemesis: from the fault to the first acks=all acknowledgement of a record
sent after it, on the partitions the fault aimed at; p50 and p99 over the seeds.

Each run is one chaos scenario (``tests/chaos``: ZooKeeper and every broker in a network namespace of
its own, an idempotent acks=all producer sending 300 records/s round-robin over 3 partitions) with
ONE fault, chosen and timed by the seed. The producer records when each record was handed to it and
when its acknowledgement arrived; a fault's window runs from the moment it was injected to the first
acknowledgement of a record sent after that moment, on each affected partition (the longest over
them): for a fault on a partition's leader, that partition; on the controller, the partitions it
leads; for ``loss``, every partition the victim leads. A fault that hit no partition (``no_partition``),
or after which nothing was acknowledged (``no_ack``), is counted apart. The window starts once the
fault is in place (network rules go into several namespaces one after the other, tens of ms). The
checker runs too: a failed run is listed.

Faults last 3-9 s (the seed picks); a fault that leaves the leader in place (``leader-followers``,
``one-way``, ``loss``) can keep its partition unavailable until it is healed, so those windows
include the fault's own length.

    .venv/bin/python benchmarks/unavailability.py [--seeds 20] [--nemeses pause,kill] [--controller-share 0.3]
    .venv/bin/python benchmarks/unavailability.py --from results.jsonl   # CHAOS_JSON=results.jsonl make chaos

Needs root (network namespaces, nftables). Prints ONE JSON line: per nemesis p50_ms, p99_ms, faults
(measured), no_partition, no_ack; the seeds; runs and failed runs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration" / "cluster"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "chaos"))

from chaos_run import NEMESES, Scenario, run_scenario, summarize_windows


def measure(nemeses: list[str], seeds: list[int], controller_share: float) -> tuple[list[dict[str, object]], int, list[str]]:
    faults: list[dict[str, object]] = []
    runs, failed = 0, []
    for nemesis in nemeses:
        for seed in seeds:
            data_dir = Path(tempfile.mkdtemp(prefix=f"hwunavail-{nemesis}-{seed}-"))
            outcome = run_scenario(Scenario(nemesis, seed, rounds=1, controller_share=controller_share), data_dir)
            runs += 1
            found = outcome.unavailability()
            faults += found
            print(f"{nemesis} seed {seed}: {found} {'ok' if outcome.ok else 'FAILED'}", file=sys.stderr, flush=True)
            if outcome.ok:
                shutil.rmtree(data_dir, ignore_errors=True)
            else:
                failed.append(f"{nemesis} seed {seed} (data in {data_dir})")
                print(outcome.report(), file=sys.stderr, flush=True)
    return faults, runs, failed


def read_suite_json(paths: list[Path]) -> tuple[list[dict[str, object]], list[int], int, list[str]]:
    faults: list[dict[str, object]] = []
    seeds: set[int] = set()
    runs, failed = 0, []
    for path in paths:
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            run = json.loads(line)
            runs += 1
            seeds.add(int(run["seed"]))
            faults += run["faults"]
            if not run["ok"]:
                failed.append(f"{run['nemesis']} seed {run['seed']}")
    return faults, sorted(seeds), runs, failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20, help="seeds 1..N of each nemesis, one fault per run")
    parser.add_argument("--nemeses", default=",".join(NEMESES), help=f"comma-separated, of {', '.join(NEMESES)}")
    parser.add_argument("--controller-share", type=float, default=0.0,
                        help="share of the leader-aimed faults that hit the controller instead")
    parser.add_argument("--from", dest="from_files", type=Path, nargs="+",
                        help="summarize the CHAOS_JSON file(s) of make chaos instead of running")
    args = parser.parse_args()
    if args.from_files:
        faults, seeds, runs, failed = read_suite_json(args.from_files)
        source = "make chaos (CHAOS_JSON)"
    else:
        nemeses = [n.strip() for n in args.nemeses.split(",") if n.strip()]
        unknown = sorted(set(nemeses) - set(NEMESES))
        if unknown or args.seeds < 1:
            parser.error(f"unknown nemeses {unknown}; known: {', '.join(NEMESES)}" if unknown else "--seeds must be >= 1")
        seeds = list(range(1, args.seeds + 1))
        faults, runs, failed = measure(nemeses, seeds, args.controller_share)
        source = "one fault per run"
    print(json.dumps({"benchmark": "unavailability", "source": source, "seeds": seeds, "runs": runs,
                      "failed_runs": failed, "nemeses": summarize_windows(faults)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
