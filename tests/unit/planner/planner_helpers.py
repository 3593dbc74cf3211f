"""Shared helpers for the planner unit tests: run the local engine and apply a plan to a snapshot."""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np

from headwater.planner.engine import LocalEngine, build_report, run_plan
from headwater.planner.model import PlanOptions
from headwater.planner.snapshot import Snapshot, orig_cols, plan_cols, wide_frame


def plan(snapshot: Snapshot, options: PlanOptions | None = None) -> tuple[dict[str, Any], str, LocalEngine]:
    options = options or PlanOptions()
    engine = LocalEngine(snapshot)
    info = run_plan(engine, options)
    buf = io.StringIO()
    report = build_report(engine, info["setup"], options, 5, 50_000_000.0, buf)
    return report, buf.getvalue(), engine


def applied(snapshot: Snapshot, engine: LocalEngine) -> Snapshot:
    """The snapshot after executing the plan and a preferred-leader election."""
    frame = engine.frame.sort_values(["topic", "partition"]).reset_index(drop=True)
    width = sum(1 for c in frame.columns if c.startswith("r") and c[1:].isdigit())
    reps = frame[plan_cols(width)].to_numpy(dtype=np.int64)
    return Snapshot(
        list(snapshot.brokers),
        wide_frame(
            frame["topic"].to_numpy(dtype=object),
            frame["partition"].to_numpy(dtype=np.int64),
            reps,
            reps[:, 0],
            frame["size_bytes"].to_numpy(dtype=np.int64),
        ),
    )


def replica_sets(snapshot: Snapshot) -> dict[tuple[str, int], list[int]]:
    f = snapshot.partitions
    m = f[orig_cols(snapshot.width)].to_numpy(dtype=np.int64)
    return {
        (str(t), int(p)): [int(x) for x in row if x >= 0]
        for t, p, row in zip(f["topic"], f["partition"], m, strict=True)
    }


def plan_entries(text: str) -> dict[tuple[str, int], list[int]]:
    doc = json.loads(text)
    return {(e["topic"], e["partition"]): e["replicas"] for e in doc["partitions"]}
