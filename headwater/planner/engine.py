"""The planning pipeline, written once against a small engine interface (Spark or in-process).

The driver only ever sees per-broker and per-bucket aggregates:

1. load + check the snapshot (aggregated checks: unknown brokers, duplicates, RF vs brokers/racks);
2. per-bucket, per-broker counts -> global replica targets (:mod:`headwater.planner.targets`) ->
   each bucket's share -> replica phase in every bucket (:func:`bucket.plan_replicas`);
3. reconcile: recount; if some broker still misses its target (a bucket was blocked by racks or
   disk), recompute targets from the new counts and run another round (at most ``max_rounds``);
4. the same for preferred leaders (:func:`bucket.plan_leaders`), which moves no data;
5. evaluate every bucket (:func:`evaluate.evaluate_bucket`) and add up the scores;
6. stream the changed partitions, sorted, into Kafka's JSON and the batch scheduler.
"""

from __future__ import annotations

import math
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
import pandas as pd  # type: ignore[import-untyped]  # no stubs pinned for pandas

from headwater.planner.bucket import (
    BucketContext,
    StatsContext,
    bucket_stats,
    plan_leaders,
    plan_replicas,
    widen,
)
from headwater.planner.errors import PlannerError
from headwater.planner.evaluate import (
    CC_REPLICA_CAPACITY,
    Balance,
    EvalContext,
    cc_balancedness,
    combine,
    evaluate_bucket,
    in_band,
)
from headwater.planner.model import (
    NO_BROKER,
    Broker,
    BrokerTable,
    FloatArray,
    Goal,
    IntArray,
    PlanOptions,
    max_per_rack,
)
from headwater.planner.reassignment import Change, ReassignmentWriter, Scheduler
from headwater.planner.snapshot import (
    PartitionSummary,
    Snapshot,
    check_brokers,
    check_partitions_summary,
    check_rf_feasible,
    orig_cols,
    plan_cols,
    summarize_partitions,
)
from headwater.planner.targets import balanced_targets, rack_aware_targets, split_by_rack, split_delta


class Engine(Protocol):
    """Where the partitions live and how a per-bucket function is run over them."""

    source: str

    def brokers(self) -> list[Broker]: ...
    def summary(self, broker_ids: IntArray) -> PartitionSummary: ...
    def width(self) -> int: ...
    def partitions(self) -> int: ...
    def prepare(self, width: int, buckets: int) -> None: ...
    def stats(self, ctx: StatsContext) -> pd.DataFrame: ...
    def map_replicas(self, ctx: BucketContext) -> None: ...
    def map_leaders(self, ctx: BucketContext) -> None: ...
    def evaluate(self, ctx: EvalContext) -> pd.DataFrame: ...
    def changes(self) -> Iterator[Change]: ...
    def apply_plan(self, plan: dict[tuple[str, int], list[int]]) -> None: ...


def bucket_of(topics: pd.Series, buckets: int) -> IntArray:
    """CRC-32 of the topic name modulo the bucket count (Spark's ``crc32`` gives the same value)."""
    uniq = pd.unique(topics)
    lookup = {t: zlib.crc32(str(t).encode("utf-8")) % buckets for t in uniq}
    out: IntArray = np.asarray(topics.map(lookup).to_numpy(dtype=np.int64), dtype=np.int64)
    return out


