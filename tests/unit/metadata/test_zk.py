"""Znode codecs against the JSON Kafka writes (golden values from Kafka's ZkData and the reference)."""

from __future__ import annotations

import json
import uuid

import pytest

from headwater.metadata import zk
from headwater.metadata.zk import PATHS

# --- /controller, /controller_epoch ---------------------------------------------------------------


def test_controller_v2_bytes() -> None:
    assert zk.encode_controller(1, 1700000000000) == (
        b'{"version":2,"brokerid":1,"timestamp":"1700000000000","kraftControllerEpoch":-1}'
    )
    assert zk.decode_controller(zk.encode_controller(3, 5)) == zk.Controller(3, 5, -1)


def test_controller_v1_and_kraft_owner() -> None:
    assert zk.decode_controller(b'{"version":1,"brokerid":2,"timestamp":"1234"}') == zk.Controller(2, 1234, -1)
    owner = zk.decode_controller(b'{"version":2,"brokerid":3000,"timestamp":"1","kraftControllerEpoch":7}')
    assert owner.kraft_controller_epoch == 7
    with pytest.raises(ValueError, match=r"^/controller: missing 'brokerid'"):
        zk.decode_controller(b'{"version":2,"timestamp":"1"}')
    with pytest.raises(ValueError, match=r"^/controller: 'timestamp' must be a decimal string"):
        zk.decode_controller(b'{"version":2,"brokerid":1,"timestamp":1}')


def test_controller_epoch_is_a_bare_integer() -> None:
    assert zk.encode_controller_epoch(5) == b"5"
    assert zk.decode_controller_epoch(b"5") == 5
    assert zk.decode_controller_epoch(b"0") == 0
    with pytest.raises(ValueError, match="/controller_epoch"):
        zk.decode_controller_epoch(b'{"epoch":5}')


# --- /brokers/ids/<id> ----------------------------------------------------------------------------

GOLDEN_BROKER_V5 = (
    b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://b1:9092"],'
    b'"jmx_port":-1,"port":9092,"host":"b1","version":5,"timestamp":"1700000000000"}'
)


def test_broker_v5_golden() -> None:
    reg = zk.BrokerRegistration(1, (zk.Endpoint("PLAINTEXT", "b1", 9092, "PLAINTEXT"),), 1700000000000)
    assert zk.encode_broker(reg) == GOLDEN_BROKER_V5
    assert zk.decode_broker(1, GOLDEN_BROKER_V5) == reg


def test_broker_v5_listeners_rack_and_no_plaintext() -> None:
    reg = zk.BrokerRegistration(
        7, (zk.Endpoint("INTERNAL", "10.0.0.7", 9093, "SSL"), zk.Endpoint("EXTERNAL", "::1", 9094, "SASL_SSL")),
        42, rack="rack-a", features={"metadata.version": (1, 3)})
    doc = json.loads(zk.encode_broker(reg))
    assert doc["host"] is None and doc["port"] == -1  # no PLAINTEXT endpoint
    assert doc["endpoints"] == ["INTERNAL://10.0.0.7:9093", "EXTERNAL://[::1]:9094"]
    assert doc["listener_security_protocol_map"] == {"INTERNAL": "SSL", "EXTERNAL": "SASL_SSL"}
    assert doc["rack"] == "rack-a"
    assert doc["features"] == {"metadata.version": {"min_version": 1, "max_version": 3}}
    assert doc["timestamp"] == "42"
    assert zk.decode_broker(7, zk.encode_broker(reg)) == reg
    assert "rack" not in json.loads(GOLDEN_BROKER_V5)


