"""The config catalogue against Kafka 3.9 (and the 4.x additions): counts, validators with Kafka's messages,
synonym resolution and sources as DescribeConfigs reports them, and which broker configs are dynamic.

Each expected answer names where in Kafka (branch 3.9 unless said otherwise) it comes from.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from headwater.metadata import config_catalog as cc
from headwater.metadata.config_catalog import Scope
from headwater.metadata.configs import ConfigSource, ConfigType
from headwater.protocol.errors import ErrorCode, KafkaError

S = ConfigSource


def _entry(entries: list[cc.Entry], name: str) -> cc.Entry:
    return next(e for e in entries if e.name == name)


def _syn(entry: cc.Entry) -> list[tuple[str, str | None, ConfigSource]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]


def _refused(message: str) -> Any:
    return pytest.raises(KafkaError, match="^INVALID_CONFIG: " + re.escape(message) + "$")


# --- counts -------------------------------------------------------------------------------------------


def test_topic_config_count() -> None:
    # TopicConfig.java names 34 *_CONFIG keys; LogConfig.CONFIG adds QuotaConfigs' two throttled-replica lists.
    assert len(cc.TOPIC_CONFIGS) == 36
    assert {"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"} <= set(cc.TOPIC_CONFIGS)
    assert all(s.since == "3.9" for s in cc.TOPIC_CONFIGS.values())  # trunk (2024-10) adds no topic config


def test_broker_config_counts() -> None:
    kafka39 = [s for s in cc.BROKER_CONFIGS.values() if s.since == "3.9" and not s.quota]
    # KafkaConfig.configDef = AbstractKafkaConfig.CONFIG_DEF, the merge of 22 ConfigDefs: 328 keys, 14 of them
    # defineInternal (counted by loading Kafka 3.9's ConfigDef itself).
    assert len(kafka39) == 328
    assert sum(s.internal for s in kafka39) == 14
    # QuotaConfigs.brokerQuotaConfigs(): dynamic-only broker configs outside KafkaConfig.
    assert sorted(s.name for s in cc.BROKER_CONFIGS.values() if s.quota) == [
        "follower.replication.throttled.rate", "leader.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second"]
    # trunk as of 2024-10-25 adds 13 broker configs; KIP-1066 (4.3) adds cordoned.log.dirs.
    assert sum(s.since == "4.0" for s in cc.BROKER_CONFIGS.values()) == 13
    assert cc.BROKER_CONFIGS["cordoned.log.dirs"].since == "4.3"
    assert len(cc.BROKER_CONFIGS) == 345


def test_dynamic_counts() -> None:
    kafka39 = [s for s in cc.BROKER_CONFIGS.values() if s.since == "3.9" and not s.quota]
    # DynamicBrokerConfig.AllDynamicConfigs has 89 names; PerBrokerConfigs 37 of them.
    assert sum(s.dynamic for s in kafka39 if s.name not in cc.DYNAMIC_HERE_ONLY) == 89
    assert all(cc.BROKER_CONFIGS[n].scope is Scope.CLUSTER_WIDE for n in cc.DYNAMIC_HERE_ONLY)
    assert sum(s.scope is Scope.PER_BROKER for s in kafka39) == 37


def test_every_row_is_complete_and_its_default_valid() -> None:
    for spec in cc.CATALOG:
        assert spec.doc and spec.doc.endswith(".") and "\n" not in spec.doc, spec.name
        if spec.default is not None:  # ConfigDef.define validates each default
            (cc.validate_topic_config(spec.name, spec.default) if spec.scope is Scope.TOPIC
             else cc.validate_broker_config(spec.name, spec.default, dynamic=False))
    # every topic synonym is a broker config (ServerTopicConfigSynonyms)
    assert all(name in cc.BROKER_CONFIGS for s in cc.TOPIC_CONFIGS.values() for name, _unit in s.synonyms)


def test_types_defaults_and_sensitivity() -> None:
    t, b = cc.TOPIC_CONFIGS, cc.BROKER_CONFIGS
    assert (t["retention.ms"].type, t["retention.ms"].default) == (ConfigType.LONG, "604800000")  # 7 days
    assert (t["max.message.bytes"].default, t["segment.bytes"].default) == ("1048588", "1073741824")
    assert t["cleanup.policy"].type is ConfigType.LIST and t["min.cleanable.dirty.ratio"].default == "0.5"
    assert b["log.retention.ms"].default is None and b["log.retention.hours"].default == "168"
    # Double.toString of Double.MAX_VALUE (CleanerConfig)
    assert b["log.cleaner.io.max.bytes.per.second"].default == "1.7976931348623157E308"
    assert b["ssl.keystore.password"].is_sensitive and not b["ssl.keystore.location"].is_sensitive
    assert b["inter.broker.protocol.version"].default == "3.9-IV0"


# --- validators with Kafka's messages ---------------------------------------------------------------


@pytest.mark.parametrize(("name", "value", "message"), [
    # ConfigDef.parseType: NumberFormatException -> "Not a number of type " + type
    ("retention.ms", "abc", "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
    ("segment.bytes", "2147483648", "Invalid value 2147483648 for configuration segment.bytes: Not a number of type INT"),
    # ConfigDef.Range.ensureValid; LogConfig: segment.bytes atLeast(LegacyRecord.RECORD_OVERHEAD_V0 = 14)
    ("segment.bytes", "-5", "Invalid value -5 for configuration segment.bytes: Value must be at least 14"),
    ("retention.ms", "-2", "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
    # LogConfig: min.cleanable.dirty.ratio between(0, 1); the parsed Double prints as 1.5, the bound as 1
    ("min.cleanable.dirty.ratio", "1.5", "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
    ("compression.zstd.level", "23", "Invalid value 23 for configuration compression.zstd.level: Value must be no more than 22"),
    # ValidList.in(compact, delete) checks each element with ValidString
    ("cleanup.policy", "compact,foo", "Invalid value foo for configuration cleanup.policy: String must be one of: compact, delete"),
    # ValidString.in(BrokerCompressionType.names())
    ("compression.type", "brotli", "Invalid value brotli for configuration compression.type: "
                                   "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
    ("message.timestamp.type", "createtime", "Invalid value createtime for configuration message.timestamp.type: "
                                             "String must be one of: CreateTime, LogAppendTime"),
    ("unclean.leader.election.enable", "yes", "Invalid value yes for configuration unclean.leader.election.enable: "
                                              "Expected value to be either true or false"),
    # CompressionType.GZIP.levelValidator
    ("compression.gzip.level", "0", "Invalid value 0 for configuration compression.gzip.level: "
                                    "Value must be between 1 and 9 or equal to -1"),
    # MetadataVersionValidator / MetadataVersion.fromVersionString
    ("message.format.version", "9.9", "Invalid value 9.9 for configuration message.format.version: Version 9.9 is not a valid version"),
    # ThrottledReplicaListValidator (the list prints as Java's List.toString)
    ("leader.replication.throttled.replicas", "0:1,x", "Invalid value [0:1, x] for configuration "
     "leader.replication.throttled.replicas: leader.replication.throttled.replicas must be the literal '*' or a list "
     "of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."),
    # LogConfig.validateNames
    ("no.such.config", "1", "Unknown topic config name: no.such.config"),
])
def test_topic_validators(name: str, value: str, message: str) -> None:
    with _refused(message):
        cc.validate_topic_config(name, value)


@pytest.mark.parametrize(("name", "value"), [
    ("retention.ms", " -1 "), ("cleanup.policy", "compact, delete"), ("unclean.leader.election.enable", "TRUE"),
    ("compression.gzip.level", "-1"), ("message.format.version", "2.8"), ("message.format.version", "0.10.2.1"),
    ("leader.replication.throttled.replicas", "*"), ("leader.replication.throttled.replicas", "0:1, 1:2"),
    ("min.cleanable.dirty.ratio", "1e-3"), ("retention.ms", None), ("no.such.config", None),
])
def test_topic_values_kafka_accepts(name: str, value: str | None) -> None:
    cc.validate_topic_config(name, value)  # None: a DELETE, which ConfigAdminManager never refuses


def test_normalized_values() -> None:
    # ConfigDef.parseType trims; convertToString joins lists with "," and prints booleans in lower case
    t = cc.TOPIC_CONFIGS
    assert cc.normalize(t["retention.ms"], " 42 ") == "42"
    assert cc.normalize(t["cleanup.policy"], "compact , delete") == "compact,delete"
    assert cc.normalize(t["preallocate"], "TRUE") == "true"
    assert cc.metadata_version("2.8") == "2.8-IV1" and cc.metadata_version("4.0") is None  # 4.0 is not production


def test_broker_validators() -> None:
    # CaseInsensitiveValidString: upper-cased values, in the HashSet order Kafka prints them
    with _refused("Invalid value sideways for configuration group.consumer.migration.policy: String must be one of "
                  "(case insensitive): DISABLED, DOWNGRADE, UPGRADE, BIDIRECTIONAL"):
        cc.validate_broker_config("group.consumer.migration.policy", "sideways", dynamic=False)
    cc.validate_broker_config("group.consumer.migration.policy", "upgrade", dynamic=False)
    # RemoteLogManagerConfig: -1 or at least 1
    with _refused("Invalid value 0 for configuration remote.log.manager.copier.thread.pool.size: "
                  "Value can be -1 or greater than 0"):
        cc.validate_broker_config("remote.log.manager.copier.thread.pool.size", "0", dynamic=False)
    # QuotaConfigs.brokerQuotaConfigs: atLeast(0)
    with _refused("Invalid value -1 for configuration leader.replication.throttled.rate: Value must be at least 0"):
        cc.validate_broker_config("leader.replication.throttled.rate", "-1", dynamic=True)
    cc.validate_broker_config("some.plugin.setting", "x", dynamic=False)  # unknown static keys are passed through


# --- dynamic vs read-only ------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "scope"), [
    ("log.retention.ms", Scope.CLUSTER_WIDE),  # DynamicLogConfig.ReconfigurableConfigs (first synonym)
    ("log.retention.hours", Scope.READ_ONLY),  # only the first synonym is reconfigurable
    ("log.message.format.version", Scope.READ_ONLY),  # DynamicLogConfig.NonReconfigrableLogConfigs
    ("num.io.threads", Scope.CLUSTER_WIDE),  # DynamicThreadPool.ReconfigurableConfigs
    ("log.cleaner.threads", Scope.CLUSTER_WIDE),  # LogCleaner.ReconfigurableConfigs
    ("message.max.bytes", Scope.CLUSTER_WIDE),  # LogCleaner.ReconfigurableConfigs and DynamicLogConfig
    ("metric.reporters", Scope.CLUSTER_WIDE),  # AllDynamicConfigs names it directly
    ("max.connections.per.ip", Scope.CLUSTER_WIDE),  # SocketServer.ReconfigurableConfigs
    ("producer.id.expiration.ms", Scope.CLUSTER_WIDE),  # DynamicProducerStateManagerConfig
    ("remote.fetch.max.wait.ms", Scope.CLUSTER_WIDE),  # DynamicRemoteLogConfig
    ("broker.id", Scope.READ_ONLY),
    ("zookeeper.connect", Scope.READ_ONLY),
    ("listeners", Scope.PER_BROKER),  # DynamicListenerConfig, not cluster-level
    ("advertised.listeners", Scope.PER_BROKER),
    ("ssl.keystore.location", Scope.PER_BROKER),  # SslConfigs.RECONFIGURABLE_CONFIGS
    ("sasl.jaas.config", Scope.PER_BROKER),
    ("max.connections", Scope.CLUSTER_WIDE),  # ClusterLevelListenerConfigs
    ("num.network.threads", Scope.CLUSTER_WIDE),
    ("leader.replication.throttled.rate", Scope.CLUSTER_WIDE),  # DynamicConfig.Broker (quota), not per-broker
    ("remote.list.offsets.request.timeout.ms", Scope.CLUSTER_WIDE),  # trunk: DynamicRemoteLogConfig
    ("cordoned.log.dirs", Scope.PER_BROKER),  # KIP-1066
])
def test_update_mode(name: str, scope: Scope) -> None:
    assert cc.BROKER_CONFIGS[name].scope is scope


def test_dynamic_updates_refused_as_kafka_refuses_them() -> None:
    # DynamicBrokerConfig.validateConfigs; ZkAdminManager answers InvalidConfigurationException (INVALID_CONFIG)
    with _refused("Cannot update these configs dynamically: Set(broker.id)"):
        cc.validate_broker_config("broker.id", "3", dynamic=True)
    with _refused("Cannot update these configs dynamically: Set(log.retention.hours)"):
        cc.validate_broker_config("log.retention.hours", "3", dynamic=True)
    with _refused("These security configs can be dynamically updated only per-listener using the listener prefix: "
                  "Set(ssl.keystore.location)"):
        cc.validate_broker_config("ssl.keystore.location", "/ks", dynamic=True)
    with _refused("Cannot update these configs at default cluster level, broker id must be specified: Set(listeners)"):
        cc.validate_broker_config("listeners", "PLAINTEXT://:9093", dynamic=True, per_broker=False)
    with _refused("Cannot update these configs at default cluster level, broker id must be specified: "
                  "Set(listener.name.external.ssl.keystore.location)"):
        cc.validate_broker_config("listener.name.external.ssl.keystore.location", "/ks", dynamic=True, per_broker=False)
    # DynamicConfig.Broker.validate parses the listener-stripped name
    with _refused("Invalid value abc for configuration num.io.threads: Not a number of type INT"):
        cc.validate_broker_config("num.io.threads", "abc", dynamic=True)
    cc.validate_broker_config("listener.name.external.max.connections", "10", dynamic=True, per_broker=False)
    cc.validate_broker_config("listener.name.external.ssl.keystore.location", "/ks", dynamic=True)
    cc.validate_broker_config("log.retention.ms", "1000", dynamic=True, per_broker=False)
    cc.validate_broker_config("broker.id", None, dynamic=True)  # a DELETE is dropped before validation
    # custom configs: ZooKeeper-mode Kafka accepts them (customPropsAllowed = true)
    cc.validate_broker_config("my.reporter.setting", "x", dynamic=True)
    with _refused("requirement failed: Unknown Dynamic Configuration: Set(my.reporter.setting)."):
        cc.validate_broker_config("my.reporter.setting", "x", dynamic=True, allow_custom=False)
    assert cc.alter_error_message("BROKER", "0", "m") == "Invalid config value for resource ConfigResource(type=BROKER, name='0'): m"


def test_topic_cross_key_rules() -> None:
    # LogConfig.validateValues
    with _refused("conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"):
        cc.validate_topic_configs({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    # LogConfig.validateNoInvalidRemoteStorageConfigsInZK
    with _refused("It is invalid to set `remote.log.delete.on.disable` or `remote.log.copy.disable` under Zookeeper's mode."):
        cc.validate_topic_configs({"remote.log.copy.disable": "true"})
    cc.validate_topic_configs({"min.compaction.lag.ms": "10"})


# --- synonym resolution: values and sources DescribeConfigs reports -----------------------------------------


def test_static_hours_synonym_converts_but_reports_default_source() -> None:
    # KafkaConfig.logRetentionTimeMillis: 1 hour -> 3600000. ConfigHelper.configSynonyms drops every synonym before
    # the first one named log.retention.ms, so with only log.retention.hours set the list is empty and the source
    # DEFAULT_CONFIG. Kafka's own test shows the same for segment.ms from a static log.roll.hours=2 in ZooKeeper mode
    # (BaseAdminIntegrationTest.modifyConfigs + PlaintextAdminIntegrationTest.testCreateTopicsReturnsConfigs).
    retention = _entry(cc.describe_topic({}, {}, {}, {"log.retention.hours": "1"}), "retention.ms")
    assert (retention.value, retention.source, retention.synonyms) == ("3600000", S.DEFAULT_CONFIG, ())
    entries = cc.describe_topic({}, {}, {}, {"log.roll.hours": "2", "log.roll.jitter.ms": "123"})
    segment_ms, jitter = _entry(entries, "segment.ms"), _entry(entries, "segment.jitter.ms")
    assert (segment_ms.value, segment_ms.source) == ("7200000", S.DEFAULT_CONFIG)
    assert (jitter.value, jitter.source) == ("123", S.STATIC_BROKER_CONFIG)


def test_static_primary_synonym() -> None:
    entry = _entry(cc.describe_topic({}, {}, {}, {"log.retention.ms": "3600000"}), "retention.ms")
    assert (entry.value, entry.source) == ("3600000", S.STATIC_BROKER_CONFIG)
    assert _syn(entry) == [("log.retention.ms", "3600000", S.STATIC_BROKER_CONFIG),
                           ("log.retention.hours", "168", S.DEFAULT_CONFIG)]
    # log.retention.minutes wins over log.retention.hours for the value (KafkaConfig.logRetentionTimeMillis)
    assert _entry(cc.describe_topic({}, {}, {}, {"log.retention.minutes": "2", "log.retention.hours": "1"}),
                  "retention.ms").value == "120000"
    # single-name synonym under another name: max.message.bytes <- message.max.bytes
    entry = _entry(cc.describe_topic({}, {}, {}, {"message.max.bytes": "2000"}), "max.message.bytes")
    assert (entry.value, entry.source) == ("2000", S.STATIC_BROKER_CONFIG)


def test_dynamic_default_beats_static_and_topic_override_beats_all() -> None:
    # PlaintextAdminIntegrationTest.testCreateTopicsReturnsConfigs: retention from the cluster default
    # (DYNAMIC_DEFAULT_BROKER_CONFIG), delete.retention.ms from the broker (DYNAMIC_BROKER_CONFIG),
    # index.interval.bytes from the topic (DYNAMIC_TOPIC_CONFIG), cleanup.policy from the default.
    entries = cc.describe_topic(
        {"index.interval.bytes": "9999999"},
        {"log.cleaner.delete.retention.ms": "34"},
        {"log.retention.ms": "10800000"},
        {"log.retention.ms": "1000"},
    )
    assert [(e.value, e.source) for e in (_entry(entries, n) for n in (
        "retention.ms", "delete.retention.ms", "index.interval.bytes", "cleanup.policy"))] == [
        ("10800000", S.DYNAMIC_DEFAULT_BROKER_CONFIG), ("34", S.DYNAMIC_BROKER_CONFIG),
        ("9999999", S.DYNAMIC_TOPIC_CONFIG), ("delete", S.DEFAULT_CONFIG)]
    assert _syn(_entry(entries, "retention.ms")) == [
        ("log.retention.ms", "10800000", S.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.ms", "1000", S.STATIC_BROKER_CONFIG), ("log.retention.hours", "168", S.DEFAULT_CONFIG)]
    override = _entry(cc.describe_topic({"retention.ms": " 5 "}, {"log.retention.ms": "7"}, {}, {}), "retention.ms")
    assert (override.value, override.source) == ("5", S.DYNAMIC_TOPIC_CONFIG)
    assert _syn(override)[:2] == [("retention.ms", "5", S.DYNAMIC_TOPIC_CONFIG),
                                  ("log.retention.ms", "7", S.DYNAMIC_BROKER_CONFIG)]
    assert len(cc.describe_topic({}, {}, {}, {})) == 36
    assert all(not e.read_only and not e.is_sensitive for e in entries)


def test_ignored_dynamic_configs() -> None:
    # DynamicBrokerConfig.fromPersistentProps: read-only configs in ZooKeeper are ignored, and so are per-broker
    # configs at the cluster default and values that do not parse.
    assert cc.usable_dynamic_configs({"log.retention.hours": "1", "log.retention.ms": "x", "num.io.threads": "4"},
                                     per_broker=True) == {"num.io.threads": "4"}
    assert cc.usable_dynamic_configs({"listeners": "PLAINTEXT://:1", "max.connections": "9"}, per_broker=False) == {
        "max.connections": "9"}
    entry = _entry(cc.describe_topic({}, {}, {"log.retention.hours": "1"}, {}), "retention.ms")
    assert (entry.value, entry.source) == ("604800000", S.DEFAULT_CONFIG)


def test_describe_broker_matches_dynamic_broker_reconfiguration_test() -> None:
    # DynamicBrokerReconfigurationTest.testConfigDescribeUsingAdminClient: static log.retention.ms and
    # log.retention.hours; read-only is !AllDynamicConfigs.contains(name).
    entries = cc.describe_broker(0, {}, {}, {"log.retention.ms": "1680000000", "log.retention.hours": "168"})
    ms, hours = _entry(entries, "log.retention.ms"), _entry(entries, "log.retention.hours")
    assert (ms.value, ms.read_only, hours.value, hours.read_only) == ("1680000000", False, "168", True)
    assert [(n, s) for n, _v, s in _syn(ms)] == [("log.retention.ms", S.STATIC_BROKER_CONFIG),
                                                ("log.retention.hours", S.STATIC_BROKER_CONFIG),
                                                ("log.retention.hours", S.DEFAULT_CONFIG)]
    assert [(n, s) for n, _v, s in _syn(hours)] == [("log.retention.hours", S.STATIC_BROKER_CONFIG),
                                                   ("log.retention.hours", S.DEFAULT_CONFIG)]
    roll, threads = _entry(entries, "log.roll.hours"), _entry(entries, "log.cleaner.threads")
    assert (_syn(roll), roll.read_only) == ([("log.roll.hours", "168", S.DEFAULT_CONFIG)], True)
    assert (_syn(threads), threads.read_only) == ([("log.cleaner.threads", "1", S.DEFAULT_CONFIG)], False)


def test_describe_broker_listener_overrides_and_sensitive_values() -> None:
    # Same Kafka test, verifySslConfig("listener.name.external.", ...): a listener-prefixed config is read-only,
    # its synonyms are the prefixed name (dynamic, static), then the base name (static, default).
    name = "listener.name.external.ssl.keystore.type"
    entries = cc.describe_broker(0, {name: "PKCS12", "ssl.keystore.password": "x"}, {},
                                 {name: "JKS", "ssl.keystore.type": "PEM", "ssl.keystore.password": "s3cret"})
    entry = _entry(entries, name)
    assert (entry.value, entry.read_only, entry.type) == ("PKCS12", True, ConfigType.STRING)
    assert _syn(entry) == [(name, "PKCS12", S.DYNAMIC_BROKER_CONFIG), (name, "JKS", S.STATIC_BROKER_CONFIG),
                           ("ssl.keystore.type", "PEM", S.STATIC_BROKER_CONFIG),
                           ("ssl.keystore.type", "JKS", S.DEFAULT_CONFIG)]
    # KafkaConfig.maybeSensitive: PASSWORD values are never returned; bare ssl.keystore.password in ZooKeeper is
    # ignored (only listener-prefixed SSL store configs are dynamic)
    password = _entry(entries, "ssl.keystore.password")
    assert (password.value, password.is_sensitive, _syn(password)) == (
        None, True, [("ssl.keystore.password", None, S.STATIC_BROKER_CONFIG)])


def test_describe_broker_entries() -> None:
    entries = cc.describe_broker(0, {"num.io.threads": "16", "foo.bar": "x"}, {"num.io.threads": "12"}, {"broker.id": "0"})
    io = _entry(entries, "num.io.threads")
    assert (io.value, io.source, io.read_only) == ("16", S.DYNAMIC_BROKER_CONFIG, False)
    assert _syn(io) == [("num.io.threads", "16", S.DYNAMIC_BROKER_CONFIG),
                        ("num.io.threads", "12", S.DYNAMIC_DEFAULT_BROKER_CONFIG), ("num.io.threads", "8", S.DEFAULT_CONFIG)]
    broker_id = _entry(entries, "broker.id")
    assert (broker_id.value, broker_id.source, broker_id.read_only) == ("0", S.STATIC_BROKER_CONFIG, True)
    # a key Kafka does not know has no type: sensitive, no value (KafkaConfig.maybeSensitive)
    custom = _entry(entries, "foo.bar")
    assert (custom.value, custom.is_sensitive, custom.type) == (None, True, ConfigType.UNKNOWN)
    # internal configs are left out unless set (allConfigs = originals ++ nonInternalValues)
    assert "log.initial.task.delay.ms" not in {e.name for e in entries}
    assert _entry(entries, "log.retention.ms").value is None  # a null default is reported as null
    # the cluster-default resource: only what <default> sets, only DYNAMIC_DEFAULT synonyms
    default = cc.describe_broker(None, {"num.io.threads": "16"}, {"num.io.threads": "12"}, {"num.io.threads": "4"})
    assert [(e.name, e.value, e.source, _syn(e)) for e in default] == [
        ("num.io.threads", "12", S.DYNAMIC_DEFAULT_BROKER_CONFIG,
         [("num.io.threads", "12", S.DYNAMIC_DEFAULT_BROKER_CONFIG)])]


def test_dynamic_override_drops_static_synonyms() -> None:
    # DynamicBrokerConfig.overrideProps: a dynamic log.retention.ms removes the static log.retention.hours from the
    # props KafkaConfig is built from, so its value falls back to the default while its synonyms still list it.
    entries = cc.describe_broker(0, {"log.retention.ms": "7"}, {}, {"log.retention.hours": "1"})
    hours = _entry(entries, "log.retention.hours")
    assert (hours.value, _syn(hours)[0]) == ("168", ("log.retention.hours", "1", S.STATIC_BROKER_CONFIG))
    assert _entry(cc.describe_topic({}, {"log.retention.ms": "7"}, {}, {"log.retention.hours": "1"}), "retention.ms").value == "7"


def test_error_code() -> None:
    with pytest.raises(KafkaError) as info:
        cc.validate_topic_config("retention.ms", "x")
    assert info.value.code is ErrorCode.INVALID_CONFIG
