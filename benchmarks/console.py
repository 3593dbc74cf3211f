"""The operator console with 10,000 partitions moving (issue #20), against ``reassign --verify --watch``.

Acceptance: "with 10,000 partitions moving, the Reassignments page's first render < 2 s and its live
updates cost < 0.1 core on the console process, measured against the ``reassign --verify --watch``
loop on the same cluster in the same run."

Four brokers (with their metrics endpoints) and ZooKeeper, as processes. ``--partitions`` partitions
(RF 2, topics of ``--per-topic``) on brokers 1-3, each loaded with ``--messages`` of ``--value-bytes``;
then one ``headwater reassign --execute --throttle`` moves every partition's second replica to broker
4. The throttle is low enough that the moves stay in flight for the whole run: the follower's
throttle lets one partition copy at a time, so a few complete while the rest wait their turn (each
JSON line says how many were in flight, queued by the controller's
``reassignment.max.concurrent.moves.per.broker`` (``--max-moves``, unlimited by default), and copying).

Then ``headwater console --bootstrap-server ... --metrics ...`` (default ``--interval 1``) as a
process of its own, and Debian's chromium through chromedriver (selenium, headless):

* ``first_render``: ``--renders`` times, a fresh navigation to ``/reassignments``; the time from the
  navigation's start (``performance.timeOrigin``) until the page says "N partitions moving" and
  its table holds the page of moves it lists (``data-shown``, 500 at most) and that frame is painted (recorded in the page by a
  ``MutationObserver``, then ``requestAnimationFrame`` and a task after it). Median and max; goal < 2 s.
* ``live_update_cost``: with the page open (its event stream connected) the console's CPU
  (utime + stime of every thread, ``/proc/<pid>/stat``) over ``--window-s``, in cores; at the same
  time, over the same window, a ``headwater reassign --verify --watch`` process following the same
  plan (stdout to a file: its plain progress lines, one poll a second) started ``--warmup-s`` before.
  Both run at once, so both see the same cluster and the same load. Goal: console < 0.1 core.
  Also reported: the browser's CPU, the console's updates (snapshot versions) in the window, seconds
  and console CPU per update (the poller waits longer than ``--interval`` after a read that cost
  more than its CPU share, ``reader.POLL_CPU_SHARE``), the size of one snapshot, and the console's
  CPU with no page open over another window (``console_idle_cores``: the poller alone).
  ``--churn-per-s N`` cancels N moves a second during the window, so that the controller's list and
  Metadata change between any two reads (by default almost nothing changes from one second to the
  next, which is what the console's caches are for).
* With ``--baseline-src DIR`` (a copy of another revision's source tree), ``console_ab``: that
  revision's console and this one, each with the page open in turn, over ``--ab-rounds`` rounds of
  alternating windows (both run throughout); the ratio new / old per round.

One JSON line per measurement on stdout; progress on stderr.

    .venv/bin/python benchmarks/console.py [--partitions 10000] [--window-s 60] [--renders 5]
    .venv/bin/python benchmarks/console.py --renders 1 --idle-window-s 0 --churn-per-s 5
    .venv/bin/python benchmarks/console.py --skip-live --renders 1 --baseline-src DIR   # A/B

Run it under ``flock /tmp/cluster.lock`` on a shared machine; it takes 3-6 minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration" / "cluster"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration" / "console"))

from cluster_support import LocalCluster, run_cli, start_cluster, wait_for
from confluent_kafka import Producer
from console_support import chromium
from reassign_scale import create, online

from headwater.admin.client import AdminClient
from headwater.admin.local import free_port
from headwater.admin.reassign import Cluster

ROOT = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")
FIRST_RENDER_GOAL_S = 2.0
LIVE_COST_GOAL_CORES = 0.1

# Installed in every page before its own script: records when the moves table first has the rows
# it lists (dom_ms), and when the frame after it has been painted (painted_ms).
RENDER_PROBE = """
(() => {
  const done = () => {
    const table = document.getElementById('moves');
    const rows = document.querySelectorAll('#moves tr.move').length;
    const p = document.querySelector('#content p.muted');
    const m = p && /^(\\d+) partitions? moving/.exec(p.textContent);
    // The page lists one page of the moves (data-shown of them) under the counts of all.
    return rows > 0 && m && table && rows === Number(table.dataset.shown) ? rows : 0;
  };
  const start = () => {
    const content = document.getElementById('content');
    const obs = new MutationObserver(() => {
      const rows = done();
      if (!rows || window.__hwRender) return;
      window.__hwRender = {dom_ms: performance.now(), rows};
      obs.disconnect();
      requestAnimationFrame(() => setTimeout(() => { window.__hwRender.painted_ms = performance.now(); }, 0));
    });
    obs.observe(content, {childList: true});
  };
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start); else start();
})();
"""


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def emit(record: dict[str, Any]) -> None:
    print(json.dumps(record), flush=True)


# --- CPU from /proc -----------------------------------------------------------------------------


def cpu_s(pid: int) -> float:
    """utime + stime of the whole process (every thread), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def tree_cpu_s(pids: list[int]) -> dict[int, float]:
    out = {}
    for p in pids:
        with contextlib.suppress(OSError):
            out[p] = cpu_s(p)
    return out