class LocalEngine:
    """Runs the per-bucket functions in this process, one bucket after the other (tests, small inputs)."""

    def __init__(self, snapshot: Snapshot, source: str = "<memory>") -> None:
        self.snapshot = snapshot
        self.source = source
        self.frame = snapshot.partitions

    def brokers(self) -> list[Broker]:
        return list(self.snapshot.brokers)

    def summary(self, broker_ids: IntArray) -> PartitionSummary:
        return summarize_partitions(self.snapshot.partitions, broker_ids)

    def width(self) -> int:
        return self.snapshot.width

    def partitions(self) -> int:
        return len(self.frame)

    def prepare(self, width: int, buckets: int) -> None:
        frame = widen(self.snapshot.partitions, width)
        frame["bucket"] = bucket_of(frame["topic"], buckets)
        self.frame = frame

    def _groups(self) -> Iterator[tuple[int, pd.DataFrame]]:
        for key, group in self.frame.groupby("bucket", sort=True):
            yield int(key), group

    def stats(self, ctx: StatsContext) -> pd.DataFrame:
        return pd.concat([bucket_stats(g, ctx, k) for k, g in self._groups()], ignore_index=True)

    def map_replicas(self, ctx: BucketContext) -> None:
        self.frame = pd.concat([plan_replicas(g, ctx, k) for k, g in self._groups()], ignore_index=True)

    def map_leaders(self, ctx: BucketContext) -> None:
        self.frame = pd.concat([plan_leaders(g, ctx, k) for k, g in self._groups()], ignore_index=True)

    def evaluate(self, ctx: EvalContext) -> pd.DataFrame:
        return pd.concat([evaluate_bucket(g, ctx, k) for k, g in self._groups()], ignore_index=True)

    def changes(self) -> Iterator[Change]:
        width = sum(1 for c in self.frame.columns if c.startswith("r") and c[1:].isdigit())
        frame = self.frame.sort_values(["topic", "partition"], kind="stable")
        old = frame[orig_cols(width)].to_numpy(dtype=np.int64)
        new = frame[plan_cols(width)].to_numpy(dtype=np.int64)
        diff = np.nonzero((old != new).any(axis=1))[0]
        topics = frame["topic"].to_numpy(dtype=object)
        parts = frame["partition"].to_numpy(dtype=np.int64)
        sizes = frame["size_bytes"].to_numpy(dtype=np.int64)
        leaders = frame["leader"].to_numpy(dtype=np.int64)
        for i in diff.tolist():
            yield Change(
                str(topics[i]),
                int(parts[i]),
                tuple(int(x) for x in old[i] if x >= 0),
                tuple(int(x) for x in new[i] if x >= 0),
                int(sizes[i]),
                int(leaders[i]),
            )

    def apply_plan(self, plan: dict[tuple[str, int], list[int]]) -> None:
        self.frame = apply_plan_frame(self.frame, plan, self.source)


def apply_plan_frame(
    frame: pd.DataFrame, plan: dict[tuple[str, int], list[int]], source: str
) -> pd.DataFrame:
    width = sum(1 for c in frame.columns if c.startswith("r") and c[1:].isdigit())
    keys = pd.MultiIndex.from_arrays([frame["topic"], frame["partition"]])
    pos = keys.get_indexer(pd.MultiIndex.from_tuples(list(plan.keys()), names=["topic", "partition"]))
    missing = [f"{t}-{p}" for (t, p), i in zip(plan.keys(), pos, strict=True) if i < 0][:5]
    if missing:
        raise PlannerError(f"plan names partition(s) not in snapshot {source}: {', '.join(missing)}")
    out = frame.copy()
    for (_, reps), i in zip(plan.items(), pos, strict=True):
        if len(reps) > width:
            raise PlannerError("internal: plan wider than the frame")
        row = [*reps, *([NO_BROKER] * (width - len(reps)))]
        for j in range(width):
            out.iat[int(i), out.columns.get_loc(f"r{j}")] = row[j]
    return out


@dataclass
class Setup:
    table: BrokerTable
    holds: np.ndarray[Any, np.dtype[np.bool_]]
    alive: np.ndarray[Any, np.dtype[np.bool_]]
    forced_dest: np.ndarray[Any, np.dtype[np.bool_]]
    balance_dest: np.ndarray[Any, np.dtype[np.bool_]]
    lead_ok: np.ndarray[Any, np.dtype[np.bool_]]
    limit_bytes: FloatArray
    weight: FloatArray
    width: int
    buckets: int
    n_racks_after: int
    n_racks_before: int
    max_rf: int


@dataclass
class PlanResult:
    report: dict[str, Any]
    timings_s: dict[str, float] = field(default_factory=dict)


