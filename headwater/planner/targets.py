"""Per-broker targets and their split over buckets. Pure arithmetic on per-broker aggregates.

The movement lower bound for a count goal is sum(max(0, current - target)): every replica above a
broker's target must leave it, and nothing else has to move. So targets are chosen *as close to the
current counts as balance allows*: a broker already inside [floor(mean), ceil(mean)] keeps its count,
and only the brokers outside the band get a target on its edge. That choice is what makes a balanced
cluster plan to zero moves (idempotence), and what lets the greedy reach the minimum.

Spark tasks plan buckets (groups of whole topics) independently, so each bucket needs its own share
of every broker's change. :func:`split_delta` hands out a broker's removals in proportion to what it
holds in each bucket, then spreads the additions so that every bucket stays consistent (what leaves a
bucket's brokers equals what arrives, plus any replicas an RF change creates or drops). A broker that
is inside the band gets zero change in every bucket, so idempotence survives the split.
"""

from __future__ import annotations

import numpy as np

from headwater.planner.errors import PlannerError
from headwater.planner.model import BoolArray, FloatArray, IntArray


def balanced_targets(
    current: IntArray,
    holds: BoolArray,
    receives: BoolArray,
    total: int,
    tiebreak: FloatArray,
) -> IntArray:
    """Integer targets summing to ``total``: 0 where not ``holds``, else within the mean's floor/ceil band.

    A broker that may hold but not receive (excluded, or not among the added brokers) never gets a
    target above its current count; the mean is then recomputed over the others (water filling).
    ``tiebreak`` orders brokers when the sum has to be fixed up: a lower value gets the extra replica.
    """
    current = current.astype(np.int64)
    target = np.zeros_like(current)
    free = holds.copy()
    rest = int(total)
    while True:
        n = int(free.sum())
        if n == 0:
            raise PlannerError(
                "no broker is allowed to hold the replicas (all are removed, dead or excluded)"
            )
        lo = rest // n
        pinned = free & ~receives & (current < lo)
        if not pinned.any():
            break
        target[pinned] = current[pinned]
        rest -= int(current[pinned].sum())
        free &= ~pinned
    hi = lo + (1 if rest % n else 0)
    # Brokers that cannot receive may keep up to hi only if they already have it.
    upper = np.where(receives, hi, np.minimum(hi, np.maximum(current, lo)))
    target[free] = np.clip(current[free], lo, upper[free])
    diff = int(target[free].sum()) - rest
    idx = np.nonzero(free)[0]
    if diff > 0:
        # Lower some brokers from hi to lo. Brokers that are sources anyway (current > hi) go first:
        # for them the extra replica to shed costs the same one move, and it keeps the others still.
        cand = idx[(target[idx] == hi) & (hi > lo)]
        order = np.lexsort((cand, -tiebreak[cand], -(current[cand] - hi)))
        target[cand[order[:diff]]] -= 1
    elif diff < 0:
        cand = idx[(target[idx] == lo) & (hi > lo) & receives[idx]]
        order = np.lexsort((cand, tiebreak[cand], current[cand]))
        if len(cand) < -diff:
            raise PlannerError("cannot find brokers to take the replicas within the balance band")
        target[cand[order[:-diff]]] += 1
    return target


