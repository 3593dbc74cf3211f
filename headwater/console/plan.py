"""The Plan page's planning: the planner's in-process engine (``headwater plan --engine local``) run
on what the console's last poll read, so planning asks the cluster nothing more.

Pure, apart from the planner's own CPU work: ``facts_snapshot`` turns a poll's answers into the
planner's snapshot (through the planner's own ``snapshot_from_metadata``, so the console and
``headwater plan --bootstrap-server`` read a cluster the same way), and ``make_plan`` runs the same
pipeline as ``headwater plan`` (``run_plan``, then ``build_report`` writing Kafka's JSON).
"""

from __future__ import annotations

import io
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from headwater.console.model import Facts, TopicPartition, replica_sizes
from headwater.planner.cli import DEFAULT_CONCURRENCY, DEFAULT_THROTTLE_BYTES_PER_S
from headwater.planner.engine import LocalEngine, build_report, run_plan
from headwater.planner.errors import PlannerError
from headwater.planner.live import snapshot_from_metadata
from headwater.planner.model import Goal, PlanOptions
from headwater.planner.snapshot import Snapshot

# The goals the page offers; replication-factor changes stay with ``headwater plan``.
GOALS = (Goal.REBALANCE, Goal.ADD_BROKERS, Goal.REMOVE_BROKERS, Goal.FIX_DEAD, Goal.LEADERS)
PLANS_KEPT = 20  # plans remembered for download and execute (a page holds the id of its own)


@dataclass
class Plan:
    id: str
    goal: str
    brokers: tuple[int, ...]
    created_at: float
    targets: dict[TopicPartition, list[int]]  # what Execute sends
    basis: dict[TopicPartition, list[int]]  # the replicas the plan started from: the cluster must still have them
    reassignment_json: str
    view: dict[str, Any] = field(default_factory=dict)  # what the page shows


def facts_snapshot(facts: Facts) -> Snapshot:
    """The planner's snapshot of a poll. A replica no registered broker holds marks its broker dead."""
    sizes = replica_sizes(facts.log_dirs)
    cluster = {"brokers": [{"node_id": b.node_id, "rack": b.rack} for b in facts.brokers.values()]}
    topics = [{"name": t, "error_code": 0,
               "partitions": [{"partition_index": p, "replica_nodes": list(pf.replicas), "leader_id": pf.leader}
                              for p, pf in parts.items()]}
              for t, parts in facts.topics.items()]
    by_broker: dict[int, dict[str, list[dict[str, int]]]] = {}
    for (t, p, b), size in sizes.items():
        by_broker.setdefault(b, {}).setdefault(t, []).append({"partition_index": p, "partition_size": size})
    log_dirs = [{"broker": b, "log_dirs": [{"log_dir": "*", "topics": [{"name": t, "partitions": ps}
                                                                       for t, ps in tps.items()]}]}
                for b, tps in by_broker.items()]
    return snapshot_from_metadata(cluster, topics, log_dirs, {}, None)


def parse_goal(goal: object, brokers: object) -> tuple[Goal, tuple[int, ...]]:
    """The page's request, checked: a goal it offers and broker ids where the goal needs them."""
    try:
        g = Goal(str(goal))
    except ValueError:
        raise PlannerError(f"unknown goal {goal!r}") from None
    if g not in GOALS:
        raise PlannerError(f"the console does not plan {g.value}: use headwater plan")
    if not isinstance(brokers, list) or not all(isinstance(b, int) and not isinstance(b, bool) for b in brokers):
        raise PlannerError("brokers must be a list of broker ids")
    ids = tuple(sorted(set(brokers)))
    if g in (Goal.ADD_BROKERS, Goal.REMOVE_BROKERS) and not ids:
        raise PlannerError(f"{g.value} needs the ids of the brokers")
    return g, ids if g in (Goal.ADD_BROKERS, Goal.REMOVE_BROKERS) else ()