def _ids_to_mask(table: BrokerTable, ids: tuple[int, ...], what: str) -> np.ndarray[Any, np.dtype[np.bool_]]:
    mask = np.zeros(len(table), dtype=bool)
    known = set(table.ids.tolist())
    unknown = sorted(set(ids) - known)
    if unknown:
        raise PlannerError(f"{what} broker(s) {unknown} are not in the snapshot")
    for b in ids:
        mask[int(np.searchsorted(table.ids, b))] = True
    return mask


def setup(engine: Engine, options: PlanOptions, width_needed: int | None = None) -> Setup:
    table = check_brokers(engine.brokers(), engine.source)
    summary = engine.summary(table.ids)
    check_partitions_summary(summary, engine.source)
    alive = table.alive()
    dead = ~alive | _ids_to_mask(table, options.dead_brokers, "dead")
    removed = _ids_to_mask(table, options.removed(), "removed")
    excluded = _ids_to_mask(table, options.exclude_brokers, "excluded")
    added = _ids_to_mask(table, options.added(), "added")
    # A cordoned broker (KIP-1066) is drained like a removed one and never receives; the leaders goal moves
    # no replicas, so there it only gives up leadership, like an excluded one.
    cordoned = table.cordoned() & ~dead
    if options.goal is Goal.LEADERS:
        excluded |= cordoned
    else:
        removed |= cordoned
    if options.goal is Goal.ADD_BROKERS and not options.brokers:
        raise PlannerError("goal add-brokers needs the new broker ids (--brokers)")
    if options.goal is Goal.REMOVE_BROKERS and not options.brokers:
        raise PlannerError("goal remove-brokers needs the broker ids to remove (--brokers)")
    if options.goal is Goal.REPLICATION_FACTOR and options.replication_factor is None:
        raise PlannerError("goal replication-factor needs --replication-factor")
    if (added & dead).any():
        raise PlannerError("an added broker is dead")
    if (added & cordoned).any():
        raise PlannerError("an added broker is cordoned (cordoned.log.dirs): it takes no new replicas")
    holds = ~dead & ~removed
    forced_dest = holds & ~excluded
    balance_dest = forced_dest & (added if options.goal is Goal.ADD_BROKERS else True)
    lead_ok = holds & ~excluded
    if options.replication_factor is not None:
        if options.replication_factor < 1:
            raise PlannerError("replication factor must be at least 1")
        check_rf_feasible(options.replication_factor, forced_dest, table, "requested")
    if options.replication_factor is None or options.rf_topics:
        check_rf_feasible(summary.max_rf, holds, table, f"of partition {summary.max_rf_example}")
    cap = table.capacity_bytes()
    limit = cap * options.disk_threshold
    weight = np.where(np.isfinite(cap), cap, 1.0) if np.isfinite(cap[holds]).all() else np.ones(len(table))
    width = max(engine.width(), options.replication_factor or 0, width_needed or 0)
    buckets = max(1, math.ceil(summary.partitions / max(options.partitions_per_bucket, 1)))
    return Setup(
        table=table,
        holds=holds,
        alive=alive & ~dead,
        forced_dest=forced_dest,
        balance_dest=balance_dest,
        lead_ok=lead_ok,
        limit_bytes=limit,
        weight=weight,
        width=width,
        buckets=buckets,
        n_racks_after=len(np.unique(table.rack_index[holds])),
        n_racks_before=len(np.unique(table.rack_index[alive & ~dead])) if (alive & ~dead).any() else 0,
        max_rf=summary.max_rf,
    )


@dataclass
class BucketCounts:
    replicas: IntArray  # [K, B]
    bytes: FloatArray  # [K, B]
    leaders: IntArray  # [K, B]
    partitions: IntArray  # [K]
    bucket_bytes: FloatArray  # [K]
    growth: IntArray  # [K]
    growth_bytes: FloatArray  # [K]


