"""Client quotas in a cluster: kept in ZooKeeper, visible from every broker, enforced by the controller."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kazoo.client import KazooClient

from headwater.admin.cluster import ClusterState, start_cluster, stop_cluster
from headwater.admin.local import free_port, free_port_range
from headwater.cli import main


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = Path(tmp_path_factory.mktemp("quota-cluster"))
    state = start_cluster(root, 3, free_port_range(3), free_port(), [], {
        "controller.quota.window.num": "2", "controller.quota.window.size.seconds": "1",
    })
    try:
        yield state.bootstrap, root
    finally:
        stop_cluster(root)


def configs(bootstrap: str, *args: str) -> str:
    result = CliRunner().invoke(main, ["configs", "--bootstrap-server", bootstrap, *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_quota_lives_in_zookeeper_and_every_broker_sees_it(cluster: tuple[str, Path]) -> None:
    bootstrap, root = cluster
    _first, second, third = bootstrap.split(",")
    configs(second, "--alter", "--entity-type", "clients", "--entity-name", "etl", "--add-config",
            "controller_mutation_rate=5")
    zk = KazooClient(hosts=f"127.0.0.1:{ClusterState.load(root).zookeeper_port}")
    zk.start(timeout=10)
    try:
        data, _ = zk.get("/config/clients/etl")
        assert json.loads(data) == {"version": 1, "config": {"controller_mutation_rate": "5.0"}}
        assert any(json.loads(zk.get(f"/config/changes/{c}")[0])["entity_path"] == "clients/etl"
                   for c in zk.get_children("/config/changes"))
    finally:
        zk.stop()
        zk.close()
    deadline = time.monotonic() + 20
    while "controller_mutation_rate=5.0" not in configs(third, "--describe", "--entity-type", "clients"):
        assert time.monotonic() < deadline, "broker 3 never saw the quota"
        time.sleep(0.2)


def test_controller_enforces_a_quota_set_through_another_broker(cluster: tuple[str, Path]) -> None:
    bootstrap, _root = cluster
    configs(bootstrap.split(",")[2], "--alter", "--entity-type", "clients", "--entity-name", "bulk",
            "--add-config", "controller_mutation_rate=4")  # burst 2 windows x 1 s x 4 = 8
    # Every broker (the controller among them) learns of it from the change notification.
    deadline = time.monotonic() + 20
    while not all("client-id 'bulk' are controller_mutation_rate=4.0" in configs(b, "--describe", "--entity-type", "clients")
                  for b in bootstrap.split(",")):
        assert time.monotonic() < deadline, "the quota did not reach every broker"
        time.sleep(0.2)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="bulk")
    try:
        result = admin.create_topics([NewTopic(f"bulk-{i}", 5, 1) for i in range(3)], raise_errors=False)
        codes = [t["error_code"] for t in result["topics"]]
        assert codes == [0, 0, 89], codes  # 8 -> 3 -> -2: the third arrives below zero
    finally:
        admin.close()


def test_an_invalid_or_existing_topic_costs_nothing(cluster: tuple[str, Path]) -> None:
    """ZkAdminManager.createTopics validates each topic (TopicExistsException, an invalid config or
    replication factor) before it records the topic's partitions against the quota, so a refused
    topic answers its own error, never 89, and leaves the bucket as it was."""
    bootstrap, _root = cluster
    configs(bootstrap.split(",")[0], "--alter", "--entity-type", "clients", "--entity-name", "careful",
            "--add-config", "controller_mutation_rate=3")  # burst 2 windows x 1 s x 3 = 6
    deadline = time.monotonic() + 20
    while not all("client-id 'careful' are controller_mutation_rate=3.0" in
                  configs(b, "--describe", "--entity-type", "clients") for b in bootstrap.split(",")):
        assert time.monotonic() < deadline, "the quota did not reach every broker"
        time.sleep(0.2)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="careful")
    try:
        def create(*topics: NewTopic) -> list[int]:
            result = admin.create_topics(list(topics), raise_errors=False)
            return [t["error_code"] for t in result["topics"]]

        assert create(NewTopic("careful-a", 5, 1)) == [0]              # 6 -> 1
        # Refused for their own reasons while the bucket is still positive; none of them pays.
        assert create(NewTopic("careful-a", 5, 1)) == [36]             # TOPIC_ALREADY_EXISTS
        assert create(NewTopic("careful-b", 5, 9)) == [38]             # INVALID_REPLICATION_FACTOR
        assert create(NewTopic("careful-c", 5, 1, topic_configs={"retention.ms": "soon"})) == [40]
        # The bucket still holds 1 token (less what it refilled): a 1-partition topic is accepted.
        assert create(NewTopic("careful-d", 1, 1)) == [0]
    finally:
        admin.close()
