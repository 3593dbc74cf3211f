"""``reassign --verify --watch --metrics-url``: each broker's reassignment throttle, read from the
text the broker's Prometheus endpoint serves."""

from __future__ import annotations

import io
import time
from typing import Any

from click.testing import CliRunner
from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry
from rich.console import Console

from headwater.admin import reassign as tool
from headwater.admin.reassign import BrokerThrottle, Ongoing, parse_throttle_metrics
from headwater.replication.adaptive_throttle import Reason, ThrottleStatus
from headwater.server import metrics


def endpoint_text(broker: int, status: ThrottleStatus) -> str:
    collector = metrics.BrokerCollector()
    collector.snapshot = metrics.Snapshot(broker_id=broker, reassignment_throttle=status)
    registry = CollectorRegistry()
    registry.register(collector)
    return generate_latest(registry).decode()


def test_parses_a_brokers_endpoint() -> None:
    text = endpoint_text(4, ThrottleStatus("adaptive", 12_500_000, Reason.PRODUCE_LATENCY, 61.5, 20))
    assert parse_throttle_metrics(text) == {4: BrokerThrottle(4, "adaptive", 12_500_000, "produce_latency", 61.5, 20)}
    assert parse_throttle_metrics(endpoint_text(1, ThrottleStatus("static", 0, Reason.STATIC))) == {
        1: BrokerThrottle(1, "static", 0, "static", -1, -1)}
    assert parse_throttle_metrics("") == {}
    text = endpoint_text(4, ThrottleStatus("adaptive", 7_000_000, Reason.CPU_PRESSURE, 5.0, 0, 0.42))
    assert parse_throttle_metrics(text) == {4: BrokerThrottle(4, "adaptive", 7_000_000, "cpu_pressure", 5.0, 0, 0.42)}


def test_describe() -> None:
    assert BrokerThrottle(4, "adaptive", 12_500_000, "increase", 3.25, 0).describe() == (
        "broker 4: 12.5 MB/s adaptive, increase, p99 3.2 ms, lag 0 ms")
    assert BrokerThrottle(4, "adaptive", 1_000_000, "not_limiting").describe() == (
        "broker 4: 1.0 MB/s adaptive, not_limiting")
    assert BrokerThrottle(1, "static", 0, "static").describe() == "broker 1: no limit (static)"
    assert BrokerThrottle(4, "adaptive", 7_000_000, "cpu_pressure", 5.0, 0, 0.424).describe() == (
        "broker 4: 7.0 MB/s adaptive, cpu_pressure, p99 5.0 ms, lag 0 ms, CPU pressure 0.42")


def test_plain_watch_prints_a_throttle_line_when_a_rate_or_reason_changes(monkeypatch: Any) -> None:
    tp = ("t", 0)
    ongoing = {tp: Ongoing(replicas=[1, 2, 4], adding=[4], removing=[])}
    Round = tuple[dict[tuple[str, int], Ongoing], list[Any], dict[int, BrokerThrottle]]
    rounds: list[Round] = [
        (ongoing, [], {4: BrokerThrottle(4, "adaptive", 1e6, "increase", 3.0, 0)}),
        (ongoing, [], {4: BrokerThrottle(4, "adaptive", 1e6, "increase", 4.0, 0)}),  # only the p99 moved
        (ongoing, [], {4: BrokerThrottle(4, "adaptive", 2e6, "increase", 4.0, 0)}),
        ({}, [], {4: BrokerThrottle(4, "adaptive", 2e6, "not_limiting", -1, 0)}),
    ]
    monkeypatch.setattr(time, "sleep", lambda _s: None)
    runner = CliRunner()
    with runner.isolation() as (out, _err, _in):
        tool._watch_plain({tp: [1, 2, 4]}, lambda: rounds.pop(0), 1.0)
        text = out.getvalue().decode()
    throttle_lines = [line.split("] ", 1)[1] for line in text.splitlines() if "Throttle:" in line]
    assert throttle_lines == [
        "Throttle: broker 4: 1.0 MB/s adaptive, increase, p99 3.0 ms, lag 0 ms",
        "Throttle: broker 4: 2.0 MB/s adaptive, increase, p99 4.0 ms, lag 0 ms",
        "Throttle: broker 4: 2.0 MB/s adaptive, not_limiting, lag 0 ms",
    ]
    assert "Partition t-0: completed" in text


def test_live_watch_shows_the_throttle_table(monkeypatch: Any) -> None:
    tp = ("t", 0)
    rounds: list[tuple[dict[tuple[str, int], Ongoing], list[Any], dict[int, BrokerThrottle]]] = [
        ({}, [], {4: BrokerThrottle(4, "adaptive", 3e6, "follower_lag", 2.0, 6000)})]
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=120)
    tool._watch_live(console, {tp: [1, 2, 4]}, lambda: rounds.pop(0), 0.0)
    text = buf.getvalue()
    assert "Reassignment throttle" in text and "follower_lag" in text and "6,000 ms" in text