def test_broker_older_versions_decode() -> None:
    v1 = zk.decode_broker(0, b'{"version":1,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666"}')
    assert v1.endpoints == (zk.Endpoint("PLAINTEXT", "localhost", 9092, "PLAINTEXT"),)
    assert (v1.jmx_port, v1.timestamp_ms, v1.version) == (9999, 2233345666, 1)
    v3 = zk.decode_broker(0, b'{"version":3,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
                             b'"endpoints":["PLAINTEXT://host1:9092", "SSL://host1:9093"],"rack":"dc1"}')
    assert v3.endpoints == (zk.Endpoint("PLAINTEXT", "host1", 9092, "PLAINTEXT"), zk.Endpoint("SSL", "host1", 9093, "SSL"))
    assert v3.rack == "dc1"
    v4 = zk.decode_broker(0, b'{"version":4,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
                             b'"endpoints":["CLIENT://host1:9092", "REPLICATION://host1:9093"],'
                             b'"listener_security_protocol_map":{"CLIENT":"SSL","REPLICATION":"PLAINTEXT"},"rack":"dc1"}')
    assert [(e.listener, e.security_protocol) for e in v4.endpoints] == [("CLIENT", "SSL"), ("REPLICATION", "PLAINTEXT")]
    assert v4.endpoint("REPLICATION") == zk.Endpoint("REPLICATION", "host1", 9093, "PLAINTEXT")


@pytest.mark.parametrize(("data", "problem"), [
    (b"", "no data"),
    (b"{not json", "not JSON"),
    (b"[1]", "expected a JSON object"),
    (b'{"version":5,"endpoints":[],"timestamp":"1"}', "missing 'jmx_port'"),
    (b'{"version":5,"jmx_port":-1,"endpoints":["nope"],"timestamp":"1"}', "malformed endpoint 'nope'"),
    (b'{"version":2,"jmx_port":-1,"endpoints":["CLIENT://h:1"],"timestamp":"1"}', "no security protocol for listener 'CLIENT'"),
    (b'{"version":5,"jmx_port":"-1","endpoints":[],"timestamp":"1"}', "'jmx_port' must be an integer"),
    (b'{"version":5,"jmx_port":-1,"endpoints":[],"timestamp":1700000000000}', "'timestamp' must be a decimal string"),
])
def test_broker_malformed(data: bytes, problem: str) -> None:
    with pytest.raises(ValueError) as err:
        zk.decode_broker(4, data)
    assert str(err.value).startswith("/brokers/ids/4: ")
    assert problem in str(err.value)


# --- /brokers/topics/<t> and partition state -----------------------------------------------------


def test_topic_v3_golden() -> None:
    golden = b'{"version":3,"partitions":{"0":[1,2]},"adding_replicas":{},"removing_replicas":{},"topic_id":"q8t0Dt2vQXqzV3hKjJc1Bg"}'
    decoded = zk.decode_topic("t", golden)
    assert decoded.partitions == {0: (1, 2)}
    assert decoded.topic_id is not None and zk.kafka_uuid(decoded.topic_id) == "q8t0Dt2vQXqzV3hKjJc1Bg"
    assert zk.encode_topic(decoded) == golden


def test_topic_reassignment_state_and_no_id() -> None:
    a = zk.TopicAssignment({0: (4, 3, 2, 1), 1: (2,)}, None, {0: (4,), 1: ()}, {0: (1,)})
    doc = json.loads(zk.encode_topic(a))
    assert doc == {"version": 3, "partitions": {"0": [4, 3, 2, 1], "1": [2]}, "adding_replicas": {"0": [4]},
                   "removing_replicas": {"0": [1]}}
    assert zk.decode_topic("t", zk.encode_topic(a)) == zk.TopicAssignment({0: (4, 3, 2, 1), 1: (2,)}, None, {0: (4,)}, {0: (1,)})
    v1 = zk.decode_topic("t", b'{"version":1,"partitions":{"0":[1,2,3],"1":[2,3,1]}}')
    assert v1 == zk.TopicAssignment({0: (1, 2, 3), 1: (2, 3, 1)})
    with pytest.raises(ValueError, match=r"^/brokers/topics/t: 'partitions'\[0\] must be an array"):
        zk.decode_topic("t", b'{"version":3,"partitions":{"0":1}}')
    with pytest.raises(ValueError, match=r"^/brokers/topics/t: 'topic_id': not a Kafka uuid"):
        zk.decode_topic("t", b'{"version":3,"partitions":{},"topic_id":"abc"}')
    with pytest.raises(ValueError, match=r"unsupported version 4"):
        zk.decode_topic("t", b'{"version":4,"partitions":{}}')


