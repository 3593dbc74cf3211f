"""The adaptive reassignment throttle's rule (headwater/replication/adaptive_throttle.py): the
documented contract, since Kafka has no such mode."""

from __future__ import annotations

import pytest
from _replication_model import ModelLog

from headwater.protocol.errors import ErrorCode
from headwater.replication.adaptive_throttle import (
    BASE_TICKS,
    DECREASE,
    MAX_WINDOW_MS,
    MIN_BASE_TICKS,
    MIN_SAMPLES,
    AdaptiveSettings,
    AdaptiveThrottle,
    Observation,
    Reason,
    p99,
    produce_latency_ms,
)
from headwater.replication.partition import FollowerFetch, LeaderAndIsrState, PartitionReplica, Role
from headwater.replication.throttle import ByteRateLimiter, limiters_for

MB = 1_000_000
SETTINGS = AdaptiveSettings(min_rate=1 * MB, max_rate=21 * MB, max_produce_latency_ms=50, max_follower_lag_ms=2_000)
STEP = SETTINGS.step  # 1 MB/s: 20 steps from 1 to 21


def fast(n: int = 100, ms: float = 5.0) -> list[float]:
    return [ms] * n


def busy(rate: float, seconds: float = 1.0) -> int:
    """Bytes a copy that uses the whole budget charges in ``seconds``."""
    return int(rate * seconds)


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError):
        AdaptiveSettings(min_rate=0, max_rate=1, max_produce_latency_ms=1, max_follower_lag_ms=1)
    with pytest.raises(ValueError):
        AdaptiveSettings(min_rate=2, max_rate=1, max_produce_latency_ms=1, max_follower_lag_ms=1)


def test_starts_at_the_floor_or_the_static_rate_clamped() -> None:
    assert AdaptiveThrottle(SETTINGS, 0).rate == 1 * MB
    assert AdaptiveThrottle(SETTINGS, 0, start_rate=5 * MB).rate == 5 * MB
    assert AdaptiveThrottle(SETTINGS, 0, start_rate=500 * MB).rate == 21 * MB
    assert AdaptiveThrottle(SETTINGS, 0).last.reason is Reason.START


def test_doubles_until_the_first_cut_then_raises_additively() -> None:
    t = AdaptiveThrottle(SETTINGS, 0)
    rates = []
    for i in range(1, 5):
        d = t.tick(i * 1000, Observation(fast(), follower_lag_ms=0, copied_bytes=busy(t.rate)))
        assert d.reason is Reason.SLOW_START
        assert d.produce_p99_ms == 5.0 and d.follower_lag_ms == 0
        rates.append(d.rate)
    assert rates == [2 * MB, 4 * MB, 8 * MB, 16 * MB]
    d = t.tick(5000, Observation(fast(ms=80), follower_lag_ms=0, copied_bytes=busy(t.rate)))
    assert d.reason is Reason.PRODUCE_LATENCY and d.rate == int(16 * MB * DECREASE)
    for i in range(6, 9):
        before = t.rate
        d = t.tick(i * 1000, Observation(fast(), follower_lag_ms=0, copied_bytes=busy(t.rate)))
        assert d.reason is Reason.INCREASE and d.rate == int(before + STEP)


