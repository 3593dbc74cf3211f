"""Plan one bucket (a group of whole topics) against per-broker targets. Runs inside a Spark task.

Input is the bucket's wide partition frame (``o*`` the snapshot, ``r*`` the plan so far) and a
:class:`BucketContext` with this bucket's share of every broker's targets. Everything is numpy over
broker positions and partition rows; the order of rows is fixed by sorting on (topic, partition) first,
so a bucket gives the same answer wherever and whenever it runs.

Replica phase, in order (each step only moves what it must):
1. RF change: add replicas to the brokers furthest below target, or drop them from the furthest above.
2. Forced moves: replicas on removed or dead brokers, replicas in an over-full rack, brokers over
   their disk limit. Destinations: a broker below its count target first, then the one holding the
   fewest replicas of the topic, then the one furthest below its byte target.
3. Count balance: while a broker is above its target, move one of its replicas to a broker below.
   Every such move removes one unit of surplus, so the phase makes exactly sum(surplus) moves, the
   lower bound, unless racks or disk limits block a pair. *Which* replica moves is free, and is where
   the other objectives are won: topic spread, disk bytes, and not moving the preferred leader.
4. Byte swaps: if a broker's bytes are still outside the band, exchange a large replica for a small
   one with the lightest broker (two moves, counts unchanged). Off when the band is met.

Leader phase (separate pass, after the per-broker leader targets are known): reorder replica lists
so that each broker leads its target count, preferring the current preferred leader and using
augmenting paths (a leads p, b is in p; b leads q, c is in q ...) when no direct hand-over exists.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import pandas as pd  # type: ignore[import-untyped]  # no stubs pinned for pandas

from headwater.planner.errors import PlannerError
from headwater.planner.model import NO_BROKER, BoolArray, FloatArray, IntArray
from headwater.planner.snapshot import plan_cols

# How much one step of topic spread weighs against one (squared, mean-size normalised) byte deviation.
TOPIC_WEIGHT = 2.0
# The same trade-off for where evacuated replicas land (tuned separately on the benchmark's
# remove/dead cases; with the exchange polish after evacuation, the same value serves both).
FORCED_TOPIC_WEIGHT = 2.0
# Destinations scored jointly with the replica for each count move (the neediest ones first).
SINKS_CONSIDERED = 1


@dataclass(frozen=True)
class BucketContext:
    width: int
    broker_ids: IntArray
    rack: IntArray
    n_racks: int  # racks among the brokers that may hold replicas
    holds: BoolArray  # may hold replicas after the plan
    forced_dest: BoolArray  # may receive an evacuated or added replica
    balance_dest: BoolArray  # may receive a balancing move
    lead_ok: BoolArray
    count_moves: bool
    byte_swaps: bool
    band: float
    rf_target: int | None
    rf_topics: str | None
    exclude_topics: str | None
    replica_target: dict[int, IntArray] = field(default_factory=dict)
    byte_target: dict[int, FloatArray] = field(default_factory=dict)
    byte_limit: dict[int, FloatArray] = field(default_factory=dict)
    leader_target: dict[int, IntArray] = field(default_factory=dict)


def sort_frame(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["topic", "partition"], kind="stable").reset_index(drop=True)


def topic_mask(topics: pd.Series, pattern: str | None) -> BoolArray:
    if not pattern:
        return np.zeros(len(topics), dtype=bool)
    rx = re.compile(pattern)
    uniq = pd.unique(topics)
    hit = {t: bool(rx.fullmatch(str(t))) for t in uniq}
    out: BoolArray = np.asarray(topics.map(hit).to_numpy(dtype=bool), dtype=bool)
    return out


class _Members:
    """For each broker, the rows it holds a replica of; stale entries are dropped lazily on read."""

    def __init__(self, reps: IntArray, n_brokers: int) -> None:
        p_n, w = reps.shape
        flat = reps.ravel()
        rows = np.repeat(np.arange(p_n, dtype=np.int64), w)
        ok = flat >= 0
        flat, rows = flat[ok], rows[ok]
        order = np.argsort(flat, kind="stable")
        counts = np.bincount(flat, minlength=n_brokers)
        self.lists: list[IntArray] = list(np.split(rows[order], np.cumsum(counts)[:-1]))
        self.extra: list[list[int]] = [[] for _ in range(n_brokers)]

    def get(self, b: int, reps: IntArray) -> IntArray:
        cur = self.lists[b]
        if self.extra[b]:
            cur = np.unique(np.concatenate([cur, np.asarray(self.extra[b], dtype=np.int64)]))
            self.extra[b] = []
        if len(cur):
            cur = cur[(reps[cur] == b).any(axis=1)]
        self.lists[b] = cur
        return cur

    def add(self, b: int, row: int) -> None:
        self.extra[b].append(row)


class _ReplicaPlanner:
    def __init__(self, frame: pd.DataFrame, ctx: BucketContext, bucket: int) -> None:
        self.ctx = ctx
        self.frame = frame
        b_n = len(ctx.broker_ids)
        self.b_n = b_n
        ids = frame[plan_cols(ctx.width)].to_numpy(dtype=np.int64)
        pos = np.searchsorted(ctx.broker_ids, np.where(ids < 0, 0, ids))
        if b_n:
            bad = (ids >= 0) & ((pos >= b_n) | (ctx.broker_ids[np.minimum(pos, b_n - 1)] != ids))
            if bad.any():
                raise PlannerError(f"internal: unknown broker id {int(ids[bad][0])} in bucket {bucket}")
        self.reps: IntArray = np.where(ids < 0, NO_BROKER, pos).astype(np.int64)
        self.size: IntArray = frame["size_bytes"].to_numpy(dtype=np.int64)
        self.topic_idx, self.topic_names = pd.factorize(frame["topic"], sort=True)
        t_n = max(len(self.topic_names), 1)
        dtype = np.int32 if t_n * b_n <= 8_000_000 else np.int16
        self.tc = np.zeros((t_n, b_n), dtype=dtype)
        p_idx, col = np.nonzero(self.reps >= 0)
        np.add.at(self.tc, (self.topic_idx[p_idx], self.reps[p_idx, col]), 1)
        holders = max(int(ctx.holds.sum()), 1)
        self.topic_mean = self.tc.sum(axis=1).astype(np.float64) / holders
        self.movable: BoolArray = ~topic_mask(frame["topic"], ctx.exclude_topics)
        self.cnt = np.bincount(self.reps[self.reps >= 0], minlength=b_n).astype(np.int64)
        self.bytes = np.zeros(b_n, dtype=np.float64)
        np.add.at(self.bytes, self.reps[p_idx, col], self.size[p_idx].astype(np.float64))
        self.target = ctx.replica_target.get(bucket, self.cnt.copy()).astype(np.int64)
        self.byte_target = ctx.byte_target.get(bucket, self.bytes.copy())
        self.limit = ctx.byte_limit.get(bucket, np.full(b_n, np.inf))
        self.rf = (self.reps >= 0).sum(axis=1)
        self.members = _Members(self.reps, b_n)
        nonzero = self.size[self.size > 0]
        self.mean_size = float(nonzero.mean()) if len(nonzero) else 1.0
        self.moves = 0

    # ---- constraint checks ----------------------------------------------------------------------
    def _maxper(self, rows: IntArray) -> IntArray:
        rf = self.rf[rows]
        racks = max(self.ctx.n_racks, 1)
        return np.asarray(-(-rf // racks), dtype=np.int64)

    def _fits(self, rows: IntArray, dest: int, src: int) -> BoolArray:
        """May ``dest`` replace ``src`` (or join, if src is -1) in each row, by set, rack and disk?"""
        reps = self.reps[rows]
        rack = self.ctx.rack
        racks = np.where(reps >= 0, rack[np.maximum(reps, 0)], -1)
        same = (racks == rack[dest]).sum(axis=1)
        if src >= 0 and rack[src] == rack[dest]:
            same = same - 1
        ok: BoolArray = ~(reps == dest).any(axis=1) & (same + 1 <= self._maxper(rows))
        ok &= self.bytes[dest] + self.size[rows] <= self.limit[dest]
        return ok

    def _dest_for(self, row: int, src: int, allowed: BoolArray) -> int:
        """Best destination for one replica of ``row`` (replacing ``src``, or added when -1)."""
        reps = self.reps[row]
        present = reps[reps >= 0]
        rack = self.ctx.rack
        counts = np.bincount(rack[present], minlength=int(rack.max()) + 1 if len(rack) else 1)
        if src >= 0:
            counts[rack[src]] -= 1
        limit = int(self._maxper(np.array([row]))[0])
        ok = allowed.copy()
        ok[present] = False
        ok &= counts[rack] + 1 <= limit
        ok &= self.bytes + self.size[row] <= self.limit
        cand = np.nonzero(ok)[0]
        if len(cand) == 0:
            return NO_BROKER
        deficit = self.target[cand] - self.cnt[cand]
        t = self.topic_idx[row]
        topic = np.clip(self.tc[t, cand] - self.topic_mean[t] + 0.5, -1.0, 3.0)
        # As for count moves: the size this broker ideally receives next is its byte deficit spread
        # over the replicas it still needs.
        ideal = (self.byte_target[cand] - self.bytes[cand]) / np.maximum(deficit, 1)
        byte_cost = np.minimum((float(self.size[row]) - ideal) ** 2 / (2.0 * self.mean_size**2), 4.0)
        score = FORCED_TOPIC_WEIGHT * topic + byte_cost
        order = np.lexsort((cand, -deficit, score, ~(deficit > 0)))
        return int(cand[order[0]])

    # ---- mutation ---------------------------------------------------------------------------------
    def _replace(self, row: int, col: int, dest: int) -> None:
        src = int(self.reps[row, col])
        t = self.topic_idx[row]
        s = float(self.size[row])
        if src >= 0:
            self.cnt[src] -= 1
            self.bytes[src] -= s
            self.tc[t, src] -= 1
        self.reps[row, col] = dest
        self.cnt[dest] += 1
        self.bytes[dest] += s
        self.tc[t, dest] += 1
        self.members.add(dest, row)
        self.moves += 1

    def _drop(self, row: int, col: int) -> None:
        src = int(self.reps[row, col])
        t = self.topic_idx[row]
        self.cnt[src] -= 1
        self.bytes[src] -= float(self.size[row])
        self.tc[t, src] -= 1
        kept = [int(x) for x in self.reps[row] if x >= 0 and x != src]
        self.reps[row] = NO_BROKER
        self.reps[row, : len(kept)] = kept
        self.rf[row] -= 1

    def _name(self, row: int) -> str:
        return f"{self.frame['topic'].iat[row]}-{int(self.frame['partition'].iat[row])}"

    def _place_or_fail(self, row: int, src: int, allowed: BoolArray) -> int:
        dest = self._dest_for(row, src, allowed)
        if dest == NO_BROKER:
            why = "removed or dead broker" if src >= 0 and not self.ctx.holds[src] else "new replica"
            raise PlannerError(
                f"no broker can take a replica of {self._name(row)} ({why}) without breaking the rack "
                "rule or a disk capacity limit"
            )
        return dest

    # ---- phases -------------------------------------------------------------------------------------
    def change_rf(self) -> None:
        want = self.ctx.rf_target
        if want is None:
            return
        if want > self.ctx.width:
            raise PlannerError(f"internal: replica columns ({self.ctx.width}) narrower than RF {want}")
        rows = np.nonzero(topic_mask(self.frame["topic"], self.ctx.rf_topics or ".*") & self.movable)[0]
        for row in rows.tolist():
            while self.rf[row] > want:
                reps = self.reps[row]
                cols = np.nonzero(reps >= 0)[0]
                gone = ~self.ctx.holds[reps[cols]]
                surplus = self.cnt[reps[cols]] - self.target[reps[cols]]
                is_leader = cols == 0
                order = np.lexsort((cols, is_leader, -surplus, ~gone))
                self._drop(row, int(cols[order[0]]))
            while self.rf[row] < want:
                self.rf[row] += 1  # the rack limit is that of the new RF
                col = int(np.nonzero(self.reps[row] < 0)[0][0])
                dest = self._place_or_fail(row, NO_BROKER, self.ctx.forced_dest)
                self._replace(row, col, dest)

    def forced(self) -> None:
        holds = self.ctx.holds
        reps = self.reps
        # Replicas on brokers that must end empty.
        placed: list[tuple[int, int, int]] = []  # (row, col, original broker) of evacuated replicas
        bad_rows, bad_cols = np.nonzero((reps >= 0) & ~holds[np.maximum(reps, 0)])
        # Largest first, so the big replicas find room while every destination still has a deficit.
        order = np.argsort(-self.size[bad_rows], kind="stable")
        for row, col in zip(bad_rows[order].tolist(), bad_cols[order].tolist(), strict=True):
            if not self.movable[row]:
                raise PlannerError(
                    f"{self._name(row)} has a replica on removed or dead broker "
                    f"{int(self.ctx.broker_ids[reps[row, col]])} but its topic is excluded from moves"
                )
            src = int(reps[row, col])
            dest = self._place_or_fail(row, src, self.ctx.forced_dest)
            if self.target[dest] - self.cnt[dest] <= 0:
                dest = self._reroute(row, src, dest, placed)
            self._replace(row, col, dest)
            placed.append((row, col, src))
        self._polish(placed)
        # Rack violations already present in the snapshot.
        rack = self.ctx.rack
        racks = np.where(reps >= 0, rack[np.maximum(reps, 0)], -1)
        same = (racks[:, :, None] == racks[:, None, :]) & (racks[:, :, None] >= 0)
        worst = same.sum(axis=2).max(axis=1) if len(reps) else np.zeros(0, dtype=np.int64)
        for row in np.nonzero((worst > self._maxper(np.arange(len(reps)))) & self.movable)[0].tolist():
            while True:
                r = self.reps[row]
                cols = np.nonzero(r >= 0)[0]
                rk = rack[r[cols]]
                cnt = np.bincount(rk)
                limit = int(self._maxper(np.array([row]))[0])
                over = cols[cnt[rk] > limit]
                if len(over) == 0:
                    break
                surplus = self.cnt[r[over]] - self.target[r[over]]
                col = int(over[np.lexsort((over, over == 0, -surplus))[0]])
                self._replace(row, col, self._place_or_fail(row, int(r[col]), self.ctx.forced_dest))
        # Brokers over their disk limit shed their largest movable replicas.
        for b in np.nonzero(self.bytes > self.limit)[0].tolist():
            while self.bytes[b] > self.limit[b]:
                rows = self.members.get(b, self.reps)
                rows = rows[self.movable[rows]]
                moved = False
                for row in rows[np.argsort(-self.size[rows], kind="stable")].tolist():
                    dest = self._dest_for(row, b, self.ctx.forced_dest)
                    if dest != NO_BROKER:
                        col = int(np.nonzero(self.reps[row] == b)[0][0])
                        self._replace(row, col, dest)
                        moved = True
                        break
                if not moved:
                    raise PlannerError(
                        f"broker {int(self.ctx.broker_ids[b])} is over its disk limit and no replica "
                        "can move off it without breaking another limit or the rack rule"
                    )

    def _reroute(self, row: int, src: int, fallback: int, placed: list[tuple[int, int, int]]) -> int:
        """Racks leave no broker below target for this replica: free one up instead (augmenting path).

        Look for an evacuated replica already placed on a broker this one may use, which could itself
        go to a broker that is still below target; move that one on and take its place. The total
        stays one move per evacuated replica, where the fallback would cost a second move later.
        """
        limit = len(placed)
        for i in range(limit - 1, -1, -1):
            r2, c2, src2 = placed[i]
            c = int(self.reps[r2, c2])
            if c == fallback or not self._fits(np.array([row]), c, src)[0]:
                continue
            if (
                self.size[row] > self.size[r2]
                and self.bytes[c] + self.size[row] - self.size[r2] > self.limit[c]
            ):
                continue
            d = self._dest_for(r2, c, self.ctx.forced_dest)
            if d == NO_BROKER or self.target[d] - self.cnt[d] <= 0:
                continue
            self._replace(r2, c2, d)
            self.moves -= 1  # r2 still counts as one move off its original broker
            placed[i] = (r2, c2, src2)
            return c
        return fallback

    def _polish(self, placed: list[tuple[int, int, int]]) -> None:
        """Exchange the destinations of two evacuated replicas when that evens out bytes.

        Where an evacuated replica lands is a free choice (it costs one move wherever it goes), so
        swapping the landing brokers of two of them keeps the move count and the per-broker counts
        and can only be judged on bytes and topic spread. Greedy: heaviest receiver against lightest.
        """
        if len(placed) < 2:
            return
        rows = np.array([r for r, _, _ in placed], dtype=np.int64)
        cols = np.array([c for _, c, _ in placed], dtype=np.int64)
        for _ in range(2 * len(placed)):
            dest = self.reps[rows, cols]
            receivers = np.unique(dest)
            if len(receivers) < 2:
                return
            dev = self.bytes[receivers] - self.byte_target[receivers]
            improved = False
            for hi in receivers[np.argsort(-dev, kind="stable")][:4].tolist():
                for lo in receivers[np.argsort(dev, kind="stable")][:4].tolist():
                    if hi != lo and self._polish_pair(rows, cols, dest, hi, lo):
                        improved = True
                        break
                if improved:
                    break
            if not improved:
                return

    def _polish_pair(self, rows: IntArray, cols: IntArray, dest: IntArray, hi: int, lo: int) -> bool:
        on_hi = np.nonzero(dest == hi)[0]
        on_lo = np.nonzero(dest == lo)[0]
        if len(on_hi) == 0 or len(on_lo) == 0:
            return False
        e_hi = self.bytes[hi] - self.byte_target[hi]
        e_lo = self.bytes[lo] - self.byte_target[lo]
        s_hi = self.size[rows[on_hi]].astype(np.float64)[:, None]
        s_lo = self.size[rows[on_lo]].astype(np.float64)[None, :]
        delta = s_hi - s_lo  # bytes that leave hi for lo
        gain = abs(e_hi) + abs(e_lo) - (np.abs(e_hi - delta) + np.abs(e_lo + delta))
        t_hi = self.topic_idx[rows[on_hi]][:, None]
        t_lo = self.topic_idx[rows[on_lo]][None, :]
        # Topic cost of the exchange (sum of squares / 2): zero for two replicas of one topic.
        topic = np.where(
            t_hi == t_lo,
            0,
            (self.tc[t_hi, lo] - self.tc[t_hi, hi] + 1) + (self.tc[t_lo, hi] - self.tc[t_lo, lo] + 1),
        )
        score = gain / self.mean_size - FORCED_TOPIC_WEIGHT * np.maximum(topic, 0)
        while True:
            i, j = np.unravel_index(int(np.argmax(score)), score.shape)
            if score[i, j] <= 0.01:
                return False
            a, b = int(rows[on_hi[i]]), int(rows[on_lo[j]])
            ca, cb = int(cols[on_hi[i]]), int(cols[on_lo[j]])
            if a != b and self._can_swap(a, hi, lo) and self._can_swap(b, lo, hi):
                self._replace(a, ca, lo)
                self._replace(b, cb, hi)
                self.moves -= 2  # the same two evacuations, landing elsewhere
                return True
            score[i, j] = -np.inf

    def _can_swap(self, row: int, src: int, dest: int) -> bool:
        if not (self.ctx.forced_dest[dest] and self.movable[row]):
            return False
        saved = self.limit[dest]
        self.limit[dest] = np.inf  # the exchange keeps dest's bytes near where they were
        try:
            return bool(self._fits(np.array([row]), dest, src)[0])
        finally:
            self.limit[dest] = saved

    def balance_counts(self, ceiling: IntArray | None = None) -> None:
        """Move replicas from brokers above target to brokers below.

        With ``ceiling``, only what a broker holds above max(target, ceiling) is moved: the goals that
        only evacuate use it to undo the overflow of forced moves that racks sent to a full broker,
        without rebalancing anything else.
        """
        dest_ok = self.ctx.balance_dest if ceiling is None else self.ctx.forced_dest
        stuck = np.zeros(self.b_n, dtype=bool)
        ids = np.arange(self.b_n)
        while True:
            surplus = self.cnt - self.target
            if ceiling is not None:
                surplus = np.where(
                    surplus > 0, np.maximum(self.cnt - np.maximum(self.target, ceiling), 0), surplus
                )
            src_mask = (surplus > 0) & ~stuck
            sinks = np.nonzero((surplus < 0) & dest_ok)[0]
            if not src_mask.any() or len(sinks) == 0:
                return
            srcs = np.nonzero(src_mask)[0]
            excess = self.bytes[srcs] - self.byte_target[srcs]
            a = int(srcs[np.lexsort((ids[srcs], -excess, -surplus[srcs]))[0]])
            rows = self.members.get(a, self.reps)
            rows = rows[self.movable[rows]]
            if len(rows) == 0:
                stuck[a] = True
                continue
            deficit = self.byte_target[sinks] - self.bytes[sinks]
            sink_order = sinks[np.lexsort((sinks, -deficit, surplus[sinks]))]
            # Score the replica and the destination together over the few neediest sinks that can
            # take something from a: the best pairing for topic spread and bytes is often not the
            # single neediest sink.
            best: tuple[float, int, int] | None = None
            tried = 0
            for b in sink_order.tolist():
                if tried >= SINKS_CONSIDERED and best is not None:
                    break
                ok = self._fits(rows, b, a)
                if not ok.any():
                    continue
                tried += 1
                score, row = self._best_replica(rows[ok], a, b)
                if best is None or score > best[0] + 1e-12:
                    best = (score, row, b)
            if best is None:
                stuck[a] = True
                continue
            _, row, b = best
            self._replace(row, int(np.nonzero(self.reps[row] == a)[0][0]), b)

    def _best_replica(self, cand: IntArray, a: int, b: int) -> tuple[float, int]:
        s = self.size[cand].astype(np.float64)
        # The ideal size for this move on each side: what the broker must still shed (or gain) in
        # bytes, spread over the replicas it must still shed (or gain). Squared error, so a move
        # that suits both sides beats one that is perfect for one and far off for the other.
        left_a = max(int(self.cnt[a] - self.target[a]), 1)
        left_b = max(int(self.target[b] - self.cnt[b]), 1)
        ideal_a = (self.bytes[a] - self.byte_target[a]) / left_a
        ideal_b = (self.byte_target[b] - self.bytes[b]) / left_b
        byte_cost = ((s - ideal_a) ** 2 + (s - ideal_b) ** 2) / (2.0 * self.mean_size**2)
        t = self.topic_idx[cand]
        # Topic spread is max - min per topic, so judge each side against the topic's mean: a move
        # helps when a holds more than its share of the topic and b less; it hurts when it pushes
        # a below (or b above) the mean, even if the pair's difference shrinks.
        mean = self.topic_mean[t]
        gain = np.clip(self.tc[t, a] - mean - 0.5, -2.0, 1.0) + np.clip(mean - self.tc[t, b] - 0.5, -2.0, 1.0)
        leader = (self.reps[cand, 0] == a).astype(np.float64)
        score = TOPIC_WEIGHT * gain - np.minimum(byte_cost, 4.0) - 0.05 * leader
        i = int(np.argmax(score))
        return float(score[i]), int(cand[i])

    def swap_bytes(self) -> None:
        band = self.ctx.band
        dest_ok = self.ctx.balance_dest & self.ctx.holds
        bt = self.byte_target
        if not dest_ok.any() or float(bt[dest_ok].sum()) <= 0:
            return
        tried: set[tuple[int, int]] = set()
        for _ in range(4 * self.b_n + 16):
            ratio = np.where(dest_ok & (bt > 0), self.bytes / np.maximum(bt, 1.0), np.nan)
            if np.all(np.isnan(ratio)):
                return
            hi_order = np.argsort(-np.nan_to_num(ratio, nan=-np.inf), kind="stable")
            lo_order = np.argsort(np.nan_to_num(ratio, nan=np.inf), kind="stable")
            done = True
            for a in hi_order[:8].tolist():
                if not (ratio[a] > band or ratio[lo_order[0]] < 2.0 - band):
                    break
                for b in lo_order[:8].tolist():
                    if b == a or (a, b) in tried or ratio[b] >= ratio[a]:
                        continue
                    if self._swap(a, b):
                        done = False
                        break
                    tried.add((a, b))
                if not done:
                    break
            if done:
                return

    def _swap(self, a: int, b: int) -> bool:
        want = min(self.bytes[a] - self.byte_target[a], self.byte_target[b] - self.bytes[b])
        if want <= 0:
            return False
        pa = self.members.get(a, self.reps)
        pa = pa[self.movable[pa]]
        pb = self.members.get(b, self.reps)
        pb = pb[self.movable[pb]]
        if len(pa) == 0 or len(pb) == 0:
            return False
        pa = pa[self._fits(pa, b, a)]
        pb = pb[self._fits_size_swap(pb, a, b)]
        if len(pa) == 0 or len(pb) == 0:
            return False
        sb_order = np.argsort(self.size[pb], kind="stable")
        sb = self.size[pb][sb_order].astype(np.float64)
        sa = self.size[pa].astype(np.float64)
        pos = np.clip(np.searchsorted(sb, sa - want), 0, len(sb) - 1)
        best_delta = sa - sb[pos]
        alt = np.clip(pos - 1, 0, len(sb) - 1)
        alt_delta = sa - sb[alt]
        use_alt = np.abs(alt_delta - want) < np.abs(best_delta - want)
        pos = np.where(use_alt, alt, pos)
        delta = sa - sb[pos]
        e_a = self.bytes[a] - self.byte_target[a]
        d_b = self.byte_target[b] - self.bytes[b]
        gain = abs(e_a) + abs(d_b) - (np.abs(e_a - delta) + np.abs(d_b - delta))
        gain = np.where(delta > 0, gain, -np.inf)
        i = int(np.argmax(gain))
        if gain[i] <= 0.01 * self.mean_size:
            return False
        p = int(pa[i])
        q = int(pb[sb_order[pos[i]]])
        if p == q:
            return False
        self._replace(p, int(np.nonzero(self.reps[p] == a)[0][0]), b)
        self._replace(q, int(np.nonzero(self.reps[q] == b)[0][0]), a)
        return True

    def _fits_size_swap(self, rows: IntArray, dest: int, src: int) -> BoolArray:
        # The disk check is relaxed by what leaves dest in the same swap; the rack check is exact.
        saved = self.limit[dest]
        self.limit[dest] = np.inf
        try:
            return self._fits(rows, dest, src)
        finally:
            self.limit[dest] = saved

    def result(self) -> pd.DataFrame:
        out = self.frame.copy()
        ids = np.where(self.reps >= 0, self.ctx.broker_ids[np.maximum(self.reps, 0)], NO_BROKER)
        for i, c in enumerate(plan_cols(self.ctx.width)):
            out[c] = ids[:, i]
        return out


def plan_replicas(frame: pd.DataFrame, ctx: BucketContext, bucket: int) -> pd.DataFrame:
    planner = _ReplicaPlanner(sort_frame(frame), ctx, bucket)
    planner.change_rf()
    before = planner.cnt.copy()
    planner.forced()
    if not ctx.count_moves:
        planner.balance_counts(ceiling=before)
    else:
        planner.balance_counts()
        if ctx.byte_swaps:
            planner.swap_bytes()
    return planner.result()


def plan_leaders(frame: pd.DataFrame, ctx: BucketContext, bucket: int) -> pd.DataFrame:
    """Reorder replica lists so preferred leaders meet the bucket's leader targets; no data moves."""
    frame = sort_frame(frame)
    b_n = len(ctx.broker_ids)
    ids = frame[plan_cols(ctx.width)].to_numpy(dtype=np.int64)
    reps = np.where(ids < 0, NO_BROKER, np.searchsorted(ctx.broker_ids, np.maximum(ids, 0))).astype(np.int64)
    p_n = len(reps)
    movable = ~topic_mask(frame["topic"], ctx.exclude_topics) & (reps[:, 1] >= 0 if ctx.width > 1 else False)
    lead = reps[:, 0]
    cnt = np.bincount(lead[lead >= 0], minlength=b_n).astype(np.int64)
    target = ctx.leader_target.get(bucket, cnt.copy()).astype(np.int64)
    target = np.where(ctx.lead_ok, target, 0)
    led: list[IntArray] = [np.zeros(0, dtype=np.int64)] * b_n
    if p_n:
        order = np.argsort(lead, kind="stable")
        rows = np.arange(p_n)[order]
        srt = lead[order]
        keep = srt >= 0
        counts = np.bincount(srt[keep], minlength=b_n)
        led = list(np.split(rows[keep], np.cumsum(counts)[:-1]))
    stuck = np.zeros(b_n, dtype=bool)
    ids_range = np.arange(b_n)

    def led_rows(x: int) -> IntArray:
        r: IntArray = led[x]
        r = r[(reps[r, 0] == x) & movable[r]]
        led[x] = r
        return r

    def promote(row: int, new: int) -> None:
        old = int(reps[row, 0])
        j = int(np.nonzero(reps[row] == new)[0][0])
        reps[row, 0], reps[row, j] = new, old
        cnt[old] -= 1
        cnt[new] += 1
        led[new] = np.append(led[new], row)

    while True:
        over = (cnt > target) & ~stuck
        if not over.any():
            break
        srcs = np.nonzero(over)[0]
        a = int(srcs[np.lexsort((ids_range[srcs], -(cnt[srcs] - target[srcs])))[0]])
        path = _augmenting_path(a, reps, cnt, target, ctx.lead_ok, led_rows, b_n)
        if path is None:
            stuck[a] = True
            continue
        for row, new in path:
            promote(row, new)
    out = frame.copy()
    new_ids = np.where(reps >= 0, ctx.broker_ids[np.maximum(reps, 0)], NO_BROKER)
    for i, c in enumerate(plan_cols(ctx.width)):
        out[c] = new_ids[:, i]
    return out


