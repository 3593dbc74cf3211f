"""Reassignment progress: the copy rate over a sliding window, ETA, and per-broker sums."""

from __future__ import annotations

import pytest

from headwater.replication.progress import FOLLOWER, LEADER, MoveProgress, RateTracker, eta_s, summarize


def test_rate_spans_the_window_and_follows_a_change_of_pace() -> None:
    rt = RateTracker(window_ms=10_000)
    assert rt.observe("m", 0, 0) == 0.0  # one reading: no rate yet
    for t in range(1, 21):  # 1 MB/s for 20 s
        rate = rt.observe("m", t * 1_000_000, t * 1000)
    assert rate == pytest.approx(1_000_000)
    for t in range(21, 26):  # then 3 MB/s for 5 s: the window holds 5 s of each
        rate = rt.observe("m", 20_000_000 + (t - 20) * 3_000_000, t * 1000)
    assert rate == pytest.approx(2_000_000)


def test_a_reading_below_the_last_restarts_the_window_and_retain_forgets() -> None:
    rt = RateTracker(window_ms=10_000)
    rt.observe("m", 5_000_000, 0)
    rt.observe("m", 6_000_000, 1000)
    assert rt.observe("m", 100, 2000) == 0.0  # truncated: a fresh start, not a negative rate
    assert rt.observe("m", 1_000_100, 3000) == pytest.approx(1_000_000)
    rt.observe("other", 1, 0)
    rt.retain(["m"])
    assert len(rt) == 1
    with pytest.raises(ValueError):
        RateTracker(window_ms=0)


def test_eta_and_broker_sums() -> None:
    assert eta_s(10_000_000, 2_000_000) == 5.0
    assert eta_s(0, 0) == 0.0
    assert eta_s(1, 0) is None
    moves = [
        MoveProgress("t", 0, 4, LEADER, 100, 40, 10.0, 6.0),
        MoveProgress("t", 1, 5, LEADER, 50, 50, 0.0, 0.0),
        MoveProgress("t", 2, 1, FOLLOWER, 80, 20, 20.0, 3.0),
    ]
    by_role = {s.role: s for s in summarize(moves)}
    leader = by_role[LEADER]
    assert (leader.moves, leader.bytes_to_move, leader.bytes_moved, leader.rate_bytes_per_s) == (2, 150, 90, 10.0)
    assert leader.eta_s == 6.0
    assert by_role[FOLLOWER].eta_s == 3.0
    unknown = summarize([MoveProgress("t", 3, 1, FOLLOWER, -1, 20, 5.0, None), moves[2]])[0]
    assert unknown.bytes_to_move == -1 and unknown.eta_s is None and unknown.bytes_moved == 40
