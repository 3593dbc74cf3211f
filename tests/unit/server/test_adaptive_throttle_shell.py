"""The adaptive reassignment throttle in the broker's shell: its configs, the replica manager applying
its rate to the reassignment limiters from recorded produce latencies, and the metrics."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from headwater.metadata.configs import adaptive_throttle_settings, validate_broker_update
from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.replication.adaptive_throttle import MIN_SAMPLES, AdaptiveSettings, Reason, ThrottleStatus
from headwater.replication.partition import LeaderAndIsrState
from headwater.server import metrics
from headwater.server.replica_manager import ReplicaManager
from headwater.storage.config import LogConfig
from headwater.storage.manager import LogManager

MB = 1_000_000
SETTINGS = AdaptiveSettings(min_rate=MB, max_rate=21 * MB, max_produce_latency_ms=50, max_follower_lag_ms=1_000)


def refused(configs: dict[str, str | None]) -> str:
    with pytest.raises(KafkaError) as info:
        validate_broker_update(configs, per_broker=False)
    assert info.value.code == ErrorCode.INVALID_CONFIG
    return info.value.message or ""


def test_configs_are_validated() -> None:
    validate_broker_update({"reassignment.throttle.mode": "adaptive",
                            "reassignment.adaptive.max.produce.latency.ms": "20",
                            "reassignment.adaptive.max.follower.lag.ms": "2000",
                            "reassignment.adaptive.min.throttled.rate": "1000000",
                            "reassignment.adaptive.max.throttled.rate": "50000000"}, per_broker=False)
    assert refused({"reassignment.throttle.mode": "fast"}) == (
        "Invalid value fast for configuration reassignment.throttle.mode: String must be one of: static, adaptive")
    # The produce target is a DOUBLE: a fraction of a ms is a target on a fast network.
    validate_broker_update({"reassignment.adaptive.max.produce.latency.ms": "2.5"}, per_broker=False)
    assert "Value must be at least 0.1" in refused({"reassignment.adaptive.max.produce.latency.ms": "0"})
    assert refused({"reassignment.adaptive.max.produce.latency.ms": "NaN"}) == (
        "Invalid value NaN for configuration reassignment.adaptive.max.produce.latency.ms: Not a number of type DOUBLE")
    assert "Not a number of type LONG" in refused({"reassignment.adaptive.max.follower.lag.ms": "2.5"})
    assert "Not a number" in refused({"reassignment.adaptive.max.throttled.rate": "lots"})
    assert "Value must be at most" in refused({"reassignment.adaptive.min.throttled.rate": "5",
                                               "reassignment.adaptive.max.throttled.rate": "4"})
    # A share of wall time, as reassignment.copy.max.cpu.pressure: 0 and up (1.0 or more: not judged).
    validate_broker_update({"reassignment.adaptive.max.cpu.pressure": "0.3"}, per_broker=False)
    assert "Value must be at least 0.0" in refused({"reassignment.adaptive.max.cpu.pressure": "-0.1"})
    validate_broker_update({"reassignment.adaptive.produce.latency.from": "CreateTime"}, per_broker=False)
    assert refused({"reassignment.adaptive.produce.latency.from": "LogAppendTime"}) == (
        "Invalid value LogAppendTime for configuration reassignment.adaptive.produce.latency.from: "
        "String must be one of: ArrivalTime, CreateTime")
    # Against the default ceiling (100 MB/s) when no maximum is given.
    assert "Value must be at most" in refused({"reassignment.adaptive.min.throttled.rate": "200000000"})


def test_settings_from_the_merged_configs() -> None:
    assert adaptive_throttle_settings({}) is None
    assert adaptive_throttle_settings({"reassignment.throttle.mode": "static"}) is None
    assert adaptive_throttle_settings({"reassignment.throttle.mode": "adaptive"}) == (
        1_000_000, 100_000_000, 100, 5000, 1.0, "ArrivalTime")
    # A per-broker minimum above the cluster's maximum is raised no higher than the maximum.
    assert adaptive_throttle_settings({"reassignment.throttle.mode": "ADAPTIVE",
                                       "reassignment.adaptive.min.throttled.rate": "9",
                                       "reassignment.adaptive.max.throttled.rate": "5"}) == (
        5, 5, 100, 5000, 1.0, "ArrivalTime")
    assert adaptive_throttle_settings({"reassignment.throttle.mode": "adaptive",
                                       "reassignment.adaptive.max.produce.latency.ms": "2.5"})[2] == 2.5
    assert adaptive_throttle_settings({"reassignment.throttle.mode": "adaptive",
                                       "reassignment.adaptive.max.cpu.pressure": "0.25"})[4] == 0.25
    # Any case, as the mode; what only a hand-written znode can hold gets the default.
    assert adaptive_throttle_settings({"reassignment.throttle.mode": "adaptive",
                                       "reassignment.adaptive.produce.latency.from": "createtime"})[5] == "CreateTime"
    assert adaptive_throttle_settings({"reassignment.throttle.mode": "adaptive",
                                       "reassignment.adaptive.produce.latency.from": "later"})[5] == "ArrivalTime"


def manager(tmp_path: Path) -> ReplicaManager:
    logs = LogManager([tmp_path / "d0"], LogConfig(), clock_ms=lambda: 1_000_000)
    logs.load()
    return ReplicaManager(1, logs, replica_lag_time_max_ms=30_000, replica_fetch_backoff_ms=1000,
                          wake=lambda _t, _p: None, broker_address=lambda _b: None,
                          controller_id=lambda: 9, broker_epoch=lambda: 1)


def rates(rm: ReplicaManager) -> tuple[float | None, float | None]:
    lead, follow = rm.reassignment_leader_limiter, rm.reassignment_follower_limiter
    return (lead.rate_bytes_per_s if lead else None, follow.rate_bytes_per_s if follow else None)


def test_static_mode_records_nothing_and_reports_the_static_rate(tmp_path: Path) -> None:
    rm = manager(tmp_path)
    assert rm.reassignment_throttle() == ThrottleStatus("static", 0, Reason.STATIC)
    rm.set_reassignment_rate(5 * MB)
    assert rates(rm) == (5 * MB, 5 * MB)
    rm.record_produce_latency(time.perf_counter())
    assert rm.produce_latencies_ms is None
    assert rm.reassignment_throttle() == ThrottleStatus("static", 5 * MB, Reason.STATIC)


def test_adaptive_mode_starts_at_the_static_rate_and_follows_its_decisions(tmp_path: Path) -> None:
    rm = manager(tmp_path)
    rm.set_reassignment_rate(5 * MB, SETTINGS)
    assert rates(rm) == (5 * MB, 5 * MB)
    assert rm.reassignment_throttle().reason is Reason.START
    # No copy yet: the rate holds.
    rm.adaptive_tick()
    assert rm.reassignment_throttle().reason is Reason.NOT_LIMITING and rates(rm) == (5 * MB, 5 * MB)
    # A copy that uses its budget, fast produces, no cut yet: doubled (slow start).
    assert rm.reassignment_leader_limiter is not None
    rm.reassignment_leader_limiter.record(5 * MB, 0)
    for _ in range(MIN_SAMPLES):
        rm.record_produce_latency(time.perf_counter())
    rm.adaptive_tick()
    status = rm.reassignment_throttle()
    assert status.mode == "adaptive" and status.reason is Reason.SLOW_START and status.rate == 10 * MB
    assert status.produce_p99_ms is not None and status.produce_p99_ms < 50
    assert rates(rm) == (10 * MB, 10 * MB)
    assert rm.produce_latencies_ms == []  # taken by the tick
    # Slow produces while the copy runs: cut.
    rm.reassignment_leader_limiter.record(1_000, 0)
    for _ in range(MIN_SAMPLES):
        rm.record_produce_latency(time.perf_counter() - 0.2)
    rm.adaptive_tick()
    assert rm.reassignment_throttle().reason is Reason.PRODUCE_LATENCY
    assert rates(rm) == (int(10 * MB * 0.7), int(10 * MB * 0.7))
    # Back to static: the static rate again, nothing recorded.
    rm.set_reassignment_rate(5 * MB)
    assert rates(rm) == (5 * MB, 5 * MB) and rm.produce_latencies_ms is None
    rm.set_reassignment_rate(None)
    assert rates(rm) == (None, None)


def test_create_time_latency_counts_from_the_producers_stamp(tmp_path: Path) -> None:
    rm = manager(tmp_path)
    # ArrivalTime (the default): a stamp 300 ms old changes nothing.
    rm.set_reassignment_rate(10 * MB, SETTINGS)
    assert not rm.judges_create_time
    rm.record_produce_latency(time.perf_counter(), int(time.time() * 1000) - 300)
    assert rm.produce_latencies_ms is not None and rm.produce_latencies_ms[0] < 100
    rm.set_reassignment_rate(10 * MB, AdaptiveSettings(MB, 21 * MB, 50, 1_000, latency_from="CreateTime"))
    assert rm.judges_create_time
    rm.produce_latencies_ms.clear()
    now_ms = time.time() * 1000
    rm.record_produce_latency(time.perf_counter(), int(now_ms) - 300)  # made 300 ms before the answer
    rm.record_produce_latency(time.perf_counter() - 0.02)  # no stamp: from its arrival, 20 ms ago
    rm.record_produce_latency(time.perf_counter() - 0.02, int(now_ms) + 5_000)  # stamped after it arrived
    rm.record_produce_latency(time.perf_counter() - 0.02, int(now_ms) - 60_000)  # an event time, not a send time
    got = rm.produce_latencies_ms
    assert 300 <= got[0] < 400, got
    assert all(20 <= v < 100 for v in got[1:]), got
    # The tick judges them: over the 50 ms target, the copy running, so a cut.
    for _ in range(MIN_SAMPLES):
        rm.record_produce_latency(time.perf_counter(), int(time.time() * 1000) - 300)
    assert rm.reassignment_leader_limiter is not None
    rm.reassignment_leader_limiter.record(10 * MB, 0)
    rm.adaptive_tick()
    status = rm.reassignment_throttle()
    assert status.reason is Reason.PRODUCE_LATENCY and status.produce_p99_ms is not None and status.produce_p99_ms >= 300


class _Pressure:
    """A PSI reader whose host has some task waiting ``share`` of the wall time since the last read
    (the total only grows, as the kernel's does)."""

    def __init__(self, share: float) -> None:
        self.share, self.reads = share, 0
        self._total_us, self._at = 0.0, time.monotonic()

    def waited_us(self) -> int:
        self.reads += 1
        now = time.monotonic()
        self._total_us += (now - self._at) * 1e6 * self.share
        self._at = now
        return int(self._total_us)

    def close(self) -> None:
        pass


def test_cpu_pressure_cuts_the_rate_when_it_has_a_target(tmp_path: Path) -> None:
    rm = manager(tmp_path)
    pressure = _Pressure(0.5)
    rm._cpu_pressure = pressure  # type: ignore[assignment]
    rm.set_reassignment_rate(10 * MB, SETTINGS)  # the target's default, 1.0: never read
    assert rm.reassignment_leader_limiter is not None
    rm.reassignment_leader_limiter.record(10 * MB, 0)
    rm.adaptive_tick()
    assert pressure.reads == 0 and rm.reassignment_throttle().cpu_pressure is None
    rm.set_reassignment_rate(10 * MB, AdaptiveSettings(MB, 21 * MB, 50, 1_000, max_cpu_pressure=0.3))
    before = rm.reassignment_throttle().rate
    rm.reassignment_leader_limiter.record(before, 0)
    rm.adaptive_tick()  # the first reading: nothing to judge by yet
    assert pressure.reads == 1 and rm.reassignment_throttle().reason is not Reason.CPU_PRESSURE
    time.sleep(0.05)
    rm.reassignment_leader_limiter.record(before, 0)
    rm.adaptive_tick()
    status = rm.reassignment_throttle()
    assert status.reason is Reason.CPU_PRESSURE and status.cpu_pressure == pytest.approx(0.5, abs=0.1)
    assert status.rate < before
    # The same host under the target: no cut for it.
    pressure.share = 0.1
    time.sleep(0.05)
    rm.reassignment_leader_limiter.record(status.rate, 0)
    rm.adaptive_tick()
    status = rm.reassignment_throttle()
    assert status.reason is not Reason.CPU_PRESSURE and status.cpu_pressure == pytest.approx(0.1, abs=0.05)


def test_follower_lag_of_led_partitions_cuts_the_rate(tmp_path: Path) -> None:
    async def scenario() -> None:
        rm = manager(tmp_path)
        # Leader of a partition whose follower 2 is in the ISR and has not fetched since 1,000 ms ago.
        assert rm.become("t", 0, LeaderAndIsrState(1, 0, (1, 2), 0, (1, 2)), topic_id=uuid.UUID(int=1),
                         config=LogConfig(), min_insync_replicas=1, max_message_bytes=1 << 20) == ErrorCode.NONE
        rm.set_reassignment_rate(10 * MB, AdaptiveSettings(MB, 20 * MB, 50, 1))
        hosted = rm.leader("t", 0)
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                            producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
        builder.append(0, timestamp=1000, key=None, value=b"x", headers=[])
        rm.append(hosted, bytearray(builder.build()), 1, 30_000)
        await asyncio.sleep(0.01)
        assert rm.reassignment_leader_limiter is not None
        rm.reassignment_leader_limiter.record(1_000, 0)  # a copy is running
        rm.adaptive_tick()
        status = rm.reassignment_throttle()
        assert status.reason is Reason.FOLLOWER_LAG and status.follower_lag_ms is not None
        assert status.follower_lag_ms >= 1 and status.rate == 7 * MB
        await rm.stop()

    asyncio.run(scenario())


def scrape(snapshot: metrics.Snapshot) -> str:
    collector = metrics.BrokerCollector()
    collector.snapshot = snapshot
    registry = CollectorRegistry()
    registry.register(collector)
    return generate_latest(registry).decode()


def test_metrics_show_the_rate_reason_and_signals() -> None:
    text = scrape(metrics.Snapshot(broker_id=3, reassignment_throttle=ThrottleStatus(
        "adaptive", 7_000_000, Reason.PRODUCE_LATENCY, 61.5, None)))
    assert 'headwater_reassignment_throttle_rate_bytes_per_second{broker="3",mode="adaptive"} 7e+06' in text
    assert 'headwater_reassignment_throttle_reason{broker="3",reason="produce_latency"} 1.0' in text
    assert 'headwater_reassignment_throttle_reason{broker="3",reason="increase"} 0.0' in text
    assert 'headwater_reassignment_throttle_produce_p99_ms{broker="3"} 61.5' in text
    assert 'headwater_reassignment_throttle_follower_lag_ms{broker="3"} -1.0' in text
    assert 'headwater_reassignment_throttle_cpu_pressure{broker="3"} -1.0' in text
    text = scrape(metrics.Snapshot(broker_id=3, reassignment_throttle=ThrottleStatus(
        "adaptive", 7_000_000, Reason.CPU_PRESSURE, None, None, 0.42)))
    assert 'headwater_reassignment_throttle_reason{broker="3",reason="cpu_pressure"} 1.0' in text
    assert 'headwater_reassignment_throttle_cpu_pressure{broker="3"} 0.42' in text
