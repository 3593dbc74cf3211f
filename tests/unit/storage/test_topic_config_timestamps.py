"""message.timestamp.type=LogAppendTime and the CreateTime window (message.timestamp.before.max.ms,
message.timestamp.after.max.ms, the deprecated message.timestamp.difference.max.ms), applied by the
leader's append as Kafka 3.9's LogValidator applies them."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from _cleaner_support import keyed_batch
from _storage_batches import CODEC_GZIP, CODEC_NONE, CODEC_ZSTD, build_batch, make_batch
from kafka.record.default_records import DefaultRecordBatch

from headwater.protocol.errors import ErrorCode, RecordValidationError
from headwater.records import iter_batches
from headwater.records.batch import TIMESTAMP_TYPE_MASK, set_max_timestamp
from headwater.storage import LogConfig, PartitionLog
from headwater.storage.config import LONG_MAX

OpenLog = Callable[..., PartitionLog]
NOW = 1_700_000_000_000


def _stored(plog: PartitionLog) -> bytes:
    return plog.read(plog.log_start_offset, 1 << 30).read()


def _timestamps(data: bytes) -> list[tuple[int, int, int]]:
    """(offset, timestamp, timestamp type) of every record, as kafka-python reads them."""
    out = []
    for pos, h in iter_batches(data):
        out.extend((r.offset, r.timestamp, r.timestamp_type) for r in DefaultRecordBatch(bytes(data[pos : pos + h.size])))
    return out


def _lat_batch(timestamps: list[int], max_ts: int) -> bytearray:
    """A batch a producer marked LogAppendTime (which it should not)."""
    raw = make_batch([b"v%d" % i for i in range(len(timestamps))], timestamps)
    (_pos, h), = list(iter_batches(raw))
    set_max_timestamp(raw, 0, h, True, max_ts)
    return raw


# ---- LogAppendTime ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", [CODEC_NONE, CODEC_GZIP, CODEC_ZSTD])
def test_log_append_time_stamps_the_batch(open_log: OpenLog, codec: int) -> None:
    """LogValidator (Kafka 3.9), in place: batch.setMaxTimestamp(TimestampType.LOG_APPEND_TIME, now) sets
    the max timestamp and the timestamp-type attribute and recomputes the CRC; record deltas stay;
    ValidationResult.logAppendTimeMs is now, which UnifiedLog.append hands to the Produce answer."""
    plog = open_log(LogConfig(message_timestamp_type="LogAppendTime"))
    raw = make_batch([b"a" * 200, b"b" * 200, b"c" * 200], [1_000, 900, 1_100], compression=codec)
    payload = bytes(raw[61:])
    result = plog.append_as_leader(raw, 0, NOW)
    assert (result.log_append_time, result.max_timestamp) == (NOW, NOW)
    data = _stored(plog)
    (_pos, h), = list(iter_batches(data))  # iter_batches checks the CRC
    assert h.attributes & TIMESTAMP_TYPE_MASK and h.max_timestamp == NOW and h.base_timestamp == 1_000
    assert h.compression == codec and data[61:] == payload
    assert _timestamps(data) == [(0, NOW, 1), (1, NOW, 1), (2, NOW, 1)]


def test_create_time_answers_no_log_append_time(open_log: OpenLog) -> None:
    """LogAppendInfo.logAppendTime stays RecordBatch.NO_TIMESTAMP (-1) unless the topic is LogAppendTime."""
    plog = open_log(LogConfig())
    assert plog.append_as_leader(make_batch([b"a"], [1_000]), 0, NOW).log_append_time == -1


def test_log_append_time_drives_the_time_index_and_offset_lookup(open_log: OpenLog, clock: Callable[[], int]) -> None:
    """The time index and ListOffsets by timestamp follow the stamped time: LocalLog.append gets
    appendInfo.maxTimestamp (= now), and LogSegment.findOffsetByTimestamp compares the batch's
    maxTimestamp and each record's timestamp, which DefaultRecordBatch reads as maxTimestamp."""
    plog = open_log(LogConfig(message_timestamp_type="LogAppendTime", index_interval_bytes=0))
    for i in range(5):
        plog.append_as_leader(make_batch([b"x" * 30, b"y" * 30], [10 + i, 5]), 0, NOW + 1_000 * i)
    seg = plog.segments[0]
    assert list(seg.time_index.timestamps) == [NOW + 1_000 * i for i in range(1, 5)]  # one entry per index point
    assert plog.offset_for_timestamp(0) == (0, NOW)
    assert plog.offset_for_timestamp(NOW + 1) == (2, NOW + 1_000)
    assert plog.offset_for_timestamp(NOW + 3_000) == (6, NOW + 3_000)
    assert plog.offset_for_timestamp(NOW + 4_001) is None
    assert plog.max_timestamp_offset() == (8, NOW + 4_000)


