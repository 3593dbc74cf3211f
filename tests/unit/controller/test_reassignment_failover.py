"""Failover at every point of a reassignment, and the legacy ``/admin/reassign_partitions`` znode.

The failover tests crash the controller after each of its writes in turn (the rest of that result is
lost, as when the shell's fenced write fails), elect a new controller from what ZooKeeper holds, let
the replicas catch up, and check that the partition ends where it must: at the target, or at the
original set if a cancel was acknowledged. Nothing is lost and nothing is left half-done.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from test_reassignment import TP, Run, Zk, ok, stops

from headwater.controller.controller import Controller
from headwater.controller.effects import ControllerResult
from headwater.controller.events import ControllerElected, Event, LegacyReassignmentRequested
from headwater.controller.znodes import PATHS, ReplicaAssignment, TopicPartition, Znode

T1 = TopicPartition("t", 1)


class Crash(Exception):
    pass


class BudgetRun(Run):
    """A controller that dies after ``budget`` writes (the writes before it reached ZooKeeper)."""

    budget: int = 10**9

    def handle(self, event: Event, *, after_each: list | None = None) -> ControllerResult:  # type: ignore[type-arg]
        result = self.ctl.handle(event)
        for w in result.writes:
            if self.budget == 0:
                raise Crash
            self.budget -= 1
            self.zk.apply(w)
            self.ctl.apply(w)
        return result


Step = tuple[Callable[[Run], object], tuple[int, ...] | None]
"""One step of a scenario and the partition's final replicas once it is acknowledged (None: unchanged)."""

SCENARIOS: dict[str, list[Step]] = {
    "api": [(lambda r: r.alter((0, (4, 3, 2))), (4, 3, 2)), (lambda r: r.isr_change((1, 2, 3, 4)), None)],
    "legacy": [(lambda r: r.zk.write_legacy({("t", 0): (4, 3, 2)}), None),
               (lambda r: r.handle(LegacyReassignmentRequested({("t", 0): (4, 3, 2)})), (4, 3, 2)),
               (lambda r: r.isr_change((1, 2, 3, 4)), None)],
    "cancel": [(lambda r: r.alter((0, (3, 4, 5))), (3, 4, 5)), (lambda r: r.isr_change((1, 2, 3, 4)), None),
               (lambda r: r.alter((0, None)), (3, 1, 2))],
    "replace": [(lambda r: r.alter((0, (4, 5))), (4, 5)), (lambda r: r.isr_change((1, 2, 3, 4)), None),
                (lambda r: r.alter((0, (5, 3))), (5, 3))],
}
def fresh() -> Zk:
    return Zk.cluster((1, 2, 3, 4, 5), {0: (1, 2, 3)}, {0: (1, 5, (1, 2, 3), 8)})


def play(steps: list[Step], budget: int) -> tuple[Zk, set[tuple[int, ...]], bool]:
    """Run the steps with a controller that dies after ``budget`` writes; the finals a new controller may reach."""
    z = fresh()
    run = BudgetRun.elect(z)
    run.budget = budget
    final = (1, 2, 3)
    for action, target in steps:
        try:
            action(run)
        except Crash:
            return z, {final, target or final}, False  # the step in flight may or may not have reached ZooKeeper
        final = target or final
    return z, {final}, True


def finish(run: Run) -> None:
    """Replicas catch up: the leader adds every live target replica to the ISR until nothing is reassigning."""
    for _ in range(4):
        if not run.ctl.reassignments():
            return
        (r,) = run.ctl.reassignments().values()
        st = run.zk.state()
        assert st.leader in run.ctl.live_brokers, st
        run.isr_change(tuple(dict.fromkeys((*st.isr, *r.target))))
    raise AssertionError(f"still reassigning: {run.ctl.reassignments()}")


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_failover_after_every_write(name: str) -> None:
    steps = SCENARIOS[name]
    finals = set()
    cut = 0
    while True:
        z, allowed, complete = play(steps, cut)
        new = Run(z, Controller(2), epoch=3)
        new.handle(ControllerElected(3, 3, z.snapshot()))
        finish(new)
        a = z.assignment()
        assert not a.is_being_reassigned and a.replicas in allowed, (cut, allowed, a)
        st = z.state()
        assert set(st.isr) <= set(a.replicas) and st.leader in a.replicas, (cut, st, a)
        assert z.legacy() is None, (cut, z.legacy())
        finals.add(a.replicas)
        if complete:                                 # the whole scenario went through
            break
        cut += 1
    assert cut >= 4 and a.replicas == next(t for _, t in reversed(steps) if t), (cut, finals)


def test_failover_in_phase_a_resends_leader_and_isr_with_is_new() -> None:
    z = fresh()
    run = Run.elect(z)
    run.alter((0, (4, 3, 2)))
    new = Run(z, Controller(2), epoch=3)
    result = new.handle(ControllerElected(3, 3, z.snapshot()))
    # resumes phase A: a new leader epoch, LeaderAndIsr with AR/RR, IsNew for the adding replica
    assert z.state().leader_epoch == 7
    by_broker = {r.broker_id: r for r in result.requests if type(r).__name__ == "LeaderAndIsrRequest"}
    assert sorted(by_broker) == [1, 2, 3, 4]
    p4 = by_broker[4].partitions[0]  # type: ignore[attr-defined]
    assert (p4.replicas, p4.adding_replicas, p4.removing_replicas, p4.is_new) == ((4, 3, 2, 1), (4,), (1,), True)
    assert new.ctl.reassignments()[TP].target == (4, 3, 2)


