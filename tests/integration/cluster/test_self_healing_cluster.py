"""Self-healing (issue 21) on real processes: six brokers on three racks, RF 3, acks=all producers.

What is asserted is the issue's contract, and Kafka's for what the moves themselves do: a broker
killed for good has its partitions back at three in-sync replicas on the other five, on distinct
racks (Kafka's rack-aware placement), with nothing acknowledged lost and no operator command; a
broker that returns mid-heal keeps the partitions whose moves were still copying (KIP-455's cancel
returns them to their original replicas, which include it), even when the controller that started
the moves died meanwhile.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

from cluster_support import LocalCluster, run_cli, wait_for
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

TOPIC = "healed"
PARTITIONS = 6
RACKS = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b", 6: "c"}


def racked(broker_id: int, _port: int) -> dict[str, str]:
    return {"broker.rack": RACKS[broker_id]}


def heal_on(cluster: LocalCluster, threshold_ms: int, *extra: str) -> None:
    run_cli("configs", "--bootstrap-server", cluster.bootstrap, "--alter", "--entity-type", "brokers",
            "--entity-default", "--add-config",
            ",".join([f"self.healing.enable=true,self.healing.broker.failure.threshold.ms={threshold_ms}", *extra]))


class Producer(threading.Thread):
    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.acked: dict[tuple[int, int], bytes] = {}
        self.failed = 0
        self._p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, retries=100,
                                linger_ms=5, request_timeout_ms=15000)
        self._halt = threading.Event()

    def run(self) -> None:
        i = 0
        while not self._halt.wait(0.005):
            value = f"v{i}".encode()
            self._p.send(TOPIC, value=value).add_callback(self._ok(value)).add_errback(self._err)
            i += 1
        self._p.flush()
        self._p.close()

    def _ok(self, value: bytes) -> Callable[[Any], None]:
        def cb(md: Any) -> None:
            self.acked[(md.partition, md.offset)] = value
        return cb

    def _err(self, _exc: object) -> None:
        self.failed += 1

    def finish(self) -> None:
        self._halt.set()
        self.join(60)


def lost(bootstrap: str, acked: dict[tuple[int, int], bytes]) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=10000)
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    read = {(r.partition, r.offset): r.value for r in consumer}
    consumer.close()
    return sum(1 for k, v in acked.items() if read.get(k) != v)


def victim(cluster: LocalCluster) -> int:
    """A broker that is not the controller (the test is about a data broker's death)."""
    controller = cluster.controller_id()
    return next(b for b in (3, 6, 2, 5) if b != controller)


def test_a_dead_broker_is_healed_without_an_operator(cluster_factory: Callable[..., LocalCluster]) -> None:
    cluster = cluster_factory(6, broker_props=racked)
    cluster.create_topic(TOPIC, PARTITIONS, 3, min_insync_replicas="2")
    cluster.wait_full_isr([TOPIC], PARTITIONS)
    heal_on(cluster, 4000)
    producer = Producer(cluster.bootstrap)
    producer.start()
    dead = victim(cluster)
    holding = [line.partition for line in cluster.describe(TOPIC) if dead in line.replicas]
    assert holding
    cluster.brokers[dead].kill9()

    def healed() -> bool:
        lines = cluster.describe(TOPIC)
        return len(lines) == PARTITIONS and all(
            dead not in line.replicas and len(line.replicas) == 3 and line.full for line in lines)
    wait_for(healed, 90, f"every partition back at 3 in-sync replicas without broker {dead}")
    producer.finish()
    for line in cluster.describe(TOPIC):
        assert len({RACKS[b] for b in line.replicas}) == 3, line  # rack-aware: one replica per rack
    assert lost(cluster.bootstrap, producer.acked) == 0
    assert producer.failed == 0
    # The controller says what it did, and the moves ended with the preferred election.
    log = "".join(b.log_path.read_text() for b in cluster.live())
    assert f"self-healing: broker {dead} (gone" in log and "started" in log
    assert "preferred leaders elected" in log


def test_a_broker_back_mid_heal_keeps_the_partitions_still_copying(
        cluster_factory: Callable[..., LocalCluster]) -> None:
    cluster = cluster_factory(6, broker_props=racked)
    cluster.create_topic(TOPIC, PARTITIONS, 3, min_insync_replicas="2")
    cluster.wait_full_isr([TOPIC], PARTITIONS)
    # 3 MiB a partition, three times what one fetch answer to an adding replica carries (1 MiB): the
    # throttle charges an answer's bytes after sending it (Kafka's quota overshoots by one response
    # too), so a partition that fits in one answer is copied at once, however low the rate.
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    acked: dict[tuple[int, int], bytes] = {}
    futures = []
    for i in range(48 * PARTITIONS):
        value = f"{i:06d}".encode() * 10923  # 64 KiB
        futures.append((p.send(TOPIC, value=value, partition=i % PARTITIONS), value))
    for future, value in futures:
        md = future.get(30)
        acked[(md.partition, md.offset)] = value
    p.close()
    # Kafka's replication throttle on every replica out of the ISR: the healing copies crawl.
    run_cli("configs", "--bootstrap-server", cluster.bootstrap, "--alter", "--entity-type", "brokers",
            "--entity-default", "--add-config",
            "leader.replication.throttled.rate=20000,follower.replication.throttled.rate=20000")
    run_cli("configs", "--bootstrap-server", cluster.bootstrap, "--alter", "--entity-type", "topics",
            "--entity-name", TOPIC, "--add-config",
            "leader.replication.throttled.replicas=*,follower.replication.throttled.replicas=*")
    heal_on(cluster, 3000)
    dead = victim(cluster)
    before = {line.partition: line.replicas for line in cluster.describe(TOPIC)}
    cluster.brokers[dead].kill9()
    wait_for(lambda: "self-healing: broker" in "".join(b.log_path.read_text() for b in cluster.live()), 60,
             "the controller to start healing moves")
    # The controller dies mid-heal: its successor reads the healing moves from /admin/self_healing and
    # cancels them as it would have. (The longer threshold keeps the killed controller itself from
    # being healed while it restarts.)
    heal_on(cluster, 600_000)
    old_controller = cluster.controller_id()
    cluster.brokers[old_controller].kill9()
    cluster.wait_new_controller(old_controller)
    wait_for(lambda: "self-healing takes over" in "".join(b.log_path.read_text() for b in cluster.live()), 30,
             "the new controller to take over the healing moves")
    cluster.restart(old_controller)
    cluster.restart(dead)

    def settled() -> bool:
        lines = cluster.describe(TOPIC)
        return all(line.full and len(line.replicas) == 3 for line in lines) and \
            "cancelled the healing moves still copying" in "".join(b.log_path.read_text() for b in cluster.live())
    wait_for(settled, 90, "the copying moves cancelled and every ISR full")
    after = {line.partition: line.replicas for line in cluster.describe(TOPIC)}
    log = "".join(b.log_path.read_text() for b in cluster.live())
    cancelled_line = re.search(r"cancelled the healing moves still copying: (.*?)(?: \(completed meanwhile|$)", log,
                               re.MULTILINE)
    assert cancelled_line is not None
    cancelled = {int(tp.rsplit("-", 1)[1]) for tp in cancelled_line.group(1).split(", ")}
    assert cancelled
    # A cancelled move returns to its original replicas (KIP-455), the returned broker and its data
    # included; a move that had completed stays where it went, rack-aware.
    for partition, replicas in before.items():
        if partition in cancelled:
            assert sorted(after[partition]) == sorted(replicas), (partition, replicas, after[partition])
        assert len({RACKS[b] for b in after[partition]}) == 3, (partition, after[partition])
    assert lost(cluster.bootstrap, acked) == 0
