from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from _storage_batches import decode, make_batch
from conftest import FakeClock

from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.storage import LogConfig, LogManager
from headwater.storage.checkpoint import read_offsets, write_offsets
from headwater.storage.log import SEND_GRACE_MS
from headwater.storage.manager import CLEAN_SHUTDOWN_MARKER


def test_load_append_close_reopen(tmp_path: Path, clock: FakeClock) -> None:
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    mgr = LogManager(dirs, LogConfig(), clock_ms=clock)
    mgr.load()
    logs = [mgr.get_or_create("t", p) for p in range(4)]
    # placement alternates: each new partition goes to the dir with the fewest
    assert sorted(mgr.log_dir_of(p).name for p in logs) == ["d0", "d0", "d1", "d1"]
    for p in logs:
        p.append_as_leader(make_batch([b"x", b"y"]), 3, clock())
        p.high_watermark = 2
    mgr.close()
    for d in dirs:
        assert (d / CLEAN_SHUTDOWN_MARKER).exists()
        hws = read_offsets(d / "replication-offset-checkpoint")
        assert set(hws.values()) == {2} and len(hws) == 2
    mgr2 = LogManager(dirs, LogConfig(), clock_ms=clock)
    mgr2.load()
    for d in dirs:
        assert not (d / CLEAN_SHUTDOWN_MARKER).exists()
    assert len(mgr2.all_logs()) == 4
    for p in range(4):
        log = mgr2.get("t", p)
        assert log is not None
        assert (log.log_end_offset, log.high_watermark, log.latest_epoch()) == (2, 2, 3)
        assert [v for _, _, v in decode(log.read(0, 1000).read())] == [b"x", b"y"]
    mgr2.close()


def test_delete_renames_then_removes_after_the_delay(tmp_path: Path, clock: FakeClock) -> None:
    mgr = LogManager([tmp_path / "d0"], LogConfig(file_delete_delay_ms=5_000), clock_ms=clock)
    mgr.load()
    log = mgr.get_or_create("orders", 3)
    log.append_as_leader(make_batch([b"a"]), 0, 1)
    held = log.read(0, 1000)
    mgr.delete("orders", 3)
    assert mgr.get("orders", 3) is None
    renamed = [p for p in (tmp_path / "d0").iterdir() if p.is_dir()]
    assert len(renamed) == 1
    assert re.fullmatch(r"orders-3\.[0-9a-f]{32}-delete", renamed[0].name)
    assert decode(held.read())[0][2] == b"a"  # still servable
    mgr.tick(clock.now_ms + 4_999)
    assert renamed[0].exists()
    # The broker takes the due removals on its event loop and runs their file I/O on a worker
    # thread (as Kafka's scheduler deletes logs): taking them touches no file and hands each out once.
    [removal] = mgr.housekeep(clock.now_ms + 5_000)
    assert renamed[0].exists() and mgr.housekeep(clock.now_ms + 5_000) == []
    removal()
    assert not renamed[0].exists()
    # the name is free again
    again = mgr.get_or_create("orders", 3)
    assert again.log_end_offset == 0
    mgr.close()
    assert read_offsets(tmp_path / "d0" / "log-start-offset-checkpoint") == {("orders", 3): 0}


def test_interrupted_delete_is_finished_on_load(tmp_path: Path, clock: FakeClock) -> None:
    d0 = tmp_path / "d0"
    (d0 / f"t-0.{'ab' * 16}-delete").mkdir(parents=True)
    mgr = LogManager([d0], LogConfig(), clock_ms=clock)
    mgr.load()
    assert list(d0.glob("*-delete")) == []
    assert mgr.all_logs() == []
    mgr.close()


