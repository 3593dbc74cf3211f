"""The console's Plan, Topics heat map and Quotas pages in a real browser against a real cluster
(issue 20's second slice).

Four brokers with metrics endpoints; a topic on brokers 1-3 only, so broker 4 is new and empty.
The Plan page proposes moves onto broker 4; on Spark (a console of its own, whose JVM starts with
the first Spark plan, serves the next one and ends with the console) the plan is the in-process
engine's, move for move and byte for byte; "Execute with throttle" starts a throttled
reassignment whose progress shows on the Reassignments page and completes; "Elect preferred
leaders" then leaves every partition led by its first replica (checked with Metadata). A
``--read-only`` console plans but shows no Execute button. Screenshots of each page go to the
module's temporary directory and are named in the output.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_support import LocalCluster, run_cli, start_cluster, wait_for
from confluent_kafka import Producer
from console_support import (
    ConsoleProcess,
    attrs,
    click,
    css,
    descendants,
    prop,
    running,
    screenshot,
    text,
    wait_css,
)

from headwater.admin.client import AdminClient
from headwater.admin.local import free_port

pytestmark = pytest.mark.slow

TOPIC = "planned"
PARTITIONS = 6
PARTITION_BYTES = 600 * 1024
THROTTLE = 200_000  # B/s: one partition of the three moving onto broker 4 in one answer, the rest in about 6 s
SPARK_PLAN_S = 240  # the first Spark plan starts a JVM on a machine that also runs the cluster and chromium
# The console's modules, its app and its poller, as `headwater console` loads them: pyspark stays out.
NO_PYSPARK = """
import sys
from headwater.admin.security import PLAINTEXT
from headwater.console.app import create_app
from headwater.console.csrf import CsrfGuard
from headwater.console.reader import Poller
import headwater.cli, headwater.console.cli
poller = Poller("127.0.0.1:1", PLAINTEXT)
create_app(poller, CsrfGuard())
poller.stop()
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "py4j"))
assert not loaded, loaded
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("console-plan")