def test_log_append_time_with_recompression(open_log: OpenLog) -> None:
    """buildRecordsAndAssignOffsets with timestampType LOG_APPEND_TIME: MemoryRecordsBuilder writes
    logAppendTime as maxTimestamp with the LogAppendTime attribute, in the topic's codec."""
    plog = open_log(LogConfig(message_timestamp_type="LogAppendTime", compression_type="zstd"))
    result = plog.append_as_leader(make_batch([b"q" * 100, b"r" * 100], [1, 2]), 0, NOW)
    assert result.log_append_time == NOW
    (_pos, h), = list(iter_batches(_stored(plog)))
    assert (h.compression, h.max_timestamp, h.base_timestamp) == (CODEC_ZSTD, NOW, 1)
    assert h.attributes & TIMESTAMP_TYPE_MASK
    assert _timestamps(_stored(plog)) == [(0, NOW, 1), (1, NOW, 1)]


def test_a_producer_must_not_send_log_append_time_to_a_log_append_time_topic(open_log: OpenLog) -> None:
    """LogValidator.validateTimestamp: with the topic's type not CREATE_TIME and the batch saying
    LOG_APPEND_TIME, each record is an INVALID_TIMESTAMP error "Invalid timestamp type in message
    <DefaultRecord.toString>. Producer should not set timestamp type to LogAppendTime."."""
    plog = open_log(LogConfig(message_timestamp_type="LogAppendTime"))
    with pytest.raises(RecordValidationError) as e:
        plog.append_as_leader(_lat_batch([1_000, 1_001], 5_000), 0, NOW)
    assert e.value.code == ErrorCode.INVALID_TIMESTAMP
    assert e.value.message == "One or more records have been rejected due to invalid timestamp"
    assert e.value.record_errors == [
        (0, "Invalid timestamp type in message DefaultRecord(offset=0, timestamp=5000, key=0 bytes, value=2 bytes). "
            "Producer should not set timestamp type to LogAppendTime."),
        (1, "Invalid timestamp type in message DefaultRecord(offset=1, timestamp=5000, key=0 bytes, value=2 bytes). "
            "Producer should not set timestamp type to LogAppendTime."),
    ]
    assert plog.log_end_offset == 0


def test_create_time_topic_stores_a_log_append_time_batch_as_create_time(open_log: OpenLog) -> None:
    """On a CreateTime topic every record of a LogAppendTime batch reads as the batch's maxTimestamp;
    assignOffsetsNonCompressed then calls setMaxTimestamp(CREATE_TIME, that maximum), clearing the bit.
    A batch whose maxTimestamp is -1 has no timestamp to check and is refused as in the LogAppendTime case."""
    plog = open_log(LogConfig())
    plog.append_as_leader(_lat_batch([1_000, 1_500], 7_000), 0, NOW)
    (_pos, h), = list(iter_batches(_stored(plog)))
    assert not h.attributes & TIMESTAMP_TYPE_MASK and h.max_timestamp == 7_000
    with pytest.raises(RecordValidationError) as e:
        plog.append_as_leader(_lat_batch([1_000], -1), 0, NOW)
    assert e.value.code == ErrorCode.INVALID_TIMESTAMP


