"""The issue's acceptance with authenticated principals (SASL PLAIN) on a 2-broker ZooKeeper cluster.

Every connection authenticates, the brokers' own too: each broker has one SASL_PLAINTEXT listener,
which is also the inter-broker one, and logs in to the others as User:broker, a super user.

- User:ops without ALTER on CLUSTER gets CLUSTER_AUTHORIZATION_FAILED from AlterPartitionReassignments
  and no reassignment starts; after ``headwater acls --add --allow-principal User:ops --operation Alter
  --cluster`` the same request succeeds.
- User:reader with READ but not WRITE on a topic consumes and cannot produce.
- The audit log has a line for each, with the principal.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import TopicAuthorizationFailedError
from kafka.protocol.admin import AlterPartitionReassignmentsRequest, ListPartitionReassignmentsRequest
from kazoo.client import KazooClient

from headwater.admin.client import AdminClient
from headwater.admin.local import BrokerProcess, ZooKeeperProcess, free_port
from headwater.admin.security import client_security
from headwater.cli import main

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" '
        'user_broker="broker-secret" user_admin="admin-secret" user_ops="ops-secret" user_dev="dev-secret" '
        'user_reader="reader-secret";')


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ZooKeeperProcess, dict[int, tuple[BrokerProcess, str]]]]:
    root = Path(tmp_path_factory.mktemp("acl-sasl"))
    zk = ZooKeeperProcess(free_port(), root).start()
    brokers: dict[int, tuple[BrokerProcess, str]] = {}
    try:
        for broker_id in (1, 2):
            port = free_port()
            listeners = f"SASL_PLAINTEXT://127.0.0.1:{port}"
            props = {
                "zookeeper.connect": zk.connect, "zookeeper.session.timeout.ms": "6000",
                "listeners": listeners, "advertised.listeners": listeners,
                "inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN",
                "sasl.mechanism.inter.broker.protocol": "PLAIN", "sasl.jaas.config": JAAS,
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                "super.users": "User:admin;User:broker", "default.replication.factor": "1",
            }
            brokers[broker_id] = (BrokerProcess(broker_id, port, root, props), f"127.0.0.1:{port}")
        for b, _ in brokers.values():
            b.start(wait=False)
        for b, _ in brokers.values():
            b.wait_ready()
        yield zk, brokers
    finally:
        for b, _ in brokers.values():
            b.stop()
            if b.alive:
                b.kill9()
        zk.stop()


def sasl(user: str) -> dict[str, str]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": user,
            "sasl.password": f"{user}-secret"}


def kafka_python(user: str) -> dict[str, Any]:
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_plain_username": user,
            "sasl_plain_password": f"{user}-secret"}


def wait_for(cond: Callable[[], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = cond()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def reassign(bootstrap: str, user: str, topic: str, replicas: list[int]) -> int:
    T = AlterPartitionReassignmentsRequest.ReassignableTopic
    P = T.ReassignablePartition
    with AdminClient(bootstrap, security=client_security(sasl(user))) as client:
        resp = client.send_to_controller(AlterPartitionReassignmentsRequest, dict(
            timeout_ms=30000, allow_replication_factor_change=True,
            topics=[T(name=topic, partitions=[P(partition_index=0, replicas=replicas)])]),
            lambda r: [r.error_code], max_version=0)
        return int(resp.error_code)


def ongoing(bootstrap: str) -> list[str]:
    with AdminClient(bootstrap, security=client_security(sasl("admin"))) as client:
        resp = client.send_to_controller(ListPartitionReassignmentsRequest, dict(timeout_ms=30000, topics=None),
                                         lambda r: [r.error_code])
        assert resp.error_code == 0
        return [t.name for t in resp.topics]


def replicas(zk: ZooKeeperProcess, topic: str) -> list[int]:
    client = KazooClient(hosts=zk.connect)
    client.start(timeout=10)
    try:
        return list(json.loads(client.get(f"/brokers/topics/{topic}")[0])["partitions"]["0"])
    finally:
        client.stop()
        client.close()


def cli(tmp_path: Path, user: str, *args: str) -> tuple[int, str]:
    config = tmp_path / f"{user}.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in sasl(user).items()))
    result = CliRunner().invoke(main, [args[0], "--command-config", str(config), *args[1:]])
    return result.exit_code, result.output


def audit(brokers: dict[int, tuple[BrokerProcess, str]]) -> list[dict[str, Any]]:
    b = brokers[1][0]
    return [json.loads(line) for path in sorted((b.data_dir / "audit").glob("broker-*-audit.log"))
            for line in path.read_text().splitlines()]


def test_alter_on_cluster_gates_reassignment(cluster: tuple[ZooKeeperProcess, dict[int, tuple[BrokerProcess, str]]],
                                             tmp_path: Path) -> None:
    zk, brokers = cluster
    bootstrap = ",".join(s for _, s in brokers.values())
    code, out = cli(tmp_path, "admin", "topics", "--bootstrap-server", bootstrap, "--create", "--topic", "moves",
                    "--partitions", "1", "--replica-assignment", "1")
    assert code == 0, out
    wait_for(lambda: "moves" in cli(tmp_path, "admin", "topics", "--bootstrap-server", brokers[2][1], "--list")[1],
             20, "the topic on broker 2")

    assert reassign(bootstrap, "ops", "moves", [2]) == 31
    assert reassign(bootstrap, "dev", "moves", [2]) == 31
    time.sleep(0.5)
    assert ongoing(bootstrap) == [] and replicas(zk, "moves") == [1]
    # Without ALTER on the cluster, ops cannot grant itself ACLs either.
    code, out = cli(tmp_path, "ops", "acls", "--bootstrap-server", bootstrap, "--add", "--allow-principal", "User:ops",
                    "--operation", "Alter", "--cluster")
    assert code == 1 and "CLUSTER_AUTHORIZATION_FAILED" in out, out

    code, out = cli(tmp_path, "admin", "acls", "--bootstrap-server", brokers[2][1], "--add", "--allow-principal",
                    "User:ops", "--operation", "Alter", "--cluster")
    assert code == 0 and "(principal=User:ops, host=*, operation=ALTER, permissionType=ALLOW)" in out, out
    # Whichever broker is the controller learns of it from the change notification.
    wait_for(lambda: reassign(bootstrap, "ops", "moves", [2]) == 0, 20, "ops to be allowed")
    wait_for(lambda: replicas(zk, "moves") == [2], 30, "the reassignment to complete")
    assert reassign(bootstrap, "dev", "moves", [1]) == 31

    lines = [ln for ln in audit(brokers) if ln["api"] == "ALTER_PARTITION_REASSIGNMENTS"]
    assert any(ln["principal"] == "User:dev" and ln["outcome"] == "denied" and ln["error_code"] == 31 for ln in lines)
    # The line names what was refused: ALTER on the cluster (docs/security.md, as AclAuthorizer logs it).
    assert all({"type": "CLUSTER", "name": "kafka-cluster", "error_code": 31, "error": "CLUSTER_AUTHORIZATION_FAILED",
                "operation": "ALTER"} in ln["resources"] for ln in lines if ln["outcome"] == "denied")
    assert any(ln["principal"] == "User:ops" and ln["outcome"] == "denied" for ln in lines)
    assert any(ln["principal"] == "User:ops" and ln["outcome"] == "allowed" for ln in lines)
    assert any(ln["api"] == "CREATE_ACLS" and ln["principal"] == "User:admin" for ln in audit(brokers))


def test_read_without_write_consumes_but_cannot_produce(
        cluster: tuple[ZooKeeperProcess, dict[int, tuple[BrokerProcess, str]]], tmp_path: Path) -> None:
    _zk, brokers = cluster
    bootstrap = ",".join(s for _, s in brokers.values())
    code, out = cli(tmp_path, "admin", "topics", "--bootstrap-server", bootstrap, "--create", "--topic", "readonly",
                    "--partitions", "1")
    assert code == 0, out
    code, out = cli(tmp_path, "admin", "acls", "--bootstrap-server", bootstrap, "--add", "--allow-principal",
                    "User:reader", "--operation", "Read", "--topic", "readonly")
    assert code == 0, out
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **kafka_python("admin"))
    try:
        for i in range(3):
            wait_for(lambda i=i: producer.send("readonly", f"r{i}".encode()).get(timeout=10), 20, "admin's write")
    finally:
        producer.close()

    consumer = KafkaConsumer("readonly", bootstrap_servers=bootstrap, auto_offset_reset="earliest", group_id=None,
                             enable_auto_commit=False, consumer_timeout_ms=15000, **kafka_python("reader"))
    try:
        got = []
        for msg in consumer:
            got.append(msg.value)
            if len(got) == 3:
                break
    finally:
        consumer.close()
    assert got == [b"r0", b"r1", b"r2"]

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False, retries=0,
                             **kafka_python("reader"))
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send("readonly", b"refused").get(timeout=15)
    finally:
        producer.close()

    denied = [ln for ln in audit(brokers) if ln["principal"] == "User:reader" and ln["outcome"] == "denied"]
    assert any(ln["api"] == "PRODUCE" and ln["error_code"] == 29 and ln["resources"][0]["name"] == "readonly"
               for ln in denied), denied
