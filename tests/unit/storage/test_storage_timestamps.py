from __future__ import annotations

from collections.abc import Callable

import pytest
from _storage_batches import CODEC_GZIP, CODEC_LZ4, CODEC_NONE, CODEC_SNAPPY, CODEC_ZSTD, make_batch

from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.storage import LogConfig, PartitionLog

OpenLog = Callable[..., PartitionLog]
CODECS = [CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("interval", [0, 4096])
def test_offset_for_timestamp(open_log: OpenLog, codec: int, interval: int) -> None:
    log = open_log(LogConfig(segment_bytes=300, index_interval_bytes=interval))
    layout = [[100, 200, 300], [400, 500], [600], [650, 700, 800, 900]]
    for stamps in layout:
        log.append_as_leader(make_batch([b"v" * 20] * len(stamps), stamps, compression=codec), 0, 1)
    assert log.offset_for_timestamp(0) == (0, 100)
    assert log.offset_for_timestamp(100) == (0, 100)
    assert log.offset_for_timestamp(250) == (2, 300)
    assert log.offset_for_timestamp(401) == (4, 500)
    assert log.offset_for_timestamp(600) == (5, 600)
    assert log.offset_for_timestamp(651) == (7, 700)
    assert log.offset_for_timestamp(900) == (9, 900)
    assert log.offset_for_timestamp(901) is None
    assert log.max_timestamp_offset() == (9, 900)


@pytest.mark.parametrize("codec", [CODEC_NONE, CODEC_ZSTD])
def test_timestamps_out_of_order_within_a_batch(open_log: OpenLog, codec: int) -> None:
    log = open_log()
    log.append_as_leader(make_batch([b"a", b"b", b"c"], [300, 100, 200], compression=codec), 0, 1)
    log.append_as_leader(make_batch([b"d", b"e"], [50, 900], compression=codec), 0, 1)
    log.append_as_leader(make_batch([b"f"], [400], compression=codec), 0, 1)
    # the first record (by offset) whose timestamp is at least the target
    assert log.offset_for_timestamp(150) == (0, 300)
    assert log.offset_for_timestamp(301) == (4, 900)
    assert log.max_timestamp_offset() == (4, 900)


def test_time_index_finds_the_batch_in_a_long_segment(open_log: OpenLog) -> None:
    log = open_log(LogConfig(index_interval_bytes=500))
    for i in range(200):
        log.append_as_leader(make_batch([b"x" * 50], [1_000 + 10 * i]), 0, 1)
    seg = log.segments[0]
    assert len(seg.time_index) > 10
    assert log.offset_for_timestamp(1_000 + 10 * 137 - 5) == (137, 1_000 + 10 * 137)
    assert log.offset_for_timestamp(1_000 + 10 * 137) == (137, 1_000 + 10 * 137)


def test_empty_log(open_log: OpenLog) -> None:
    log = open_log()
    assert log.offset_for_timestamp(0) is None
    assert log.max_timestamp_offset() == (-1, -1)


def test_records_below_the_log_start_are_not_returned(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(make_batch([b"a", b"b", b"c"], [100, 200, 300]), 0, 1)
    log.append_as_leader(make_batch([b"d"], [400]), 0, 1)
    log.high_watermark = 4
    log.delete_records_before(2)
    assert log.offset_for_timestamp(0) == (2, 300)
    with pytest.raises(KafkaError) as e:
        log.read(1, 100)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
