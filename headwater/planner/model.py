"""Plain data shared by the planner stages: brokers, the request, and the per-bucket context.

Partitions never become Python objects here. They travel as columnar frames (pandas inside a task,
Spark DataFrames across the cluster) with the replica list spread over fixed-width integer columns
``o0..oK`` (the snapshot) and ``r0..rK`` (the plan), ``-1`` padding the unused slots. Brokers are few
(thousands at most), so they are ordinary dataclasses and numpy arrays indexed by broker position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from headwater.planner.errors import PlannerError

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]

NO_BROKER = -1
# Cruise Control's default disk capacity threshold: a broker above 80% of its disk is a hard-goal violation.
DEFAULT_DISK_THRESHOLD = 0.8
# Cruise Control's default distribution band: a broker within 1.10 x the mean is balanced.
DEFAULT_BALANCE_BAND = 1.10
# Partitions per Spark bucket. Fixed (not derived from the core count) so the plan is the same on any master.
DEFAULT_PARTITIONS_PER_BUCKET = 50_000


class Goal(StrEnum):
    REBALANCE = "rebalance"
    ADD_BROKERS = "add-brokers"
    REMOVE_BROKERS = "remove-brokers"
    FIX_DEAD = "fix-dead"
    REPLICATION_FACTOR = "replication-factor"
    LEADERS = "leaders"


@dataclass(frozen=True)
class Broker:
    id: int
    rack: str | None
    capacity_bytes: int | None = None
    alive: bool = True
    # KIP-1066: every log dir cordoned (cordoned.log.dirs). The planner drains it and never targets it.
    cordoned: bool = False


@dataclass(frozen=True)
class PlanOptions:
    goal: Goal = Goal.REBALANCE
    # add-brokers: the only destinations of balancing moves. remove-brokers: drained to nothing.
    brokers: tuple[int, ...] = ()
    # Brokers declared dead on top of those the snapshot marks dead.
    dead_brokers: tuple[int, ...] = ()
    replication_factor: int | None = None
    rf_topics: str | None = None  # regex; None means every topic
    exclude_topics: str | None = None  # regex
    exclude_brokers: tuple[int, ...] = ()  # receive no replicas and no leadership
    disk_threshold: float = DEFAULT_DISK_THRESHOLD
    balance_band: float = DEFAULT_BALANCE_BAND
    balance_bytes: bool = True  # allow count-neutral swaps when disk bytes leave the band
    partitions_per_bucket: int = DEFAULT_PARTITIONS_PER_BUCKET
    max_rounds: int = 3

    def removed(self) -> tuple[int, ...]:
        return self.brokers if self.goal is Goal.REMOVE_BROKERS else ()

    def added(self) -> tuple[int, ...]:
        return self.brokers if self.goal is Goal.ADD_BROKERS else ()


def compile_regex(pattern: str | None) -> re.Pattern[str] | None:
    return re.compile(pattern) if pattern else None


@dataclass(frozen=True)
class BrokerTable:
    """Brokers in ascending id order; every per-broker array below is indexed the same way."""

    brokers: tuple[Broker, ...]
    ids: IntArray = field(repr=False)
    rack_index: IntArray = field(repr=False)
    rack_names: tuple[str, ...] = ()

    @staticmethod
    def build(brokers: list[Broker]) -> BrokerTable:
        ordered = tuple(sorted(brokers, key=lambda b: b.id))
        ids = np.array([b.id for b in ordered], dtype=np.int64)
        racked = [b.rack is not None for b in ordered]
        if any(racked) and not all(racked):
            missing = [b.id for b in ordered if b.rack is None][:5]
            raise PlannerError(
                f"not all brokers have a rack (e.g. broker(s) {missing} have none); "
                "give every broker a rack or none of them"
            )
        if all(racked) and ordered:
            names = tuple(sorted({b.rack for b in ordered if b.rack is not None}))
            lookup = {n: i for i, n in enumerate(names)}
            rack_index = np.array([lookup[b.rack] for b in ordered if b.rack is not None], dtype=np.int64)
        else:
            # No rack information: every broker is its own failure domain, as Kafka does.
            names = tuple(f"broker-{b.id}" for b in ordered)
            rack_index = np.arange(len(ordered), dtype=np.int64)
        return BrokerTable(ordered, ids, rack_index, names)

    def __len__(self) -> int:
        return len(self.brokers)

    def index_of(self, broker_ids: npt.ArrayLike) -> IntArray:
        """Broker ids to positions; -1 stays -1. Callers have validated that every id is known."""
        arr = np.asarray(broker_ids, dtype=np.int64)
        pos = np.searchsorted(self.ids, np.where(arr < 0, 0, arr))
        pos = np.clip(pos, 0, max(len(self.ids) - 1, 0))
        return np.where(arr < 0, NO_BROKER, pos).astype(np.int64)

    def alive(self) -> BoolArray:
        return np.array([b.alive for b in self.brokers], dtype=bool)

    def cordoned(self) -> BoolArray:
        return np.array([b.cordoned for b in self.brokers], dtype=bool)

    def capacity_bytes(self) -> FloatArray:
        return np.array(
            [float(b.capacity_bytes) if b.capacity_bytes is not None else np.inf for b in self.brokers],
            dtype=np.float64,
        )


def max_per_rack(rf: int, racks: int) -> int:
    """Most replicas of one partition allowed in one rack: 1 while racks >= RF, else as even as possible."""
    if racks <= 0:
        return rf
    return -(-rf // racks)
