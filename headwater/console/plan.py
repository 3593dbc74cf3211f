"""The Plan page's planning: the planner's in-process engine (``headwater plan --engine local``) or
its Spark engine (``--engine spark``) run on what the console's last poll read, so planning asks the
cluster nothing more.

``facts_snapshot`` turns a poll's answers into the planner's snapshot (through the planner's own
``snapshot_from_metadata``, so the console and ``headwater plan --bootstrap-server`` read a cluster
the same way), and ``make_plan`` runs the same pipeline as ``headwater plan`` (``run_plan``, then
``build_report`` writing Kafka's JSON). ``SparkPlanner`` owns the console's one SparkSession;
pyspark is imported only when a plan first needs it, so the console starts without it.
"""

from __future__ import annotations

import io
import secrets
import tempfile
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from headwater.console.model import Facts, TopicPartition, replica_sizes
from headwater.planner.cli import DEFAULT_CONCURRENCY, DEFAULT_THROTTLE_BYTES_PER_S
from headwater.planner.engine import Engine, LocalEngine, build_report, run_plan
from headwater.planner.errors import PlannerError
from headwater.planner.live import snapshot_from_metadata
from headwater.planner.model import Goal, PlanOptions
from headwater.planner.snapshot import Snapshot, write_snapshot

# The goals the page offers; replication-factor changes stay with ``headwater plan``.
GOALS = (Goal.REBALANCE, Goal.ADD_BROKERS, Goal.REMOVE_BROKERS, Goal.FIX_DEAD, Goal.LEADERS)
PLANS_KEPT = 20  # plans remembered for download and execute (a page holds the id of its own)
ENGINES = ("auto", "local", "spark")
# "auto" plans on Spark above this many replicas. Around here the in-process engine takes as long as
# Spark's start-up (about 6 s for 200,000 replicas on 2 cores), and beyond it the whole cluster
# would be planned inside the console's own process, beside the poller and the event streams.
SPARK_ABOVE_REPLICAS = 200_000
DEFAULT_SPARK_MASTER = "local[2]"


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


class SparkRunner(Protocol):
    """What ``make_plan`` needs of Spark (``SparkPlanner``; a stand-in in unit tests)."""

    master: str

    def engine(self, snapshot: Snapshot, timings: dict[str, float]) -> AbstractContextManager[Engine]: ...


class SparkPlanner:
    """The console's SparkSession: made by the first Spark plan (start-up takes seconds, so it
    happens in that request's worker thread, never at the console's start), reused by every later
    one, and stopped with the console. Spark plans run one at a time: they share the session's cores."""

    def __init__(self, master: str = DEFAULT_SPARK_MASTER, conf: dict[str, str] | None = None) -> None:
        self.master = master
        self.conf = dict(conf or {})
        self._run = threading.Lock()  # one Spark plan at a time
        self._state = threading.Lock()  # the session and the stopped flag; never held while Spark works
        self._spark: Any = None
        self._stopped = False

    @property
    def started(self) -> bool:
        return self._spark is not None

    def _session(self, timings: dict[str, float]) -> Any:
        with self._state:
            if self._stopped:
                raise PlannerError("the console is stopping")
            if self._spark is not None:
                return self._spark
        # As ``headwater plan --engine spark`` starts it; the warning is pandas' version, not ours.
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
        from headwater.planner.spark_engine import spark_session

        t = time.perf_counter()
        spark = spark_session(self.master, self.conf)
        timings["spark_start_s"] = round(time.perf_counter() - t, 3)
        with self._state:
            if not self._stopped:
                self._spark = spark
                return spark
        spark.stop()  # the console stopped while Spark was starting: nobody else will stop it
        raise PlannerError("the console is stopping")

    @contextmanager
    def engine(self, snapshot: Snapshot, timings: dict[str, float]) -> Iterator[Engine]:
        """A Spark engine on ``snapshot``, through a Parquet file as ``headwater plan
        --bootstrap-server --engine spark`` hands a live cluster to Spark."""
        from headwater.planner.spark_engine import SparkEngine

        with self._run:
            spark = self._session(timings)
            with tempfile.TemporaryDirectory(prefix="headwater-console-plan-") as tmp:
                source = str(Path(tmp) / "snapshot.parquet")
                write_snapshot(source, snapshot.brokers, snapshot.partitions)
                yield SparkEngine.from_file(spark, source)

    def stop(self) -> None:
        with self._state:
            self._stopped = True
            spark, self._spark = self._spark, None
        if spark is not None:
            spark.stop()


def replica_count(facts: Facts) -> int:
    return sum(len(pf.replicas) for parts in facts.topics.values() for pf in parts.values())


def choose_engine(requested: object, replicas: int, spark_above: int = SPARK_ABOVE_REPLICAS) -> tuple[str, str]:
    """The engine a request names ("auto" picks by the cluster's size) and why it was chosen."""
    if requested not in ENGINES:
        raise PlannerError(f"unknown engine {requested!r}: expected one of {', '.join(ENGINES)}")
    if requested != "auto":
        return str(requested), "chosen on the page"
    if replicas > spark_above:
        return "spark", f"auto: {replicas:,} replicas, more than {spark_above:,}"
    return "local", f"auto: {replicas:,} replicas, not more than {spark_above:,}"


@contextmanager
def _engine(name: str, snapshot: Snapshot, spark: SparkRunner | None, timings: dict[str, float]) -> Iterator[Engine]:
    if name == "local":
        yield LocalEngine(snapshot, "the console's last read")
        return
    if spark is None:
        raise PlannerError("this console has no Spark engine")
    with spark.engine(snapshot, timings) as engine:
        yield engine


def make_plan(facts: Facts, goal: Goal, brokers: tuple[int, ...], throttle_bytes_per_s: float | None = None,
              engine: object = "auto", spark: SparkRunner | None = None,
              spark_above: int = SPARK_ABOVE_REPLICAS) -> Plan:
    """Plan as ``headwater plan --engine local`` (or ``--engine spark``) does, and shape what the
    page shows: the engine that ran, the balance per broker before and after, the moves, the
    summary of the planner's report."""
    if not facts.topics and not facts.brokers:
        raise PlannerError("the console has not read the cluster yet")
    known = set(facts.brokers) | {b for parts in facts.topics.values() for pf in parts.values() for b in pf.replicas}
    unknown = sorted(set(brokers) - known)
    if unknown:
        raise PlannerError(f"unknown broker(s) {','.join(map(str, unknown))}")
    replicas = replica_count(facts)
    engine_name, why = choose_engine(engine, replicas, spark_above)
    options = PlanOptions(goal=goal, brokers=brokers)
    out = io.StringIO()
    throttle = throttle_bytes_per_s or DEFAULT_THROTTLE_BYTES_PER_S
    timings: dict[str, float] = {}
    with _engine(engine_name, facts_snapshot(facts), spark, timings) as planner:
        t = time.perf_counter()
        info = run_plan(planner, options)
        report = build_report(planner, info["setup"], options, DEFAULT_CONCURRENCY, throttle, out)
        changes = list(planner.changes())  # inside: Spark streams them from the session
        timings["plan_s"] = round(time.perf_counter() - t, 3)
    targets: dict[TopicPartition, list[int]] = {}
    basis: dict[TopicPartition, list[int]] = {}
    moves = []
    for c in changes:
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
        "engine": {"name": engine_name, "requested": str(engine), "why": why, "replicas": replicas,
                   "master": spark.master if engine_name == "spark" and spark is not None else None,
                   "timings_s": timings},
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
