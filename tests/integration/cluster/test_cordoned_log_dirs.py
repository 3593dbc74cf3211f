"""KIP-1066 (Kafka 4.3) ``cordoned.log.dirs`` in a ZooKeeper-mode cluster, through confluent-kafka and
kafka-python.

Expected behaviour, from Kafka's source (apache/kafka trunk, KIP-1066):
- ``server/src/test/java/org/apache/kafka/server/CordonedLogDirsIntegrationTest.java``: with every log dir
  of the brokers cordoned, CreateTopics and CreatePartitions fail with InvalidReplicationFactorException;
  after uncordoning they succeed; the config is described as ``DYNAMIC_BROKER_CONFIG`` with its value.
- ``ClusterControlManager.usableBrokers`` / ``BrokerRegistration.hasUncordonedDirs``: automatic placement
  leaves out a broker whose every log dir is cordoned; a manual assignment may still name it.
- KIP-1066's decommissioning flow (cordon, then move the broker's replicas away): ``headwater plan`` drains a
  broker whose every dir is cordoned and never targets it.
- ``DynamicLogConfig.validateCordonedLogDirs``: an entry that is not one of ``log.dirs`` is refused,
  answered by ZkAdminManager (3.9) as INVALID_CONFIG "Invalid config value for resource ...".
In ZooKeeper mode the broker publishes its cordoned dirs in its ``/brokers/ids/<id>`` registration
(docs/operations.md), which the controller watches.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cluster_support import LocalCluster, run_cli, wait_for
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from hw_support import RawConnection
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType
from kafka.protocol.admin import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

INVALID_REPLICATION_FACTOR, INVALID_CONFIG = 38, 40
DYNAMIC_BROKER = 2


def cordon(admin: AdminClient, broker: int, value: str | None) -> None:
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    resource = ConfigResource("broker", str(broker), incremental_configs=[
        ConfigEntry("cordoned.log.dirs", value, incremental_operation=op)])
    next(iter(admin.incremental_alter_configs([resource]).values())).result(30)


def create(admin: AdminClient, topic: NewTopic, validate_only: bool = False) -> int:
    """0, or the error code CreateTopics answered."""
    try:
        admin.create_topics([topic], operation_timeout=10, validate_only=validate_only)[topic.topic].result(30)
    except KafkaException as exc:
        return int(exc.args[0].code())
    return 0


def replicas(cluster: LocalCluster, topic: str) -> dict[int, list[int]]:
    found = cluster.zk_json(f"/brokers/topics/{topic}")
    assert found is not None
    return {int(p): r for p, r in found[0]["partitions"].items()}


def test_a_cordoned_broker_gets_no_new_replicas(shared_cluster: LocalCluster, tmp_path: Path) -> None:
    c = shared_cluster
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    cordon(admin, 2, "*")
    kp = KafkaAdminClient(bootstrap_servers=c.bootstrap)
    try:
        described: Any = kp.describe_configs([KpConfigResource(ConfigResourceType.BROKER, "2",
                                                               configs=["cordoned.log.dirs"])], config_filter="all")
    finally:
        kp.close()
    entry = described["broker"]["2"]["cordoned.log.dirs"]
    assert (entry["value"], entry["config_source"]) == ("*", "DYNAMIC_BROKER_CONFIG")
    registration = c.zk_json("/brokers/ids/2")
    assert registration is not None and registration[0]["cordoned_log_dirs"] == registration[0]["log_dirs"]
    # The controller learns it from the registration's data watch: RF 3 no longer fits (validate_only).
    wait_for(lambda: create(admin, NewTopic("probe", 1, 3), validate_only=True) == INVALID_REPLICATION_FACTOR,
             30, "the controller to see broker 2 cordoned")

    assert create(admin, NewTopic("spread", 9, 2)) == 0
    assert not any(2 in r for r in replicas(c, "spread").values())
    admin.create_partitions([NewPartitions("spread", 12)], operation_timeout=10)["spread"].result(30)
    wait_for(lambda: len(replicas(c, "spread")) == 12, 10, "12 partitions")
    assert not any(2 in r for r in replicas(c, "spread").values())
    assert create(admin, NewTopic("wide", 1, 3)) == INVALID_REPLICATION_FACTOR
    # Kafka 4.3 does not refuse a manual assignment naming a cordoned broker.
    assert create(admin, NewTopic("manual", 1, replica_assignment=[[2, 1]])) == 0

    # The planner reads the cordon over the Kafka protocol and drains the broker ("drain, never target").
    plan = tmp_path / "plan.json"
    run_cli("plan", "--bootstrap-server", c.bootstrap, "--engine", "local", "--format", "json", "-o", str(plan))
    moved = {(e["topic"], e["partition"]): e["replicas"] for e in json.loads(plan.read_text())["partitions"]}
    assert moved[("manual", 0)] == [1, 3] or moved[("manual", 0)] == [3, 1]
    assert not any(2 in r for r in moved.values())

    # Every broker cordoned: nothing can be placed, as in CordonedLogDirsIntegrationTest.
    for b in (1, 3):
        cordon(admin, b, "*")
    wait_for(lambda: create(admin, NewTopic("probe", 1, 1), validate_only=True) == INVALID_REPLICATION_FACTOR,
             30, "every broker cordoned")
    with pytest.raises(KafkaException) as refused:
        admin.create_partitions([NewPartitions("spread", 13)], operation_timeout=10)["spread"].result(30)
    assert refused.value.args[0].code() == INVALID_REPLICATION_FACTOR

    # Uncordoned (the config deleted, or an empty list): placement uses the brokers again.
    cordon(admin, 1, None)
    cordon(admin, 2, "")
    cordon(admin, 3, None)
    wait_for(lambda: create(admin, NewTopic("probe", 1, 3), validate_only=True) == 0, 30, "every broker uncordoned")
    assert c.zk_json("/brokers/ids/2") is not None and "cordoned_log_dirs" not in c.zk_json("/brokers/ids/2")[0]


def test_a_dir_outside_log_dirs_is_refused(shared_cluster: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": shared_cluster.bootstrap})
    with pytest.raises(KafkaException) as refused:
        cordon(admin, 3, "/nowhere")
    error = refused.value.args[0]
    assert error.code() == INVALID_CONFIG
    assert error.str() == (
        "Invalid config value for resource ConfigResource(type=BROKER, name='3'): Invalid value [/nowhere] for "
        "configuration cordoned.log.dirs: Invalid entries in cordoned.log.dirs: [/nowhere]. All cordoned log dirs "
        "must be entries of log.dirs or log.dir.")
    # A per-broker config: the cluster default is refused (DynamicBrokerConfig.validateConfigs, 3.9).
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    with RawConnection(shared_cluster.brokers[3].bootstrap) as conn:
        resp = conn.request(IncrementalAlterConfigsRequest(version=1, validate_only=False, resources=[
            R(resource_type=4, resource_name="", configs=[R.AlterableConfig(
                name="cordoned.log.dirs", config_operation=0, value="*")])]), IncrementalAlterConfigsResponse, 1)
    assert resp.responses[0].error_code == INVALID_CONFIG
    assert "broker id must be specified: Set(cordoned.log.dirs)" in resp.responses[0].error_message
