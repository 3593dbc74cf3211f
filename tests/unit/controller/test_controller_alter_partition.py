"""AlterPartition: every rejection code, the idempotent retry, and what an accepted change writes."""

from __future__ import annotations

import json

import pytest
from controller_fixtures import elect, requests, run, snapshot, tp

from headwater.controller.controller import Controller
from headwater.controller.effects import (
    AlterPartitionResponse,
    LeaderAndIsrRequest,
    UpdateMetadataRequest,
    ZkOp,
)
from headwater.controller.events import (
    AlterPartitionItem,
    AlterPartitionReceived,
    BrokerExpired,
    ControlledShutdownRequested,
)
from headwater.controller.znodes import PATHS, LeaderIsr
from headwater.protocol.errors import ErrorCode

# t-0: replicas 1,2,3,4; leader 1 at leader epoch 5; ISR 1,2; partition epoch 8.


def cluster() -> Controller:
    ctl, _ = elect(snapshot(brokers=(1, 2, 3, 4, 5), topics={"t": {0: (1, 2, 3, 4)}},
                            states={tp("t"): (1, 5, (1, 2), 8)}))
    return ctl


def alter(ctl: Controller, new_isr: tuple[int, ...], *, broker: int = 1, broker_epoch: int = 101,
          leader_epoch: int = 5, partition_epoch: int = 8, topic: str = "t") -> AlterPartitionResponse:
    ev = AlterPartitionReceived(broker, broker_epoch, (AlterPartitionItem(topic, 0, leader_epoch, new_isr, partition_epoch),))
    resp = run(ctl, ev).response
    assert isinstance(resp, AlterPartitionResponse)
    return resp


def code(resp: AlterPartitionResponse) -> ErrorCode:
    assert resp.error == ErrorCode.NONE
    return resp.partitions[0].error


def test_expansion_is_written_with_the_same_leader_epoch() -> None:
    ctl = cluster()
    ev = AlterPartitionReceived(1, 101, (AlterPartitionItem("t", 0, 5, (1, 2, 3), 8),))
    result = ctl.handle(ev)
    (write,) = result.writes
    assert write.op is ZkOp.SET and write.path == PATHS.partition_state("t", 0) and write.expected_version == 8
    assert json.loads(write.data or b"")["isr"] == [1, 2, 3]
    assert ctl.states[tp("t")].isr == (1, 2), "nothing changes before the write is applied"
    ctl.apply(write)
    assert ctl.states[tp("t")] == LeaderIsr(1, 5, (1, 2, 3), 2, 9)
    assert isinstance(result.response, AlterPartitionResponse)
    (part,) = result.response.partitions
    assert (part.error, part.leader, part.leader_epoch, part.isr, part.partition_epoch) == (ErrorCode.NONE, 1, 5, (1, 2, 3), 9)
    assert requests(result, LeaderAndIsrRequest) == {}, "the leader learns from the response"
    assert set(requests(result, UpdateMetadataRequest)) == {1, 2, 3, 4, 5}


def test_shrink_is_accepted() -> None:
    ctl = cluster()
    assert code(alter(ctl, (1,))) == ErrorCode.NONE
    assert ctl.states[tp("t")].isr == (1,)


def test_retry_of_an_applied_change_returns_the_current_state() -> None:
    ctl = cluster()
    alter(ctl, (1, 2, 3))
    resp = alter(ctl, (1, 2, 3))                        # the first response was lost; same partition epoch 8
    assert code(resp) == ErrorCode.NONE and resp.partitions[0].partition_epoch == 9
    assert ctl.states[tp("t")].partition_epoch == 9


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"leader_epoch": 4}, ErrorCode.FENCED_LEADER_EPOCH),
        ({"leader_epoch": 6}, ErrorCode.NOT_CONTROLLER),
        ({"partition_epoch": 7}, ErrorCode.INVALID_UPDATE_VERSION),
        ({"topic": "nope"}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ],
)
def test_fencing_codes(kwargs: dict[str, int], expected: ErrorCode) -> None:
    ctl = cluster()
    assert code(alter(ctl, (1, 2, 3), **kwargs)) == expected  # type: ignore[arg-type]
    assert ctl.states[tp("t")].isr == (1, 2)


@pytest.mark.parametrize("broker_epoch", [100, 102])
def test_stale_broker_epoch(broker_epoch: int) -> None:
    ctl = cluster()
    resp = alter(ctl, (1, 2, 3), broker_epoch=broker_epoch)
    assert resp.error == ErrorCode.STALE_BROKER_EPOCH and resp.partitions == ()


def test_unregistered_broker_is_a_stale_broker_epoch() -> None:
    ctl = cluster()
    run(ctl, BrokerExpired(5))
    assert alter(ctl, (1, 2), broker=5, broker_epoch=105).error == ErrorCode.STALE_BROKER_EPOCH


def test_only_the_leader_may_alter() -> None:
    ctl = cluster()
    assert code(alter(ctl, (1, 2, 3), broker=2, broker_epoch=102)) == ErrorCode.NOT_LEADER_OR_FOLLOWER


@pytest.mark.parametrize(
    ("new_isr", "expected"),
    [
        ((1, 2, 5), ErrorCode.INELIGIBLE_REPLICA),       # not a replica
        ((2, 3), ErrorCode.INVALID_REQUEST),             # leader left out
        ((1, 1, 2), ErrorCode.INVALID_REQUEST),
        ((), ErrorCode.INVALID_REQUEST),
    ],
)
def test_invalid_isr(new_isr: tuple[int, ...], expected: ErrorCode) -> None:
    assert code(alter(cluster(), new_isr)) == expected


def test_dead_replica_is_ineligible() -> None:
    ctl = cluster()
    run(ctl, BrokerExpired(3))                          # t-0 unchanged: 3 was not in the ISR
    assert ctl.states[tp("t")].partition_epoch == 8
    assert code(alter(ctl, (1, 2, 3))) == ErrorCode.INELIGIBLE_REPLICA


def test_shutting_down_replica_cannot_join_but_may_stay() -> None:
    ctl = cluster()
    run(ctl, ControlledShutdownRequested(4, 104))       # 4 follows t-0 outside the ISR: no state change
    assert ctl.states[tp("t")].partition_epoch == 8
    assert code(alter(ctl, (1, 2, 4))) == ErrorCode.INELIGIBLE_REPLICA
    assert code(alter(ctl, (1, 2, 3))) == ErrorCode.NONE


def test_partitions_are_answered_one_by_one() -> None:
    ctl, _ = elect(snapshot(topics={"a": {0: (1, 2)}, "b": {0: (1, 2)}},
                            states={tp("a"): (1, 0, (1,), 0), tp("b"): (1, 3, (1,), 4)}))
    ev = AlterPartitionReceived(1, 101, (AlterPartitionItem("a", 0, 0, (1, 2), 0), AlterPartitionItem("b", 0, 2, (1, 2), 4)))
    result = run(ctl, ev)
    assert isinstance(result.response, AlterPartitionResponse)
    assert [p.error for p in result.response.partitions] == [ErrorCode.NONE, ErrorCode.FENCED_LEADER_EPOCH]
    assert [w.path for w in result.writes] == [PATHS.partition_state("a", 0)]
