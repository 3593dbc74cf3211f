"""Replication throttles: the token bucket and the throttled-replicas config."""

from __future__ import annotations

import pytest

from headwater.replication.throttle import (
    NO_THROTTLE,
    ByteRateLimiter,
    ThrottledPartitions,
    any_exceeded,
    delay_ms,
    limiters_for,
    parse_throttled_replicas,
    record_all,
)


def test_limiter_allows_a_burst_then_refills_at_the_rate() -> None:
    lim = ByteRateLimiter(1_000, now_ms=0)
    assert not lim.quota_exceeded(0) and lim.available_bytes(0) == 1_000
    lim.record(1_000, 0)
    assert not lim.quota_exceeded(0)
    lim.record(500, 0)  # recorded after sending: one response may overshoot
    assert lim.quota_exceeded(0)
    assert lim.throttle_time_ms(0) == 501
    assert lim.quota_exceeded(499)
    assert not lim.quota_exceeded(500)
    # Refill is capped at the burst (one second's worth).
    assert lim.available_bytes(60_000) == 1_000


def test_limiter_rate_change_and_validation() -> None:
    lim = ByteRateLimiter(1_000, now_ms=0)
    lim.record(1_000, 0)
    lim.set_rate(100, 1_000)  # refilled to 1000 at the old rate, then capped at the new burst
    assert lim.available_bytes(1_000) == 100
    lim.record(300, 1_000)
    assert lim.quota_exceeded(2_000) and not lim.quota_exceeded(3_000)
    with pytest.raises(ValueError):
        ByteRateLimiter(0, now_ms=0)
    with pytest.raises(ValueError):
        lim.set_rate(-1, 0)


def test_parse_throttled_replicas_like_kafka() -> None:
    assert parse_throttled_replicas("0:101,0:102,1:101,1:102", 102) == ThrottledPartitions(partitions=frozenset({0, 1}))
    assert parse_throttled_replicas("0:101,0:102,1:101,1:102", 103) == NO_THROTTLE
    assert parse_throttled_replicas("* ", 102) == ThrottledPartitions(all=True)
    assert parse_throttled_replicas(" ", 102) == NO_THROTTLE
    assert parse_throttled_replicas(" 6:102 ", 102).partitions == {6}
    assert parse_throttled_replicas("6:102, 7:102", 102).partitions == {6, 7}
    assert 5 in parse_throttled_replicas("*", 1) and 5 not in NO_THROTTLE
    for bad in ("x", "1:2:3", "*,1:2", "1:", "-1:2"):
        with pytest.raises(ValueError):
            parse_throttled_replicas(bad, 2)


def test_only_out_of_sync_replicas_of_throttled_partitions_are_throttled() -> None:
    lim = ByteRateLimiter(100, now_ms=0)
    lim.record(200, 0)
    throttled = ThrottledPartitions(partitions=frozenset({0}))

    def held_back(partition: int, in_sync: bool, limiter: ByteRateLimiter | None, now_ms: int) -> bool:
        limiters = limiters_for(in_sync=in_sync, listed=partition in throttled, adding=False,
                                replication=limiter, reassignment=None)
        return any_exceeded(limiters, now_ms)

    assert held_back(0, in_sync=False, limiter=lim, now_ms=0)
    assert not held_back(0, in_sync=True, limiter=lim, now_ms=0)
    assert not held_back(1, in_sync=False, limiter=lim, now_ms=0)
    assert not held_back(0, in_sync=False, limiter=None, now_ms=0)
    assert not held_back(0, in_sync=False, limiter=lim, now_ms=2_000)


def test_an_over_estimate_is_paid_back_but_never_beyond_the_burst() -> None:
    lim = ByteRateLimiter(1_000, now_ms=0)
    lim.record(1_500, 0)  # reserved 1500
    assert lim.quota_exceeded(0) and lim.tokens == -500
    lim.record(-1_200, 0)  # only 300 came: settle
    assert not lim.quota_exceeded(0) and lim.tokens == 700
    lim.record(-5_000, 0)
    assert lim.tokens == 1_000  # capped at the burst


