"""KIP-455 in the controller: phases U, A and B step by step, with the seeds' worked examples.

Each example runs against :class:`Zk`, a small ZooKeeper that applies the controller's writes as the
shell would (versions checked, parents created), so the tests read what ZooKeeper holds after every
write, and a new controller can be elected from it (``test_reassignment_failover.py``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from headwater.controller.controller import Controller, ControllerConfig
from headwater.controller.effects import (
    AlterPartitionReassignmentsResponse,
    ControllerResult,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
    ZkOp,
    ZkWrite,
)
from headwater.controller.events import (
    AlterPartitionItem,
    AlterPartitionReassignmentsRequested,
    AlterPartitionReceived,
    BrokerExpired,
    ControllerElected,
    Event,
)
from headwater.controller.znodes import (
    PATHS,
    LeaderIsr,
    ReplicaAssignment,
    TopicPartition,
    TopicRecord,
    ZkSnapshot,
    Znode,
    decode_partition_state,
    decode_topic,
    encode_partition_state,
    encode_topic,
    snapshot_from_znodes,
)
from headwater.metadata import zk
from headwater.protocol.errors import ErrorCode

TP = TopicPartition("t", 0)
EPOCH_VERSION = 3


@dataclass
class Zk:
    """Path -> znode; applies a controller's writes the way the shell's fenced multi does."""

    nodes: dict[str, Znode] = field(default_factory=dict)
    zxid: int = 100

    @classmethod
    def cluster(cls, brokers: Iterable[int], partitions: Mapping[int, tuple[int, ...]],
                states: Mapping[int, tuple[int, int, tuple[int, ...], int]], topic: str = "t") -> Zk:
        """``states``: partition -> (leader, leader_epoch, isr, partition_epoch)."""
        z = cls()
        for b in brokers:
            z.register(b)
        record = TopicRecord(topic, uuid.UUID(int=7), {p: ReplicaAssignment(r) for p, r in partitions.items()})
        z.nodes[PATHS.topic(topic)] = Znode(encode_topic(record), 0, z.next_zxid())
        for p, (leader, le, isr, pe) in states.items():
            z.nodes[PATHS.partition_state(topic, p)] = Znode(
                encode_partition_state(LeaderIsr(leader, le, isr, 1, pe)), pe, z.next_zxid())
        return z

    def next_zxid(self) -> int:
        self.zxid += 1
        return self.zxid

    def register(self, b: int) -> None:
        reg = zk.BrokerRegistration(b, (zk.Endpoint("PLAINTEXT", f"b{b}", 9090 + b),), 0)
        self.nodes[PATHS.broker(b)] = Znode(zk.encode_broker(reg), 0, self.next_zxid())

    def unregister(self, b: int) -> None:
        del self.nodes[PATHS.broker(b)]

    def apply(self, w: ZkWrite) -> None:
        node = self.nodes.get(w.path)
        if w.op is ZkOp.CREATE:
            assert node is None, f"{w.path} exists"
            for parent in w.parents:
                self.nodes.setdefault(parent, Znode(None, 0, self.next_zxid()))
            self.nodes[w.path] = Znode(w.data, 0, self.next_zxid())
        elif w.op is ZkOp.SET:
            assert node is not None, f"{w.path} missing"
            assert w.expected_version in (-1, node.version), (w.path, w.expected_version, node.version)
            self.nodes[w.path] = Znode(w.data, node.version + 1, node.czxid)
        else:
            assert node is not None, f"{w.path} missing"
            for p in [p for p in self.nodes if p == w.path or p.startswith(w.path + "/")]:
                del self.nodes[p]

    def snapshot(self) -> ZkSnapshot:
        return snapshot_from_znodes(self.nodes)

    def assignment(self, tp: TopicPartition = TP) -> ReplicaAssignment:
        node = self.nodes[PATHS.topic(tp.topic)]
        assert node.data is not None
        return decode_topic(tp.topic, node.data).partitions[tp.partition]

    def state(self, tp: TopicPartition = TP) -> LeaderIsr:
        node = self.nodes[PATHS.partition_state(tp.topic, tp.partition)]
        assert node.data is not None
        return decode_partition_state(tp, node.data, node.version)

    def legacy(self) -> dict[tuple[str, int], tuple[int, ...]] | None:
        node = self.nodes.get(PATHS.REASSIGN_PARTITIONS)
        return None if node is None else zk.decode_reassign_partitions(node.data or b"")

    def write_legacy(self, partitions: Mapping[tuple[str, int], Sequence[int]]) -> None:
        self.nodes[PATHS.REASSIGN_PARTITIONS] = Znode(zk.encode_reassign_partitions(partitions), 0, self.next_zxid())


@dataclass
class Run:
    """A controller elected from a :class:`Zk`, whose results are applied to it write by write."""

    zk: Zk
    ctl: Controller
    epoch: int = 2

    @classmethod
    def elect(cls, z: Zk, *, epoch: int = 2, config: ControllerConfig | None = None) -> Run:
        r = cls(z, Controller(1, config), epoch)
        r.handle(ControllerElected(epoch, EPOCH_VERSION, z.snapshot()))
        return r

    def handle(self, event: Event, *, after_each: list[tuple[ReplicaAssignment, LeaderIsr]] | None = None
               ) -> ControllerResult:
        result = self.ctl.handle(event)
        for w in result.writes:
            assert w.controller_epoch_version == EPOCH_VERSION
            self.zk.apply(w)
            self.ctl.apply(w)
            if after_each is not None:
                after_each.append((self.zk.assignment(), self.zk.state()))
        self.ctl.validate_state()
        assert dict(self.ctl.topics) == dict(self.zk.snapshot().topics)
        assert dict(self.ctl.states) == dict(self.zk.snapshot().states)
        assert self.ctl.legacy_reassignment == self.zk.snapshot().reassign_partitions
        return result

    def alter(self, *parts: tuple[int, tuple[int, ...] | None], topic: str = "t",
              allow_rf_change: bool = True) -> tuple[ControllerResult, AlterPartitionReassignmentsResponse]:
        ev = AlterPartitionReassignmentsRequested(tuple((topic, p, r) for p, r in parts), allow_rf_change)
        result = self.handle(ev)
        assert isinstance(result.response, AlterPartitionReassignmentsResponse)
        return result, result.response

    def isr_change(self, new_isr: tuple[int, ...], tp: TopicPartition = TP,
                   after_each: list[tuple[ReplicaAssignment, LeaderIsr]] | None = None) -> ControllerResult:
        """The leader asks for ``new_isr`` through AlterPartition, with its current epochs."""
        st = self.zk.state(tp)
        reg = self.ctl.live_brokers[st.leader]
        item = AlterPartitionItem(tp.topic, tp.partition, st.leader_epoch, new_isr, st.partition_epoch)
        return self.handle(AlterPartitionReceived(st.leader, reg.broker_epoch, (item,)), after_each=after_each)

    def expire(self, b: int) -> ControllerResult:
        self.zk.unregister(b)
        return self.handle(BrokerExpired(b))


def lai(result: ControllerResult) -> dict[int, LeaderAndIsrRequest]:
    out: dict[int, LeaderAndIsrRequest] = {}
    for req in result.requests:
        if isinstance(req, LeaderAndIsrRequest):
            assert req.broker_id not in out
            out[req.broker_id] = req
    return out


def stops(result: ControllerResult) -> list[tuple[int, tuple[tuple[TopicPartition, bool], ...]]]:
    """StopReplica requests in sending order: (broker, ((partition, delete), ...))."""
    return [(r.broker_id, tuple((p.tp, p.delete) for p in r.partitions))
            for r in result.requests if isinstance(r, StopReplicaRequest)]


def um_brokers(result: ControllerResult) -> set[int]:
    return {r.broker_id for r in result.requests if isinstance(r, UpdateMetadataRequest) and r.partitions}


def topic_writes(result: ControllerResult) -> list[ReplicaAssignment]:
    return [decode_topic("t", w.data or b"").partitions[0] for w in result.writes if w.path == PATHS.topic("t")]


def state_writes(result: ControllerResult) -> list[tuple[int, int, tuple[int, ...]]]:
    """(leader, leader_epoch, isr) of every partition-state write, in order."""
    out = []
    for w in result.writes:
        if w.path == PATHS.partition_state("t", 0):
            doc = json.loads(w.data or b"")
            out.append((doc["leader"], doc["leader_epoch"], tuple(doc["isr"])))
    return out


def ok(resp: AlterPartitionReassignmentsResponse) -> None:
    assert resp.error == ErrorCode.NONE
    assert all(p.error == ErrorCode.NONE for p in resp.partitions), resp


# --- KIP-455: [1,2,3] -> [4,3,2] -------------------------------------------------------------------


def kip_cluster(brokers: Iterable[int] = (1, 2, 3, 4)) -> Run:
    return Run.elect(Zk.cluster(brokers, {0: (1, 2, 3)}, {0: (1, 5, (1, 2, 3), 8)}))


def test_kip455_example_phase_u_then_a() -> None:
    run = kip_cluster()
    result, resp = run.alter((0, (4, 3, 2)))
    ok(resp)
    # U: the topic znode first, with RS = TRS + (ORS - TRS), AR = TRS - ORS, RR = ORS - TRS
    assert [w.path for w in result.writes] == [PATHS.topic("t"), PATHS.partition_state("t", 0)]
    assert topic_writes(result) == [ReplicaAssignment((4, 3, 2, 1), (4,), (1,))]
    doc = json.loads(result.writes[0].data or b"")
    assert doc["adding_replicas"] == {"0": [4]} and doc["removing_replicas"] == {"0": [1]}
    # A1: the leader epoch is bumped; leader and ISR stay
    assert state_writes(result) == [(1, 6, (1, 2, 3))]
    assert result.writes[1].expected_version == 8
    # LeaderAndIsr to every replica of RS, with AR and RR; IsNew only for the adding replica
    reqs = lai(result)
    assert sorted(reqs) == [1, 2, 3, 4]
    for b, req in reqs.items():
        (p,) = req.partitions
        assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((4, 3, 2, 1), (4,), (1,))
        assert (p.leader, p.leader_epoch, p.isr, p.partition_epoch) == (1, 6, (1, 2, 3), 9)
        assert p.is_new == (b == 4)
    assert stops(result) == []
    assert um_brokers(result) == {1, 2, 3, 4}
    (ongoing,) = run.ctl.reassignments().values()
    assert (ongoing.original, ongoing.target) == ((3, 2, 1), (4, 3, 2))    # ORS = RS - AR, in RS order


def test_kip455_example_phase_b_when_the_new_replica_joins_the_isr() -> None:
    run = kip_cluster()
    run.alter((0, (4, 3, 2)))
    result = run.isr_change((1, 2, 3, 4))
    # the ISR change itself (same leader epoch), then B3: leader 1 is not in TRS -> first TRS replica in the ISR,
    # then B4: 1 leaves the ISR, then B6: RS = TRS written last
    assert state_writes(result) == [(1, 6, (1, 2, 3, 4)), (4, 7, (1, 2, 3, 4)), (4, 8, (2, 3, 4))]
    assert [w.path for w in result.writes][-1] == PATHS.topic("t")
    assert topic_writes(result) == [ReplicaAssignment((4, 3, 2))]
    assert run.zk.assignment() == ReplicaAssignment((4, 3, 2))
    assert run.zk.state() == LeaderIsr(4, 8, (2, 3, 4), 2, 12)
    # LeaderAndIsr to TRS only, with RS = TRS; the removed replica only gets StopReplica: offline, then deleted
    reqs = lai(result)
    assert sorted(reqs) == [2, 3, 4]
    for req in reqs.values():
        (p,) = req.partitions
        assert (p.replicas, p.adding_replicas, p.removing_replicas, p.leader, p.leader_epoch) == ((4, 3, 2), (), (), 4, 8)
    assert stops(result) == [(1, ((TP, False),)), (1, ((TP, True),))]
    order = [type(r).__name__ for r in result.requests if r.broker_id == 1]
    assert order == ["UpdateMetadataRequest", "StopReplicaRequest", "StopReplicaRequest"]
    assert um_brokers(result) == {1, 2, 3, 4}
    assert run.ctl.reassignments() == {}


def test_a_partial_isr_change_does_not_complete() -> None:
    run = Run.elect(Zk.cluster((1, 2, 3, 4, 5), {0: (1, 2, 3)}, {0: (1, 5, (1, 2, 3), 8)}))
    run.alter((0, (4, 5, 3)))
    result = run.isr_change((1, 2, 3, 4))
    assert state_writes(result) == [(1, 6, (1, 2, 3, 4))]
    assert run.zk.assignment() == ReplicaAssignment((4, 5, 3, 1, 2), (4, 5), (1, 2))
    assert stops(result) == [] and lai(result) == {}


# --- KIP-455's cancellation: [1,2,3] -> [3,4,5], cancel -----------------------------------------------


def test_kip455_cancellation_example() -> None:
    run = Run.elect(Zk.cluster((1, 2, 3, 4, 5), {0: (1, 2, 3)}, {0: (1, 5, (1, 2, 3), 8)}))
    _, resp = run.alter((0, (3, 4, 5)))
    ok(resp)
    assert run.zk.assignment() == ReplicaAssignment((3, 4, 5, 1, 2), (4, 5), (1, 2))
    run.isr_change((1, 2, 3, 4))                    # R: [1,2,3,4,5], I: [1,2,3,4], AR: [4,5], RR: [1,2]
    assert run.zk.state().isr == (1, 2, 3, 4)
    result, resp = run.alter((0, None))            # cancel
    ok(resp)
    # the adding replica in the ISR leaves it first; then RS = ORS with AR = RR = []
    assert state_writes(result) == [(1, 7, (1, 2, 3))]
    assert topic_writes(result) == [ReplicaAssignment((3, 1, 2))]
    assert [w.path for w in result.writes] == [PATHS.partition_state("t", 0), PATHS.topic("t")]
    assert set(run.zk.assignment().replicas) == {1, 2, 3}      # KIP-455: the original order is not guaranteed
    assert run.zk.state() == LeaderIsr(1, 7, (1, 2, 3), 2, 11)
    # the adding replicas are stopped, then deleted; the rest learn the reverted RS
    assert stops(result) == [(4, ((TP, False),)), (4, ((TP, True),)), (5, ((TP, False),)), (5, ((TP, True),))]
    reqs = lai(result)
    assert sorted(reqs) == [1, 2, 3]
    assert {req.partitions[0].replicas for req in reqs.values()} == {(3, 1, 2)}
    assert run.ctl.reassignments() == {}


def test_cancel_moves_the_leadership_off_an_adding_replica() -> None:
    run = Run.elect(Zk.cluster((1, 2, 3, 4, 5), {0: (1, 2, 3)}, {0: (1, 5, (1, 2, 3), 8)}))
    run.alter((0, (4, 5)))
    run.isr_change((1, 2, 3, 4))
    run.expire(1)                                  # offline election in RS order (4, 5, 1, 2, 3): 4 leads
    assert (run.zk.state().leader, run.zk.state().isr) == (4, (2, 3, 4))
    result, resp = run.alter((0, None))
    ok(resp)
    # a new leader from the original replicas first, then 4 leaves the ISR
    assert state_writes(result) == [(2, 8, (2, 3, 4)), (2, 9, (2, 3))]
    assert run.zk.assignment() == ReplicaAssignment((1, 2, 3))
    assert stops(result) == [(4, ((TP, False),)), (4, ((TP, True),)), (5, ((TP, False),)), (5, ((TP, True),))]


def test_a_cancel_that_would_need_an_unclean_election_is_refused() -> None:
    run = Run.elect(Zk.cluster((1, 2, 3, 4), {0: (1, 2)}, {0: (1, 5, (1, 2), 8)}))
    run.alter((0, (3, 4)))
    run.isr_change((1, 2, 3))
    run.expire(1)
    run.expire(2)                                 # only the adding replica 3 is in sync now
    assert run.zk.state().isr == (3,)
    result, resp = run.alter((0, None))
    (part,) = resp.partitions
    assert part.error == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert part.message == "Unable to revert partition assignment for t:0 because it would require an unclean leader election."
    assert result.writes == () and result.requests == ()
    # the reassignment itself can still finish
    assert run.zk.assignment() == ReplicaAssignment((3, 4, 1, 2), (3, 4), (1, 2))
    assert run.zk.state().leader == 3
    run.isr_change((3, 4))
    assert run.zk.assignment() == ReplicaAssignment((3, 4))
    assert (run.zk.state().leader, run.zk.state().isr) == (3, (3, 4))


# --- a reassignment replaced while it runs --------------------------------------------------------


KAFKA_ZK = ControllerConfig(auto_leader_rebalance_enable=False)
"""Without the automatic rebalance, phase B keeps a leader that is in TRS (KafkaController's
ReassignPartitionLeaderElectionStrategy only runs when it is not, or is not live)."""


def test_replacing_keeps_the_original_set_and_stops_the_replicas_that_dropped_out() -> None:
    run = Run.elect(Zk.cluster(range(1, 8), {0: (1, 2, 3)}, {0: (1, 5, (1, 2, 3), 8)}), config=KAFKA_ZK)
    run.alter((0, (4, 5, 6)))
    run.isr_change((1, 2, 3, 4))
    result, resp = run.alter((0, (5, 7, 1)))
    ok(resp)
    # 4 (in the ISR) and 6 are no longer wanted: 4 leaves the ISR before the topic znode drops it
    assert state_writes(result) == [(1, 7, (1, 2, 3))]
    assert [w.path for w in result.writes] == [PATHS.partition_state("t", 0), PATHS.topic("t")]
    # ORS is still [1,2,3]: RS = [5,7,1] + [2,3], AR = [5,7], RR = [2,3]
    assert run.zk.assignment() == ReplicaAssignment((5, 7, 1, 2, 3), (5, 7), (2, 3))
    assert stops(result) == [(4, ((TP, False),)), (4, ((TP, True),)), (6, ((TP, False),)), (6, ((TP, True),))]
    reqs = lai(result)
    assert sorted(reqs) == [1, 2, 3, 5, 7]
    assert {b for b, r in reqs.items() if r.partitions[0].is_new} == {5, 7}
    (ongoing,) = run.ctl.reassignments().values()
    assert (ongoing.original, ongoing.target) == ((1, 2, 3), (5, 7, 1))
    # then it completes at the new target; the leader 1 stays (it is in TRS)
    result = run.isr_change((1, 2, 3, 5, 7))
    assert run.zk.assignment() == ReplicaAssignment((5, 7, 1))
    assert (run.zk.state().leader, run.zk.state().isr) == (1, (1, 5, 7))
    assert stops(result) == [(2, ((TP, False),)), (2, ((TP, True),)), (3, ((TP, False),)), (3, ((TP, True),))]


def test_a_target_already_in_sync_completes_at_once() -> None:
    run = kip_cluster()
    result, resp = run.alter((0, (2, 3)))        # shrink: TRS is within the ISR already
    ok(resp)
    assert topic_writes(result) == [ReplicaAssignment((2, 3, 1), (), (1,)), ReplicaAssignment((2, 3))]
    assert state_writes(result) == [(2, 6, (1, 2, 3)), (2, 7, (2, 3))]
    assert stops(result) == [(1, ((TP, False),)), (1, ((TP, True),))]
    assert run.ctl.reassignments() == {}


# --- the 002 seed's table: {1,2,3} -> {4,5,6}, leader 1 -> 4 --------------------------------------


def test_seed_002_table_step_by_step() -> None:
    run = Run.elect(Zk.cluster(range(1, 7), {0: (1, 2, 3)}, {0: (1, 5, (1, 2, 3), 8)}))
    rows: list[tuple[ReplicaAssignment, LeaderIsr]] = []
    run.alter((0, (4, 5, 6)))
    row2 = (run.zk.assignment(), run.zk.state())
    run.isr_change((1, 2, 3, 4))
    run.isr_change((1, 2, 3, 4, 5))
    run.isr_change((1, 2, 3, 4, 5, 6), after_each=rows)

    def row(a: ReplicaAssignment, s: LeaderIsr) -> tuple[object, ...]:
        return a.replicas, a.adding_replicas, a.removing_replicas, s.leader, s.isr

    reassigning = ((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))
    assert row(*row2) == (*reassigning, 1, (1, 2, 3))                                   # 2: step A2
    table = [row(a, s) for a, s in rows]
    assert table[0] == (*reassigning, 1, (1, 2, 3, 4, 5, 6))                            # 3: phase B
    assert table[1] == (*reassigning, 4, (1, 2, 3, 4, 5, 6))                            # 4: step B3
    assert table[4] == (*reassigning, 4, (4, 5, 6))                                     # 5: step B4
    assert table[5] == ((4, 5, 6), (), (), 4, (4, 5, 6))                                # 6: step B6
    assert len(table) == 6
    # the seed's log: leader epoch 6 after A1, 7 for the new leader, 8, 9, 10 as 1, 2, 3 leave the ISR
    assert row2[1].leader_epoch == 6
    assert [s.leader_epoch for _, s in rows] == [6, 7, 8, 9, 10, 10]
    assert [s.isr for _, s in rows[1:5]] == [(1, 2, 3, 4, 5, 6), (2, 3, 4, 5, 6), (3, 4, 5, 6), (4, 5, 6)]


def test_seed_002_table_requests() -> None:
    run = Run.elect(Zk.cluster(range(1, 7), {0: (1, 2, 3)}, {0: (1, 5, (1, 2, 3), 8)}))
    result, _ = run.alter((0, (4, 5, 6)))
    assert sorted(lai(result)) == [1, 2, 3, 4, 5, 6]
    assert {b for b, r in lai(result).items() if r.partitions[0].is_new} == {4, 5, 6}
    run.isr_change((1, 2, 3, 4, 5))
    result = run.isr_change((1, 2, 3, 4, 5, 6))
    reqs = lai(result)
    assert sorted(reqs) == [4, 5, 6]
    assert {(r.partitions[0].leader, r.partitions[0].leader_epoch, r.partitions[0].isr) for r in reqs.values()} == {
        (4, 10, (4, 5, 6))}
    assert [b for b, _ in stops(result)] == [1, 1, 2, 2, 3, 3]
    assert [parts[0][1] for _, parts in stops(result)] == [False, True] * 3
    assert um_brokers(result) == set(range(1, 7))


def test_a_completed_move_hands_leadership_to_its_preferred_replica() -> None:
    """auto.leader.rebalance.enable (Kafka's default): the preferred election that Kafka's controller
    would run at its next imbalance check happens in phase B itself (the seed's reassignment log ends
    with it), so the leader is TRS[0] as soon as the move completes."""
    run = Run.elect(Zk.cluster(range(1, 8), {0: (1, 2, 3)}, {0: (1, 5, (1, 2, 3), 8)}))
    run.alter((0, (5, 7, 1)))
    run.isr_change((1, 2, 3, 5, 7))
    assert run.zk.assignment() == ReplicaAssignment((5, 7, 1))
    state = run.zk.state()
    assert (state.leader, state.isr) == (5, (1, 5, 7))
    # A1's bump, B3's new leader, then one per replica of RR leaving the ISR
    assert state.leader_epoch == 5 + 1 + 1 + 2
