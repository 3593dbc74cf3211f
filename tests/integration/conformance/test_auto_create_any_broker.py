"""Topic auto-creation and CreateTopics as a client sees them from whichever broker it asks.

Expected answers come from Apache Kafka's ZooKeeper-mode broker (3.9):
- ``AutoTopicCreationManager.createTopicsInZk``: any broker creates a topic a Metadata request names
  (with ``allow_auto_topic_creation`` and ``auto.create.topics.enable``), calling
  ``ZkAdminManager.createTopics`` with timeout 0, and answers the topic LEADER_NOT_AVAILABLE (5) when
  the creation was accepted or the topic already exists; an illegal name is INVALID_TOPIC_EXCEPTION
  (17) and nothing is created.
- ``ZkAdminManager.createTopics``: a CreateTopics with ``timeout_ms`` <= 0 answers REQUEST_TIMED_OUT (7)
  for a topic it did create; otherwise ``DelayedCreatePartitions`` answers once every new partition
  has a leader in the receiving broker's metadata cache, so the topic is usable there at once.

A fresh producer of each client library (confluent-kafka, kafka-python, kcat, KafkaJS) bootstrapped
at a broker that is not the controller must deliver to a new topic; KafkaJS's broker pool retries a
Metadata answer only on LEADER_NOT_AVAILABLE, so it fails on any other code for a topic being created.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_support import LocalCluster, start_cluster, wait_for
from confluent_kafka import Producer
from hw_support import RawConnection
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from kafka.protocol.admin import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
)
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

JS = Path(__file__).resolve().parents[2] / "js"  # KafkaJS, installed by `make test` (tests/js/package.json)
NONE = 0
LEADER_NOT_AVAILABLE = 5
REQUEST_TIMED_OUT = 7
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
PARTITIONS = 3
# Generous: the fault this guards against is a producer that never delivers (all its Metadata
# requests answered UNKNOWN_TOPIC_OR_PARTITION by a broker that is not the controller).
DELIVERY_TIMEOUT_S = 15.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = start_cluster(tmp_path_factory.mktemp("auto-create"), 3, {
        "auto.create.topics.enable": "true", "num.partitions": str(PARTITIONS), "default.replication.factor": "3"})
    try:
        yield c
    finally:
        c.stop()


def non_controllers(cluster: LocalCluster) -> list[int]:
    controller = cluster.controller_id()
    return [b for b in cluster.brokers if b != controller]


def metadata(bootstrap: str, topic: str, allow: bool = True) -> tuple[int, list[int]]:
    """(topic error code, leaders) from one Metadata v12 request."""
    T = MetadataRequest.MetadataRequestTopic
    with RawConnection(bootstrap) as conn:
        resp = conn.request(MetadataRequest(version=12, topics=[T(topic_id=None, name=topic)],
                                            allow_auto_topic_creation=allow, include_topic_authorized_operations=False),
                            MetadataResponse, 12)
    (t,) = resp.topics
    return t.error_code, [p.leader_id for p in t.partitions]


def led(bootstrap: str, topic: str) -> bool:
    code, leaders = metadata(bootstrap, topic)
    return code == NONE and len(leaders) == PARTITIONS and min(leaders) > 0


def test_metadata_creates_the_topic_from_every_broker(cluster: LocalCluster) -> None:
    for broker_id, broker in cluster.brokers.items():
        topic = f"auto-{broker_id}-{uuid.uuid4().hex[:6]}"
        code, leaders = metadata(broker.bootstrap, topic)
        assert (code, leaders) == (LEADER_NOT_AVAILABLE, []), f"broker {broker_id}: first answer {code}"
        # Every broker then serves it with a leader for each partition.
        for other in cluster.brokers.values():
            wait_for(lambda b=other, t=topic: led(b.bootstrap, t), 20, f"{topic} led on broker {other.broker_id}")


def test_auto_creation_off_or_illegal_name_creates_nothing(cluster: LocalCluster) -> None:
    (broker_id, *_rest) = non_controllers(cluster)
    bootstrap = cluster.brokers[broker_id].bootstrap
    topic = f"not-auto-{uuid.uuid4().hex[:6]}"
    assert metadata(bootstrap, topic, allow=False) == (UNKNOWN_TOPIC_OR_PARTITION, [])
    assert metadata(bootstrap, "bad name!") == (INVALID_TOPIC_EXCEPTION, [])
    time.sleep(1.0)
    assert cluster.zk_json(f"/brokers/topics/{topic}") is None
    assert metadata(bootstrap, topic, allow=False) == (UNKNOWN_TOPIC_OR_PARTITION, [])


def _deliver_20(send_one: Callable[[str], None], what: str) -> list[float]:
    took = []
    for i in range(20):
        topic = f"{what}-{i}-{uuid.uuid4().hex[:6]}"
        start = time.monotonic()
        send_one(topic)
        took.append(time.monotonic() - start)
    print(f"{what}: first delivery to a new topic took {min(took):.2f}-{max(took):.2f} s")
    return took


def test_fresh_producers_at_a_non_controller_deliver_to_new_topics(cluster: LocalCluster, tmp_path: Path) -> None:
    (broker_id, *_rest) = non_controllers(cluster)
    bootstrap = cluster.brokers[broker_id].bootstrap

    def confluent(topic: str) -> None:
        errors: list[object] = []
        p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": int(DELIVERY_TIMEOUT_S * 1000)})
        p.produce(topic, b"v", on_delivery=lambda err, _msg: errors.append(err))
        assert p.flush(DELIVERY_TIMEOUT_S + 5) == 0 and errors == [None], f"{topic}: {errors}"

    def kafka_python(topic: str) -> None:
        p = KafkaProducer(bootstrap_servers=bootstrap, max_block_ms=int(DELIVERY_TIMEOUT_S * 1000))
        try:
            p.send(topic, b"v").get(timeout=DELIVERY_TIMEOUT_S)
        finally:
            p.close(timeout=5)

    def kcat(topic: str) -> None:
        out = subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", topic, "-X",
                              f"message.timeout.ms={int(DELIVERY_TIMEOUT_S * 1000)}"],
                             input=b"v\n", capture_output=True, timeout=DELIVERY_TIMEOUT_S + 10)
        assert out.returncode == 0, out.stderr.decode()

    def kafkajs(topic: str) -> None:
        out = subprocess.run(["node", str(JS / "produce_new_topic.js"), bootstrap, topic], capture_output=True,
                             text=True, timeout=DELIVERY_TIMEOUT_S + 10)
        assert out.returncode == 0, out.stderr

    for send, name in ((confluent, "confluent"), (kafka_python, "kafka-python"), (kcat, "kcat"), (kafkajs, "kafkajs")):
        _deliver_20(send, name)


def test_created_topic_is_usable_on_the_receiving_broker_at_once(cluster: LocalCluster) -> None:
    controller = cluster.brokers[cluster.controller_id()].bootstrap
    topic = f"ready-{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(bootstrap_servers=controller)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 3)], timeout_ms=30_000)
    finally:
        admin.close()
    R = DescribeConfigsRequest.DescribeConfigsResource
    with RawConnection(controller) as conn:
        resp = conn.request(DescribeConfigsRequest(version=4, resources=[
            R(resource_type=2, resource_name=topic, configuration_keys=None)], include_synonyms=False,
            include_documentation=False), DescribeConfigsResponse, 4)
    assert resp.results[0].error_code == NONE, resp
    # The same broker's Metadata names a leader for every partition as soon as CreateTopics answered.
    code, leaders = metadata(controller, topic, allow=False)
    assert code == NONE and len(leaders) == PARTITIONS and min(leaders) > 0


def test_create_topics_with_no_timeout_answers_request_timed_out(cluster: LocalCluster) -> None:
    controller = cluster.brokers[cluster.controller_id()].bootstrap
    topic = f"no-wait-{uuid.uuid4().hex[:6]}"
    T = CreateTopicsRequest.CreatableTopic
    with RawConnection(controller) as conn:
        resp = conn.request(CreateTopicsRequest(version=5, timeout_ms=0, validate_only=False, topics=[
            T(name=topic, num_partitions=1, replication_factor=1, assignments=[], configs=[])]), CreateTopicsResponse, 5)
    (t,) = resp.topics
    assert (t.name, t.error_code, t.num_partitions) == (topic, REQUEST_TIMED_OUT, -1)
    # Created all the same.
    wait_for(lambda: metadata(controller, topic, allow=False)[0] == NONE, 20, f"{topic} to exist")


def test_metadata_naming_the_offsets_topic_creates_it_as_the_coordinator_would(cluster: LocalCluster) -> None:
    """AutoTopicCreationManager.creatableTopic gives __consumer_offsets offsets.topic.num.partitions
    (50), offsets.topic.replication.factor (3) and the group coordinator's configs (compacted), not
    num.partitions and default.replication.factor."""
    (broker_id, *_rest) = non_controllers(cluster)
    code, _leaders = metadata(cluster.brokers[broker_id].bootstrap, "__consumer_offsets")
    assert code in (LEADER_NOT_AVAILABLE, NONE)
    found = wait_for(lambda: cluster.zk_json("/brokers/topics/__consumer_offsets"), 20, "the offsets topic")
    partitions = found[0]["partitions"]
    assert len(partitions) == 50 and {len(r) for r in partitions.values()} == {3}
    configs = wait_for(lambda: cluster.zk_json("/config/topics/__consumer_offsets"), 20, "its configs")
    assert configs[0]["config"].get("cleanup.policy") == "compact"


def test_metadata_naming_the_transaction_state_topic_creates_it_as_the_coordinator_would(
        cluster: LocalCluster) -> None:
    """creatableTopic gives __transaction_state transaction.state.log.num.partitions (50),
    transaction.state.log.replication.factor (3) and TransactionStateManager's configs (compacted,
    min.insync.replicas from transaction.state.log.min.isr, 2); Metadata marks it internal
    (Topic.INTERNAL_TOPICS)."""
    (broker_id, *_rest) = non_controllers(cluster)
    bootstrap = cluster.brokers[broker_id].bootstrap
    code, _leaders = metadata(bootstrap, "__transaction_state")
    assert code in (LEADER_NOT_AVAILABLE, NONE)
    found = wait_for(lambda: cluster.zk_json("/brokers/topics/__transaction_state"), 20, "the transaction state topic")
    partitions = found[0]["partitions"]
    assert len(partitions) == 50 and {len(r) for r in partitions.values()} == {3}
    configs = wait_for(lambda: cluster.zk_json("/config/topics/__transaction_state"), 20, "its configs")
    assert {k: configs[0]["config"].get(k) for k in ("cleanup.policy", "min.insync.replicas")} == {
        "cleanup.policy": "compact", "min.insync.replicas": "2"}
    T = MetadataRequest.MetadataRequestTopic

    def described() -> Any:
        with RawConnection(bootstrap) as conn:
            resp = conn.request(MetadataRequest(version=12, topics=[T(topic_id=None, name="__transaction_state")],
                                                allow_auto_topic_creation=False,
                                                include_topic_authorized_operations=False), MetadataResponse, 12)
        return resp.topics[0] if resp.topics[0].error_code == NONE else None

    # The broker serves it once the controller's UpdateMetadata reached it.
    assert wait_for(described, 20, "the broker to serve the topic").is_internal
