"""Self-healing on the active controller: every second it shows ``controller/self_healing.py``
what the controller knows and carries out its decisions through the controller's own events, the
way an operator's requests arrive: AlterPartitionReassignments starts and cancels moves, ElectLeaders
(PREFERRED) ends them. Plans come from the planner's in-process engine, as ``headwater plan --engine
local --goal fix-dead`` makes them (rack-aware, moving only the dead brokers' replicas), in a worker
thread so the controller keeps working while it plans.

The moves run under whatever reassignment throttle is in force (``reassignment.throttled.rate`` or
``reassignment.throttle.mode=adaptive``): healing is a reassignment like any other.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from headwater.controller import events as ev
from headwater.controller.self_healing import (
    DEFAULT_THRESHOLD_MS,
    Cancel,
    ClusterView,
    ElectPreferred,
    Heal,
    HealingConfig,
    HealingStatus,
    SelfHealing,
)
from headwater.controller.state import ControllerState
from headwater.controller.znodes import TopicPartition, decode_self_healing, encode_self_healing
from headwater.metadata.configs import SELF_HEALING_DRY_RUN, SELF_HEALING_ENABLE, SELF_HEALING_THRESHOLD_MS
from headwater.protocol.errors import ErrorCode
from headwater.security.audit import AuditRecord, AuditResource
from headwater.server.clock import now_ms

log = logging.getLogger("headwater.self_healing")

TICK_S = 1.0
AUDIT_PRINCIPAL = "Controller:self-healing"


def healing_config(defaults: Mapping[str, str]) -> HealingConfig:
    """The cluster-wide dynamic broker configs (``/config/brokers/<default>``) as the decisions' settings;
    a hand-written value that does not parse keeps the default."""
    def flag(name: str) -> bool:
        return defaults.get(name, "false").strip().lower() == "true"
    try:
        threshold = max(0, int(defaults.get(SELF_HEALING_THRESHOLD_MS, DEFAULT_THRESHOLD_MS)))
    except ValueError:
        threshold = DEFAULT_THRESHOLD_MS
    return HealingConfig(flag(SELF_HEALING_ENABLE), threshold, flag(SELF_HEALING_DRY_RUN))


def cluster_view(state: ControllerState) -> ClusterView:
    replicas: dict[TopicPartition, tuple[int, ...]] = {}
    moving: set[TopicPartition] = set(state.queued)
    for name, topic in state.topics.items():
        if name in state.deleting:
            continue
        for p, a in topic.partitions.items():
            tp = TopicPartition(name, p)
            replicas[tp] = a.replicas
            if a.adding_replicas or a.removing_replicas:
                moving.add(tp)
    offline = {b: frozenset(tps) for b, tps in state.offline_replicas.items() if tps and b in state.live}
    return ClusterView(frozenset(state.live), replicas, frozenset(moving), offline)


@dataclass(frozen=True)
class PlanInput:
    """The planner's view of the cluster, copied from the controller's state on the event loop (the
    planner then runs in a worker thread while events keep changing that state)."""

    brokers: list[dict[str, Any]]
    topics: list[dict[str, Any]]
    waiting: tuple[int, ...]  # dead brokers not yet due: they keep their replicas and receive nothing


def plan_input(state: ControllerState, heal: Heal) -> PlanInput:
    named = {b for topic in state.topics.values() for a in topic.partitions.values() for b in a.replicas}
    waiting = tuple(sorted(named - set(state.live) - set(heal.brokers)))
    brokers = [{"node_id": b, "rack": lb.info.rack} for b, lb in state.live.items()]
    brokers += [{"node_id": b, "rack": None} for b in waiting]
    topics = [{"name": name, "error_code": 0,
               "partitions": [{"partition_index": p, "replica_nodes": list(a.target_replicas),
                               "leader_id": st.leader if (st := state.states.get(TopicPartition(name, p))) else -1}
                              for p, a in topic.partitions.items()]}
              for name, topic in state.topics.items() if name not in state.deleting]
    return PlanInput(brokers, topics, waiting)


def plan_heal(given: PlanInput, heal: Heal) -> dict[TopicPartition, tuple[tuple[int, ...], tuple[int, ...]]]:
    """(replicas now, target) for each partition of ``heal.brokers`` (or each replica of
    ``heal.offline``): the planner's fix-dead plan, rack-aware and moving only those replicas. Disks
    count as unlimited (the controller knows no sizes)."""
    from headwater.planner.engine import LocalEngine, run_plan
    from headwater.planner.live import snapshot_from_metadata
    from headwater.planner.model import Goal, PlanOptions

    engine = LocalEngine(snapshot_from_metadata({"brokers": given.brokers}, given.topics, [], {}, None))
    # A broker with a failed log dir counts as dead to the planner, so that nothing moves onto it;
    # of its replicas only the offline ones really move (``_only_offline``).
    run_plan(engine, PlanOptions(goal=Goal.FIX_DEAD, dead_brokers=tuple(sorted({*heal.brokers, *heal.offline})),
                                 exclude_brokers=given.waiting))
    due = set(heal.brokers)
    out: dict[TopicPartition, tuple[tuple[int, ...], tuple[int, ...]]] = {}
    for c in engine.changes():
        tp = TopicPartition(c.topic, c.partition)
        old, new = tuple(c.old), tuple(c.new)
        if tp in heal.keep_out or new == old:
            continue
        if heal.offline:
            leaving = {b for b in old if tp in heal.offline.get(b, ())}
            if leaving:
                out[tp] = (old, _only_offline(old, new, leaving))
        elif due & set(old):
            out[tp] = (old, new)
    return out


def _only_offline(old: tuple[int, ...], new: tuple[int, ...], leaving: set[int]) -> tuple[int, ...]:
    """The plan's target with every replica of ``old`` that is not ``leaving`` kept: the plan moved
    all the marked brokers' replicas, but this partition is offline on ``leaving`` only."""
    stays = [b for b in old if b not in leaving]
    arrivals = [b for b in new if b not in old][: len(new) - len(stays)]
    target = [b for b in new if b in stays or b in arrivals]
    return tuple(target + [b for b in stays if b not in target])