def test_a_signal_near_its_target_holds_the_rate_and_ends_the_slow_start() -> None:
    # HyStart's rule for TCP: a rising signal means the knee is near, so climb by steps from here;
    # and while a signal stays in the band under its target, the rate holds (Vegas, LEDBAT).
    t = AdaptiveThrottle(SETTINGS, 0)
    d = t.tick(1000, Observation(fast(ms=37), follower_lag_ms=0, copied_bytes=busy(t.rate)))
    assert d.reason is Reason.SLOW_START and d.rate == 2 * MB  # 37 ms: under 3/4 of the 50 ms target
    d = t.tick(2000, Observation(fast(ms=38), follower_lag_ms=0, copied_bytes=busy(t.rate)))
    assert d.reason is Reason.NEAR_TARGET and d.rate == 2 * MB and d.produce_p99_ms == 38
    d = t.tick(3000, Observation(fast(ms=50), follower_lag_ms=0, copied_bytes=busy(t.rate)))
    assert d.reason is Reason.NEAR_TARGET and d.rate == 2 * MB, "at the target is not over it"
    d = t.tick(4000, Observation(fast(), follower_lag_ms=0, copied_bytes=busy(t.rate)))
    assert d.reason is Reason.INCREASE and d.rate == int(2 * MB + STEP), "the slow start is over for good"
    # The follower lag and the CPU pressure hold it the same way.
    t = AdaptiveThrottle(SETTINGS, 0)
    d = t.tick(1000, Observation(fast(), follower_lag_ms=1_600, copied_bytes=busy(t.rate)))
    assert d.reason is Reason.NEAR_TARGET and d.rate == 1 * MB
    assert t.tick(2000, Observation(fast(), 0, busy(t.rate))).reason is Reason.INCREASE
    pressured = AdaptiveSettings(min_rate=1 * MB, max_rate=21 * MB, max_produce_latency_ms=50,
                                 max_follower_lag_ms=2_000, max_cpu_pressure=0.4)
    t = AdaptiveThrottle(pressured, 0)
    assert t.tick(1000, Observation(fast(), 0, busy(t.rate), cpu_pressure=0.29)).reason is Reason.SLOW_START
    assert t.tick(2000, Observation(fast(), 0, busy(t.rate), cpu_pressure=0.31)).reason is Reason.NEAR_TARGET
    assert t.tick(3000, Observation(fast(), 0, busy(t.rate), cpu_pressure=0.1)).reason is Reason.INCREASE


def test_near_the_target_is_measured_from_the_p99_without_a_copy() -> None:
    # The copy can only add to what the producers pay without it: with a 30 ms p99 and no copy,
    # "near" a 50 ms target starts at 30 + 3/4 of the 20 ms left, not at 3/4 of 50.
    t = AdaptiveThrottle(SETTINGS, 0)
    for i in range(1, MIN_BASE_TICKS):
        t.tick(i * 1000, Observation(fast(ms=30), follower_lag_ms=0, copied_bytes=0))
    assert t.base_latency_ms() == 0.0, "too few copy-free ticks to know"
    t.tick(MIN_BASE_TICKS * 1000, Observation(fast(ms=30), follower_lag_ms=0, copied_bytes=0))
    assert t.base_latency_ms() == 30.0
    now = MIN_BASE_TICKS * 1000
    d = t.tick(now + 1000, Observation(fast(ms=44), follower_lag_ms=0, copied_bytes=busy(t.rate)))
    assert d.reason is Reason.SLOW_START and d.rate == 2 * MB
    d = t.tick(now + 2000, Observation(fast(ms=46), follower_lag_ms=0, copied_bytes=busy(t.rate)))
    assert d.reason is Reason.NEAR_TARGET and d.rate == 2 * MB
    # Ticks with a copy do not move the base; the last BASE_TICKS copy-free ticks do.
    assert t.base_latency_ms() == 30.0
    for i in range(BASE_TICKS):
        t.tick(now + 3000 + i * 1000, Observation(fast(ms=10), follower_lag_ms=0, copied_bytes=0))
    assert t.base_latency_ms() == 10.0
    # A base over the target is capped at it: then only a cut is left, no band.
    for i in range(BASE_TICKS):
        t.tick(now + 100_000 + i * 1000, Observation(fast(ms=80), follower_lag_ms=0, copied_bytes=0))
    assert t.base_latency_ms() == 50.0
    d = t.tick(now + 100_000 + BASE_TICKS * 1000, Observation(fast(ms=50), follower_lag_ms=0, copied_bytes=busy(t.rate)))
    assert d.reason is Reason.INCREASE


