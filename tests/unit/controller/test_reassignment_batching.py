"""reassignment.max.concurrent.moves.per.broker: the controller starts at most that many moves per broker
(a broker counts once per ongoing reassignment that has it in AR or RR) and queues the rest in
``/admin/reassignment_queue``, written after the writes that start a move."""

from __future__ import annotations

from typing import Any, cast

from test_reassignment import Run, Zk

from headwater.admin.reassign import Ongoing, cancel, list_reassignments, verify
from headwater.controller.effects import ListPartitionReassignmentsResponse, OngoingReassignment, ZkOp
from headwater.controller.events import (
    BrokerDefaultConfigsChanged,
    DeleteTopicsRequested,
    ListPartitionReassignmentsRequested,
)
from headwater.controller.znodes import (
    BROKER_DEFAULTS,
    PATHS,
    ReplicaAssignment,
    TopicPartition,
    Znode,
    decode_reassignment_queue,
    encode_reassignment_queue,
)
from headwater.metadata import zk
from headwater.protocol.errors import ErrorCode

P0, P1, P2 = (TopicPartition("t", p) for p in range(3))


def cluster(limit: int | None, partitions: dict[int, tuple[int, ...]]) -> Zk:
    z = Zk.cluster(range(1, 7), partitions, {p: (r[0], 1, r, 1) for p, r in partitions.items()})
    if limit is not None:
        z.nodes[BROKER_DEFAULTS] = Znode(zk.encode_config({"reassignment.max.concurrent.moves.per.broker": str(limit)}))
    return z


def queue(z: Zk) -> dict[TopicPartition, tuple[int, ...]] | None:
    node = z.nodes.get(PATHS.REASSIGNMENT_QUEUE)
    return None if node is None else dict(decode_reassignment_queue(node.data))


def listed(r: Run) -> dict[TopicPartition, OngoingReassignment]:
    resp = r.handle(ListPartitionReassignmentsRequested()).response
    assert isinstance(resp, ListPartitionReassignmentsResponse) and resp.error == ErrorCode.NONE
    return {TopicPartition(o.topic, o.partition): o for o in resp.partitions}


def test_a_move_over_the_limit_waits_and_starts_when_phase_b_frees_its_broker() -> None:
    z = cluster(1, {0: (1, 2, 3), 1: (1, 2, 3), 2: (4, 5, 6)})
    r = Run.elect(z)
    assert r.ctl.max_moves_per_broker == 1
    result, resp = r.alter((0, (4, 2, 3)), (1, (5, 2, 3)), (2, (6, 5, 4)))
    assert [p.error for p in resp.partitions] == [ErrorCode.NONE] * 3
    assert z.assignment(P0) == ReplicaAssignment((4, 2, 3, 1), (4,), (1,))
    assert z.assignment(P1) == ReplicaAssignment((1, 2, 3))           # broker 1 is busy with p0: queued
    assert z.assignment(P2) == ReplicaAssignment((6, 5, 4))           # a reorder moves nothing: done at once
    assert queue(z) == {P1: (5, 2, 3)} == dict(r.ctl.queued)
    assert result.writes[-1].path == PATHS.REASSIGNMENT_QUEUE and result.writes[-1].op is ZkOp.CREATE
    assert r.ctl.moves_per_broker() == {1: 1, 4: 1}
    # Listed as ZooKeeper holds it: current replicas, no AR, no RR (an ongoing one always has some).
    assert listed(r)[P1] == OngoingReassignment("t", 1, (1, 2, 3), (), ())
    assert listed(r)[P0] == OngoingReassignment("t", 0, (4, 2, 3, 1), (4,), (1,))

    result = r.isr_change((1, 2, 3, 4), P0)                           # p0's phase B frees broker 1
    assert z.assignment(P0) == ReplicaAssignment((4, 2, 3))
    assert z.assignment(P1) == ReplicaAssignment((5, 2, 3, 1), (5,), (1,))
    assert queue(z) is None and not r.ctl.queued
    assert result.writes[-1].path == PATHS.REASSIGNMENT_QUEUE and result.writes[-1].op is ZkOp.DELETE
    r.isr_change((1, 2, 3, 5), P1)
    assert z.assignment(P1) == ReplicaAssignment((5, 2, 3)) and not r.ctl.reassignments()