# --- the cluster --------------------------------------------------------------------------------


def load(bootstrap: str, sizes: dict[str, int], messages: int, value_bytes: int) -> None:
    """``messages`` values of ``value_bytes`` into every partition, one round over all partitions at a
    time (so each partition's log has ``messages`` batches)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 50,
                         "queue.buffering.max.messages": 1_000_000, "log_level": 3})
    value = os.urandom(value_bytes)
    for _ in range(messages):
        for topic, n in sizes.items():
            for p in range(n):
                while True:
                    try:
                        producer.produce(topic, value=value, partition=p)
                        break
                    except BufferError:
                        producer.poll(0.05)
            producer.poll(0)
        assert producer.flush(300) == 0


class ConsoleProc:
    """``headwater console`` from a source tree (this one, or ``--baseline-src``), stopped by its PID."""

    def __init__(self, src: Path, bootstrap: str, metrics: list[str], log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = log_path.open("wb")
        env = {**os.environ, "PYTHONPATH": str(src)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "headwater", "console", "--bootstrap-server", bootstrap,
             "--listen", f"127.0.0.1:{self.port}", *[a for m in metrics for a in ("--metrics", m)]],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=src, env=env)
        self.pid = self.proc.pid
        try:
            wait_for(lambda: self.version() > 0, 180, f"the console from {src} to read the cluster", 0.5)
        except BaseException:
            self.stop()
            raise

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(self.url + path, timeout=60) as resp:
            body: bytes = resp.read()
            return body

    def version(self) -> int:
        try:
            return int(json.loads(self.get("/healthz"))["version"])
        except OSError:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the console exited with {self.proc.returncode}") from None
            return 0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        with contextlib.suppress(OSError):
            self._log.close()


def moves_summary(snapshot: dict[str, Any]) -> dict[str, int]:
    moves = snapshot["reassignments"]["moves"]
    return {"in_flight": len(moves), "queued": sum(1 for m in moves if m["queued"]),
            "with_adding_replica": sum(1 for m in moves if m["adding"])}


def copying(before: dict[str, Any], after: dict[str, Any]) -> int:
    """Moves whose adding replicas gained bytes between two snapshots."""
    was = {(m["topic"], m["partition"]): m["copied"] for m in before["reassignments"]["moves"]}
    now = {(m["topic"], m["partition"]): m["copied"] for m in after["reassignments"]["moves"]}
    ended = set(was) - set(now)
    return len(ended) + sum(1 for tp, c in now.items() if c > was.get(tp, c))


# --- the browser --------------------------------------------------------------------------------


def first_render(driver: Any, url: str, timeout_s: float = 120) -> dict[str, float]:
    driver.get("about:blank")
    driver.get(url + "/reassignments")
    deadline = time.monotonic() + timeout_s
    while True:
        found = driver.execute_script("return window.__hwRender || null")
        if found and "painted_ms" in found:
            return {"dom_s": found["dom_ms"] / 1000, "painted_s": found["painted_ms"] / 1000, "rows": found["rows"]}
        if time.monotonic() > deadline:
            raise RuntimeError(f"the moves table was not rendered within {timeout_s:.0f} s")
        time.sleep(0.1)


@contextlib.contextmanager
def browser(workdir: Path) -> Iterator[Any]:
    driver = chromium(workdir / "chromium-profile")
    try:
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": RENDER_PROBE})
        driver.set_script_timeout(60)
        yield driver
    finally:
        driver.quit()


def browser_pids(driver: Any) -> list[int]:
    return descendants(driver.service.process.pid)


class Churn:
    """Cancels ``per_s`` moves a second (AlterPartitionReassignments with null replicas) while it runs:
    the controller's list and the partitions' replicas then change between any two polls, as when
    moves end all the time, instead of staying byte for byte the same."""

    def __init__(self, bootstrap: str, partitions: list[tuple[str, int]], per_s: int) -> None:
        self.cancelled = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(bootstrap, partitions, per_s), daemon=True)
        self._thread.start()

    def _run(self, bootstrap: str, partitions: list[tuple[str, int]], per_s: int) -> None:
        with AdminClient(bootstrap, timeout_s=60) as client:
            cluster = Cluster(client)
            while not self._stop.is_set() and self.cancelled < len(partitions):
                started = time.monotonic()
                batch = partitions[self.cancelled:self.cancelled + per_s]
                cluster.alter(dict.fromkeys(batch))
                self.cancelled += len(batch)
                self._stop.wait(max(0.0, 1.0 - (time.monotonic() - started)))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(60)
        return self.cancelled


def window(console: ConsoleProc, seconds: float, others: dict[str, list[int]]) -> dict[str, Any]:
    """CPU seconds of the console and of each group of ``others`` over ``seconds``, and the console's updates."""
    v0 = console.version()
    c0 = cpu_s(console.pid)
    o0 = {name: tree_cpu_s(pids) for name, pids in others.items()}
    t0 = time.monotonic()
    time.sleep(seconds)
    c1 = cpu_s(console.pid)
    o1 = {name: tree_cpu_s(pids) for name, pids in others.items()}
    wall = time.monotonic() - t0
    v1 = console.version()
    out: dict[str, Any] = {"window_s": round(wall, 1), "console_cores": round((c1 - c0) / wall, 3),
                           "updates": v1 - v0, "s_per_update": round(wall / (v1 - v0), 2) if v1 > v0 else None,
                           "console_cpu_s_per_update": round((c1 - c0) / (v1 - v0), 3) if v1 > v0 else None}
    for name in others:
        spent = sum(o1[name][p] - o0[name][p] for p in o1[name] if p in o0[name])
        out[f"{name}_cores"] = round(spent / wall, 3)
    return out


