"""Moves of a replica between two log dirs of one broker (AlterReplicaLogDirs), in process: the
replica manager's answers, the copy under appends, the swap, and what a restart finds after a kill
at each point of the swap.

Expectations from Kafka 3.9: ``ReplicaManager.alterReplicaLogDirs`` (error codes, the preferred
log dir of a replica not created yet), ``LogManager.replaceCurrentWithFutureLog`` and
``UnifiedLog.logFutureDirName`` (``<topic>-<partition>.<id>-future``, the old dir renamed
``-delete``), ``LogManager.loadLog`` (future logs load as future logs and their move resumes:
``ReplicaManager.maybeAddLogDirFetchers``).
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder

from headwater.protocol.errors import ErrorCode
from headwater.replication.partition import LeaderAndIsrState
from headwater.server.replica_manager import ReplicaManager
from headwater.storage.config import LogConfig
from headwater.storage.manager import LogManager

T = TypeVar("T")
FUTURE = re.compile(r"^t-0\.[0-9a-f]{32}-future$")
DELETED = re.compile(r"^t-0\.[0-9a-f]{32}-delete$")


def batch(i: int, size: int = 100) -> bytearray:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    builder.append(0, timestamp=1000 + i, key=None, value=b"%08d" % i + b"x" * size, headers=[])
    return bytearray(builder.build())


def values(replicas: ReplicaManager) -> list[int]:
    """The number each record of t-0 was produced with, in offset order."""
    hosted = replicas.hosted("t", 0)
    assert hosted is not None
    plog = hosted.plog
    data = plog.read(plog.log_start_offset, 1 << 30).read()
    records = MemoryRecords(data)
    out = []
    while (batch := records.next_batch()) is not None:
        out += [int(r.value[:8]) for r in batch]
    return out


class Broker:
    """A standalone broker's logs and replica manager over two log dirs."""

    def __init__(self, root: Path, config: LogConfig | None = None) -> None:
        self.dirs = [root / "d0", root / "d1"]
        self.logs = LogManager(self.dirs, config or LogConfig(), clock_ms=lambda: 1_000_000)
        self.logs.load()
        self.replicas = ReplicaManager(1, self.logs, replica_lag_time_max_ms=30_000, replica_fetch_backoff_ms=1000,
                                       wake=lambda _t, _p: None, broker_address=lambda _b: None,
                                       controller_id=lambda: 9, broker_epoch=lambda: 1)

    def lead(self, epoch: int = 0) -> None:
        assert self.replicas.become("t", 0, LeaderAndIsrState(1, epoch, (1,), epoch, (1,)), topic_id=uuid.UUID(int=1),
                                    config=LogConfig(), min_insync_replicas=1,
                                    max_message_bytes=1 << 20) == ErrorCode.NONE

    def produce(self, i: int, size: int = 100) -> None:
        hosted = self.replicas.leader("t", 0)
        self.replicas.append(hosted, batch(i, size), 1, 30_000)

    def dir_of(self) -> Path:
        hosted = self.replicas.hosted("t", 0)
        assert hosted is not None
        return self.logs.log_dir_of(hosted.plog)