def _augmenting_path(
    start: int,
    reps: IntArray,
    cnt: IntArray,
    target: IntArray,
    lead_ok: BoolArray,
    led_rows: object,
    b_n: int,
) -> list[tuple[int, int]] | None:
    """Shortest chain of leadership hand-overs from ``start`` to a broker below its leader target."""
    get = led_rows  # a callable: broker -> rows it leads (movable)
    parent: dict[int, tuple[int, int]] = {}
    seen = np.zeros(b_n, dtype=bool)
    seen[start] = True
    queue: deque[int] = deque([start])
    while queue:
        x = queue.popleft()
        rows = get(x)  # type: ignore[operator]
        if len(rows) == 0:
            continue
        others = reps[rows, 1:]
        flat_rows = np.repeat(rows, others.shape[1])
        flat = others.ravel()
        ok = flat >= 0
        flat_rows, flat = flat_rows[ok], flat[ok]
        ok = lead_ok[flat] & ~seen[flat]
        flat_rows, flat = flat_rows[ok], flat[ok]
        if len(flat) == 0:
            continue
        under = cnt[flat] < target[flat]
        if under.any():
            # Prefer the broker furthest below target; first row in order among equals.
            gap = target[flat] - cnt[flat]
            i = int(np.lexsort((np.arange(len(flat)), -gap, ~under))[0])
            path = [(int(flat_rows[i]), int(flat[i]))]
            node = x
            while node != start:
                prev, row = parent[node]
                path.append((row, node))
                node = prev
            return path
        uniq, first = np.unique(flat, return_index=True)
        for y, i in zip(uniq.tolist(), first.tolist(), strict=True):
            seen[y] = True
            parent[y] = (x, int(flat_rows[i]))
            queue.append(y)
    return None


