"""Topic and broker configs as Kafka 3.9 has them, through confluent-kafka and raw requests.

Expected answers from Kafka 3.9's broker:
- ``LogConfig.CONFIG`` defines 34 topic configs plus the two throttled-replica lists; any of them is
  accepted at creation and described with source DYNAMIC_TOPIC_CONFIG, and an IncrementalAlterConfigs
  DELETE returns it to its default (DEFAULT_CONFIG) (``ConfigHelper.createTopicConfigEntry``).
- A bad value is INVALID_CONFIG (40) with ``ConfigDef``'s message ("Invalid value abc for configuration
  retention.ms: Not a number of type LONG", "... Value must be no more than 1", "... String must be one
  of: ..."); a refused change changes nothing (``ZkAdminManager.incrementalAlterConfigs`` validates
  before it writes).
- DescribeConfigs(BROKER) lists the whole broker config definition (``ConfigHelper.describeConfigs``:
  ``allConfigs``), a static key as STATIC_BROKER_CONFIG and read-only, a dynamic one unset as
  DEFAULT_CONFIG and not read-only.
- A dynamic broker value of a topic config's synonym (``log.retention.ms``) is the value of topics
  without an override, with source DYNAMIC_BROKER_CONFIG (``DynamicLogConfig``); a per-broker config
  at the cluster default is refused ("Cannot update these configs at default cluster level, broker id
  must be specified", ``DynamicBrokerConfig.validateConfigs``); legacy AlterConfigs replaces the
  broker's whole dynamic set.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from hw_support import RawConnection
from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

from headwater.admin.local import BrokerProcess
from headwater.metadata.config_catalog import (
    BROKER_CONFIGS,
    LISTENER_ONLY_CONFIGS,
    TOPIC_CONFIGS,
    Scope,
    normalize,
)

JS = Path(__file__).resolve().parents[1] / "js"
TOPIC, BROKER = 2, 4
SET, DELETE = 0, 1
INVALID_CONFIG = 40
DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5

# A valid value for each of Kafka 3.9's topic configs (remote.log.* true is refused in ZooKeeper mode).
TOPIC_VALUES = {
    "segment.bytes": "1048576", "segment.ms": "3600000", "segment.jitter.ms": "1000", "segment.index.bytes": "65536",
    "flush.messages": "1000", "flush.ms": "5000", "retention.bytes": "104857600", "retention.ms": "86400000",
    "max.message.bytes": "2000000", "index.interval.bytes": "8192", "delete.retention.ms": "3600000",
    "min.compaction.lag.ms": "1000", "max.compaction.lag.ms": "7200000", "file.delete.delay.ms": "30000",
    "min.cleanable.dirty.ratio": "0.3", "cleanup.policy": "compact,delete", "unclean.leader.election.enable": "true",
    "min.insync.replicas": "1", "compression.type": "zstd", "compression.gzip.level": "5", "compression.lz4.level": "10",
    "compression.zstd.level": "7", "preallocate": "true", "message.format.version": "3.0-IV1",
    "message.timestamp.type": "LogAppendTime", "message.timestamp.difference.max.ms": "86400000",
    "message.timestamp.before.max.ms": "86400000", "message.timestamp.after.max.ms": "3600000",
    "leader.replication.throttled.replicas": "0:1", "follower.replication.throttled.replicas": "*",
    "message.downconversion.enable": "false", "remote.storage.enable": "false", "local.retention.ms": "-2",
    "local.retention.bytes": "-2", "remote.log.copy.disable": "false", "remote.log.delete.on.disable": "false",
}


def describe(conn: RawConnection, resource_type: int, name: str, synonyms: bool = False) -> tuple[int, dict[str, Any]]:
    R = DescribeConfigsRequest.DescribeConfigsResource
    resp = conn.request(DescribeConfigsRequest(version=4, include_synonyms=synonyms, include_documentation=True, resources=[
        R(resource_type=resource_type, resource_name=name, configuration_keys=None)]), DescribeConfigsResponse, 4)
    result = resp.results[0]
    return result.error_code, {c.name: c for c in result.configs}


def incremental(conn: RawConnection, resource_type: int, name: str, ops: list[tuple[str, int, str | None]]) -> tuple[int, str | None]:
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    resp = conn.request(IncrementalAlterConfigsRequest(version=1, validate_only=False, resources=[
        R(resource_type=resource_type, resource_name=name, configs=[
            R.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])]), IncrementalAlterConfigsResponse, 1)
    r = resp.responses[0]
    return r.error_code, r.error_message


def test_every_kafka_topic_config_is_accepted_described_and_reset(broker: BrokerProcess,
                                                                    topic_name: Callable[..., str]) -> None:
    assert set(TOPIC_VALUES) == set(TOPIC_CONFIGS) and len(TOPIC_VALUES) == 36
    name = topic_name()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=TOPIC_VALUES)], operation_timeout=10)[name].result(30)
    described = admin.describe_configs([ConfigResource("topic", name)])
    configs = next(iter(described.values())).result(30)
    for key, value in TOPIC_VALUES.items():
        assert configs[key].value == value, key
        assert configs[key].source == DYNAMIC_TOPIC, key
    # DELETE each: back to Kafka's default.
    resource = ConfigResource("topic", name, incremental_configs=[
        ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in TOPIC_VALUES])
    next(iter(admin.incremental_alter_configs([resource]).values())).result(30)
    configs = next(iter(admin.describe_configs([ConfigResource("topic", name)]).values())).result(30)
    for key, spec in TOPIC_CONFIGS.items():
        assert configs[key].source == DEFAULT, key
        assert configs[key].value == spec.default, key


def test_bad_values_are_refused_with_kafkas_messages_and_change_nothing(broker: BrokerProcess,
                                                                         topic_name: Callable[..., str]) -> None:
    name = topic_name()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config={"retention.ms": "1000"})], operation_timeout=10)[name].result(30)
    with RawConnection(broker.bootstrap) as conn:
        cases = [
            ("retention.ms", "abc", "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
            # ConfigDef prints the parsed value: a DOUBLE 2 is "2.0".
            ("min.cleanable.dirty.ratio", "2", "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
            ("segment.bytes", "13", "Invalid value 13 for configuration segment.bytes: Value must be at least 14"),
            ("compression.type", "brotli", "Invalid value brotli for configuration compression.type: String must be one of: "
                                           "uncompressed, zstd, lz4, snappy, gzip, producer"),
        ]
        for key, value, message in cases:
            code, text = incremental(conn, TOPIC, name, [("delete.retention.ms", SET, "2000"), (key, SET, value)])
            assert (code, text) == (INVALID_CONFIG, message), key
            # Nothing of the refused request was applied, not even its valid first operation.
            configs = describe(conn, TOPIC, name)[1]
            assert (configs["retention.ms"].value, configs["delete.retention.ms"].config_source) == ("1000", DEFAULT)
        assert incremental(conn, TOPIC, name, [("retention.ms", SET, "3000")]) == (0, None)
        assert describe(conn, TOPIC, name)[1]["retention.ms"].value == "3000"
        assert incremental(conn, TOPIC, name, [("no.such.config", SET, "1")]) == (INVALID_CONFIG, "Unknown topic config name: no.such.config")


def test_describe_broker_lists_kafkas_whole_definition(broker: BrokerProcess) -> None:
    with RawConnection(broker.bootstrap) as conn:
        code, configs = describe(conn, BROKER, str(broker.broker_id), synonyms=True)
    assert code == 0
    kafka_keys = {n for n, s in BROKER_CONFIGS.items() if not s.internal and not s.quota}
    assert kafka_keys <= set(configs) and len(kafka_keys) > 300
    assert (configs["broker.id"].value, configs["broker.id"].config_source, configs["broker.id"].read_only) == ("1", STATIC, True)
    threads = configs["num.io.threads"]
    assert (threads.value, threads.config_source, threads.read_only) == ("8", DEFAULT, False)
    assert configs["log.retention.hours"].documentation  # include_documentation


def test_dynamic_broker_configs_on_a_standalone_broker(broker_factory: Callable[..., BrokerProcess],
                                                       topic_name: Callable[..., str]) -> None:
    b = broker_factory()
    name = topic_name()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=10)[name].result(30)
    with RawConnection(b.bootstrap) as conn:
        assert incremental(conn, BROKER, "1", [("log.retention.ms", SET, "1234567")]) == (0, None)
        retention = describe(conn, TOPIC, name)[1]["retention.ms"]
        assert (retention.value, retention.config_source) == ("1234567", DYNAMIC_BROKER)
        # The cluster-wide default, and a per-broker config refused there.
        assert incremental(conn, BROKER, "", [("log.cleaner.threads", SET, "2")]) == (0, None)
        _code, defaults = describe(conn, BROKER, "")
        assert (defaults["log.cleaner.threads"].value, defaults["log.cleaner.threads"].config_source) == ("2", DYNAMIC_DEFAULT)
        code, text = incremental(conn, BROKER, "", [("listeners", SET, "PLAINTEXT://127.0.0.1:1")])
        assert code == INVALID_CONFIG and text is not None and "broker id must be specified" in text
        # Legacy AlterConfigs replaces this broker's whole dynamic set.
        R = AlterConfigsRequest.AlterConfigsResource
        resp = conn.request(AlterConfigsRequest(version=1, validate_only=False, resources=[
            R(resource_type=BROKER, resource_name="1", configs=[
                R.AlterableConfig(name="leader.replication.throttled.rate", value="1048576")])]), AlterConfigsResponse, 1)
        assert resp.responses[0].error_code == 0
        _code, mine = describe(conn, BROKER, "1")
        assert (mine["leader.replication.throttled.rate"].value, mine["leader.replication.throttled.rate"].config_source) == (
            "1048576", DYNAMIC_BROKER)
        retention = describe(conn, TOPIC, name)[1]["retention.ms"]
        assert retention.config_source == DEFAULT  # log.retention.ms went with the replaced set


def test_configs_tool_describes_all_and_the_broker_default(broker_factory: Callable[..., BrokerProcess],
                                                           topic_name: Callable[..., str]) -> None:
    """kafka-configs.sh's output (ConfigCommand.describeResourceConfig, 3.9): "All configs for topic t are:"
    with every config, "  name=value sensitive=false synonyms={SOURCE:name=value, ...}", sorted by name;
    --entity-default on brokers is the cluster-wide default ("Default configs for brokers in the cluster
    are:"), and altering it says "Completed updating default config for brokers in the cluster."."""
    b = broker_factory()
    name = topic_name()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config={"retention.ms": "1000"})], operation_timeout=10)[name].result(30)

    def cli(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "headwater", "configs", "--bootstrap-server", b.bootstrap, *args],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    out = cli("--describe", "--all", "--entity-type", "topics", "--entity-name", name).splitlines()
    assert out[0] == f"All configs for topic {name} are:"
    assert len(out) == 1 + 36 and out[1:] == sorted(out[1:])
    # ConfigHelper.configSynonyms drops every synonym before log.retention.ms, which has no default:
    # the broker's 168 hours are not listed.
    assert "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}" in out
    assert "  segment.bytes=1073741824 sensitive=false synonyms={DEFAULT_CONFIG:log.segment.bytes=1073741824}" in out
    out = cli("--describe", "--entity-type", "topics", "--entity-name", name).splitlines()
    assert out == [f"Dynamic configs for topic {name} are:",
                   "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}"]
    assert cli("--alter", "--entity-type", "brokers", "--entity-default", "--add-config", "log.cleaner.threads=2") == (
        "Completed updating default config for brokers in the cluster.\n")
    out = cli("--describe", "--entity-type", "brokers", "--entity-default").splitlines()
    assert out == ["Default configs for brokers in the cluster are:",
                   "  log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.threads=2}"]