def _counts(frame: pd.DataFrame, k_n: int, b_n: int) -> BucketCounts:
    rep = np.zeros((k_n, b_n), dtype=np.int64)
    byt = np.zeros((k_n, b_n), dtype=np.float64)
    led = np.zeros((k_n, b_n), dtype=np.int64)
    parts = np.zeros(k_n, dtype=np.int64)
    bb = np.zeros(k_n, dtype=np.float64)
    growth = np.zeros(k_n, dtype=np.int64)
    gb = np.zeros(k_n, dtype=np.float64)
    k = frame["bucket"].to_numpy(dtype=np.int64)
    b = frame["broker"].to_numpy(dtype=np.int64)
    br = b >= 0
    rep[k[br], b[br]] = frame["replicas"].to_numpy(dtype=np.int64)[br]
    byt[k[br], b[br]] = frame["bytes"].to_numpy(dtype=np.float64)[br]
    led[k[br], b[br]] = frame["leaders"].to_numpy(dtype=np.int64)[br]
    tot = ~br
    parts[k[tot]] = frame["replicas"].to_numpy(dtype=np.int64)[tot]
    bb[k[tot]] = frame["bytes"].to_numpy(dtype=np.float64)[tot]
    growth[k[tot]] = frame["leaders"].to_numpy(dtype=np.int64)[tot]
    gb[k[tot]] = frame["extra"].to_numpy(dtype=np.float64)[tot]
    return BucketCounts(rep, byt, led, parts, bb, growth, gb)


def _base_context(s: Setup, options: PlanOptions) -> BucketContext:
    count_moves = options.goal in (Goal.REBALANCE, Goal.ADD_BROKERS)
    return BucketContext(
        width=s.width,
        broker_ids=s.table.ids,
        rack=s.table.rack_index,
        n_racks=s.n_racks_after,
        holds=s.holds,
        forced_dest=s.forced_dest,
        balance_dest=s.balance_dest,
        lead_ok=s.lead_ok,
        count_moves=count_moves,
        byte_swaps=count_moves and options.balance_bytes,
        band=options.balance_band,
        rf_target=options.replication_factor,
        rf_topics=options.rf_topics,
        exclude_topics=options.exclude_topics,
    )


def _replica_targets(
    s: Setup, c: BucketCounts, options: PlanOptions, first: bool
) -> tuple[IntArray, BucketContext]:
    current = c.replicas.sum(axis=0)
    growth = c.growth if first else np.zeros_like(c.growth)
    total = int(current.sum() + growth.sum())
    cur_bytes = c.bytes.sum(axis=0)
    receives = s.balance_dest if options.goal in (Goal.REBALANCE, Goal.ADD_BROKERS) else s.forced_dest
    rf_after = s.max_rf if options.replication_factor is None else options.replication_factor
    if options.replication_factor is not None and options.rf_topics:
        rf_after = max(rf_after, s.max_rf)
    rack_cap = int(c.partitions.sum()) * max_per_rack(rf_after, s.n_racks_after)
    target = rack_aware_targets(current, s.holds, receives, total, cur_bytes, s.table.rack_index, rack_cap)
    delta = target - current
    rack = s.table.rack_index
    full = [int(r) for r in np.unique(rack[s.holds]) if int(current[s.holds & (rack == r)].sum()) >= rack_cap]
    per_bucket = (
        split_by_rack(delta, c.replicas, growth, rack, full)
        if growth.sum() == 0
        else split_delta(delta, c.replicas, growth)
    )
    bucket_after_bytes = c.bytes.sum(axis=1) + (c.growth_bytes if first else 0.0)
    total_after = float(bucket_after_bytes.sum())
    # Byte targets follow the count targets (so a rack that racks force to hold more replicas is
    # expected to hold more bytes too), scaled by disk capacity when brokers differ in size.
    w = np.where(s.holds, s.weight * target, 0.0)
    share = w / w.sum() if w.sum() > 0 else w
    headroom = s.limit_bytes - cur_bytes
    frac = (
        bucket_after_bytes / total_after
        if total_after > 0
        else np.full(len(c.partitions), 1.0 / len(c.partitions))
    )
    k_n = c.replicas.shape[0]
    ctx = replace(
        _base_context(s, options),
        rf_target=options.replication_factor if first else None,
        byte_swaps=False,
        replica_target={k: c.replicas[k] + per_bucket[k] for k in range(k_n)},
        byte_target={k: bucket_after_bytes[k] * share for k in range(k_n)},
        byte_limit={k: c.bytes[k] + headroom * frac[k] for k in range(k_n)},
    )
    return target, ctx