def test_failover_between_isr_shrink_and_the_final_znode_resends_the_stops() -> None:
    z = fresh()
    run = BudgetRun.elect(z)
    run.alter((0, (4, 3, 2)))
    run.budget = 3                          # the ISR change, the new leader and 1 leaving the ISR; not the znode
    with pytest.raises(Crash):
        run.isr_change((1, 2, 3, 4))
    assert z.assignment() == ReplicaAssignment((4, 3, 2, 1), (4,), (1,)) and z.state().isr == (2, 3, 4)
    new = Run(z, Controller(2), epoch=3)
    result = new.handle(ControllerElected(3, 3, z.snapshot()))
    assert z.assignment() == ReplicaAssignment((4, 3, 2))
    assert stops(result) == [(1, ((TP, False),)), (1, ((TP, True),))]


def test_the_legacy_znode_takes_precedence_on_failover() -> None:
    """KIP-455: the controller cannot know whether it acted on the znode, so on failover it supersedes an
    API reassignment of the same partition. The original set is kept."""
    z = fresh()
    run = Run.elect(z)
    ok(run.alter((0, (4, 5, 3)))[1])
    z.write_legacy({("t", 0): (2, 4)})             # written while no controller was acting on it
    new = Run(z, Controller(2), epoch=3)
    new.handle(ControllerElected(3, 3, z.snapshot()))
    assert z.assignment() == ReplicaAssignment((2, 4, 3, 1), (4,), (3, 1))
    assert set(new.ctl.reassignments()[TP].original) == {1, 2, 3}
    new.isr_change((1, 2, 3, 4))
    assert z.assignment() == ReplicaAssignment((2, 4)) and z.legacy() is None


# --- /admin/reassign_partitions -----------------------------------------------------------------


def legacy_cluster() -> Run:
    return Run.elect(Zk.cluster((1, 2, 3, 4), {0: (1, 2, 3), 1: (2, 3, 1)},
                                {0: (1, 5, (1, 2, 3), 8), 1: (2, 5, (2, 3, 1), 8)}))


def trigger(run: Run, partitions: dict[tuple[str, int], tuple[int, ...]]) -> ControllerResult:
    run.zk.write_legacy(partitions)
    return run.handle(LegacyReassignmentRequested(partitions))


def test_legacy_entries_leave_the_znode_one_by_one_as_they_complete() -> None:
    run = legacy_cluster()
    trigger(run, {("t", 0): (4, 2, 3), ("t", 1): (2, 3, 4)})
    assert sorted(run.ctl.reassignments()) == [TP, T1]
    run.isr_change((1, 2, 3, 4))
    assert z_legacy(run) == {("t", 1): (2, 3, 4)}             # rewritten without the completed partition
    result = run.isr_change((2, 3, 1, 4), T1)
    assert z_legacy(run) is None                               # deleted with its last entry
    assert result.writes[-1].path == PATHS.REASSIGN_PARTITIONS
    assert run.zk.assignment(T1) == ReplicaAssignment((2, 3, 4))


def z_legacy(run: Run) -> dict[tuple[str, int], tuple[int, ...]] | None:
    return run.zk.legacy()


def test_legacy_entries_that_cannot_start_leave_the_znode() -> None:
    run = legacy_cluster()
    # no liveness check for the legacy path: broker 9 is not registered, the reassignment waits for it
    trigger(run, {("t", 0): (9, 2, 3), ("t", 1): (2, 2), ("gone", 0): (1,)})
    assert z_legacy(run) == {("t", 0): (9, 2, 3)}
    assert run.zk.assignment() == ReplicaAssignment((9, 2, 3, 1), (9,), (1,))


def test_an_api_reassignment_takes_the_partition_out_of_the_legacy_znode() -> None:
    run = legacy_cluster()
    trigger(run, {("t", 0): (4, 2, 3), ("t", 1): (2, 3, 4)})
    result, resp = run.alter((0, (1, 2, 4)))
    ok(resp)
    assert result.writes[0].path == PATHS.REASSIGN_PARTITIONS     # before the topic znode changes
    assert z_legacy(run) == {("t", 1): (2, 3, 4)}
    _, resp = run.alter((1, None))
    ok(resp)
    assert z_legacy(run) is None
    assert run.zk.assignment(T1) == ReplicaAssignment((2, 3, 1))


def test_an_unreadable_legacy_znode_is_deleted() -> None:
    run = legacy_cluster()
    run.zk.nodes[PATHS.REASSIGN_PARTITIONS] = Znode(b'{"version":1,"partitions":[{"topic":"t"', 0, 1)
    new = Run(run.zk, Controller(2), epoch=3)
    new.handle(ControllerElected(3, 3, run.zk.snapshot()))
    assert z_legacy(new) is None and new.ctl.reassignments() == {}
