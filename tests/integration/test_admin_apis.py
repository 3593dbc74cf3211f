"""Topic admin APIs over real clients: CreateTopics and its errors, DeleteTopics, CreatePartitions,
DescribeConfigs / IncrementalAlterConfigs on a topic, DescribeLogDirs, DescribeCluster,
DeleteRecords, and that topics, configs and the cluster id survive a restart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)
from hw_support import consume_partitions, create_topic, wait_until, watermarks
from kafka.admin import KafkaAdminClient
from kafka.admin import NewPartitions as KpNewPartitions
from kafka.admin import NewTopic as KpNewTopic

from headwater.admin.local import BrokerProcess

UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40
INVALID_REQUEST = 42


@pytest.fixture
def kp_admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        yield admin
    finally:
        admin.close()


def _codes(result: dict) -> dict[str, int]:
    return {t["name"]: t["error_code"] for t in result["topics"]}


def _error_code(future: object) -> int:
    with pytest.raises(KafkaException) as info:
        future.result(timeout=15)  # type: ignore[attr-defined]
    return int(info.value.args[0].code())


def _partition_counts(broker: BrokerProcess, *topics: str) -> dict[str, int | None]:
    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    return {t: (len(md.topics[t].partitions) if t in md.topics and md.topics[t].error is None else None)
            for t in topics}


def test_create_topics_errors(broker: BrokerProcess, kp_admin: KafkaAdminClient,
                              topic_name: Callable[..., str]) -> None:
    existing = create_topic(broker.bootstrap, topic_name(), partitions=2)
    rf_too_big, zero_parts, dup = topic_name("rf"), topic_name("zero"), topic_name("dup")
    bad_names = ["bad name", "bad/name", ".", "..", "x" * 250, "ümlaut"]
    result = kp_admin.create_topics(
        [KpNewTopic(existing, 1, 1), KpNewTopic(rf_too_big, 1, 3), KpNewTopic(zero_parts, 0, 1),
         KpNewTopic(dup, 1, 1), KpNewTopic(dup, 1, 1)]
        + [KpNewTopic(n, 1, 1) for n in bad_names],
        raise_errors=False,
    )
    codes = {t["name"]: t["error_code"] for t in result["topics"] if t["name"] != dup}
    assert codes == {
        existing: TOPIC_ALREADY_EXISTS,
        rf_too_big: INVALID_REPLICATION_FACTOR,
        zero_parts: INVALID_PARTITIONS,
        **{n: INVALID_TOPIC_EXCEPTION for n in bad_names},
    }
    assert [t["error_code"] for t in result["topics"] if t["name"] == dup] == [INVALID_REQUEST, INVALID_REQUEST]
    # Nothing was created by the failed requests, and the existing topic kept its 2 partitions.
    assert _partition_counts(broker, existing, rf_too_big, zero_parts, dup) == {
        existing: 2, rf_too_big: None, zero_parts: None, dup: None}

    # The same through confluent-kafka, plus a bad config and validate_only.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    bad_config, validated = topic_name("badcfg"), topic_name("validated")
    futures = admin.create_topics([NewTopic(existing, 1, 1), NewTopic(bad_config, 1, 1,
                                                                      config={"retention.ms": "soon"})])
    assert _error_code(futures[existing]) == TOPIC_ALREADY_EXISTS
    assert _error_code(futures[bad_config]) == INVALID_CONFIG
    admin.create_topics([NewTopic(validated, 4, 1)], validate_only=True)[validated].result(timeout=15)
    assert _partition_counts(broker, bad_config, validated) == {bad_config: None, validated: None}


def test_create_topic_with_defaults_and_configs(broker: BrokerProcess, kp_admin: KafkaAdminClient,
                                                topic_name: Callable[..., str]) -> None:
    name = topic_name()
    result = kp_admin.create_topics([KpNewTopic(name, -1, -1, topic_configs={"retention.ms": "3600000"})])
    (t,) = result["topics"]
    assert (t["error_code"], t["num_partitions"], t["replication_factor"]) == (0, 1, 1)  # num.partitions=1
    assert t["configs"]["retention.ms"]["value"] == "3600000"
    assert t["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert t["configs"]["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"


def test_delete_topics(broker: BrokerProcess, kp_admin: KafkaAdminClient, topic_name: Callable[..., str]) -> None:
    name = create_topic(broker.bootstrap, topic_name(), partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce(name, partition=i % 2, value=b"old-%d" % i)
    assert producer.flush(15) == 0
    missing = topic_name("missing")
    assert _codes(kp_admin.delete_topics([name, missing], raise_errors=False)) == {
        name: 0, missing: UNKNOWN_TOPIC_OR_PARTITION}
    assert _partition_counts(broker, name) == {name: None}
    # The name can be reused, and the new topic starts empty at offset 0.
    create_topic(broker.bootstrap, name, partitions=1)
    assert watermarks(broker.bootstrap, name, [0]) == {0: (0, 0)}
    producer.produce(name, partition=0, value=b"new")
    assert producer.flush(15) == 0
    (rec,) = consume_partitions(broker.bootstrap, name, {0: 1})
    assert (rec.offset, rec.value) == (0, b"new")


def test_create_partitions(broker: BrokerProcess, kp_admin: KafkaAdminClient, topic_name: Callable[..., str]) -> None:
    name = create_topic(broker.bootstrap, topic_name(), partitions=1)
    resp = kp_admin.create_partitions({name: KpNewPartitions(3)})
    assert [r.error_code for r in resp.results] == [0]
    assert _partition_counts(broker, name) == {name: 3}
    for new_count, code in [(2, INVALID_PARTITIONS), (3, INVALID_PARTITIONS)]:
        resp = kp_admin.create_partitions({name: KpNewPartitions(new_count)}, raise_errors=False)
        assert [r.error_code for r in resp.results] == [code]
    missing = topic_name("missing")
    resp = kp_admin.create_partitions({missing: KpNewPartitions(2)}, raise_errors=False)
    assert [r.error_code for r in resp.results] == [UNKNOWN_TOPIC_OR_PARTITION]
    # confluent-kafka: validate_only changes nothing; then grow to 4.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_partitions([NewPartitions(name, 5)], validate_only=True)[name].result(timeout=15)
    assert _partition_counts(broker, name) == {name: 3}
    admin.create_partitions([NewPartitions(name, 4)])[name].result(timeout=15)
    assert _partition_counts(broker, name) == {name: 4}
    # Every partition, old and new, takes writes and reads them back.
    producer = Producer({"bootstrap.servers": broker.bootstrap, "topic.metadata.refresh.interval.ms": 100})
    for p in range(4):
        producer.produce(name, partition=p, value=b"p%d" % p)
    assert producer.flush(15) == 0
    got = consume_partitions(broker.bootstrap, name, {p: 1 for p in range(4)})
    assert sorted((c.partition, c.offset, c.value) for c in got) == [(p, 0, b"p%d" % p) for p in range(4)]


def _topic_configs(admin: AdminClient, name: str) -> dict[str, ConfigEntry]:
    res = ConfigResource("topic", name)
    return admin.describe_configs([res])[res].result(timeout=15)  # type: ignore[no-any-return]


def test_describe_and_incremental_alter_topic_configs(broker: BrokerProcess, topic_name: Callable[..., str]) -> None:
    name = create_topic(broker.bootstrap, topic_name(), partitions=1, configs={"cleanup.policy": "delete"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    configs = _topic_configs(admin, name)
    assert configs["retention.ms"].value == "604800000"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    def alter(*entries: ConfigEntry) -> object:
        res = ConfigResource("topic", name, incremental_configs=list(entries))
        return admin.incremental_alter_configs([res])[res]

    alter(ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET),
          ConfigEntry("segment.bytes", "1048576", incremental_operation=AlterConfigOpType.SET)).result(timeout=15)
    configs = _topic_configs(admin, name)
    assert (configs["retention.ms"].value, configs["retention.ms"].source) == (
        "3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert configs["segment.bytes"].value == "1048576"
    assert configs["cleanup.policy"].value == "delete", "incremental alter must keep other overrides"

    alter(ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)).result(timeout=15)
    configs = _topic_configs(admin, name)
    assert (configs["retention.ms"].value, configs["retention.ms"].source) == (
        "604800000", ConfigSource.DEFAULT_CONFIG.value)
    assert configs["segment.bytes"].value == "1048576"

    # Invalid values and unknown topics are refused and change nothing.
    assert _error_code(alter(ConfigEntry("retention.ms", "often",
                                         incremental_operation=AlterConfigOpType.SET))) == INVALID_CONFIG
    assert _error_code(alter(ConfigEntry("no.such.config", "1",
                                         incremental_operation=AlterConfigOpType.SET))) == INVALID_CONFIG
    assert _topic_configs(admin, name)["retention.ms"].value == "604800000"
    missing = ConfigResource("topic", topic_name("missing"))
    assert _error_code(admin.describe_configs([missing])[missing]) == UNKNOWN_TOPIC_OR_PARTITION


def test_describe_log_dirs_sizes_grow(broker: BrokerProcess, kp_admin: KafkaAdminClient,
                                      topic_name: Callable[..., str]) -> None:
    name = create_topic(broker.bootstrap, topic_name(), partitions=2)

    def sizes() -> dict[int, int]:
        out = {}
        for entry in kp_admin.describe_log_dirs():
            for d in entry["log_dirs"]:
                assert d["error_code"] == 0
                for t in d["topics"]:
                    if t["name"] == name:
                        out.update({p["partition_index"]: p["partition_size"] for p in t["partitions"]})
        return out

    assert sizes() == {0: 0, 1: 0}
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(2000):
        producer.produce(name, partition=0, value=b"%06d" % i + b"z" * 500)
    assert producer.flush(15) == 0
    after = sizes()
    assert after[0] > 2000 * 500 and after[1] == 0
    producer.produce(name, partition=1, value=b"one")
    assert producer.flush(15) == 0
    assert sizes()[1] > 0


def test_describe_cluster(broker: BrokerProcess, kp_admin: KafkaAdminClient) -> None:
    kp = kp_admin.describe_cluster()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept referenced until the future is done
    cf = admin.describe_cluster(request_timeout=10).result(timeout=15)
    assert kp["cluster_id"] and kp["cluster_id"] == cf.cluster_id
    assert kp["controller_id"] == 1 == cf.controller.id
    assert [(n.id, n.host, n.port) for n in cf.nodes] == [(1, "127.0.0.1", broker.port)]


def test_delete_records_moves_log_start(broker: BrokerProcess, topic_name: Callable[..., str]) -> None:
    name = create_topic(broker.bootstrap, topic_name(), partitions=1)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(100):
        producer.produce(name, partition=0, value=b"%d" % i)
    assert producer.flush(15) == 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    tp = TopicPartition(name, 0, 40)
    result = admin.delete_records([tp])[tp].result(timeout=15)
    assert result.low_watermark == 40
    assert watermarks(broker.bootstrap, name, [0]) == {0: (40, 100)}
    got = consume_partitions(broker.bootstrap, name, {0: 100}, starts={0: 40})
    assert [c.value for c in sorted(got, key=lambda c: c.offset)] == [b"%d" % i for i in range(40, 100)]


def test_topics_configs_and_cluster_id_survive_restart(fresh_broker: BrokerProcess,
                                                       topic_name: Callable[..., str]) -> None:
    name = create_topic(fresh_broker.bootstrap, topic_name(), partitions=3, configs={"retention.ms": "7200000"})
    producer = Producer({"bootstrap.servers": fresh_broker.bootstrap})
    for p in range(3):
        producer.produce(name, partition=p, value=b"before-%d" % p)
    assert producer.flush(15) == 0
    admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    cluster_id = admin.describe_cluster(request_timeout=10).result(timeout=15).cluster_id
    assert fresh_broker.stop() == 0
    fresh_broker.start()
    admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    assert admin.describe_cluster(request_timeout=10).result(timeout=15).cluster_id == cluster_id
    assert _partition_counts(fresh_broker, name) == {name: 3}
    assert _topic_configs(admin, name)["retention.ms"].value == "7200000"
    wait_until(lambda: watermarks(fresh_broker.bootstrap, name, range(3)) == {p: (0, 1) for p in range(3)},
               what="one record per partition after restart")
    got = consume_partitions(fresh_broker.bootstrap, name, {p: 1 for p in range(3)})
    assert sorted((c.partition, c.value) for c in got) == [(p, b"before-%d" % p) for p in range(3)]
