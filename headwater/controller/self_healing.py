"""Self-healing decisions: when a broker stays gone past a threshold, its replicas move to the
living brokers; when it comes back before the copies end, the moves still copying are cancelled;
when a healing move completes, its partition's preferred leader is elected.

Pure: the controller's shell feeds it what the controller knows (registered brokers, assignments,
moves in flight) and the time, then carries out the decisions (planning with the planner's
in-process engine, AlterPartitionReassignments, ElectLeaders). Rules:

- A broker is dead while a replica names it and it is not registered in ``/brokers/ids``; its
  clock starts when this controller first sees it so (after a failover, the new controller counts
  from its own start: it never acts sooner than the threshold after taking over).
- A heal is decided once ``self.healing.broker.failure.threshold.ms`` has passed, for every dead
  broker whose replicas are not already moving away, in one plan; partitions an operator is
  already moving are left alone.
- A broker that registers again cancels the healing moves of its partitions that are still in
  flight, so each returns to replicas that include the broker and its data; moves that completed
  stay (the data is on three in-sync replicas already).
- A healing move that leaves the reassignment list completes; its partitions' preferred leaders are
  elected, as an operator ends a move.
- ``self.healing.dry.run`` decides the same, once per death, and the shell only logs it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from headwater.controller.znodes import TopicPartition

DEFAULT_THRESHOLD_MS = 1_800_000  # Cruise Control's broker.failure.self.healing.threshold.ms


@dataclass(frozen=True)
class HealingConfig:
    enabled: bool = False
    broker_failure_threshold_ms: int = DEFAULT_THRESHOLD_MS
    dry_run: bool = False


@dataclass(frozen=True)
class ClusterView:
    registered: frozenset[int]
    replicas: Mapping[TopicPartition, tuple[int, ...]]
    moving: frozenset[TopicPartition]  # partitions with a reassignment in flight, whoever started it


@dataclass(frozen=True)
class Heal:
    """Plan the replicas of ``brokers`` away (goal fix-dead) and start the moves, except on ``keep_out``."""

    brokers: tuple[int, ...]
    dead_for_ms: dict[int, int]
    keep_out: frozenset[TopicPartition]
    dry_run: bool = False


@dataclass(frozen=True)
class Cancel:
    broker: int
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class ElectPreferred:
    partitions: tuple[TopicPartition, ...]


Decision = Heal | Cancel | ElectPreferred


@dataclass
class SelfHealing:
    config: HealingConfig = field(default_factory=HealingConfig)
    dead_since: dict[int, int] = field(default_factory=dict)
    # Healing moves started and not yet seen to end: partition -> the dead brokers it moves away from.
    healing: dict[TopicPartition, frozenset[int]] = field(default_factory=dict)
    planning: bool = False  # a Heal is being carried out: no second one until it is
    dry_run_told: set[int] = field(default_factory=set)
    given_up: set[int] = field(default_factory=set)  # dead brokers whose plan moved nothing

    def configure(self, config: HealingConfig) -> None:
        self.config = config
        if not config.dry_run:
            self.dry_run_told.clear()

    def tick(self, now_ms: int, view: ClusterView) -> list[Decision]:
        dead = {b for replicas in view.replicas.values() for b in replicas} - view.registered
        for b in list(self.dead_since):
            if b not in dead:
                del self.dead_since[b]
        for b in dead:
            self.dead_since.setdefault(b, now_ms)
        self.dry_run_told &= dead  # a broker that came back and died again is told again
        self.given_up &= dead
        out: list[Decision] = []
        out += self._cancel_for_returned(view)
        out += self._elect_completed(view)
        if self.config.enabled and not self.planning:
            heal = self._heal(now_ms, view, dead)
            if heal is not None:
                out.append(heal)
        return out

    def started(self, moves: Mapping[TopicPartition, tuple[int, ...]], brokers: Iterable[int]) -> None:
        """The shell started healing moves away from ``brokers``: each partition with the replicas it had."""
        dead = frozenset(brokers)
        for tp, original in moves.items():
            self.healing[tp] = dead & frozenset(original)
        self.planning = False

    def abandoned(self) -> None:
        """The shell could not plan or start the last Heal; the next tick may decide again."""
        self.planning = False

    def nothing_to_move(self, brokers: Iterable[int]) -> None:
        """The plan for these brokers moved nothing: not asked again until one of them comes back
        (and dies again), rather than planned every second."""
        self.planning = False
        self.given_up |= set(brokers)

    def _heal(self, now_ms: int, view: ClusterView, dead: set[int]) -> Heal | None:
        due = {b for b in dead - self.given_up if now_ms - self.dead_since[b] >= self.config.broker_failure_threshold_ms}
        # Only brokers that still hold a replica not already moving away.
        due = {b for b in due if any(b in replicas and tp not in view.moving for tp, replicas in view.replicas.items())}
        if self.config.dry_run:
            due -= self.dry_run_told
            self.dry_run_told |= due
        if not due:
            return None
        if not self.config.dry_run:
            self.planning = True
        return Heal(tuple(sorted(due)), {b: now_ms - self.dead_since[b] for b in sorted(due)}, view.moving,
                    self.config.dry_run)

    def _cancel_for_returned(self, view: ClusterView) -> list[Decision]:
        by_broker: dict[int, list[TopicPartition]] = {}
        for tp, away in self.healing.items():
            if tp in view.moving:
                for b in away & view.registered:
                    by_broker.setdefault(b, []).append(tp)
        out: list[Decision] = []
        for b, tps in sorted(by_broker.items()):
            for tp in tps:
                self.healing.pop(tp, None)
            out.append(Cancel(b, tuple(sorted(tps))))
        return out

    def _elect_completed(self, view: ClusterView) -> list[Decision]:
        done = sorted(tp for tp in self.healing if tp not in view.moving)
        for tp in done:
            del self.healing[tp]
        done = [tp for tp in done if tp in view.replicas]  # a topic deleted meanwhile has nothing to elect
        return [ElectPreferred(tuple(done))] if done else []
