"""The broker's cleaner service over a real LogManager: picks the compacted log, cleans it on a worker
thread, writes the checkpoint, counts its figures, gives up on a log it cannot read, and takes the
log dir offline on an I/O error."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from headwater.records.batch import HEADER_SIZE
from headwater.server import cleaner as cleaner_service
from headwater.server.cleaner import LogCleanerService
from headwater.storage import LogConfig, LogManager, PartitionLog
from headwater.storage.checkpoint import read_offsets, write_offsets
from headwater.storage.cleaner import CLEANER_OFFSET_CHECKPOINT

COMPACT = LogConfig(segment_bytes=1_000, cleanup_policy="compact", file_delete_delay_ms=0)


def keyed(key: bytes, value: bytes, ts: int) -> bytearray:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    builder.append(0, timestamp=ts, key=key, value=value, headers=[])
    return bytearray(builder.build())


def fill(plog: PartitionLog, n: int) -> None:
    for i in range(n):
        plog.append_as_leader(keyed(b"k%d" % (i % 4), b"v%04d" % i, 1_000 + i), 0, 1_000 + i)
    plog.high_watermark = plog.log_end_offset


def test_service_cleans_the_compacted_log_and_checkpoints(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], LogConfig(), clock_ms=lambda: 10_000)
    manager.load()
    compacted = manager.get_or_create("c", 0, COMPACT)
    plain = manager.get_or_create("p", 0, LogConfig(segment_bytes=1_000))
    fill(compacted, 60)
    fill(plain, 60)
    plain_before = plain.size_bytes
    service = LogCleanerService(manager, {"log.cleaner.backoff.ms": "10"}, lambda: 10_000)

    async def run() -> tuple[bool, bool]:
        return await service.clean_one(), await service.clean_one()

    first, second = asyncio.run(run())
    assert (first, second) == (True, False)  # the second finds nothing dirty enough
    assert read_offsets(tmp_path / CLEANER_OFFSET_CHECKPOINT) == {("c", 0): compacted.segments[-1].base_offset}
    figures = service.figures()
    assert figures.runs == 1 and figures.bytes_read > figures.bytes_written > 0 and not figures.in_progress
    assert plain.size_bytes == plain_before  # delete-policy logs are not the cleaner's
    compacted.validate_state()
    manager.close()


def test_service_marks_an_unreadable_log_uncleanable(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], LogConfig(), clock_ms=lambda: 10_000)
    manager.load()
    plog = manager.get_or_create("c", 0, COMPACT)
    fill(plog, 60)
    # Break the first record of the first segment: its length now runs past the batch.
    fd = os.open(plog.segments[0].log_path, os.O_WRONLY)
    try:
        os.pwrite(fd, b"\x7e", HEADER_SIZE)
    finally:
        os.close(fd)
    service = LogCleanerService(manager, {}, lambda: 10_000)
    assert asyncio.run(service.clean_one()) is False
    assert service.uncleanable == {("c", 0)} and service.figures().uncleanable_partitions == 1
    assert asyncio.run(service.clean_one()) is False  # skipped now, without another failure
    assert not [p for p in plog.directory.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    manager.close()


def test_an_io_error_while_cleaning_takes_the_log_dir_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk, not the log, failed: Kafka's cleaner hands the dir to the LogDirFailureChannel
    rather than giving up on the one log."""
    manager = LogManager([tmp_path], LogConfig(), clock_ms=lambda: 10_000)
    manager.load()
    failed: list[Path] = []
    manager.on_dir_failure = failed.append
    plog = manager.get_or_create("c", 0, COMPACT)
    fill(plog, 60)
    before = [s.base_offset for s in plog.segments]

    def disk_full(*_args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cleaner_service, "write_group", disk_full)
    service = LogCleanerService(manager, {}, lambda: 10_000)
    assert asyncio.run(service.clean_one()) is False
    assert failed == [tmp_path] and manager.failed_dirs() == [tmp_path]
    assert not service.uncleanable
    assert [s.base_offset for s in plog.segments] == before
    assert not [p for p in plog.directory.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    manager.close()


def test_disabled_service_starts_nothing(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], LogConfig(), clock_ms=lambda: 0)
    manager.load()
    service = LogCleanerService(manager, {"log.cleaner.enable": "false"}, lambda: 0)

    async def run() -> None:
        service.start()
        await service.stop()

    asyncio.run(run())
    assert not service.enabled and service.runs == 0
    manager.close()