def test_checkpoints_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    offsets = {("a-b", 0): 5, ("a", 12): 0, ("x_y.z", 3): 1 << 40}
    write_offsets(path, offsets)
    assert path.read_text().splitlines()[:2] == ["0", "3"]
    assert "a-b 0 5" in path.read_text().splitlines()
    assert read_offsets(path) == offsets
    assert not (tmp_path / "replication-offset-checkpoint.tmp").exists()
    path.write_text("0\n3\na 1 2\n")  # count disagrees: unreadable, read as empty
    assert read_offsets(path) == {}
    assert read_offsets(tmp_path / "missing") == {}


def test_checkpoint_and_crash_recovery_through_the_manager(tmp_path: Path, clock: FakeClock) -> None:
    dirs = [tmp_path / "d0"]
    mgr = LogManager(dirs, LogConfig(segment_bytes=300), clock_ms=clock)
    mgr.load()
    log = mgr.get_or_create("t", 0)
    for i in range(10):
        log.append_as_leader(make_batch([bytes([i]) * 50]), 1, 1)
    log.high_watermark = 8
    log.flush()
    mgr.checkpoint()
    assert read_offsets(dirs[0] / "recovery-point-offset-checkpoint") == {("t", 0): 10}
    # crash: no close, so no marker; the torn tail of the active segment is cut on load
    path = log.segments[-1].log_path
    log.close_without_flush()
    os.truncate(path, path.stat().st_size - 5)
    mgr2 = LogManager(dirs, LogConfig(segment_bytes=300), clock_ms=clock)
    mgr2.load()
    again = mgr2.get("t", 0)
    assert again is not None
    assert (again.log_end_offset, again.high_watermark) == (9, 8)
    mgr2.close()


def test_update_config_reaches_existing_logs(tmp_path: Path, clock: FakeClock) -> None:
    mgr = LogManager([tmp_path / "d0"], LogConfig(), clock_ms=clock)
    mgr.load()
    a = mgr.get_or_create("t", 0)
    b = mgr.get_or_create("u", 0, LogConfig(retention_ms=5))
    mgr.update_config("t", LogConfig(segment_bytes=1000))
    assert a.config.segment_bytes == 1000 and b.config.retention_ms == 5
    assert mgr.get_or_create("t", 1).config.segment_bytes == 1000
    mgr.close()


def test_log_config_from_properties() -> None:
    cfg = LogConfig.from_properties(
        {"segment.bytes": "1024", "retention.ms": "-1", "cleanup.policy": "delete"}
    )
    assert (cfg.segment_bytes, cfg.retention_ms, cfg.retention_bytes) == (1024, -1, -1)
    base = LogConfig(retention_bytes=10)
    assert LogConfig.from_properties({"segment.ms": "5"}, base) == LogConfig(retention_bytes=10, segment_ms=5)
    for bad in (
        {"segment.bytes": "lots"},
        {"segment.bytes": "1"},
        {"retention.ms": "-2"},
        {"segment.bytes": str(1 << 31)},
    ):
        with pytest.raises(KafkaError) as e:
            LogConfig.from_properties(bad)
        assert e.value.code == ErrorCode.INVALID_CONFIG
    assert LogConfig.from_properties(cfg.to_properties()) == cfg


def test_a_dir_that_fails_goes_offline_and_keeps_its_partitions(tmp_path: Path, clock: FakeClock) -> None:
    """A partition whose creation failed in a dir stays tied to it (offline), and is not created again
    in another dir: it would then exist twice once the first dir is back, and a restart would refuse
    both (the chaos disk-full nemesis found that)."""
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    mgr = LogManager(dirs, LogConfig(), clock_ms=clock)
    failed: list[Path] = []
    mgr.on_dir_failure = failed.append
    mgr.load()
    kept = mgr.get_or_create("t", 1)                      # lands in d0 (ties go to the first)
    kept.append_as_leader(make_batch([b"x"]), 0, clock())
    (dirs[1] / "t-0").write_bytes(b"")                    # a file where t-0's directory must go
    with pytest.raises(KafkaError) as e:
        mgr.get_or_create("t", 0)                         # d1 holds fewer: it is chosen, and fails
    assert e.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert failed == [dirs[1]] and mgr.failed_dirs() == [dirs[1]]
    assert mgr.take_offline(dirs[1]) == []
    assert mgr.offline_dirs == {dirs[1]} and mgr.online_dirs == [dirs[0]]
    assert mgr.is_offline("t", 0)
    with pytest.raises(KafkaError) as e:
        mgr.get_or_create("t", 0)                         # not re-created in d0
    assert e.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert not (dirs[0] / "t-0").exists()
    assert mgr.get_or_create("t", 2).directory.parent == dirs[0]   # new partitions go to the online dir
    mgr.checkpoint()
    mgr.close()
    assert (dirs[0] / CLEAN_SHUTDOWN_MARKER).exists()
    assert not (dirs[1] / CLEAN_SHUTDOWN_MARKER).exists(), "a failed dir is never marked clean"


