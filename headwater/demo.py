"""``headwater demo``: a 3-broker cluster keeps every acknowledged message through a broker crash.

Everything goes through the Kafka protocol with kafka-python, exactly as an application would;
ZooKeeper and the brokers are separate processes that the demo starts and stops by PID.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from rich.console import Console
from rich.table import Table

from headwater.admin.client import AdminClient
from headwater.admin.cluster import ClusterState, broker_process, start_cluster, stop_cluster
from headwater.admin.local import free_port

TOPIC = "demo-events"
PARTITIONS = 6
BROKERS = 3


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
        base = free_port()
        console.print(f"1. Starting ZooKeeper and {BROKERS} brokers on 127.0.0.1 (data in {root})")
        t0 = time.monotonic()
        state = start_cluster(root, BROKERS, base, free_port(), [], {"replica.lag.time.max.ms": "10000",
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

        consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, client_id="headwater-demo",
                                 consumer_timeout_ms=10000)
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        read: dict[int, dict[int, tuple[bytes, bytes]]] = {p: {} for p in range(PARTITIONS)}
        total_acked = sum(len(v) for v in acked.values())
        for record in consumer:
            read[record.partition][record.offset] = (record.key, record.value)
            if sum(len(v) for v in read.values()) >= total_acked:
                break
        consumer.close()
        missing = sum(1 for p, lst in acked.items() for off, k, v in lst if read[p].get(off) != (k, v))
        console.print(f"4. Read back every partition from offset 0: {missing} acknowledged messages missing or changed")

        entry = next(b for b in ClusterState.load(root).brokers if b.broker_id == victim)
        broker_process(state, entry, root).start()
        healed = _wait(lambda: _all_in_sync(bootstrap), 60)
        after = _leaders_and_isrs(bootstrap)
        counts = {p: f"{len(read[p]):,}" for p in range(PARTITIONS)}
        console.print(f"5. Restarted broker {victim}: it caught up from the leaders and rejoined every ISR: "
                      f"[bold]{'yes' if healed else 'NO'}[/]")
        console.print(_table("after the restart", after, counts))
        ok = missing == 0 and failed == 0 and healed
        console.print(f"6. No acknowledged message lost, every replica back in sync: [bold]{'yes' if ok else 'NO'}[/]")
    except Exception as exc:
        console.print(f"[red]demo failed: {exc!r}[/]")
        for log in sorted(root.glob("broker-*.log")):
            console.print(f"--- {log.name} ---")
            console.print("\n".join(log.read_text(errors="replace").splitlines()[-15:]))
    finally:
        if (root / "cluster.json").exists():
            stop_cluster(root)
            console.print("7. Stopped the brokers (controlled shutdown) and ZooKeeper by PID")
        if own_dir:
            shutil.rmtree(root, ignore_errors=True)
    console.rule("[bold green]demo passed" if ok else "[bold red]demo failed")
    return 0 if ok else 1
