"""A broker's log dir fails: the controller asks it what it lost, then moves leadership and ISR
membership away from those replicas until the broker restarts (Kafka's OfflineReplica handling)."""

from __future__ import annotations

from controller_fixtures import elect, reg, requests, run, snapshot, tp

from headwater.controller.effects import LeaderAndIsrRequest, UpdateMetadataRequest
from headwater.controller.events import BrokerExpired, BrokerRegistered, LogDirFailed, ReplicasOffline

TOPICS = {"t": {0: (1, 2, 3), 1: (2, 1, 3), 2: (3, 2, 1)}}
STATES = {tp("t", 0): (1, 5, (1, 2, 3), 4), tp("t", 1): (2, 5, (2, 1, 3), 4), tp("t", 2): (3, 5, (3, 2), 4)}


def test_a_failure_notification_asks_the_broker_about_every_replica_it_holds() -> None:
    ctl, _ = elect(snapshot(topics=TOPICS, states=STATES))
    result = run(ctl, LogDirFailed(1))
    lai = requests(result, LeaderAndIsrRequest)
    assert set(lai) == {1}, "only the broker with the failed dir is asked"
    assert {(p.topic, p.partition) for p in lai[1].partitions} == {("t", 0), ("t", 1), ("t", 2)}
    # The current state, unchanged: asking changes nothing in ZooKeeper.
    assert not result.writes
    assert {p.partition: p.leader_epoch for p in lai[1].partitions} == {0: 5, 1: 5, 2: 5}


def test_offline_replicas_lose_leadership_and_isr_membership() -> None:
    ctl, _ = elect(snapshot(topics=TOPICS, states=STATES))
    result = run(ctl, ReplicasOffline(1, (tp("t", 0), tp("t", 1))))
    # p0: broker 1 led; the next replica in assignment order in the ISR leads, 1 leaves the ISR.
    assert ctl.states[tp("t", 0)].leader == 2
    assert ctl.states[tp("t", 0)].isr == (2, 3)
    assert ctl.states[tp("t", 0)].leader_epoch == 6
    # p1: 2 still leads, 1 leaves the ISR.
    assert ctl.states[tp("t", 1)].leader == 2
    assert ctl.states[tp("t", 1)].isr == (2, 3)
    # p2 was not reported: broker 1 keeps its replica (not in the ISR anyway), nothing written.
    assert ctl.states[tp("t", 2)].isr == (3, 2)
    written = {w.path for w in result.writes}
    assert written == {"/brokers/topics/t/partitions/0/state", "/brokers/topics/t/partitions/1/state"}
    um = requests(result, UpdateMetadataRequest)
    offline = {(p.topic, p.partition): p.offline_replicas for req in um.values() for p in req.partitions}
    assert offline[("t", 0)] == (1,) and offline[("t", 1)] == (1,)


def test_an_offline_replica_is_never_elected() -> None:
    ctl, _ = elect(snapshot(topics=TOPICS, states=STATES))
    run(ctl, ReplicasOffline(2, (tp("t", 0),)))            # 2 leaves p0's ISR: (1, 3)
    run(ctl, BrokerExpired(1))                              # the leader dies
    # 2 is live but its replica is offline; 3 is next in the ISR.
    assert ctl.states[tp("t", 0)].leader == 3


def test_a_restart_brings_the_replicas_back() -> None:
    ctl, _ = elect(snapshot(topics=TOPICS, states=STATES))
    run(ctl, ReplicasOffline(1, (tp("t", 0),)))
    result = run(ctl, BrokerRegistered(1, 999, reg(1, 999).info))   # a new incarnation
    um = requests(result, UpdateMetadataRequest)
    offline = {(p.topic, p.partition): p.offline_replicas for req in um.values() for p in req.partitions}
    assert offline.get(("t", 0), ()) == ()
    lai = requests(result, LeaderAndIsrRequest)
    assert ("t", 0) in {(p.topic, p.partition) for p in lai[1].partitions}, "it is told to follow again"


def test_reports_from_a_broker_that_left_are_ignored() -> None:
    ctl, _ = elect(snapshot(topics=TOPICS, states=STATES))
    run(ctl, BrokerExpired(3))
    result = run(ctl, ReplicasOffline(3, (tp("t", 2),)))
    assert not result.writes and not result.requests
    result = run(ctl, LogDirFailed(3))
    assert not result.requests
