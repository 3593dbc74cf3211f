"""Tests that share one three-broker cluster: topic deletion, and real clients against the cluster."""

from __future__ import annotations

import subprocess
from pathlib import Path

from cluster_support import LocalCluster, run_cli, wait_for
from hw_support import RawConnection
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.admin import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

PARTITIONS = 4


def _partition_dirs(cluster: LocalCluster, topic: str) -> dict[int, list[str]]:
    """broker -> names in its log dir that belong to ``topic`` (live ``t-p`` dirs and renamed ``t-p.<uuid>-delete``)."""
    out = {}
    for b in cluster.brokers.values():
        log_dir = Path(b.data_dir) / f"broker-{b.broker_id}-logs"
        out[b.broker_id] = sorted(p.name for p in log_dir.iterdir() if p.name.startswith(f"{topic}-"))
    return out


def test_delete_topic_removes_znodes_and_directories(shared_cluster: LocalCluster) -> None:
    cluster = shared_cluster
    topic = "doomed"
    cluster.create_topic(topic, PARTITIONS, 3, **{"file.delete.delay.ms": "300"})
    cluster.wait_full_isr([topic], PARTITIONS, timeout_s=30)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for i in range(400):
        producer.send(topic, key=b"%d" % i, value=b"x" * 200)
    producer.flush(30)
    producer.close()
    dirs = _partition_dirs(cluster, topic)
    assert all(names == [f"{topic}-{p}" for p in range(PARTITIONS)] for names in dirs.values()), dirs
    assert cluster.kazoo.exists(f"/brokers/topics/{topic}") is not None

    out = run_cli("topics", "--bootstrap-server", cluster.bootstrap, "--delete", "--topic", topic)
    assert "Error" not in out, out

    zk_paths = [f"/brokers/topics/{topic}", f"/admin/delete_topics/{topic}", f"/config/topics/{topic}"]
    wait_for(lambda: all(cluster.kazoo.exists(p) is None for p in zk_paths), 30, f"the znodes of {topic} to go")
    wait_for(lambda: all(not names for names in _partition_dirs(cluster, topic).values()), 30,
             f"the directories of {topic} to go from every broker")
    assert all(line.topic != topic for line in cluster.describe())

    # The name is free again, and the new topic starts empty.
    cluster.create_topic(topic, 2, 3)
    cluster.wait_full_isr([topic], 2, timeout_s=30)
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap)
    try:
        ends = consumer.end_offsets([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    finally:
        consumer.close()
    assert set(ends.values()) == {0}


def test_kcat_sees_the_cluster_and_round_trips(shared_cluster: LocalCluster) -> None:
    cluster = shared_cluster
    topic = "kcat-topic"
    cluster.create_topic(topic, 3, 3, **{"min.insync.replicas": "2"})
    cluster.wait_full_isr([topic], 3, timeout_s=30)
    controller = cluster.controller_id()
    meta = subprocess.run(["kcat", "-b", cluster.bootstrap, "-L", "-t", topic], capture_output=True, text=True,
                          timeout=30, check=True).stdout
    assert " 3 brokers:" in meta, meta
    for b in cluster.brokers.values():
        assert f"broker {b.broker_id} at {b.bootstrap}" in meta, meta
    assert f"broker {controller} at {cluster.brokers[controller].bootstrap} (controller)" in meta, meta
    assert "3 partitions:" in meta, meta

    lines = [f"k{i % 5}:v{i}" for i in range(300)]
    subprocess.run(["kcat", "-b", cluster.bootstrap, "-P", "-t", topic, "-K:", "-X", "acks=all"],
                   input="\n".join(lines) + "\n", text=True, timeout=60, check=True)
    got = subprocess.run(["kcat", "-b", cluster.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q",
                          "-f", "%p %o %k %s\\n"], capture_output=True, text=True, timeout=60, check=True).stdout
    records = [line.split(" ") for line in got.splitlines()]
    assert sorted(f"{k}:{v}" for _, _, k, v in records) == sorted(lines)
    by_key: dict[str, list[int]] = {}
    partition_of: dict[str, str] = {}
    for p, _off, k, v in records:
        assert partition_of.setdefault(k, p) == p, f"key {k} in two partitions"
        by_key.setdefault(k, []).append(int(v[1:]))
    assert all(vs == sorted(vs) for vs in by_key.values())


def test_kafka_python_sees_the_cluster_and_round_trips(shared_cluster: LocalCluster) -> None:
    cluster = shared_cluster
    topic = "kafka-python-topic"
    cluster.create_topic(topic, 3, 3)
    cluster.wait_full_isr([topic], 3, timeout_s=30)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        described = admin.describe_cluster()
    finally:
        admin.close()
    assert described["controller_id"] == cluster.controller_id()
    assert sorted(b["broker_id"] for b in described["brokers"]) == [1, 2, 3]

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", key_serializer=str.encode,
                             value_serializer=str.encode)
    sent = {}
    for i in range(500):
        md = producer.send(topic, key=f"k{i % 11}", value=f"v{i}").get(timeout=30)
        sent[f"v{i}"] = (md.partition, md.offset)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=5000)
    consumer.assign([TopicPartition(topic, p) for p in range(3)])
    try:
        got = {}
        for msg in consumer:
            got[msg.value.decode()] = (msg.partition, msg.offset)
            if len(got) == len(sent):
                break
    finally:
        consumer.close()
    assert got == sent


def test_a_refused_config_change_changes_nothing_on_any_broker(shared_cluster: LocalCluster) -> None:
    """ZkAdminManager.incrementalAlterConfigs validates the new set before it writes anything, so a
    refused change (INVALID_CONFIG) leaves the topic's configs as they were, on the broker that
    handled it and on every other, and a later change still goes through."""
    cluster = shared_cluster
    topic = "refused-config"
    cluster.create_topic(topic, 1, 3, **{"retention.ms": "100000"})

    def alter(address: str, value: str) -> int:
        R = IncrementalAlterConfigsRequest.AlterConfigsResource
        with RawConnection(address) as conn:
            resp = conn.request(IncrementalAlterConfigsRequest(version=1, validate_only=False, resources=[
                R(resource_type=2, resource_name=topic, configs=[R.AlterableConfig(name="retention.ms", config_operation=0,
                                                                                  value=value)])]),
                IncrementalAlterConfigsResponse, 1)
        return int(resp.responses[0].error_code)

    def retention(address: str) -> str:
        R = DescribeConfigsRequest.DescribeConfigsResource
        with RawConnection(address) as conn:
            resp = conn.request(DescribeConfigsRequest(version=4, include_synonyms=False, include_documentation=False,
                                                       resources=[R(resource_type=2, resource_name=topic,
                                                                    configuration_keys=["retention.ms"])]),
                                DescribeConfigsResponse, 4)
        configs = resp.results[0].configs  # none until this broker's metadata has the topic
        return str(configs[0].value) if configs else ""

    addresses = [b.bootstrap for b in cluster.brokers.values()]
    # Every broker caches the topic's configs once it has read them.
    wait_for(lambda: all(retention(a) == "100000" for a in addresses), 30, "every broker describing the topic")
    assert alter(addresses[0], "abc") == 40
    assert [retention(a) for a in addresses] == ["100000"] * len(addresses)
    assert alter(addresses[0], "200000") == 0
    wait_for(lambda: all(retention(a) == "200000" for a in addresses), 30, "every broker seeing the new value")
