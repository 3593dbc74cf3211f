"""flush.messages and flush.ms (when a log is fsynced), segment.jitter.ms and segment.index.bytes
(when a segment rolls) and preallocate, as Kafka 3.9 applies them."""

from __future__ import annotations

import asyncio
import os
import random
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from _storage_batches import make_batch

from headwater.protocol.errors import ErrorCode
from headwater.replication.partition import LeaderAndIsrState
from headwater.server.replica_manager import ReplicaManager
from headwater.storage import LogConfig, LogManager, PartitionLog

OpenLog = Callable[..., PartitionLog]


class FixedDraw(random.Random):
    """A Random whose ``getrandbits`` always answers ``value`` (the jitter draw)."""

    def __init__(self, value: int) -> None:
        super().__init__(0)
        self.value = value

    def getrandbits(self, k: int) -> int:
        return self.value


# ---- flush.messages / flush.ms -----------------------------------------------------------------------------


def test_flush_messages_is_due_at_that_many_unflushed(open_log: OpenLog) -> None:
    """UnifiedLog.append (Kafka 3.9): ``if (localLog.unflushedMessages >= config.flushInterval) flush(false)``,
    unflushedMessages being logEndOffset - recoveryPoint."""
    plog = open_log(LogConfig(flush_messages=3))
    plog.append_as_leader(make_batch([b"a"]), 0, 1)
    plog.append_as_leader(make_batch([b"b"]), 0, 1)
    assert (plog.unflushed_messages, plog.flush_by_messages_due) == (2, False)
    plog.append_as_leader(make_batch([b"c"]), 0, 1)
    assert plog.flush_by_messages_due
    plog.flush_through(plog.log_end_offset)
    assert (plog.recovery_point, plog.unflushed_messages, plog.flush_by_messages_due) == (3, 0, False)
    plog.append_as_leader(make_batch([b"d", b"e", b"f", b"g"]), 0, 1)  # one batch of four: due at once
    assert plog.flush_by_messages_due


def test_flush_through_costs_one_fsync_for_many_waiters(open_log: OpenLog, monkeypatch: pytest.MonkeyPatch) -> None:
    plog = open_log(LogConfig(flush_messages=1))
    plog.append_as_leader(make_batch([b"a"]), 0, 1)
    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    plog.flush_through(1)
    first = len(calls)
    assert first > 0
    plog.flush_through(1)  # a waiter whose append the flush already covered
    assert len(calls) == first


def test_default_flush_settings_never_force_a_flush(open_log: OpenLog, clock: Callable[[], int]) -> None:
    """flush.messages and flush.ms default to Long.MAX_VALUE (ServerLogConfigs): neither is ever reached."""
    plog = open_log(LogConfig())
    for _ in range(50):
        plog.append_as_leader(make_batch([b"x"] * 20), 0, 1)
    assert not plog.flush_by_messages_due
    assert not plog.flush_by_time_due(clock() + 10**12)


def test_flush_ms_counts_from_the_last_flush(tmp_path: Path) -> None:
    """LogManager.flushDirtyLogs: ``if (time.milliseconds - log.lastFlushTime >= log.config.flushMs)
    log.flush(false)``, which flushes only when something is unflushed; LocalLog.markFlushed sets
    lastFlushTime when a flush moves the recovery point."""
    now = [1_000_000]
    logs = LogManager([tmp_path / "d"], LogConfig(), clock_ms=lambda: now[0])
    logs.load()
    plog = logs.get_or_create("t", 0, LogConfig(flush_ms=500))
    idle = logs.get_or_create("idle", 0, LogConfig(flush_ms=0))
    plog.append_as_leader(make_batch([b"a"]), 0, now[0])
    now[0] += 499
    assert logs.logs_to_flush(now[0]) == []
    now[0] += 1
    assert logs.logs_to_flush(now[0]) == [plog]  # idle has nothing unflushed
    LogManager.flush_logs(logs.logs_to_flush(now[0]))
    assert plog.recovery_point == 1 and plog.last_flush_ms == now[0]
    plog.append_as_leader(make_batch([b"b"]), 0, now[0])
    assert logs.logs_to_flush(now[0] + 499) == []
    assert logs.logs_to_flush(now[0] + 500) == [plog]
    assert idle.unflushed_messages == 0
    logs.close()


def test_replica_manager_answers_after_the_fsync(tmp_path: Path) -> None:
    """With flush.messages reached the produce waits for the flush (Kafka flushes inside
    UnifiedLog.append, before the Produce answer); acks=1 answers then, acks=all after both."""

    async def scenario() -> tuple[ErrorCode, ErrorCode, int, int]:
        logs = LogManager([tmp_path / "d"], LogConfig(), clock_ms=lambda: 1_000_000)
        logs.load()
        replicas = ReplicaManager(1, logs, replica_lag_time_max_ms=30_000, replica_fetch_backoff_ms=1000,
                                  wake=lambda _t, _p: None, broker_address=lambda _b: None, controller_id=lambda: 9,
                                  broker_epoch=lambda: 1)
        cfg = LogConfig(flush_messages=2)
        replicas.become("t", 0, LeaderAndIsrState(1, 0, (1,), 0, (1,)), topic_id=uuid.UUID(int=1), config=cfg,
                        min_insync_replicas=1, max_message_bytes=1 << 20)
        hosted = replicas.leader("t", 0)
        _r, none = replicas.append(hosted, make_batch([b"a"]), 1, 30_000)
        assert none is None  # one message: below flush.messages
        _r, flushed = replicas.append(hosted, make_batch([b"b"]), 1, 30_000)
        assert flushed is not None
        first = await asyncio.wait_for(flushed, 5)
        after_first = hosted.plog.recovery_point
        _r, both = replicas.append(hosted, make_batch([b"c", b"d"]), -1, 30_000)
        assert both is not None
        second = await asyncio.wait_for(both, 5)
        point = hosted.plog.recovery_point
        logs.close()
        return first, second, after_first, point

    assert asyncio.run(scenario()) == (ErrorCode.NONE, ErrorCode.NONE, 2, 4)