def make_plan(facts: Facts, goal: Goal, brokers: tuple[int, ...], throttle_bytes_per_s: float | None = None) -> Plan:
    """Plan as ``headwater plan --engine local`` does, and shape what the page shows: the balance
    per broker before and after, the moves, the summary of the planner's report."""
    if not facts.topics and not facts.brokers:
        raise PlannerError("the console has not read the cluster yet")
    known = set(facts.brokers) | {b for parts in facts.topics.values() for pf in parts.values() for b in pf.replicas}
    unknown = sorted(set(brokers) - known)
    if unknown:
        raise PlannerError(f"unknown broker(s) {','.join(map(str, unknown))}")
    options = PlanOptions(goal=goal, brokers=brokers)
    engine = LocalEngine(facts_snapshot(facts), "the console's last read")
    info = run_plan(engine, options)
    out = io.StringIO()
    throttle = throttle_bytes_per_s or DEFAULT_THROTTLE_BYTES_PER_S
    report = build_report(engine, info["setup"], options, DEFAULT_CONCURRENCY, throttle, out)
    targets: dict[TopicPartition, list[int]] = {}
    basis: dict[TopicPartition, list[int]] = {}
    moves = []
    for c in engine.changes():
        tp = (c.topic, c.partition)
        targets[tp], basis[tp] = list(c.new), list(c.old)
        pf = facts.topics.get(c.topic, {}).get(c.partition)
        moves.append({"topic": c.topic, "partition": c.partition, "from": list(c.old), "to": list(c.new),
                      "adding": list(c.added), "removing": [b for b in c.old if b not in c.new],
                      "bytes": c.size_bytes * len(c.added), "leader": pf.leader if pf else -1,
                      "preferred_after": c.new[0] if c.new else -1})
    leading: dict[int, int] = {}
    for parts in facts.topics.values():
        for pf in parts.values():
            if pf.leader >= 0:
                leading[pf.leader] = leading.get(pf.leader, 0) + 1
    per_broker = [{"id": int(b), "replicas": v["replicas"], "leaders": v["leaders"], "bytes": v["bytes"],
                   "leading_now": leading.get(int(b), 0), "in_bytes": v["in_bytes"]}
                  for b, v in sorted(report["per_broker"].items(), key=lambda kv: int(kv[0]))]
    plan_id = secrets.token_hex(8)
    view = {
        "id": plan_id, "goal": goal.value, "brokers": list(brokers), "created_at": facts.taken_at,
        "in_flight": len(facts.ongoing or {}),
        "summary": {k: report[k] for k in ("partitions", "replica_moves", "partitions_moved", "bytes_moved",
                                           "leader_changes")}
        | {"balancedness": report["balancedness"], "estimate_s": report["execution"]["estimated_duration_s"],
           "violations": report["violations"]},
        "per_broker": per_broker,
        "moves": moves,
    }
    return Plan(plan_id, goal.value, brokers, time.time(), targets, basis, out.getvalue(), view)


class PlanStore:
    """The last few plans, by id: the page executes and downloads exactly the plan it shows."""

    def __init__(self, kept: int = PLANS_KEPT) -> None:
        self.kept = kept
        self._plans: OrderedDict[str, Plan] = OrderedDict()

    def add(self, plan: Plan) -> None:
        self._plans[plan.id] = plan
        while len(self._plans) > self.kept:
            self._plans.popitem(last=False)

    def get(self, plan_id: str) -> Plan | None:
        return self._plans.get(plan_id)


def stale_partitions(plan: Plan, current: dict[TopicPartition, list[int]]) -> list[str]:
    """Partitions whose replicas changed since the plan was made: executing it would undo or mix with
    what happened meanwhile, so the page asks for a new plan."""
    return [f"{t}-{p}" for (t, p), before in sorted(plan.basis.items()) if current.get((t, p)) != before]


def execution_model(plan: Plan | None, started_at: float | None, facts: Facts, log: list[str],
                    elected: dict[str, Any] | None) -> dict[str, Any] | None:
    """The executed plan's state on the page: moves still in flight, done, and partitions whose
    leader is not yet their preferred one (what the election fixes)."""
    if plan is None:
        return None
    ongoing = facts.ongoing or {}
    in_flight = sorted(f"{t}-{p}" for (t, p) in plan.targets if (t, p) in ongoing)
    done = [f"{t}-{p}" for (t, p), target in sorted(plan.targets.items())
            if (t, p) not in ongoing and (pf := facts.topics.get(t, {}).get(p)) is not None
            and list(pf.replicas) == target]
    not_preferred = [f"{t}-{p}" for (t, p) in sorted(plan.targets)
                     if (pf := facts.topics.get(t, {}).get(p)) is not None and pf.replicas and pf.leader != pf.replicas[0]]
    return {"id": plan.id, "goal": plan.goal, "started_at": started_at, "partitions": len(plan.targets),
            "in_flight": in_flight, "done": len(done),
            "finished": facts.ongoing is not None and not in_flight and len(done) == len(plan.targets),
            "not_preferred": not_preferred, "log": log[-50:], "elected": elected}
