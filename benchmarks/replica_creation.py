"""What creating a replica costs a broker: the work a LeaderAndIsr does per new partition.

A broker applies LeaderAndIsr on its event loop, so creating 10,000 replicas at once (a topic
created, a reassignment's targets) holds everything else up for as long as that takes. Measured
in one process, on the filesystem of ``--dir`` (default: the system temp dir), each step over
``--replicas`` partitions:

* ``floor_us``: ``mkdir`` of a partition directory plus one empty file in it, the least any
  durable log needs; the yardstick for the machine's filesystem, taken in the same run.
* ``log_us``: ``LogManager.get_or_create``, the storage side alone.
* ``leader_us`` / ``follower_us``: ``ReplicaManager.become`` of a new partition as leader, and as
  a follower (whose fetcher is not started: no other broker runs).
* ``restart_us``: closing the manager and loading every log again (a clean restart).
* ``idle_close_us``: a clean close of logs that were loaded and closed before with nothing
  written since: an idle broker's shutdown.
* ``leader_over_floor``: ``leader_us / floor_us``, the figure to compare between runs.
* ``files_per_replica``: files in a partition directory after the leader's become.

The steps run in ``--rounds`` interleaved rounds (see ``Steps``). Prints one JSON line.

    .venv/bin/python benchmarks/replica_creation.py [--replicas 2000] [--rounds 10] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from headwater.replication.partition import LeaderAndIsrState
from headwater.server.replica_manager import ReplicaManager
from headwater.storage.config import LogConfig
from headwater.storage.manager import LogManager

TOPIC = "bench"


def _per_replica_us(seconds: float, count: int) -> float:
    return round(seconds / count * 1e6, 1)


def _manager(root: Path) -> LogManager:
    logs = LogManager([root], LogConfig(), clock_ms=lambda: int(time.time() * 1000))
    logs.load()
    return logs


def _replica_manager(logs: LogManager) -> ReplicaManager:
    return ReplicaManager(
        1, logs, replica_lag_time_max_ms=30_000, replica_fetch_backoff_ms=1000,
        wake=lambda _t, _p: None, broker_address=lambda _b: None, controller_id=lambda: 9,
        broker_epoch=lambda: 1,
    )


class Steps:
    """The four ways of creating partitions, each in its own directory, run in interleaved rounds:
    this machine's file creation cost drifts by several times within a minute (writeback, the
    journal), and every step must see the same drift for the ratios to mean anything."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.floor_root = base / "floor"
        self.floor_root.mkdir()
        self.storage = _manager(base / "storage")
        self.leaders = _replica_manager(_manager(base / "leader"))
        self.followers = _replica_manager(_manager(base / "follower"))
        self.config = LogConfig()
        self.topic_id = uuid.uuid4()
        self.seconds = {"floor": 0.0, "log": 0.0, "leader": 0.0, "follower": 0.0}

    def round(self, partitions: range) -> None:
        start = time.perf_counter()
        for p in partitions:
            d = self.floor_root / f"{TOPIC}-{p}"
            d.mkdir()
            os.close(os.open(d / "00000000000000000000.log", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644))
        self.seconds["floor"] += time.perf_counter() - start
        start = time.perf_counter()
        for p in partitions:
            self.storage.get_or_create(TOPIC, p)
        self.seconds["log"] += time.perf_counter() - start
        for kind, replicas, leader in (("leader", self.leaders, 1), ("follower", self.followers, 2)):
            state = LeaderAndIsrState(leader, 0, (1, 2), 0, (1, 2), is_new=True)
            start = time.perf_counter()
            for p in partitions:
                replicas.become(TOPIC, p, state, topic_id=self.topic_id, config=self.config,
                                min_insync_replicas=1, max_message_bytes=1 << 20)
            self.seconds[kind] += time.perf_counter() - start

    def restart_leaders(self) -> tuple[float, float, int]:
        """Close the leaders' logs cleanly and time loading them again; then time the close of an
        idle broker (a load and close later, nothing written); also count a partition's files."""
        files = len(os.listdir(self.base / "leader" / f"{TOPIC}-0"))
        self.leaders.logs.close()
        start = time.perf_counter()
        reloaded = _manager(self.base / "leader")
        load = time.perf_counter() - start
        reloaded.close()  # writes what the load left to the next flush (dropped empty epochs)
        reloaded = _manager(self.base / "leader")
        start = time.perf_counter()
        reloaded.close()
        close = time.perf_counter() - start
        self.storage.close()
        self.followers.logs.close()
        return load, close, files


async def run(base: Path, count: int, rounds: int) -> dict[str, float | int]:
    steps = Steps(base)
    size = max(1, count // rounds)
    for first in range(0, count, size):
        steps.round(range(first, min(first + size, count)))
    restart_s, close_s, files = steps.restart_leaders()
    sec = steps.seconds
    return {
        "floor_us": _per_replica_us(sec["floor"], count),
        "log_us": _per_replica_us(sec["log"], count),
        "leader_us": _per_replica_us(sec["leader"], count),
        "follower_us": _per_replica_us(sec["follower"], count),
        "restart_us": _per_replica_us(restart_s, count),
        "idle_close_us": _per_replica_us(close_s, count),
        "leader_over_floor": round(sec["leader"] / sec["floor"], 2),
        "files_per_replica": files,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds (see Steps)")
    parser.add_argument("--dir", default=None, help="where to create the partitions (default: temp dir)")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="hw-replica-bench-", dir=args.dir))
    try:
        figures = asyncio.run(run(base, args.replicas, args.rounds))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(json.dumps({"benchmark": "replica_creation", "replicas": args.replicas, **figures}))

if __name__ == "__main__":
    main()