def run(scenario: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(scenario())


async def until(cond: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_a_move_under_appends_loses_nothing_and_swaps_the_dirs(tmp_path: Path) -> None:
    async def scenario() -> None:
        b = Broker(tmp_path)
        b.lead()
        start = b.dir_of()
        target = next(d for d in b.dirs if d != start)
        for i in range(300):
            b.produce(i, 10_000)  # 3 MB: several slices
        assert b.replicas.alter_log_dir("t", 0, str(target)) == ErrorCode.NONE
        assert [p.name for p in target.iterdir() if FUTURE.match(p.name)], list(target.iterdir())
        i = 300
        while b.dir_of() != target:  # the producer keeps appending while the copy runs
            b.produce(i)
            i += 1
            await asyncio.sleep(0.001)
        assert values(b.replicas) == list(range(i))
        assert (target / "t-0").is_dir() and not (start / "t-0").exists()
        assert [p for p in start.iterdir() if DELETED.match(p.name)], "the old copy waits for deletion"
        assert b.logs.get_future("t", 0) is None and not b.replicas.mover.moving
        b.produce(i)  # the new current log takes appends
        assert values(b.replicas) == list(range(i + 1))
        await b.replicas.stop()
        b.logs.close()

    run(scenario)


def test_error_codes_and_the_preferred_dir_of_a_replica_not_here_yet(tmp_path: Path) -> None:
    async def scenario() -> None:
        b = Broker(tmp_path)
        assert b.replicas.alter_log_dir("t", 0, str(tmp_path / "elsewhere")) == ErrorCode.LOG_DIR_NOT_FOUND
        # Not hosted: REPLICA_NOT_AVAILABLE, and the replica is created in that dir when it comes.
        assert b.replicas.alter_log_dir("t", 0, str(b.dirs[1])) == ErrorCode.REPLICA_NOT_AVAILABLE
        b.lead()
        assert b.dir_of() == b.dirs[1]
        # Already there: nothing to move.
        assert b.replicas.alter_log_dir("t", 0, str(b.dirs[1])) == ErrorCode.NONE
        assert b.logs.get_future("t", 0) is None
        # A long topic name would make a future dir name over 255 bytes (Kafka's KAFKA-4893 check).
        assert b.replicas.alter_log_dir("t" * 249, 0, str(b.dirs[0])) == ErrorCode.INVALID_TOPIC_EXCEPTION
        b.replicas.drop_offline(b.logs.take_offline(b.dirs[0]))
        assert b.replicas.alter_log_dir("t", 0, str(b.dirs[0])) == ErrorCode.KAFKA_STORAGE_ERROR
        await b.replicas.stop()

    run(scenario)


def test_a_new_destination_drops_the_move_under_way(tmp_path: Path) -> None:
    async def scenario() -> None:
        b = Broker(tmp_path)
        b.lead()
        start = b.dir_of()
        target = next(d for d in b.dirs if d != start)
        b.replicas.set_alter_log_dirs_rate(1)  # a crawl: the move stays under way
        for i in range(10):
            b.produce(i)
        assert b.replicas.alter_log_dir("t", 0, str(target)) == ErrorCode.NONE
        assert b.logs.get_future("t", 0) is not None
        # Back to the current dir: the future log goes (renamed for deletion), the replica stays.
        assert b.replicas.alter_log_dir("t", 0, str(start)) == ErrorCode.NONE
        assert b.logs.get_future("t", 0) is None and not b.replicas.mover.moving
        assert not [p for p in target.iterdir() if FUTURE.match(p.name)]
        assert b.dir_of() == start and values(b.replicas) == list(range(10))
        await b.replicas.stop()

    run(scenario)


def test_a_restart_resumes_a_move_from_its_future_log(tmp_path: Path) -> None:
    async def first() -> Path:
        b = Broker(tmp_path)
        b.lead()
        target = next(d for d in b.dirs if d != b.dir_of())
        for i in range(50):
            b.produce(i, 1000)
        b.replicas.set_alter_log_dirs_rate(20_000)  # about one slice of 20 kB a second
        assert b.replicas.alter_log_dir("t", 0, str(target)) == ErrorCode.NONE
        future = b.logs.get_future("t", 0)
        assert future is not None
        await until(lambda: future.log_end_offset > 0)
        assert future.log_end_offset < 50
        await b.replicas.stop()  # no close: the files as a kill -9 leaves them
        return target

    target = run(first)

    async def second() -> None:
        b = Broker(tmp_path)
        future = b.logs.get_future("t", 0)
        assert future is not None and b.logs.future_dir_of(future) == target
        b.lead()  # the LeaderAndIsr of the restart resumes the move
        await until(lambda: b.dir_of() == target)
        assert values(b.replicas) == list(range(50))
        await b.replicas.stop()
        b.logs.close()

    run(second)


def test_a_kill_between_the_two_renames_of_the_swap_keeps_the_future_log(tmp_path: Path) -> None:
    """The current dir was renamed for deletion, the future not yet renamed: a restart promotes the
    future (complete when the swap began) and removes the old copy."""
    async def first() -> Path:
        b = Broker(tmp_path)
        b.lead()
        start = b.dir_of()
        target = next(d for d in b.dirs if d != start)
        for i in range(20):
            b.produce(i)
        b.replicas.set_alter_log_dirs_rate(1)
        assert b.replicas.alter_log_dir("t", 0, str(target)) == ErrorCode.NONE
        future = b.logs.get_future("t", 0)
        assert future is not None
        await b.replicas.stop()
        hosted = b.replicas.hosted("t", 0)
        assert hosted is not None
        future.append_as_follower(hosted.plog.read(future.log_end_offset, 1 << 20).read())  # caught up
        assert future.log_end_offset == hosted.plog.log_end_offset
        unique_id = future.directory.name.split(".")[-1].removesuffix("-future")
        (start / "t-0").rename(start / f"t-0.{unique_id}-delete")  # the swap's first rename, then the kill
        return target

    target = run(first)
    logs = LogManager([tmp_path / "d0", tmp_path / "d1"], LogConfig(), clock_ms=lambda: 1_000_000)
    logs.load()
    plog = logs.get("t", 0)
    assert plog is not None and logs.log_dir_of(plog) == target and logs.get_future("t", 0) is None
    assert plog.log_end_offset == 20 and plog.directory == target / "t-0"
    assert not [p for d in logs.log_dirs for p in d.iterdir() if DELETED.match(p.name) or FUTURE.match(p.name)]
    logs.close()


def test_a_kill_before_the_swap_keeps_both_logs_apart(tmp_path: Path) -> None:
    """A ``-delete`` dir of another id (an ordinary delete) does not make a future log current."""
    async def first() -> None:
        b = Broker(tmp_path)
        b.lead()
        start = b.dir_of()
        for i in range(5):
            b.produce(i)
        b.replicas.set_alter_log_dirs_rate(1)
        assert b.replicas.alter_log_dir("t", 0, str(next(d for d in b.dirs if d != start))) == ErrorCode.NONE
        (start / f"t-0.{uuid.uuid4().hex}-delete").mkdir()
        await b.replicas.stop()

    run(first)
    logs = LogManager([tmp_path / "d0", tmp_path / "d1"], LogConfig(), clock_ms=lambda: 1_000_000)
    logs.load()
    current, future = logs.get("t", 0), logs.get_future("t", 0)
    assert current is not None and future is not None
    assert logs.log_dir_of(current) != logs.future_dir_of(future)
    logs.close()


def test_deleting_the_replica_deletes_its_future_log(tmp_path: Path) -> None:
    async def scenario() -> None:
        b = Broker(tmp_path)
        b.lead()
        target = next(d for d in b.dirs if d != b.dir_of())
        b.produce(0)
        b.replicas.set_alter_log_dirs_rate(1)
        assert b.replicas.alter_log_dir("t", 0, str(target)) == ErrorCode.NONE
        assert b.replicas.stop_replica("t", 0, delete=True) == ErrorCode.NONE
        assert b.logs.get_future("t", 0) is None and b.logs.get("t", 0) is None
        assert not [p for p in target.iterdir() if FUTURE.match(p.name)]
        await b.replicas.stop()

    run(scenario)


def test_a_current_log_truncated_and_rewritten_mid_move_is_followed_by_epochs(tmp_path: Path) -> None:
    """What a follower's current log goes through at a leader change: records cut and written again in
    a newer epoch while they were being copied. The future log drops its copies of them (Kafka's
    ReplicaAlterLogDirsThread.truncate, by leader epochs) and ends up the current log's twin."""
    async def scenario() -> None:
        b = Broker(tmp_path)
        b.lead(epoch=0)
        target = next(d for d in b.dirs if d != b.dir_of())
        for i in range(20):
            b.produce(i, 2000)
        b.replicas.set_alter_log_dirs_rate(10_000)  # about five batches a second
        assert b.replicas.alter_log_dir("t", 0, str(target)) == ErrorCode.NONE
        future = b.logs.get_future("t", 0)
        assert future is not None
        await until(lambda: future.log_end_offset >= 10)
        hosted = b.replicas.hosted("t", 0)
        assert hosted is not None
        hosted.plog.truncate_to(5)
        b.lead(epoch=1)
        for i in range(100, 110):
            b.produce(i, 2000)
        b.replicas.set_alter_log_dirs_rate(None)
        await until(lambda: b.dir_of() == target)
        assert values(b.replicas) == [*range(5), *range(100, 110)]
        hosted = b.replicas.hosted("t", 0)
        assert hosted is not None and hosted.plog.epochs.entries == [(0, 0), (1, 5)]
        await b.replicas.stop()
        b.logs.close()

    run(scenario)
