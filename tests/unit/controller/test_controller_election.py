"""Leader election rules, failover from a loaded snapshot, broker failure and startup."""

from __future__ import annotations

import json

import pytest
from controller_fixtures import EPOCH_VERSION, elect, reg, requests, run, snapshot, tp

from headwater.controller.controller import PartitionPhase
from headwater.controller.effects import (
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
    ZkOp,
)
from headwater.controller.events import BrokerExpired, BrokerRegistered, TopicConfigChanged
from headwater.controller.replication_control import (
    ELECTION_RULES,
    Election,
    elect_leader,
    remove_from_isr,
)
from headwater.controller.znodes import PATHS, LeaderIsr


def test_every_election_strategy_has_a_written_rule() -> None:
    assert set(ELECTION_RULES) == set(Election)


@pytest.mark.parametrize(
    ("replicas", "isr", "live", "unclean", "expected"),
    [
        ((1, 2, 3), (1, 2, 3), {1, 2, 3}, False, (1, (1, 2, 3))),
        ((1, 2, 3), (2, 3), {1, 2, 3}, False, (2, (2, 3))),          # assignment order among ISR members
        ((3, 2, 1), (1, 2), {1, 2}, False, (2, (1, 2))),            # first in assignment, not in ISR order
        ((1, 2, 3), (1, 2), {2, 3}, False, (2, (2,))),              # ISR keeps only live members
        ((1, 2, 3), (1,), {2, 3}, False, None),                     # unclean off: stays offline
        ((1, 2, 3), (1,), {3, 2}, True, (2, (2,))),                 # unclean: first live replica, ISR = [it]
        ((1, 2, 3), (1,), set(), True, None),
    ],
)
def test_offline_election(replicas: tuple[int, ...], isr: tuple[int, ...], live: set[int], unclean: bool,
                          expected: tuple[int, tuple[int, ...]] | None) -> None:
    assert elect_leader(Election.OFFLINE, replicas, isr, live, set(), unclean=unclean) == expected


def test_controlled_shutdown_election_skips_the_shutting_down_broker() -> None:
    # live excludes shutting-down brokers; the ISR loses them too
    assert elect_leader(Election.CONTROLLED_SHUTDOWN, (1, 2, 3), (1, 2, 3), {2, 3}, {1}) == (2, (2, 3))
    assert elect_leader(Election.CONTROLLED_SHUTDOWN, (1, 2, 3), (1,), {2, 3}, {1}) is None
    assert elect_leader(Election.CONTROLLED_SHUTDOWN, (1, 2, 3), (1, 2), {2, 3}, {1}, unclean=True) == (2, (2,))


def test_remove_from_isr_keeps_the_last_member() -> None:
    assert remove_from_isr(1, (1, 2), 2) == (1, (1,))
    assert remove_from_isr(1, (1, 2), 1) == (-1, (2,))
    assert remove_from_isr(1, (1,), 1) == (-1, (1,))


def test_election_on_empty_cluster_tells_every_broker_the_broker_list() -> None:
    ctl, result = elect(snapshot(brokers=(1, 2)))
    assert ctl.active and ctl.epoch == 2 and ctl.epoch_zk_version == EPOCH_VERSION
    assert result.writes == ()
    um = requests(result, UpdateMetadataRequest)
    assert set(um) == {1, 2}
    assert um[2].controller_epoch == 2 and um[2].broker_epoch == 102 and [b.broker_id for b in um[2].live_brokers] == [1, 2]


