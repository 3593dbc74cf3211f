"""Open file descriptors: a log holds one (its active segment's .log) however many segments it has.

A broker with 10,000 replicas must stay within a 20,000 open-file limit, so index files hold no
descriptor and older segments open theirs only while they are being read.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import pytest
from _storage_batches import decode, make_batch

from headwater.storage import LogConfig, PartitionLog
from headwater.storage.files import raise_open_file_limit
from headwater.storage.log import IDLE_FILE_MS
from headwater.storage.segment import INDEX_SUFFIX

OpenLog = Callable[..., PartitionLog]


class FakeClock(Protocol):  # conftest's clock fixture
    now_ms: int


def open_files_under(directory: Path) -> list[str]:
    """Names of the files under ``directory`` that this process has open."""
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed between listdir and readlink
        if target.startswith(str(directory) + "/"):
            names.append(Path(target).name)
    return sorted(names)


def fill(log: PartitionLog, n: int, size: int = 100) -> None:
    for i in range(n):
        log.append_as_leader(make_batch([bytes([i % 256]) * size], [10_000 + i]), 0, 1)


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The descriptors ``os.fsync`` is called with from now on."""
    calls: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        calls.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    return calls


def offsets(log: PartitionLog, start: int) -> list[int]:
    return [o for o, _, _ in decode(log.read(start, 1 << 30).read())]


def test_a_log_with_many_segments_keeps_one_file_open(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(LogConfig(segment_bytes=1000, index_interval_bytes=150))
    fill(log, 60)
    assert len(log.segments) > 5
    # Rolled segments keep their descriptor for a while (a consumer just behind the end reads them next).
    log.release_idle_files(log.segments[-1].rolling_base_ms or 0)  # nothing idle yet
    assert len(open_files_under(tmp_path / "t-0")) >= 2
    log.release_idle_files(10**12)
    assert open_files_under(tmp_path / "t-0") == [log.segments[-1].log_path.name]


def test_reading_an_old_segment_reopens_it_until_idle(open_log: OpenLog, clock: FakeClock, tmp_path: Path) -> None:
    log = open_log(LogConfig(segment_bytes=1000, index_interval_bytes=150, file_delete_delay_ms=0))
    fill(log, 60)
    log.release_idle_files(10**12)
    first = log.segments[0]
    assert not first.has_fd
    assert offsets(log, 0) == list(range(60))
    assert first.has_fd
    # Closed only once IDLE_FILE_MS passed since that read, even with file.delete.delay.ms=0: a
    # FileSlice of that read may still be on its way to a socket.
    clock.now_ms += IDLE_FILE_MS - 1
    log.release_idle_files(clock.now_ms)
    assert first.has_fd
    clock.now_ms += 1
    log.release_idle_files(clock.now_ms)
    assert not first.has_fd
    assert offsets(log, 3) == list(range(3, 60))
    log.validate_state()


def test_index_entries_reach_the_file_at_flush(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(LogConfig(index_interval_bytes=150))
    fill(log, 30)
    active = log.segments[-1]
    entries = len(active.offset_index)
    assert entries > 5
    # Appended in memory only, no descriptor kept; a new log's first index file is made by its first flush.
    assert not active.offset_index.path.exists()
    assert not any(name.endswith(INDEX_SUFFIX) for name in open_files_under(tmp_path / "t-0"))
    log.flush()
    assert active.offset_index.path.stat().st_size == 8 * entries
    fill(log, 10)
    log.flush()
    assert active.offset_index.path.stat().st_size == 8 * len(active.offset_index)


def test_a_crash_between_index_syncs_recovers(open_log: OpenLog) -> None:
    config = LogConfig(segment_bytes=2000, index_interval_bytes=150)
    log = open_log(config)
    fill(log, 40)
    log.flush()
    recovery_point = log.recovery_point
    fill(log, 25)  # index entries of these are only in memory when the process dies
    expected = offsets(log, 0)
    log.close_without_flush()
    again = open_log(config, recovery_point=recovery_point, high_watermark=65)
    again.validate_state()
    assert offsets(again, 0) == expected
    assert offsets(again, 50) == list(range(50, 65))


def test_a_clean_reopen_loads_the_synced_indexes(open_log: OpenLog) -> None:
    config = LogConfig(segment_bytes=2000, index_interval_bytes=150)
    log = open_log(config)
    fill(log, 50)
    indexes = [list(s.offset_index.offsets) for s in log.segments]
    log.close()
    again = open_log(config, clean_shutdown=True, recovery_point=50)
    assert [list(s.offset_index.offsets) for s in again.segments] == indexes
    assert offsets(again, 17) == list(range(17, 50))
    again.validate_state()


def test_the_open_file_limit_is_raised_to_the_hard_limit() -> None:
    before_soft, before_hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, before_hard), before_hard))
        soft, hard = raise_open_file_limit(wanted=before_hard)
        assert (soft, hard) == (before_hard, before_hard) == resource.getrlimit(resource.RLIMIT_NOFILE)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (before_soft, before_hard))


