"""CreateTopics, DeleteTopics and CreatePartitions through the controller."""

from __future__ import annotations

import json
import uuid

from controller_fixtures import elect, reg, requests, run, snapshot, tp

from headwater.controller.controller import Controller, ControllerConfig, PartitionPhase
from headwater.controller.effects import (
    ControllerResult,
    CreatePartitionsResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    TopicResult,
    UpdateMetadataRequest,
    ZkOp,
)
from headwater.controller.events import (
    BrokerExpired,
    BrokerRegistered,
    CreatePartitionsRequested,
    CreateTopicsRequested,
    DeleteTopicsRequested,
    NewPartitions,
    NewTopic,
    StopReplicaResponseReceived,
)
from headwater.controller.znodes import LeaderIsr, ZkSnapshot
from headwater.protocol.errors import ErrorCode

TID = uuid.UUID(int=42)


def create(ctl: Controller, *topics: NewTopic, validate_only: bool = False) -> tuple[list[TopicResult], ControllerResult]:
    result = run(ctl, CreateTopicsRequested(topics, validate_only))
    assert isinstance(result.response, CreateTopicsResponse)
    return list(result.response.topics), result


def test_create_topic_overwrites_a_config_znode_its_topic_left_behind() -> None:
    """A /config/topics/<t> without its topic (the chaos suite met one) is overwritten, not created:
    a create would fail the whole multi, and each new controller would fail the client's retry too."""
    ctl, _ = elect(snapshot(brokers=(1, 2, 3), configs={"t": {"retention.ms": "9"}}))
    results, result = create(ctl, NewTopic("t", TID, 1, 2, configs={"retention.ms": "5"}))
    assert results[0].error == ErrorCode.NONE
    assert [(w.op, w.path) for w in result.writes][:2] == [(ZkOp.SET, "/config/topics/t"), (ZkOp.CREATE, "/brokers/topics/t")]
    assert ctl.topic_configs["t"] == {"retention.ms": "5"}


def test_create_topic_writes_config_assignment_and_states() -> None:
    ctl, _ = elect(snapshot(brokers=(1, 2, 3)))
    result = ctl.handle(CreateTopicsRequested((NewTopic("t", TID, 3, 2, configs={"retention.ms": "5"}),), start_index=1))
    paths = [(w.op, w.path) for w in result.writes]
    assert paths == [(ZkOp.CREATE, "/config/topics/t"), (ZkOp.CREATE, "/brokers/topics/t")] + [
        (ZkOp.CREATE, f"/brokers/topics/t/partitions/{p}/state") for p in range(3)]
    assert json.loads(result.writes[0].data or b"") == {"version": 1, "config": {"retention.ms": "5"}}
    topic_doc = json.loads(result.writes[1].data or b"")
    assert topic_doc["partitions"] == {"0": [2, 3], "1": [3, 1], "2": [1, 2]}   # Kafka placement from start index 1
    for w in result.writes:
        ctl.apply(w)
    ctl.validate_state()
    assert ctl.states[tp("t", 0)] == LeaderIsr(2, 0, (2, 3), 2, 0)
    assert ctl.topic_configs["t"] == {"retention.ms": "5"}
    lai = requests(result, LeaderAndIsrRequest)
    assert set(lai) == {1, 2, 3} and all(p.is_new and p.topic_id == TID for r in lai.values() for p in r.partitions)
    assert isinstance(result.response, CreateTopicsResponse)
    assert result.response.topics == (TopicResult("t", ErrorCode.NONE, None, TID, 3, 2, {"retention.ms": "5"}),)


def test_manual_assignment_and_errors() -> None:
    ctl, _ = elect(snapshot(brokers=(1, 2, 3), topics={"old": {0: (1,)}}, states={tp("old"): (1, 0, (1,), 0)}))
    results, _ = create(
        ctl,
        NewTopic("m", TID, assignments={0: (3, 1), 1: (1, 2)}),
        NewTopic("old", TID, 1, 1),
        NewTopic("big", TID, 1, 4),
        NewTopic("bad", TID, assignments={0: (1, 9)}),
        NewTopic("cfg", TID, 1, 1, configs={"nope": "1"}),
        NewTopic("d", TID, 1, 1),
        NewTopic("d", TID, 1, 1),
    )
    assert [r.error for r in results] == [
        ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.INVALID_REPLICATION_FACTOR,
        ErrorCode.INVALID_REPLICA_ASSIGNMENT, ErrorCode.INVALID_CONFIG, ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST]
    assert ctl.topics["m"].partitions[0].replicas == (3, 1)
    assert set(ctl.topics) == {"old", "m"}


def test_validate_only_writes_nothing() -> None:
    ctl, _ = elect(snapshot(brokers=(1, 2)))
    results, result = create(ctl, NewTopic("t", TID, 2, 2), validate_only=True)
    assert results[0].error == ErrorCode.NONE and results[0].num_partitions == 2
    assert result.writes == () and result.requests == ()
    assert ctl.topics == {}


def test_defaults_come_from_the_config() -> None:
    ctl, _ = elect(snapshot(brokers=(1, 2)), config=ControllerConfig(default_partitions=3, default_replication_factor=2))
    results, _ = create(ctl, NewTopic("t", TID))
    assert (results[0].num_partitions, results[0].replication_factor) == (3, 2)


def deletion_cluster() -> Controller:
    ctl, _ = elect(snapshot(brokers=(1, 2, 3), topics={"t": {0: (1, 2), 1: (2, 3)}},
                            states={tp("t", 0): (1, 0, (1, 2), 0), tp("t", 1): (2, 0, (2, 3), 0)},
                            configs={"t": {}}))
    return ctl


