"""Real clients over SASL_SSL, SASL_PLAINTEXT and SSL: kafka-python, confluent-kafka and kcat, with
SCRAM-SHA-512 and PLAIN; the errors Kafka gives a wrong password and an unknown mechanism; the
listener a client came in on deciding the addresses Metadata gives it."""

from __future__ import annotations

import json
import socket
import ssl
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from secure_broker import SCRAM_PASSWORD, SCRAM_USER, SecureBroker, start_secure_broker

KCAT = "/usr/bin/kcat"


@pytest.fixture(scope="module")
def sb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    s = start_secure_broker(tmp_path_factory.mktemp("secure-broker"))
    try:
        yield s
    finally:
        s.broker.stop()


def kp_settings(sb: SecureBroker, mechanism: str) -> dict[str, object]:
    user, password = (SCRAM_USER, SCRAM_PASSWORD) if mechanism.startswith("SCRAM") else ("alice", "alice-secret")
    return dict(bootstrap_servers=sb.address(sb.sasl_ssl), security_protocol="SASL_SSL", sasl_mechanism=mechanism,
                sasl_plain_username=user, sasl_plain_password=password, ssl_cafile=str(sb.tls.ca))


def create_topic(sb: SecureBroker, name: str) -> None:
    r = sb.headwater("topics", "--bootstrap-server", sb.address(sb.sasl_ssl), "--command-config", str(sb.admin_config),
                     "--create", "--topic", name, "--partitions", "1", "--replication-factor", "1")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_kafka_python_produces_and_consumes_over_sasl_ssl(sb: SecureBroker, topic_name: Callable[..., str],
                                                          mechanism: str) -> None:
    topic = topic_name()
    create_topic(sb, topic)
    settings = kp_settings(sb, mechanism)
    producer = KafkaProducer(**settings)  # type: ignore[arg-type]
    for i in range(50):
        producer.send(topic, f"m{i}".encode())
    producer.flush(10)
    producer.close()
    consumer = KafkaConsumer(**settings, auto_offset_reset="earliest", consumer_timeout_ms=10000)  # type: ignore[arg-type]
    consumer.assign([KafkaTopicPartition(topic, 0)])
    values = []
    for m in consumer:
        values.append(m.value)
        if len(values) == 50:
            break
    consumer.close()
    assert values == [f"m{i}".encode() for i in range(50)]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_confluent_kafka_produces_and_consumes_over_sasl_ssl(sb: SecureBroker, topic_name: Callable[..., str],
                                                             mechanism: str) -> None:
    topic = topic_name()
    create_topic(sb, topic)
    user, password = (SCRAM_USER, SCRAM_PASSWORD) if mechanism.startswith("SCRAM") else ("alice", "alice-secret")
    conf = {"bootstrap.servers": sb.address(sb.sasl_ssl), "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password, "ssl.ca.location": str(sb.tls.ca)}
    producer = Producer(conf)
    for i in range(50):
        producer.produce(topic, f"c{i}".encode())
    assert producer.flush(15) == 0
    consumer = Consumer({**conf, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 15
    while len(got) < 50 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None:
            assert msg.error() is None, msg.error()
            got.append(msg.value())
    consumer.close()
    assert got == [f"c{i}".encode() for i in range(50)]


def test_a_consumer_group_over_sasl_ssl_finds_its_coordinator_on_that_listener(sb: SecureBroker,
                                                                                 topic_name: Callable[..., str]) -> None:
    """FindCoordinator answers the endpoint of the client's listener, as Metadata does: the broker's
    first listener is PLAINTEXT, and a SASL_SSL group member sent there could never join."""
    topic = topic_name()
    create_topic(sb, topic)
    conf = {"bootstrap.servers": sb.address(sb.sasl_ssl), "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
            "sasl.username": "alice", "sasl.password": "alice-secret", "ssl.ca.location": str(sb.tls.ca)}
    producer = Producer(conf)
    for i in range(10):
        producer.produce(topic, f"g{i}".encode())
    assert producer.flush(15) == 0
    consumer = Consumer({**conf, "group.id": f"{topic}-group", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 30
        while len(got) < 10 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(msg.value())
        assert got == [f"g{i}".encode() for i in range(10)]
        committed = consumer.commit(asynchronous=False)
        assert committed is not None and all(tp.error is None for tp in committed)
    finally:
        consumer.close()


def kcat(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KCAT, *args], input=stdin, capture_output=True, text=True, timeout=60)


def test_kcat_over_sasl_ssl_with_scram_and_plain_and_over_ssl_with_a_client_certificate(
        sb: SecureBroker, topic_name: Callable[..., str]) -> None:
    topic = topic_name()
    create_topic(sb, topic)
    scram_args = ["-b", sb.address(sb.sasl_ssl), "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
                  "-X", f"sasl.username={SCRAM_USER}", "-X", f"sasl.password={SCRAM_PASSWORD}",
                  "-X", f"ssl.ca.location={sb.tls.ca}"]
    r = kcat(*scram_args, "-P", "-t", topic, stdin="k1\nk2\nk3\n")
    assert r.returncode == 0, r.stderr
    plain_args = ["-b", sb.address(sb.sasl_ssl), "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=PLAIN",
                  "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret", "-X", f"ssl.ca.location={sb.tls.ca}"]
    r = kcat(*plain_args, "-C", "-t", topic, "-o", "beginning", "-e", "-q")
    assert r.returncode == 0 and r.stdout.split() == ["k1", "k2", "k3"], r.stderr
    ssl_args = ["-b", sb.address(sb.ssl), "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={sb.tls.ca}",
                "-X", f"ssl.certificate.location={sb.tls.client_cert}", "-X", f"ssl.key.location={sb.tls.client_key}"]
    r = kcat(*ssl_args, "-C", "-t", topic, "-o", "beginning", "-e", "-q")
    assert r.returncode == 0 and r.stdout.split() == ["k1", "k2", "k3"], r.stderr
    # ssl.client.auth=required: no certificate, no connection.
    r = kcat("-b", sb.address(sb.ssl), "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={sb.tls.ca}", "-L",
             "-m", "1")
    assert r.returncode != 0


def test_metadata_gives_the_endpoints_of_the_clients_listener(sb: SecureBroker) -> None:
    for port, extra in ((sb.broker.port, {}), (sb.sasl_ssl, kp_settings(sb, "PLAIN"))):
        admin = KafkaAdminClient(**{**extra, "bootstrap_servers": sb.address(port)})  # type: ignore[arg-type]
        try:
            brokers = admin.describe_cluster()["brokers"]
        finally:
            admin.close()
        assert [(b["host"], b["port"]) for b in brokers] == [("127.0.0.1", port)]


# --- raw protocol: the errors, and the connection closing after them ------------------------------------


def send(sock: socket.socket, request: object, correlation_id: int) -> None:
    request.with_header(correlation_id=correlation_id, client_id="raw")  # type: ignore[attr-defined]
    sock.sendall(request.encode(header=True, framed=True))  # type: ignore[attr-defined]


def recv_frame(sock: socket.socket) -> bytes | None:
    """One response frame, or None when the broker closed the connection."""
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    (size,) = struct.unpack(">i", head)
    body = b""
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        if not chunk:
            return None
        body += chunk
    return body


def closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, ssl.SSLError):
        return True


def connect(sb: SecureBroker, tls: bool) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", sb.sasl_ssl if tls else sb.sasl_plaintext), timeout=10)
    if tls:
        ctx = ssl.create_default_context(cafile=str(sb.tls.ca))
        sock = ctx.wrap_socket(sock, server_hostname="127.0.0.1")
    return sock


@pytest.mark.parametrize("tls", [False, True], ids=["sasl_plaintext", "sasl_ssl"])
def test_wrong_password_gets_sasl_authentication_failed_and_the_connection_closes(sb: SecureBroker, tls: bool) -> None:
    with connect(sb, tls) as sock:
        send(sock, SaslHandshakeRequest(version=1, mechanism="PLAIN"), 1)
        hs = SaslHandshakeResponse.decode(recv_frame(sock), version=1, header=True)
        assert hs.error_code == 0 and set(hs.mechanisms) == {"PLAIN", "SCRAM-SHA-512"}
        send(sock, SaslAuthenticateRequest(version=2, auth_bytes=b"\0alice\0wrong"), 2)
        resp = SaslAuthenticateResponse.decode(recv_frame(sock), version=2, header=True)
        assert resp.error_code == 58 and "Invalid username or password" in resp.error_message
        assert closed(sock)


def test_unknown_mechanism_gets_unsupported_sasl_mechanism_with_the_enabled_list(sb: SecureBroker) -> None:
    with connect(sb, False) as sock:
        send(sock, SaslHandshakeRequest(version=1, mechanism="GSSAPI"), 1)
        hs = SaslHandshakeResponse.decode(recv_frame(sock), version=1, header=True)
        assert hs.error_code == 33 and hs.mechanisms == ["PLAIN", "SCRAM-SHA-512"]
        assert closed(sock)


def test_requests_before_authentication_close_the_connection_unanswered(sb: SecureBroker) -> None:
    with connect(sb, False) as sock:
        send(sock, MetadataRequest(version=4, topics=None, allow_auto_topic_creation=False), 1)
        assert recv_frame(sock) is None
    with connect(sb, False) as sock:  # SaslAuthenticate before SaslHandshake
        send(sock, SaslAuthenticateRequest(version=1, auth_bytes=b"\0alice\0alice-secret"), 1)
        assert recv_frame(sock) is None


def test_scram_over_v0_raw_tokens_then_requests_are_served(sb: SecureBroker) -> None:
    from headwater.security.scram import ScramClient
    with connect(sb, False) as sock:
        send(sock, SaslHandshakeRequest(version=0, mechanism="SCRAM-SHA-512"), 1)
        assert SaslHandshakeResponse.decode(recv_frame(sock), version=0, header=True).error_code == 0
        client = ScramClient("SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD)
        sock.sendall(struct.pack(">i", len(client.first())) + client.first())
        server_first = recv_frame(sock)
        assert server_first is not None
        final = client.final(server_first)
        sock.sendall(struct.pack(">i", len(final)) + final)
        server_final = recv_frame(sock)
        assert server_final is not None
        client.verify(server_final)
        send(sock, MetadataRequest(version=4, topics=None, allow_auto_topic_creation=False), 2)
        assert recv_frame(sock) is not None
        send(sock, SaslHandshakeRequest(version=1, mechanism="PLAIN"), 3)  # once authenticated: illegal state
        assert SaslHandshakeResponse.decode(recv_frame(sock), version=1, header=True).error_code == 34


def test_admin_cli_with_a_wrong_password_fails_clearly(sb: SecureBroker, tmp_path: object) -> None:
    bad = sb.admin_config.with_name("bad.properties")
    bad.write_text(sb.admin_config.read_text().replace('password="admin-secret"', 'password="nope"'))
    r = sb.headwater("topics", "--bootstrap-server", sb.address(sb.sasl_ssl), "--command-config", str(bad), "--list")
    assert r.returncode == 1 and "SASL authentication" in r.stderr and "Invalid username or password" in r.stderr


def test_scram_credentials_describe_delete_and_kafkas_checks(sb: SecureBroker) -> None:
    cfg = ["--bootstrap-server", sb.address(sb.sasl_ssl), "--command-config", str(sb.admin_config)]
    r = sb.headwater("configs", *cfg, "--alter", "--entity-type", "users", "--entity-name", "carol",
                     "--add-config", "SCRAM-SHA-512=[iterations=100,password=x]")
    assert r.returncode == 1 and "Too few iterations" in r.stderr
    r = sb.headwater("configs", *cfg, "--alter", "--entity-type", "users", "--entity-name", "carol",
                     "--add-config", "SCRAM-SHA-512=[password=carol-pw],controller_mutation_rate=5")
    assert r.returncode == 0, r.stderr
    r = sb.headwater("configs", *cfg, "--describe", "--entity-type", "users", "--entity-name", "carol")
    assert r.returncode == 0
    assert "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-512=iterations=4096" in r.stdout
    assert "controller_mutation_rate=5.0" in r.stdout and "salt" not in r.stdout
    r = sb.headwater("configs", *cfg, "--alter", "--entity-type", "users", "--entity-name", "carol",
                     "--delete-config", "SCRAM-SHA-512")
    assert r.returncode == 0, r.stderr
    r = sb.headwater("configs", *cfg, "--describe", "--entity-type", "users", "--entity-name", "carol")
    assert "SCRAM" not in r.stdout and "controller_mutation_rate=5.0" in r.stdout  # the quota stays
    r = sb.headwater("configs", *cfg, "--alter", "--entity-type", "users", "--entity-name", "carol",
                     "--delete-config", "SCRAM-SHA-512")
    assert r.returncode == 1 and "does not exist" in r.stderr


def test_plan_reads_a_secured_cluster_with_command_config(sb: SecureBroker, tmp_path: Path,
                                                          topic_name: Callable[..., str]) -> None:
    create_topic(sb, topic_name())
    out = tmp_path / "plan.json"
    r = sb.headwater("plan", "--bootstrap-server", sb.address(sb.sasl_ssl), "--command-config", str(sb.admin_config),
                     "--engine", "local", "--format", "json", "--capacity-bytes", str(10**12), "-o", str(out))
    assert r.returncode == 0, r.stderr
    # Only a client with the file's TLS and SASL settings gets an answer on this listener.
    assert json.loads(r.stdout)["timings_s"]["read_live_s"] > 0


def test_standalone_credentials_survive_a_restart(sb: SecureBroker, topic_name: Callable[..., str]) -> None:
    """Last in this module: it restarts the shared broker. SCRAM users of a standalone broker live in
    its local config file, so bob still logs in afterwards."""
    topic = topic_name()
    create_topic(sb, topic)
    assert sb.broker.stop() == 0
    sb.broker.start()
    producer = KafkaProducer(**kp_settings(sb, "SCRAM-SHA-512"))  # type: ignore[arg-type]
    producer.send(topic, b"after restart").get(15)
    producer.close()