def test_kafka_uuid_form() -> None:
    u = uuid.UUID("abcb740e-ddaf-417a-b357-784a8c973506")
    assert zk.kafka_uuid(u) == "q8t0Dt2vQXqzV3hKjJc1Bg"
    assert zk.parse_kafka_uuid("q8t0Dt2vQXqzV3hKjJc1Bg") == u
    assert "-" in zk.kafka_uuid(uuid.UUID(bytes=b"\xfb" * 16)) or "_" in zk.kafka_uuid(uuid.UUID(bytes=b"\xff" * 16))


def test_partition_state_golden() -> None:
    golden = b'{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":7,"isr":[1,2]}'
    state = zk.PartitionStateZNode(leader=1, leader_epoch=7, isr=(1, 2), controller_epoch=3)
    assert zk.encode_partition_state(state) == golden
    assert zk.decode_partition_state("t", 0, golden) == state
    recovering = zk.PartitionStateZNode(-1, 8, (2,), 3, leader_recovery_state=1)
    assert json.loads(zk.encode_partition_state(recovering))["leader_recovery_state"] == 1
    assert zk.decode_partition_state("t", 0, zk.encode_partition_state(recovering)) == recovering
    with pytest.raises(ValueError, match=r"^/brokers/topics/t/partitions/0/state: missing 'isr'"):
        zk.decode_partition_state("t", 0, b'{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":7}')


# --- /admin ---------------------------------------------------------------------------------------


def test_reassign_partitions_golden_and_strict() -> None:
    golden = b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]}]}'
    assert zk.decode_reassign_partitions(golden) == {("t", 0): (1, 2, 3)}
    assert zk.encode_reassign_partitions({("t", 0): [1, 2, 3]}) == golden
    with pytest.raises(ValueError, match=r"^/admin/reassign_partitions: unknown keys \['extra'\]"):
        zk.decode_reassign_partitions(b'{"version":1,"partitions":[],"extra":1}')
    with pytest.raises(ValueError, match=r"partitions\[0\] has unknown keys \['log_dirs'\]"):
        zk.decode_reassign_partitions(b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["any"]}]}')
    with pytest.raises(ValueError, match=r"partitions\[0\].partition must be an integer"):
        zk.decode_reassign_partitions(b'{"version":1,"partitions":[{"topic":"t","partition":"0","replicas":[1]}]}')


def test_preferred_replica_election_golden() -> None:
    golden = b'{"version":1,"partitions":[{"topic":"t","partition":0}]}'
    assert zk.decode_preferred_replica_election(golden) == {("t", 0)}
    assert zk.encode_preferred_replica_election({("t", 0)}) == golden


# --- configs --------------------------------------------------------------------------------------


def test_config_znode() -> None:
    data = zk.encode_config({"retention.ms": "5", "cleanup.policy": "compact"})
    assert data == b'{"version":1,"config":{"cleanup.policy":"compact","retention.ms":"5"}}'
    assert zk.decode_config("topics", "t", data) == {"retention.ms": "5", "cleanup.policy": "compact"}
    with pytest.raises(ValueError, match=r"^/config/topics/t: config 'retention.ms' must be a string"):
        zk.decode_config("topics", "t", b'{"version":1,"config":{"retention.ms":5}}')
    with pytest.raises(ValueError):
        zk.encode_config({"retention.ms": 5})  # type: ignore[dict-item]


@pytest.mark.parametrize("path", ["topics/foo", "brokers/<default>", "users/alice/clients/app1"])
def test_config_change_v2(path: str) -> None:
    data = zk.encode_config_change(path)
    assert json.loads(data) == {"version": 2, "entity_path": path}
    assert zk.decode_config_change(data) == path


