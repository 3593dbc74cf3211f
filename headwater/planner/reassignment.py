"""Kafka's reassignment JSON (``kafka-reassign-partitions.sh`` format) and the batch schedule.

Output follows Kafka's ``formatAsReassignmentJson``: compact, keys in the order version, partitions,
then topic, partition, replicas, log_dirs; partitions sorted by topic then partition; ``log_dirs``
always present with ``"any"``. It is written as a stream so the driver never holds the whole plan.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from headwater.planner.errors import PlannerError


@dataclass(frozen=True)
class Change:
    topic: str
    partition: int
    old: tuple[int, ...]
    new: tuple[int, ...]
    size_bytes: int
    leader: int  # current leader (the sender of new replicas' data); -1 if unknown

    @property
    def added(self) -> tuple[int, ...]:
        return tuple(b for b in self.new if b not in self.old)

    @property
    def removed(self) -> tuple[int, ...]:
        return tuple(b for b in self.old if b not in self.new)


def format_entry(topic: str, partition: int, replicas: tuple[int, ...] | list[int]) -> str:
    reps = ",".join(str(int(b)) for b in replicas)
    dirs = ",".join('"any"' for _ in replicas)
    return f'{{"topic":{json.dumps(topic)},"partition":{int(partition)},"replicas":[{reps}],"log_dirs":[{dirs}]}}'


class ReassignmentWriter:
    """Streams ``{"version":1,"partitions":[...]}``; entries must arrive sorted by (topic, partition)."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.count = 0
        self.out.write('{"version":1,"partitions":[')

    def add(self, change: Change) -> None:
        if self.count:
            self.out.write(",")
        self.out.write(format_entry(change.topic, change.partition, change.new))
        self.count += 1

    def close(self) -> None:
        self.out.write("]}")


def read_reassignment(path: str | Path) -> dict[tuple[str, int], list[int]]:
    """Parse a reassignment file with Kafka's rules; returns (topic, partition) -> replicas."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PlannerError(f"plan {p} does not exist") from None
    except json.JSONDecodeError as exc:
        raise PlannerError(f"plan {p}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise PlannerError(f'plan {p}: expected {{"version":1,"partitions":[...]}}')
    version = doc.get("version", 1)
    if version != 1:
        raise PlannerError(f"plan {p}: Not supported version field value {version}")
    out: dict[tuple[str, int], list[int]] = {}
    for i, entry in enumerate(doc["partitions"]):
        if not isinstance(entry, dict):
            raise PlannerError(f"plan {p}: partitions[{i}] is not an object")
        topic, part, reps = entry.get("topic"), entry.get("partition"), entry.get("replicas")
        if not isinstance(topic, str) or not isinstance(part, int) or not isinstance(reps, list):
            raise PlannerError(f"plan {p}: partitions[{i}] needs topic, partition and replicas")
        if not reps:
            raise PlannerError(f"plan {p}: Partition replica list cannot be empty ({topic}-{part})")
        if not all(isinstance(b, int) and not isinstance(b, bool) for b in reps):
            raise PlannerError(f"plan {p}: {topic}-{part} has a non-integer replica")
        if len(set(reps)) != len(reps):
            raise PlannerError(
                f"plan {p}: Partition replica lists may not contain duplicate entries: {topic}-{part}"
            )
        dirs = entry.get("log_dirs")
        if dirs is not None and (not isinstance(dirs, list) or len(dirs) != len(reps)):
            raise PlannerError(
                f"plan {p}: Size of replicas list {reps} is different from size of log dirs list {dirs} "
                f"for partition {topic}-{part}"
            )
        key = (topic, part)
        if key in out:
            raise PlannerError(
                f"plan {p}: Partition reassignment contains duplicate topic partitions: {topic}-{part}"
            )
        out[key] = [int(b) for b in reps]
    return out


@dataclass
class _Batch:
    moves: int = 0
    bytes: float = 0.0
    inbound: dict[int, float] = field(default_factory=dict)
    outbound: dict[int, float] = field(default_factory=dict)


class Scheduler:
    """Orders data moves into batches: at most ``concurrency`` moves per broker per batch.

    A move involves its new brokers (receivers) and the leader (sender). Each move goes into the
    earliest batch where all of them still have a slot (list scheduling), so the schedule follows the
    order moves are fed in. A batch lasts as long as its busiest broker needs at the throttle.
    """

    def __init__(self, concurrency: int, throttle_bytes_per_s: float) -> None:
        if concurrency < 1:
            raise PlannerError("concurrency must be at least 1")
        if throttle_bytes_per_s <= 0:
            raise PlannerError("throttle must be positive")
        self.k = concurrency
        self.throttle = throttle_bytes_per_s
        self.batches: list[_Batch] = []
        self.slots: dict[int, list[int]] = {}
        self.first_open: dict[int, int] = {}
        self.leader_only = 0

    def add(self, change: Change) -> int:
        """Schedule one partition's change; returns its batch number (0-based), -1 for a reorder."""
        added = change.added
        if not added:
            self.leader_only += 1
            return -1
        sender = change.leader if change.leader >= 0 else (change.old[0] if change.old else -1)
        involved = sorted({*added, *([sender] if sender >= 0 else [])})
        j = max(self.first_open.get(b, 0) for b in involved)
        while not all(self._used(b, j) < self.k for b in involved):
            j += 1
        while len(self.batches) <= j:
            self.batches.append(_Batch())
        batch = self.batches[j]
        batch.moves += len(added)
        batch.bytes += change.size_bytes * len(added)
        for b in involved:
            used = self.slots.setdefault(b, [])
            while len(used) <= j:
                used.append(0)
            used[j] += 1
            fo = self.first_open.get(b, 0)
            while fo < len(used) and used[fo] >= self.k:
                fo += 1
            self.first_open[b] = fo
        for b in added:
            batch.inbound[b] = batch.inbound.get(b, 0.0) + change.size_bytes
        if sender >= 0:
            batch.outbound[sender] = batch.outbound.get(sender, 0.0) + change.size_bytes * len(added)
        return j

    def _used(self, b: int, j: int) -> int:
        used = self.slots.get(b)
        return used[j] if used is not None and j < len(used) else 0

    def summary(self, limit: int = 50) -> dict[str, Any]:
        rows = []
        total_s = 0.0
        for i, b in enumerate(self.batches):
            busiest = max([*b.inbound.values(), *b.outbound.values(), 0.0])
            seconds = busiest / self.throttle
            total_s += seconds
            if i < limit:
                rows.append(
                    {
                        "batch": i + 1,
                        "replica_moves": b.moves,
                        "bytes": int(b.bytes),
                        "brokers": len(set(b.inbound) | set(b.outbound)),
                        "estimated_s": round(seconds, 3),
                    }
                )
        return {
            "concurrency_per_broker": self.k,
            "throttle_bytes_per_s": self.throttle,
            "batches": len(self.batches),
            "leader_only_changes": self.leader_only,
            "estimated_duration_s": round(total_s, 3),
            "schedule": rows,
            "schedule_truncated": max(0, len(self.batches) - limit),
        }


def iter_json_lines(path: str | Path) -> Iterator[dict[str, Any]]:
    with Path(path).open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)
