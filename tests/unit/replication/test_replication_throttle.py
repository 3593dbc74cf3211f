"""Replication throttles: the token bucket and the throttled-replicas config."""

from __future__ import annotations

import pytest

from headwater.replication.throttle import (
    NO_THROTTLE,
    ByteRateLimiter,
    ThrottledPartitions,
    parse_throttled_replicas,
    should_follower_throttle,
    should_leader_throttle,
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
    assert should_leader_throttle(throttled, 0, replica_in_isr=False, limiter=lim, now_ms=0)
    assert not should_leader_throttle(throttled, 0, replica_in_isr=True, limiter=lim, now_ms=0)
    assert not should_leader_throttle(throttled, 1, replica_in_isr=False, limiter=lim, now_ms=0)
    assert not should_leader_throttle(throttled, 0, replica_in_isr=False, limiter=None, now_ms=0)
    assert should_follower_throttle(throttled, 0, follower_in_sync=False, limiter=lim, now_ms=0)
    assert not should_follower_throttle(throttled, 0, follower_in_sync=True, limiter=lim, now_ms=0)
    assert not should_leader_throttle(throttled, 0, replica_in_isr=False, limiter=lim, now_ms=2_000)