def test_kafkajs_sets_a_broker_throttle_with_alter_configs(broker_factory: Callable[..., BrokerProcess]) -> None:
    """KafkaJS's admin.alterConfigs is the legacy AlterConfigs (API 33): on a BROKER resource it
    replaces the broker's dynamic configs (ZkAdminManager.alterConfigs), so a throttle set through it
    is described as DYNAMIC_BROKER_CONFIG; a read-only config is refused with INVALID_CONFIG."""
    b = broker_factory()

    def alter(setting: str) -> dict[str, Any]:
        done = subprocess.run(["node", str(JS / "broker_config.js"), b.bootstrap, "1", setting], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        return dict(json.loads(done.stdout))

    assert alter("leader.replication.throttled.rate=1048576") == {
        "error": None, "value": "1048576", "source": DYNAMIC_BROKER}
    assert alter("broker.id=7") == {"error": "INVALID_CONFIG", "value": "1", "source": STATIC}


def dynamic_values(per_broker: bool) -> dict[str, str]:
    """A valid value for each of Kafka 3.9's dynamic broker configs that may be set without a listener
    prefix (DynamicBrokerConfig.AllDynamicConfigs less the SSL/SASL ones, which need one): its
    default, or for those without one a value in range."""
    unset_defaults = {"log.roll.ms": "3600000", "log.roll.jitter.ms": "0", "log.retention.ms": "604800000",
                      "log.flush.interval.ms": "60000"}
    out = {}
    for name, spec in BROKER_CONFIGS.items():
        if not spec.dynamic or spec.since != "3.9" or name in LISTENER_ONLY_CONFIGS or spec.is_sensitive:
            continue
        if not per_broker and spec.scope is Scope.PER_BROKER:
            continue
        value = unset_defaults.get(name, spec.default)
        if value is not None and "listener" not in name and "advertised" not in name and not name.startswith("sasl."):
            out[name] = value
    return out


def test_every_dynamic_broker_config_is_set_described_and_reset(broker_factory: Callable[..., BrokerProcess]) -> None:
    """Each of Kafka 3.9's dynamic broker configs, per broker and (the cluster-wide ones) at the
    default, through confluent-kafka's incremental_alter_configs: described as DYNAMIC_BROKER_CONFIG /
    DYNAMIC_DEFAULT_BROKER_CONFIG with its value, and gone again after a DELETE
    (ConfigHelper.createBrokerConfigEntry; DynamicBrokerConfig.validateConfigs)."""
    b = broker_factory()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})

    def change(name: str, values: dict[str, str], op: AlterConfigOpType) -> None:
        if name == "":  # confluent-kafka refuses an empty resource name: the default through a raw request
            with RawConnection(b.bootstrap) as conn:
                code = SET if op == AlterConfigOpType.SET else DELETE
                assert incremental(conn, BROKER, "", [(k, code, v if code == SET else None) for k, v in values.items()]) == (0, None)
            return
        resource = ConfigResource("broker", name, incremental_configs=[
            ConfigEntry(k, v if op == AlterConfigOpType.SET else None, incremental_operation=op) for k, v in values.items()])
        next(iter(admin.incremental_alter_configs([resource]).values())).result(30)

    for entity, source in (("1", DYNAMIC_BROKER), ("", DYNAMIC_DEFAULT)):
        values = dynamic_values(per_broker=entity != "")
        assert len(values) > (60 if entity else 40)
        change(entity, values, AlterConfigOpType.SET)
        with RawConnection(b.bootstrap) as conn:
            _code, described = describe(conn, BROKER, entity)
        for key, value in values.items():
            assert (described[key].value, described[key].config_source) == (normalize(BROKER_CONFIGS[key], value), source), key
        change(entity, values, AlterConfigOpType.DELETE)
        with RawConnection(b.bootstrap) as conn:
            _code, described = describe(conn, BROKER, entity)
        assert not [k for k in values if k in described and described[k].config_source == source]

    # Kafka's answers for invalid values, prefixed with the resource as ZkAdminManager words it.
    with RawConnection(b.bootstrap) as conn:
        assert incremental(conn, BROKER, "1", [("log.cleaner.threads", SET, "-1")]) == (
            INVALID_CONFIG, "Invalid config value for resource ConfigResource(type=BROKER, name='1'): "
                            "Invalid value -1 for configuration log.cleaner.threads: Value must be at least 0")
        assert incremental(conn, BROKER, "1", [("log.retention.ms", SET, "soon")]) == (
            INVALID_CONFIG, "Invalid config value for resource ConfigResource(type=BROKER, name='1'): "
                            "Invalid value soon for configuration log.retention.ms: Not a number of type LONG")


def test_remote_storage_is_refused_without_tiered_storage(broker: BrokerProcess, topic_name: Callable[..., str]) -> None:
    """LogConfig.validateRemoteStorageOnlyIfSystemEnabled (3.9): remote.storage.enable=true on a broker
    without remote.log.storage.system.enable is INVALID_CONFIG, at creation and on a change."""
    message = "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."
    name = topic_name()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([NewTopic(name, 1, 1, config={"remote.storage.enable": "true"})],
                            operation_timeout=10)[name].result(30)
    assert refused.value.args[0].code() == INVALID_CONFIG and message in refused.value.args[0].str()
    admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=10)[name].result(30)
    with RawConnection(broker.bootstrap) as conn:
        assert incremental(conn, TOPIC, name, [("remote.storage.enable", SET, "true")]) == (INVALID_CONFIG, message)
