from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from _storage_batches import decode, make_batch

from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.records.batch import parse_header
from headwater.storage import LogConfig, PartitionLog

OpenLog = Callable[..., PartitionLog]


def offsets_of(log: PartitionLog, fetch_offset: int, max_bytes: int = 1 << 30, **kw: object) -> list[int]:
    return [o for o, _, _ in decode(log.read(fetch_offset, max_bytes, **kw).read())]  # type: ignore[arg-type]


def test_append_read_round_trip(open_log: OpenLog) -> None:
    log = open_log()
    r1 = log.append_as_leader(make_batch([b"a", b"b", b"c"]), leader_epoch=0, now_ms=1)
    r2 = log.append_as_leader(make_batch([b"d"], [5_000]), leader_epoch=0, now_ms=2)
    assert (r1.base_offset, r1.last_offset, r1.max_timestamp) == (0, 2, 1_002)
    assert (r2.base_offset, r2.last_offset, r2.max_timestamp, r2.duplicate) == (3, 3, 5_000, False)
    assert log.log_end_offset == 4
    res = log.read(0, 1 << 20)
    assert [(o, v) for o, _, v in decode(res.read())] == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
    assert res.size_bytes == log.size_bytes == sum(s.length for s in res.slices)
    # from the middle of the first batch: the whole batch comes back
    assert offsets_of(log, 1) == [0, 1, 2, 3]
    assert offsets_of(log, 3) == [3]
    assert log.read(4, 1 << 20).slices == []
    log.validate_state()