def test_creating_a_log_and_assigning_an_epoch_waits_for_flush_to_fsync(
    open_log: OpenLog, tmp_path: Path, synced: list[int]
) -> None:
    """A LeaderAndIsr creating 10,000 replicas must not cost 40,000 fsyncs; the first flush pays."""
    log = open_log()
    checkpoint = tmp_path / "t-0" / "leader-epoch-checkpoint"
    log.epochs.assign(3, 0)
    assert synced == []
    assert not checkpoint.exists()  # written, entry and all, by the first flush
    log.append_as_leader(make_batch([b"x"]), 3, 1)
    log.flush()
    assert checkpoint.read_text().split() == ["0", "1", "3", "0"]
    assert len(synced) >= 4  # the partition dir, the log dir, the segment, the epoch checkpoint (+ its dir)
    synced.clear()
    log.flush()
    assert len(synced) == 1  # nothing new: only (a duplicate of) the active segment's descriptor


def test_a_new_log_creates_only_its_log_file_until_its_first_flush(
    open_log: OpenLog, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Creating a replica costs one file: indexes and the epoch checkpoint wait for the first flush,
    and a log that never got one (a crash right after its creation) loads without a rebuild."""
    log = open_log()
    log.epochs.assign(2, 0)  # becoming leader records the epoch before anything is written
    assert sorted(p.name for p in (tmp_path / "t-0").iterdir()) == ["00000000000000000000.log"]
    log.close_without_flush()
    with caplog.at_level("WARNING"):
        reopened = open_log(clean_shutdown=True)
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == []
    assert reopened.log_end_offset == 0
    reopened.append_as_leader(make_batch([b"x"]), 2, 1)
    reopened.close()
    names = sorted(p.name for p in (tmp_path / "t-0").iterdir())
    assert {"00000000000000000000.index", "00000000000000000000.timeindex", "leader-epoch-checkpoint"} <= set(names)
    again = open_log(clean_shutdown=True)
    assert again.log_end_offset == 1
    assert again.epochs.entries == [(2, 0)]


def test_loading_drops_an_empty_epoch_without_a_durable_write(
    open_log: OpenLog, tmp_path: Path, synced: list[int]
) -> None:
    """After a leader election most partitions hold an epoch with no records yet; a restart drops
    it from memory and leaves the file to the next flush instead of fsyncing one per partition."""
    log = open_log()
    log.append_as_leader(make_batch([b"x"]), 1, 1)
    log.epochs.assign(4, log.log_end_offset)  # led epoch 4, wrote nothing
    log.close()
    synced.clear()
    reopened = open_log(clean_shutdown=True, recovery_point=1)
    assert synced == []
    assert reopened.epochs.entries == [(1, 0)]
    reopened.flush()
    checkpoint = (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text().split()
    assert checkpoint == ["0", "1", "1", "0"]
