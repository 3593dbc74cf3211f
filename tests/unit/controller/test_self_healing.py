"""The self-healing decisions (headwater/controller/self_healing.py) against the contract issue #21
gives them: act only after the threshold, never on partitions an operator is moving, cancel the
moves still copying when the broker returns, end each move with the preferred election."""

from __future__ import annotations

from headwater.controller.self_healing import (
    Cancel,
    ClusterView,
    ElectPreferred,
    Heal,
    HealingConfig,
    SelfHealing,
)
from headwater.controller.znodes import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
REPLICAS: dict[TopicPartition, tuple[int, ...]] = {A0: (1, 2, 3), A1: (2, 3, 4), B0: (4, 5, 6)}
ON = HealingConfig(enabled=True, broker_failure_threshold_ms=10_000)


def view(registered: set[int], moving: set[TopicPartition] | None = None,
         replicas: dict[TopicPartition, tuple[int, ...]] | None = None) -> ClusterView:
    return ClusterView(frozenset(registered), REPLICAS if replicas is None else replicas, frozenset(moving or ()))


def test_disabled_decides_nothing_however_long_a_broker_is_gone() -> None:
    sh = SelfHealing(HealingConfig(enabled=False, broker_failure_threshold_ms=1))
    assert sh.tick(0, view({1, 2, 4, 5, 6})) == []
    assert sh.tick(10**9, view({1, 2, 4, 5, 6})) == []


def test_heals_only_after_the_threshold_counted_from_when_it_was_first_seen_gone() -> None:
    sh = SelfHealing(ON)
    live = {1, 2, 4, 5, 6}
    assert sh.tick(1_000, view(live)) == []
    assert sh.tick(10_999, view(live)) == []
    [heal] = sh.tick(11_000, view(live))
    assert heal == Heal((3,), {3: 10_000}, frozenset(), False)
    # One plan at a time: nothing more until the shell reports it started (or abandoned) the moves.
    assert sh.tick(12_000, view(live)) == []


def test_a_broker_back_before_the_threshold_resets_its_clock() -> None:
    sh = SelfHealing(ON)
    sh.tick(0, view({1, 2, 4, 5, 6}))
    sh.tick(5_000, view({1, 2, 3, 4, 5, 6}))
    assert sh.tick(12_000, view({1, 2, 4, 5, 6})) == []
    assert sh.tick(22_000, view({1, 2, 4, 5, 6})) != []


def test_partitions_already_moving_are_kept_out_and_a_broker_whose_replicas_all_move_is_not_due() -> None:
    sh = SelfHealing(ON)
    live = {1, 2, 4, 5, 6}
    sh.tick(0, view(live, moving={A0}))
    [heal] = sh.tick(10_000, view(live, moving={A0}))
    assert isinstance(heal, Heal) and heal.keep_out == frozenset({A0})
    sh2 = SelfHealing(ON)
    sh2.tick(0, view(live, moving={A0, A1}))
    assert sh2.tick(10_000, view(live, moving={A0, A1})) == []


def test_several_dead_brokers_heal_in_one_plan() -> None:
    sh = SelfHealing(ON)
    sh.tick(0, view({1, 2, 4, 6}))
    [heal] = sh.tick(10_000, view({1, 2, 4, 6}))
    assert isinstance(heal, Heal) and heal.brokers == (3, 5)


def test_completed_moves_end_with_the_preferred_election() -> None:
    sh = SelfHealing(ON)
    live = {1, 2, 4, 5, 6}
    sh.tick(0, view(live))
    sh.tick(10_000, view(live))
    sh.started({A0: (1, 2, 3), A1: (2, 3, 4)}, [3])
    assert sh.tick(11_000, view(live, moving={A0, A1})) == []
    moved = {**REPLICAS, A0: (1, 2, 5)}
    assert sh.tick(12_000, view(live, moving={A1}, replicas=moved)) == [ElectPreferred((A0,))]
    assert sh.tick(13_000, view(live, moving=set(), replicas={**moved, A1: (2, 6, 4)})) == [ElectPreferred((A1,))]
    assert sh.healing == {}


def test_a_returning_broker_cancels_only_its_moves_still_copying() -> None:
    sh = SelfHealing(ON)
    live = {1, 2, 4, 6}
    sh.tick(0, view(live))
    sh.tick(10_000, view(live))
    sh.started({A0: (1, 2, 3), A1: (2, 3, 4), B0: (4, 5, 6)}, [3, 5])
    # A0 finished; broker 3 returns while A1 still copies: A1 is cancelled, A0 elected; B0 (broker 5's) goes on.
    out = sh.tick(11_000, view(live | {3}, moving={A1, B0}))
    assert out == [Cancel(3, (A1,)), ElectPreferred((A0,))]
    assert set(sh.healing) == {B0}


