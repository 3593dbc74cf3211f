"""Three brokers on ZooKeeper that talk to each other over SASL_SSL, with zookeeper.set.acl=true.

Clients use the PLAINTEXT listener here, so every connection to a SASL_SSL port is a broker's
(follower fetchers, the controller, AlterPartition). The test checks that replication runs over
those connections, that the znodes carry Kafka's secure ACLs (the brokers' digest identity may do
everything, the world may read, nobody else may read credentials), that a session without the
brokers' identity cannot write broker metadata, and that a SCRAM user created through one broker
(stored in ZooKeeper) logs in on another.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator

import pytest
from cluster_support import LocalCluster, run_cli, start_cluster, wait_for
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_digest_acl_credential
from tls_material import TlsMaterial, make_tls_material

from headwater.admin.local import free_port

ZK_DIGEST = "kafka:zk-secret"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
        'password="broker-secret" user_broker="broker-secret" user_alice="alice-secret";')


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, TlsMaterial, dict[int, int]]]:
    d = tmp_path_factory.mktemp("secure-cluster")
    tls = make_tls_material(d / "tls")
    sasl_ports: dict[int, int] = {}

    def listeners(broker_id: int, port: int) -> dict[str, str]:
        sasl_ports[broker_id] = free_port()
        value = f"PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{sasl_ports[broker_id]}"
        return {"listeners": value, "advertised.listeners": value}

    cluster = start_cluster(d, 3, {
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.jaas.config": JAAS,
        "ssl.keystore.location": str(tls.server_keystore),
        "ssl.truststore.location": str(tls.ca),
        "zookeeper.set.acl": "true",
        "zookeeper.digest": ZK_DIGEST,
    }, broker_props=listeners)
    try:
        yield cluster, tls, sasl_ports
    finally:
        cluster.stop()


def established_to(ports: set[int]) -> int:
    out = subprocess.run(["ss", "-Htn", "state", "established"], capture_output=True, text=True, check=True).stdout
    return sum(1 for line in out.splitlines() if line.split() and int(line.split()[2].rsplit(":", 1)[1]) in ports)


def test_replication_and_control_run_over_sasl_ssl(secure: tuple[LocalCluster, TlsMaterial, dict[int, int]],
                                                   topic_name: Callable[..., str]) -> None:
    cluster, _tls, sasl_ports = secure
    topic = topic_name()
    cluster.create_topic(topic, 3, 3)
    lines = cluster.wait_full_isr([topic], 3)
    assert all(line.full for line in lines)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for i in range(30):
        producer.send(topic, f"r{i}".encode(), partition=i % 3)
    producer.flush(30)
    producer.close()
    # acks=all was answered, so every follower fetched the records: over the brokers' SASL_SSL connections.
    assert established_to(set(sasl_ports.values())) >= 3
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=10000)
    consumer.assign([TopicPartition(topic, p) for p in range(3)])
    got = set()
    for m in consumer:
        got.add(m.value)
        if len(got) == 30:
            break
    consumer.close()
    assert got == {f"r{i}".encode() for i in range(30)}
    reg = cluster.zk_json("/brokers/ids/1")
    assert reg is not None
    doc = reg[0]
    assert doc["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "SASL_SSL": "SASL_SSL"}
    assert doc["endpoints"] == [f"PLAINTEXT://127.0.0.1:{cluster.brokers[1].port}", f"SASL_SSL://127.0.0.1:{sasl_ports[1]}"]


def test_znodes_have_secure_acls_and_strangers_cannot_write(
        secure: tuple[LocalCluster, TlsMaterial, dict[int, int]], topic_name: Callable[..., str]) -> None:
    cluster, tls, sasl_ports = secure
    assert cluster.zk is not None
    # A SCRAM user through broker 1; it is stored in ZooKeeper and works on broker 3.
    run_cli("configs", "--bootstrap-server", cluster.brokers[1].bootstrap, "--alter", "--entity-type", "users",
            "--entity-name", "bob", "--add-config", "SCRAM-SHA-512=[password=bob-secret]")
    topic = topic_name()
    cluster.create_topic(topic, 1, 3)

    def scram_produce() -> bool:
        p = KafkaProducer(bootstrap_servers=f"127.0.0.1:{sasl_ports[3]}", security_protocol="SASL_SSL",
                          sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="bob", sasl_plain_password="bob-secret",
                          ssl_cafile=str(tls.ca), acks="all")
        try:
            p.send(topic, b"scram").get(10)
            return True
        finally:
            p.close()

    wait_for(scram_produce, 30, "bob to log in with SCRAM on broker 3")

    digest_id = make_digest_acl_credential(*ZK_DIGEST.split(":", 1))
    admin = KazooClient(hosts=cluster.zk.connect, timeout=10, auth_data=[("digest", ZK_DIGEST)])
    stranger = KazooClient(hosts=cluster.zk.connect, timeout=10)
    admin.start()
    stranger.start()
    try:
        for path in ("/brokers/ids/1", f"/brokers/topics/{topic}", "/controller", "/brokers/ids"):
            acls, _stat = admin.get_acls(path)
            assert {(a.id.scheme, a.id.id, a.perms) for a in acls} == {("digest", digest_id, 31), ("world", "anyone", 1)}, path
        acls, _stat = admin.get_acls("/config/users/bob")
        assert {(a.id.scheme, a.id.id) for a in acls} == {("digest", digest_id)}  # credentials: brokers only
        assert b"SCRAM-SHA-512" in admin.get("/config/users/bob")[0]
        # The world reads broker metadata but cannot write it, nor read credentials.
        assert stranger.get("/brokers/ids/1")[0]
        with pytest.raises(NoAuthError):
            stranger.create("/brokers/ids/99", b"{}", ephemeral=True)
        with pytest.raises(NoAuthError):
            stranger.set(f"/brokers/topics/{topic}", b"{}")
        with pytest.raises(NoAuthError):  # deleting needs DELETE on the parent, /brokers/ids
            stranger.delete("/brokers/ids/1")
        with pytest.raises(NoAuthError):
            stranger.get("/config/users/bob")
    finally:
        for client in (admin, stranger):
            client.stop()
            client.close()