def test_truncation_below_the_checkpoint_makes_the_rewritten_part_dirty(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], LogConfig(), clock_ms=lambda: 10_000)
    manager.load()
    plog = manager.get_or_create("c", 0, COMPACT)
    fill(plog, 60)
    service = LogCleanerService(manager, {}, lambda: 10_000)
    assert asyncio.run(service.clean_one())
    checkpoint = read_offsets(tmp_path / CLEANER_OFFSET_CHECKPOINT)[("c", 0)]
    plog.truncate_to(10)  # a follower's divergent tail, inside the clean part
    assert plog.log_end_offset <= 10 < checkpoint
    for i in range(5):  # rewritten below the old checkpoint, with a key nothing later repeats
        plog.append_as_leader(keyed(b"x", b"x%d" % i, 5_000 + i), 1, 5_000 + i)
    fill(plog, 60)
    plog.roll()
    plog.high_watermark = plog.log_end_offset
    assert asyncio.run(service.clean_one())
    data = plog.read(plog.log_start_offset, 1 << 20).read()
    keys = []
    pos = 0
    while pos < len(data):
        length = int.from_bytes(data[pos + 8 : pos + 12], "big")
        keys.extend(r.key for r in DefaultRecordBatch(bytes(data[pos : pos + 12 + length])))
        pos += 12 + length
    assert keys.count(b"x") == 1  # without lowering the checkpoint all five stayed
    assert sorted(keys) == sorted(set(keys))
    manager.close()


def test_a_new_log_ignores_the_checkpoint_an_older_log_of_its_name_left(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], LogConfig(), clock_ms=lambda: 10_000)
    manager.load()
    write_offsets(tmp_path / CLEANER_OFFSET_CHECKPOINT, {("c", 0): 50})  # from a deleted topic "c"
    service = LogCleanerService(manager, {}, lambda: 10_000)

    async def run() -> int:
        service.start()  # its task first runs at the first await below
        plog = manager.get_or_create("c", 0, COMPACT)  # created again after start-up
        fill(plog, 60)
        try:
            for _ in range(200):
                if service.runs:
                    break
                await asyncio.sleep(0.05)
            return service.runs
        finally:
            await service.stop()

    assert asyncio.run(run()) == 1
    plog = manager.get("c", 0)
    assert plog is not None
    keys = [h.record_count for seg in plog.segments[:-1] for _, h in seg.iter_headers()]
    assert sum(keys) <= 4  # cleaned from offset 0, not from the stale 50
    manager.close()


def _dirty_compacted_log(tmp_path: Path) -> tuple[LogManager, PartitionLog, LogCleanerService]:
    """A compacted log with 400 records to clean behind its active segment, and a service not started."""
    manager = LogManager([tmp_path], LogConfig(), clock_ms=lambda: 10_000)
    manager.load()
    plog = manager.get_or_create("c", 0, COMPACT)
    fill(plog, 400)
    plog.roll()
    plog.high_watermark = plog.log_end_offset
    return manager, plog, LogCleanerService(manager, {}, lambda: 10_000)


def test_stop_during_a_clean_leaves_the_log_as_it_was(tmp_path: Path) -> None:
    manager, plog, service = _dirty_compacted_log(tmp_path)
    before = plog.read(0, 1 << 20).read()

    async def run() -> bool:
        service.start()
        await asyncio.sleep(0)  # the task takes its plan and hands the map to the worker thread
        started = service.in_progress
        await service.stop()
        return started

    assert asyncio.run(run()), "the clean had not started"
    assert service.runs == 0 and not service.in_progress and not service.uncleanable
    assert not [p for p in plog.directory.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    assert plog.read(0, 1 << 20).read() == before
    assert not (tmp_path / CLEANER_OFFSET_CHECKPOINT).exists()
    manager.close()


def test_cancelling_the_cleaner_task_waits_for_its_thread(tmp_path: Path) -> None:
    manager, plog, service = _dirty_compacted_log(tmp_path)
    before = plog.read(0, 1 << 20).read()

    async def run() -> None:
        service.start()
        await asyncio.sleep(0)
        task = service._task
        assert task is not None and service.in_progress
        task.cancel()  # as asyncio.run does to tasks left at shutdown
        with contextlib.suppress(asyncio.CancelledError):
            await task  # returns only after the worker thread stopped (nothing left behind below)

    asyncio.run(run())
    assert not service.in_progress and service.runs == 0
    assert not [p for p in plog.directory.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    assert plog.read(0, 1 << 20).read() == before
    manager.close()
