"""Self-healing decisions: when a broker stays gone past a threshold, its replicas move to the
living brokers; when it comes back before the copies end, the moves still copying are cancelled;
replicas in a failed log dir of a living broker move to other brokers past the same threshold;
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
- A registered broker with replicas offline (a log dir failed: ``/log_dir_event_notification``) has
  those replicas moved to other brokers once the threshold has passed since it first had one, in a
  plan of their own (dead brokers first). Its other replicas stay. A restart brings the dir's
  replicas back online (or recreates them), so it clears the clock; moves already started go on:
  the failed dir's data is not trusted to come back.
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
    # registered broker -> its replicas in a failed log dir (until it restarts)
    offline: Mapping[int, frozenset[TopicPartition]] = field(default_factory=dict)


@dataclass(frozen=True)
class Heal:
    """Plan the replicas of ``brokers`` away (goal fix-dead) and start the moves, except on
    ``keep_out``; or, with ``offline``, only those replicas of those (living) brokers."""

    brokers: tuple[int, ...]
    dead_for_ms: dict[int, int]  # per broker of ``brokers`` or ``offline``: how long it has been so
    keep_out: frozenset[TopicPartition]
    dry_run: bool = False
    offline: Mapping[int, frozenset[TopicPartition]] = field(default_factory=dict)

    def describe(self) -> str:
        if self.offline:
            return ", ".join(f"{b} ({len(tps)} replicas in a failed log dir for {self.dead_for_ms[b] / 1000:.0f} s)"
                             for b, tps in sorted(self.offline.items()))
        return ", ".join(f"{b} (gone {self.dead_for_ms[b] / 1000:.0f} s)" for b in self.brokers)


@dataclass(frozen=True)
class Cancel:
    broker: int
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class ElectPreferred:
    partitions: tuple[TopicPartition, ...]


Decision = Heal | Cancel | ElectPreferred


@dataclass(frozen=True)
class HealingStatus:
    """What self-healing is doing, for the metrics endpoint and the console."""

    config: HealingConfig
    dead_for_ms: Mapping[int, int]  # brokers gone (named by replicas, not registered)
    offline_for_ms: Mapping[int, int]  # registered brokers with replicas in a failed log dir
    healing: int  # partitions whose healing move is in flight
    waiting_for: int  # ms until the next broker is due (-1: none waiting)
    actions: Mapping[str, int]  # per kind: heal, cancel, elect, dry_run, failed


@dataclass
class SelfHealing:
    config: HealingConfig = field(default_factory=HealingConfig)
    dead_since: dict[int, int] = field(default_factory=dict)
    offline_since: dict[int, int] = field(default_factory=dict)
    # Healing moves started and not yet seen to end: partition -> the dead brokers it moves away from
    # (empty for a move away from a failed log dir: no return cancels it).
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
        offline = {b for b, tps in view.offline.items() if tps and b in view.registered}
        for b in list(self.offline_since):
            if b not in offline:
                del self.offline_since[b]
        for b in offline:
            self.offline_since.setdefault(b, now_ms)
        self.dry_run_told &= dead | offline  # a broker that came back and died again is told again
        self.given_up &= dead | offline
        out: list[Decision] = []
        out += self._cancel_for_returned(view)
        out += self._elect_completed(view)
        if self.config.enabled and not self.planning:
            heal = self._heal(now_ms, view, dead) or self._relocate(now_ms, view)
            if heal is not None:
                out.append(heal)
        return out

    def status(self, now_ms: int, actions: Mapping[str, int]) -> HealingStatus:
        clocks = [since + self.config.broker_failure_threshold_ms - now_ms
                  for b, since in (*self.dead_since.items(), *self.offline_since.items()) if b not in self.given_up]
        return HealingStatus(self.config, {b: now_ms - t for b, t in sorted(self.dead_since.items())},
                             {b: now_ms - t for b, t in sorted(self.offline_since.items())}, len(self.healing),
                             max(0, min(clocks)) if clocks else -1, dict(actions))

    def started(self, moves: Mapping[TopicPartition, tuple[int, ...]], brokers: Iterable[int]) -> None:
        """The shell started healing moves away from ``brokers`` (none: away from failed log dirs):
        each partition with the replicas it had."""
        dead = frozenset(brokers)
        for tp, original in moves.items():
            self.healing[tp] = dead & frozenset(original)
        self.planning = False

    def restore(self, healing: Mapping[TopicPartition, Iterable[int]]) -> None:
        """A new controller takes over the healing moves its predecessor recorded."""
        self.healing = {tp: frozenset(brokers) for tp, brokers in healing.items()}

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

    def _relocate(self, now_ms: int, view: ClusterView) -> Heal | None:
        threshold = self.config.broker_failure_threshold_ms
        due = {b: frozenset(tp for tp in view.offline[b] if tp not in view.moving and b in view.replicas.get(tp, ()))
               for b, since in self.offline_since.items()
               if b not in self.given_up and now_ms - since >= threshold}
        due = {b: tps for b, tps in due.items() if tps}
        if self.config.dry_run:
            due = {b: tps for b, tps in due.items() if b not in self.dry_run_told}
            self.dry_run_told |= set(due)
        if not due:
            return None
        if not self.config.dry_run:
            self.planning = True
        return Heal((), {b: now_ms - self.offline_since[b] for b in sorted(due)}, view.moving, self.config.dry_run,
                    dict(sorted(due.items())))

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