def test_taking_a_dir_offline_closes_its_logs(tmp_path: Path, clock: FakeClock) -> None:
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    mgr = LogManager(dirs, LogConfig(), clock_ms=clock)
    mgr.load()
    logs = [mgr.get_or_create("t", p) for p in range(4)]
    in_d1 = sorted((p.topic, p.partition) for p in logs if mgr.log_dir_of(p) == dirs[1])
    assert sorted(mgr.take_offline(dirs[1])) == in_d1 and in_d1
    for topic, partition in in_d1:
        assert mgr.get(topic, partition) is None and mgr.is_offline(topic, partition)
    assert all(p.closed for p in logs if (p.topic, p.partition) in in_d1)
    assert len(mgr.all_logs()) == 4 - len(in_d1)
    mgr.close()
    reopened = LogManager(dirs, LogConfig(), clock_ms=clock)
    reopened.load()                                       # after a restart both dirs serve again
    assert len(reopened.all_logs()) == 4 and not reopened.offline_dirs
    reopened.close()


def test_a_deleted_partition_read_lately_is_removed_only_after_the_send_grace(tmp_path: Path, clock: FakeClock) -> None:
    """file.delete.delay.ms=0 still leaves a fetch that read the partition just before its deletion
    SEND_GRACE_MS to send what it read (closing the fd under sendfile would hang that connection)."""
    mgr = LogManager([tmp_path / "d"], LogConfig(file_delete_delay_ms=0), clock_ms=clock)
    mgr.load()
    plog = mgr.get_or_create("t", 0)
    plog.append_as_leader(make_batch([b"x"]), 0, clock())
    plog.high_watermark = 1
    held = plog.read(0, 1 << 20)
    mgr.delete("t", 0)
    mgr.tick(clock.now_ms + SEND_GRACE_MS - 1)
    assert len(list((tmp_path / "d").glob("t-0.*-delete"))) == 1
    assert decode(held.read())  # still the bytes that were read
    mgr.tick(clock.now_ms + SEND_GRACE_MS)
    assert not list((tmp_path / "d").glob("t-0.*-delete"))
    mgr.close()


def test_new_partitions_skip_cordoned_dirs(tmp_path: Path, clock: FakeClock) -> None:
    """KIP-1066, Kafka's LogManager.nextLogDirs (trunk): the uncordoned dir with the fewest partitions; the
    first live dir when every one is cordoned (the controller may place a replica before it learns)."""
    dirs = [tmp_path / "d0", tmp_path / "d1", tmp_path / "d2"]
    mgr = LogManager(dirs, LogConfig(), clock_ms=clock)
    mgr.load()
    mgr.cordon([dirs[0]])
    placed = [mgr.log_dir_of(mgr.get_or_create("t", p)).name for p in range(4)]
    assert sorted(placed) == ["d1", "d1", "d2", "d2"]
    mgr.cordon(dirs)
    assert mgr.log_dir_of(mgr.get_or_create("t", 4)).name == "d0"
    mgr.cordon([])
    assert mgr.log_dir_of(mgr.get_or_create("t", 5)).name == "d0"  # the emptiest again
    mgr.close()
