"""Elections an operator asks for (ElectLeaders, ``/admin/preferred_replica_election``), the automatic
leader rebalance and unclean election as a cluster-wide default.

Expected outcomes are Kafka 3.9's ZooKeeper controller's: ``KafkaController.processReplicaLeaderElection``
(the per-partition codes and messages), ``PartitionLeaderElectionAlgorithms`` (preferred = the first
assigned replica if live and in the ISR; unclean = offline election allowing any live replica),
``Election.leaderForPreferredReplica`` (ISR unchanged, new leader epoch), ``checkAndTriggerAutoLeaderRebalance``
and ``processUncleanLeaderElectionEnable``.
"""

from __future__ import annotations

import pytest
from controller_fixtures import elect, reg, requests, run, snapshot, tp

from headwater.controller.controller import ControllerConfig, not_controller_response
from headwater.controller.effects import (
    ElectionResult,
    ElectLeadersResponse,
    LeaderAndIsrRequest,
    PreferredElectionRemoved,
    ZkOp,
)
from headwater.controller.events import (
    AlterPartitionReassignmentsRequested,
    AutoRebalanceCheck,
    BrokerDefaultConfigsChanged,
    BrokerExpired,
    BrokerRegistered,
    ControlledShutdownRequested,
    ElectionType,
    ElectLeadersRequested,
    PreferredElectionRequested,
)
from headwater.controller.replication_control import Election, elect_leader
from headwater.controller.znodes import PATHS, ZkSnapshot
from headwater.protocol.errors import ErrorCode


def by_partition(resp: object) -> dict[tuple[str, int], ElectionResult]:
    assert isinstance(resp, ElectLeadersResponse)
    return {(r.topic, r.partition): r for r in resp.partitions}


@pytest.mark.parametrize(
    ("replicas", "isr", "live", "expected"),
    [
        ((1, 2, 3), (1, 2, 3), {1, 2, 3}, (1, (1, 2, 3))),
        ((1, 2, 3), (2, 3), {1, 2, 3}, None),            # preferred not in the ISR
        ((1, 2, 3), (1, 2, 3), {2, 3}, None),            # preferred not live: never the next one
        ((3, 1, 2), (1, 2, 3), {1, 2, 3}, (3, (1, 2, 3))),
    ],
)
def test_preferred_election_only_ever_picks_the_first_replica(
        replicas: tuple[int, ...], isr: tuple[int, ...], live: set[int],
        expected: tuple[int, tuple[int, ...]] | None) -> None:
    assert elect_leader(Election.PREFERRED, replicas, isr, live, set()) == expected


def skewed() -> ZkSnapshot:
    """t-0 [1,2,3] led by 2 (1 in the ISR), t-1 [2,3,1] led by 2, t-2 [3,1,2] led by 1 with 3 out of the ISR."""
    return snapshot(brokers=(1, 2, 3), topics={"t": {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}},
                    states={tp("t", 0): (2, 4, (1, 2, 3), 6), tp("t", 1): (2, 1, (1, 2, 3), 1),
                            tp("t", 2): (1, 2, (1, 2), 3)})


def test_elect_leaders_preferred_answers_each_partition_as_kafka() -> None:
    ctl, _ = elect(skewed())
    result = run(ctl, ElectLeadersRequested((("t", 0), ("t", 1), ("t", 2), ("t", 9), ("gone", 0), ("t", 0))))
    got = by_partition(result.response)
    assert len(result.response.partitions) == 5          # type: ignore[union-attr]  # a duplicate counts once
    assert got[("t", 0)] == ElectionResult("t", 0, ErrorCode.NONE, None, 1)
    assert got[("t", 1)].error == ErrorCode.ELECTION_NOT_NEEDED and got[("t", 1)].message is None
    assert got[("t", 2)] == ElectionResult(
        "t", 2, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        "Failed to elect leader for partition t-2 under strategy PreferredReplicaPartitionLeaderElectionStrategy")
    for key in (("t", 9), ("gone", 0)):
        assert got[key].error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert got[key].message == "The partition does not exist."
    # leaderForPreferredReplica: same ISR, next leader epoch; LeaderAndIsr to the live replicas
    state = ctl.states[tp("t", 0)]
    assert (state.leader, state.leader_epoch, state.isr, state.partition_epoch) == (1, 5, (1, 2, 3), 7)
    assert [w.path for w in result.writes] == [PATHS.partition_state("t", 0)]
    lai = requests(result, LeaderAndIsrRequest)
    assert sorted(lai) == [1, 2, 3]
    assert {p.tp for req in lai.values() for p in req.partitions} == {tp("t", 0)}


