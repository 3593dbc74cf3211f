"""A secured 3-broker cluster for each inter-broker security protocol, tried as a new user would.

Each cluster is set up as Kafka's documentation describes it: clients on a SASL_SSL listener with
SCRAM-SHA-512 users, the brokers on an inter-broker listener of the protocol under test (PLAIN for
SASL between brokers), ACLs on with ``allow.everyone.if.no.acl.found=false``, and the brokers'
principal among ``super.users``: ``User:broker`` with SASL, the certificate's subject with SSL
client authentication, ``User:ANONYMOUS`` over PLAINTEXT (docs.confluent.io and Kafka's security
docs: a PLAINTEXT inter-broker listener authenticates nobody).

In each: a fresh confluent-kafka group consumer, then a kafka-python one, bootstrapped at a broker
that is not the controller, subscribe to a new topic and read every record a producer wrote, which needs ``__consumer_offsets``
(created on the first FindCoordinator, from whichever broker got it, with its configured replication
factor); and a reassignment moves a replica, copying it over the inter-broker listener. In Kafka every
broker-to-broker connection authenticates as the broker with the inter-broker settings
(``BrokerToControllerChannelManager``, ``ReplicaFetcherBlockingSend``, ``ControllerChannelManager``
all build their ``NetworkClient`` from the inter-broker listener's ``ChannelBuilder``).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cluster_support import wait_for
from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer
from kafka.protocol.admin import AlterPartitionReassignmentsRequest, ListPartitionReassignmentsRequest
from kazoo.client import KazooClient
from tls_material import TlsMaterial, make_tls_material

from headwater.admin.client import AdminClient
from headwater.admin.local import BrokerProcess, ZooKeeperProcess, free_port
from headwater.admin.security import client_security
from headwater.cli import main

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" '
        'user_broker="broker-secret" user_admin="admin-secret";')
USER, PASSWORD = "alice", "alice-secret"
MESSAGES = 200
# The broker's principal on its inter-broker listener, which must be a super user.
BROKER_PRINCIPAL = {"PLAINTEXT": "User:ANONYMOUS", "SSL": "User:CN=localhost", "SASL_PLAINTEXT": "User:broker",
                    "SASL_SSL": "User:broker"}


@dataclass
class SecuredCluster:
    zk: ZooKeeperProcess
    brokers: dict[int, BrokerProcess]
    client_ports: dict[int, int]
    tls: TlsMaterial
    admin_config: Path

    def client_address(self, broker_id: int) -> str:
        return f"127.0.0.1:{self.client_ports[broker_id]}"

    @property
    def bootstrap(self) -> str:
        return ",".join(self.client_address(b) for b in self.brokers)

    def admin_props(self) -> dict[str, str]:
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "admin",
                "sasl.password": "admin-secret", "ssl.truststore.location": str(self.tls.ca)}

    def user_props(self) -> dict[str, str]:
        return {"bootstrap.servers": self.bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": USER, "sasl.password": PASSWORD, "ssl.ca.location": str(self.tls.ca)}

    def headwater(self, *args: str) -> str:
        result = CliRunner().invoke(main, [args[0], "--command-config", str(self.admin_config), *args[1:]])
        assert result.exit_code == 0, f"headwater {' '.join(args)}: {result.output}"
        return result.output

    def metadata(self) -> tuple[int, set[int]]:
        """(controller id, the brokers listed): Metadata lists those the controller told the brokers of."""
        with AdminClient(self.bootstrap, security=client_security(self.admin_props())) as client:
            client.refresh()
            return client.controller_id, set(client.nodes)

    def controller_id(self) -> int:
        return self.metadata()[0]

    def znode(self, path: str) -> dict[str, Any] | None:
        client = KazooClient(hosts=self.zk.connect)
        client.start(timeout=10)
        try:
            if not client.exists(path):
                return None
            return dict(json.loads(client.get(path)[0]))
        finally:
            client.stop()
            client.close()


@pytest.fixture(params=["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"])
def secured(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SecuredCluster]:
    inter_broker: str = request.param
    tls = make_tls_material(tmp_path / "tls")
    zk = ZooKeeperProcess(free_port(), tmp_path).start()
    brokers: dict[int, BrokerProcess] = {}
    client_ports: dict[int, int] = {}
    admin_config = tmp_path / "admin.properties"
    admin_config.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nssl.truststore.location={tls.ca}\n"
                            'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'username="admin" password="admin-secret";\n')
    try:
        for broker_id in (1, 2, 3):
            client_ports[broker_id] = free_port()
            listeners = f"CLIENT://127.0.0.1:{client_ports[broker_id]},BROKER://127.0.0.1:{free_port()}"
            props = {
                "zookeeper.connect": zk.connect, "zookeeper.session.timeout.ms": "6000",
                "listeners": listeners, "advertised.listeners": listeners,
                "listener.security.protocol.map": f"CLIENT:SASL_SSL,BROKER:{inter_broker}",
                "inter.broker.listener.name": "BROKER",
                "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512", "sasl.mechanism.inter.broker.protocol": "PLAIN",
                "sasl.jaas.config": JAAS,
                "ssl.keystore.location": str(tls.server_keystore), "ssl.truststore.location": str(tls.ca),
                "listener.name.broker.ssl.client.auth": "required",
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                "allow.everyone.if.no.acl.found": "false",
                "super.users": f"User:admin;{BROKER_PRINCIPAL[inter_broker]}",
                "default.replication.factor": "3", "offsets.topic.replication.factor": "3",
            }
            brokers[broker_id] = BrokerProcess(broker_id, client_ports[broker_id], tmp_path, props)
        for b in brokers.values():
            b.start(wait=False)
        for b in brokers.values():
            b.wait_ready()
        cluster = SecuredCluster(zk, brokers, client_ports, tls, admin_config)
        def all_registered() -> bool:
            # Listening is not registered: a topic of RF 3 needs all three in the controller's view.
            controller, listed = cluster.metadata()
            return controller > 0 and listed == set(brokers)

        wait_for(all_registered, 30, "a controller and every broker registered")
        cluster.headwater("configs", "--bootstrap-server", cluster.bootstrap, "--alter", "--entity-type", "users",
                          "--entity-name", USER, "--add-config", f"SCRAM-SHA-512=[iterations=8192,password={PASSWORD}]")
        yield cluster
    finally:
        for b in brokers.values():
            b.stop()
            if b.alive:
                b.kill9()
        zk.stop()


def test_group_consumer_and_reassignment_on_a_secured_cluster(secured: SecuredCluster) -> None:
    c = secured
    topic, group = f"orders-{uuid.uuid4().hex[:6]}", f"billing-{uuid.uuid4().hex[:6]}"
    c.headwater("topics", "--bootstrap-server", c.bootstrap, "--create", "--topic", topic, "--partitions", "3",
                "--replication-factor", "3")
    kp_group = group + "-kafka-python"
    for args in (("--operation", "Write", "--operation", "Describe", "--topic", topic),
                 ("--operation", "Read", "--operation", "Describe", "--topic", topic),
                 ("--operation", "Read", "--group", group), ("--operation", "Read", "--group", kp_group)):
        c.headwater("acls", "--bootstrap-server", c.bootstrap, "--add", "--allow-principal", f"User:{USER}", *args)

    controller = c.controller_id()
    other = next(b for b in c.brokers if b != controller)
    consumer = Consumer({**c.user_props(), "bootstrap.servers": c.client_address(other), "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": True})
    try:
        consumer.subscribe([topic])
        consumer.poll(0.5)  # joins: FindCoordinator reaches a broker that is not the controller
        offsets = wait_for(lambda: c.znode("/brokers/topics/__consumer_offsets"), 10,
                           "__consumer_offsets to be created")
        assert {len(r) for r in offsets["partitions"].values()} == {3}, offsets

        errors: list[object] = []
        producer = Producer(c.user_props())
        for i in range(MESSAGES):
            producer.produce(topic, f"m{i}".encode(), partition=i % 3,
                             on_delivery=lambda err, _m: errors.append(err) if err else None)
        assert producer.flush(30) == 0 and errors == []

        got: set[bytes] = set()
        deadline = time.monotonic() + 60
        while len(got) < MESSAGES and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.add(bytes(m.value() or b""))
        assert got == {f"m{i}".encode() for i in range(MESSAGES)}, f"read {len(got)} of {MESSAGES}"
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()

    # kafka-python's group consumer, bootstrapped at the same broker, reads them all too.
    kp = KafkaConsumer(topic, bootstrap_servers=c.client_address(other), group_id=kp_group,
                       auto_offset_reset="earliest", consumer_timeout_ms=30_000, security_protocol="SASL_SSL",
                       sasl_mechanism="SCRAM-SHA-512", sasl_plain_username=USER, sasl_plain_password=PASSWORD,
                       ssl_cafile=str(c.tls.ca))
    try:
        read = set()
        for m in kp:
            read.add(bytes(m.value))
            if len(read) == MESSAGES:
                break
        assert read == {f"m{i}".encode() for i in range(MESSAGES)}, f"kafka-python read {len(read)} of {MESSAGES}"
    finally:
        kp.close()

    # A reassignment copies a replica over the inter-broker listener and completes.
    moved = f"moved-{uuid.uuid4().hex[:6]}"
    c.headwater("topics", "--bootstrap-server", c.bootstrap, "--create", "--topic", moved, "--partitions", "1",
                "--replication-factor", "1")
    source = c.znode(f"/brokers/topics/{moved}")
    assert source is not None
    (start,) = source["partitions"]["0"]
    target = next(b for b in c.brokers if b != start)
    producer = Producer(c.user_props() | {"sasl.username": "admin", "sasl.password": "admin-secret",
                                          "sasl.mechanism": "PLAIN"})
    for i in range(100):
        producer.produce(moved, f"r{i}".encode())
    assert producer.flush(30) == 0
    T = AlterPartitionReassignmentsRequest.ReassignableTopic
    with AdminClient(c.bootstrap, security=client_security(c.admin_props())) as client:
        resp = client.send_to_controller(AlterPartitionReassignmentsRequest, dict(
            timeout_ms=30000, allow_replication_factor_change=True,
            topics=[T(name=moved, partitions=[T.ReassignablePartition(partition_index=0, replicas=[target])])]),
            lambda r: [r.error_code], max_version=0)
        assert resp.error_code == 0

        def done() -> bool:
            state = c.znode(f"/brokers/topics/{moved}")
            listed = client.send_to_controller(ListPartitionReassignmentsRequest, dict(timeout_ms=30000, topics=None),
                                               lambda r: [r.error_code])
            return state is not None and state["partitions"]["0"] == [target] and not listed.topics

        wait_for(done, 60, f"{moved}-0 to move from {start} to {target}")
