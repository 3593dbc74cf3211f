"""``headwater demo``: a 3-broker cluster keeps every acknowledged message through a broker crash,
then takes in a fourth broker: the planner moves replicas onto it (KIP-455), throttled, under a live
producer, and the move ends with the leaders the plan promised.

Everything goes through the Kafka protocol with kafka-python and headwater's own tools, exactly as
an application and an operator would; ZooKeeper and the brokers are separate processes that the
demo starts and stops by PID.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from rich.console import Console
from rich.table import Table

from headwater.admin.client import AdminClient
from headwater.admin.cluster import (
    ClusterState,
    broker_process,
    start_cluster,
    start_new_broker,
    stop_cluster,
)
from headwater.admin.local import free_port, free_port_range

TOPIC = "demo-events"
PARTITIONS = 6
BROKERS = 3
MOVE_THROTTLE = 10_000_000  # bytes/s per broker for the reassignment's copies


def _leaders_and_isrs(bootstrap: str) -> dict[int, tuple[int, list[int], list[int]]]:
    with AdminClient(bootstrap) as client:
        meta = client.refresh([TOPIC])
    topic = next(t for t in meta.topics if t.name == TOPIC)
    return {p.partition_index: (p.leader_id, list(p.replica_nodes), list(p.isr_nodes)) for p in topic.partitions}


def _table(title: str, state: dict[int, tuple[int, list[int], list[int]]], extra: dict[int, str] | None = None) -> Table:
    table = Table(title=title)
    for col in ("partition", "leader", "replicas", "in-sync replicas"):
        table.add_column(col, justify="right")
    if extra is not None:
        table.add_column("messages", justify="right")
    for p, (leader, replicas, isr) in sorted(state.items()):
        row = [str(p), str(leader), ",".join(map(str, replicas)), ",".join(map(str, isr))]
        if extra is not None:
            row.append(extra.get(p, ""))
        table.add_row(*row)
    return table


def _all_in_sync(bootstrap: str) -> bool:
    """Every partition known to the cluster's metadata, each with all 3 replicas in sync."""
    try:
        state = _leaders_and_isrs(bootstrap)
    except StopIteration:  # the topic is not in this broker's metadata yet
        return False
    return len(state) == PARTITIONS and all(len(isr) == 3 for _l, _r, isr in state.values())


def _headwater(console: Console, *args: str, show: bool = True) -> str:
    """Run a headwater command as an operator would; its stdout (it must succeed)."""
    if show:
        console.print(f"   [dim]$ headwater {' '.join(args)}[/]")
    done = subprocess.run([sys.executable, "-m", "headwater", *args], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"headwater {args[0]} exited {done.returncode}: {done.stdout}{done.stderr}")
    return done.stdout


class _Producer(threading.Thread):
    """Keyed acks=all messages at a steady pace until stopped; what was acknowledged, by partition."""

    def __init__(self, bootstrap: str, prefix: str) -> None:
        super().__init__(daemon=True)
        self.acked: dict[int, list[tuple[int, bytes, bytes]]] = {}
        self.failed = 0
        self._producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, retries=50,
                                       enable_idempotence=True, client_id="headwater-demo-live")
        self._prefix = prefix
        self._stop_event = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        i = 0
        while not self._stop_event.is_set():
            key, value = f"user-{i % 100}".encode(), f"{self._prefix} {i}".encode()
            future = self._producer.send(TOPIC, key=key, value=value)
            future.add_callback(self._ok(key, value)).add_errback(self._err)
            i += 1
            time.sleep(0.002)
        self._producer.flush()
        self._producer.close()

    def _ok(self, key: bytes, value: bytes) -> object:
        def cb(md: object) -> None:
            with self._lock:
                self.acked.setdefault(md.partition, []).append((md.offset, key, value))  # type: ignore[attr-defined]
        return cb

    def _err(self, _exc: object) -> None:
        with self._lock:
            self.failed += 1

    def finish(self) -> None:
        self._stop_event.set()
        self.join(60)