def test_delete_topic_stops_and_deletes_every_replica_then_the_znodes() -> None:
    ctl = deletion_cluster()
    result = run(ctl, DeleteTopicsRequested(("t", "missing")))
    assert isinstance(result.response, DeleteTopicsResponse)
    assert [r.error for r in result.response.topics] == [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert [(w.op, w.path) for w in result.writes] == [(ZkOp.CREATE, "/admin/delete_topics/t")]
    assert ctl.phase(tp("t", 0)) is PartitionPhase.DELETING
    stops = requests(result, StopReplicaRequest)
    assert {b: [(p.partition, p.delete, p.leader_epoch) for p in r.partitions] for b, r in stops.items()} == {
        1: [(0, True, -2)], 2: [(0, True, -2), (1, True, -2)], 3: [(1, True, -2)]}
    um = requests(result, UpdateMetadataRequest)
    assert {(p.leader, p.leader_epoch) for p in um[1].partitions} == {(-2, -2)}

    assert run(ctl, BrokerExpired(3)).writes == ()     # no elections for a topic being deleted
    assert run(ctl, StopReplicaResponseReceived(1, ((tp("t", 0), ErrorCode.NONE),))).writes == ()
    assert run(ctl, StopReplicaResponseReceived(2, ((tp("t", 0), ErrorCode.NONE), (tp("t", 1), ErrorCode.NONE)))).writes == ()
    assert ctl.pending_deletions("t") == {(tp("t", 1), 3)}
    back = run(ctl, BrokerRegistered(3, 333, reg(3).info))        # deletion resumes on the returning broker
    assert [p.partition for p in requests(back, StopReplicaRequest)[3].partitions] == [1]
    assert requests(back, LeaderAndIsrRequest) == {}
    done = run(ctl, StopReplicaResponseReceived(3, ((tp("t", 1), ErrorCode.NONE),)))
    assert [(w.op, w.path, w.recursive) for w in done.writes] == [
        (ZkOp.DELETE, "/brokers/topics/t", True), (ZkOp.DELETE, "/config/topics/t", False),
        (ZkOp.DELETE, "/admin/delete_topics/t", False)]
    assert ctl.topics == {} and ctl.states == {} and ctl.topics_being_deleted == frozenset()
    assert ctl.phase(tp("t", 0)) is PartitionPhase.NON_EXISTENT


def test_failed_stop_replica_keeps_the_replica_pending() -> None:
    ctl = deletion_cluster()
    run(ctl, DeleteTopicsRequested(("t",)))
    run(ctl, StopReplicaResponseReceived(1, ((tp("t", 0), ErrorCode.KAFKA_STORAGE_ERROR),)))
    assert (tp("t", 0), 1) in ctl.pending_deletions("t")


def test_delete_again_and_create_while_deleting() -> None:
    ctl = deletion_cluster()
    run(ctl, DeleteTopicsRequested(("t",)))
    again = run(ctl, DeleteTopicsRequested(("t",)))
    assert again.writes == ()
    results, _ = create(ctl, NewTopic("t", TID, 1, 1))
    assert results[0].error == ErrorCode.TOPIC_ALREADY_EXISTS


def test_delete_disabled() -> None:
    ctl, _ = elect(ZkSnapshot(), config=ControllerConfig(delete_topic_enable=False))
    resp = run(ctl, DeleteTopicsRequested(("t",))).response
    assert isinstance(resp, DeleteTopicsResponse) and resp.topics[0].error == ErrorCode.TOPIC_DELETION_DISABLED


def test_create_partitions_rewrites_the_assignment_and_creates_states() -> None:
    ctl = deletion_cluster()
    result = run(ctl, CreatePartitionsRequested((NewPartitions("t", 4, ((3, 1), (1, 2))), NewPartitions("x", 2),
                                                 NewPartitions("t", 1))))
    assert isinstance(result.response, CreatePartitionsResponse)
    assert [r.error for r in result.response.topics] == [ErrorCode.INVALID_REQUEST, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                         ErrorCode.INVALID_REQUEST]
    result = run(ctl, CreatePartitionsRequested((NewPartitions("t", 4, ((3, 1), (1, 2))),)))
    assert [(w.op, w.path) for w in result.writes] == [(ZkOp.SET, "/brokers/topics/t"),
                                                      (ZkOp.CREATE, "/brokers/topics/t/partitions/2/state"),
                                                      (ZkOp.CREATE, "/brokers/topics/t/partitions/3/state")]
    assert json.loads(result.writes[0].data or b"")["partitions"] == {"0": [1, 2], "1": [2, 3], "2": [3, 1], "3": [1, 2]}
    assert ctl.states[tp("t", 2)] == LeaderIsr(3, 0, (3, 1), 2, 0)
    lai = requests(result, LeaderAndIsrRequest)
    assert {b: [p.partition for p in r.partitions] for b, r in lai.items()} == {1: [2, 3], 2: [3], 3: [2]}
    result = run(ctl, CreatePartitionsRequested((NewPartitions("t", 3),)))
    assert isinstance(result.response, CreatePartitionsResponse)
    assert result.response.topics[0].error == ErrorCode.INVALID_PARTITIONS


def test_create_partitions_on_a_topic_being_deleted() -> None:
    ctl = deletion_cluster()
    run(ctl, DeleteTopicsRequested(("t",)))
    resp = run(ctl, CreatePartitionsRequested((NewPartitions("t", 5),))).response
    assert isinstance(resp, CreatePartitionsResponse) and resp.topics[0].error == ErrorCode.INVALID_TOPIC_EXCEPTION
