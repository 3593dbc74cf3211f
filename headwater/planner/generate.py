"""Synthetic clusters for tests and benchmarks: seeded, rack-valid, columnar (numpy) from the start.

Placement of the base cluster is Kafka-like: for each partition a random rack-distinct replica set
drawn so that brokers end near-balanced (each pick prefers the least-loaded eligible broker from a
random sample). Scenarios then perturb it: new empty brokers, a removed or dead broker, skewed sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd  # type: ignore[import-untyped]  # no stubs pinned for pandas

from headwater.planner.model import Broker
from headwater.planner.snapshot import Snapshot, wide_frame


@dataclass(frozen=True)
class ClusterSpec:
    brokers: int = 12
    racks: int = 3
    partitions: int = 240
    rf: int = 3
    topics: int = 8
    new_brokers: int = 0  # empty brokers appended after the loaded ones
    dead_brokers: int = 0  # marked alive=false (their replicas must move)
    sizes: str = "lognormal"  # lognormal | exponential | uniform | zero
    mean_size_bytes: int = 1_000_000_000
    capacity_bytes: int | None = 10_000_000_000_000
    skew: float = 0.0  # 0 = balanced placement; 1 = strongly favour low broker ids
    seed: int = 1


def generate(spec: ClusterSpec) -> Snapshot:
    rng = np.random.default_rng(spec.seed)
    n_old = spec.brokers
    n_all = spec.brokers + spec.new_brokers
    rack_of = np.arange(n_all) % spec.racks
    brokers = [
        Broker(
            id=i + 1,
            rack=f"r{int(rack_of[i])}",
            capacity_bytes=spec.capacity_bytes,
            alive=not (spec.dead_brokers and n_old - spec.dead_brokers <= i < n_old),
        )
        for i in range(n_all)
    ]
    # Topic sizes: a few large topics and many small ones.
    weights = rng.pareto(1.2, spec.topics) + 1.0
    per_topic = np.maximum(1, np.floor(weights / weights.sum() * spec.partitions)).astype(np.int64)
    while per_topic.sum() > spec.partitions:
        per_topic[int(np.argmax(per_topic))] -= 1
    per_topic[0] += spec.partitions - int(per_topic.sum())
    topic_names = np.array([f"topic-{i:05d}" for i in range(spec.topics)], dtype=object)
    topics = np.repeat(topic_names, per_topic)
    parts = np.concatenate([np.arange(n, dtype=np.int64) for n in per_topic])
    p_n = len(topics)
    replicas = _place(rng, p_n, spec.rf, n_old, rack_of[:n_old], spec.racks, spec.skew)
    ids = replicas + 1
    sizes = _sizes(rng, p_n, spec.sizes, spec.mean_size_bytes)
    leaders = ids[:, 0].copy()
    return Snapshot(brokers, wide_frame(topics, parts, ids, leaders, sizes))


def _place(
    rng: np.random.Generator, p_n: int, rf: int, n: int, rack_of: np.ndarray, racks: int, skew: float
) -> np.ndarray:
    out = np.zeros((p_n, rf), dtype=np.int64)
    load = np.zeros(n, dtype=np.float64)
    bias = np.exp(-skew * 3.0 * np.arange(n) / max(n - 1, 1))  # skew > 0 favours low ids
    sample = min(n, 4)
    for p in range(p_n):
        used_racks: set[int] = set()
        chosen: list[int] = []
        for _ in range(rf):
            allow_same_rack = len(used_racks) >= racks
            ok = np.array(
                [b not in chosen and (allow_same_rack or int(rack_of[b]) not in used_racks) for b in range(n)]
            )
            cand = np.nonzero(ok)[0]
            pick = rng.choice(cand, size=min(sample, len(cand)), replace=False)
            score = load[pick] / bias[pick] + rng.random(len(pick)) * 0.5
            b = int(pick[int(np.argmin(score))])
            chosen.append(b)
            used_racks.add(int(rack_of[b]))
            load[b] += 1
        out[p] = chosen
    return out


def _sizes(rng: np.random.Generator, n: int, kind: str, mean: int) -> np.ndarray:
    if kind == "zero":
        return np.zeros(n, dtype=np.int64)
    if kind == "uniform":
        raw = rng.uniform(0.0, 2.0, n)
    elif kind == "exponential":
        raw = rng.exponential(1.0, n)
    elif kind == "skewed":
        raw = rng.pareto(1.5, n) + 0.05
    else:
        raw = rng.lognormal(0.0, 1.0, n)
    raw = raw / raw.mean()
    out: np.ndarray = np.maximum(1, (raw * mean)).astype(np.int64)
    return out


def generate_large(
    partitions: int, brokers: int, racks: int, rf: int, seed: int, new_brokers: int = 0, dead: int = 0
) -> tuple[list[Broker], pd.DataFrame]:
    """A large cluster fast (vectorised): rack-distinct round-robin over a shuffled rack layout.

    Used by the scale benchmark, where the per-partition loop of :func:`generate` would be too slow.
    Partition p's replicas sit on racks (s, s+1, ..., s+rf-1) mod racks and, inside each rack, on a
    rotating broker, so racks are distinct whenever racks >= rf and load is even to within one.
    """
    rng = np.random.default_rng(seed)
    n_all = brokers + new_brokers
    rack_of = np.arange(n_all) % racks
    b = [
        Broker(
            i + 1,
            f"r{int(rack_of[i])}",
            20_000_000_000_000,
            alive=not (dead and brokers - dead <= i < brokers),
        )
        for i in range(n_all)
    ]
    per_rack = [np.nonzero(rack_of[:brokers] == r)[0] for r in range(racks)]
    start = rng.integers(0, racks, partitions)
    reps = np.zeros((partitions, rf), dtype=np.int64)
    p = np.arange(partitions)
    for j in range(rf):
        r = (start + j) % racks
        for rk in range(racks):
            sel = r == rk
            members = per_rack[rk]
            reps[sel, j] = members[(p[sel] // racks + j * 7 + rk) % len(members)]
    topic_sizes = rng.integers(1, 400, partitions // 50 + 1)
    bounds = np.cumsum(topic_sizes)
    t_idx = np.minimum(np.searchsorted(bounds, p, side="right"), len(topic_sizes) - 1)
    first = np.concatenate([[0], bounds[:-1]])
    part = p - first[t_idx]
    names = np.array([f"topic-{i:06d}" for i in range(len(topic_sizes))], dtype=object)
    sizes = (rng.lognormal(0.0, 1.0, partitions) * 200_000_000).astype(np.int64)
    ids = reps + 1
    return b, wide_frame(names[t_idx], part, ids, ids[:, 0], sizes)