def test_cuts_multiplicatively_on_produce_latency_over_target() -> None:
    t = AdaptiveThrottle(SETTINGS, 0, start_rate=10 * MB)
    # 1 slow produce in 100 is not the p99; 2 are.
    d = t.tick(1000, Observation([*fast(99), 500.0], follower_lag_ms=0, copied_bytes=busy(t.rate)))
    assert d.reason is Reason.SLOW_START and d.rate == 20 * MB
    d = t.tick(2000, Observation([*fast(98), 500.0, 500.0], follower_lag_ms=0, copied_bytes=busy(t.rate)))
    assert d.reason is Reason.PRODUCE_LATENCY and d.produce_p99_ms == 500.0
    assert d.rate == int(20 * MB * DECREASE)
    # It cuts whether or not the copy used its budget: the latency is what counts.
    d = t.tick(3000, Observation(fast(100, ms=80), copied_bytes=1))
    assert d.reason is Reason.PRODUCE_LATENCY and d.rate == int(20 * MB * DECREASE * DECREASE)
    # With no copy at all the latency has another cause: the rate holds.
    d = t.tick(4000, Observation(fast(100, ms=80), follower_lag_ms=9_000, copied_bytes=0))
    assert d.reason is Reason.NOT_LIMITING and d.rate == int(20 * MB * DECREASE * DECREASE)


def test_cuts_on_follower_lag_over_target() -> None:
    t = AdaptiveThrottle(SETTINGS, 0, start_rate=10 * MB)
    d = t.tick(1000, Observation(fast(), follower_lag_ms=2_001, copied_bytes=busy(t.rate)))
    assert d.reason is Reason.FOLLOWER_LAG and d.rate == int(10 * MB * DECREASE)
    # Lag alone is enough, with no produce to judge by.
    d = t.tick(2000, Observation((), follower_lag_ms=5_000, copied_bytes=busy(t.rate)))
    assert d.reason is Reason.FOLLOWER_LAG and d.follower_lag_ms == 5_000
    # At the target is not over it.
    before = t.rate
    d = t.tick(3000, Observation(fast(), follower_lag_ms=2_000, copied_bytes=busy(t.rate)))
    assert d.reason is Reason.NEAR_TARGET and d.rate == before


def test_cuts_on_cpu_pressure_over_target_only_when_asked_to() -> None:
    settings = AdaptiveSettings(min_rate=1 * MB, max_rate=21 * MB, max_produce_latency_ms=50,
                                max_follower_lag_ms=2_000, max_cpu_pressure=0.3)
    t = AdaptiveThrottle(settings, 0, start_rate=10 * MB)
    d = t.tick(1000, Observation(fast(), follower_lag_ms=0, copied_bytes=busy(t.rate), cpu_pressure=0.31))
    assert d.reason is Reason.CPU_PRESSURE and d.rate == int(10 * MB * DECREASE) and d.cpu_pressure == 0.31
    # Pressure alone is enough: on a new, empty broker too, with nothing else to judge by.
    d = t.tick(2000, Observation((), follower_lag_ms=None, copied_bytes=busy(t.rate), cpu_pressure=0.9))
    assert d.reason is Reason.CPU_PRESSURE and d.rate == int(10 * MB * DECREASE * DECREASE)
    # At the target is not over it; unknown pressure (no PSI) is not a cut.
    before = t.rate
    d = t.tick(3000, Observation(fast(), follower_lag_ms=0, copied_bytes=busy(t.rate), cpu_pressure=0.3))
    assert d.reason is Reason.NEAR_TARGET and d.rate == before
    d = t.tick(3500, Observation(fast(), follower_lag_ms=0, copied_bytes=busy(t.rate, 0.5), cpu_pressure=0.2))
    assert d.reason is Reason.INCREASE and d.rate == int(before + settings.step)
    d = t.tick(4000, Observation(fast(), follower_lag_ms=0, copied_bytes=busy(t.rate), cpu_pressure=None))
    assert d.reason is Reason.INCREASE and d.cpu_pressure is None
    # No copy: the pressure has another cause, the rate holds.
    d = t.tick(5000, Observation(fast(), follower_lag_ms=0, copied_bytes=0, cpu_pressure=0.9))
    assert d.reason is Reason.NOT_LIMITING
    # At 1.0 (the default) it is not judged at all, and not reported as judged.
    off = AdaptiveThrottle(SETTINGS, 0, start_rate=10 * MB)
    d = off.tick(1000, Observation(fast(), follower_lag_ms=0, copied_bytes=busy(off.rate), cpu_pressure=0.99))
    assert d.reason is Reason.SLOW_START and d.cpu_pressure is None