def test_offsets_and_epoch_are_stamped_in_the_file(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(make_batch([b"a", b"b"]), leader_epoch=0, now_ms=1)
    log.append_as_leader(make_batch([b"c"]), leader_epoch=7, now_ms=1)
    data = log.read(2, 1 << 20).read()
    header = parse_header(data)
    assert (header.base_offset, header.partition_leader_epoch) == (2, 7)


def test_several_batches_in_one_append(open_log: OpenLog) -> None:
    log = open_log()
    records = make_batch([b"a", b"b"]) + make_batch([b"c"]) + make_batch([b"d", b"e", b"f"])
    res = log.append_as_leader(records, 1, 1)
    assert (res.base_offset, res.last_offset) == (0, 5)
    assert offsets_of(log, 0) == [0, 1, 2, 3, 4, 5]
    assert offsets_of(log, 3) == [3, 4, 5]


def test_out_of_range(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(make_batch([b"a"]), 0, 1)
    for bad in (-1, 2):
        with pytest.raises(KafkaError) as e:
            log.read(bad, 100)
        assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_read_limits(open_log: OpenLog) -> None:
    log = open_log()
    for i in range(5):
        log.append_as_leader(make_batch([bytes([i]) * 100]), 0, 1)
    size = log.size_bytes // 5
    assert offsets_of(log, 0, int(2.5 * size)) == [0, 1]
    assert offsets_of(log, 0, 2 * size) == [0, 1]
    assert offsets_of(log, 1, 1) == [1]  # min_one_batch: one whole batch although it is larger
    assert log.read(1, 1, min_one_batch=False).slices == []
    assert offsets_of(log, 1, 0) == [1]
    assert offsets_of(log, 0, max_offset=2) == [0, 1]
    assert offsets_of(log, 1, max_offset=5) == [1, 2, 3, 4]
    assert log.read(2, 1000, max_offset=2).slices == []
    # max_offset beyond the end is the end
    assert offsets_of(log, 3, max_offset=99) == [3, 4]


def test_max_offset_inside_a_batch_includes_that_batch(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(make_batch([b"a", b"b", b"c"]), 0, 1)
    log.append_as_leader(make_batch([b"d"]), 0, 1)
    assert offsets_of(log, 0, max_offset=1) == [0, 1, 2]


def test_roll_by_size_and_reads_across_segments(open_log: OpenLog) -> None:
    one = len(make_batch([b"x" * 100]))
    log = open_log(LogConfig(segment_bytes=3 * one, index_interval_bytes=0))
    for i in range(10):
        log.append_as_leader(make_batch([bytes([i]) * 100]), 0, 1)
    assert [s.base_offset for s in log.segments] == [0, 3, 6, 9]
    assert sorted(p.name for p in log.directory.glob("*.log")) == [f"{b:020d}.log" for b in (0, 3, 6, 9)]
    assert offsets_of(log, 0) == list(range(10))
    assert offsets_of(log, 4) == list(range(4, 10))
    assert offsets_of(log, 2, 2 * one) == [2, 3]  # a read spans segments within max_bytes
    assert offsets_of(log, 0, max_offset=7) == list(range(7))
    log.validate_state()


def test_a_batch_larger_than_a_segment_is_still_written(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_bytes=100))
    log.append_as_leader(make_batch([b"x" * 500]), 0, 1)
    log.append_as_leader(make_batch([b"y" * 500]), 0, 1)
    assert [s.base_offset for s in log.segments] == [0, 1]
    assert offsets_of(log, 0) == [0, 1]


def test_roll_by_time(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_ms=100))
    log.append_as_leader(make_batch([b"a"]), 0, now_ms=1_000)
    log.append_as_leader(make_batch([b"b"]), 0, now_ms=1_100)
    assert len(log.segments) == 1
    log.append_as_leader(make_batch([b"c"]), 0, now_ms=1_101)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.append_as_leader(make_batch([b"d"]), 0, now_ms=1_150)
    assert len(log.segments) == 2


def test_rejected_input_writes_nothing(open_log: OpenLog) -> None:
    log = open_log()
    good = make_batch([b"a"])
    flipped = make_batch([b"b"])
    flipped[-1] ^= 0xFF
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(good + flipped, 0, 1)
    assert e.value.code == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(good + make_batch([b"c"])[:-3], 0, 1)
    assert e.value.code == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(bytearray(), 0, 1)
    assert e.value.code == ErrorCode.INVALID_RECORD
    assert log.log_end_offset == 0 and log.size_bytes == 0
    assert (log.directory / "00000000000000000000.log").stat().st_size == 0


def test_a_batch_over_max_message_bytes_is_refused_before_its_crc_is_checked(open_log: OpenLog) -> None:
    """UnifiedLog.analyzeAndValidateRecords checks each batch's size against max.message.bytes,
    then its CRC: a batch both too large and corrupt is RecordTooLargeException (MESSAGE_TOO_LARGE).
    A batch of exactly the limit is written; nothing of a refused request is."""
    log = open_log()
    small, large = make_batch([b"a"]), make_batch([b"b" * 200])
    corrupt = bytearray(large)
    corrupt[-1] ^= 0xFF
    for records in (small + large, small + corrupt):
        with pytest.raises(KafkaError) as e:
            log.append_as_leader(bytearray(records), 0, 1, max_batch_bytes=len(large) - 1)
        assert e.value.code == ErrorCode.MESSAGE_TOO_LARGE
        assert f"{len(large)} bytes" in str(e.value.message)
    assert log.log_end_offset == 0 and log.size_bytes == 0
    log.append_as_leader(small + large, 0, 1, max_batch_bytes=len(large))
    assert log.log_end_offset == 2


def test_follower_append(open_log: OpenLog, tmp_path_factory: pytest.TempPathFactory) -> None:
    leader = PartitionLog("t", 0, tmp_path_factory.mktemp("leader") / "t-0", LogConfig(), clock_ms=lambda: 0)
    leader.append_as_leader(make_batch([b"a", b"b"]), 3, 1)
    leader.append_as_leader(make_batch([b"c"]), 4, 1)
    follower = open_log()
    res = follower.append_as_follower(leader.read(0, 1 << 20).read())
    assert (res.base_offset, res.last_offset) == (0, 2)
    assert follower.read(0, 1 << 20).read() == leader.read(0, 1 << 20).read()
    assert follower.epochs.entries == [(3, 0), (4, 2)]
    with pytest.raises(KafkaError) as e:
        follower.append_as_follower(leader.read(2, 1 << 20).read())  # offset 2 again
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    leader.close()


def test_high_watermark_is_clamped(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(make_batch([b"a", b"b"]), 0, 1)
    log.high_watermark = 10
    assert log.high_watermark == 2
    log.high_watermark = -5
    assert log.high_watermark == 0


def test_flush_from_another_thread_while_appending(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_bytes=2000))
    stop = threading.Event()
    errors: list[BaseException] = []

    def flusher() -> None:
        try:
            while not stop.is_set():
                log.flush()
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=flusher)
    t.start()
    try:
        for i in range(200):
            log.append_as_leader(make_batch([bytes([i % 256]) * 50]), 0, 1)
    finally:
        stop.set()
        t.join()
    assert errors == []
    log.flush()
    assert log.recovery_point == log.log_end_offset == 200
    log.validate_state()


def test_closed_log_refuses_appends(open_log: OpenLog) -> None:
    log = open_log()
    log.close()
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(make_batch([b"a"]), 0, 1)
    assert e.value.code == ErrorCode.KAFKA_STORAGE_ERROR
