"""Controlled shutdown: leadership moves away first, followers leave ISRs, the broker learns what remains."""

from __future__ import annotations

from controller_fixtures import elect, requests, run, snapshot, tp

from headwater.controller.controller import Controller
from headwater.controller.effects import (
    ControlledShutdownResponse,
    ControllerResult,
    LeaderAndIsrRequest,
    StopReplicaRequest,
)
from headwater.controller.events import BrokerExpired, BrokerRegistered, ControlledShutdownRequested
from headwater.controller.znodes import LeaderIsr
from headwater.protocol.errors import ErrorCode


def cluster() -> Controller:
    topics = {"t": {0: (1, 2, 3), 1: (2, 1, 3), 2: (1,)}, "u": {0: (1, 2)}}
    states = {tp("t", 0): (1, 3, (1, 2, 3), 4), tp("t", 1): (2, 0, (2, 1, 3), 0), tp("t", 2): (1, 0, (1,), 0),
              tp("u", 0): (1, 0, (1,), 0)}
    ctl, _ = elect(snapshot(topics=topics, states=states))
    return ctl


def shutdown(ctl: Controller, broker: int = 1, epoch: int = 101) -> tuple[ControlledShutdownResponse, ControllerResult]:
    result = run(ctl, ControlledShutdownRequested(broker, epoch))
    assert isinstance(result.response, ControlledShutdownResponse)
    return result.response, result


def test_leadership_moves_and_followers_leave_the_isr() -> None:
    ctl = cluster()
    resp, result = shutdown(ctl)
    assert resp.error == ErrorCode.NONE
    assert ctl.states[tp("t", 0)] == LeaderIsr(2, 4, (2, 3), 2, 5)       # controlled-shutdown election
    assert ctl.states[tp("t", 1)] == LeaderIsr(2, 1, (2, 3), 2, 1)       # follower removed from the ISR
    assert ctl.states[tp("t", 2)] == LeaderIsr(1, 0, (1,), 1, 0)         # replication factor 1: untouched
    assert ctl.states[tp("u", 0)] == LeaderIsr(1, 0, (1,), 1, 0)         # no other ISR member: stays
    assert resp.remaining == (tp("u", 0),)
    assert ctl.shutting_down == {1}
    stop = requests(result, StopReplicaRequest)
    assert set(stop) == {1}
    assert [(p.partition, p.delete, p.leader_epoch) for p in stop[1].partitions] == [(1, False, 1)]
    assert set(requests(result, LeaderAndIsrRequest)) == {1, 2, 3}


def test_shutting_down_broker_is_not_elected_elsewhere() -> None:
    ctl = cluster()
    shutdown(ctl)
    run(ctl, BrokerExpired(2))
    assert ctl.states[tp("t", 0)].leader == 3
    assert ctl.states[tp("t", 1)].leader == 3


def test_retry_reports_only_what_still_remains() -> None:
    ctl = cluster()
    shutdown(ctl)
    resp, result = shutdown(ctl)
    assert resp.remaining == (tp("u", 0),)
    assert result.writes == ()


def test_stale_or_unknown_broker() -> None:
    ctl = cluster()
    assert shutdown(ctl, epoch=5)[0].error == ErrorCode.STALE_BROKER_EPOCH
    assert ctl.shutting_down == frozenset()
    assert shutdown(ctl, broker=9, epoch=109)[0].error == ErrorCode.BROKER_NOT_AVAILABLE


def test_reregistration_ends_the_shutdown() -> None:
    ctl = cluster()
    shutdown(ctl)
    run(ctl, BrokerRegistered(1, 300, ctl.live_brokers[1].info))
    assert ctl.shutting_down == frozenset()