def test_clamps_to_floor_and_ceiling() -> None:
    t = AdaptiveThrottle(SETTINGS, 0, start_rate=20 * MB)
    for i in range(1, 4):
        d = t.tick(i * 1000, Observation(fast(), follower_lag_ms=0, copied_bytes=busy(t.rate)))
        assert d.rate == 21 * MB
    for i in range(4, 30):
        d = t.tick(i * 1000, Observation(fast(ms=1000), copied_bytes=1))
        assert SETTINGS.min_rate <= d.rate <= SETTINGS.max_rate
    assert d.rate == 1 * MB and d.reason is Reason.PRODUCE_LATENCY


def test_holds_without_produce_samples_where_there_is_something_to_protect() -> None:
    t = AdaptiveThrottle(SETTINGS, 0, start_rate=5 * MB)
    # In-sync followers (lag known) but no acks=all produce: no traffic to judge by.
    for i in range(1, 8):
        d = t.tick(i * 1000, Observation((), follower_lag_ms=0, copied_bytes=busy(t.rate)))
        assert d.reason is Reason.NO_SAMPLES and d.rate == 5 * MB and d.produce_p99_ms is None


def test_a_trickle_of_produces_is_gathered_until_there_are_enough() -> None:
    t = AdaptiveThrottle(SETTINGS, 0, start_rate=5 * MB)
    per_tick = MIN_SAMPLES // 2
    d = t.tick(1000, Observation(fast(per_tick), follower_lag_ms=0, copied_bytes=busy(t.rate)))
    assert d.reason is Reason.NO_SAMPLES
    d = t.tick(2000, Observation(fast(per_tick), follower_lag_ms=0, copied_bytes=busy(t.rate)))
    assert d.reason is Reason.SLOW_START and d.produce_p99_ms == 5.0
    # One produce a tick never reaches a p99; what was gathered is dropped after MAX_WINDOW_MS.
    for i in range(3, 3 + MAX_WINDOW_MS // 1000 + 2):
        d = t.tick(i * 1000, Observation(fast(1, ms=900), follower_lag_ms=0, copied_bytes=busy(t.rate)))
        assert d.reason is Reason.NO_SAMPLES


def test_holds_while_the_copy_does_not_use_the_rate() -> None:
    t = AdaptiveThrottle(SETTINGS, 0, start_rate=5 * MB)
    # No copy at all (no replica being added), then a copy held back elsewhere at a third of the rate.
    for i, copied in enumerate((0, 0, busy(5 * MB / 3)), start=1):
        d = t.tick(i * 1000, Observation(fast(), follower_lag_ms=0, copied_bytes=copied))
        assert d.reason is Reason.NOT_LIMITING and d.rate == 5 * MB
    d = t.tick(4000, Observation(fast(), follower_lag_ms=0, copied_bytes=busy(5 * MB * 0.6)))
    assert d.reason is Reason.SLOW_START


def test_a_broker_with_nothing_to_protect_does_not_hold_the_copy_back() -> None:
    # The new, empty broker a move copies to: no produce, no in-sync followers of its own.
    t = AdaptiveThrottle(SETTINGS, 0)
    for i in range(1, 30):
        d = t.tick(i * 1000, Observation((), follower_lag_ms=None, copied_bytes=busy(t.rate)))
        assert d.reason is Reason.SLOW_START
    assert d.rate == SETTINGS.max_rate


def test_reconfigure_clamps_the_rate_in_force() -> None:
    t = AdaptiveThrottle(SETTINGS, 0, start_rate=15 * MB)
    t.reconfigure(AdaptiveSettings(min_rate=MB, max_rate=8 * MB, max_produce_latency_ms=50, max_follower_lag_ms=1))
    assert t.rate == 8 * MB and t.last.rate == 8 * MB


def test_p99_is_nearest_rank() -> None:
    assert p99([1.0]) == 1.0
    assert p99([float(i) for i in range(1, 101)]) == 99.0
    assert p99([float(i) for i in range(1, 21)]) == 20.0


def test_create_time_latency_trusts_a_stamp_only_between_arrival_and_a_second_before() -> None:
    assert produce_latency_ms(2.0, None) == 2.0  # no stamp: from arrival
    assert produce_latency_ms(2.0, 9.5) == 9.5  # 7.5 ms in the producer and the socket before arrival
    assert produce_latency_ms(2.0, 2.0) == 2.0
    assert produce_latency_ms(2.0, 1.0) == 2.0  # stamped after arrival: the clocks disagree
    assert produce_latency_ms(2.0, 1002.0) == 1002.0
    assert produce_latency_ms(2.0, 1002.5) == 2.0  # over a second before arrival: an event time or a retry
    with pytest.raises(ValueError, match="LogAppendTime"):
        AdaptiveSettings(1, 2, 1, 1, latency_from="LogAppendTime")


# --- what feeds it: only replicas being added are metered, lag only of in-sync followers --------------

def test_only_replicas_being_added_are_metered_at_the_adaptive_rate() -> None:
    t = AdaptiveThrottle(SETTINGS, 0)
    lim = ByteRateLimiter(t.rate, now_ms=0)
    d = t.tick(1000, Observation(fast(), follower_lag_ms=0, copied_bytes=busy(t.rate)))
    lim.set_rate(d.rate, 1000)
    # An in-sync follower is never metered, even if it is in AR; one catching up outside AR neither
    # (unless listed in Kafka's throttled replicas, which the adaptive mode does not touch).
    assert limiters_for(in_sync=True, listed=False, adding=True, replication=None, reassignment=lim) == ()
    assert limiters_for(in_sync=False, listed=False, adding=False, replication=None, reassignment=lim) == ()
    assert limiters_for(in_sync=False, listed=False, adding=True, replication=None, reassignment=lim) == (lim,)


def _leader(now_ms: int) -> tuple[PartitionReplica, ModelLog]:
    log = ModelLog([0] * 10)
    r = PartitionReplica("t", 0, 1, replica_lag_time_max_ms=30_000, min_insync_replicas=1)
    out = r.apply_leader_and_isr(
        LeaderAndIsrState(1, 1, (1, 2), 0, (1, 2, 3, 4), adding_replicas=(3, 4)),
        log_end_offset=log.log_end_offset, latest_epoch=log.latest_epoch(), high_watermark=10, now_ms=now_ms)
    assert out.error == ErrorCode.NONE and out.role is Role.LEADER
    assert out.assign_epoch is not None
    log.assign_epoch(out.assign_epoch.epoch, out.assign_epoch.start_offset)
    return r, log


def _fetch(r: PartitionReplica, log: ModelLog, replica: int, offset: int, now_ms: int) -> None:
    r.on_follower_fetch(FollowerFetch(replica, r.leader_epoch, offset, -1), leader_log_start_offset=0,
                        epoch_end_offset=log.end_offset_for_epoch, now_ms=now_ms)


def test_follower_lag_counts_in_sync_followers_only() -> None:
    r, log = _leader(1_000)
    _fetch(r, log, 2, 10, 1_000)  # caught up
    _fetch(r, log, 3, 0, 1_000)  # being added, far behind: not in the ISR, not counted
    assert r.isr_follower_lag_ms(1_500) == 0
    for _ in range(5):
        log.append(r.leader_epoch)
    r.on_local_append(log.log_end_offset, 2_000)
    _fetch(r, log, 2, 10, 2_000)  # behind the new end: last caught up at 1,000
    assert r.isr_follower_lag_ms(4_000) == 3_000
    _fetch(r, log, 2, 15, 4_100)
    assert r.isr_follower_lag_ms(4_200) == 0


def test_follower_lag_is_none_without_in_sync_followers_or_leadership() -> None:
    log = ModelLog([0] * 10)
    r = PartitionReplica("t", 0, 1, replica_lag_time_max_ms=30_000, min_insync_replicas=1)
    assert r.isr_follower_lag_ms(0) is None
    r.apply_leader_and_isr(LeaderAndIsrState(1, 1, (1,), 0, (1, 2)), log_end_offset=log.log_end_offset,
                           latest_epoch=log.latest_epoch(), high_watermark=10, now_ms=0)
    assert r.isr_follower_lag_ms(0) is None