def test_elect_leaders_for_every_partition_skips_topics_being_deleted() -> None:
    snap = snapshot(brokers=(1, 2), topics={"t": {0: (1, 2), 1: (2, 1)}, "d": {0: (1, 2)}},
                    states={tp("t", 0): (2, 1, (1, 2), 1), tp("t", 1): (2, 1, (1, 2), 1), tp("d"): (2, 1, (1, 2), 1)},
                    to_delete=("d",))
    ctl, _ = elect(snap)
    got = by_partition(run(ctl, ElectLeadersRequested(None)).response)
    assert {k: r.error for k, r in got.items()} == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.ELECTION_NOT_NEEDED}


def test_a_topic_being_deleted_is_refused() -> None:
    snap = snapshot(brokers=(1, 2), topics={"d": {0: (1, 2)}}, states={tp("d"): (2, 1, (1, 2), 1)}, to_delete=("d",))
    ctl, _ = elect(snap)
    got = by_partition(run(ctl, ElectLeadersRequested((("d", 0),))).response)
    assert (got[("d", 0)].error, got[("d", 0)].message) == (ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted")


def test_a_shutting_down_preferred_replica_cannot_take_over() -> None:
    ctl, _ = elect(skewed())
    run(ctl, ControlledShutdownRequested(1, 101))
    got = by_partition(run(ctl, ElectLeadersRequested((("t", 0),))).response)
    assert got[("t", 0)].error == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


def test_unclean_election_is_needed_only_without_a_live_leader() -> None:
    snap = snapshot(brokers=(1, 2, 3), topics={"u": {0: (1, 2, 3), 1: (3, 2)}},
                    states={tp("u", 0): (1, 3, (1,), 5), tp("u", 1): (3, 1, (3,), 1)})
    ctl, _ = elect(snap)
    run(ctl, BrokerExpired(1))
    run(ctl, BrokerExpired(3))
    assert ctl.states[tp("u", 0)].leader == -1                      # unclean off: offline
    result = run(ctl, ElectLeadersRequested((("u", 0),), ElectionType.UNCLEAN))
    got = by_partition(result.response)
    # An operator's UNCLEAN election ignores the (off) config: broker 2 leads alone.
    assert got[("u", 0)] == ElectionResult("u", 0, ErrorCode.NONE, None, 2)
    assert (ctl.states[tp("u", 0)].leader, ctl.states[tp("u", 0)].isr) == (2, (2,))
    assert any("Unclean leader election for partition u-0: broker 2" in w for w in result.warnings)
    got = by_partition(run(ctl, ElectLeadersRequested((("u", 0),), ElectionType.UNCLEAN)).response)
    assert got[("u", 0)].error == ErrorCode.ELECTION_NOT_NEEDED
    # u-1's replicas are 3 (dead) and 2 (live, out of the ISR): elected; with none live, 83.
    run(ctl, BrokerExpired(2))
    got = by_partition(run(ctl, ElectLeadersRequested((("u", 1),), ElectionType.UNCLEAN)).response)
    assert got[("u", 1)] == ElectionResult(
        "u", 1, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
        "Failed to elect leader for partition u-1 under strategy OfflinePartitionLeaderElectionStrategy(true)")


def test_not_controller_answers_every_named_partition() -> None:
    resp = not_controller_response(ElectLeadersRequested((("a", 0), ("a", 1), ("a", 0))))
    assert resp == ElectLeadersResponse(ErrorCode.NONE, (ElectionResult("a", 0, ErrorCode.NOT_CONTROLLER),
                                                         ElectionResult("a", 1, ErrorCode.NOT_CONTROLLER)))


def test_the_legacy_znode_is_processed_then_deleted() -> None:
    ctl, _ = elect(skewed())
    result = run(ctl, PreferredElectionRequested(frozenset({("t", 0), ("t", 1), ("nope", 0)})))
    assert ctl.states[tp("t", 0)].leader == 1
    last = result.writes[-1]
    assert (last.op, last.path, last.change) == (ZkOp.DELETE, PATHS.PREFERRED_REPLICA_ELECTION, PreferredElectionRemoved())


def test_a_new_controller_resumes_the_legacy_znode() -> None:
    snap = skewed()
    snap = ZkSnapshot(snap.brokers, snap.topics, snap.configs, snap.states,
                      preferred_replica_election=frozenset({("t", 0)}))
    ctl, result = elect(snap)
    assert ctl.states[tp("t", 0)].leader == 1
    assert result.writes[-1].path == PATHS.PREFERRED_REPLICA_ELECTION and result.writes[-1].op == ZkOp.DELETE
    _, result = elect(skewed())
    assert all(w.path != PATHS.PREFERRED_REPLICA_ELECTION for w in result.writes)


def test_auto_rebalance_moves_leaders_of_brokers_over_the_threshold() -> None:
    # Broker 1 is preferred for 2 partitions and leads neither (100% > 10%); broker 2 leads its own.
    snap = snapshot(brokers=(1, 2, 3), topics={"a": {0: (1, 2, 3), 1: (1, 3, 2), 2: (2, 1, 3)}},
                    states={tp("a", 0): (2, 1, (1, 2, 3), 1), tp("a", 1): (3, 1, (3, 2), 1),
                            tp("a", 2): (2, 1, (1, 2, 3), 1)})
    ctl, _ = elect(snap)
    assert ctl.preferred_imbalance() == {1: (2, 2), 2: (1, 0)}
    run(ctl, AutoRebalanceCheck())
    assert ctl.states[tp("a", 0)].leader == 1
    assert ctl.states[tp("a", 1)].leader == 3              # 1 is not in a-1's ISR: never elected there
    assert ctl.preferred_imbalance() == {1: (2, 1), 2: (1, 0)}


def test_auto_rebalance_respects_the_threshold_and_the_switch() -> None:
    # 1 of broker 1's 10 preferred partitions is led elsewhere: 10% is not more than 10%.
    parts = {p: (1, 2) for p in range(10)}
    states = {tp("b", p): (1, 1, (1, 2), 1) for p in range(10)}
    states[tp("b", 0)] = (2, 2, (1, 2), 2)
    ctl, _ = elect(snapshot(brokers=(1, 2), topics={"b": parts}, states=states))
    assert run(ctl, AutoRebalanceCheck()).writes == ()
    run(ctl, BrokerDefaultConfigsChanged({"leader.imbalance.per.broker.percentage": "5"}))
    run(ctl, AutoRebalanceCheck())
    assert ctl.states[tp("b", 0)].leader == 1
    states[tp("b", 0)] = (2, 2, (1, 2), 2)
    ctl, _ = elect(snapshot(brokers=(1, 2), topics={"b": parts}, states=states),
                   config=ControllerConfig(auto_leader_rebalance_enable=False, leader_imbalance_per_broker_percentage=0))
    assert not ctl.auto_rebalance
    assert run(ctl, AutoRebalanceCheck()).writes == ()
    run(ctl, BrokerDefaultConfigsChanged({"auto.leader.rebalance.enable": "true",
                                          "leader.imbalance.check.interval.seconds": "7"}))
    assert ctl.auto_rebalance and ctl.rebalance_interval_s == 7
    run(ctl, AutoRebalanceCheck())
    assert ctl.states[tp("b", 0)].leader == 1


def test_auto_rebalance_leaves_partitions_being_reassigned_alone() -> None:
    snap = snapshot(brokers=(1, 2, 3, 4), topics={"r": {0: (1, 2, 3)}}, states={tp("r"): (2, 1, (1, 2, 3), 1)})
    ctl, _ = elect(snap, config=ControllerConfig(leader_imbalance_per_broker_percentage=0))
    run(ctl, AlterPartitionReassignmentsRequested((("r", 0, (1, 2, 4)),)))
    assert ctl.reassignments()
    leader_before = ctl.states[tp("r")].leader
    run(ctl, AutoRebalanceCheck())
    assert ctl.states[tp("r")].leader == leader_before == 2


def test_unclean_as_the_cluster_default_elects_offline_partitions() -> None:
    snap = snapshot(brokers=(1, 2), topics={"o": {0: (1, 2)}}, states={tp("o"): (1, 3, (1,), 4)})
    ctl, _ = elect(snap)
    run(ctl, BrokerExpired(1))
    assert ctl.states[tp("o")].leader == -1
    result = run(ctl, BrokerDefaultConfigsChanged({"unclean.leader.election.enable": "true"}))
    assert ctl.states[tp("o")].leader == 2
    assert result.warnings
    # a topic's own "false" wins over the default
    snap = snapshot(brokers=(1, 2), topics={"o": {0: (1, 2)}}, states={tp("o"): (1, 3, (1,), 4)},
                    configs={"o": {"unclean.leader.election.enable": "false"}})
    ctl, _ = elect(snap)
    run(ctl, BrokerExpired(1))
    run(ctl, BrokerDefaultConfigsChanged({"unclean.leader.election.enable": "true"}))
    assert ctl.states[tp("o")].leader == -1
    run(ctl, BrokerRegistered(1, 200, reg(1, 200).info))
    assert ctl.states[tp("o")].leader == 1