def test_duplicate_answers_the_original_batchs_timestamp(open_log: OpenLog) -> None:
    """UnifiedLog.append (Kafka 3.9), duplicate case: appendInfo.setLogAppendTime(duplicate.timestamp),
    the max timestamp recorded for the original batch (its append time on a LogAppendTime topic)."""
    plog = open_log(LogConfig(message_timestamp_type="LogAppendTime"))
    batch = make_batch([b"d"], [1_000], producer_id=3, producer_epoch=0, base_sequence=0)
    assert plog.append_as_leader(bytearray(batch), 0, NOW).log_append_time == NOW
    again = plog.append_as_leader(bytearray(batch), 0, NOW + 50)
    assert again.duplicate and again.log_append_time == NOW


# ---- the CreateTime window --------------------------------------------------------------------------------


def test_after_max_refuses_records_from_the_future(open_log: OpenLog) -> None:
    """LogValidator.recordHasInvalidTimestamp: -(now - timestamp) > timestampAfterMaxMs is invalid; each
    such record gets a RecordError(recordIndex, "Timestamp <ts> of message with offset <offset> is out of
    range. The timestamp should be within [now - before, now + after]") and processRecordErrors throws
    InvalidTimestampException("One or more records have been rejected due to invalid timestamp").
    With before.max.ms at Long.MAX_VALUE, now - before is a negative long."""
    plog = open_log(LogConfig(message_timestamp_after_max_ms=60_000))
    raw = make_batch([b"ok", b"late", b"ok", b"late"], [NOW, NOW + 60_001, NOW + 60_000, NOW + 3_600_000])
    with pytest.raises(RecordValidationError) as e:
        plog.append_as_leader(raw, 0, NOW)
    assert e.value.code == ErrorCode.INVALID_TIMESTAMP
    assert e.value.message == "One or more records have been rejected due to invalid timestamp"
    low = NOW - LONG_MAX
    assert e.value.record_errors == [
        (1, f"Timestamp {NOW + 60_001} of message with offset 1 is out of range. The timestamp should be within "
            f"[{low}, {NOW + 60_000}]"),
        (3, f"Timestamp {NOW + 3_600_000} of message with offset 3 is out of range. The timestamp should be within "
            f"[{low}, {NOW + 60_000}]"),
    ]
    assert plog.log_end_offset == 0
    plog.append_as_leader(make_batch([b"ok"], [NOW + 60_000]), 0, NOW)
    assert plog.log_end_offset == 1


def test_before_max_refuses_old_records_and_the_upper_bound_wraps(open_log: OpenLog) -> None:
    """now - timestamp > timestampBeforeMaxMs is invalid. The message's upper bound is now + Long.MAX_VALUE
    computed in Java longs: it wraps to a negative number."""
    plog = open_log(LogConfig(message_timestamp_before_max_ms=1_000))
    with pytest.raises(RecordValidationError) as e:
        plog.append_as_leader(make_batch([b"old"], [NOW - 1_001], compression=CODEC_GZIP), 0, NOW)
    high = NOW + LONG_MAX - (1 << 64)
    assert e.value.record_errors == [
        (0, f"Timestamp {NOW - 1_001} of message with offset 0 is out of range. The timestamp should be within "
            f"[{NOW - 1_000}, {high}]"),
    ]
    plog.append_as_leader(make_batch([b"new"], [NOW - 1_000], compression=CODEC_GZIP), 0, NOW)


def test_difference_max_stands_in_for_a_side_left_at_its_default(open_log: OpenLog) -> None:
    """Kafka 3.9's LogConfig.getMessageTimestampBeforeMaxMs / getMessageTimestampAfterMaxMs: each side is
    message.timestamp.<side>.max.ms when that is not Long.MAX_VALUE, else the deprecated
    message.timestamp.difference.max.ms."""
    only_difference = LogConfig(message_timestamp_difference_max_ms=500)
    assert (only_difference.timestamp_before_max_ms, only_difference.timestamp_after_max_ms) == (500, 500)
    both = LogConfig(message_timestamp_difference_max_ms=500, message_timestamp_before_max_ms=10_000)
    assert (both.timestamp_before_max_ms, both.timestamp_after_max_ms) == (10_000, 500)
    plog = open_log(both)
    plog.append_as_leader(make_batch([b"a"], [NOW - 10_000]), 0, NOW)
    with pytest.raises(RecordValidationError) as e:
        plog.append_as_leader(make_batch([b"b"], [NOW + 501]), 0, NOW)
    assert f"should be within [{NOW - 10_000}, {NOW + 500}]" in e.value.record_errors[0][1]


