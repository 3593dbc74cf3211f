"""AlterPartitionReassignments validation (Kafka's codes and messages, each partition on its own),
ListPartitionReassignments, CreatePartitions during a reassignment, and the inactive controller."""

from __future__ import annotations

import pytest
from test_reassignment import TP, Run, Zk, ok

from headwater.controller.controller import Controller, not_controller_response
from headwater.controller.effects import (
    AlterPartitionReassignmentsResponse,
    CreatePartitionsResponse,
    ListPartitionReassignmentsResponse,
    OngoingReassignment,
)
from headwater.controller.events import (
    AlterPartitionReassignmentsRequested,
    ControlledShutdownRequested,
    CreatePartitionsRequested,
    DeleteTopicsRequested,
    LegacyReassignmentRequested,
    ListPartitionReassignmentsRequested,
    NewPartitions,
)
from headwater.controller.znodes import ReplicaAssignment, TopicPartition
from headwater.protocol.errors import ErrorCode

E39 = ErrorCode.INVALID_REPLICA_ASSIGNMENT


def cluster() -> Run:
    """Brokers 1-4 (5 is not registered); t has partitions 0 and 1 on 1,2,3."""
    z = Zk.cluster((1, 2, 3, 4), {0: (1, 2, 3), 1: (2, 3, 1)}, {0: (1, 5, (1, 2, 3), 8), 1: (2, 5, (2, 3, 1), 8)})
    return Run.elect(z)


def one(run: Run, target: tuple[int, ...] | None, partition: int = 0, topic: str = "t",
        allow_rf_change: bool = True) -> tuple[ErrorCode, str | None]:
    result, resp = run.alter((partition, target), topic=topic, allow_rf_change=allow_rf_change)
    (part,) = resp.partitions
    assert (part.topic, part.partition) == (topic, partition)
    if part.error != ErrorCode.NONE:
        assert result.writes == () and result.requests == (), "a refused partition changes nothing"
    return part.error, part.message


@pytest.mark.parametrize(("target", "message"), [
    ((), "Empty replica list specified in partition reassignment."),
    ((1, 2, 2), "Duplicate replica ids in partition reassignment replica list: [1, 2, 2]"),
    ((1, -1, 2), "Invalid broker id in replica list: [1, -1, 2]"),
    ((1, 2, 5), "Replica assignment has brokers that are not alive. Replica list: [5], live broker list: [1, 2, 3, 4]"),
])
def test_invalid_replica_lists(target: tuple[int, ...], message: str) -> None:
    assert one(cluster(), target) == (E39, message)


def test_existing_replicas_may_be_dead_but_adding_ones_may_not_be_shutting_down() -> None:
    run = cluster()
    run.expire(3)
    assert one(run, (3, 2, 1))[0] == ErrorCode.NONE             # a reorder: nothing is added
    run.handle(ControlledShutdownRequested(4, run.ctl.live_brokers[4].broker_epoch))
    error, message = one(run, (4, 1), partition=1)
    assert error == E39 and message is not None and "live broker list: [1, 2]" in message


