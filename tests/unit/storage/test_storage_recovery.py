from __future__ import annotations

import os
import threading
from collections.abc import Callable

import pytest
from _storage_batches import decode, make_batch

from headwater.storage import LogConfig, PartitionLog

OpenLog = Callable[..., PartitionLog]


def values(log: PartitionLog) -> list[tuple[int, bytes | None]]:
    return [(o, v) for o, _, v in decode(log.read(log.log_start_offset, 1 << 30).read())]


def crash(log: PartitionLog) -> None:
    """Drop the log the way kill -9 would: no flush, no snapshot, no final index entries."""
    log.close_without_flush()


def fill(log: PartitionLog, n: int, size: int = 100) -> list[int]:
    """Append n one-record batches; return the byte position where each starts in the log."""
    positions = []
    for i in range(n):
        positions.append(log.size_bytes)
        log.append_as_leader(make_batch([bytes([i]) * size], [10_000 + i]), 0, 1)
    return positions


def test_clean_reopen_keeps_everything(open_log: OpenLog) -> None:
    config = LogConfig(segment_bytes=1000, index_interval_bytes=150)
    log = open_log(config)
    fill(log, 20)
    log.high_watermark = 20
    before = values(log)
    segments = log.segments[:-1]
    log.close()  # indexes reach their files at a flush (a roll leaves its fsyncs to the next one)
    index_bytes = [(s.offset_index.path.read_bytes(), s.time_index.path.read_bytes()) for s in segments]
    assert all(offsets and times for offsets, times in index_bytes)
    log = open_log(config, clean_shutdown=True, high_watermark=20)
    assert values(log) == before and log.log_end_offset == 20 and log.high_watermark == 20
    assert [
        (s.offset_index.path.read_bytes(), s.time_index.path.read_bytes()) for s in log.segments[:-1]
    ] == index_bytes
    assert log.max_timestamp_offset() == (19, 10_019)
    res = log.append_as_leader(make_batch([b"z"]), 0, 1)
    assert res.base_offset == 20
    log.validate_state()


def test_torn_tail_is_cut_to_the_last_whole_batch(open_log: OpenLog) -> None:
    log = open_log()
    positions = fill(log, 5)
    path = log.segments[-1].log_path
    crash(log)
    size = path.stat().st_size
    cut_at = positions[4] + (size - positions[4]) // 2  # the middle of the last batch
    os.truncate(path, cut_at)
    log = open_log(recovery_point=0)
    assert log.log_end_offset == 4
    assert path.stat().st_size == positions[4]
    assert [o for o, _ in values(log)] == [0, 1, 2, 3]
    res = log.append_as_leader(make_batch([b"next"]), 0, 1)
    assert res.base_offset == 4
    assert [o for o, _ in values(log)] == [0, 1, 2, 3, 4]
    log.validate_state()


def test_torn_header_and_garbage_tail(open_log: OpenLog) -> None:
    log = open_log()
    positions = fill(log, 3)
    path = log.segments[-1].log_path
    crash(log)
    os.truncate(path, positions[2] + 20)  # only part of the last batch header survived
    log = open_log(recovery_point=0)
    assert log.log_end_offset == 2
    crash(log)
    with open(path, "ab") as f:
        f.write(b"\0" * 4096)  # a preallocated, never written tail
    log = open_log(recovery_point=0)
    assert log.log_end_offset == 2 and path.stat().st_size == positions[2]


def test_clean_marker_but_torn_tail_is_still_caught(open_log: OpenLog) -> None:
    log = open_log()
    positions = fill(log, 4)
    path = log.segments[-1].log_path
    log.close()
    os.truncate(path, positions[3] + 30)
    log = open_log(clean_shutdown=True)
    assert log.log_end_offset == 3
    assert path.stat().st_size == positions[3]


def test_flipped_byte_cuts_from_that_batch_on(open_log: OpenLog) -> None:
    log = open_log()
    positions = fill(log, 6)
    path = log.segments[-1].log_path
    crash(log)
    with open(path, "r+b") as f:
        f.seek(positions[3] + 70)  # inside the records of batch 3
        byte = f.read(1)
        f.seek(positions[3] + 70)
        f.write(bytes([byte[0] ^ 0x01]))
    log = open_log(recovery_point=0)
    assert log.log_end_offset == 3
    assert [o for o, _ in values(log)] == [0, 1, 2]


def test_torn_middle_segment_drops_later_segments(open_log: OpenLog) -> None:
    config = LogConfig(segment_bytes=500)
    log = open_log(config)
    fill(log, 15)
    segs = [(s.base_offset, s.log_path) for s in log.segments]
    assert len(segs) >= 3
    crash(log)
    middle_path = segs[1][1]
    os.truncate(middle_path, middle_path.stat().st_size - 10)
    log = open_log(config, recovery_point=0)
    assert len(log.segments) == 2
    assert not segs[2][1].exists()
    assert log.log_end_offset == segs[2][0] - 1
    assert [o for o, _ in values(log)] == list(range(log.log_end_offset))
    log.validate_state()