def test_records_without_a_timestamp_pass(open_log: OpenLog) -> None:
    """validateTimestamp checks only record.timestamp() != RecordBatch.NO_TIMESTAMP."""
    plog = open_log(LogConfig(message_timestamp_difference_max_ms=0))
    plog.append_as_leader(make_batch([b"a", b"b"], [-1, -1]), 0, NOW)
    plog.append_as_leader(make_batch([b"c"], [NOW]), 0, NOW)
    assert plog.log_end_offset == 3


def test_the_window_does_not_apply_to_log_append_time(open_log: OpenLog) -> None:
    """validateTimestamp checks the window only when the topic's type is CREATE_TIME."""
    plog = open_log(LogConfig(message_timestamp_type="LogAppendTime", message_timestamp_after_max_ms=0))
    plog.append_as_leader(make_batch([b"a"], [NOW + 10**9]), 0, NOW)
    assert plog.log_end_offset == 1


def test_record_errors_count_records_of_the_failing_batch(open_log: OpenLog) -> None:
    """LogValidator collects errors per batch (recordIndex starts at 0 for each) and processRecordErrors
    throws at the first batch with any. Nothing of the request is written."""
    plog = open_log(LogConfig(message_timestamp_after_max_ms=0))
    raw = make_batch([b"a", b"b"], [NOW, NOW]) + make_batch([b"c", b"d", b"e"], [NOW, NOW + 1, NOW])
    with pytest.raises(RecordValidationError) as e:
        plog.append_as_leader(raw, 0, NOW)
    assert [i for i, _m in e.value.record_errors] == [1]
    assert plog.log_end_offset == 0


def test_compacted_topic_key_and_timestamp_errors_together(open_log: OpenLog) -> None:
    """validateRecord checks the key first and returns its error, else the timestamp's; when any record
    error is INVALID_TIMESTAMP, processRecordErrors throws InvalidTimestampException with all of them."""
    plog = open_log(LogConfig(cleanup_policy="compact", message_timestamp_after_max_ms=0))
    raw = build_batch([(b"k", b"1", NOW), (None, b"2", NOW + 5), (b"k", b"3", NOW + 5)])
    with pytest.raises(RecordValidationError) as e:
        plog.append_as_leader(raw, 0, NOW)
    assert e.value.code == ErrorCode.INVALID_TIMESTAMP
    assert [(i, m.split(" ")[0]) for i, m in e.value.record_errors] == [(1, "Compacted"), (2, "Timestamp")]
    # Keys only: INVALID_RECORD with Kafka's "RecordError(...)" list in the message.
    with pytest.raises(RecordValidationError) as keys:
        plog.append_as_leader(keyed_batch([(None, b"v")], timestamp_ms=NOW), 0, NOW)
    assert keys.value.code == ErrorCode.INVALID_RECORD
    assert keys.value.message.endswith("[RecordError(batchIndex=0, message='Compacted topic cannot accept message "
                                       "without key in topic partition t-0')]")


def test_create_time_max_timestamp_is_recomputed_when_records_are_read(open_log: OpenLog) -> None:
    """assignOffsetsNonCompressed sets the batch's max timestamp to the largest record timestamp
    (setMaxTimestamp(CREATE_TIME, maxBatchTimestamp)): a header that says otherwise is corrected."""
    plog = open_log(LogConfig(message_timestamp_after_max_ms=10**9))
    raw = make_batch([b"a", b"b"], [NOW - 5, NOW - 3])
    (_pos, h), = list(iter_batches(raw))
    set_max_timestamp(raw, 0, h, False, NOW - 100)  # a producer's wrong max
    assert plog.append_as_leader(raw, 0, NOW).max_timestamp == NOW - 3
    (_pos, stored), = list(iter_batches(_stored(plog)))
    assert stored.max_timestamp == NOW - 3