def _swap_context(s: Setup, c: BucketCounts, options: PlanOptions) -> BucketContext | None:
    """A counts-neutral round of byte swaps, or None when every broker's bytes are within the band.

    Each bucket is asked to correct only its share of each broker's *cluster-wide* byte deviation,
    so a broker that is fine overall is left alone even where one bucket happens to be lumpy.
    """
    base = _base_context(s, options)
    if not (base.count_moves and options.balance_bytes):
        return None
    current = c.replicas.sum(axis=0)
    cur_bytes = c.bytes.sum(axis=0)
    w = np.where(s.holds, s.weight * current, 0.0)
    if w.sum() <= 0:
        return None
    bt = cur_bytes.sum() * w / w.sum()
    mask = s.balance_dest & s.holds & (bt > 0)
    ratio = cur_bytes[mask] / bt[mask]
    if len(ratio) == 0 or (ratio.max() <= options.balance_band and ratio.min() >= 2.0 - options.balance_band):
        return None
    total = float(cur_bytes.sum())
    frac = c.bytes.sum(axis=1) / total if total > 0 else np.full(len(c.partitions), 1.0 / len(c.partitions))
    headroom = s.limit_bytes - cur_bytes
    k_n = c.replicas.shape[0]
    return replace(
        base,
        byte_swaps=True,
        replica_target={k: c.replicas[k].copy() for k in range(k_n)},
        byte_target={k: c.bytes[k] - (cur_bytes - bt) * frac[k] for k in range(k_n)},
        byte_limit={k: c.bytes[k] + headroom * frac[k] for k in range(k_n)},
    )


def _leader_context(s: Setup, c: BucketCounts, options: PlanOptions) -> tuple[IntArray, BucketContext]:
    current = c.leaders.sum(axis=0)
    total = int(current.sum())
    target = balanced_targets(current, s.lead_ok, s.lead_ok, total, c.replicas.sum(axis=0).astype(np.float64))
    per_bucket = split_delta(target - current, c.leaders, np.zeros(c.leaders.shape[0], dtype=np.int64))
    ctx = replace(
        _base_context(s, options),
        leader_target={k: c.leaders[k] + per_bucket[k] for k in range(c.leaders.shape[0])},
    )
    return target, ctx


def _stats_ctx(s: Setup, options: PlanOptions, first: bool) -> StatsContext:
    return StatsContext(
        width=s.width,
        broker_ids=s.table.ids,
        rf_target=options.replication_factor if first else None,
        rf_topics=options.rf_topics,
        exclude_topics=options.exclude_topics,
    )


def run_plan(engine: Engine, options: PlanOptions) -> dict[str, Any]:
    """Plan in place (the engine ends up holding the planned frame); returns timing and round info."""
    t0 = time.perf_counter()
    s = setup(engine, options)
    engine.prepare(s.width, s.buckets)
    b_n = len(s.table)
    info: dict[str, Any] = {"buckets": s.buckets, "replica_rounds": 0, "leader_rounds": 0}
    if options.goal is not Goal.LEADERS:
        counts = _counts(engine.stats(_stats_ctx(s, options, True)), s.buckets, b_n)
        previous: IntArray | None = None
        for rnd in range(max(options.max_rounds, 1)):
            target, ctx = _replica_targets(s, counts, options, rnd == 0)
            delta = target - counts.replicas.sum(axis=0)
            stranded = bool((counts.replicas.sum(axis=0)[~s.holds] > 0).any())
            if rnd > 0 and (not ctx.count_moves or not delta.any()) and not stranded:
                break
            if previous is not None and np.array_equal(previous, delta) and not stranded:
                break  # the last round could not improve; another would repeat it
            previous = delta
            engine.map_replicas(ctx)
            info["replica_rounds"] = rnd + 1
            counts = _counts(engine.stats(_stats_ctx(s, options, False)), s.buckets, b_n)
        swap = _swap_context(s, counts, options)
        if swap is not None:
            engine.map_replicas(swap)
            info["byte_swap_round"] = True
    info["replica_phase_s"] = round(time.perf_counter() - t0, 3)
    t1 = time.perf_counter()
    counts = _counts(engine.stats(_stats_ctx(s, options, False)), s.buckets, b_n)
    last: IntArray | None = None
    for rnd in range(max(options.max_rounds, 1)):
        target, lctx = _leader_context(s, counts, options)
        delta = target - counts.leaders.sum(axis=0)
        if not delta.any() or (last is not None and np.array_equal(last, delta)):
            break
        last = delta
        engine.map_leaders(lctx)
        info["leader_rounds"] = rnd + 1
        counts = _counts(engine.stats(_stats_ctx(s, options, False)), s.buckets, b_n)
    info["leader_phase_s"] = round(time.perf_counter() - t1, 3)
    info["setup"] = s
    return info


