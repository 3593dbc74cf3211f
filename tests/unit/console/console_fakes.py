"""Stand-ins for the console's unit tests: a poll's answers, a poller (``app.Source``) whose plans
are real ones made on those answers, and a Spark runner that plans in-process."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from headwater.console.model import BrokerFacts, Facts, LogDirFacts, PartitionFacts
from headwater.console.plan import Plan, PlanStore, make_plan, parse_goal
from headwater.planner.engine import Engine, LocalEngine
from headwater.planner.snapshot import Snapshot

MB = 1_000_000


def cluster_facts(brokers: tuple[int, ...] = (1, 2, 3, 4)) -> Facts:
    """Six partitions, RF 2, all on brokers 1-3; broker 4 is registered and empty."""
    f = Facts(taken_at=100.0, controller_id=1)
    f.brokers = {b: BrokerFacts(b, "h", 9000 + b, None) for b in brokers}
    placements = [(1, 2), (2, 3), (3, 1), (1, 2), (2, 3), (3, 1)]
    f.topics = {"t": {p: PartitionFacts(r[0], r, r) for p, r in enumerate(placements)}}
    sizes: dict[int, dict[tuple[str, int], int]] = {b: {} for b in brokers}
    for p, r in enumerate(placements):
        for b in r:
            if b in sizes:  # a dead broker answers no DescribeLogDirs
                sizes[b][("t", p)] = MB
    f.log_dirs = {b: [LogDirFacts("/d", None, s)] for b, s in sizes.items()}
    f.ongoing = {}
    return f


class FakeSpark:
    """``SparkRunner`` without a JVM: the in-process engine, counting the plans it was asked for."""

    master = "local[fake]"

    def __init__(self) -> None:
        self.plans = 0

    @contextmanager
    def engine(self, snapshot: Snapshot, timings: dict[str, float]) -> Iterator[Engine]:
        self.plans += 1
        timings["spark_start_s"] = 0.0
        yield LocalEngine(snapshot, "fake spark")


class FakeSource:
    """The poller as the application sees it: a fixed snapshot, writes recorded, and plans made by
    the console's own ``make_plan`` on ``cluster_facts()``."""

    def __init__(self, read_only: bool = False) -> None:
        self.snapshot: dict[str, Any] = {"taken_at": 1.0, "errors": [], "brokers": [], "topics": []}
        self.version = 1
        self.read_only = read_only
        self.cancelled: list[list[tuple[str, int]] | None] = []
        self.throttles: list[int | None] = []
        self.healing: list[bool] = []
        self.plans = PlanStore()
        self.spark = FakeSpark()
        self.engines: list[object] = []  # the engine each plan request named
        self.executed: list[tuple[str, int]] = []
        self.elected: list[str] = []

    def cancel(self, partitions: list[tuple[str, int]] | None) -> dict[str, str | None]:
        self.cancelled.append(partitions)
        return {f"{t}-{p}": None for t, p in partitions or [("t", 0)]}

    def set_throttle(self, rate: int | None) -> list[str]:
        self.throttles.append(rate)
        return [f"throttle {rate}"]

    def set_self_healing(self, enable: bool) -> list[str]:
        self.healing.append(enable)
        return [f"self.healing.enable={str(enable).lower()}"]

    def make_plan(self, goal: object, brokers: object, throttle: float | None = None,
                  engine: object = "auto") -> dict[str, Any]:
        self.engines.append(engine)
        g, ids = parse_goal(goal, brokers)
        plan = make_plan(cluster_facts(), g, ids, throttle, engine, self.spark)
        self.plans.add(plan)
        return plan.view

    def execute_plan(self, plan: Plan, throttle: int) -> list[str]:
        self.executed.append((plan.id, throttle))
        return ["Successfully started partition reassignments"]

    def elect_preferred(self, plan: Plan) -> list[str]:
        self.elected.append(plan.id)
        return ["Successfully completed leader election (PREFERRED)"]