def _paced_copy(rate: int, fetchers: int, latency_ms: int, chunk: int, seconds: int, available: int) -> int:
    """Bytes ``fetchers`` concurrent fetch loops move in ``seconds`` through one limiter.

    Each loop does what the follower shell does: while the limiter is in debt it sleeps until the
    debt is paid (``delay_ms``); otherwise it reserves ``chunk``, and one round trip later settles on
    the bytes that came (at most ``available`` per fetch).
    """
    lim = ByteRateLimiter(rate, now_ms=0)
    lim.record(rate, 0)  # start from an empty bucket: measure the steady rate, not the burst
    next_ms = [0] * fetchers
    unsettled = [0] * fetchers  # reserved minus received, for the answer in flight
    moved = 0
    while True:
        i = min(range(fetchers), key=lambda k: next_ms[k])
        now = next_ms[i]
        if now >= seconds * 1000:
            return moved
        limiters = (lim,)
        if unsettled[i]:
            record_all(limiters, -unsettled[i], now)
            unsettled[i] = 0
        if any_exceeded(limiters, now):
            next_ms[i] = now + max(delay_ms(limiters, now), 1)
            continue
        record_all(limiters, chunk, now)
        got = min(chunk, available)
        unsettled[i] = chunk - got
        moved += got
        next_ms[i] = now + latency_ms


@pytest.mark.parametrize(("rate", "fetchers", "latency_ms", "chunk", "available"), [
    (10_000_000, 1, 5, 1 << 20, 1 << 20),  # one partition, full fetches
    (10_000_000, 3, 5, 1 << 20, 1 << 20),  # three leaders' fetch loops share the follower's limiter
    (10_000_000, 2, 40, 1 << 20, 300_000),  # short answers: the reservations are paid back
    (1_000_000, 2, 2, 1 << 20, 1 << 20),  # a fetch bigger than one second of budget
    (50_000_000, 4, 1, 1 << 20, 1 << 20),
])
def test_paced_copy_keeps_the_rate(rate: int, fetchers: int, latency_ms: int, chunk: int, available: int) -> None:
    seconds = 60
    moved = _paced_copy(rate, fetchers, latency_ms, chunk, seconds, available)
    # At most one reservation per loop ahead of the budget.
    assert abs(moved - rate * seconds) <= fetchers * chunk + rate * 0.01, moved / (rate * seconds)


def test_limiters_for_meters_out_of_sync_listed_or_adding_replicas() -> None:
    rep, ar = ByteRateLimiter(100, now_ms=0), ByteRateLimiter(200, now_ms=0)
    assert limiters_for(in_sync=False, listed=True, adding=False, replication=rep, reassignment=ar) == (rep,)
    assert limiters_for(in_sync=False, listed=False, adding=True, replication=rep, reassignment=ar) == (ar,)
    assert limiters_for(in_sync=False, listed=True, adding=True, replication=rep, reassignment=ar) == (rep, ar)
    # In-sync replication is never slowed, whatever the lists or AR say.
    assert limiters_for(in_sync=True, listed=True, adding=True, replication=rep, reassignment=ar) == ()
    assert limiters_for(in_sync=False, listed=False, adding=False, replication=rep, reassignment=ar) == ()
    assert limiters_for(in_sync=False, listed=True, adding=True, replication=None, reassignment=None) == ()


def test_both_limiters_hold_back_and_delay_is_the_longer_debt() -> None:
    rep, ar = ByteRateLimiter(1_000, now_ms=0), ByteRateLimiter(2_000, now_ms=0)
    both = (rep, ar)
    record_all(both, 3_000, 0)  # rep: -2000 (2 s), ar: -1000 (0.5 s)
    assert any_exceeded(both, 0)
    assert delay_ms(both, 0) == 2_001
    assert any_exceeded(both, 1_000) and not any_exceeded((ar,), 1_000)
    assert not any_exceeded(both, 2_001) and delay_ms(both, 2_001) == 0
    assert delay_ms((), 0) == 0 and not any_exceeded((), 0)