# --- the run ------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--per-topic", type=int, default=1000)
    ap.add_argument("--messages", type=int, default=2, help="values per partition (each its own batch)")
    ap.add_argument("--value-bytes", type=int, default=1000)
    ap.add_argument("--throttle", type=int, default=100, help="reassign --throttle, bytes/s")
    ap.add_argument("--max-moves", type=int, default=None,
                    help="reassignment.max.concurrent.moves.per.broker (default: unlimited)")
    ap.add_argument("--renders", type=int, default=5)
    ap.add_argument("--window-s", type=float, default=60.0)
    ap.add_argument("--idle-window-s", type=float, default=30.0, help="0: no window without the page")
    ap.add_argument("--warmup-s", type=float, default=10.0, help="the watch process's start before the window")
    ap.add_argument("--baseline-src", type=Path, default=None,
                    help="another revision's source tree: alternate windows of its console and this one")
    ap.add_argument("--ab-rounds", type=int, default=2)
    ap.add_argument("--ab-window-s", type=float, default=30.0)
    ap.add_argument("--skip-live", action="store_true", help="only the first renders (and the A/B rounds)")
    ap.add_argument("--churn-per-s", type=int, default=0,
                    help="during the live window, cancel this many moves a second (the list changes every poll)")
    args = ap.parse_args()
    # A SIGTERM (timeout, Ctrl-C in a wrapper) must still stop the cluster and the browser: exit
    # through the finally blocks instead of dying where we stand.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    n_topics = (args.partitions + args.per_topic - 1) // args.per_topic
    topics = [f"move-{i:03d}" for i in range(n_topics)]
    sizes = {t: min(args.per_topic, args.partitions - i * args.per_topic) for i, t in enumerate(topics)}
    common: dict[str, Any] = {"partitions": args.partitions, "rf": 2, "brokers": 4,
                              "bytes_per_partition": args.messages * args.value_bytes, "throttle_b_s": args.throttle}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hw-console-bench-") as tmp:
        work = Path(tmp)
        props = {"default.replication.factor": "2", "zookeeper.session.timeout.ms": "30000",
                 "replica.lag.time.max.ms": "30000"}
        cluster: LocalCluster = start_cluster(work / "cluster", 4, props,
                                              broker_props=lambda _b, _p: {"metrics.port": str(free_port())})
        procs: list[Any] = []
        try:
            controller = cluster.controller_id()
            target = max(b for b in cluster.brokers if b != controller)
            others = sorted(b for b in cluster.brokers if b != target)
            plan: dict[tuple[str, int], list[int]] = {}
            with AdminClient(cluster.bootstrap, timeout_s=600) as client:
                t = time.monotonic()
                for name, n in sizes.items():
                    assignment = [[others[p % 3], others[(p + 1) % 3]] for p in range(n)]
                    create(client, name, assignment)
                    plan.update({(name, p): [r[0], target] for p, r in enumerate(assignment)})
                wait_for(lambda: online(client, topics) == args.partitions, 300, "every partition online", 1.0)
                say(f"{args.partitions} partitions online in {time.monotonic() - t:.1f} s")
            t = time.monotonic()
            load(cluster.bootstrap, sizes, args.messages, args.value_bytes)
            say(f"loaded {args.messages} x {args.value_bytes} B into each partition in {time.monotonic() - t:.1f} s")
            if args.max_moves is not None:
                run_cli("configs", "--bootstrap-server", cluster.bootstrap, "--alter", "--entity-type", "brokers",
                        "--entity-default", "--add-config", f"reassignment.max.concurrent.moves.per.broker={args.max_moves}")
            plan_path = work / "plan.json"
            plan_path.write_text(json.dumps({"version": 1, "partitions": [
                {"topic": t_, "partition": p, "replicas": r} for (t_, p), r in sorted(plan.items())]}))
            t = time.monotonic()
            run_cli("reassign", "--bootstrap-server", cluster.bootstrap, "--execute", "--throttle", str(args.throttle),
                    "--reassignment-json-file", str(plan_path))
            say(f"reassignment of {len(plan)} partitions to broker {target} started in {time.monotonic() - t:.1f} s "
                f"(throttle {args.throttle} B/s)")

            metrics = [f"http://127.0.0.1:{b.props['metrics.port']}/metrics" for b in cluster.brokers.values()]
            t = time.monotonic()
            console = ConsoleProc(ROOT, cluster.bootstrap, metrics, work / "console.log")
            procs.append(console)
            say(f"console up (first snapshot) in {time.monotonic() - t:.1f} s on {console.url}")
            raw = console.get("/api/snapshot")
            snap0 = json.loads(raw)
            common["snapshot_bytes"] = len(raw)
            common["moves_at_start"] = moves_summary(snap0)
            say(f"moves: {common['moves_at_start']}, one snapshot {len(raw) / 1e6:.1f} MB")

            with browser(work) as driver:
                renders = []
                for i in range(args.renders):
                    r = first_render(driver, console.url)
                    renders.append(r)
                    say(f"first render {i + 1}: {r['painted_s']:.2f} s ({r['rows']} rows; DOM at {r['dom_s']:.2f} s)")
                painted = [r["painted_s"] for r in renders]
                median = statistics.median(painted)
                emit({"benchmark": "console", "measure": "first_render", **common,
                      "rows": renders[-1]["rows"], "runs": len(renders),
                      "median_s": round(median, 3), "max_s": round(max(painted), 3),
                      "min_s": round(min(painted), 3), "dom_median_s": round(statistics.median(r["dom_s"] for r in renders), 3),
                      "goal_s": FIRST_RENDER_GOAL_S, "pass": max(painted) < FIRST_RENDER_GOAL_S,
                      "load_avg_1m": round(os.getloadavg()[0], 2)})

                if not args.skip_live:
                    # The live window: the page open (its event stream connected), and the watch loop.
                    first_render(driver, console.url)
                    watch_out = (work / "watch.out").open("wb")
                    watch = subprocess.Popen(
                        [sys.executable, "-m", "headwater", "reassign", "--bootstrap-server", cluster.bootstrap,
                         "--verify", "--watch", "--reassignment-json-file", str(plan_path)],
                        stdout=watch_out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT)
                    procs.append(watch)
                    time.sleep(args.warmup_s)
                    assert watch.poll() is None, f"the watch loop exited: {(work / 'watch.out').read_text()[-2000:]}"
                    before = json.loads(console.get("/api/snapshot"))
                    # From the end of the plan: the moves the page lists first stay (the probe's rows).
                    churn = Churn(cluster.bootstrap, sorted(plan, reverse=True), args.churn_per_s) \
                        if args.churn_per_s else None
                    w = window(console, args.window_s, {"watch": [watch.pid], "browser": browser_pids(driver)})
                    if churn is not None:
                        w["cancelled_in_window"] = churn.stop()
                    after = json.loads(console.get("/api/snapshot"))
                    watch_lines = (work / "watch.out").read_text().splitlines()
                    watch.terminate()
                    watch.wait(15)
                    watch_out.close()
                    common["moves_at_end"] = moves_summary(after)
                    emit({"benchmark": "console", "measure": "live_update_cost", **common,
                          "moves_in_window": {**moves_summary(before), "copying": copying(before, after)},
                          "churn_per_s": args.churn_per_s,
                          "interval_s": 1.0, "watch_interval_s": 1.0, "watch_output": "plain (stdout to a file)",
                          "together": "console (page open) and watch measured at once, same window",
                          **w, "watch_lines": len(watch_lines),
                          "console_over_watch": round(w["console_cores"] / w["watch_cores"], 2) if w["watch_cores"] else None,
                          "goal_cores": LIVE_COST_GOAL_CORES, "pass": w["console_cores"] < LIVE_COST_GOAL_CORES,
                          "load_avg_1m": round(os.getloadavg()[0], 2)})
                    say(f"live window: {w}")

                    if args.idle_window_s > 0:
                        driver.get("about:blank")
                        time.sleep(2)
                        idle = window(console, args.idle_window_s, {})
                        emit({"benchmark": "console", "measure": "console_idle_cost", **common,
                              "note": "no page open: the poller alone", **idle})
                        say(f"idle window: {idle}")

                if args.baseline_src is not None:
                    # One console at a time: the baseline one is started for its window and stopped
                    # after it (with 10,000 moves the old code kept a core busy); this one runs throughout.
                    rounds = []
                    for r in range(args.ab_rounds):
                        got: dict[str, Any] = {}
                        for name in (("old", "new") if r % 2 == 0 else ("new", "old")):
                            if name == "old":
                                t = time.monotonic()
                                c = ConsoleProc(args.baseline_src.resolve(), cluster.bootstrap, metrics,
                                                work / f"console-base-{r}.log")
                                procs.append(c)
                                say(f"baseline console up in {time.monotonic() - t:.1f} s")
                            else:
                                c = console
                            render = first_render(driver, c.url)
                            time.sleep(2)
                            got[name] = {**window(c, args.ab_window_s, {}), "first_render_s": round(render["painted_s"], 3)}
                            if name == "old":
                                driver.get("about:blank")
                                c.stop()
                        o, n = got["old"], got["new"]
                        rounds.append({"order": "old,new" if r % 2 == 0 else "new,old",
                                       "old_cores": o["console_cores"], "new_cores": n["console_cores"],
                                       "old_updates": o["updates"], "new_updates": n["updates"],
                                       "old_first_render_s": o["first_render_s"], "new_first_render_s": n["first_render_s"],
                                       "new_over_old": round(n["console_cores"] / o["console_cores"], 3) if o["console_cores"] else None})
                        say(f"A/B round {r + 1}: {rounds[-1]}")
                    ratios = [x["new_over_old"] for x in rounds if x["new_over_old"] is not None]
                    emit({"benchmark": "console", "measure": "console_ab", **common, "baseline_src": str(args.baseline_src),
                          "window_s": args.ab_window_s, "rounds": rounds,
                          "new_over_old_median": statistics.median(ratios) if ratios else None,
                          "note": "cores per window with the page open; updates = snapshots made in the window "
                                  "(the old code's poll takes longer than the 1 s interval)"})
        finally:
            for p in reversed(procs):
                with contextlib.suppress(Exception):
                    if isinstance(p, ConsoleProc):
                        p.stop()
                    elif p.poll() is None:
                        p.terminate()
                        try:
                            p.wait(15)
                        except subprocess.TimeoutExpired:
                            p.kill()
            cluster.stop()
    say(f"done in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