def test_config_change_legacy_v1_and_errors() -> None:
    assert zk.decode_config_change(b'{"version":1,"entity_type":"topics","entity_name":"foo"}') == "topics/foo"
    with pytest.raises(ValueError, match="version 1 supports topics and clients"):
        zk.decode_config_change(b'{"version":1,"entity_type":"users","entity_name":"alice"}')
    with pytest.raises(ValueError, match="bad entity path"):
        zk.decode_config_change(b'{"version":2,"entity_path":"nope/x"}')
    with pytest.raises(ValueError):
        zk.encode_config_change("topics")


def test_sanitize_like_kafka() -> None:
    assert zk.sanitize("User:alice") == "User%3Aalice"
    assert zk.sanitize("a b*c~d.e-f_g") == "a%20b%2Ac%7Ed.e-f_g"
    assert zk.desanitize(zk.sanitize("ü ~*/x")) == "ü ~*/x"
    assert PATHS.config("users", f"{zk.sanitize('alice')}/clients/app1") == "/config/users/alice/clients/app1"


# --- singletons -----------------------------------------------------------------------------------


def test_cluster_id_version_is_a_string() -> None:
    assert zk.encode_cluster_id("q8t0Dt2vQXqzV3hKjJc1Bg") == b'{"version":"1","id":"q8t0Dt2vQXqzV3hKjJc1Bg"}'
    assert zk.decode_cluster_id(b'{"version":"1","id":"abc"}') == "abc"
    with pytest.raises(ValueError, match=r"^/cluster/id: missing 'id'"):
        zk.decode_cluster_id(b'{"version":"1"}')


def test_producer_id_block() -> None:
    block = zk.next_producer_id_block(None, broker=2)
    assert block == zk.ProducerIdBlock(2, 0, 999)
    assert zk.encode_producer_id_block(block) == b'{"version":1,"broker":2,"block_start":"0","block_end":"999"}'
    assert zk.decode_producer_id_block(zk.encode_producer_id_block(block)) == block
    assert zk.next_producer_id_block(block, broker=3) == zk.ProducerIdBlock(3, 1000, 1999)
    assert zk.decode_producer_id_block(b"") is None
    with pytest.raises(ValueError, match=r"^/latest_producer_id_block: 'block_end' must be a decimal string"):
        zk.decode_producer_id_block(b'{"version":1,"broker":2,"block_start":"0","block_end":999}')


def test_feature() -> None:
    assert zk.encode_feature(zk.FeatureZNode(True, {})) == b'{"version":2,"status":1,"features":{}}'
    v1 = zk.decode_feature(b'{"version":1,"status":1,"features":{"f":{"min_version_level":1,"max_version_level":2}}}')
    assert v1 == zk.FeatureZNode(True, {"f": 2})
    with pytest.raises(ValueError, match="'status' must be 0 or 1"):
        zk.decode_feature(b'{"version":2,"status":3,"features":{}}')


# --- paths ----------------------------------------------------------------------------------------


def test_paths() -> None:
    assert PATHS.broker(3) == "/brokers/ids/3"
    assert PATHS.topic("t") == "/brokers/topics/t"
    assert PATHS.partition_state("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert PATHS.delete_topic("t") == "/admin/delete_topics/t"
    assert PATHS.config("topics", "t") == "/config/topics/t"
    assert PATHS.CONFIG_CHANGE_PREFIX == "/config/changes/config_change_"
    assert len(PATHS.TOP_LEVEL) == 14 and len(set(PATHS.TOP_LEVEL)) == 14
    assert PATHS.TOP_LEVEL[0] == "/consumers" and "/isr_change_notification" in PATHS.TOP_LEVEL
    assert "/config/client-metrics" not in PATHS.TOP_LEVEL
    with pytest.raises(ValueError):
        PATHS.config("groups", "g")
