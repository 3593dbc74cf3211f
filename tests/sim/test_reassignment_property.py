"""Property: random sequences of alter, replace and cancel, under the simulation's crashes and failovers.

After every step ZooKeeper's RS, AR and RR must follow the rules (RS = TRS + (ORS - TRS), AR = TRS - ORS,
RR = ORS - TRS, the original set kept across replacements, the target the last accepted request's);
once the failures stop, every partition must end at its last target, or at its original set after a
cancel (:class:`controller_harness.ReassignmentModel`). Hypothesis runs derandomized, so CI is
deterministic.
"""

from __future__ import annotations

from collections import Counter

import pytest
from controller_harness import Simulation, Violation
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from headwater.controller.znodes import ReplicaAssignment

STEPS = 300

targets = st.lists(st.integers(1, 4), min_size=1, max_size=3, unique=True).map(tuple)
ops = st.lists(
    st.tuples(st.integers(0, STEPS - 1), st.sampled_from(["alter", "replace", "cancel"]), st.integers(0, 1000), targets),
    min_size=1, max_size=25,
)


@settings(max_examples=100, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), script=ops)
def test_alter_replace_cancel_end_at_the_last_target(seed: int, script: list[tuple[int, str, int, tuple[int, ...]]]
                                                     ) -> None:
    sim = Simulation(seed, reassignments=script).run(STEPS).settle()
    assert not sim.reassigning()


def test_the_model_catches_a_replacement_that_forgets_the_original_set(monkeypatch: pytest.MonkeyPatch) -> None:
    def from_current(self: ReplicaAssignment, target: tuple[int, ...]) -> ReplicaAssignment:
        full = tuple(dict.fromkeys((*target, *self.replicas)))           # KRaft-like: diff against all of RS
        return ReplicaAssignment(full, tuple(r for r in full if r not in self.replicas),
                                 tuple(r for r in full if r not in target))

    monkeypatch.setattr(ReplicaAssignment, "reassign_to", from_current)
    for seed in range(40):
        try:
            Simulation(seed).run(500).settle()
        except Violation as err:
            assert "original set" in str(err) or "RS = TRS" in str(err) or "assertion" in str(err), str(err)[:300]
            return
    raise AssertionError("no seed caught the broken replacement")


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), script=ops, limit=st.integers(1, 2))
def test_a_move_limit_queues_and_still_ends_at_the_last_target(
        seed: int, script: list[tuple[int, str, int, tuple[int, ...]]], limit: int) -> None:
    """reassignment.max.concurrent.moves.per.broker: the harness checks after every step that no broker
    is in AR or RR of more than ``limit`` ongoing reassignments and that queued partitions keep their
    original set and their last target (also across failovers, which reload the queue from ZooKeeper)."""
    sim = Simulation(seed, reassignments=script, max_moves=limit).run(STEPS).settle()
    assert not sim.reassigning() and not sim.zk.queue()


def test_the_move_limit_is_reached_and_the_queue_crosses_failovers() -> None:
    """Guards against the test above passing because nothing ever waits: with random reassignments and a
    limit of one, moves queue, and controllers are elected while the queue holds entries."""
    stats: Counter[str] = Counter()
    seeds_that_queued = 0
    for seed in range(20):
        sim = Simulation(seed, max_moves=1).run(600).settle()
        assert sim.stats["max_moves_seen"] <= 1
        seeds_that_queued += sim.stats["max_queued"] > 0
        stats.update(sim.stats)
    assert seeds_that_queued >= 5 and stats["elections_with_queue"] >= 1, (seeds_that_queued, stats)
