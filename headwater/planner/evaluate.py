"""Score a plan (ours or anyone's) from the snapshot and the final replica lists alone.

Each bucket is scored in its task by :func:`evaluate_bucket`, which returns a few aggregate rows
(per broker, per bucket); :func:`summarize` adds them up in the driver. Nothing here knows how the plan
was made, so the same numbers judge headwater, Yelp's balancer and the MIP alike.

Definitions (docs/planner.md has the rationale):
- replica moves: sum over partitions of |new set - old set| (a reorder is not a move);
- bytes moved: size x replicas added; inbound bytes land on the new broker, outbound bytes are
  served by the partition's current leader (followers fetch from the leader);
- rack violation: a partition with more replicas in one rack than ceil(RF / racks), racks counted
  among the brokers allowed to hold replicas (alive ones before, kept ones after);
- leaders are preferred leaders (first replica), the leader a reassignment plus a preferred-leader
  election produces; before uses the snapshot's lists, after the plan's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped]  # no stubs pinned for pandas

from headwater.planner.bucket import topic_mask
from headwater.planner.model import NO_BROKER, BoolArray, FloatArray, IntArray
from headwater.planner.snapshot import orig_cols, plan_cols

# Cruise Control defaults used by the balancedness score.
CC_REPLICA_CAPACITY = 10_000
CC_TOPIC_THRESHOLD = 3.0
CC_TOPIC_MIN_GAP = 2
CC_TOPIC_MAX_GAP = 40
CC_PRIORITY_WEIGHT = 1.1
CC_STRICTNESS_WEIGHT = 1.5

BROKER_FIELDS = (
    "replicas_before",
    "replicas_after",
    "leaders_before",
    "leaders_after",
    "bytes_before",
    "bytes_after",
    "in_bytes",
    "out_bytes",
    "in_moves",
    "out_moves",
)
TOTAL_FIELDS = (
    "partitions",
    "replica_moves",
    "bytes_moved",
    "partitions_moved",
    "leader_changes",
    "rack_violations_before",
    "rack_violations_after",
    "rf_changed",
    "duplicate_replicas",
    "replicas_on_removed",
    "excluded_changed",
    "topics",
    "topic_spread_sum_before",
    "topic_spread_sum_after",
    "topic_spread_max_before",
    "topic_spread_max_after",
    "topic_cc_violations_before",
    "topic_cc_violations_after",
)
N_VALUES = max(len(BROKER_FIELDS), len(TOTAL_FIELDS))
AGG_COLUMNS = ["kind", "key", *[f"v{i}" for i in range(N_VALUES)]]
MAX_FIELDS = {"topic_spread_max_before", "topic_spread_max_after"}


@dataclass(frozen=True)
class EvalContext:
    width: int
    broker_ids: IntArray
    rack: IntArray
    holds_before: BoolArray  # alive
    holds_after: BoolArray  # alive and not removed
    n_racks_before: int
    n_racks_after: int
    exclude_topics: str | None


def _to_pos(ids: IntArray, broker_ids: IntArray) -> IntArray:
    pos = np.searchsorted(broker_ids, np.maximum(ids, 0))
    return np.where(ids < 0, NO_BROKER, pos).astype(np.int64)


def _rack_violations(reps: IntArray, rack: IntArray, n_racks: int) -> int:
    if len(reps) == 0:
        return 0
    racks = np.where(reps >= 0, rack[np.maximum(reps, 0)], -1)
    same = (racks[:, :, None] == racks[:, None, :]) & (racks[:, :, None] >= 0)
    worst = same.sum(axis=2).max(axis=1)
    rf = (reps >= 0).sum(axis=1)
    limit = -(-rf // max(n_racks, 1))
    return int((worst > limit).sum())


def _topic_stats(topic_idx: IntArray, t_n: int, reps: IntArray, holds: BoolArray) -> tuple[float, float, int]:
    """(sum of spreads, max spread, CC topic-goal violations) over topics, on the brokers in ``holds``."""
    b_n = len(holds)
    tc = np.zeros((max(t_n, 1), b_n), dtype=np.int32)
    p_idx, col = np.nonzero(reps >= 0)
    np.add.at(tc, (topic_idx[p_idx], reps[p_idx, col]), 1)
    sub = tc[:, holds] if holds.any() else tc
    if sub.shape[1] == 0 or t_n == 0:
        return 0.0, 0.0, 0
    spread = sub.max(axis=1) - sub.min(axis=1)
    avg = sub.sum(axis=1) / sub.shape[1]
    gap = np.clip(avg * (CC_TOPIC_THRESHOLD - 1.0), CC_TOPIC_MIN_GAP, CC_TOPIC_MAX_GAP)
    upper = np.ceil(avg + gap)
    lower = np.floor(np.maximum(avg - gap, 0.0))
    viol = int(((sub.max(axis=1) > upper) | (sub.min(axis=1) < lower)).sum())
    return float(spread[:t_n].sum()), float(spread[:t_n].max()), viol


def evaluate_bucket(frame: pd.DataFrame, ctx: EvalContext, bucket: int) -> pd.DataFrame:
    b_n = len(ctx.broker_ids)
    old = _to_pos(frame[orig_cols(ctx.width)].to_numpy(dtype=np.int64), ctx.broker_ids)
    new = _to_pos(frame[plan_cols(ctx.width)].to_numpy(dtype=np.int64), ctx.broker_ids)
    size = frame["size_bytes"].to_numpy(dtype=np.float64)
    leader = frame["leader"].to_numpy(dtype=np.int64)
    p_n = len(frame)
    # A replica is added where a new entry matches no old entry of its row (and removed conversely).
    in_old = (new[:, :, None] == old[:, None, :]).any(axis=2)
    in_new = (old[:, :, None] == new[:, None, :]).any(axis=2)
    added_rows, added_cols = np.nonzero((new >= 0) & ~in_old)
    removed_rows, removed_cols = np.nonzero((old >= 0) & ~in_new)
    added_brokers = new[added_rows, added_cols]
    removed_brokers = old[removed_rows, removed_cols]
    a_rows = np.asarray(added_rows, dtype=np.int64)
    a_b = np.asarray(added_brokers, dtype=np.int64)
    # The sender of a new replica's data is the current leader (the first old replica if none is known).
    known_leader = _to_pos(leader, ctx.broker_ids)
    sender = np.where(known_leader >= 0, known_leader, old[:, 0])
    per = np.zeros((len(BROKER_FIELDS), b_n), dtype=np.float64)
    per[0] = np.bincount(old[old >= 0], minlength=b_n)
    per[1] = np.bincount(new[new >= 0], minlength=b_n)
    per[2] = np.bincount(old[:, 0][old[:, 0] >= 0], minlength=b_n)
    per[3] = np.bincount(new[:, 0][new[:, 0] >= 0], minlength=b_n)
    ro, co = np.nonzero(old >= 0)
    per[4] = np.bincount(old[ro, co], weights=size[ro], minlength=b_n)
    rn, cn = np.nonzero(new >= 0)
    per[5] = np.bincount(new[rn, cn], weights=size[rn], minlength=b_n)
    if len(a_rows):
        per[6] = np.bincount(a_b, weights=size[a_rows], minlength=b_n)
        send = sender[a_rows]
        ok = send >= 0
        per[7] = np.bincount(send[ok], weights=size[a_rows][ok], minlength=b_n)
        per[8] = np.bincount(a_b, minlength=b_n)
    if len(removed_rows):
        per[9] = np.bincount(removed_brokers, minlength=b_n)
    moved_rows = np.unique(a_rows) if len(a_rows) else np.zeros(0, dtype=np.int64)
    rf_old = (old >= 0).sum(axis=1)
    rf_new = (new >= 0).sum(axis=1)
    srt = np.sort(new, axis=1)
    dup = (
        ((srt[:, 1:] == srt[:, :-1]) & (srt[:, 1:] >= 0)).any(axis=1)
        if ctx.width > 1
        else np.zeros(p_n, bool)
    )
    changed = (old != new).any(axis=1)
    excluded = topic_mask(frame["topic"], ctx.exclude_topics)
    on_removed = int(((new >= 0) & ~ctx.holds_after[np.maximum(new, 0)]).sum())
    topic_idx, names = pd.factorize(frame["topic"], sort=True)
    sb, mb, vb = _topic_stats(topic_idx, len(names), old, ctx.holds_before)
    sa, ma, va = _topic_stats(topic_idx, len(names), new, ctx.holds_after)
    totals = [
        p_n,
        len(a_rows),
        float(size[a_rows].sum()) if len(a_rows) else 0.0,
        len(moved_rows),
        int(((old[:, 0] != new[:, 0]) & (new[:, 0] >= 0)).sum()),
        _rack_violations(old, ctx.rack, ctx.n_racks_before),
        _rack_violations(new, ctx.rack, ctx.n_racks_after),
        int((rf_old != rf_new).sum()),
        int(dup.sum()),
        on_removed,
        int((changed & excluded).sum()),
        len(names),
        sb,
        sa,
        mb,
        ma,
        vb,
        va,
    ]
    rows: list[list[Any]] = []
    for b in range(b_n):
        if per[:, b].any():
            rows.append(["broker", b, *per[:, b].tolist(), *([0.0] * (N_VALUES - len(BROKER_FIELDS)))])
    rows.append(["total", bucket, *[float(x) for x in totals], *([0.0] * (N_VALUES - len(TOTAL_FIELDS)))])
    return pd.DataFrame(rows, columns=AGG_COLUMNS)


@dataclass
class Balance:
    max: float
    min: float
    mean: float
    cv: float

    @staticmethod
    def of(values: FloatArray) -> Balance:
        if len(values) == 0:
            return Balance(0.0, 0.0, 0.0, 0.0)
        mean = float(values.mean())
        cv = float(values.std() / mean) if mean > 0 else 0.0
        return Balance(float(values.max()), float(values.min()), mean, cv)

    def as_dict(self) -> dict[str, float]:
        return {"max": self.max, "min": self.min, "mean": round(self.mean, 6), "cv": round(self.cv, 6)}


def combine(aggregates: pd.DataFrame, b_n: int) -> tuple[dict[str, FloatArray], dict[str, float]]:
    """Add up the per-bucket rows: per-broker arrays by field, and cluster totals by field."""
    per: dict[str, FloatArray] = {f: np.zeros(b_n, dtype=np.float64) for f in BROKER_FIELDS}
    brokers = aggregates[aggregates["kind"] == "broker"]
    if len(brokers):
        keys = brokers["key"].to_numpy(dtype=np.int64)
        for i, f in enumerate(BROKER_FIELDS):
            per[f] = np.bincount(
                keys, weights=brokers[f"v{i}"].to_numpy(dtype=np.float64), minlength=b_n
            ).astype(np.float64)
    totals = aggregates[aggregates["kind"] == "total"]
    tot: dict[str, float] = {}
    for i, f in enumerate(TOTAL_FIELDS):
        col = totals[f"v{i}"].to_numpy(dtype=np.float64)
        tot[f] = float(col.max()) if f in MAX_FIELDS and len(col) else float(col.sum())
    return per, tot


def cc_balancedness(violated: dict[str, bool], hard: dict[str, bool]) -> float:
    """Cruise Control's balancedness: 100 minus the normalised weight of each violated goal.

    Goals are given highest priority first; goal i of n weighs 1.1^(n-1-i), times 1.5 if hard.
    """
    names = list(violated)
    n = len(names)
    weights = [
        CC_PRIORITY_WEIGHT ** (n - 1 - i) * (CC_STRICTNESS_WEIGHT if hard[name] else 1.0)
        for i, name in enumerate(names)
    ]
    total = sum(weights)
    lost = sum(w for w, name in zip(weights, names, strict=True) if violated[name])
    return round(100.0 * (1.0 - lost / total), 3) if total else 100.0


def in_band(values: FloatArray, band: float) -> bool:
    if len(values) == 0:
        return True
    mean = float(values.mean())
    return bool(values.max() <= mean * band + 1e-9 and values.min() >= mean * max(0.0, 2.0 - band) - 1e-9)


def cv_of(values: FloatArray) -> float:
    mean = float(values.mean()) if len(values) else 0.0
    return float(values.std() / mean) if mean > 0 else 0.0


def finite_or_none(x: float) -> float | None:
    return None if math.isinf(x) or math.isnan(x) else x
