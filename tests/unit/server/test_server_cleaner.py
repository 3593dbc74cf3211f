"""The broker's cleaner service over a real LogManager: picks the compacted log, cleans it on a worker
thread, writes the checkpoint, counts its figures, and gives up on a log it cannot read."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from headwater.records.batch import HEADER_SIZE
from headwater.server.cleaner import LogCleanerService
from headwater.storage import LogConfig, LogManager, PartitionLog
from headwater.storage.checkpoint import read_offsets
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