def test_failover_sends_every_partition_to_its_live_replicas() -> None:
    snap = snapshot(topics={"t": {0: (1, 2, 3), 1: (2, 3, 1)}},
                    states={tp("t", 0): (1, 4, (1, 2, 3), 9), tp("t", 1): (2, 1, (2, 3, 1), 3)})
    ctl, result = elect(snap)
    assert result.writes == ()
    lai = requests(result, LeaderAndIsrRequest)
    assert set(lai) == {1, 2, 3}
    p0 = next(p for p in lai[3].partitions if p.partition == 0)
    assert (p0.leader, p0.leader_epoch, p0.isr, p0.partition_epoch, p0.replicas) == (1, 4, (1, 2, 3), 9, (1, 2, 3))
    assert lai[3].controller_id == 1 and lai[3].controller_epoch == 2 and lai[3].broker_epoch == 103
    assert {b.broker_id for b in lai[3].live_leaders} == {1, 2}
    assert all(len(r.partitions) == 2 for r in requests(result, UpdateMetadataRequest).values())
    assert ctl.phase(tp("t", 0)) is PartitionPhase.ONLINE


def test_failover_elects_where_the_leader_died_while_no_controller_ran() -> None:
    snap = snapshot(brokers=(2, 3), topics={"t": {0: (1, 2, 3)}}, states={tp("t"): (1, 4, (1, 2, 3), 9)})
    ctl, result = elect(snap)
    (write,) = result.writes
    assert write.op is ZkOp.SET and write.path == PATHS.partition_state("t", 0)
    assert write.expected_version == 9 and write.controller_epoch_version == EPOCH_VERSION
    assert json.loads(write.data or b"") == {"controller_epoch": 2, "leader": 2, "version": 1, "leader_epoch": 5, "isr": [2, 3]}
    assert ctl.states[tp("t")] == LeaderIsr(2, 5, (2, 3), 2, 10)
    lai = requests(result, LeaderAndIsrRequest)
    assert set(lai) == {2, 3} and lai[2].partitions[0].partition_epoch == 10


def test_failover_creates_states_the_previous_controller_never_wrote() -> None:
    snap = snapshot(brokers=(1, 2), topics={"t": {0: (3, 2, 1)}})
    ctl, result = elect(snap)
    (write,) = result.writes
    assert write.op is ZkOp.CREATE and write.make_parents and write.path == PATHS.partition_state("t", 0)
    assert ctl.states[tp("t")] == LeaderIsr(2, 0, (2, 1), 2, 0)
    assert all(p.is_new for r in requests(result, LeaderAndIsrRequest).values() for p in r.partitions)


def test_partition_without_live_replica_stays_new_until_one_registers() -> None:
    ctl, result = elect(snapshot(brokers=(1,), topics={"t": {0: (2,)}}))
    assert result.writes == () and ctl.phase(tp("t")) is PartitionPhase.NEW
    result = run(ctl, BrokerRegistered(2, 55, reg(2).info))
    assert [w.op for w in result.writes] == [ZkOp.CREATE]
    assert ctl.phase(tp("t")) is PartitionPhase.ONLINE and ctl.states[tp("t")].leader == 2


def test_broker_failure_moves_leadership_and_shrinks_isrs() -> None:
    snap = snapshot(topics={"t": {0: (1, 2, 3), 1: (2, 1, 3)}},
                    states={tp("t", 0): (1, 4, (1, 2, 3), 9), tp("t", 1): (2, 0, (2, 1, 3), 0)})
    ctl, _ = elect(snap)
    result = run(ctl, BrokerExpired(1))
    assert {w.path for w in result.writes} == {PATHS.partition_state("t", 0), PATHS.partition_state("t", 1)}
    assert ctl.states[tp("t", 0)] == LeaderIsr(2, 5, (2, 3), 2, 10)
    assert ctl.states[tp("t", 1)] == LeaderIsr(2, 1, (2, 3), 2, 1)   # follower removal bumps the leader epoch too
    lai = requests(result, LeaderAndIsrRequest)
    assert set(lai) == {2, 3}
    um = requests(result, UpdateMetadataRequest)
    assert set(um) == {2, 3} and [b.broker_id for b in um[2].live_brokers] == [2, 3]
    assert all(p.offline_replicas == (1,) for p in um[2].partitions)
    assert ctl.phase(tp("t", 0)) is PartitionPhase.ONLINE