def eval_context(s: Setup, options: PlanOptions) -> EvalContext:
    return EvalContext(
        width=s.width,
        broker_ids=s.table.ids,
        rack=s.table.rack_index,
        holds_before=s.alive,
        holds_after=s.holds,
        n_racks_before=s.n_racks_before,
        n_racks_after=s.n_racks_after,
        exclude_topics=options.exclude_topics,
    )


def build_report(
    engine: Engine,
    s: Setup,
    options: PlanOptions,
    concurrency: int,
    throttle_bytes_per_s: float,
    plan_out: Any | None,
    schedule_out: Any | None = None,
) -> dict[str, Any]:
    """Evaluate the engine's planned frame, stream the plan and schedule, and return the report."""
    agg = engine.evaluate(eval_context(s, options))
    per, tot = combine(agg, len(s.table))
    scheduler = Scheduler(concurrency, throttle_bytes_per_s)
    writer = ReassignmentWriter(plan_out) if plan_out is not None else None
    for change in engine.changes():
        batch = scheduler.add(change)
        if writer is not None:
            writer.add(change)
        if schedule_out is not None:
            schedule_out.write(
                f'{{"batch":{batch + 1 if batch >= 0 else 0},"topic":"{change.topic}","partition":{change.partition}}}\n'
            )
    if writer is not None:
        writer.close()
    return make_report(s, options, per, tot, scheduler)