@pytest.fixture(scope="module")
def cluster(workdir: Path) -> Iterator[LocalCluster]:
    c = start_cluster(workdir / "cluster", 4, broker_props=lambda _b, _p: {"metrics.port": str(free_port())})
    try:
        layout = ["1:2", "2:3", "3:1"] * (PARTITIONS // 3)
        run_cli("topics", "--bootstrap-server", c.bootstrap, "--create", "--topic", TOPIC,
                "--replica-assignment", ",".join(layout))
        producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 20, "log_level": 3})
        value = b"x" * 10240
        for i in range(PARTITIONS * PARTITION_BYTES // len(value)):
            while True:
                try:
                    producer.produce(TOPIC, value=value, partition=i % PARTITIONS)
                    break
                except BufferError:
                    producer.poll(0.1)
        assert producer.flush(120) == 0
        c.wait_full_isr([TOPIC], PARTITIONS)
        run_cli("configs", "--bootstrap-server", c.bootstrap, "--alter", "--entity-type", "users",
                "--entity-name", "alice", "--add-config", "controller_mutation_rate=10")
        yield c
    finally:
        c.stop()




def partitions(cluster: LocalCluster) -> dict[int, tuple[list[int], int]]:
    """Through a Kafka client: each partition's replicas and leader in a broker's Metadata."""
    with AdminClient(cluster.bootstrap) as client:
        meta = client.refresh([TOPIC])
    return {p.partition_index: (list(p.replica_nodes), p.leader_id) for t in meta.topics for p in t.partitions}


def plan_for_broker_4(driver: Any, url: str, goal: str = "add-brokers", engine: str = "auto",
                      timeout_s: float = 60) -> None:
    """Plan ``goal`` (add-brokers or remove-brokers) for broker 4 on the page with ``engine``; wait
    for its moves."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    driver.get(url + "/plan")
    wait_css(driver, "#plan-form")
    wait_for(lambda: "brokers: 1, 2, 3, 4" in (driver.find_element(By.ID, "plan-run").get_attribute("title") or ""),
             30, "the first snapshot on the Plan page")
    Select(driver.find_element(By.ID, "plan-goal")).select_by_value(goal)
    Select(driver.find_element(By.ID, "plan-engine-choice")).select_by_value(engine)
    driver.find_element(By.ID, "plan-brokers").send_keys("4")
    driver.find_element(By.ID, "plan-run").click()
    wait_css(driver, "#plan-moves tr.plan-move", timeout_s)


def jvms(pid: int) -> set[int]:
    """The Java processes below ``pid``: Spark's driver JVM, once a session is made."""
    return {child for child, command in descendants(pid).items() if "java" in command.split(" ", 1)[0]}


def test_heat_map_and_quotas_pages(console: ConsoleProcess, browser: Any, workdir: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    browser.get(console.url + "/topics")
    wait_css(browser, "#heat-replicas")
    cells = {c["data-broker"]: c for c in attrs(browser, "#heat-replicas td.heat", "data-broker", "data-value", "class")}
    assert cells["4"]["data-value"] == "0"  # the new broker: an empty column
    assert all(cells[b]["data-value"] == str(PARTITIONS * 2 // 3) for b in "123"), cells
    assert "heat-10" in (cells["1"]["class"] or "")
    wait_for(lambda: int(css(browser, '#heat-bytes td.heat[data-broker="1"]')[0].get_attribute("data-value"))
             >= 4 * PARTITION_BYTES, 30, "bytes per broker in the heat map")
    screenshot(browser, workdir, "topics-heatmap", capsys)

    browser.get(console.url + "/quotas")
    wait_css(browser, "#quotas tr.quota")
    quota = text(browser, "#quotas tr.quota")
    assert "alice" in quota and "10" in quota, quota
    screenshot(browser, workdir, "quotas", capsys)


def test_plan_on_spark_is_the_in_process_plan(cluster: LocalCluster, browser: Any, workdir: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    checked = subprocess.run([sys.executable, "-c", NO_PYSPARK], capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stderr
    proc = ConsoleProcess(cluster.bootstrap, workdir / "console-spark.log", "--spark-master", "local[2]")
    spark_jvms: set[int] = set()
    try:
        assert not jvms(proc.proc.pid), "Spark started before any plan asked for it"
        token = proc.token()
        goal = {"goal": "add-brokers", "brokers": [4]}
        status, auto = proc.post("/api/plan", goal, token)
        assert status == 200, auto
        assert auto["engine"]["name"] == "local" and "12 replicas" in auto["engine"]["why"]  # small: in-process
        assert not jvms(proc.proc.pid)
        status, local = proc.post("/api/plan", goal | {"engine": "local"}, token)
        assert status == 200, local
        status, spark = proc.post("/api/plan", goal | {"engine": "spark"}, token, timeout_s=SPARK_PLAN_S)
        assert status == 200, spark
        assert spark["engine"]["name"] == "spark" and spark["engine"]["master"] == "local[2]"
        assert "spark_start_s" in spark["engine"]["timings_s"]  # this plan started Spark
        spark_jvms = jvms(proc.proc.pid)
        assert len(spark_jvms) == 1, descendants(proc.proc.pid)
        with capsys.disabled():
            print(f"\nSpark: start-up {spark['engine']['timings_s']['spark_start_s']} s, "
                  f"plan {spark['engine']['timings_s']['plan_s']} s; in-process plan {local['engine']['timings_s']['plan_s']} s")
        # The planner is deterministic: the same cluster and goal give the same plan on either engine.
        assert spark["moves"] and spark["moves"] == local["moves"]
        assert spark["summary"] == local["summary"] and spark["per_broker"] == local["per_broker"]
        files = {name: proc.get_json(f"/api/plan/{view['id']}/reassignment.json")
                 for name, view in (("local", local), ("spark", spark))}
        assert files["spark"] == files["local"] and files["spark"]["partitions"]

        # On the page: Spark chosen, run on the session the first Spark plan made (same JVM, no start-up).
        plan_for_broker_4(browser, proc.url, engine="spark", timeout_s=SPARK_PLAN_S)
        assert prop(browser, "#plan-engine-ran", "textContent") == "Spark"
        shown = prop(browser, "#plan-engine", "textContent")
        assert "local[2]" in shown and "chosen on the page" in shown and "start-up" not in shown, shown
        assert len(css(browser, "#plan-moves tr.plan-move")) == len(spark["moves"])
        assert jvms(proc.proc.pid) == spark_jvms
        screenshot(browser, workdir, "plan-spark", capsys)
    finally:
        proc.stop()
    # Stopped with the console: no JVM left behind.
    wait_for(lambda: not any(running(pid) for pid in spark_jvms), 30, "Spark's JVM to end with the console")


def test_plan_execute_and_elect_from_the_page(cluster: LocalCluster, console: ConsoleProcess, browser: Any,
                                              workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from selenium.webdriver.common.by import By

    plan_for_broker_4(browser, console.url)
    moves = css(browser, "#plan-moves tr.plan-move")
    assert moves and all("→" in m.text for m in moves)
    assert all("4" in m.find_elements(By.TAG_NAME, "td")[2].text for m in moves), [m.text for m in moves]
    assert css(browser, "#chart-replicas svg rect.after") and css(browser, "#chart-leaders svg rect.after")
    href = browser.find_element(By.ID, "plan-download").get_attribute("href")
    downloaded = console.get_json(href.removeprefix(console.url))
    assert downloaded["version"] == 1 and len(downloaded["partitions"]) == len(moves)
    assert all(4 in p["replicas"] for p in downloaded["partitions"])
    screenshot(browser, workdir, "plan", capsys)

    rate = browser.find_element(By.ID, "plan-throttle")
    rate.clear()
    rate.send_keys(str(THROTTLE))
    browser.find_element(By.ID, "plan-execute").click()
    browser.switch_to.alert.accept()
    wait_css(browser, "#plan-progress .bar", 30)

    # The moves show on the Reassignments page, throttled, and complete.
    browser.get(console.url + "/reassignments")
    wait_css(browser, "#moves tr.move", 30)
    move = text(browser, "#moves tr.move")
    assert "throttled" in move, move
    screenshot(browser, workdir, "plan-executing", capsys)
    wait_for(lambda: not css(browser, "#moves tr.move"), 120, "the plan's moves to finish")
    wait_for(lambda: css(browser, "#overall .bar")[0].get_attribute("data-share") == "100.0", 30, "100 %")
    after = partitions(cluster)
    targets = {p["partition"]: p["replicas"] for p in downloaded["partitions"]}
    assert all(after[p][0] == r for p, r in targets.items()), (after, targets)

    # Back on the Plan page: the executed plan is done; elect the preferred leaders.
    browser.get(console.url + "/plan")
    wait_css(browser, "#plan-elect:not([disabled])", 60)
    with capsys.disabled():
        print(f"\nnot led by their preferred leader before the election: "
              f"{sorted(p for p, (r, leader) in after.items() if leader != r[0])}")
    click(browser, "#plan-elect:not([disabled])")  # the status area around it is rebuilt as the page polls
    wait_for(lambda: all(leader == r[0] for r, leader in partitions(cluster).values()), 60,
             "every partition led by its preferred leader")
    wait_for(lambda: "Every partition is led by its preferred leader" in text(browser, "#plan-exec"), 30,
             "the page to show the preferred leaders")
    screenshot(browser, workdir, "plan-elected", capsys)
    # verify's clean-up, which the election request runs first: the throttle goes once the moves are
    # done. Waited for: the leaders can already be the preferred ones before that request ends.
    def throttle_left() -> str:
        return run_cli("configs", "--bootstrap-server", cluster.bootstrap, "--describe", "--entity-type", "brokers",
                       "--entity-name", "4")

    wait_for(lambda: "throttled.rate" not in throttle_left(), 30, "the throttle on broker 4 to be cleared")


def test_read_only_console_plans_without_execute(cluster: LocalCluster, browser: Any, workdir: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    proc = ConsoleProcess(cluster.bootstrap, workdir / "console-ro.log", "--read-only")
    try:
        # Whichever way broker 4 stands (empty, or filled by the test above), a plan for it has moves.
        holds_replicas = any(4 in replicas for replicas, _leader in partitions(cluster).values())
        plan_for_broker_4(browser, proc.url, "remove-brokers" if holds_replicas else "add-brokers")
        assert not css(browser, "#plan-execute") and not css(browser, "button.write")
        assert css(browser, "#plan-download")
        screenshot(browser, workdir, "plan-read-only", capsys)
        view = proc.post("/api/plan", {"goal": "rebalance"}, proc.token())[1]
        status, answer = proc.post("/api/plan/execute", {"id": view["id"], "throttle": THROTTLE}, proc.token())
        assert status == 403, answer
    finally:
        proc.stop()
