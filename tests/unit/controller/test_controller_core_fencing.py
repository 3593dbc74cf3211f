"""Epoch fencing: every write is conditional on the epoch znode version; a resigned controller is silent."""

from __future__ import annotations

import uuid

import pytest
from controller_fixtures import EPOCH_VERSION, elect, snapshot, tp

from headwater.controller.controller import Controller, PartitionPhase, not_controller_response
from headwater.controller.effects import (
    AlterPartitionResponse,
    ControlledShutdownResponse,
    CreateTopicsResponse,
    PartitionStateWritten,
    ZkOp,
    ZkWrite,
)
from headwater.controller.events import (
    AlterPartitionItem,
    AlterPartitionReceived,
    BrokerExpired,
    BrokerRegistered,
    ControlledShutdownRequested,
    ControllerElected,
    CreatePartitionsRequested,
    CreateTopicsRequested,
    DeleteTopicsRequested,
    Event,
    NewPartitions,
    NewTopic,
    Resigned,
)
from headwater.controller.znodes import LeaderIsr
from headwater.metadata.image import BrokerInfo
from headwater.protocol.errors import ErrorCode

EVENTS: list[Event] = [
    BrokerExpired(1),
    BrokerRegistered(4, 104, BrokerInfo(4, "b4", 9094)),
    ControlledShutdownRequested(1, 101),
    AlterPartitionReceived(1, 101, (AlterPartitionItem("t", 0, 0, (1, 2), 0),)),
    CreateTopicsRequested((NewTopic("n", uuid.UUID(int=9), 1, 1),)),
    DeleteTopicsRequested(("t",)),
]


def cluster() -> Controller:
    ctl, _ = elect(snapshot(topics={"t": {0: (1, 2, 3)}}, states={tp("t"): (1, 0, (1, 2, 3), 0)}))
    return ctl


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_resigned_controller_emits_nothing(event: Event) -> None:
    ctl = cluster()
    assert ctl.handle(Resigned()).writes == ()
    assert not ctl.active
    result = ctl.handle(event)
    assert result.writes == () and result.requests == ()
    assert result.response == not_controller_response(event)
    ctl.validate_state()


def test_never_elected_controller_answers_not_controller() -> None:
    resp = Controller(1).handle(ControlledShutdownRequested(1, 101)).response
    assert resp == ControlledShutdownResponse(ErrorCode.NOT_CONTROLLER)
    resp2 = Controller(1).handle(CreateTopicsRequested((NewTopic("n", uuid.UUID(int=1)),))).response
    assert isinstance(resp2, CreateTopicsResponse) and resp2.topics[0].error == ErrorCode.NOT_CONTROLLER
    assert Controller(1).handle(AlterPartitionReceived(1, 1, ())).response == AlterPartitionResponse(ErrorCode.NOT_CONTROLLER)


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_every_write_carries_the_epoch_version(event: Event) -> None:
    ctl = cluster()
    writes = ctl.handle(event).writes
    assert all(w.controller_epoch_version == EPOCH_VERSION for w in writes)


def test_writes_after_resign_are_not_applied() -> None:
    ctl = cluster()
    (write,) = ctl.handle(BrokerExpired(1)).writes
    ctl.handle(Resigned())
    ctl.apply(write)
    assert ctl.states == {}


def test_re_election_reloads_from_the_snapshot() -> None:
    ctl = cluster()
    ctl.handle(Resigned())
    snap = snapshot(topics={"t": {0: (1, 2, 3)}}, states={tp("t"): (2, 4, (2, 3), 6)})
    ctl.handle(ControllerElected(5, 12, snap))
    assert ctl.epoch == 5 and ctl.epoch_zk_version == 12
    assert ctl.states[tp("t")] == LeaderIsr(2, 4, (2, 3), 1, 6)
    write = ctl.handle(BrokerExpired(2)).writes[0]
    assert write.controller_epoch_version == 12


def test_older_election_is_ignored() -> None:
    ctl = cluster()
    result = ctl.handle(ControllerElected(1, 99, snapshot()))
    assert result == type(result)()
    assert ctl.epoch == 2 and ctl.states


def test_apply_rejects_an_illegal_partition_move() -> None:
    ctl = cluster()
    for w in ctl.handle(DeleteTopicsRequested(("t",))).writes:
        ctl.apply(w)
    assert ctl.phase(tp("t")) is PartitionPhase.DELETING
    bogus = ZkWrite(ZkOp.SET, "/brokers/topics/t/partitions/0/state", b"{}", EPOCH_VERSION,
                    PartitionStateWritten(tp("t"), LeaderIsr(1, 9, (1,), 2, 1)))
    ctl.apply(bogus)                                     # DELETING -> DELETING is allowed (the state is ignored)
    ctl.validate_state()


def test_validate_state_catches_a_broken_cache() -> None:
    ctl = cluster()
    ctl._states[tp("t")] = LeaderIsr(4, 1, (1, 2), 2, 1)   # leader outside the ISR
    with pytest.raises(AssertionError):
        ctl.validate_state()


def test_parents_to_create_for_a_partition_state() -> None:
    ctl = cluster()
    writes = ctl.handle(CreatePartitionsRequested((NewPartitions("t", 2),))).writes
    assert writes[0].parents == ()                                       # the topic znode: SET, no parents
    assert writes[1].path == "/brokers/topics/t/partitions/1/state"
    assert writes[1].parents == ("/brokers/topics/t/partitions", "/brokers/topics/t/partitions/1")
    marker = ctl.handle(DeleteTopicsRequested(("t",))).writes[0]
    assert marker.make_parents and marker.parents == ()                  # /admin/delete_topics exists from start
