"""``headwater demo``: the seeds' story on a local cluster of six brokers, then eight.

1. A topic on brokers {1,2,3} with a live acks=all producer.
2. KIP-455: its partitions move to {4,5,6} under a throttle, each controller phase (RS, AR, RR,
   leader, ISR) shown as ZooKeeper records it, with the copy's progress and ETA.
3. KIP-455's cancel: a second move, cancelled mid-copy, returns to its original replicas.
4. KIP-599: a burst of CreateTopics over the controller mutation quota, refused by a strict client's
   protocol version and throttled for a permissive one.
5. Two brokers join; the planner on Spark proposes a rebalance, which is executed with a throttle and
   ended by the preferred-replica leader election.
6. Every acknowledged message is read back.

Everything goes through the Kafka protocol with real clients and headwater's own tools, as an
application and an operator would; ZooKeeper, the brokers and the console are separate processes
that the demo starts and stops by PID.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.metadata import MetadataRequest
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from headwater.admin.client import AdminClient, AdminError
from headwater.admin.cluster import start_cluster, start_new_broker, stop_cluster
from headwater.admin.local import free_port, free_port_range
from headwater.admin.reassign import (
    Cluster,
    ToolError,
    copy_progress,
    format_reassignment_json,
    replica_sizes,
)
from headwater.demo.phases import PhaseWatcher, Row, fmt, phase, phase_table
from headwater.demo.traffic import Ledger, LiveProducer, missing, preload

TOPIC = "demo-events"
PARTITIONS = 6
CANCEL_TOPIC = "demo-cancel"
FIRST_BROKERS = 6
ADDED_BROKERS = 2
LOAD_MB = 6  # per partition of TOPIC, so the move has something to copy
CANCEL_LOAD_MB = 8
MOVE_THROTTLE = 4_000_000  # bytes/s per broker, for step 2
CANCEL_THROTTLE = 1_000_000  # slow enough to cancel mid-copy
PLAN_THROTTLE = 10_000_000
QUOTA_RATE = 2  # controller_mutation_rate (partitions/s): a burst of 2 x 11 windows x 1 s = 22
QUOTA_TOPICS = 8  # of 4 partitions each: 32, over the burst

TopicPartition = tuple[str, int]


def _rotate(brokers: list[int], by: int) -> list[int]:
    return brokers[by % len(brokers):] + brokers[:by % len(brokers)]


class Demo:
    def __init__(self, root: Path, console: Console) -> None:
        self.root = root
        self.console = console
        self.ledger = Ledger()
        self.checks: list[tuple[str, bool]] = []
        self.console_proc: subprocess.Popen[bytes] | None = None
        self.console_url = ""
        self.bootstrap = ""
        self.zookeeper = ""

    # --- plumbing ---------------------------------------------------------------------------------

    def say(self, text: str | Table) -> None:
        self.console.print(text)

    def check(self, what: str, ok: bool) -> bool:
        self.checks.append((what, ok))
        self.say(f"   {what}: [bold]{'yes' if ok else '[red]NO[/]'}[/]")
        return ok

    def headwater(self, *args: str, show: bool = True) -> str:
        """Run a headwater command as an operator would; its stdout (it must succeed)."""
        if show:
            self.say(f"   [dim]$ headwater {' '.join(args)}[/]")
        done = subprocess.run([sys.executable, "-m", "headwater", *args], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"headwater {args[0]} exited {done.returncode}: {done.stdout}{done.stderr}")
        return done.stdout

    def show_output(self, out: str, keep: Callable[[str], bool] = lambda _l: True) -> None:
        for line in out.splitlines():
            if line.strip() and keep(line):
                self.say(f"   [cyan]{line}[/]")

    def metadata(self, topics: list[str]) -> dict[TopicPartition, tuple[int, list[int], list[int]]]:
        """(leader, replicas, ISR) of each partition, as a client's Metadata request sees it."""
        with AdminClient(self.bootstrap) as client:
            meta = client.refresh(topics)
        return {(t.name, p.partition_index): (p.leader_id, list(p.replica_nodes), list(p.isr_nodes))
                for t in meta.topics if not t.error_code for p in t.partitions}

    def topics_anywhere(self) -> set[str]:
        """Every topic some broker's Metadata still lists: each learns a deletion on its own."""
        with AdminClient(self.bootstrap) as client:
            client.refresh([])
            found: set[str] = set()
            for broker in sorted(client.nodes):
                resp = client.send(MetadataRequest, dict(topics=None, allow_auto_topic_creation=False), node_id=broker)
                found |= {t.name for t in resp.topics}
        return found

    def wait(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if predicate():
                    return True
            except Exception:  # a broker between two states; ask again
                pass
            time.sleep(0.2)
        return False

    def table(self, title: str, state: Mapping[TopicPartition, tuple[int, list[int], list[int]]]) -> Table:
        table = Table(title=title)
        for col in ("partition", "leader", "replicas", "in-sync replicas"):
            table.add_column(col, justify="right")
        for (t, p), (leader, replicas, isr) in sorted(state.items()):
            table.add_row(f"{t}-{p}", str(leader), ",".join(map(str, replicas)), ",".join(map(str, sorted(isr))))
        return table

    def write_plan(self, name: str, plan: Mapping[TopicPartition, list[int]]) -> Path:
        path = self.root / name
        path.write_text(format_reassignment_json(plan))
        return path

    # --- the console ------------------------------------------------------------------------------

    def start_console(self, listen: str | None) -> None:
        address = listen or f"127.0.0.1:{free_port()}"
        log = (self.root / "console.log").open("wb")
        self.console_proc = subprocess.Popen(
            [sys.executable, "-m", "headwater", "console", "--bootstrap-server", self.bootstrap, "--listen", address],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        (self.root / "console.pid").write_text(str(self.console_proc.pid))
        self.console_url = f"http://{address}"

        def healthy() -> bool:
            with urllib.request.urlopen(f"{self.console_url}/healthz", timeout=2) as resp:
                return bool(resp.status == 200)
        if not self.wait(healthy, 30):
            raise RuntimeError(f"the console did not start: {(self.root / 'console.log').read_text()[-2000:]}")
        self.say(f"   Console: [bold underline]{self.console_url}/reassignments[/] (pid {self.console_proc.pid}): "
                 "open it to watch the moves live")

    def stop_console(self) -> None:
        if self.console_proc is not None and self.console_proc.poll() is None:
            self.console_proc.terminate()
            try:
                self.console_proc.wait(10)
            except subprocess.TimeoutExpired:
                self.console_proc.kill()
                self.console_proc.wait(5)

    # --- watching moves ---------------------------------------------------------------------------

    def follow(self, plan: Mapping[TopicPartition, list[int]], label: str, until: Callable[[int, int], bool] | None = None,
               timeout_s: float = 120) -> bool:
        """Show the copy of ``plan``'s moves (bytes of the new replicas against their sources, rate and
        ETA) until no move of it is in flight, or until ``until(copied, total)``; True unless it timed out."""
        seen: dict[tuple[TopicPartition, int], tuple[int, int]] = {}  # (tp, broker) -> (copied, source)
        with AdminClient(self.bootstrap) as client:
            cluster = Cluster(client)

            def poll() -> bool:
                ongoing = {tp: o for tp, o in cluster.ongoing().items() if tp in plan}
                brokers = {b for o in ongoing.values() for b in o.replicas}
                for c in copy_progress(ongoing, replica_sizes(cluster, brokers) if ongoing else {}):
                    seen[(c.tp, c.broker)] = (min(c.copied, c.source), c.source)
                for (tp, b), (_copied, source) in list(seen.items()):
                    if tp not in ongoing:  # done: its new replicas hold what the source held
                        seen[(tp, b)] = (source, source)
                return not ongoing

            def totals() -> tuple[int, int]:
                return sum(c for c, _s in seen.values()), sum(s for _c, s in seen.values())

            deadline = time.monotonic() + timeout_s
            progress = Progress(TextColumn("   {task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                                DownloadColumn(), TransferSpeedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                                console=self.console, transient=False, disable=not self.console.is_terminal)
            task = progress.add_task(label, total=None)
            last_line = 0.0
            started, first_copied = time.monotonic(), None
            with progress:
                while time.monotonic() < deadline:
                    try:
                        done = poll()
                    except (AdminError, ToolError):  # the controller between two states: ask again
                        done = False
                    copied, total = totals()
                    progress.update(task, completed=copied, total=max(total, 1))
                    if first_copied is None:
                        first_copied = copied
                    if not self.console.is_terminal and (time.monotonic() - last_line >= 2 or done):
                        last_line = time.monotonic()
                        share = copied / total if total else 1.0
                        rate = (copied - first_copied) / max(1e-3, last_line - started)
                        eta = f"ETA {(total - copied) / rate:.0f} s" if rate > 0 and not done else "done" if done else "ETA ?"
                        self.say(f"   {label}: {copied / 1e6:.1f} of {total / 1e6:.1f} MB copied ({share:.0%}), "
                                 f"{rate / 1e6:.1f} MB/s, {eta}")
                    if done or (until is not None and total and until(copied, total)):
                        return True
                    time.sleep(0.5)
        return False

    def watch_phases(self, tp: TopicPartition) -> PhaseWatcher:
        def on_row(row: Row) -> None:
            self.say(f"   [magenta]ZooKeeper[/] +{row.at_s:5.2f} s  RS {fmt(row.rs)}  AR {fmt(row.ar)}  "
                     f"RR {fmt(row.rr)}  leader {row.leader}  ISR {fmt(row.isr)}")
        watcher = PhaseWatcher(self.zookeeper, tp[0], tp[1], on_row)
        watcher.start()
        return watcher

    # --- the story --------------------------------------------------------------------------------

    def start(self, listen: str | None) -> None:
        base = free_port_range(FIRST_BROKERS + ADDED_BROKERS)  # the last ports for the brokers that join later
        zookeeper_port = next(p for p in iter(free_port, None) if not base <= p < base + FIRST_BROKERS + ADDED_BROKERS)
        self.say(f"0. Starting ZooKeeper and {FIRST_BROKERS} brokers on 127.0.0.1 (data in {self.root})")
        t0 = time.monotonic()
        state = start_cluster(self.root, FIRST_BROKERS, base, zookeeper_port, [],
                              {"replica.lag.time.max.ms": "10000", "zookeeper.session.timeout.ms": "6000",
                               # Leaders move as in Kafka's controller: only when leaving; the
                               # operator's preferred-replica election ends each move.
                               "auto.leader.rebalance.enable": "false"},
                              echo=lambda m: self.say(f"   {m}"))
        # One address, as an operator gives it: clients and tools learn the rest from Metadata.
        self.bootstrap = state.bootstrap.split(",")[0]
        self.zookeeper = f"127.0.0.1:{zookeeper_port}"
        self.say(f"   all registered in ZooKeeper after {time.monotonic() - t0:.1f} s; bootstrap {self.bootstrap}")
        self.start_console(listen)

    def step1_topic(self) -> LiveProducer:
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="headwater-demo")
        admin.create_topics([
            NewTopic(TOPIC, replica_assignments={p: _rotate([1, 2, 3], p) for p in range(PARTITIONS)},
                     topic_configs={"min.insync.replicas": "2"}),
            NewTopic(CANCEL_TOPIC, replica_assignments={0: [1, 2, 3]}, topic_configs={"min.insync.replicas": "2"}),
        ])
        admin.close()
        # CreateTopics returns once the controller wrote ZooKeeper; brokers learn of the partitions a
        # moment later from the controller's LeaderAndIsr and UpdateMetadata.
        if not self.wait(lambda: sum(len(isr) == 3 for _l, _r, isr in
                                     self.metadata([TOPIC, CANCEL_TOPIC]).values()) == PARTITIONS + 1, 30):
            raise RuntimeError("the topics did not come online with full ISRs within 30 s")
        self.say(f"1. Topic [bold]{TOPIC}[/]: {PARTITIONS} partitions on brokers {{1,2,3}}, min.insync.replicas=2. "
                 f"Loading {LOAD_MB} MB into each partition so a move has something to copy:")
        took = preload(self.bootstrap, TOPIC, PARTITIONS, LOAD_MB, self.ledger)
        took += preload(self.bootstrap, CANCEL_TOPIC, 1, CANCEL_LOAD_MB, self.ledger)
        self.say(f"   {self.ledger.count():,} records acknowledged (acks=all) in {took:.1f} s")
        self.say(self.table("where the partitions live (Metadata)", self.metadata([TOPIC])))
        live = LiveProducer(self.bootstrap, TOPIC, self.ledger)
        live.start()
        self.say("   A live producer keeps writing to it (acks=all, idempotent, 200 records/s) through everything below.")
        return live

    def step2_move(self) -> None:
        plan = {(TOPIC, p): _rotate([4, 5, 6], p) for p in range(PARTITIONS)}
        path = self.write_plan("move.json", plan)
        ors, trs = (1, 2, 3), (4, 5, 6)
        self.say(f"2. KIP-455: move {TOPIC} from {{1,2,3}} to {{4,5,6}}, throttled to {MOVE_THROTTLE / 1e6:.0f} MB/s "
                 f"per broker. The controller's steps for {TOPIC}-0 appear as it writes them to ZooKeeper:")
        watcher = self.watch_phases((TOPIC, 0))
        try:
            out = self.headwater("reassign", "--bootstrap-server", self.bootstrap, "--execute",
                                 "--reassignment-json-file", str(path), "--throttle", str(MOVE_THROTTLE))
            self.show_output(out, lambda line: line.startswith(("Warning", "The inter-broker", "Successfully")))
            t0 = time.monotonic()
            moved = self.follow(plan, "copying to 4,5,6")
            # The last steps land in ZooKeeper right after the move leaves the reassignment list.
            final = self.wait(lambda: bool(watcher.rows) and set(watcher.rows[-1].rs) == set(trs)
                              and not watcher.rows[-1].ar, 10)
        finally:
            watcher.stop()
        self.say(f"   every partition moved in {time.monotonic() - t0:.1f} s")
        self.say(phase_table(f"{TOPIC}-0: ORS {fmt(ors)} -> TRS {fmt(trs)}, as ZooKeeper recorded it (seed 002's table)",
                             watcher.rows, ors, trs))
        phases = [phase(r, ors, trs).split(":")[0] for r in watcher.rows]
        self.check("phases in the seed's order (initial, A, B..., B6)", moved and final and phases[0] == "initial state"
                   and "A" in phases and phases[-1] == "B6"
                   and phases.index("A") < min(phases.index(p) for p in phases if p.startswith("B")))
        meta = self.metadata([TOPIC])
        last = watcher.rows[-1]
        self.say(f"   Metadata, as a client sees {TOPIC}-0: leader {meta[(TOPIC, 0)][0]}, replicas "
                 f"{meta[(TOPIC, 0)][1]}, ISR {sorted(meta[(TOPIC, 0)][2])}")
        self.check("Metadata agrees with ZooKeeper", meta[(TOPIC, 0)][0] == last.leader
                   and tuple(meta[(TOPIC, 0)][1]) == last.rs)
        self.check(f"every partition of {TOPIC} on its target replicas, all in sync",
                   all(replicas == plan[tp] and sorted(isr) == sorted(plan[tp]) for tp, (_l, replicas, isr) in meta.items()))
        out = self.headwater("reassign", "--bootstrap-server", self.bootstrap, "--verify",
                             "--reassignment-json-file", str(path))
        self.show_output(out, lambda line: line.startswith("Clearing"))

    def step3_cancel(self) -> None:
        tp = (CANCEL_TOPIC, 0)
        plan = {tp: [4, 5, 6]}
        path = self.write_plan("cancel.json", plan)
        self.say(f"3. KIP-455's cancel: move {CANCEL_TOPIC}-0 from {{1,2,3}} to {{4,5,6}} at "
                 f"{CANCEL_THROTTLE / 1e6:.0f} MB/s, and cancel it mid-copy:")
        watcher = self.watch_phases(tp)
        try:
            self.headwater("reassign", "--bootstrap-server", self.bootstrap, "--execute",
                           "--reassignment-json-file", str(path), "--throttle", str(CANCEL_THROTTLE))
            self.follow(plan, "copying to 4,5,6", until=lambda copied, total: copied >= total // 5, timeout_s=30)
            out = self.headwater("reassign", "--bootstrap-server", self.bootstrap, "--cancel",
                                 "--reassignment-json-file", str(path))
            self.show_output(out)
            reverted = self.wait(lambda: bool(watcher.rows) and watcher.rows[-1].rs == (1, 2, 3)
                                 and not watcher.rows[-1].ar, 20)
        finally:
            watcher.stop()

        def new_replicas_deleted() -> bool:
            with AdminClient(self.bootstrap) as client:
                sizes = replica_sizes(Cluster(client), [4, 5, 6])
            return not any((CANCEL_TOPIC, 0, b) in sizes for b in (4, 5, 6))
        deleted = self.wait(new_replicas_deleted, 20)
        leader, replicas, isr = self.metadata([CANCEL_TOPIC])[tp]
        self.say(f"   Metadata: leader {leader}, replicas {replicas}, ISR {sorted(isr)}")
        self.check("the cancelled move is back on its original replicas {1,2,3}, all in sync",
                   reverted and replicas == [1, 2, 3] and sorted(isr) == [1, 2, 3])
        self.check("the partial copies on 4,5,6 deleted (StopReplica with delete)", deleted)

    def step4_quota(self) -> None:
        self.say(f"4. KIP-599: controller_mutation_rate={QUOTA_RATE} partitions/s for two applications; each creates "
                 f"{QUOTA_TOPICS} topics of 4 partitions at once (the bucket holds {QUOTA_RATE} x 11 windows = "
                 f"{QUOTA_RATE * 11} tokens):")
        for client_id in ("burst-strict", "burst-permissive"):
            self.headwater("configs", "--bootstrap-server", self.bootstrap, "--alter", "--entity-type", "clients",
                           "--entity-name", client_id, "--add-config", f"controller_mutation_rate={QUOTA_RATE}")
        names = [f"quota-{kind}-{i}" for kind in ("strict", "permissive") for i in range(QUOTA_TOPICS)]
        T = CreateTopicsRequest.CreatableTopic
        results: dict[str, tuple[list[int], int]] = {}
        for kind, version in (("strict", 7), ("permissive", 4)):
            with AdminClient(self.bootstrap, client_id=f"burst-{kind}") as client:
                # CreateTopics goes to the controller (a ZooKeeper-mode broker answers NOT_CONTROLLER).
                resp = client.send_to_controller(CreateTopicsRequest, dict(
                    topics=[T(name=f"quota-{kind}-{i}", num_partitions=4, replication_factor=1, assignments=[],
                              configs=[]) for i in range(QUOTA_TOPICS)],
                    timeout_ms=30000, validate_only=False), lambda r: [t.error_code for t in r.topics],
                    max_version=version)
            results[kind] = ([t.error_code for t in resp.topics], resp.throttle_time_ms)
        strict_codes, strict_ms = results["strict"]
        created = strict_codes.count(0)
        self.say(f"   CreateTopics v7 (kafka-python, Java): {created} created, {strict_codes.count(89)} refused with "
                 f"THROTTLING_QUOTA_EXCEEDED (89); throttle_time_ms={strict_ms}")
        perm_codes, perm_ms = results["permissive"]
        self.say(f"   CreateTopics v4 (librdkafka): {perm_codes.count(0)} created, none refused; throttle_time_ms="
                 f"{perm_ms}: the broker mutes that connection for as long")
        # The bucket admits a request while it has tokens: 5 topics take 20, the 6th 4 more (-2).
        self.check("strict: the topics past the burst refused with 89", strict_codes == [0] * 6 + [89] * 2)
        # The debt is 32 - 22 = 10 tokens, 5 s at 2/s, less what the bucket refilled meanwhile.
        debt_ms = round((QUOTA_TOPICS * 4 - QUOTA_RATE * 11) / QUOTA_RATE * 1000)
        self.check("permissive: all created and the client throttled", perm_codes == [0] * QUOTA_TOPICS
                   and debt_ms - 200 <= perm_ms <= debt_ms)
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="headwater-demo")
        try:
            existing = set(admin.list_topics())
            admin.delete_topics([n for n in names if n in existing])
            # Until no broker lists them: the planner of step 5 may read any broker's metadata, and
            # a plan with a deleted topic in it would be refused.
            self.wait(lambda: not set(names) & self.topics_anywhere(), 30)
        finally:
            admin.close()
        self.say("   (the demo's own client id has no quota; it deletes the burst's topics)")

    def step5_plan(self) -> None:
        added, pids = [], []
        for _ in range(ADDED_BROKERS):
            entry, pid = start_new_broker(self.root)
            added.append(entry.broker_id)
            pids.append(pid)
        self.say(f"5. Brokers {added} joined (pids {pids})")
        self.say(f"   Brokers {added} hold nothing yet. The planner, on Apache Spark (local[2]), proposes a rebalance "
                 "with as little data movement as it can:")
        path = self.root / "rebalance.json"
        report = json.loads(self.headwater("plan", "--bootstrap-server", self.bootstrap, "--goal", "rebalance",
                                           "--engine", "spark", "--master", "local[2]", "--format", "json",
                                           "-o", str(path)))
        timings = report.get("timings_s", {})
        leaders_after = {int(b): row["leaders"][1] for b, row in report["per_broker"].items() if row["leaders"][1]}
        self.say(f"   plan: {report['replica_moves']} replica moves in {report['partitions_moved']} partitions, "
                 f"{report['leader_changes']} preferred-leader changes (Spark start {timings.get('spark_start_s', '?')} s, "
                 f"plan {timings.get('plan_s', '?')} s)")
        per_broker = sorted((int(b), row) for b, row in report["per_broker"].items())
        for i, when in enumerate(("before", "after")):
            self.say(f"   replicas per broker {when}: " + ", ".join(f"{b}: {row['replicas'][i]}" for b, row in per_broker))
        plan = {(m["topic"], m["partition"]): list(m["replicas"]) for m in json.loads(path.read_text())["partitions"]}
        out = self.headwater("reassign", "--bootstrap-server", self.bootstrap, "--execute",
                             "--reassignment-json-file", str(path), "--throttle", str(PLAN_THROTTLE))
        self.show_output(out, lambda line: line.startswith("Successfully"))
        moved = self.follow(plan, "rebalancing")

        def verified() -> bool:
            text = self.headwater("reassign", "--bootstrap-server", self.bootstrap, "--verify",
                                  "--reassignment-json-file", str(path), show=False)
            return all(f"Reassignment of partition {t}-{p} is completed." in text for t, p in plan)
        self.check("every move of the plan completed (and the throttles removed)", moved and self.wait(verified, 60))
        state = self.metadata([TOPIC, CANCEL_TOPIC])
        before = Counter(leader for leader, _r, _i in state.values())
        off = sum(1 for leader, replicas, _i in state.values() if leader != replicas[0])
        self.say(f"   {off} partitions are led by a replica other than their preferred (first) one; leaders per broker "
                 + ", ".join(f"{b}: {n}" for b, n in sorted(before.items())))
        self.say("   The step that ends every move: the preferred-replica leader election.")
        out = self.headwater("leader-election", "--bootstrap-server", self.bootstrap, "--election-type", "preferred",
                             "--all-topic-partitions")
        self.show_output(out or "(every partition was already led by its preferred replica)")

        def as_planned() -> bool:
            counts = Counter(leader for leader, _r, _i in self.metadata([TOPIC, CANCEL_TOPIC]).values())
            return dict(counts) == leaders_after
        planned = self.wait(as_planned, 15)
        state = self.metadata([TOPIC, CANCEL_TOPIC])
        counts = Counter(leader for leader, _r, _i in state.values())
        self.say("   leaders per broker " + ", ".join(f"{b}: {n}" for b, n in sorted(counts.items())))
        self.check("leaders per broker as the plan promised", planned)
        self.say(self.table(f"after brokers {added} joined", state))

    def step6_read_back(self, live: LiveProducer) -> None:
        live.finish()
        read, lost = missing(self.bootstrap, self.ledger, {TOPIC: PARTITIONS, CANCEL_TOPIC: 1})
        self.say(f"6. Read back every partition from offset 0: {read:,} records; {self.ledger.count():,} acknowledged "
                 f"in all ({live.sent:,} by the live producer), {lost} missing or changed, "
                 f"{self.ledger.failed} sends failed")
        self.check("no acknowledged message lost, no send failed", lost == 0 and self.ledger.failed == 0)


def run_demo(data_dir: Path | None, keep_console: bool = False, listen: str | None = None) -> int:
    # Piped (CI, a log file): wide enough for the phase table on one line per row.
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 132)
    own_dir = data_dir is None
    root = Path(tempfile.mkdtemp(prefix="headwater-demo-")) if data_dir is None else data_dir
    root.mkdir(parents=True, exist_ok=True)
    console.rule("[bold]headwater demo: live partition reassignment")
    demo = Demo(root, console)
    started = time.monotonic()
    failed: BaseException | None = None
    try:
        demo.start(listen)
        live = demo.step1_topic()
        try:
            demo.step2_move()
            demo.step3_cancel()
            demo.step4_quota()
            demo.step5_plan()
        finally:
            demo.step6_read_back(live)
        if keep_console:
            console.print(f"The cluster and the console ({demo.console_url}) stay up; Ctrl-C stops them.")
            with contextlib.suppress(KeyboardInterrupt):
                signal.pause()
    except Exception as exc:
        failed = exc
        console.print(f"[red]demo failed: {exc!r}[/]")
        for log in sorted(root.glob("broker-*.log")):
            console.print(f"--- {log.name} ---")
            console.print("\n".join(log.read_text(errors="replace").splitlines()[-15:]))
    finally:
        demo.stop_console()
        if (root / "cluster.json").exists():
            stop_cluster(root)
            console.print("Stopped the console, the brokers (controlled shutdown) and ZooKeeper by PID")
        if own_dir:
            shutil.rmtree(root, ignore_errors=True)
    ok = failed is None and bool(demo.checks) and all(passed for _w, passed in demo.checks)
    summary = Table(title=f"what the demo showed ({time.monotonic() - started:.0f} s)")
    summary.add_column("check")
    summary.add_column("held", justify="center")
    for what, passed in demo.checks:
        summary.add_row(what, "yes" if passed else "[red]NO[/]")
    console.print(summary)
    if failed is not None:  # again after the brokers' logs, where a reader of the output's tail sees it
        console.print(f"[red]the demo stopped at: {failed!r}[/]")
    console.rule("[bold green]demo passed" if ok else "[bold red]demo failed")
    return 0 if ok else 1