def split_delta(delta: IntArray, per_bucket: IntArray, growth: IntArray) -> IntArray:
    """Split each broker's change over buckets. Returns D[k, b] with sum_k D = delta, sum_b D[k] = growth[k].

    ``per_bucket[k, b]`` is what broker b holds in bucket k; a bucket never removes more than that.
    """
    k_n, b_n = per_bucket.shape
    out = np.zeros((k_n, b_n), dtype=np.int64)
    if k_n == 1:
        out[0] = delta
        return out
    # Removals in proportion to holdings (largest remainder, deterministic).
    for b in np.nonzero(delta < 0)[0]:
        out[:, b] = -_apportion(int(-delta[b]), per_bucket[:, b])
    supply = -out.sum(axis=1) + growth  # what each bucket must place on receiving brokers
    # A bucket whose dropped replicas exceed its removals (RF decrease) borrows removals from another.
    for k in np.nonzero(supply < 0)[0]:
        for b in np.nonzero(delta < 0)[0]:
            while supply[k] < 0 and -out[k, b] < per_bucket[k, b]:
                donors = np.nonzero((out[:, b] < 0) & (supply > 0))[0]
                if len(donors) == 0:
                    break
                j = donors[0]
                out[j, b] += 1
                out[k, b] -= 1
                supply[j] -= 1
                supply[k] += 1
    add = np.where(delta > 0, delta, 0)
    if add.sum() != supply.sum():
        raise PlannerError("internal: bucket split does not balance (additions != removals + growth)")
    if add.sum() == 0:
        return out
    frac = np.outer(supply, add).astype(np.float64) / float(add.sum())
    base = np.floor(frac).astype(np.int64)
    need_row = supply - base.sum(axis=1)
    need_col = add - base.sum(axis=0)
    rem = frac - base
    order = np.lexsort((np.arange(rem.size) % b_n, np.arange(rem.size) // b_n, -rem.ravel()))
    for flat in order:
        k, b = divmod(int(flat), b_n)
        if need_row[k] > 0 and need_col[b] > 0 and rem[k, b] > 0:
            base[k, b] += 1
            need_row[k] -= 1
            need_col[b] -= 1
    for b in np.nonzero(need_col > 0)[0]:
        for k in np.nonzero(need_row > 0)[0]:
            give = min(int(need_col[b]), int(need_row[k]))
            base[k, b] += give
            need_col[b] -= give
            need_row[k] -= give
            if need_col[b] == 0:
                break
    return out + base


def _apportion(amount: int, weights: IntArray) -> IntArray:
    """Split ``amount`` over slots in proportion to ``weights``, never above a slot's weight."""
    w = weights.astype(np.int64)
    total = int(w.sum())
    if amount > total:
        raise PlannerError("internal: asked to remove more replicas than a broker holds")
    if total == 0:
        return np.zeros_like(w)
    exact = w.astype(np.float64) * amount / total
    part = np.minimum(np.floor(exact).astype(np.int64), w)
    left = amount - int(part.sum())
    order = np.lexsort((np.arange(len(w)), -(exact - part)))
    for i in order:
        if left == 0:
            break
        if part[i] < w[i]:
            part[i] += 1
            left -= 1
    return part


def rack_aware_targets(
    current: IntArray,
    holds: BoolArray,
    receives: BoolArray,
    total: int,
    tiebreak: FloatArray,
    rack: IntArray,
    rack_cap: int,
) -> IntArray:
    """:func:`balanced_targets`, but no rack is given more than ``rack_cap`` replicas.

    A partition has at most ceil(RF / racks) replicas in a rack, so a rack can hold at most
    partitions x that many. When racks are uneven (say a rack lost a broker and racks == RF), the
    even per-broker share is not reachable: the small rack is filled to its cap, spread evenly over
    its brokers, and the rest is balanced over the other racks (water filling over racks).
    """
    racks = np.unique(rack[holds])
    size = {int(r): int((holds & (rack == r)).sum()) for r in racks}
    capped: set[int] = set()
    while True:
        rest_total = total - rack_cap * len(capped)
        rest_n = sum(n for r, n in size.items() if r not in capped)
        if rest_n == 0:
            break
        # A rack whose even share reaches its cap is full: its total is fixed at the cap (integers,
        # so 'reaches' is exact; with racks == RF every rack is full and cross-rack moves are impossible).
        newly = {r for r, n in size.items() if r not in capped and n * rest_total >= rack_cap * rest_n}
        if not newly:
            break
        capped |= newly
    target = np.zeros_like(current, dtype=np.int64)
    for r in sorted(capped):
        mask = holds & (rack == r)
        target[mask] = balanced_targets(current, mask, receives, rack_cap, tiebreak)[mask]
    rest = holds & ~np.isin(rack, sorted(capped))
    if rest.any():
        target[rest] = balanced_targets(current, rest, receives, total - rack_cap * len(capped), tiebreak)[
            rest
        ]
    return target


def split_by_rack(
    delta: IntArray, per_bucket: IntArray, growth: IntArray, rack: IntArray, full_racks: list[int]
) -> IntArray:
    """:func:`split_delta`, with every full rack split on its own.

    A full rack (each partition already has its most allowed replicas there, e.g. racks == RF) can
    only trade replicas between its own brokers, so in every bucket its removals must be matched by
    additions inside the same rack; a cluster-wide split would pair a source with a sink in another
    rack that no partition of the bucket can move to.
    """
    out = np.zeros_like(per_bucket, dtype=np.int64)
    rest = np.ones(len(delta), dtype=bool)
    for r in full_racks:
        cols = np.nonzero(rack == r)[0]
        if int(delta[cols].sum()) != 0:
            continue
        out[:, cols] = split_delta(
            delta[cols], per_bucket[:, cols], np.zeros(per_bucket.shape[0], dtype=np.int64)
        )
        rest[cols] = False
    cols = np.nonzero(rest)[0]
    if len(cols):
        out[:, cols] = split_delta(delta[cols], per_bucket[:, cols], growth)
    return out
