from __future__ import annotations

from collections.abc import Callable

import pytest
from _storage_batches import decode, make_batch
from conftest import FakeClock

from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.storage import LogConfig, PartitionLog
from headwater.storage.log import SEND_GRACE_MS

OpenLog = Callable[..., PartitionLog]
ONE = len(make_batch([b"x" * 100], [0]))


def fill(log: PartitionLog, stamps: list[int]) -> None:
    for ts in stamps:
        log.append_as_leader(make_batch([b"x" * 100], [ts]), 0, ts)
    log.high_watermark = log.log_end_offset


def config(**kw: int) -> LogConfig:
    return LogConfig(**{"segment_bytes": 2 * ONE, "file_delete_delay_ms": 1_000, **kw})


def test_retention_by_time(open_log: OpenLog) -> None:
    log = open_log(config(retention_ms=10_000))
    fill(log, [1_000, 2_000, 3_000, 4_000, 50_000, 60_000])  # segments [0,1] [2,3] [4,5]
    assert [s.base_offset for s in log.segments] == [0, 2, 4]
    assert log.enforce_retention(now_ms=12_500) == 1  # only the first segment's newest record is old enough
    assert (log.log_start_offset, [s.base_offset for s in log.segments]) == (2, [2, 4])
    assert log.enforce_retention(now_ms=12_500) == 0
    assert log.enforce_retention(now_ms=20_000) == 1
    assert log.log_start_offset == 4
    with pytest.raises(KafkaError) as e:
        log.read(0, 1000)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert [o for o, _, _ in decode(log.read(4, 1 << 20).read())] == [4, 5]
    log.validate_state()


def test_an_expired_active_segment_is_rolled_and_deleted(open_log: OpenLog) -> None:
    log = open_log(config(retention_ms=10_000))
    fill(log, [1_000, 2_000, 3_000])
    assert log.enforce_retention(now_ms=100_000) == 2
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (3, 3, 0)
    assert [s.base_offset for s in log.segments] == [3]
    assert log.enforce_retention(now_ms=200_000) == 0  # an empty active segment stays
    assert log.append_as_leader(make_batch([b"y"]), 0, 1).base_offset == 3


def test_retention_never_passes_the_high_watermark(open_log: OpenLog) -> None:
    log = open_log(config(retention_ms=10_000))
    fill(log, [1_000, 2_000, 3_000, 4_000, 5_000])
    log.high_watermark = 3
    assert log.enforce_retention(now_ms=100_000) == 1  # [0,1] ends below 3; [2,3] reaches past it
    assert log.log_start_offset == 2


def test_retention_by_size(open_log: OpenLog) -> None:
    log = open_log(config(retention_bytes=3 * ONE + 1))
    fill(log, list(range(1_000, 11_000, 1_000)))  # 10 batches, 5 segments of 2
    assert log.size_bytes == 10 * ONE
    assert log.enforce_retention(now_ms=0) == 3
    assert log.size_bytes == 4 * ONE and log.log_start_offset == 6
    assert log.enforce_retention(now_ms=0) == 0


def test_retention_minus_one_keeps_forever(open_log: OpenLog) -> None:
    log = open_log(config(retention_ms=-1))
    fill(log, [1, 2, 3, 4])
    assert log.enforce_retention(now_ms=10**15) == 0


def test_deleted_segments_stay_readable_until_the_delay(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(config(retention_ms=10_000))
    fill(log, [1_000, 2_000, 3_000, 60_000])
    log.flush()  # a new log's first index files are made by its first flush
    clock.now_ms = 0
    held = log.read(0, 1 << 20)
    expected = held.read()
    old = log.segments[0]
    clock.now_ms = 20_000
    assert log.enforce_retention(now_ms=20_000) == 1
    names = sorted(p.name for p in log.directory.iterdir() if p.name.endswith(".deleted"))
    assert names == [
        "00000000000000000000.index.deleted",
        "00000000000000000000.log.deleted",
        "00000000000000000000.timeindex.deleted",
    ]
    assert held.read() == expected  # a slice taken before deletion still serves its bytes
    assert log.delete_expired_files(20_999) == 0
    assert log.delete_expired_files(21_000) == 1
    assert old.closed
    assert not any(p.name.endswith(".deleted") for p in log.directory.iterdir())


def test_delete_records_before(open_log: OpenLog) -> None:
    log = open_log(config())
    fill(log, [1, 2, 3, 4, 5])
    log.high_watermark = 3
    with pytest.raises(KafkaError) as e:
        log.delete_records_before(4)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    log.delete_records_before(3)
    assert log.log_start_offset == 3
    assert [s.base_offset for s in log.segments] == [2, 4]  # [0,1] is wholly below the start
    assert [o for o, _, _ in decode(log.read(3, 1 << 20).read())] == [3, 4]
    log.delete_records_before(1)  # never goes back
    assert log.log_start_offset == 3
    log.close()
    reopened = open_log(config(), clean_shutdown=True, log_start_offset=3, high_watermark=5)
    assert (reopened.log_start_offset, reopened.high_watermark) == (3, 5)


def test_truncate_inside_the_batch_holding_the_log_start(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(make_batch([b"a", b"b"]), 0, 1)
    log.append_as_leader(make_batch([b"c", b"d", b"e"]), 0, 1)  # offsets 2..4
    log.high_watermark = 5
    log.delete_records_before(3)
    log.truncate_to(3)  # the whole batch 2..4 goes, so the log start comes down to the new end
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (2, 2, 2)
    log.validate_state()
    assert log.append_as_leader(make_batch([b"f"]), 0, 1).base_offset == 2


def test_a_deleted_segment_read_lately_stays_open_for_the_send_grace(open_log: OpenLog, clock: FakeClock) -> None:
    """With file.delete.delay.ms=0 a segment read just before retention removed it keeps its
    descriptor for SEND_GRACE_MS after that read: the server may still be sending from it."""
    log = open_log(config(retention_ms=10_000, file_delete_delay_ms=0))
    fill(log, [1_000, 2_000, 3_000, 60_000])
    log.flush()
    clock.now_ms = 20_000
    held = log.read(0, 1 << 20)
    expected = held.read()
    assert log.enforce_retention(now_ms=20_000) == 1
    assert log.delete_expired_files(20_000 + SEND_GRACE_MS - 1) == 0
    assert held.read() == expected
    assert log.delete_expired_files(20_000 + SEND_GRACE_MS) == 1