def test_cancel_without_a_reassignment() -> None:
    assert one(cluster(), None) == (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")
    # Kafka checks this before existence: a partition that does not exist is not reassigning either
    assert one(cluster(), None, partition=9)[0] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


def test_unknown_topic_or_partition() -> None:
    run = cluster()
    assert one(run, (1, 2), partition=9) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
    assert one(run, (1, 2), topic="nope") == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
    # Kafka validates the replica list first: an unknown partition with a dead target broker is 39
    assert one(run, (5,), partition=9)[0] == E39


def test_a_topic_being_deleted_is_unknown_and_its_reassignment_is_dropped() -> None:
    run = cluster()
    ok(run.alter((0, (4, 2, 3)))[1])
    run.zk.write_legacy({("t", 1): (4, 3, 1)})
    run.handle(LegacyReassignmentRequested({("t", 1): (4, 3, 1)}))
    assert sorted(run.ctl.reassignments()) == [TP, TopicPartition("t", 1)]
    result = run.handle(DeleteTopicsRequested(("t",)))
    assert run.ctl.reassignments() == {}                     # deletion supersedes the reassignment
    assert run.zk.legacy() is None                           # and its entries leave /admin/reassign_partitions
    assert one(run, (1, 2)) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
    assert one(run, None)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION     # its znode still has AR and RR
    # every replica of RS (the adding one included) is deleted with the topic
    stopped = {r.broker_id for r in result.requests if type(r).__name__ == "StopReplicaRequest"}
    assert stopped == {1, 2, 3, 4}


def test_replication_factor_guard_of_kip_860() -> None:
    run = cluster()
    assert one(run, (1, 2), allow_rf_change=False) == (
        ErrorCode.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 3 to 2")
    assert one(run, (4, 2, 3), allow_rf_change=False)[0] == ErrorCode.NONE
    # during a reassignment the current count is the ongoing target's
    assert one(run, (4, 2), allow_rf_change=False) == (
        ErrorCode.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 3 to 2")
    assert one(run, (1, 2), allow_rf_change=True)[0] == ErrorCode.NONE


def test_each_partition_is_judged_on_its_own() -> None:
    run = cluster()
    _, resp = run.alter((0, (4, 2, 3)), (1, (2, 2)), (7, (1,)))
    assert [(p.partition, p.error) for p in resp.partitions] == [
        (0, ErrorCode.NONE), (1, E39), (7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert run.zk.assignment() == ReplicaAssignment((4, 2, 3, 1), (4,), (1,))
    assert run.zk.assignment(TopicPartition("t", 1)) == ReplicaAssignment((2, 3, 1))


def test_the_last_entry_for_a_partition_wins() -> None:
    run = cluster()
    _, resp = run.alter((0, (4, 2, 3)), (0, (1, 2, 4)))
    assert len(resp.partitions) == 1 and resp.partitions[0].error == ErrorCode.NONE
    assert run.zk.assignment() == ReplicaAssignment((1, 2, 4, 3), (4,), (3,))


def test_list_reassignments() -> None:
    run = cluster()
    run.alter((1, (4, 3, 1)))
    expected = OngoingReassignment("t", 1, (4, 3, 1, 2), (4,), (2,))
    result = run.handle(ListPartitionReassignmentsRequested(None))
    assert result.writes == () and result.requests == ()
    assert result.response == ListPartitionReassignmentsResponse(ErrorCode.NONE, (expected,))
    # named partitions: only those being reassigned (unknown ones are left out)
    resp = run.handle(ListPartitionReassignmentsRequested((("t", 0), ("t", 1), ("x", 0)))).response
    assert resp == ListPartitionReassignmentsResponse(ErrorCode.NONE, (expected,))
    assert run.handle(ListPartitionReassignmentsRequested(())).response == ListPartitionReassignmentsResponse(ErrorCode.NONE)


def test_create_partitions_while_the_topic_is_reassigning() -> None:
    run = cluster()
    run.alter((1, (4, 3, 1)))
    resp = run.handle(CreatePartitionsRequested((NewPartitions("t", 3),))).response
    assert isinstance(resp, CreatePartitionsResponse)
    (res,) = resp.topics
    assert (res.error, res.message) == (ErrorCode.REASSIGNMENT_IN_PROGRESS,
                                        "A partition reassignment is in progress for the topic 't'.")
    run.isr_change((2, 3, 1, 4), TopicPartition("t", 1))
    (res,) = run.handle(CreatePartitionsRequested((NewPartitions("t", 3),))).response.topics  # type: ignore[union-attr]
    assert res.error == ErrorCode.NONE


def test_an_inactive_controller_answers_not_controller() -> None:
    ev = AlterPartitionReassignmentsRequested((("t", 0, (1, 2)),))
    resp = Controller(1).handle(ev).response
    assert resp == AlterPartitionReassignmentsResponse(ErrorCode.NOT_CONTROLLER)
    assert not_controller_response(ListPartitionReassignmentsRequested()) == ListPartitionReassignmentsResponse(
        ErrorCode.NOT_CONTROLLER)