class SelfHealer:
    """``load``/``save`` read and write ``/admin/self_healing`` (the healing moves in flight, so that a
    new controller cancels and elects for them as this one would); ``audit`` writes the broker's
    audit log."""

    def __init__(self, broker_id: int, state: ControllerState, request: Callable[[ev.Event], Awaitable[Any]], *,
                 load: Callable[[], Awaitable[bytes | None]] | None = None,
                 save: Callable[[bytes], Awaitable[None]] | None = None,
                 audit: Callable[[AuditRecord], None] | None = None) -> None:
        self.broker_id = broker_id
        self.state = state
        self.request = request
        self.core = SelfHealing()
        self.actions: dict[str, int] = {"heal": 0, "cancel": 0, "elect": 0, "dry_run": 0, "failed": 0}
        self._load = load
        self._save = save
        self._audit = audit
        self._saved: bytes | None = None

    def status(self) -> HealingStatus:
        return self.core.status(now_ms(), self.actions)

    async def run(self, active: Callable[[], bool]) -> None:
        if self._load is not None:
            try:
                self._saved = await self._load()
                self.core.restore(decode_self_healing(self._saved))
                if self.core.healing:
                    log.warning("controller %d: self-healing takes over %d healing moves", self.broker_id,
                                len(self.core.healing))
            except Exception:
                log.exception("controller %d: could not read the healing moves in flight", self.broker_id)
        while active():
            await asyncio.sleep(TICK_S)
            if not active():
                return
            try:
                await self.tick()
            except Exception:  # a failed action is tried again on a later tick; the controller goes on
                log.exception("controller %d: self-healing tick failed", self.broker_id)
                self.actions["failed"] += 1
                self.core.abandoned()

    async def tick(self) -> None:
        self.core.configure(healing_config(self.state.broker_defaults))
        for decision in self.core.tick(now_ms(), cluster_view(self.state)):
            if isinstance(decision, Heal):
                await self._heal(decision)
            elif isinstance(decision, Cancel):
                await self._cancel(decision)
            elif isinstance(decision, ElectPreferred):
                await self._elect(decision)
        await self._persist()

    async def _persist(self) -> None:
        if self._save is None:
            return
        if not self.core.healing and self._saved is None:
            return  # nothing to record, and no znode to clear: a controller that never healed writes nothing
        data = encode_self_healing(self.core.healing)
        if data != self._saved:
            await self._save(data)
            self._saved = data

    async def _heal(self, heal: Heal) -> None:
        why = heal.describe()
        plan = await asyncio.to_thread(plan_heal, plan_input(self.state, heal), heal)
        if heal.dry_run:
            self.actions["dry_run"] += 1
            log.warning("self-healing (dry run): broker %s; would move %d partitions: %s", why, len(plan),
                        ", ".join(f"{tp.topic}-{tp.partition} {list(old)} -> {list(new)}"
                                  for tp, (old, new) in sorted(plan.items())))
            return
        # Planning took a while: a partition an operator started moving meanwhile, or whose replicas
        # changed, keeps what it has (a new target would replace the operator's).
        now = cluster_view(self.state)
        plan = {tp: (old, new) for tp, (old, new) in plan.items()
                if tp not in now.moving and now.replicas.get(tp) == old}
        if not plan:
            log.warning("self-healing: broker %s; the planner found no move", why)
            self.core.nothing_to_move([*heal.brokers, *heal.offline])
            return
        resp = await self.request(ev.AlterPartitionReassignmentsRequested(
            tuple((tp.topic, tp.partition, new) for tp, (_old, new) in sorted(plan.items()))))
        answers = {TopicPartition(r.topic, r.partition): r.error for r in getattr(resp, "partitions", ())}
        started = {tp: plan[tp][0] for tp, error in answers.items() if error == ErrorCode.NONE}
        failed = [f"{tp.topic}-{tp.partition}: {error.name}" for tp, error in answers.items() if error != ErrorCode.NONE]
        self.core.started(started, heal.brokers)
        self.actions["heal"] += 1
        self._record("AlterPartitionReassignments",
                     [(f"{tp.topic}-{tp.partition} -> {list(plan[tp][1])}", int(error)) for tp, error in sorted(answers.items())],
                     f"broker {why}")
        log.warning("self-healing: broker %s; started %d moves%s: %s", why, len(started),
                    f" ({len(failed)} refused: {', '.join(failed)})" if failed else "",
                    ", ".join(f"{tp.topic}-{tp.partition} {list(plan[tp][0])} -> {list(plan[tp][1])}"
                              for tp in sorted(started)))

    async def _cancel(self, cancel: Cancel) -> None:
        resp = await self.request(ev.AlterPartitionReassignmentsRequested(
            tuple((tp.topic, tp.partition, None) for tp in cancel.partitions)))
        answers = {TopicPartition(r.topic, r.partition): r.error for r in getattr(resp, "partitions", ())}
        self.actions["cancel"] += 1
        self._record("AlterPartitionReassignments",
                     [(f"{tp.topic}-{tp.partition} cancel", int(answers.get(tp, ErrorCode.NONE)))
                      for tp in cancel.partitions], f"broker {cancel.broker} is back")
        # A move can complete between the tick that saw it copying and the cancel: NO_REASSIGNMENT_IN_PROGRESS.
        cancelled = [tp for tp in cancel.partitions if answers.get(tp, ErrorCode.NONE) == ErrorCode.NONE]
        done = [f"{tp.topic}-{tp.partition}" for tp in cancel.partitions if tp not in cancelled]
        log.warning("self-healing: broker %d is back; cancelled the healing moves still copying: %s%s", cancel.broker,
                    ", ".join(f"{tp.topic}-{tp.partition}" for tp in cancelled) or "none",
                    f" (completed meanwhile: {', '.join(done)})" if done else "")

    async def _elect(self, elect: ElectPreferred) -> None:
        await self.request(ev.ElectLeadersRequested(tuple((tp.topic, tp.partition) for tp in elect.partitions)))
        self.actions["elect"] += 1
        self._record("ElectLeaders", [(f"{tp.topic}-{tp.partition}", 0) for tp in elect.partitions],
                     "healing moves completed: preferred leaders")
        log.warning("self-healing: moves completed; preferred leaders elected for %s",
                    ", ".join(f"{tp.topic}-{tp.partition}" for tp in elect.partitions))

    def _record(self, api: str, partitions: list[tuple[str, int]], detail: str) -> None:
        if self._audit is None:
            return
        resources = tuple(AuditResource("PARTITION", name, code) for name, code in partitions)
        self._audit(AuditRecord(now_ms(), AUDIT_PRINCIPAL, "", "self-healing", api, -1, resources, detail=detail))