# ---- segment.jitter.ms -------------------------------------------------------------------------------------


def test_roll_jitter_takes_time_off_segment_ms(open_log: OpenLog) -> None:
    """LogSegment.shouldRoll: timeWaitedForRoll > maxSegmentMs - rollJitterMs, the jitter drawn per segment
    by LogConfig.randomSegmentJitter: abs(nextInt) % min(segmentJitterMs, segmentMs)."""
    plog = open_log(LogConfig(segment_ms=1_000, segment_jitter_ms=500), rng=FixedDraw(1_300))
    assert plog.segments[-1].roll_jitter_ms == 1_300 % 500  # 300
    plog.append_as_leader(make_batch([b"a"]), 0, 10_000)
    plog.append_as_leader(make_batch([b"b"]), 0, 10_700)  # waited 700 = 1000 - 300: not yet
    assert len(plog.segments) == 1
    plog.append_as_leader(make_batch([b"c"]), 0, 10_701)
    assert len(plog.segments) == 2
    assert plog.segments[-1].roll_jitter_ms == 300  # a new segment draws its own


def test_jitter_is_bounded_by_segment_ms(open_log: OpenLog) -> None:
    cfg = LogConfig(segment_ms=100, segment_jitter_ms=10_000)
    assert cfg.random_segment_jitter(12_345) == 12_345 % 100
    assert LogConfig(segment_jitter_ms=0).random_segment_jitter(12_345) == 0
    plog = open_log(cfg, rng=FixedDraw(99))
    plog.append_as_leader(make_batch([b"a"]), 0, 0)
    plog.append_as_leader(make_batch([b"b"]), 0, 2)  # 2 > 100 - 99
    assert len(plog.segments) == 2


def test_no_jitter_by_default(open_log: OpenLog) -> None:
    plog = open_log(LogConfig(segment_ms=1_000), rng=FixedDraw(777))
    plog.append_as_leader(make_batch([b"a"]), 0, 0)
    plog.append_as_leader(make_batch([b"b"]), 0, 1_000)
    assert len(plog.segments) == 1
    plog.append_as_leader(make_batch([b"c"]), 0, 1_001)
    assert len(plog.segments) == 2


# ---- segment.index.bytes -----------------------------------------------------------------------------------


def test_full_offset_index_rolls(open_log: OpenLog) -> None:
    """LogSegment.shouldRoll: ``offsetIndex().isFull()``; an index of segment.index.bytes holds
    maxIndexSize / 8 entries (AbstractIndex rounds the file down to whole entries). With one timestamp
    the time index keeps a single entry and it is the offset index that fills."""
    plog = open_log(LogConfig(index_interval_bytes=0, segment_index_bytes=30))  # 3 offset entries, 2 time
    for _ in range(10):
        plog.append_as_leader(make_batch([b"x" * 20], [5]), 0, 1)
    sizes = [seg.next_offset - seg.base_offset for seg in plog.segments]
    assert sizes == [4, 4, 2]  # an entry per batch after the first: full at three entries
    assert all(len(seg.offset_index) <= 3 for seg in plog.segments)
    plog.validate_state()


def test_full_time_index_rolls(open_log: OpenLog) -> None:
    """``timeIndex().isFull()`` too: maxIndexSize / 12 entries; rising timestamps add one with every
    offset index entry."""
    plog = open_log(LogConfig(index_interval_bytes=0, segment_index_bytes=30))
    for i in range(9):
        plog.append_as_leader(make_batch([b"x" * 20], [100 + i]), 0, 1)
    assert [seg.next_offset - seg.base_offset for seg in plog.segments] == [3, 3, 3]
    assert all(len(seg.time_index) <= 2 for seg in plog.segments[:-1])


def test_index_smaller_than_one_entry_rolls_every_append(open_log: OpenLog) -> None:
    """segment.index.bytes at its minimum (4) holds no entry: the index is always full, so every append
    to a non-empty segment rolls first."""
    plog = open_log(LogConfig(segment_index_bytes=4))
    for _ in range(3):
        plog.append_as_leader(make_batch([b"a", b"b"]), 0, 1)
    assert [seg.base_offset for seg in plog.segments] == [0, 2, 4]


def test_default_index_size_does_not_roll(open_log: OpenLog) -> None:
    plog = open_log(LogConfig(index_interval_bytes=0))
    for _ in range(200):
        plog.append_as_leader(make_batch([b"x"]), 0, 1)
    assert len(plog.segments) == 1


# ---- preallocate ----------------------------------------------------------------------------------------


def test_preallocate_is_accepted_and_files_keep_their_length(open_log: OpenLog) -> None:
    """Kafka's LogConfig.initFileSize is segment.bytes when preallocate is true, and FileRecords.open
    then sets the new file's length to it (trimmed back at roll and close). Here segment files always
    end at their last batch: the setting is kept, not applied."""
    plog = open_log(LogConfig(preallocate=True, segment_bytes=1 << 20))
    assert plog.config.preallocate
    plog.append_as_leader(make_batch([b"p" * 100]), 0, 1)
    seg = plog.segments[-1]
    assert os.path.getsize(seg.log_path) == seg.size_bytes < 1 << 20
