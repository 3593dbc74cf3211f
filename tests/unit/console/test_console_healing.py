"""The adaptive throttle in force and self-healing in the console (issue 21): their metrics parsed
line by line, the page models (unknown without an endpoint, a former controller's samples ignored),
and the switch, which must send what ``headwater configs --entity-default`` sends."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace as NS
from typing import Any

import pytest
from click.testing import CliRunner
from console_fakes import FakeSource
from kafka.protocol.admin import IncrementalAlterConfigsRequest
from starlette.testclient import TestClient

from headwater.admin import configs as configs_tool
from headwater.admin.client import AdminError
from headwater.admin.security import PLAINTEXT
from headwater.console import model
from headwater.console.app import create_app
from headwater.console.csrf import CsrfGuard
from headwater.console.model import BrokerFacts, Facts
from headwater.console.reader import MetricsParser, Poller, WriteError, default_config_values, parse_status

THROTTLE_1 = [
    'headwater_reassignment_throttle_rate_bytes_per_second{broker="1",mode="adaptive"} 1.25e+07',
    'headwater_reassignment_throttle_reason{broker="1",reason="static"} 0.0',
    'headwater_reassignment_throttle_reason{broker="1",reason="produce_latency"} 1.0',
    'headwater_reassignment_throttle_reason{broker="1",reason="increase"} 0.0',
    'headwater_reassignment_throttle_produce_p99_ms{broker="1"} 4.5',
    'headwater_reassignment_throttle_follower_lag_ms{broker="1"} -1.0',
    'headwater_reassignment_throttle_cpu_pressure{broker="1"} 0.31',
]
HEALING_1 = [
    "# HELP headwater_self_healing_enabled 1 when self.healing.enable is true",
    "# TYPE headwater_self_healing_enabled gauge",
    'headwater_self_healing_enabled{broker="1"} 1.0',
    'headwater_self_healing_dry_run{broker="1"} 0.0',
    'headwater_self_healing_threshold_seconds{broker="1"} 600.0',
    'headwater_self_healing_moves_in_flight{broker="1"} 2.0',
    'headwater_self_healing_next_action_seconds{broker="1"} 480.0',
    'headwater_self_healing_dead_broker_seconds{broker="1",target="10"} 120.0',
    'headwater_self_healing_dead_broker_seconds{broker="1",target="3"} 700.0',
    'headwater_self_healing_offline_dir_seconds{broker="1",target="2"} 30.5',
    "# TYPE headwater_self_healing_actions counter",
    'headwater_self_healing_actions_total{broker="1",action="heal"} 1.0',
    'headwater_self_healing_actions_total{broker="1",action="elect"} 3.0',
]


def _page(*lines: str) -> str:
    return "\n".join([*lines, 'headwater_partitions_led{broker="1"} 3.0', ""])


def _facts(controller: int = 1, status: dict[model.StatusKey, float] | None = None) -> Facts:
    f = Facts(taken_at=0.0, controller_id=controller, status=status)
    f.brokers = {b: BrokerFacts(b, "h", 9000 + b, None) for b in (1, 2)}
    return f


def test_status_samples_parsed_and_followed_line_by_line() -> None:
    parser = MetricsParser()
    parser.parse(_page(*THROTTLE_1, *HEALING_1))
    assert parser.status == parse_status(_page(*THROTTLE_1, *HEALING_1))
    assert parser.status[(model.THROTTLE_RATE, "1", "adaptive")] == 12_500_000
    assert parser.status[(model.THROTTLE_REASON, "1", "produce_latency")] == 1
    assert parser.status[(model.HEALING_DEAD, "1", "3")] == 700
    assert parser.status[(model.HEALING_ACTIONS, "1", "elect")] == 3
    assert not any(name == "headwater_partitions_led" for name, _b, _o in parser.status)
    # The mode changes (its sample's label), broker 3 comes back (its clock's line goes), a value changes.
    changed = [line.replace("adaptive", "static") for line in THROTTLE_1] + \
        [line for line in HEALING_1 if 'target="3"' not in line and "moves_in_flight" not in line] + \
        ['headwater_self_healing_moves_in_flight{broker="1"} 0.0']
    parser.parse(_page(*changed))
    assert parser.status == parse_status(_page(*changed))
    assert (model.THROTTLE_RATE, "1", "adaptive") not in parser.status
    assert parser.status[(model.THROTTLE_RATE, "1", "static")] == 12_500_000
    assert (model.HEALING_DEAD, "1", "3") not in parser.status
    assert parser.status[(model.HEALING_IN_FLIGHT, "1", "")] == 0


def test_throttles_in_force() -> None:
    assert model.throttles_in_force(_facts()) == [
        {"broker": 1, "known": False, "unknown": model.NO_METRICS},
        {"broker": 2, "known": False, "unknown": model.NO_METRICS}]  # no --metrics: unknown, not "no limit"
    status = parse_status(_page(*THROTTLE_1, 'headwater_reassignment_throttle_rate_bytes_per_second{broker="5",mode="static"} 0.0'))
    one, two, five = model.throttles_in_force(_facts(status=status))
    assert one == {"broker": 1, "known": True, "mode": "adaptive", "rate": 12_500_000, "reason": "produce_latency",
                   "reason_text": model.REASONS["produce_latency"], "produce_p99_ms": 4.5, "follower_lag_ms": None,
                   "cpu_pressure": 0.31}
    assert two == {"broker": 2, "known": False, "unknown": model.NO_METRICS}  # its endpoint is not read
    assert five["known"] and five["mode"] == "static" and five["rate"] == 0 and five["reason"] is None


def test_self_healing_from_the_controllers_metrics() -> None:
    status = parse_status(_page(*THROTTLE_1, *HEALING_1))
    h = model.self_healing_model(_facts(status=status))
    assert h["known"] and h["enabled"] and not h["dry_run"] and h["threshold_s"] == 600
    assert (h["moves_in_flight"], h["next_action_s"]) == (2, 480)
    assert h["dead_brokers"] == [{"broker": 3, "for_s": 700, "in_s": 0.0}, {"broker": 10, "for_s": 120, "in_s": 480}]
    assert h["offline_dirs"] == [{"broker": 2, "for_s": 30.5, "in_s": 569.5}]
    assert h["actions"] == {"heal": 1, "cancel": 0, "elect": 3, "dry_run": 0, "failed": 0}
    idle = [line.replace("480.0", "-1.0") if "next_action" in line else line for line in HEALING_1]
    assert model.self_healing_model(_facts(status=parse_status(_page(*idle))))["next_action_s"] is None


def test_self_healing_unknown_rather_than_wrong() -> None:
    none = model.self_healing_model(_facts())
    assert not none["known"] and none["unknown"] == model.NO_METRICS and "enabled" not in none
    # Broker 1's samples, but broker 2 is the controller now: they are a former controller's.
    former = model.self_healing_model(_facts(controller=2, status=parse_status(_page(*THROTTLE_1, *HEALING_1))))
    assert not former["known"] and former["unknown"] == model.NO_METRICS
    # The controller's endpoint is read but exports no self-healing (not yet, or not headwater's).
    bare = model.self_healing_model(_facts(status=parse_status(_page(*THROTTLE_1))))
    assert not bare["known"] and "exports no self-healing" in bare["unknown"]
    configured = _facts()
    configured.healing_configs = {"self.healing.enable": "true"}
    assert model.self_healing_model(configured)["configured"] == {"self.healing.enable": "true"}


def test_default_entity_configs_answer() -> None:
    ok = NS(results=[NS(resource_name="", error_code=0, error_message=None,
                        configs=[NS(name="self.healing.enable", value="false")])])
    assert default_config_values(ok) == {"self.healing.enable": "false"}
    refused = NS(results=[NS(resource_name="", error_code=31, error_message=None, configs=[])])
    with pytest.raises(AdminError, match="CLUSTER_AUTHORIZATION_FAILED"):
        default_config_values(refused)


class _RecordingClient:
    """An admin client that records what it is asked to send and answers every alter with ``error``."""

    def __init__(self, sent: list[tuple[Any, dict[str, Any], int | None]], error: int = 0) -> None:
        self.sent, self.error = sent, error

    def __enter__(self) -> _RecordingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def send(self, request_cls: Any, fields: dict[str, Any], *, node_id: int | None = None, **_: Any) -> Any:
        self.sent.append((request_cls, fields, node_id))
        return NS(responses=[NS(error_code=self.error, error_message="no" if self.error else None)])


def test_the_switch_sends_what_headwater_configs_sends(monkeypatch: pytest.MonkeyPatch) -> None:
    for enable, value in ((False, "false"), (True, "true")):
        tool: list[tuple[Any, dict[str, Any], int | None]] = []

        def connect(*_args: object, sent: list[Any] = tool) -> _RecordingClient:
            return _RecordingClient(sent)

        monkeypatch.setattr(configs_tool, "connect", connect)
        result = CliRunner().invoke(configs_tool.configs, [
            "--bootstrap-server", "h:1", "--entity-type", "brokers", "--entity-default", "--alter",
            "--add-config", f"self.healing.enable={value}"])
        assert result.exit_code == 0, result.output
        console: list[tuple[Any, dict[str, Any], int | None]] = []
        poller = Poller("h:1", PLAINTEXT)
        try:
            @contextmanager
            def client(sent: list[Any] = console) -> Iterator[_RecordingClient]:
                yield _RecordingClient(sent)

            monkeypatch.setattr(poller, "client", client)
            assert "self.healing.enable=" + value in poller.set_self_healing(enable)[0]
        finally:
            poller.stop()
        assert console == tool and console[0][0] is IncrementalAlterConfigsRequest
        (resource,) = console[0][1]["resources"]
        assert (resource.resource_type, resource.resource_name) == (4, "")


def test_the_switch_reports_a_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    poller = Poller("h:1", PLAINTEXT)
    try:
        monkeypatch.setattr(poller, "client", lambda: _RecordingClient([], error=31))
        with pytest.raises(WriteError, match="no"):
            poller.set_self_healing(False)
    finally:
        poller.stop()


def test_switch_endpoint_behind_the_token_and_read_only() -> None:
    source = FakeSource()
    with TestClient(create_app(source, CsrfGuard("tok"), allowed_hosts=["testserver"])) as client:
        assert client.post("/api/self-healing", json={"enable": True}).status_code == 403  # no token
        resp = client.post("/api/self-healing", json={"enable": True}, headers={"X-CSRF-Token": "tok"})
        assert resp.status_code == 200 and resp.json() == {"done": ["self.healing.enable=true"]}
        for bad in ({}, {"enable": "false"}, {"enable": 0}):
            assert client.post("/api/self-healing", json=bad, headers={"X-CSRF-Token": "tok"}).status_code == 400
        assert client.post("/api/self-healing", json={"enable": False}, headers={"X-CSRF-Token": "tok"}).status_code == 200
    assert source.healing == [True, False]
    read_only = FakeSource(read_only=True)
    with TestClient(create_app(read_only, CsrfGuard("tok"), allowed_hosts=["testserver"])) as client:
        resp = client.post("/api/self-healing", json={"enable": False}, headers={"X-CSRF-Token": "tok"})
        assert resp.status_code == 403 and "read-only" in resp.json()["error"]
    assert read_only.healing == []