def _read_all(bootstrap: str, expected: int) -> dict[int, dict[int, tuple[bytes, bytes]]]:
    """Every record of the topic from offset 0, by partition and offset."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, client_id="headwater-demo",
                             consumer_timeout_ms=10000)
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    read: dict[int, dict[int, tuple[bytes, bytes]]] = {p: {} for p in range(PARTITIONS)}
    for record in consumer:
        read[record.partition][record.offset] = (record.key, record.value)
        if sum(len(v) for v in read.values()) >= expected:
            break
    consumer.close()
    return read


def _missing(acked: dict[int, list[tuple[int, bytes, bytes]]], read: dict[int, dict[int, tuple[bytes, bytes]]]) -> int:
    return sum(1 for p, lst in acked.items() for off, k, v in lst if read[p].get(off) != (k, v))


def _wait(predicate: object, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.2)
    return False


def run_demo(data_dir: Path | None, messages: int) -> int:
    console = Console(highlight=False)
    own_dir = data_dir is None
    root = Path(tempfile.mkdtemp(prefix="headwater-demo-")) if data_dir is None else data_dir
    console.rule("[bold]headwater demo: a replicated cluster")
    ok = False
    try:
        base = free_port_range(BROKERS + 1)  # the last port for the broker that joins later
        zookeeper_port = next(p for p in iter(free_port, None) if not base <= p <= base + BROKERS)
        console.print(f"1. Starting ZooKeeper and {BROKERS} brokers on 127.0.0.1 (data in {root})")
        t0 = time.monotonic()
        state = start_cluster(root, BROKERS, base, zookeeper_port, [], {"replica.lag.time.max.ms": "10000",
                                                                        "zookeeper.session.timeout.ms": "6000"},
                              echo=lambda m: console.print(f"   {m}"))
        bootstrap = state.bootstrap
        console.print(f"   all registered in ZooKeeper after {time.monotonic() - t0:.1f} s; bootstrap {bootstrap}")

        admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="headwater-demo")
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, topic_configs={"min.insync.replicas": "2"})])
        admin.close()
        # CreateTopics returns once the controller has written ZooKeeper; brokers learn of the
        # new partitions a moment later, from the controller's LeaderAndIsr and UpdateMetadata.
        if not _wait(lambda: _all_in_sync(bootstrap), 30):
            raise RuntimeError(f"{TOPIC} did not come online with full ISRs within 30 s")
        console.print(f"2. Created topic [bold]{TOPIC}[/]: {PARTITIONS} partitions, 3 replicas each, "
                      "min.insync.replicas=2, so an acknowledged message is on at least 2 brokers")
        before = _leaders_and_isrs(bootstrap)
        console.print(_table("where the partitions live", before))

        victim = before[0][0]
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, retries=50,
                                 enable_idempotence=True, client_id="headwater-demo")
        acked: dict[int, list[tuple[int, bytes, bytes]]] = {}
        failed = 0
        lock = threading.Lock()
        killed_at = messages // 2

        def on_ok(key: bytes, value: bytes) -> object:
            def cb(md: object) -> None:
                with lock:
                    acked.setdefault(md.partition, []).append((md.offset, key, value))  # type: ignore[attr-defined]
            return cb

        def on_err(_exc: object) -> None:
            nonlocal failed
            with lock:
                failed += 1

        console.print(f"3. Producing {messages:,} keyed messages with acks=all; halfway through, broker {victim} "
                      "(leader of partition 0) is killed with SIGKILL")
        t0 = time.monotonic()
        for i in range(messages):
            key = f"user-{i % 100}".encode()
            value = f"event {i}".encode()
            producer.send(TOPIC, key=key, value=value).add_callback(on_ok(key, value)).add_errback(on_err)
            if i == killed_at:
                producer.flush()
                pid = int((root / f"broker-{victim}.pid").read_text())
                os.kill(pid, signal.SIGKILL)
                console.print(f"   [red]kill -9 broker {victim}[/] (pid {pid}) after {i:,} messages")
        producer.flush()
        producer.close()
        console.print(f"   done in {time.monotonic() - t0:.1f} s: {sum(len(v) for v in acked.values()):,} acknowledged, "
                      f"{failed} failed")
        during = _leaders_and_isrs(bootstrap)
        console.print(_table(f"after broker {victim} died: new leaders, shrunken ISRs", during))

        read = _read_all(bootstrap, sum(len(v) for v in acked.values()))
        missing = _missing(acked, read)
        console.print(f"4. Read back every partition from offset 0: {missing} acknowledged messages missing or changed")

        entry = next(b for b in ClusterState.load(root).brokers if b.broker_id == victim)
        broker_process(state, entry, root).start()
        healed = _wait(lambda: _all_in_sync(bootstrap), 60)
        after = _leaders_and_isrs(bootstrap)
        counts = {p: f"{len(read[p]):,}" for p in range(PARTITIONS)}
        console.print(f"5. Restarted broker {victim}: it caught up from the leaders and rejoined every ISR: "
                      f"[bold]{'yes' if healed else 'NO'}[/]")
        console.print(_table("after the restart", after, counts))

        moved, as_planned, live = _add_broker_and_move(console, root, state.bootstrap)
        bootstrap = ClusterState.load(root).bootstrap
        for p, lst in live.acked.items():
            acked.setdefault(p, []).extend(lst)
        read = _read_all(bootstrap, sum(len(v) for v in acked.values()))
        missing = _missing(acked, read)
        console.print(f"8. Read back every partition again: {sum(len(v) for v in acked.values()):,} acknowledged "
                      f"in all, {missing} missing or changed")
        ok = missing == 0 and failed == 0 and live.failed == 0 and healed and moved and as_planned
        console.print(f"9. No acknowledged message lost through a crash and a live move, every replica in sync, "
                      f"leaders as planned: [bold]{'yes' if ok else 'NO'}[/]")
    except Exception as exc:
        console.print(f"[red]demo failed: {exc!r}[/]")
        for log in sorted(root.glob("broker-*.log")):
            console.print(f"--- {log.name} ---")
            console.print("\n".join(log.read_text(errors="replace").splitlines()[-15:]))
    finally:
        if (root / "cluster.json").exists():
            stop_cluster(root)
            console.print("10. Stopped the brokers (controlled shutdown) and ZooKeeper by PID")
        if own_dir:
            shutil.rmtree(root, ignore_errors=True)
    console.rule("[bold green]demo passed" if ok else "[bold red]demo failed")
    return 0 if ok else 1


def _add_broker_and_move(console: Console, root: Path, bootstrap: str) -> tuple[bool, bool, _Producer]:
    """Steps 6 and 7: a new broker, the planner's moves onto it under a live producer, then the leaders.
    Returns (every move completed, the leaders per broker are the plan's, the live producer)."""
    entry, pid = start_new_broker(root)
    bootstrap = ClusterState.load(root).bootstrap
    new = entry.broker_id
    console.print(f"6. Broker {new} joined (pid {pid}); it holds nothing yet. The planner moves replicas onto it "
                  "with as little data movement as it can:")
    plan = root / "plan.json"
    report = json.loads(_headwater(console, "plan", "--bootstrap-server", bootstrap, "--goal", "add-brokers",
                                   "--brokers", str(new), "--engine", "local", "--format", "json", "-o", str(plan)))
    leaders_after = {int(b): row["leaders"][1] for b, row in report["per_broker"].items() if row["leaders"][1]}
    console.print(f"   plan: {report['replica_moves']} replica moves in {report['partitions_moved']} partitions, "
                  f"{report['leader_changes']} leader changes; leaders per broker after: "
                  + ", ".join(f"{b}: {n}" for b, n in sorted(leaders_after.items())))
    live = _Producer(bootstrap, "live")
    live.start()
    out = _headwater(console, "reassign", "--bootstrap-server", bootstrap, "--execute",
                     "--reassignment-json-file", str(plan), "--throttle", str(MOVE_THROTTLE))
    started = next((line for line in out.splitlines() if line.startswith("Successfully started")), out.strip())
    console.print(f"   {started}")
    console.print(f"   copying at up to {MOVE_THROTTLE // 1_000_000} MB/s per broker while the producer keeps writing; "
                  "--verify until every move is done:")
    wanted = [(m["topic"], m["partition"]) for m in json.loads(plan.read_text())["partitions"]]
    t0 = time.monotonic()

    def verified() -> bool:
        text = _headwater(console, "reassign", "--bootstrap-server", bootstrap, "--verify",
                          "--reassignment-json-file", str(plan), show=False)
        return all(f"Reassignment of partition {t}-{p} is completed." in text for t, p in wanted)

    moved = _wait(verified, 120)
    live.finish()
    console.print(f"   every move completed in {time.monotonic() - t0:.1f} s: [bold]{'yes' if moved else 'NO'}[/]; "
                  f"{sum(len(v) for v in live.acked.values()):,} messages acknowledged during it, {live.failed} failed")
    console.print("7. A completed move hands each partition's leadership to the first replica of its new list. "
                  "Partitions the plan left alone may still be led elsewhere since the crash (the automatic "
                  "rebalance runs every 5 minutes): the operator's last step elects their preferred leaders too:")
    out = _headwater(console, "leader-election", "--bootstrap-server", bootstrap, "--election-type", "preferred",
                     "--all-topic-partitions")
    for line in out.splitlines() or ["(every partition was already led by its preferred replica)"]:
        console.print(f"   {line}")
    state = _leaders_and_isrs(bootstrap)
    counts = Counter(leader for leader, _r, _i in state.values())
    as_planned = dict(counts) == leaders_after
    console.print("   leaders per broker " + ", ".join(f"{b}: {n}" for b, n in sorted(counts.items()))
                  + f", as planned: [bold]{'yes' if as_planned else 'NO'}[/]")
    console.print(_table(f"after broker {new} joined", state))
    return moved, as_planned, live
