"""Group coordinators in a three-broker ZooKeeper cluster: moving and losing the coordinator.

The offsets topic has replication factor 2 here, so its partition for a group can be moved wholly
off its leader with ``headwater reassign``. First a committer keeps committing while the group's
partition moves: the coordinator changes broker and the last acknowledged commit is what the
group has at the end. Then a consumer group runs while the coordinator's broker gets SIGKILL:
the offsets committed before survive, the group reforms on the new coordinator, and the member
goes on from them (nothing below them is read again, nothing after them is skipped).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_support import LocalCluster, run_cli, start_cluster
from confluent_kafka import Consumer, KafkaException, TopicPartition
from group_support import ConfluentMember, committed, produce, wait_assignment, wait_for

from headwater.coordinator.records import OFFSETS_TOPIC, partition_for

OFFSETS_PARTITIONS = 3
PROPS = {"offsets.topic.num.partitions": str(OFFSETS_PARTITIONS), "offsets.topic.replication.factor": "2",
         "group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = start_cluster(tmp_path_factory.mktemp("groups-cluster"), 3, PROPS)
    try:
        yield c
    finally:
        c.stop()


def coordinator_of(cluster: LocalCluster, group: str) -> tuple[int, tuple[int, ...]]:
    """(leader, replicas) of the group's offsets partition."""
    p = partition_for(group, OFFSETS_PARTITIONS)
    line = next(line for line in cluster.describe(OFFSETS_TOPIC) if line.partition == p)
    return line.leader, line.replicas


class Committer(threading.Thread):
    """Commits offset 1, 2, 3... for one partition with a simple group, each synchronously; keeps the last acknowledged."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        self.topic = topic
        self.acked = 0
        self.failures = 0
        self.stop_event = threading.Event()

    def run(self) -> None:
        n = 1
        while not self.stop_event.is_set():
            try:
                self.consumer.commit(offsets=[TopicPartition(self.topic, 0, n)], asynchronous=False)
                self.acked = n
                n += 1
            except KafkaException:
                self.failures += 1  # NOT_COORDINATOR and the like while the coordinator moves: try again

    def stop(self) -> None:
        self.stop_event.set()
        self.join(30)
        self.consumer.close()


def test_reassigning_the_offsets_partition_moves_the_coordinator_without_losing_a_commit(
        cluster: LocalCluster, tmp_path: Path) -> None:
    cluster.create_topic("moved", 1)
    group = "moving-group"
    committer = Committer(cluster.bootstrap, group, "moved")
    committer.start()
    try:
        wait_for(lambda: committer.acked >= 20, 60, "commits flowing")
        leader, replicas = coordinator_of(cluster, group)
        (other,) = set(cluster.brokers) - set(replicas)
        follower = next(r for r in replicas if r != leader)
        target = [other, follower]
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": OFFSETS_TOPIC, "partition": partition_for(group, OFFSETS_PARTITIONS), "replicas": target}]}))
        out = run_cli("reassign", "--bootstrap-server", cluster.bootstrap, "--execute", "--reassignment-json-file", str(plan))
        assert "Successfully started partition reassignment" in out

        def moved() -> bool:
            new_leader, new_replicas = coordinator_of(cluster, group)
            return sorted(new_replicas) == sorted(target) and new_leader in target

        wait_for(moved, 60, "the offsets partition on its new replicas")
        before = committer.acked
        wait_for(lambda: committer.acked >= before + 20, 60, "commits through the new coordinator")
    finally:
        committer.stop()
    new_leader, _ = coordinator_of(cluster, group)
    assert new_leader != leader
    assert committed(cluster.bootstrap, group, "moved", 1) == {0: committer.acked}


def test_kill9_of_the_coordinator_keeps_offsets_and_the_group_reforms(cluster: LocalCluster) -> None:
    partitions = 4
    cluster.create_topic("survive", partitions)
    group = "surviving-group"
    produce(cluster.bootstrap, "survive", partitions, 400)
    member = ConfluentMember(cluster.bootstrap, group, "survive").start()
    try:
        wait_assignment(cluster.bootstrap, group, 1, partitions)
        wait_for(lambda: committed(cluster.bootstrap, group, "survive", partitions) == dict.fromkeys(range(partitions), 100),
                 60, "offsets committed")
        leader, _ = coordinator_of(cluster, group)
        cluster.brokers[leader].kill9()
        wait_for(lambda: coordinator_of(cluster, group)[0] not in (leader, -1), 60, "a new coordinator")
        produce(cluster.bootstrap, "survive", partitions, 400)
        wait_for(lambda: committed(cluster.bootstrap, group, "survive", partitions) == dict.fromkeys(range(partitions), 200),
                 90, "the new messages consumed and committed through the new coordinator")
        wait_assignment(cluster.bootstrap, group, 1, partitions)
    finally:
        member.stop()
    consumed = member.snapshot()
    for p in range(partitions):
        assert {o for q, o in consumed if q == p} == set(range(200)), f"partition {p}: an offset was skipped"
    again = sorted(k for k, n in Counter(consumed).items() if n > 1 and k[1] < 100)
    assert not again, f"read again although committed before the kill: {again[:10]}"