def test_cancel_and_replace_of_a_queued_move() -> None:
    z = cluster(1, {0: (1, 2, 3), 1: (1, 2, 3), 2: (1, 2, 3)})
    r = Run.elect(z)
    r.alter((0, (4, 2, 3)), (1, (5, 2, 3)), (2, (6, 2, 3)))
    assert list(r.ctl.queued.items()) == [(P1, (5, 2, 3)), (P2, (6, 2, 3))]
    _, resp = r.alter((1, (6, 5, 3)))                                 # replaced in place: keeps its turn
    assert resp.partitions[0].error == ErrorCode.NONE
    assert list(r.ctl.queued.items()) == [(P1, (6, 5, 3)), (P2, (6, 2, 3))]
    assert list(decode_reassignment_queue(z.nodes[PATHS.REASSIGNMENT_QUEUE].data)) == list(r.ctl.queued.items())
    result, resp = r.alter((1, None))                                 # cancelling a queued one removes it
    assert resp.partitions[0].error == ErrorCode.NONE
    assert [w.path for w in result.writes] == [PATHS.REASSIGNMENT_QUEUE]
    assert list(r.ctl.queued.items()) == [(P2, (6, 2, 3))]
    assert z.assignment(P1) == ReplicaAssignment((1, 2, 3))
    _, resp = r.alter((1, None))                                      # neither queued nor ongoing any more
    assert resp.partitions[0].error == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    r.alter((0, None))                                                # a cancel frees broker 1: p2 starts
    assert z.assignment(P0) == ReplicaAssignment((2, 3, 1))           # the original set, in RS order
    assert z.assignment(P2) == ReplicaAssignment((6, 2, 3, 1), (6,), (1,))
    assert queue(z) is None


def test_replacing_an_ongoing_move_that_no_longer_fits_reverts_it_and_queues_the_new_target() -> None:
    z = cluster(1, {0: (1, 2, 3), 1: (5, 2, 3)})
    r = Run.elect(z)
    r.alter((0, (4, 2, 3)), (1, (6, 2, 3)))
    assert z.assignment(P1) == ReplicaAssignment((6, 2, 3, 5), (6,), (5,))
    _, resp = r.alter((1, (4, 2, 3)))                                 # broker 4 is busy with p0
    assert resp.partitions[0].error == ErrorCode.NONE
    assert z.assignment(P1) == ReplicaAssignment((2, 3, 5))           # its original set (in RS order)
    assert queue(z) == {P1: (4, 2, 3)}
    assert r.ctl.moves_per_broker() == {1: 1, 4: 1}
    r.isr_change((1, 2, 3, 4), P0)
    assert z.assignment(P1) == ReplicaAssignment((4, 2, 3, 5), (4,), (5,))


def test_the_queue_survives_failover_and_a_half_started_entry_is_not_started_twice() -> None:
    z = cluster(1, {0: (1, 2, 3), 1: (1, 2, 3)})
    r = Run.elect(z)
    r.alter((0, (4, 2, 3)), (1, (5, 2, 3)))
    assert queue(z) == {P1: (5, 2, 3)}
    again = Run.elect(z, epoch=3)                                     # a new controller from ZooKeeper alone
    assert dict(again.ctl.queued) == {P1: (5, 2, 3)}
    assert z.assignment(P1) == ReplicaAssignment((1, 2, 3))
    again.isr_change((1, 2, 3, 4), P0)
    assert z.assignment(P1) == ReplicaAssignment((5, 2, 3, 1), (5,), (1,)) and queue(z) is None

    # A controller that died between a start's phase U and the queue's rewrite left both behind.
    z.nodes[PATHS.REASSIGNMENT_QUEUE] = Znode(encode_reassignment_queue([(P1, (5, 2, 3))]))
    third = Run.elect(z, epoch=4)
    assert not third.ctl.queued and queue(z) is None
    assert z.assignment(P1) == ReplicaAssignment((5, 2, 3, 1), (5,), (1,))


