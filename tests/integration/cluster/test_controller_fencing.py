"""Acceptance: a controller paused past its ZooKeeper session is fenced when it resumes.

The test SIGSTOPs the active controller until its session expires and another broker is the
controller in Metadata, then SIGCONTs it. None of what the old controller does after that takes
effect: /controller_epoch stays at the new epoch,
every partition state znode carries the new controller epoch, brokers refuse a LeaderAndIsr with
the old epoch, and the old controller is not the controller anywhere. The resumed broker registers
again (a new broker epoch) and rejoins every ISR; produce, consume and ``topics --create`` work.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from cluster_support import LocalCluster, pause, resume, run_cli, wait_for
from confluent_kafka import Consumer, Producer, TopicPartition
from hw_support import RawConnection

from headwater.protocol.interbroker import LeaderAndIsrResponse, PartitionLeadership, leader_and_isr_request

STALE_CONTROLLER_EPOCH = 11
TOPIC = "fenced"
PARTITIONS = 3


def produce_and_read(bootstrap: str, topic: str, n: int, tag: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "message.timeout.ms": 30_000})
    acked: list[tuple[int, int, bytes]] = []
    for i in range(n):
        producer.produce(topic, key=b"%d" % (i % 7), value=tag + b"-%d" % i,
                         on_delivery=lambda err, msg: acked.append((msg.partition(), msg.offset(), msg.value()))
                         if err is None else None)
    assert producer.flush(30) == 0
    assert len(acked) == n, f"{n - len(acked)} of {n} messages not acknowledged"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fence-check", "enable.auto.commit": False,
                         "enable.partition.eof": False})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        found: set[tuple[int, int, bytes]] = set()
        wanted = set(acked)
        deadline = time.monotonic() + 30
        while not wanted <= found:
            assert time.monotonic() < deadline, f"{len(wanted - found)} acknowledged messages not read back"
            for msg in consumer.consume(1000, timeout=0.5):
                assert msg.error() is None, msg.error()
                found.add((msg.partition(), msg.offset(), msg.value()))
    finally:
        consumer.close()


def test_paused_controller_is_fenced(cluster_factory: Callable[..., LocalCluster]) -> None:
    cluster = cluster_factory()
    cluster.create_topic(TOPIC, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    cluster.wait_full_isr([TOPIC], PARTITIONS, timeout_s=30)
    produce_and_read(cluster.bootstrap, TOPIC, 300, b"before")

    old = cluster.controller_id()
    old_epoch = cluster.controller_epoch()
    old_broker_epoch = cluster.broker_epoch(old)
    assert cluster.zk_controller() == old and old_broker_epoch is not None
    others = [b for b in cluster.brokers if b != old]

    pause(cluster.pid(old))
    try:
        new = int(wait_for(lambda: (lambda c: c if c in others else None)(cluster.metadata(via=others[0])[0]),
                           30, "a new controller in Metadata"))
        new_epoch = cluster.controller_epoch()
        assert new_epoch > old_epoch
        assert cluster.zk_controller() == new
        assert cluster.broker_epoch(old) is None, "the paused broker's registration outlived its session"

        # The new controller has rewritten every partition state: the paused broker left every ISR.
        def rewritten() -> bool:
            states = cluster.partition_states(TOPIC)
            return len(states) == PARTITIONS and all(
                s["controller_epoch"] == new_epoch and old not in s["isr"] and s["leader"] != old for s in states.values())

        wait_for(rewritten, 30, "partition states rewritten by the new controller")
    finally:
        resume(cluster.pid(old))

    # The resumed broker registers again, with a new broker epoch, and rejoins every ISR.
    new_broker_epoch = wait_for(lambda: cluster.broker_epoch(old), 30, f"broker {old} to register again")
    assert new_broker_epoch > old_broker_epoch
    cluster.wait_full_isr([TOPIC], PARTITIONS, timeout_s=60)

    # Nothing the old controller did after resuming stuck.
    assert cluster.controller_epoch() == new_epoch
    assert cluster.zk_controller() == new
    for b in cluster.brokers:
        assert wait_for(lambda b=b: cluster.metadata(via=b)[0] == new, 15, f"broker {b} to name {new} the controller")
    states = cluster.partition_states(TOPIC)
    assert {s["controller_epoch"] for s in states.values()} == {new_epoch}, states
    assert all(sorted(s["isr"]) == [1, 2, 3] for s in states.values()), states

    # A LeaderAndIsr carrying the old controller epoch is refused and changes nothing.
    before = cluster.describe(TOPIC)
    target = others[0] if others[0] != new else others[1]
    target_epoch = cluster.broker_epoch(target)
    assert target_epoch is not None
    stale = leader_and_isr_request(
        5, controller_id=old, controller_epoch=old_epoch, broker_epoch=target_epoch,
        states=[PartitionLeadership(TOPIC, p, old_epoch, target, 10_000, [target], 10_000, [1, 2, 3])
                for p in range(PARTITIONS)],
        topic_ids={TOPIC: uuid.UUID(int=0)}, live_leaders=[(target, "127.0.0.1", cluster.brokers[target].port)])
    with RawConnection(cluster.brokers[target].bootstrap) as conn:
        answer = conn.request(stale, LeaderAndIsrResponse, 5)
    assert answer.error_code == STALE_CONTROLLER_EPOCH
    assert cluster.describe(TOPIC) == before

    # The cluster still works.
    produce_and_read(cluster.bootstrap, TOPIC, 300, b"after")
    out = run_cli("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", "after-fencing",
                  "--partitions", "2", "--replication-factor", "3")
    assert "Created topic after-fencing." in out
    lines = cluster.wait_full_isr(["after-fencing"], 2, timeout_s=30)
    assert all(line.leader in (1, 2, 3) for line in lines)
