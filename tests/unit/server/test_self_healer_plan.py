"""The self-healer's plans (headwater/server/self_healer.py) against issue #21: a failed log dir's
replicas leave their broker, and nothing else of that broker moves; a dead broker's replicas all
leave; the planner's rack rule (one replica per rack, Kafka's rack-aware placement) holds."""

from __future__ import annotations

from headwater.controller.self_healing import Heal
from headwater.controller.znodes import TopicPartition
from headwater.server.self_healer import PlanInput, _only_offline, plan_heal

RACKS = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b", 6: "c"}
ASSIGNMENT = {0: [1, 2, 3], 1: [2, 3, 4], 2: [3, 4, 5], 3: [4, 5, 6], 4: [5, 6, 1], 5: [6, 1, 2]}


def given(live: set[int], waiting: tuple[int, ...] = ()) -> PlanInput:
    brokers = [{"node_id": b, "rack": RACKS[b]} for b in sorted(live)]
    brokers += [{"node_id": b, "rack": None} for b in waiting]
    topics = [{"name": "t", "error_code": 0, "partitions": [
        {"partition_index": p, "replica_nodes": r, "leader_id": r[0]} for p, r in ASSIGNMENT.items()]}]
    return PlanInput(brokers, topics, waiting)


def test_only_the_failed_dirs_replicas_leave_their_broker() -> None:
    offline = frozenset({TopicPartition("t", 0), TopicPartition("t", 5)})  # broker 2's failed dir
    plan = plan_heal(given({1, 2, 3, 4, 5, 6}), Heal((), {2: 10_000}, frozenset(), offline={2: offline}))
    assert set(plan) == offline
    for old, new in plan.values():
        assert 2 not in new and len(new) == 3
        assert set(old) - {2} <= set(new)  # the partition's other replicas stay
        assert len({RACKS[b] for b in new}) == 3


def test_a_dead_brokers_replicas_all_leave_and_partitions_moving_are_left_alone() -> None:
    moving = frozenset({TopicPartition("t", 1)})
    plan = plan_heal(given({1, 2, 4, 5, 6}), Heal((3,), {3: 10_000}, moving))
    assert set(plan) == {TopicPartition("t", 0), TopicPartition("t", 2)}
    for _old, new in plan.values():
        assert 3 not in new and len({RACKS[b] for b in new}) == 3


def test_only_offline_keeps_the_replicas_the_plan_moved_needlessly() -> None:
    # The plan moved 2 and 5 (both marked); the partition is offline on 2 only: 5 stays.
    assert _only_offline((1, 2, 5), (1, 4, 6), {2}) == (1, 4, 5)
    assert _only_offline((2, 1, 5), (4, 1, 5), {2}) == (4, 1, 5)


def test_the_metrics_endpoint_shows_what_self_healing_is_doing() -> None:
    from prometheus_client import generate_latest
    from prometheus_client.registry import CollectorRegistry

    from headwater.controller.self_healing import HealingConfig, HealingStatus
    from headwater.server import metrics

    collector = metrics.BrokerCollector()
    collector.snapshot = metrics.Snapshot(broker_id=1, self_healing=HealingStatus(
        HealingConfig(True, 600_000, False), {3: 42_000}, {}, 4, 558_000, {"heal": 1, "cancel": 0}))
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    assert 'headwater_self_healing_enabled{broker="1"} 1.0' in text
    assert 'headwater_self_healing_dead_broker_seconds{broker="1",target="3"} 42.0' in text
    assert 'headwater_self_healing_next_action_seconds{broker="1"} 558.0' in text
    assert 'headwater_self_healing_moves_in_flight{broker="1"} 4.0' in text
    assert 'headwater_self_healing_actions_total{action="heal",broker="1"} 1.0' in text
    # Not the controller: no series at all, rather than zeros that read as "disabled".
    collector.snapshot = metrics.Snapshot(broker_id=2)
    assert "headwater_self_healing" not in generate_latest(registry).decode()


def test_a_partition_mid_move_does_not_stop_the_plan() -> None:
    # Found by the chaos suite: a move in flight lists RS = the union of old and new replicas (4 for
    # RF 3), which the planner refused with one broker of four dead, so no heal could start while
    # any partition moved. Such a partition is given to the planner at its target, and left alone.
    import uuid

    from headwater.controller.controller import ControllerConfig
    from headwater.controller.state import ControllerState
    from headwater.controller.znodes import LiveBroker, ReplicaAssignment, TopicRecord
    from headwater.metadata.image import BrokerInfo
    from headwater.server.self_healer import plan_input

    state = ControllerState(1, ControllerConfig())
    state.live = {b: LiveBroker(b, b, BrokerInfo(b, "127.0.0.1", 9000 + b)) for b in (1, 2, 3)}
    state.topics = {"t": TopicRecord("t", uuid.UUID(int=1), {
        0: ReplicaAssignment((4, 2, 3)),
        1: ReplicaAssignment((1, 2, 3, 4), adding_replicas=(3,), removing_replicas=(4,)),
    })}
    moving = frozenset({TopicPartition("t", 1)})
    heal = Heal((4,), {4: 10_000}, moving)
    plan = plan_heal(plan_input(state, heal), heal)
    assert set(plan) == {TopicPartition("t", 0)}
    [(old, new)] = plan.values()
    assert old == (4, 2, 3) and sorted(new) == [1, 2, 3]
