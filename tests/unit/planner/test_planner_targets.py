"""Targets and their split over buckets: sums, bands, and no change for brokers already in band."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.planner.errors import PlannerError
from headwater.planner.targets import balanced_targets, rack_aware_targets, split_delta


def _bt(
    current: list[int], holds: list[bool] | None = None, receives: list[bool] | None = None
) -> np.ndarray:
    c = np.array(current, dtype=np.int64)
    h = np.array(holds if holds is not None else [True] * len(current))
    r = np.array(receives if receives is not None else [True] * len(current))
    return balanced_targets(c, h, r, int(c.sum()), np.zeros(len(c)))


def test_balanced_cluster_keeps_its_counts() -> None:
    assert _bt([10, 11, 10, 11]).tolist() == [10, 11, 10, 11]


def test_targets_sum_and_band() -> None:
    t = _bt([30, 0, 0, 12])
    assert t.sum() == 42
    assert set(t.tolist()) <= {10, 11}
    # The lower bound of moves is reached: only the one broker above the band loses replicas.
    assert int(np.maximum(np.array([30, 0, 0, 12]) - t, 0).sum()) == 30 - t[0] + max(0, 12 - t[3])


def test_removed_broker_gets_zero() -> None:
    t = _bt([10, 10, 10], holds=[True, True, False])
    assert t.tolist() == [15, 15, 0]


def test_non_receiving_broker_is_never_raised() -> None:
    t = _bt([2, 20, 20], receives=[False, True, True])
    assert t[0] == 2
    assert t.sum() == 42


def test_no_holder_is_an_error() -> None:
    with pytest.raises(PlannerError, match="no broker"):
        _bt([3, 3], holds=[False, False])


def test_rack_cap_fills_small_rack_evenly() -> None:
    # Racks == RF == 3 and rack 2 lost a broker: rack 2 must hold one replica of each of 240 partitions.
    rack = np.array([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2])
    cur = np.array([60] * 8 + [60, 60, 60])
    holds = np.ones(11, dtype=bool)
    t = rack_aware_targets(cur, holds, holds, 720, np.zeros(11), rack, 240)
    assert t[8:].tolist() == [80, 80, 80]
    assert t[:8].tolist() == [60] * 8


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 30), min_size=4, max_size=4), min_size=2, max_size=5),
    st.lists(st.booleans(), min_size=4, max_size=4),
)
def test_split_delta_is_consistent(per_bucket_rows: list[list[int]], holds_list: list[bool]) -> None:
    per_bucket = np.array(per_bucket_rows, dtype=np.int64)
    holds = np.array(holds_list)
    if not holds.any():
        holds[0] = True
    current = per_bucket.sum(axis=0)
    target = balanced_targets(current, holds, holds, int(current.sum()), np.zeros(4))
    delta = target - current
    d = split_delta(delta, per_bucket, np.zeros(len(per_bucket), dtype=np.int64))
    assert (d.sum(axis=0) == delta).all()
    assert (d.sum(axis=1) == 0).all()
    # A bucket never removes more than a broker holds there, and a broker never both gains and loses.
    assert (per_bucket + d >= 0).all()
    assert ((d <= 0) | (delta[None, :] > 0)).all()
    assert ((d >= 0) | (delta[None, :] < 0)).all()
