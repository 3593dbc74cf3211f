"""Fetch from the closest replica (KIP-392), as Kafka does it with
``replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector``.

Expected behaviour, from Kafka (ReplicaManager.findPreferredReadReplica and readFromLog,
RackAwareReplicaSelector, FetchParams.fetchOnlyLeader): the leader answers a consumer's Fetch v11+
whose ``rack_id`` matches an in-sync follower's ``broker.rack`` with that follower as
``preferred_read_replica`` and no records; the follower then serves the consumer's fetches up to its
high watermark; a consumer whose follower goes away falls back to the leader. librdkafka follows
``preferred_read_replica`` (its ``client.rack`` setting), so the bytes a broker served to the
consumer's client id, on each broker's metrics endpoint, show where it read.
"""

from __future__ import annotations

import re
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_support import LocalCluster, start_cluster, wait_for
from confluent_kafka import Consumer, Producer, TopicPartition

from headwater.admin.local import free_port

SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
MESSAGES = 2000
CLIENT_ID = "rack-reader"


@pytest.fixture(scope="module")
def racks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, dict[int, int]]]:
    metrics_ports: dict[int, int] = {}

    def per_broker(broker_id: int, _port: int) -> dict[str, str]:
        metrics_ports[broker_id] = free_port()
        return {"broker.rack": f"rack-{broker_id}", "metrics.port": str(metrics_ports[broker_id])}

    cluster = start_cluster(tmp_path_factory.mktemp("racks"), 3, {"replica.selector.class": SELECTOR},
                            broker_props=per_broker)
    try:
        yield cluster, metrics_ports
    finally:
        cluster.stop()


def served_bytes(metrics_port: int) -> int:
    """headwater_consumer_fetch_bytes_total for CLIENT_ID on one broker (0 when absent or down)."""
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    except OSError:
        return 0
    m = re.search(rf'^headwater_consumer_fetch_bytes_total{{[^}}]*client_id="{CLIENT_ID}"[^}}]*}} (\S+)$', text, re.M)
    return int(float(m[1])) if m else 0


def produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(start, start + count):
        p.produce(topic, f"m{i:06d}".encode() * 20, partition=0)
    assert p.flush(30) == 0


def read(consumer: Consumer, count: int, timeout_s: float) -> set[bytes]:
    got: set[bytes] = set()
    wait_for(lambda: (got.update(bytes(m.value() or b"")[:7] for m in consumer.consume(500, 0.5) if m.error() is None)
                      or len(got) >= count), timeout_s, f"{count} records")
    return got


def test_a_consumer_reads_from_the_follower_in_its_rack(racks: tuple[LocalCluster, dict[int, int]],
                                                       tmp_path: Path) -> None:
    cluster, metrics_ports = racks
    topic = f"near-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, 1, 3)
    cluster.wait_full_isr([topic], 1)
    leader = cluster.leaders(topic)[0]
    follower = next(b for b in cluster.brokers if b != leader)
    produce(cluster.bootstrap, topic, 0, MESSAGES)

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "near", "client.id": CLIENT_ID,
                         "client.rack": f"rack-{follower}", "enable.auto.commit": False,
                         "topic.metadata.refresh.interval.ms": 1000})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        assert len(read(consumer, MESSAGES, 60)) == MESSAGES
        # Every record byte came from the follower in the consumer's rack, none from the leader.
        wait_for(lambda: served_bytes(metrics_ports[follower]) >= MESSAGES * 140, 10, "the follower's served bytes")
        assert served_bytes(metrics_ports[leader]) == 0
        others = [b for b in cluster.brokers if b not in (leader, follower)]
        assert all(served_bytes(metrics_ports[b]) == 0 for b in others)

        # The follower goes away: the consumer falls back to the leader and reads what follows.
        cluster.brokers[follower].stop()
        produce(cluster.bootstrap, topic, MESSAGES, 200)
        assert len(read(consumer, 200, 90)) == 200
        wait_for(lambda: served_bytes(metrics_ports[leader]) > 0, 10, "the leader to serve the consumer")
    finally:
        consumer.close()
