"""The operator console in a real browser against a real cluster (issue 20's first slice).

Four brokers with their metrics endpoints, the console as ``python -m headwater console`` (one
writable, one ``--read-only``), Debian's chromium through selenium. Each page loads and shows the
cluster; a throttled reassignment shows a progress bar that moves and reaches 100 %; a cancel from
the page reverts a partition (checked with Metadata); two of three moves ticked and cancelled
together return to their original replicas while the third completes; the throttle is changed
from the page; the read-only console shows no write controls and refuses a cancel; a POST without
the CSRF token is refused. The Cluster page's self-healing panel follows the controller's metrics,
and its switch turns self-healing on and off (checked with DescribeConfigs); the Reassignments page
shows each broker's throttle in force, adaptive once the cluster default says so; the read-only
console, without metrics endpoints, says both are unknown. Screenshots of every page go to the
module's temporary directory and are named in the output.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_support import LocalCluster, run_cli, start_cluster, wait_for
from confluent_kafka import Producer
from console_support import (
    ConsoleProcess,
    attr,
    attrs,
    click,
    css,
    prop,
    screenshot,
    text,
    texts_by_id,
    wait_css,
    wait_new_snapshot,
)
from kafka.protocol.admin import DescribeConfigsRequest

from headwater.admin.client import AdminClient
from headwater.admin.local import free_port
from headwater.admin.reassign import Cluster
from headwater.protocol.config_resources import RESOURCE_BROKER

pytestmark = pytest.mark.slow

TOPIC = "moving"
OTHER = "steady"
CHOSEN = "chosen"  # three moves, two of them cancelled together
PARTITION_BYTES = 3 * 1024 * 1024
SLOW_THROTTLE = 250_000  # B/s: several seconds per partition, so the page sees the copy move
FAST_THROTTLE = 50_000_000


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("console")


@pytest.fixture(scope="module")
def cluster(workdir: Path) -> Iterator[LocalCluster]:
    c = start_cluster(workdir / "cluster", 4, broker_props=lambda _b, _p: {"metrics.port": str(free_port())})
    try:
        c.create_topic(OTHER, 3, 3)
        run_cli("topics", "--bootstrap-server", c.bootstrap, "--create", "--topic", TOPIC,
                "--replica-assignment", "1:2,1:2")
        fill(c, TOPIC, 2)
        c.wait_full_isr([TOPIC], 2)
        yield c
    finally:
        c.stop()


def fill(cluster: LocalCluster, topic: str, partitions: int) -> None:
    """PARTITION_BYTES into each partition of ``topic``."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 20, "log_level": 3})
    value = b"x" * 10240
    for i in range(partitions * PARTITION_BYTES // len(value)):
        while True:
            try:
                producer.produce(topic, value=value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0


@pytest.fixture(scope="module")
def read_only_console(cluster: LocalCluster, workdir: Path) -> Iterator[ConsoleProcess]:
    proc = ConsoleProcess(cluster.bootstrap, workdir / "console-ro.log", "--read-only")
    try:
        yield proc
    finally:
        proc.stop()




def replicas(cluster: LocalCluster, topic: str) -> dict[int, list[int]]:
    """Through a Kafka client: the partitions' replicas in a broker's Metadata."""
    with AdminClient(cluster.bootstrap) as client:
        meta = client.refresh([topic])
    return {p.partition_index: list(p.replica_nodes) for t in meta.topics for p in t.partitions}


def test_pages_show_the_cluster(console: ConsoleProcess, browser: Any, workdir: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    browser.get(console.url + "/cluster")
    wait_for(lambda: len(css(browser, "#brokers tr.broker")) == 4, 30, "four brokers on the Cluster page")
    rows = texts_by_id(browser, "#brokers tr.broker")
    assert set(rows) == {"broker-1", "broker-2", "broker-3", "broker-4"}
    assert all("alive" in row for row in rows.values()), rows
    assert sum("controller" in row for row in rows.values()) == 1, rows
    assert "Under-replicated: 0" in text(browser, "#health")
    screenshot(browser, workdir, "cluster", capsys)

    browser.get(console.url + "/topics")
    wait_css(browser, f"#topic-{TOPIC}")
    assert css(browser, f"#topic-{OTHER}")
    content = text(browser, "#content")
    assert "3.0 MiB" in content or "MiB" in content, content  # partition sizes from DescribeLogDirs
    screenshot(browser, workdir, "topics", capsys)


def default_broker_configs(cluster: LocalCluster) -> dict[str, str | None]:
    """Through a Kafka client: the configs set on the cluster-wide default broker entity (DescribeConfigs)."""
    R = DescribeConfigsRequest.DescribeConfigsResource
    with AdminClient(cluster.bootstrap) as client:
        resp = client.send(DescribeConfigsRequest, dict(
            resources=[R(resource_type=RESOURCE_BROKER, resource_name="", configuration_keys=None)],
            include_synonyms=False, include_documentation=False))
    (result,) = resp.results
    assert result.error_code == 0, result
    return {c.name: c.value for c in result.configs}


def test_self_healing_panel_switch_and_throttle_in_force(cluster: LocalCluster, console: ConsoleProcess, browser: Any,
                                                         workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    browser.get(console.url + "/cluster")
    wait_css(browser, "#self-healing")
    # The controller's metrics: off by default, 30 minutes' threshold, no broker being counted down.
    wait_for(lambda: attr(browser, "#self-healing", "data-state") == "disabled", 30, "self-healing off on the page")
    assert "threshold 30 min 0 s" in prop(browser, "#self-healing", "textContent")
    assert "No dead broker or failed log dir." in prop(browser, "#healing-clocks", "textContent")
    assert prop(browser, "#healing-off", "disabled") is True

    click(browser, "#healing-on")
    browser.switch_to.alert.accept()
    wait_for(lambda: attr(browser, "#self-healing", "data-state") == "enabled", 30,
             "the panel to show self-healing enabled")
    wait_for(lambda: default_broker_configs(cluster).get("self.healing.enable") == "true", 30,
             "self.healing.enable=true on the <default> broker entity")
    assert "self.healing.enable=true" in prop(browser, "#self-healing", "textContent")  # the config as set
    assert prop(browser, "#healing-on", "disabled") is True
    screenshot(browser, workdir, "cluster-self-healing", capsys)
    click(browser, "#healing-off")
    wait_for(lambda: attr(browser, "#self-healing", "data-state") == "disabled", 30,
             "the panel to show self-healing disabled")
    wait_for(lambda: default_broker_configs(cluster).get("self.healing.enable") == "false", 30,
             "self.healing.enable=false on the <default> broker entity")

    browser.get(console.url + "/reassignments")
    wait_for(lambda: len(css(browser, "#throttles tr.throttle")) == 4, 30, "four brokers' throttles")
    assert {attr(browser, f"#throttle-broker-{b}", "data-mode") for b in (1, 2, 3, 4)} == {"static"}
    run_cli("configs", "--bootstrap-server", cluster.bootstrap, "--alter", "--entity-type", "brokers",
            "--entity-default", "--add-config", "reassignment.throttle.mode=adaptive")
    try:
        for b in (1, 2, 3, 4):
            wait_for(lambda b=b: attr(browser, f"#throttle-broker-{b}", "data-mode") == "adaptive", 30,
                     f"broker {b}'s throttle adaptive on the page")
        wait_for(lambda: (attr(browser, "#throttle-broker-1", "data-reason") or "static") != "static", 30,
                 "an adaptive reason")
        screenshot(browser, workdir, "reassignments-adaptive", capsys)
    finally:
        run_cli("configs", "--bootstrap-server", cluster.bootstrap, "--alter", "--entity-type", "brokers",
                "--entity-default", "--delete-config", "reassignment.throttle.mode")
    wait_for(lambda: attr(browser, "#throttle-broker-1", "data-mode") == "static", 30, "static again")


def test_reassignment_progress_cancel_and_throttle(cluster: LocalCluster, console: ConsoleProcess, browser: Any,
                                                   workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    browser.get(console.url + "/reassignments")
    wait_css(browser, "#moves")
    plan = workdir / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": 0, "replicas": [3, 4]}, {"topic": TOPIC, "partition": 1, "replicas": [3, 4]}]}))
    run_cli("reassign", "--bootstrap-server", cluster.bootstrap, "--reassignment-json-file", str(plan),
            "--execute", "--throttle", str(SLOW_THROTTLE))

    # Both moves show, live (no reload), throttled, with their progress bars.
    wait_css(browser, f"#move-{TOPIC}-0 .bar")
    wait_css(browser, f"#move-{TOPIC}-1 .bar")
    assert "throttled" in text(browser, f"#move-{TOPIC}-0")
    shares: list[float] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len({s for s in shares if 0 < s < 100}) < 3:
        bars = css(browser, f"#move-{TOPIC}-0 .bar")
        try:
            if bars:
                shares.append(float(bars[0].get_attribute("data-share")))
        except StaleElementReferenceException:
            pass  # the table was rebuilt from a new snapshot between the lookup and the read
        time.sleep(0.5)
    moving = [s for s in shares if 0 < s < 100]
    assert len(set(moving)) >= 3, f"the progress bar did not move: {shares}"
    assert moving == sorted(moving), f"the progress bar went back: {shares}"
    screenshot(browser, workdir, "reassignments-moving", capsys)

    # Cancel partition 1 from the page: it returns to its original replicas.
    click(browser, f"#move-{TOPIC}-1 button.cancel")  # the moves table is rebuilt from every snapshot
    wait_for(lambda: sorted(replicas(cluster, TOPIC)[1]) == [1, 2] and not css(browser, f"#move-{TOPIC}-1"),
             60, "partition 1 back on [1, 2]")
    assert replicas(cluster, TOPIC)[1] == [1, 2]
    wait_for(lambda: "cancelled" in text(browser, f"#done-{TOPIC}-1"), 30,
             "the cancelled move among the completed ones")

    # Raise the throttle from the page; the brokers of the move get the new rate.
    rate = browser.find_element(By.ID, "throttle-rate")
    rate.clear()
    rate.send_keys(str(FAST_THROTTLE))
    browser.find_element(By.ID, "throttle-set").click()
    wait_for(lambda: f"follower.replication.throttled.rate={FAST_THROTTLE}" in run_cli(
        "configs", "--bootstrap-server", cluster.bootstrap, "--describe", "--entity-type", "brokers",
        "--entity-name", "3"), 30, "broker 3 with the new throttle")

    # Partition 0 finishes: 100 % overall and in the completed list.
    wait_for(lambda: not css(browser, f"#move-{TOPIC}-0"), 120, "partition 0's move to finish")
    wait_for(lambda: "completed" in text(browser, f"#done-{TOPIC}-0"), 30, "partition 0 completed")
    wait_for(lambda: css(browser, "#overall .bar")[0].get_attribute("data-share") == "100.0", 30, "the overall bar at 100 %")
    assert attr(browser, f"#done-{TOPIC}-0 .bar", "data-share") == "100.0"
    assert sorted(replicas(cluster, TOPIC)[0]) == [3, 4]
    screenshot(browser, workdir, "reassignments-done", capsys)


def in_flight(cluster: LocalCluster, topic: str) -> set[int]:
    """Through a Kafka client: the partitions of ``topic`` the controller lists as being reassigned."""
    with AdminClient(cluster.bootstrap) as client:
        return {p for t, p in Cluster(client).ongoing() if t == topic}


def test_cancel_selected_moves(cluster: LocalCluster, console: ConsoleProcess, browser: Any, workdir: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    run_cli("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", CHOSEN,
            "--replica-assignment", "1:2,1:2,1:2")
    fill(cluster, CHOSEN, 3)
    cluster.wait_full_isr([CHOSEN], 3)
    assert replicas(cluster, CHOSEN) == {0: [1, 2], 1: [1, 2], 2: [1, 2]}
    browser.get(console.url + "/reassignments")
    wait_css(browser, "#moves")
    plan = workdir / "plan-chosen.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": CHOSEN, "partition": p, "replicas": [3, 4]} for p in range(3)]}))
    # Slow enough that none of the three ends before the cancel: 18 MiB to copy out of broker 1.
    run_cli("reassign", "--bootstrap-server", cluster.bootstrap, "--reassignment-json-file", str(plan),
            "--execute", "--throttle", str(SLOW_THROTTLE))

    for p in range(3):
        wait_css(browser, f"#move-{CHOSEN}-{p} input.select-move")
    assert prop(browser, "#cancel-selected", "disabled") is True  # nothing ticked yet
    click(browser, f"#move-{CHOSEN}-0 input.select-move")
    click(browser, f"#move-{CHOSEN}-2 input.select-move")
    assert prop(browser, "#cancel-selected", "textContent") == "Cancel selected (2)"
    # The table is rebuilt from every snapshot: the ticks survive two of them.
    wait_new_snapshot(browser)
    wait_new_snapshot(browser)
    ticked = {p: prop(browser, f"#move-{CHOSEN}-{p} input.select-move", "checked") for p in range(3)}
    assert ticked == {0: True, 1: False, 2: True}, ticked
    assert in_flight(cluster, CHOSEN) == {0, 1, 2}  # all three still moving when the cancel is sent
    screenshot(browser, workdir, "reassignments-selected", capsys)

    click(browser, "#cancel-selected")
    browser.switch_to.alert.accept()
    # KIP-455: a cancelled partition returns to its original replicas; the other move goes on.
    wait_for(lambda: (lambda r: r[0] == [1, 2] and r[2] == [1, 2])(replicas(cluster, CHOSEN)), 60,
             "partitions 0 and 2 back on [1, 2]")
    assert in_flight(cluster, CHOSEN) <= {1}
    assert sorted(replicas(cluster, CHOSEN)[1]) in ([1, 2, 3, 4], [3, 4])  # still moving (adding 3, 4), or done
    wait_for(lambda: "cancelled" in text(browser, f"#done-{CHOSEN}-0")
             and "cancelled" in text(browser, f"#done-{CHOSEN}-2"), 30, "both cancels among the ended moves")
    screenshot(browser, workdir, "reassignments-selected-cancelled", capsys)

    wait_for(lambda: not in_flight(cluster, CHOSEN) and replicas(cluster, CHOSEN)[1] == [3, 4], 120,
             "partition 1 to complete on [3, 4]")
    assert replicas(cluster, CHOSEN) == {0: [1, 2], 1: [3, 4], 2: [1, 2]}
    wait_for(lambda: "completed" in text(browser, f"#done-{CHOSEN}-1"), 30, "partition 1 completed on the page")
    assert prop(browser, "#cancel-selected", "disabled") is True  # nothing left ticked


def test_read_only_console_refuses_writes(cluster: LocalCluster, read_only_console: ConsoleProcess, browser: Any,
                                          workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = workdir / "plan-ro.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": TOPIC, "partition": 1, "replicas": [3, 4]}]}))
    run_cli("reassign", "--bootstrap-server", cluster.bootstrap, "--reassignment-json-file", str(plan),
            "--execute", "--throttle", str(SLOW_THROTTLE))
    try:
        browser.get(read_only_console.url + "/reassignments")
        wait_css(browser, f"#move-{TOPIC}-1 .bar")
        assert not css(browser, "button"), "a read-only console shows no buttons"
        assert not css(browser, "input[type=checkbox]"), "nor boxes to tick moves with"
        assert not css(browser, "#throttle-rate")
        # No --metrics: the throttle in force and self-healing are unknown, not "no limit" or "off".
        assert {r["data-mode"] for r in attrs(browser, "#throttles tr.throttle", "data-mode")} == {"unknown"}
        assert "unknown (no metrics endpoint)" in prop(browser, "#throttles", "textContent")
        screenshot(browser, workdir, "reassignments-read-only", capsys)
        browser.get(read_only_console.url + "/cluster")
        wait_css(browser, "#self-healing")
        assert attr(browser, "#self-healing", "data-state") == "unknown"
        assert "unknown (no metrics endpoint)" in prop(browser, "#healing-state", "textContent")
        assert not css(browser, "button"), "a read-only console has no self-healing switch"
        status, answer = read_only_console.post("/api/self-healing", {"enable": True}, read_only_console.token())
        assert status == 403, answer
        status, answer = read_only_console.post("/api/cancel", {"all": True}, read_only_console.token())
        assert status == 403, answer
        status, answer = read_only_console.post("/api/throttle", {"rate": 1000}, read_only_console.token())
        assert status == 403, answer
        assert any(m["partition"] == 1 for m in read_only_console.get_json("/api/snapshot")["reassignments"]["moves"])
    finally:
        run_cli("reassign", "--bootstrap-server", cluster.bootstrap, "--reassignment-json-file", str(plan), "--cancel")


def test_post_without_csrf_token_is_refused(console: ConsoleProcess) -> None:
    status, answer = console.post("/api/cancel", {"all": True}, None)
    assert status == 403 and "CSRF" in answer["error"], (status, answer)
    status, answer = console.post("/api/throttle", {"rate": 1000}, "not-the-token")
    assert status == 403, (status, answer)
    status, _ = console.post("/api/throttle", {"rate": "fast"}, console.token())
    assert status == 400  # the token alone passes the guard; the body is still checked
