"""Every Kafka 3.9 topic config and every Kafka 3.9 dynamic broker config (per broker and at the cluster
default), one test each: set, described, refused with Kafka's answer for an invalid value (changing
nothing), and reset, through kafka-python's and confluent-kafka's admin clients, on a ZooKeeper-mode cluster.

Where the expectations come from (Kafka 3.9):
- ``storage/.../log/LogConfig.java`` (``CONFIG``: each topic config's type and validator) and
  ``clients/.../config/TopicConfig.java`` (the names): the invalid value and ``ConfigDef``'s message for it
  ("Invalid value V for configuration N: Value must be at least L", "...: Not a number of type LONG",
  "...: String must be one of: ...", "...: Expected value to be either true or false").
- ``core/.../server/DynamicBrokerConfig.scala`` (``AllDynamicConfigs``: which broker configs change at run
  time; ``PerBrokerConfigs``: those refused at the cluster default with "Cannot update these configs at
  default cluster level, broker id must be specified: Set(N)"; ``validateConfigs``) and ``KafkaConfig`` /
  ``AbstractKafkaConfig.CONFIG_DEF`` for each one's type and validator.
- ``core/.../server/ZkAdminManager.scala``: a refused broker config is INVALID_CONFIG (40) with
  "Invalid config value for resource ConfigResource(type=BROKER, name='<id>'): " before ConfigDef's message;
  a refused topic config is INVALID_CONFIG with the message alone; ``ConfigHelper.scala``: sources
  DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG; a deleted key falls back.

Left out: the listener-only SSL keystore/truststore configs (Kafka wants them listener-prefixed),
password configs (ZooKeeper-mode Kafka needs ``password.encoder.secret`` to store them), and
``listeners`` / ``advertised.listeners`` / ``listener.security.protocol.map`` (changing them changes
where the broker listens). Configs without a ConfigDef validator have no invalid value here: Kafka checks
some of them only when a reconfigurable applies them (SSL and SASL factories).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from cluster_support import LocalCluster, wait_for
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from hw_support import RawConnection
from kafka import KafkaAdminClient
from kafka.admin import AlterConfigOp, ConfigResourceType
from kafka.admin import ConfigResource as KpResource
from kafka.protocol.admin import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

TOPIC = "configs-each"
BROKER_TYPE, SET, DELETE = 4, 0, 1
DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT = 1, 2, 3

LONG, INT, SHORT, DOUBLE = "Not a number of type LONG", "Not a number of type INT", "Not a number of type SHORT", \
    "Not a number of type DOUBLE"
BOOL = "Expected value to be either true or false"


def at_least(n: int) -> str:
    return f"Value must be at least {n}"


# name: (a valid value, an invalid one, ConfigDef's message for it) -- LogConfig.CONFIG, 3.9
TOPIC_CASES: dict[str, tuple[str, str, str]] = {
    "segment.bytes": ("1048576", "13", at_least(14)),
    "segment.ms": ("3600000", "0", at_least(1)),
    "segment.jitter.ms": ("1000", "-1", at_least(0)),
    "segment.index.bytes": ("65536", "3", at_least(4)),
    "flush.messages": ("1000", "0", at_least(1)),
    "flush.ms": ("5000", "-1", at_least(0)),
    "retention.bytes": ("104857600", "abc", LONG),
    "retention.ms": ("86400000", "-2", at_least(-1)),
    "max.message.bytes": ("2000000", "-1", at_least(0)),
    "index.interval.bytes": ("8192", "-1", at_least(0)),
    "delete.retention.ms": ("3600000", "-1", at_least(0)),
    "min.compaction.lag.ms": ("1000", "-1", at_least(0)),
    "max.compaction.lag.ms": ("7200000", "0", at_least(1)),
    "file.delete.delay.ms": ("30000", "-1", at_least(0)),
    "min.cleanable.dirty.ratio": ("0.3", "2", "Value must be no more than 1"),  # printed as the DOUBLE 2.0
    "cleanup.policy": ("compact,delete", "bogus", "String must be one of: compact, delete"),
    "unclean.leader.election.enable": ("true", "maybe", BOOL),
    "min.insync.replicas": ("2", "0", at_least(1)),
    "compression.type": ("zstd", "bogus", "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
    "compression.gzip.level": ("5", "10", "Value must be between 1 and 9 or equal to -1"),
    "compression.lz4.level": ("10", "0", at_least(1)),
    "compression.zstd.level": ("7", "-131073", at_least(-131072)),
    "preallocate": ("true", "maybe", BOOL),
    "message.format.version": ("3.0-IV1", "0.1", "Version 0.1 is not a valid version"),
    "message.timestamp.type": ("LogAppendTime", "bogus", "String must be one of: CreateTime, LogAppendTime"),
    "message.timestamp.difference.max.ms": ("86400000", "-1", at_least(0)),
    "message.timestamp.before.max.ms": ("86400000", "-1", at_least(0)),
    "message.timestamp.after.max.ms": ("3600000", "-1", at_least(0)),
    "leader.replication.throttled.replicas": ("0:1", "x", "leader.replication.throttled.replicas must be the literal "
                                              "'*' or a list of replicas in the following format: "
                                              "[partitionId]:[brokerId],[partitionId]:[brokerId],..."),
    "follower.replication.throttled.replicas": ("*", "x", "follower.replication.throttled.replicas must be the "
                                                "literal '*' or a list of replicas in the following format: "
                                                "[partitionId]:[brokerId],[partitionId]:[brokerId],..."),
    "message.downconversion.enable": ("false", "maybe", BOOL),
    "remote.storage.enable": ("false", "maybe", BOOL),
    "local.retention.ms": ("-2", "-3", at_least(-2)),
    "local.retention.bytes": ("-2", "-3", at_least(-2)),
    "remote.log.copy.disable": ("false", "maybe", BOOL),
    "remote.log.delete.on.disable": ("false", "maybe", BOOL),
}
# ConfigException prints a LIST value as Java's List.toString and a DOUBLE as Double.toString.
SHOWN = {"2": "2.0"}
# ValidList checks each element (its message names the element); ThrottledReplicaListValidator the list.
LISTS = {"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"}
# DynamicConfig.Broker's quota configs: not KafkaConfig keys, so described only while set (ConfigHelper's
# allConfigs is the originals plus KafkaConfig's values).
QUOTAS = {"leader.replication.throttled.rate", "follower.replication.throttled.rate",
          "replica.alter.log.dirs.io.max.bytes.per.second"}

# name: (a valid value, an invalid one or None, ConfigDef's message, per broker only) -- 3.9's
# DynamicBrokerConfig.AllDynamicConfigs less what the module docstring leaves out.
BROKER_CASES: dict[str, tuple[str, str | None, str | None, bool]] = {
    "remote.log.index.file.cache.total.size.bytes": ("536870912", "0", at_least(1), False),
    "log.local.retention.ms": ("-2", "-3", at_least(-2), False),
    "log.local.retention.bytes": ("-2", "-3", at_least(-2), False),
    "remote.log.manager.copy.max.bytes.per.second": ("1048576", "0", at_least(1), False),
    "remote.log.manager.fetch.max.bytes.per.second": ("1048576", "0", at_least(1), False),
    "remote.fetch.max.wait.ms": ("400", "0", at_least(1), False),
    "message.max.bytes": ("2000000", "-1", at_least(0), False),
    "num.io.threads": ("8", "0", at_least(1), False),
    "background.threads": ("10", "0", at_least(1), False),
    "compression.type": ("producer", "bogus", "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer",
                         False),
    "compression.gzip.level": ("6", "10", "Value must be between 1 and 9 or equal to -1", False),
    "compression.lz4.level": ("9", "0", at_least(1), False),
    "compression.zstd.level": ("3", "-131073", at_least(-131072), False),
    "max.connections.per.ip": ("1000", "-1", at_least(0), False),
    "max.connections.per.ip.overrides": ("10.255.255.1:5", None, None, False),
    "max.connections": ("10000", "-1", at_least(0), False),
    "max.connection.creation.rate": ("1000", "-1", at_least(0), False),
    "num.network.threads": ("3", "0", at_least(1), False),
    "num.replica.fetchers": ("1", "abc", INT, False),
    "unclean.leader.election.enable": ("false", "maybe", BOOL, False),
    "log.cleaner.threads": ("1", "-1", at_least(0), False),
    "log.cleaner.io.max.bytes.per.second": ("1.0E9", "abc", DOUBLE, False),
    "log.cleaner.dedupe.buffer.size": ("134217728", "abc", LONG, False),
    "log.cleaner.io.buffer.size": ("524288", "-1", at_least(0), False),
    "log.cleaner.io.buffer.load.factor": ("0.9", "abc", DOUBLE, False),
    "log.cleaner.backoff.ms": ("10000", "-1", at_least(0), False),
    "log.cleaner.min.cleanable.ratio": ("0.4", "2", "Value must be no more than 1", False),
    "log.cleaner.delete.retention.ms": ("3600000", "-1", at_least(0), False),
    "log.cleaner.min.compaction.lag.ms": ("1000", "-1", at_least(0), False),
    "log.cleaner.max.compaction.lag.ms": ("7200000", "0", at_least(1), False),
    "log.segment.bytes": ("536870912", "13", at_least(14), False),
    "log.roll.ms": ("3600000", "abc", LONG, False),
    "log.roll.jitter.ms": ("0", "abc", LONG, False),
    "log.retention.ms": ("86400000", "abc", LONG, False),
    "log.retention.bytes": ("1073741824", "abc", LONG, False),
    "log.cleanup.policy": ("delete", "bogus", "String must be one of: compact, delete", False),
    "log.index.size.max.bytes": ("1048576", "3", at_least(4), False),
    "log.index.interval.bytes": ("8192", "-1", at_least(0), False),
    "log.flush.interval.messages": ("100000", "0", at_least(1), False),
    "log.segment.delete.delay.ms": ("30000", "-1", at_least(0), False),
    "log.flush.interval.ms": ("60000", "abc", LONG, False),
    "log.preallocate": ("false", "maybe", BOOL, False),
    "num.recovery.threads.per.data.dir": ("1", "0", at_least(1), False),
    "min.insync.replicas": ("1", "0", at_least(1), False),
    "log.message.timestamp.type": ("CreateTime", "bogus", "String must be one of: CreateTime, LogAppendTime", False),
    "log.message.timestamp.difference.max.ms": ("86400000", "-1", at_least(0), False),
    "log.message.timestamp.before.max.ms": ("86400000", "-1", at_least(0), False),
    "log.message.timestamp.after.max.ms": ("86400000", "-1", at_least(0), False),
    "log.message.downconversion.enable": ("true", "maybe", BOOL, False),
    "transaction.partition.verification.enable": ("true", "maybe", BOOL, False),
    "producer.id.expiration.ms": ("3600000", "0", at_least(1), False),
    "metric.reporters": ("", None, None, False),
    "leader.replication.throttled.rate": ("104857600", "-1", at_least(0), False),
    "follower.replication.throttled.rate": ("104857600", "-1", at_least(0), False),
    "replica.alter.log.dirs.io.max.bytes.per.second": ("104857600", "-1", at_least(0), False),
    # per broker only (PerBrokerConfigs: the security configs)
    "principal.builder.class": ("org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
                                "not a class", "Class not a class could not be found.", True),
    "ssl.client.auth": ("requested", "bogus", "String must be one of: required, requested, none", True),
    "ssl.protocol": ("TLSv1.2", None, None, True),
    "ssl.provider": ("SunJSSE", None, None, True),
    "ssl.enabled.protocols": ("TLSv1.2,TLSv1.3", None, None, True),
    "ssl.keymanager.algorithm": ("SunX509", None, None, True),
    "ssl.trustmanager.algorithm": ("PKIX", None, None, True),
    "ssl.endpoint.identification.algorithm": ("", None, None, True),
    "ssl.secure.random.implementation": ("SHA1PRNG", None, None, True),
    "ssl.cipher.suites": ("", None, None, True),
    "ssl.engine.factory.class": ("org.apache.kafka.common.security.ssl.DefaultSslEngineFactory", "not a class",
                                 "Class not a class could not be found.", True),
    "sasl.mechanism.inter.broker.protocol": ("PLAIN", None, None, True),
    "sasl.enabled.mechanisms": ("PLAIN", None, None, True),
    "sasl.kerberos.principal.to.local.rules": ("DEFAULT", None, None, True),
    "sasl.kerberos.service.name": ("kafka", None, None, True),
    "sasl.kerberos.kinit.cmd": ("/usr/bin/kinit", None, None, True),
    "sasl.kerberos.ticket.renew.window.factor": ("0.8", "abc", DOUBLE, True),
    "sasl.kerberos.ticket.renew.jitter": ("0.05", "abc", DOUBLE, True),
    "sasl.kerberos.min.time.before.relogin": ("60000", "abc", LONG, True),
    "sasl.login.refresh.window.factor": ("0.8", "abc", DOUBLE, True),
    "sasl.login.refresh.window.jitter": ("0.05", "abc", DOUBLE, True),
    "sasl.login.refresh.min.period.seconds": ("60", "abc", SHORT, True),
    "sasl.login.refresh.buffer.seconds": ("300", "abc", SHORT, True),
}


def configdef_message(name: str, bad: str, message: str) -> str:
    shown = f"[{bad}]" if name in LISTS else SHOWN.get(bad, bad) if message.startswith("Value must be no") else bad
    return f"Invalid value {shown} for configuration {name}: {message}"


@pytest.fixture(scope="module")
def clients(shared_cluster: LocalCluster) -> Iterator[tuple[AdminClient, KafkaAdminClient, LocalCluster]]:
    confluent = AdminClient({"bootstrap.servers": shared_cluster.bootstrap})
    confluent.create_topics([NewTopic(TOPIC, 1, 1)], operation_timeout=10)[TOPIC].result(30)
    kp = KafkaAdminClient(bootstrap_servers=shared_cluster.bootstrap)
    try:
        yield confluent, kp, shared_cluster
    finally:
        kp.close()


def confluent_describe(admin: AdminClient, kind: str, name: str) -> dict[str, Any]:
    return dict(next(iter(admin.describe_configs([ConfigResource(kind, name)]).values())).result(30))


def kp_describe(kp: KafkaAdminClient, kind: ConfigResourceType, name: str, key: str) -> dict[str, Any]:
    found: Any = kp.describe_configs([KpResource(kind, name, configs=[key])], config_filter="all")
    return dict(found[kind.name.lower()][name][key])


def kp_alter(kp: KafkaAdminClient, kind: ConfigResourceType, name: str, key: str, op: AlterConfigOp,
             value: str | None) -> str:
    answer: Any = kp.alter_configs([KpResource(kind, name, configs={key: (op, value)})], raise_on_unknown=False,
                                   incremental=True)
    return str(answer[kind.name.lower()][name])


def raw_alter(conn: RawConnection, key: str, op: int, value: str | None) -> tuple[int, str | None]:
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    resp = conn.request(IncrementalAlterConfigsRequest(version=1, validate_only=False, resources=[
        R(resource_type=BROKER_TYPE, resource_name="", configs=[
            R.AlterableConfig(name=key, config_operation=op, value=value)])]), IncrementalAlterConfigsResponse, 1)
    return resp.responses[0].error_code, resp.responses[0].error_message


def raw_default(conn: RawConnection, key: str) -> tuple[str | None, int] | None:
    R = DescribeConfigsRequest.DescribeConfigsResource
    resp = conn.request(DescribeConfigsRequest(version=1, include_synonyms=False, resources=[
        R(resource_type=BROKER_TYPE, resource_name="", configuration_keys=[key])]), DescribeConfigsResponse, 1)
    found = [c for c in resp.results[0].configs if c.name == key]
    return (found[0].value, found[0].config_source) if found else None


@pytest.mark.parametrize("name", list(TOPIC_CASES))
def test_topic_config(name: str, clients: tuple[AdminClient, KafkaAdminClient, LocalCluster]) -> None:
    confluent, kp, _cluster = clients
    valid, bad, message = TOPIC_CASES[name]
    before = confluent_describe(confluent, "topic", TOPIC)[name]
    assert before.source == 5  # DEFAULT_CONFIG (or the broker's) before anything is set
    assert kp_alter(kp, ConfigResourceType.TOPIC, TOPIC, name, AlterConfigOp.SET, valid) == "OK"
    entry = confluent_describe(confluent, "topic", TOPIC)[name]
    assert (entry.value, entry.source) == (valid, DYNAMIC_TOPIC)
    assert kp_alter(kp, ConfigResourceType.TOPIC, TOPIC, name, AlterConfigOp.SET, bad) == (
        "[Error 40] InvalidConfigurationError: " + configdef_message(name, bad, message))
    assert kp_describe(kp, ConfigResourceType.TOPIC, TOPIC, name)["value"] == valid  # the refusal changed nothing
    resource = ConfigResource("topic", TOPIC, incremental_configs=[
        ConfigEntry(name, None, incremental_operation=AlterConfigOpType.DELETE)])
    next(iter(confluent.incremental_alter_configs([resource]).values())).result(30)
    after = kp_describe(kp, ConfigResourceType.TOPIC, TOPIC, name)
    assert (after["value"], after["config_source"]) == (before.value, "DEFAULT_CONFIG")


@pytest.mark.parametrize("name", list(BROKER_CASES))
def test_dynamic_broker_config_per_broker(name: str, clients: tuple[AdminClient, KafkaAdminClient, LocalCluster]) -> None:
    confluent, kp, _cluster = clients
    valid, bad, message, _per_broker = BROKER_CASES[name]
    before = kp_describe(kp, ConfigResourceType.BROKER, "1", name) if name not in QUOTAS else None
    assert before is None or (before["config_source"] in ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG")
                              and not before["read_only"])
    assert kp_alter(kp, ConfigResourceType.BROKER, "1", name, AlterConfigOp.SET, valid) == "OK"
    entry = confluent_describe(confluent, "broker", "1")[name]
    assert (entry.value, entry.source) == (valid, DYNAMIC_BROKER)
    if bad is not None and message is not None:
        assert kp_alter(kp, ConfigResourceType.BROKER, "1", name, AlterConfigOp.SET, bad) == (
            "[Error 40] InvalidConfigurationError: Invalid config value for resource ConfigResource(type=BROKER, "
            f"name='1'): {configdef_message(name, bad, message)}")
        assert confluent_describe(confluent, "broker", "1")[name].value == valid
    resource = ConfigResource("broker", "1", incremental_configs=[
        ConfigEntry(name, None, incremental_operation=AlterConfigOpType.DELETE)])
    next(iter(confluent.incremental_alter_configs([resource]).values())).result(30)
    if before is None:
        assert name not in confluent_describe(confluent, "broker", "1")
        return
    after = kp_describe(kp, ConfigResourceType.BROKER, "1", name)
    assert (after["value"], after["config_source"]) == (before["value"], before["config_source"])


@pytest.mark.parametrize("name", list(BROKER_CASES))
def test_dynamic_broker_config_at_the_cluster_default(
        name: str, clients: tuple[AdminClient, KafkaAdminClient, LocalCluster]) -> None:
    """Neither client names the default broker resource (kafka-python wants an integer, confluent-kafka
    a non-empty name), so the changes go as kafka-python's protocol classes; the other brokers' view is
    read with confluent-kafka."""
    confluent, _kp, cluster = clients
    valid, bad, message, per_broker = BROKER_CASES[name]
    prefix = "Invalid config value for resource ConfigResource(type=BROKER, name=''): "
    with RawConnection(cluster.brokers[1].bootstrap) as conn:
        if per_broker:
            assert raw_alter(conn, name, SET, valid) == (40, prefix + "Cannot update these configs at default cluster "
                                                         f"level, broker id must be specified: Set({name})")
            assert raw_default(conn, name) is None
            return
        assert raw_alter(conn, name, SET, valid) == (0, None)
        assert raw_default(conn, name) == (valid, DYNAMIC_DEFAULT)
        # Every broker takes the cluster default (a config change notification).
        wait_for(lambda: getattr(confluent_describe(confluent, "broker", "3").get(name), "source", 0) == DYNAMIC_DEFAULT,
                 10, f"broker 3 to see {name} at the default")
        assert confluent_describe(confluent, "broker", "3")[name].value == valid
        if bad is not None and message is not None:
            assert raw_alter(conn, name, SET, bad) == (40, prefix + configdef_message(name, bad, message))
            assert raw_default(conn, name) == (valid, DYNAMIC_DEFAULT)
        assert raw_alter(conn, name, DELETE, None) == (0, None)
        assert raw_default(conn, name) is None
    wait_for(lambda: getattr(confluent_describe(confluent, "broker", "3").get(name), "source", 0) != DYNAMIC_DEFAULT,
             10, f"broker 3 to drop {name}")


LEFT_OUT = {"listeners", "advertised.listeners", "listener.security.protocol.map", "sasl.jaas.config",
            "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
            "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.type", "ssl.truststore.location",
            "ssl.truststore.password", "ssl.truststore.certificates"}


def test_the_cases_are_kafkas() -> None:
    assert len(TOPIC_CASES) == 36  # LogConfig: TopicConfig's 34 names and the two throttled-replica lists
    # DynamicBrokerConfig.AllDynamicConfigs (3.9) has 92 names: 78 here and the 14 the docstring leaves out.
    assert len(BROKER_CASES) == 78 and len(LEFT_OUT) == 14 and not LEFT_OUT & set(BROKER_CASES)