def widen(frame: pd.DataFrame, width: int) -> pd.DataFrame:
    """Pad the o* columns to ``width`` with -1 and start the plan (r*) as a copy of the snapshot."""
    out = frame.copy()
    for i in range(width):
        if f"o{i}" not in out:
            out[f"o{i}"] = NO_BROKER
    for i in range(width):
        out[f"r{i}"] = out[f"o{i}"]
    return out


@dataclass(frozen=True)
class StatsContext:
    width: int
    broker_ids: IntArray
    rf_target: int | None
    rf_topics: str | None
    exclude_topics: str | None


STATS_COLUMNS = ["bucket", "broker", "replicas", "bytes", "leaders", "extra"]


def bucket_stats(frame: pd.DataFrame, ctx: StatsContext, bucket: int) -> pd.DataFrame:
    """Per-broker counts of the plan so far in one bucket, plus one totals row (broker = -1).

    Broker rows: replicas, bytes, preferred leaders. Totals row: partitions, bytes, the number of
    replicas an RF change would add (negative: drop) and the bytes those replicas carry.
    """
    b_n = len(ctx.broker_ids)
    ids = frame[plan_cols(ctx.width)].to_numpy(dtype=np.int64)
    reps = np.where(ids < 0, NO_BROKER, np.searchsorted(ctx.broker_ids, np.maximum(ids, 0)))
    size = frame["size_bytes"].to_numpy(dtype=np.float64)
    r, c = np.nonzero(reps >= 0)
    cnt = np.bincount(reps[r, c], minlength=b_n)
    byt = np.bincount(reps[r, c], weights=size[r], minlength=b_n)
    lead = reps[:, 0]
    lc = np.bincount(lead[lead >= 0], minlength=b_n)
    growth = 0
    growth_bytes = 0.0
    if ctx.rf_target is not None and len(frame):
        sel = topic_mask(frame["topic"], ctx.rf_topics or ".*") & ~topic_mask(
            frame["topic"], ctx.exclude_topics
        )
        diff = ctx.rf_target - (reps >= 0).sum(axis=1)
        growth = int(diff[sel].sum())
        growth_bytes = float((diff[sel] * size[sel]).sum())
    nz = np.nonzero((cnt > 0) | (lc > 0))[0]
    out = pd.DataFrame(
        {
            "bucket": np.full(len(nz) + 1, bucket, dtype=np.int64),
            "broker": np.concatenate([nz, [-1]]).astype(np.int64),
            "replicas": np.concatenate([cnt[nz], [len(frame)]]).astype(np.int64),
            "bytes": np.concatenate([byt[nz], [float(size.sum())]]).astype(np.float64),
            "leaders": np.concatenate([lc[nz], [growth]]).astype(np.int64),
            "extra": np.concatenate([np.zeros(len(nz)), [growth_bytes]]).astype(np.float64),
        }
    )
    return out
