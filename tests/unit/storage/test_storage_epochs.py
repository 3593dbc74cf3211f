from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from _storage_batches import make_batch

from headwater.storage import LogConfig, PartitionLog
from headwater.storage.epochs import LeaderEpochCache

OpenLog = Callable[..., PartitionLog]


def append(log: PartitionLog, epoch: int, n: int = 1) -> None:
    log.append_as_leader(make_batch([b"x"] * n), epoch, 1)


def test_new_epoch_starts_at_its_first_offset(open_log: OpenLog) -> None:
    log = open_log()
    assert log.latest_epoch() is None
    assert log.end_offset_for_epoch(0) == (-1, -1)
    append(log, 0, 3)
    append(log, 0, 2)
    append(log, 2, 4)  # offsets 5..8
    append(log, 5, 1)  # offset 9
    assert log.epochs.entries == [(0, 0), (2, 5), (5, 9)]
    assert log.latest_epoch() == 5
    assert log.end_offset_for_epoch(5) == (5, 10)  # the current epoch ends at the LEO
    assert log.end_offset_for_epoch(2) == (2, 9)
    assert log.end_offset_for_epoch(3) == (2, 9)  # an epoch we never saw: the largest one below it
    assert log.end_offset_for_epoch(1) == (0, 5)
    assert log.end_offset_for_epoch(0) == (0, 5)
    assert log.end_offset_for_epoch(6) == (-1, -1)
    assert log.end_offset_for_epoch(-1) == (-1, -1)


def test_checkpoint_file_format_and_reload(open_log: OpenLog) -> None:
    log = open_log()
    append(log, 1, 2)
    append(log, 4, 1)
    log.flush()  # the checkpoint is written (and fsynced) before the recovery point moves
    text = (log.directory / "leader-epoch-checkpoint").read_text()
    assert text == "0\n2\n1 0\n4 2\n"
    log.close()
    log = open_log(clean_shutdown=True)
    assert log.epochs.entries == [(1, 0), (4, 2)]


def test_truncation_drops_later_epochs(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_bytes=200))
    append(log, 0, 3)
    append(log, 1, 3)  # 3..5
    append(log, 3, 3)  # 6..8
    log.truncate_to(6)
    assert log.epochs.entries == [(0, 0), (1, 3)]
    assert log.end_offset_for_epoch(1) == (1, 6)
    log.truncate_to(3)
    assert log.epochs.entries == [(0, 0)]
    append(log, 7)
    assert log.epochs.entries == [(0, 0), (7, 3)]
    log.truncate_fully_and_start_at(100)
    assert log.epochs.entries == [] and log.latest_epoch() is None
    append(log, 8)
    assert log.epochs.entries == [(8, 100)]


def test_epoch_smaller_than_any_known(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    cache.assign(3, 10)
    cache.assign(6, 20)
    assert cache.end_offset_for(1, 30) == (1, 10)
    cache.truncate_from_start(15)
    assert cache.entries == [(3, 15), (6, 20)]
    cache.truncate_from_start(25)
    assert cache.entries == [(6, 25)]


def test_assign_drops_conflicting_entries(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    cache.assign(1, 0)
    cache.assign(3, 10)
    assert not cache.assign(3, 12)  # already known
    cache.assign(2, 5)  # an older epoch again: later entries conflict with it
    assert cache.entries == [(1, 0), (2, 5)]
    cache.sync()
    assert LeaderEpochCache(tmp_path / "leader-epoch-checkpoint").entries == [(1, 0), (2, 5)]


def test_unclean_recovery_rebuilds_epochs_from_batches(open_log: OpenLog) -> None:
    log = open_log()
    append(log, 2, 2)
    append(log, 3, 2)
    log.close_without_flush()
    # Never flushed: the checkpoint was never written (or is lost with the crash).
    (log.directory / "leader-epoch-checkpoint").unlink(missing_ok=True)
    log = open_log(recovery_point=0)
    assert log.epochs.entries == [(2, 0), (3, 2)]


def test_epoch_entries_beyond_a_torn_tail_are_dropped(open_log: OpenLog) -> None:
    log = open_log()
    append(log, 2, 2)
    size = log.size_bytes
    append(log, 3, 2)
    path = log.segments[0].log_path
    log.close_without_flush()
    with open(path, "r+b") as f:
        f.truncate(size + 10)
    log = open_log(recovery_point=0)
    assert log.log_end_offset == 2
    assert log.epochs.entries == [(2, 0)]


def test_truncating_to_the_end_drops_an_epoch_that_started_there(open_log: OpenLog) -> None:
    """A replica that became leader in epoch 4 (its cache got (4, LEO)) and lost leadership before
    writing keeps no entry for epoch 4 once told to truncate to its log end, or its fetches would
    name epoch 4 and meet the same divergence forever (Kafka's UnifiedLog.truncateTo truncates the
    epoch cache even when there is nothing to cut)."""
    log = open_log()
    append(log, 2, 3)
    log.epochs.assign(4, log.log_end_offset)  # what becoming leader in epoch 4 records
    assert log.latest_epoch() == 4
    log.truncate_to(log.log_end_offset)
    assert log.epochs.entries == [(2, 0)] and log.log_end_offset == 3