def test_recovery_point_skips_trusted_segments(open_log: OpenLog) -> None:
    config = LogConfig(segment_bytes=500)
    log = open_log(config)
    fill(log, 15)
    first_path = log.segments[0].log_path
    log.flush()
    rp = log.recovery_point
    crash(log)
    # A flipped byte below the recovery point is not re-checked (that data was fsynced), so the
    # log still ends where it ended; a recovery from 0 would have cut it.
    with open(first_path, "r+b") as f:
        f.seek(80)
        b = f.read(1)
        f.seek(80)
        f.write(bytes([b[0] ^ 1]))
    log = open_log(config, recovery_point=rp)
    assert log.log_end_offset == 15
    crash(log)
    log = open_log(config, recovery_point=0)
    assert log.log_end_offset == 0


def test_deleted_index_files_are_rebuilt(open_log: OpenLog) -> None:
    config = LogConfig(segment_bytes=1000, index_interval_bytes=150)
    log = open_log(config)
    fill(log, 20)
    entries = [(list(s.offset_index.offsets), list(s.time_index.timestamps)) for s in log.segments]
    log.close()
    for p in list(log.directory.glob("*.index")) + list(log.directory.glob("*.timeindex")):
        p.unlink()
    log = open_log(config, clean_shutdown=True)
    assert all(s.offset_index.path.exists() and s.time_index.path.exists() for s in log.segments)
    rebuilt = [(list(s.offset_index.offsets), list(s.time_index.timestamps)) for s in log.segments]
    assert rebuilt == entries
    assert all(len(e[0]) > 0 for e in entries)
    assert [o for o, _ in values(log)] == list(range(20))
    assert log.offset_for_timestamp(10_007) == (7, 10_007)
    log.validate_state()


def test_garbage_index_file_is_rebuilt(open_log: OpenLog) -> None:
    config = LogConfig(index_interval_bytes=150)
    log = open_log(config)
    fill(log, 10)
    log.close()
    index_path = log.segments[0].offset_index.path
    good = index_path.read_bytes()
    index_path.write_bytes(good[:-3])  # not a whole number of entries
    log = open_log(config, clean_shutdown=True)
    assert index_path.read_bytes() == good
    assert [o for o, _ in values(log)] == list(range(10))


def test_leftover_deleted_and_tmp_files_are_removed(open_log: OpenLog) -> None:
    log = open_log()
    fill(log, 2)
    log.close()
    (log.directory / "00000000000000000000.log.deleted").write_bytes(b"old")
    (log.directory / "leader-epoch-checkpoint.tmp").write_bytes(b"half")
    log = open_log(clean_shutdown=True)
    assert sorted(p.name for p in log.directory.iterdir() if p.name.endswith((".deleted", ".tmp"))) == []


def test_log_start_offset_above_everything_on_disk(open_log: OpenLog) -> None:
    log = open_log()
    fill(log, 3)
    crash(log)
    log = open_log(log_start_offset=10)
    assert (log.log_start_offset, log.log_end_offset) == (10, 10)
    assert log.append_as_leader(make_batch([b"a"]), 0, 1).base_offset == 10


def test_a_roll_leaves_its_fsyncs_to_the_next_flush(open_log: OpenLog, monkeypatch: pytest.MonkeyPatch) -> None:
    """A roll happens inside an append, on the event loop: it must not wait for the disk. The
    recovery point moves only once a flush has made the rolled segments durable."""
    log = open_log(LogConfig(segment_bytes=1000, index_interval_bytes=150))
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    fill(log, 20)
    assert len(log.segments) > 2 and log.flush_due
    assert synced == [] and log.recovery_point == 0
    log.flush()
    assert synced and not log.flush_due and log.recovery_point == log.log_end_offset == 20


def test_a_crash_between_a_roll_and_its_flush_recovers_every_segment(open_log: OpenLog) -> None:
    config = LogConfig(segment_bytes=1000, index_interval_bytes=150)
    log = open_log(config)
    fill(log, 20)
    before = values(log)
    assert log.recovery_point == 0
    crash(log)
    log = open_log(config, recovery_point=0, high_watermark=20)
    assert values(log) == before and log.log_end_offset == 20
    log.validate_state()


def test_a_truncation_during_a_flush_keeps_the_recovery_point_at_or_below_it(
    open_log: OpenLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker flushes rolled logs on a worker thread while the loop may truncate the same log
    (a follower's divergent tail): the flush must not then move the recovery point past the new end."""
    log = open_log(LogConfig(segment_bytes=1000, index_interval_bytes=150))
    fill(log, 20)
    in_fsync, truncated = threading.Event(), threading.Event()
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        in_fsync.set()
        truncated.wait(5)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    flusher = threading.Thread(target=log.flush)
    flusher.start()
    assert in_fsync.wait(5)
    log.truncate_to(5)
    truncated.set()
    flusher.join(5)
    assert not flusher.is_alive()
    monkeypatch.setattr(os, "fsync", real_fsync)
    fill(log, 10)  # written again after the cut: not durable until the next flush
    assert log.log_end_offset == 15 and log.recovery_point <= 5
    log.validate_state()
