"""A throttled follower in the ISR keeps fetching, and stays in the ISR, when its partition gets a
new leader epoch on the same leader while a copy has spent its follower throttle.

Kafka throttles only replicas that are not in sync: the follower asks its fetch state
(``AbstractFetcherThread``: ``!fetchState.isReplicaInSync && quota.isThrottled(tp) &&
quota.isQuotaExceeded``), and a follower at the leader's high watermark is in sync. Here another
replica dies, so the controller shrinks the ISR with a new leader epoch (``removeReplicasFromIsr``)
and the follower gets a LeaderAndIsr with the same leader; records keep arriving. The leader's
fetch session answers that partition again only when its high watermark changes (KIP-227), so the
follower must already know it is at the leader's end, or it holds the partition back behind the
copy's debt and drops out of the ISR after ``replica.lag.time.max.ms``. The controller leads the partition, so the leader has the
new epoch before the follower asks with it (a follower ahead of its leader gets an error answer,
which tells it the high watermark again).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from cluster_support import LocalCluster, run_cli, wait_for
from confluent_kafka import Producer
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

LAG_MS = 4000
IDLE, BULK = "idle", "bulk"


def isr(cluster: LocalCluster, topic: str) -> tuple[int, ...]:
    return next(line.isr for line in cluster.describe(topic) if line.partition == 0)


def test_a_new_leader_epoch_does_not_throttle_an_in_sync_follower(
        cluster_factory: Callable[..., LocalCluster], tmp_path: Path) -> None:
    cluster = cluster_factory(3, {"replica.lag.time.max.ms": str(LAG_MS)})
    leader = cluster.controller_id()
    follower, victim = sorted(set(cluster.brokers) - {leader})
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    admin.create_topics([
        NewTopic(IDLE, replica_assignments={0: [leader, follower, victim]}, topic_configs={"min.insync.replicas": "1"}),
        NewTopic(BULK, replica_assignments={0: [leader, victim]})])
    admin.close()
    cluster.wait_full_isr([IDLE, BULK], 1)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 20})
    for i in range(10):
        producer.produce(IDLE, value=b"%d" % i, partition=0)
    value = os.urandom(10_000)
    for _ in range(300):  # 3 MB: three fetch answers of 1 MiB, or two and a half minutes at the rate below
        producer.produce(BULK, value=value, partition=0)
    assert producer.flush(60) == 0
    cluster.wait_full_isr([IDLE, BULK], 1)

    # The follower throttles every replica it follows; a copy to it of the bulk partition spends its
    # budget for about a minute with the first answer.
    run_cli("configs", "--bootstrap-server", cluster.bootstrap, "--alter", "--entity-type", "brokers",
            "--entity-name", str(follower), "--add-config", "follower.replication.throttled.rate=20000")
    for topic in (IDLE, BULK):
        run_cli("configs", "--bootstrap-server", cluster.bootstrap, "--alter", "--entity-type", "topics",
                "--entity-name", topic, "--add-config", "follower.replication.throttled.replicas=*")
    plan = tmp_path / "move.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": BULK, "partition": 0, "replicas": [leader, victim, follower]}]}))
    run_cli("reassign", "--bootstrap-server", cluster.bootstrap, "--execute", "--reassignment-json-file", str(plan))
    wait_for(lambda: cluster.log_bytes(follower, BULK) >= 512 * 1024, 30, "the copy's first answer on the follower")

    epoch_before = cluster.partition_states(IDLE)[0]["leader_epoch"]
    cluster.brokers[victim].kill9()
    wait_for(lambda: sorted(isr(cluster, IDLE)) == sorted([leader, follower]), 30,
             "the killed broker out of the idle partition's ISR")
    state = cluster.partition_states(IDLE)[0]
    assert state["leader"] == leader and state["leader_epoch"] > epoch_before, state  # the same leader, a new epoch
    assert cluster.log_bytes(follower, BULK) < 3_000_000  # the copy is still held back by the throttle

    # Records keep arriving, so the follower must fetch to stay in sync (a follower at the leader's
    # end stays caught up without fetching). Two and a half lag windows: a follower held back would
    # have been dropped by now.
    deadline = time.monotonic() + 2.5 * LAG_MS / 1000
    while time.monotonic() < deadline:
        producer.produce(IDLE, value=b"more", partition=0)
        assert producer.flush(10) == 0
        assert follower in isr(cluster, IDLE), "the in-sync follower was throttled out of the ISR"
        time.sleep(0.5)
