"""The broker's authentication settings: refused when they cannot work, and the principal a
connection gets from its certificate or its SASL session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from headwater.metadata.image import BrokerEndpoint, BrokerInfo
from headwater.security.scram import make_credential
from headwater.server.authn import Authenticator
from headwater.server.config import ConfigError, broker_config
from headwater.server.zk import acl_for, zookeeper_security

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required {} user_broker="b-pw" user_alice="a-pw";'


def authenticator(**props: str) -> Authenticator:
    base = {"broker.id": "1", "log.dirs": "/tmp/x", "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093",
            "zookeeper.connect": "127.0.0.1:2181", "connections.max.idle.ms": "0"}
    return Authenticator(broker_config({**base, **props}), lambda m, u: None)


def test_inter_broker_sasl_takes_the_brokers_own_jaas_credentials() -> None:
    a = authenticator(**{"inter.broker.listener.name": "SASL_PLAINTEXT",
                         "sasl.jaas.config": JAAS.format('username="broker" password="b-pw"')})
    sec = a.channel_security
    assert (sec.mechanism, sec.username, sec.password, sec.ssl_context) == ("PLAIN", "broker", "b-pw", None)
    assert authenticator().channel_security.mechanism is None  # PLAINTEXT between brokers
    standalone = Authenticator(broker_config({"broker.id": "1", "log.dirs": "/tmp/x",
                                              "listeners": "SASL_PLAINTEXT://127.0.0.1:9093"}), lambda m, u: None)
    assert standalone.channel_security.mechanism is None  # no peers: no credentials needed


@pytest.mark.parametrize(("props", "message"), [
    ({"inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.jaas.config": JAAS.format("")}, "username"),
    ({"inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
      "sasl.jaas.config": JAAS.format('username="broker" password="b-pw"')}, "is not enabled"),
    ({"sasl.enabled.mechanisms": "GSSAPI"}, "not supported"),
    ({"sasl.jaas.config": "garbage"}, "sasl.jaas.config"),
    ({"zookeeper.set.acl": "true"}, "needs an identity"),
    ({"zookeeper.digest": "nocolon"}, "user:password"),
    ({"sasl.server.max.receive.size": "0"}, "positive integer"),
    ({"connections.max.idle.ms": "soon"}, "non-negative integer"),
    ({"listeners": "SSL://127.0.0.1:9094"}, "ssl.keystore.location"),
])
def test_settings_that_cannot_work_are_refused_at_start(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        authenticator(**props)


def test_zookeeper_identity_from_a_jaas_client_section(tmp_path: Path) -> None:
    jaas = tmp_path / "jaas.conf"
    jaas.write_text('KafkaServer { x required; };\nClient {\n  org.apache.zookeeper.server.auth.DigestLoginModule '
                    'required\n  username="kafka"\n  password="zk-secret";\n};\n')
    assert zookeeper_security({"zookeeper.set.acl": "true", "java.security.auth.login.config": str(jaas)}) == \
        ("kafka:zk-secret", True)
    assert zookeeper_security({}) == (None, False)
    jaas.write_text("KafkaServer { x required; };")
    with pytest.raises(ValueError, match="no Client"):
        zookeeper_security({"java.security.auth.login.config": str(jaas)})


def test_credentials_and_broker_configs_are_not_world_readable() -> None:
    world = ("world", "anyone")
    assert world in {(a.id.scheme, a.id.id) for a in acl_for("/brokers/ids/1")}
    for path in ("/config/users", "/config/users/bob", "/config/brokers/<default>", "/delegation_token/tokens/x"):
        assert world not in {(a.id.scheme, a.id.id) for a in acl_for(path)}, path
    assert world in {(a.id.scheme, a.id.id) for a in acl_for("/config/usersfoo")}


class FakeTransport:
    def __init__(self, peercert: dict[str, Any] | None) -> None:
        self.peercert = peercert

    def get_extra_info(self, name: str) -> Any:
        if name == "ssl_object" and self.peercert is not None:
            cert = self.peercert
            return type("SslObject", (), {"getpeercert": lambda self: cert})()
        return None


class FakeConnection:
    def __init__(self, listener: str, peercert: dict[str, Any] | None = None) -> None:
        self.listener = listener
        self.transport = FakeTransport(peercert)
        self.principal = "User:ANONYMOUS"
        self.sasl: Any = None
        self.max_frame_bytes = -1

    def set_max_frame_bytes(self, limit: int) -> None:
        self.max_frame_bytes = limit


def test_connection_principal_from_the_certificate_and_sasl_sessions_on_sasl_listeners(tmp_path: Path) -> None:
    a = authenticator()
    plain = FakeConnection("PLAINTEXT")
    a.on_open(plain)  # type: ignore[arg-type]
    assert plain.sasl is None and plain.principal == "User:ANONYMOUS" and not a.needs_gate(plain)  # type: ignore[arg-type]
    sasl = FakeConnection("SASL_PLAINTEXT")
    a.on_open(sasl)  # type: ignore[arg-type]
    assert a.needs_gate(sasl) and sasl.max_frame_bytes == 524288  # type: ignore[arg-type]
    # SSL: the subject of a verified certificate names the principal.
    a._ssl["PLAINTEXT"] = None  # type: ignore[assignment]  # pretend the listener has TLS
    cert = {"subject": ((("countryName", "US"),), (("organizationName", "Example"),), (("commonName", "alice"),))}
    tls = FakeConnection("PLAINTEXT", cert)
    a.on_open(tls)  # type: ignore[arg-type]
    assert tls.principal == "User:CN=alice,O=Example,C=US"


def test_scram_credentials_reach_the_sasl_session() -> None:
    cred = make_credential("SCRAM-SHA-256", "pw")
    a = Authenticator(broker_config({"broker.id": "1", "log.dirs": "/tmp/x", "listeners": "SASL_PLAINTEXT://127.0.0.1:9093",
                                     "connections.max.idle.ms": "0"}),
                      lambda m, u: cred if (m, u) == ("SCRAM-SHA-256", "carol") else None)
    conn = FakeConnection("SASL_PLAINTEXT")
    a.on_open(conn)  # type: ignore[arg-type]
    from headwater.security.scram import ScramClient
    client = ScramClient("SCRAM-SHA-256", "carol", "pw")
    assert conn.sasl.handshake(1, "SCRAM-SHA-256").error == 0
    first = conn.sasl.token(client.first())
    final = conn.sasl.token(client.final(first.token))
    assert final.done and final.error == 0 and conn.sasl.principal == "User:carol"


def test_broker_addresses_per_listener() -> None:
    b = BrokerInfo(1, "10.0.0.1", 9094, None, (BrokerEndpoint("CLIENT", "kafka1", 9093, "SASL_SSL"),
                                              BrokerEndpoint("REPLICATION", "10.0.0.1", 9094, "SSL")))
    assert b.address("CLIENT") == ("kafka1", 9093)
    assert b.address("OTHER") is None
    assert BrokerInfo(2, "h", 1).address("CLIENT") == ("h", 1)  # registered without listener names