def test_last_isr_member_stays_without_leader_and_leads_again_when_back() -> None:
    ctl, _ = elect(snapshot(topics={"t": {0: (1, 2)}}, states={tp("t"): (1, 3, (1,), 5)}))
    run(ctl, BrokerExpired(1))
    assert ctl.states[tp("t")] == LeaderIsr(-1, 4, (1,), 2, 6)
    assert ctl.phase(tp("t")) is PartitionPhase.OFFLINE
    assert run(ctl, BrokerExpired(3)).writes == ()                   # not a replica of anything: nothing to write
    result = run(ctl, BrokerRegistered(1, 500, reg(1).info))
    assert ctl.states[tp("t")] == LeaderIsr(1, 5, (1,), 2, 7)
    lai = requests(result, LeaderAndIsrRequest)
    assert set(lai) == {1, 2} and lai[1].broker_epoch == 500
    assert len(requests(result, UpdateMetadataRequest)[1].partitions) == 1     # full metadata to the newcomer


def test_unclean_election_only_when_the_topic_allows_it() -> None:
    ctl, _ = elect(snapshot(topics={"t": {0: (1, 2)}}, states={tp("t"): (1, 3, (1,), 5)}))
    run(ctl, BrokerExpired(1))
    assert ctl.states[tp("t")].leader == -1
    result = run(ctl, TopicConfigChanged("t", {"unclean.leader.election.enable": "true"}))
    assert ctl.states[tp("t")] == LeaderIsr(2, 5, (2,), 2, 7)
    assert set(requests(result, LeaderAndIsrRequest)) == {2}


def test_unclean_from_the_loaded_config() -> None:
    snap = snapshot(brokers=(2,), topics={"t": {0: (1, 2)}}, states={tp("t"): (1, 3, (1,), 5)},
                    configs={"t": {"unclean.leader.election.enable": "true"}})
    ctl, _ = elect(snap)
    assert ctl.states[tp("t")].leader == 2


def test_bounced_broker_leaves_the_isr_and_gets_requests_with_its_new_epoch() -> None:
    ctl, _ = elect(snapshot(topics={"t": {0: (1, 2, 3)}}, states={tp("t"): (2, 1, (1, 2, 3), 1)}))
    result = run(ctl, BrokerRegistered(1, 999, reg(1).info))
    assert ctl.states[tp("t")] == LeaderIsr(2, 2, (2, 3), 2, 2)
    assert ctl.live_brokers[1].broker_epoch == 999
    assert requests(result, LeaderAndIsrRequest)[1].broker_epoch == 999


def test_same_registration_twice_changes_nothing() -> None:
    ctl, _ = elect(snapshot(topics={"t": {0: (1, 2, 3)}}, states={tp("t"): (2, 1, (1, 2, 3), 1)}))
    result = run(ctl, BrokerRegistered(1, reg(1).broker_epoch, reg(1).info))
    assert result.writes == () and requests(result, LeaderAndIsrRequest) == {}


def test_broker_change_events_diff_the_registrations() -> None:
    ctl, _ = elect(snapshot(brokers=(1, 2, 3)))
    events = ctl.broker_change_events({1: reg(1), 2: reg(2, epoch=77), 4: reg(4)})
    assert events == [BrokerExpired(3), BrokerRegistered(2, 77, reg(2).info), BrokerRegistered(4, 104, reg(4).info)]


def test_failover_resumes_deletions_and_drops_stale_markers() -> None:
    snap = snapshot(topics={"gone": {0: (1, 2)}}, states={tp("gone"): (1, 0, (1, 2), 0)}, to_delete=("gone", "ghost"))
    ctl, result = elect(snap)
    assert [(w.op, w.path) for w in result.writes] == [(ZkOp.DELETE, "/admin/delete_topics/ghost")]
    assert ctl.topics_being_deleted == {"gone"}
    stops = requests(result, StopReplicaRequest)
    assert set(stops) == {1, 2} and all(p.delete and p.leader_epoch == -2 for p in stops[1].partitions)
    assert requests(result, LeaderAndIsrRequest) == {}
    um = requests(result, UpdateMetadataRequest)[3]
    assert [(p.leader, p.leader_epoch) for p in um.partitions] == [(-2, -2)]
