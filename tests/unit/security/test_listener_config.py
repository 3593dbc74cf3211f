"""Listener parsing: security protocols, the protocol map, the inter-broker listener."""

from __future__ import annotations

import pytest

from headwater.server.config import ConfigError, Listener, broker_config


def test_old_single_plaintext_config_is_unchanged() -> None:
    c = broker_config({"broker.id": "1", "log.dirs": "/tmp/x", "listeners": "PLAINTEXT://127.0.0.1:9092"})
    assert c.listeners == (Listener("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"),)
    assert c.inter_broker_listener == "PLAINTEXT"
    assert c.advertised_listener == Listener("PLAINTEXT", "127.0.0.1", 9092)


def test_several_listeners_with_protocol_names() -> None:
    c = broker_config({"broker.id": "1", "log.dirs": "/tmp/x",
                       "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093"})
    assert [(lst.name, lst.security_protocol, lst.port) for lst in c.listeners] == \
        [("PLAINTEXT", "PLAINTEXT", 9092), ("SASL_SSL", "SASL_SSL", 9093)]
    assert c.listeners[1].uses_tls and c.listeners[1].uses_sasl and not c.listeners[0].uses_sasl


def test_named_listeners_need_the_map_and_pick_the_inter_broker_one() -> None:
    props = {"broker.id": "1", "log.dirs": "/tmp/x",
             "listeners": "CLIENT://0.0.0.0:9092,REPLICATION://10.0.0.1:9093",
             "advertised.listeners": "CLIENT://kafka.example:9092,REPLICATION://10.0.0.1:9093",
             "listener.security.protocol.map": "CLIENT:SASL_SSL,REPLICATION:SSL",
             "inter.broker.listener.name": "replication"}
    c = broker_config(props)
    assert c.inter_broker_listener == "REPLICATION"
    assert c.advertised_listener == Listener("REPLICATION", "10.0.0.1", 9093, "SSL")
    assert c.listeners[0] == Listener("CLIENT", "0.0.0.0", 9092, "SASL_SSL")
    del props["listener.security.protocol.map"]
    with pytest.raises(ConfigError, match="listener CLIENT has no entry"):
        broker_config(props)


@pytest.mark.parametrize(("extra", "message"), [
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9092"}, "own port"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093"}, "more than once"),
    ({"listeners": "PLAINTEXT://127.0.0.1"}, "NAME://host:port"),
    ({"listeners": "PLAINTEXT://127.0.0.1:99999"}, "NAME://host:port"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092", "listener.security.protocol.map": "PLAINTEXT:TLS"}, "not one of"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092", "advertised.listeners": "SSL://h:1"}, "not one of the listeners"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093", "inter.broker.listener.name": "SASL_SSL"},
     "not one of the listeners"),
    ({"listeners": "SSL://127.0.0.1:9093,SASL_SSL://127.0.0.1:9094", "security.inter.broker.protocol": "PLAINTEXT"},
     "no listener named PLAINTEXT"),
    ({"listeners": "SSL://127.0.0.1:9093", "security.inter.broker.protocol": "SSL", "inter.broker.listener.name": "SSL"},
     "cannot both be set"),
])
def test_bad_listener_configs_name_the_key(extra: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        broker_config({"broker.id": "1", "log.dirs": "/tmp/x", **extra})


def test_security_inter_broker_protocol_selects_the_listener() -> None:
    c = broker_config({"broker.id": "1", "log.dirs": "/tmp/x", "security.inter.broker.protocol": "SASL_SSL",
                       "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093"})
    assert c.inter_broker_listener == "SASL_SSL"
    assert c.advertised_listener.port == 9093


def test_ipv6_listener() -> None:
    c = broker_config({"broker.id": "1", "log.dirs": "/tmp/x", "listeners": "PLAINTEXT://[::1]:9092"})
    assert c.listeners[0].host == "::1"
