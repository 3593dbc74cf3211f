"""reassignment.copy.max.cpu.pressure: a replica being added pauses between its fetches while the
host's CPU pressure is over the target, and reads no pressure at all when the target is 1.0.

A follower's fetch loops run against a fake leader that answers every Fetch of ``big`` with one
batch at the offset asked for, and a fake PSI reader that reports the requested share of wall
time as waiting (Linux PSI "some", Documentation/accounting/psi.rst).
"""

from __future__ import annotations

import asyncio
import itertools
import struct
import time
import uuid
from pathlib import Path
from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder

from headwater.protocol.apis import API_SPECS, ApiKey
from headwater.protocol.errors import ErrorCode
from headwater.protocol.fetch import FetchedPartition, FetchedResponse, FetchedTopic
from headwater.protocol.strict import decode_body
from headwater.replication.copy_pacer import MAX_PAUSE_MS
from headwater.replication.partition import LeaderAndIsrState
from headwater.server.replica_manager import ReplicaManager
from headwater.storage.config import LogConfig
from headwater.storage.manager import LogManager


class _Pressure:
    """PSI "some" total growing by ``share`` of wall time; counts its reads."""

    def __init__(self, share: float) -> None:
        self.share, self.reads, self._t0 = share, 0, time.monotonic()

    def waited_us(self) -> int:
        self.reads += 1
        return int((time.monotonic() - self._t0) * 1e6 * self.share)

    def close(self) -> None:
        pass


def _batch_at(offset: int) -> memoryview:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    builder.append(0, timestamp=1000, key=None, value=b"x" * 1000, headers=[])
    raw = bytearray(builder.build())
    struct.pack_into(">q", raw, 0, offset)  # base offset, outside the CRC
    struct.pack_into(">i", raw, 12, 0)  # partition leader epoch, outside the CRC
    return memoryview(raw)


class _Leader:
    """Answers each Fetch of big-0 with one batch at the offset asked for; records when each came."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def channel(self, _broker_id: int, _purpose: str) -> Any:
        leader = self

        class _Channel:
            async def request(self, req: Any, version: int, timeout_s: float = 30.0, decode: Any = None) -> Any:
                body = decode_body(API_SPECS[ApiKey.FETCH].request, version, memoryview(req.body))
                leader.times.append(time.monotonic())
                parts = [FetchedPartition(p.partition, 0, p.fetch_offset + 1, 0, _batch_at(p.fetch_offset), None)
                         for t in body.topics for p in t.partitions]
                await asyncio.sleep(0)
                return FetchedResponse(0, 0, 0, [FetchedTopic("big", parts)])

        return _Channel()


async def _copy(root: Path, pressure: _Pressure, target: float, seconds: float,
                until_ceiling: bool = False) -> tuple[ReplicaManager, _Leader, float | None]:
    """Copy for ``seconds`` (after the pause first reached MAX_PAUSE_MS, if ``until_ceiling``).
    Returns the manager, the fake leader and when the pause reached its ceiling (None if it did not
    within 10 s, or was not awaited)."""
    logs = LogManager([root / "b3"], LogConfig(), clock_ms=lambda: 1_000_000)
    logs.load()
    manager = ReplicaManager(3, logs, replica_lag_time_max_ms=30_000, replica_fetch_backoff_ms=20,
                             wake=lambda _t, _p: None, broker_address=lambda _b: ("127.0.0.1", 1),
                             controller_id=lambda: 9, broker_epoch=lambda: 1)
    leader = _Leader()
    manager.fetchers._channel = leader.channel
    manager.fetchers._cpu_pressure = pressure  # type: ignore[assignment]
    manager.fetchers.copy_pacer.configure(target)
    state = LeaderAndIsrState(1, 0, (1, 2), 0, (1, 2, 3), adding_replicas=(3,))
    assert manager.become("big", 0, state, topic_id=uuid.UUID(int=1), config=LogConfig(), min_insync_replicas=1,
                          max_message_bytes=1 << 20) == ErrorCode.NONE
    ceiling_at: float | None = None
    if until_ceiling:
        deadline = time.monotonic() + 10
        while manager.fetchers.copy_pacer.status().pause_ms < MAX_PAUSE_MS and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        if manager.fetchers.copy_pacer.status().pause_ms >= MAX_PAUSE_MS:
            ceiling_at = time.monotonic()
    await asyncio.sleep(seconds)
    await manager.fetchers.stop()
    return manager, leader, ceiling_at


def test_the_copy_pauses_while_pressure_is_over_the_target(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager, leader, ceiling_at = await _copy(tmp_path, _Pressure(0.9), 0.25, 0.5, until_ceiling=True)
        try:
            status = manager.fetchers.copy_pacer.status()
            assert status.pressure is not None and status.pressure > 0.25
            assert status.pause_ms == MAX_PAUSE_MS  # doubled every window until the ceiling
            # Once the pause reached its ceiling (~7 windows; later on a loaded machine, so the test
            # waits for it), fetches came at most one per pause.
            assert ceiling_at is not None
            late = [t for t in leader.times if t >= ceiling_at]
            assert len(late) >= 3
            gaps = [b - a for a, b in itertools.pairwise(late)]
            assert min(gaps) >= MAX_PAUSE_MS / 1000 * 0.9, gaps
            # Every answer was appended (the last may have come after the loop stopped).
            assert len(leader.times) - 1 <= manager.partitions[("big", 0)].plog.log_end_offset <= len(leader.times)
        finally:
            manager.logs.close()

    asyncio.run(scenario())


def test_under_the_target_the_copy_never_pauses(tmp_path: Path) -> None:
    async def scenario() -> None:
        manager, leader, _ = await _copy(tmp_path, _Pressure(0.1), 0.25, 0.5)
        try:
            status = manager.fetchers.copy_pacer.status()
            assert status.pause_ms == 0.0 and status.pressure is not None and status.pressure < 0.25
            assert len(leader.times) > 0.5 * 1000 / MAX_PAUSE_MS
        finally:
            manager.logs.close()

    asyncio.run(scenario())


def test_a_target_of_one_reads_no_pressure(tmp_path: Path) -> None:
    async def scenario() -> None:
        pressure = _Pressure(1.0)
        manager, leader, _ = await _copy(tmp_path, pressure, 1.0, 0.3)
        try:
            assert len(leader.times) > 1
            assert pressure.reads == 0
            assert manager.fetchers.copy_pacer.status().pause_ms == 0.0
        finally:
            manager.logs.close()

    asyncio.run(scenario())