def make_report(
    s: Setup,
    options: PlanOptions,
    per: dict[str, FloatArray],
    tot: dict[str, float],
    scheduler: Scheduler,
) -> dict[str, Any]:
    before, after = s.alive, s.holds
    ids = s.table.ids
    cap = s.table.capacity_bytes()

    def bal(field_name: str, mask: np.ndarray[Any, np.dtype[np.bool_]], util: bool = False) -> Balance:
        v = per[field_name][mask]
        if util:
            v = v / s.weight[mask]
        return Balance.of(v)

    def violations(stage: str, mask: np.ndarray[Any, np.dtype[np.bool_]]) -> dict[str, bool]:
        band = options.balance_band
        reps = per[f"replicas_{stage}"][mask]
        byts = per[f"bytes_{stage}"][mask] / s.weight[mask]
        leads = per[f"leaders_{stage}"][mask]
        over_disk = (per[f"bytes_{stage}"][mask] > cap[mask] * options.disk_threshold).any()
        return {
            "RackAwareGoal": tot[f"rack_violations_{stage}"] > 0,
            "ReplicaCapacityGoal": bool((reps > CC_REPLICA_CAPACITY).any()),
            "DiskCapacityGoal": bool(over_disk),
            "ReplicaDistributionGoal": not in_band(reps, band),
            "DiskUsageDistributionGoal": not in_band(byts, band),
            "TopicReplicaDistributionGoal": tot[f"topic_cc_violations_{stage}"] > 0,
            "LeaderReplicaDistributionGoal": not in_band(leads, band),
        }

    hard = {
        "RackAwareGoal": True,
        "ReplicaCapacityGoal": True,
        "DiskCapacityGoal": True,
        "ReplicaDistributionGoal": False,
        "DiskUsageDistributionGoal": False,
        "TopicReplicaDistributionGoal": False,
        "LeaderReplicaDistributionGoal": False,
    }
    v_before, v_after = violations("before", before), violations("after", after)
    max_in = int(np.argmax(per["in_bytes"])) if len(ids) else 0
    max_out = int(np.argmax(per["out_bytes"])) if len(ids) else 0
    topics = max(tot["topics"], 1.0)
    sched = scheduler.summary()
    bottleneck_s = max(float(per["in_bytes"].max(initial=0.0)), float(per["out_bytes"].max(initial=0.0)))
    return {
        "goal": options.goal.value,
        "partitions": int(tot["partitions"]),
        "brokers": {"total": len(ids), "holding_after": int(after.sum()), "alive_before": int(before.sum())},
        "replica_moves": int(tot["replica_moves"]),
        "partitions_moved": int(tot["partitions_moved"]),
        "bytes_moved": int(tot["bytes_moved"]),
        "leader_changes": int(tot["leader_changes"]),
        "max_inbound": {
            "broker": int(ids[max_in]) if len(ids) else None,
            "bytes": int(per["in_bytes"].max(initial=0)),
        },
        "max_outbound": {
            "broker": int(ids[max_out]) if len(ids) else None,
            "bytes": int(per["out_bytes"].max(initial=0)),
        },
        "balance": {
            stage: {
                "replicas": bal(f"replicas_{stage}", mask).as_dict(),
                "leaders": bal(f"leaders_{stage}", mask).as_dict(),
                "bytes": bal(f"bytes_{stage}", mask).as_dict(),
                "topic_spread_mean": round(tot[f"topic_spread_sum_{stage}"] / topics, 4),
                "topic_spread_max": int(tot[f"topic_spread_max_{stage}"]),
            }
            for stage, mask in (("before", before), ("after", after))
        },
        "violations": {
            "rack_before": int(tot["rack_violations_before"]),
            "rack_after": int(tot["rack_violations_after"]),
            "rf_changed": int(tot["rf_changed"]),
            "duplicate_replicas": int(tot["duplicate_replicas"]),
            "replicas_on_removed_or_dead": int(tot["replicas_on_removed"]),
            "excluded_topics_changed": int(tot["excluded_changed"]),
            "over_disk_limit_after": int(
                (per["bytes_after"][after] > cap[after] * options.disk_threshold).sum()
            ),
        },
        "balancedness": {
            "before": cc_balancedness(v_before, hard),
            "after": cc_balancedness(v_after, hard),
            "goals_violated_before": [k for k, v in v_before.items() if v],
            "goals_violated_after": [k for k, v in v_after.items() if v],
        },
        "execution": {**sched, "lower_bound_s": round(bottleneck_s / scheduler.throttle, 3)},
        "per_broker": {
            str(int(ids[i])): {
                "replicas": [int(per["replicas_before"][i]), int(per["replicas_after"][i])],
                "leaders": [int(per["leaders_before"][i]), int(per["leaders_after"][i])],
                "bytes": [int(per["bytes_before"][i]), int(per["bytes_after"][i])],
                "in_bytes": int(per["in_bytes"][i]),
                "out_bytes": int(per["out_bytes"][i]),
            }
            for i in range(len(ids))
        },
    }


def evaluate_plan(
    engine: Engine,
    plan: dict[tuple[str, int], list[int]],
    options: PlanOptions,
    concurrency: int,
    throttle_bytes_per_s: float,
) -> dict[str, Any]:
    """Score a given plan against the snapshot, however it was made."""
    widest = max((len(r) for r in plan.values()), default=0)
    s = setup(engine, replace(options, replication_factor=None), widest)
    known = set(s.table.ids.tolist())
    unknown = sorted({b for reps in plan.values() for b in reps} - known)
    if unknown:
        raise PlannerError(f"plan places replicas on broker(s) {unknown[:5]} that are not in the snapshot")
    engine.prepare(s.width, s.buckets)
    engine.apply_plan(plan)
    return build_report(engine, s, options, concurrency, throttle_bytes_per_s, None)