def test_raising_the_limit_starts_queued_moves_and_deleting_a_topic_drops_them() -> None:
    z = cluster(1, {0: (1, 2, 3), 1: (1, 2, 3), 2: (1, 2, 3)})
    r = Run.elect(z)
    r.alter((0, (4, 2, 3)), (1, (5, 2, 3)), (2, (6, 2, 3)))
    assert len(r.ctl.queued) == 2
    r.handle(BrokerDefaultConfigsChanged({"reassignment.max.concurrent.moves.per.broker": "2"}))
    assert z.assignment(P1).is_being_reassigned and not z.assignment(P2).is_being_reassigned
    assert list(r.ctl.queued) == [P2] and r.ctl.moves_per_broker()[1] == 2
    r.handle(DeleteTopicsRequested(("t",)))
    assert not r.ctl.queued and queue(z) is None
    assert r.ctl.moves_per_broker() == {}


def test_without_a_limit_nothing_queues_and_no_queue_znode_is_written() -> None:
    z = cluster(None, {0: (1, 2, 3), 1: (1, 2, 3)})
    r = Run.elect(z)
    result, _ = r.alter((0, (4, 2, 3)), (1, (5, 2, 3)))
    assert z.assignment(P0).is_being_reassigned and z.assignment(P1).is_being_reassigned
    assert PATHS.REASSIGNMENT_QUEUE not in {w.path for w in result.writes} and queue(z) is None
    assert r.ctl.moves_per_broker()[1] == 2


def test_unusable_limits_mean_no_limit_and_an_unreadable_queue_reads_as_empty() -> None:
    from headwater.controller.state import UNLIMITED_MOVES, max_moves
    assert max_moves({}) == UNLIMITED_MOVES
    assert max_moves({"reassignment.max.concurrent.moves.per.broker": "x"}) == UNLIMITED_MOVES
    assert max_moves({"reassignment.max.concurrent.moves.per.broker": "0"}) == UNLIMITED_MOVES
    assert max_moves({"reassignment.max.concurrent.moves.per.broker": "3"}) == 3
    assert decode_reassignment_queue(b"{not json") == ()
    entries = [(P1, (5, 2, 3)), (P0, (4,))]
    assert list(decode_reassignment_queue(encode_reassignment_queue(entries))) == entries   # order kept


class _FakeCluster:
    """What `headwater reassign` asks the cluster for, as a cluster with one queued and one active move answers."""

    def __init__(self) -> None:
        self.ongoing_moves = {("t", 0): Ongoing([4, 2, 3, 1], [4], [1]), ("t", 1): Ongoing([1, 2, 3], [], [])}
        self.altered: dict[tuple[str, int], list[int] | None] = {}

    def ongoing(self) -> dict[tuple[str, int], Ongoing]:
        return self.ongoing_moves

    def assignments(self, _topics: set[str]) -> dict[tuple[str, int], list[int]]:
        return {("t", 0): [4, 2, 3, 1], ("t", 1): [1, 2, 3]}

    def alter(self, targets: dict[tuple[str, int], list[int] | None]) -> dict[tuple[str, int], tuple[int, None]]:
        self.altered.update(targets)
        return {tp: (0, None) for tp in targets}


def test_the_reassign_tool_shows_queued_moves_and_cancels_them_too() -> None:
    cluster = _FakeCluster()
    lines: list[str] = []
    assert list_reassignments(cast(Any, cluster), lines.append) == 0
    assert lines == ["Current partition reassignments:",
                     "t-0: replicas: 4,2,3,1. adding: 4. removing: 1.",
                     "t-1: replicas: 1,2,3. queued."]
    lines.clear()
    code, done = verify(cast(Any, cluster), {("t", 0): [4, 2, 3], ("t", 1): [5, 2, 3]}, True, lines.append)
    assert (code, done) == (0, False)
    assert "Reassignment of partition t-0 is still in progress." in lines
    assert "Reassignment of partition t-1 is still in progress (queued)." in lines
    lines.clear()
    assert cancel(cast(Any, cluster), {("t", 0): [4, 2, 3], ("t", 1): [5, 2, 3]}, True, lines.append) == 0
    assert cluster.altered == {("t", 0): None, ("t", 1): None}