def test_abandoned_plan_lets_the_next_tick_decide_again() -> None:
    sh = SelfHealing(ON)
    live = {1, 2, 4, 5, 6}
    sh.tick(0, view(live))
    assert sh.tick(10_000, view(live)) != []
    sh.abandoned()
    assert sh.tick(10_001, view(live)) != []


def test_dry_run_tells_once_per_death_and_never_blocks() -> None:
    sh = SelfHealing(HealingConfig(enabled=True, broker_failure_threshold_ms=10_000, dry_run=True))
    live = {1, 2, 4, 5, 6}
    sh.tick(0, view(live))
    [heal] = sh.tick(10_000, view(live))
    assert isinstance(heal, Heal) and heal.dry_run
    assert sh.tick(11_000, view(live)) == []
    sh.tick(12_000, view(live | {3}))  # back: a later death is told again
    sh.tick(13_000, view(live))
    assert sh.tick(23_000, view(live)) != []


def test_a_plan_that_moves_nothing_is_not_made_again_until_the_broker_dies_anew() -> None:
    sh = SelfHealing(ON)
    live = {1, 2, 4, 5, 6}
    sh.tick(0, view(live))
    assert sh.tick(10_000, view(live)) != []
    sh.nothing_to_move([3])
    assert sh.tick(11_000, view(live)) == []
    sh.tick(12_000, view(live | {3}))
    sh.tick(13_000, view(live))
    assert sh.tick(23_000, view(live)) != []


def test_replicas_in_a_failed_log_dir_move_after_the_threshold_and_no_return_cancels_them() -> None:
    # Broker 2 is registered but A1's replica on it sits in a failed log dir (Kafka's offline replica).
    sh = SelfHealing(ON)
    everyone = {1, 2, 3, 4, 5, 6}
    failed = {2: frozenset({A1})}
    assert sh.tick(0, ClusterView(frozenset(everyone), REPLICAS, frozenset(), failed)) == []
    [heal] = sh.tick(10_000, ClusterView(frozenset(everyone), REPLICAS, frozenset(), failed))
    assert isinstance(heal, Heal) and heal.brokers == () and heal.offline == {2: frozenset({A1})}
    assert "failed log dir" in heal.describe()
    sh.started({A1: (2, 3, 4)}, heal.brokers)
    # The broker restarts (its offline replicas are forgotten): the move goes on, then is elected.
    assert sh.tick(11_000, view(everyone, moving={A1})) == []
    assert sh.tick(12_000, view(everyone, replicas={**REPLICAS, A1: (5, 3, 4)})) == [ElectPreferred((A1,))]


def test_dead_brokers_are_planned_before_failed_log_dirs() -> None:
    sh = SelfHealing(ON)
    live = frozenset({1, 2, 4, 5, 6})
    failed = {5: frozenset({B0})}
    sh.tick(0, ClusterView(live, REPLICAS, frozenset(), failed))
    [heal] = sh.tick(10_000, ClusterView(live, REPLICAS, frozenset(), failed))
    assert isinstance(heal, Heal) and heal.brokers == (3,) and not heal.offline
    sh.started({A0: (1, 2, 3), A1: (2, 3, 4)}, [3])
    [heal] = sh.tick(10_500, ClusterView(live, REPLICAS, frozenset({A0, A1}), failed))
    assert isinstance(heal, Heal) and heal.offline == {5: frozenset({B0})}


def test_status_counts_down_to_the_next_action() -> None:
    sh = SelfHealing(ON)
    sh.tick(1_000, view({1, 2, 4, 5, 6}))
    status = sh.status(4_000, {"heal": 0})
    assert status.dead_for_ms == {3: 3_000} and status.waiting_for == 7_000 and status.healing == 0
    assert SelfHealing(ON).status(0, {}).waiting_for == -1


def test_a_new_controller_takes_over_the_healing_moves_in_flight() -> None:
    # What /admin/self_healing carries from one controller to the next.
    from headwater.controller.znodes import decode_self_healing, encode_self_healing

    first = SelfHealing(ON)
    first.tick(0, view({1, 2, 4, 5, 6}))
    first.tick(10_000, view({1, 2, 4, 5, 6}))
    first.started({A0: (1, 2, 3), A1: (2, 3, 4)}, [3])
    saved = encode_self_healing(first.healing)
    second = SelfHealing(ON)
    second.restore(decode_self_healing(saved))
    # Broker 3 returns while both still copy: the new controller cancels them as the old one would.
    assert second.tick(20_000, view({1, 2, 3, 4, 5, 6}, moving={A0, A1})) == [Cancel(3, (A0, A1))]
    assert decode_self_healing(b"not json") == {}
