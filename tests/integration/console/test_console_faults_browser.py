"""The console in a real browser while a broker of a real cluster is slow, then down (issue 20's
"a broker that is down or slow shows as such and the page keeps working").

Three brokers, a topic on all three. The console's bootstrap list starts with the broker that gets
stopped (not the controller), as an operator's list may well do. SIGSTOP makes that broker slow
in the worst way: the kernel still accepts connections, nothing answers. Its row must say "not
answering" within a few polls while the page keeps getting fresh snapshots (the other brokers
still answer); the Reassignments page still loads; SIGCONT brings the row back. Then kill -9: the
row shows "not answering" at once (connections refused) and "down" once the broker's ZooKeeper
session ends and Kafka no longer lists it (checked with Metadata). Screenshots go to the module's
temporary directory.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import cluster_support
import pytest
from cluster_support import LocalCluster, pause, resume, start_cluster, wait_for
from console_support import ConsoleProcess, prop, screenshot, taken_at, wait_css, wait_new_snapshot

from headwater.admin.client import AdminClient, AdminError
from headwater.admin.local import ZooKeeperProcess, free_port

pytestmark = pytest.mark.slow

TOPIC = "everywhere"
# Long enough that the stopped broker stays registered (slow, not dead) while the test looks at the
# pages, even when its last heartbeat was a third of a session before SIGSTOP; short enough that
# kill -9 shows as "down" within a test. ZooKeeper allows sessions up to 20 ticks.
ZK_SESSION_MS = 45_000
ZK_TICK_MS = 3_000
STALE_S = 10  # the header marks a snapshot older than this as stale (console.js)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("console-faults")


@pytest.fixture(scope="module")
def cluster(workdir: Path) -> Iterator[LocalCluster]:
    # The shared harness ticks every 500 ms, which caps sessions at 10 s: its ZooKeeper ticks slower here.
    with mock.patch.object(cluster_support, "ZooKeeperProcess", functools.partial(ZooKeeperProcess, tick_ms=ZK_TICK_MS)):
        c = start_cluster(workdir / "cluster", 3, {"zookeeper.session.timeout.ms": str(ZK_SESSION_MS)},
                          broker_props=lambda _b, _p: {"metrics.port": str(free_port())})
    try:
        c.create_topic(TOPIC, 3, 3)
        c.wait_full_isr([TOPIC], 3)
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def victim(cluster: LocalCluster) -> int:
    """The broker the test stops and kills: not the controller, whose requests the console needs."""
    controller = cluster.controller_id()
    return min(b for b in cluster.brokers if b != controller)


@pytest.fixture(scope="module")
def console_bootstrap(cluster: LocalCluster, victim: int) -> str:
    order = [victim, *sorted(b for b in cluster.brokers if b != victim)]
    return ",".join(cluster.brokers[b].bootstrap for b in order)


def states(driver: Any) -> dict[int, str]:
    """Each broker row's state on the Cluster page, read in one script (the rows are rebuilt often)."""
    pairs = driver.execute_script("return [...document.querySelectorAll('#brokers tr.broker')]"
                                  ".map((r) => [r.id, r.querySelector('td.state').dataset.state]);")
    return {int(row_id.removeprefix("broker-")): value for row_id, value in pairs}


def state(driver: Any, broker: int) -> str | None:
    return states(driver).get(broker)


def answers(cluster: LocalCluster, broker: int) -> bool:
    """Through a Kafka client: does this broker answer a Metadata request within a second?"""
    try:
        with AdminClient(cluster.brokers[broker].bootstrap, timeout_s=1) as client:
            client.refresh()
        return True
    except AdminError:
        return False


def stays_fresh(driver: Any, snapshots: int = 2) -> None:
    """The page gets ``snapshots`` new snapshots and its header never calls the one shown stale
    meanwhile (it does once that is STALE_S old: the cluster is slow to answer)."""
    stale: list[str] = []

    def newer(seen: float) -> bool:
        if "stale" in (prop(driver, "#status", "className") or ""):
            stale.append(prop(driver, "#status", "textContent"))
        return taken_at(driver) > seen

    for _ in range(snapshots):
        seen = taken_at(driver)
        wait_for(functools.partial(newer, seen), 3 * STALE_S, "a newer snapshot on the page")
    assert not stale, stale
    assert time.time() - taken_at(driver) < STALE_S


def test_stopped_then_killed_broker(cluster: LocalCluster, console: ConsoleProcess, browser: Any, victim: int,
                                    workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    others = sorted(set(cluster.brokers) - {victim})
    browser.get(console.url + "/cluster")
    wait_for(lambda: states(browser) == dict.fromkeys(cluster.brokers, "alive"), 30, "every broker alive")
    assert taken_at(browser) > 0

    # Slow: stopped, it accepts connections and answers nothing.
    pid = cluster.pid(victim)
    pause(pid)
    try:
        stopped = time.monotonic()
        wait_for(lambda: state(browser, victim) == "not answering", 20, f"broker {victim} not answering")
        with capsys.disabled():
            print(f"\nbroker {victim} shown as not answering {time.monotonic() - stopped:.1f} s after SIGSTOP")
        assert not answers(cluster, victim)  # a Kafka client gets no answer either
        assert "timed out" in prop(browser, f"#broker-{victim}", "textContent")
        # The page keeps working: new snapshots keep coming, fresh, with the other brokers answering.
        # (The snapshot that first showed the stopped broker asked it first and waited the whole
        # timeout; from the next one on it is asked last.)
        wait_new_snapshot(browser)
        stays_fresh(browser)
        assert {b: s for b, s in states(browser).items() if b != victim} == dict.fromkeys(others, "alive")
        assert state(browser, victim) == "not answering"
        screenshot(browser, workdir, "cluster-broker-stopped", capsys)

        # Another page, opened while the broker is stopped, loads with the controller's answers.
        browser.get(console.url + "/reassignments")
        wait_css(browser, "#moves")
        assert "No reassignment in flight" in prop(browser, "#moves", "textContent")
        stays_fresh(browser, 1)
        screenshot(browser, workdir, "reassignments-broker-stopped", capsys)
        assert not answers(cluster, victim)  # it was stopped all along: the pages above saw it so
    finally:
        resume(pid)
    browser.get(console.url + "/cluster")
    wait_for(lambda: states(browser) == dict.fromkeys(cluster.brokers, "alive"), 30, f"broker {victim} back")
    assert answers(cluster, victim)
    screenshot(browser, workdir, "cluster-broker-resumed", capsys)

    # Down: killed, its connections are refused at once; Kafka lists it until its session ends.
    cluster.brokers[victim].kill9()
    wait_for(lambda: state(browser, victim) in ("not answering", "down"), 20, f"broker {victim} not answering")
    assert not answers(cluster, victim)
    wait_for(lambda: state(browser, victim) == "down", ZK_SESSION_MS / 1000 + 30, f"broker {victim} down")
    _controller, registered = cluster.metadata()
    assert registered == set(others)  # Kafka agrees: the broker is no longer registered
    assert "not registered" in prop(browser, f"#broker-{victim}", "textContent")
    stays_fresh(browser, 1)
    assert {b: s for b, s in states(browser).items() if b != victim} == dict.fromkeys(others, "alive")
    screenshot(browser, workdir, "cluster-broker-down", capsys)
