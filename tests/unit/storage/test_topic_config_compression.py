"""compression.type and compression.<codec>.level on a topic, applied by the leader's append
(Kafka 3.9's UnifiedLog.append with LogValidator), and the topic configs' parsing into LogConfig."""

from __future__ import annotations

import gzip
import os
from collections.abc import Callable

import pytest
from _storage_batches import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_NONE,
    CODEC_SNAPPY,
    CODEC_ZSTD,
    build_batch,
    make_batch,
)
from kafka.record.default_records import DefaultRecordBatch

from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.records import iter_batches
from headwater.records.records import batch_records, compress
from headwater.storage import LogConfig, PartitionLog
from headwater.storage.config import LONG_MAX

OpenLog = Callable[..., PartitionLog]
NAMES = {"uncompressed": CODEC_NONE, "gzip": CODEC_GZIP, "snappy": CODEC_SNAPPY, "lz4": CODEC_LZ4, "zstd": CODEC_ZSTD}


def _stored(plog: PartitionLog) -> bytes:
    return plog.read(plog.log_start_offset, 1 << 30).read()


def _records(data: bytes) -> list[tuple[int, int, bytes | None, bytes | None]]:
    out = []
    for pos, h in iter_batches(data):
        batch = DefaultRecordBatch(bytes(data[pos : pos + h.size]))
        out.extend((r.offset, r.timestamp, r.key, r.value) for r in batch)
    return out


@pytest.mark.parametrize("topic_codec", list(NAMES))
@pytest.mark.parametrize("batch_codec", list(NAMES.values()))
def test_leader_stores_the_topics_codec(open_log: OpenLog, topic_codec: str, batch_codec: int) -> None:
    """UnifiedLog.append: targetCompression = BrokerCompressionType.targetCompression(config.compression,
    sourceCompression), the topic's codec unless it is ``producer``; LogValidator.validateMessagesAndAssignOffsets
    rebuilds the batch (validateMessagesAndAssignOffsetsCompressed, inPlaceAssignment false when source and
    target differ) with offsets from the log end, keeping each record's key, value and timestamp."""
    plog = open_log(LogConfig(compression_type=topic_codec))
    plog.append_as_leader(make_batch([b"a" * 100, b"b" * 100]), 0, 1)
    plog.append_as_leader(make_batch([b"c" * 100], [5_000], compression=batch_codec), 0, 1)
    data = _stored(plog)
    assert [h.compression for _p, h in iter_batches(data)] == [NAMES[topic_codec]] * 2
    assert _records(data) == [(0, 1_000, None, b"a" * 100), (1, 1_001, None, b"b" * 100), (2, 5_000, None, b"c" * 100)]
    plog.validate_state()


@pytest.mark.parametrize("batch_codec", list(NAMES.values()))
def test_producer_keeps_the_batch_as_sent(open_log: OpenLog, batch_codec: int) -> None:
    """compression.type=producer (the default): BrokerCompressionType.targetCompression returns the
    batch's own codec, so the batch is written in place (only base offset and leader epoch change)."""
    plog = open_log(LogConfig())
    raw = make_batch([b"x" * 500, b"y" * 10], compression=batch_codec)
    plog.append_as_leader(bytearray(raw), 0, 1)
    assert _stored(plog)[12:] == bytes(raw[12:])


def test_same_codec_other_level_is_not_recompressed(open_log: OpenLog) -> None:
    """LogValidator: inPlaceAssignment = sourceCompressionType == targetCompression.type(): the codec
    is compared, not the level, so a zstd batch on a zstd topic at level 19 is stored as sent."""
    plog = open_log(LogConfig(compression_type="zstd", compression_zstd_level=19))
    raw = make_batch([b"z" * 1000], compression=CODEC_ZSTD)
    plog.append_as_leader(bytearray(raw), 0, 1)
    assert _stored(plog)[12:] == bytes(raw[12:])


@pytest.mark.parametrize(("name", "codec", "level"), [("zstd", CODEC_ZSTD, 1), ("zstd", CODEC_ZSTD, 15),
                                                      ("gzip", CODEC_GZIP, 1), ("gzip", CODEC_GZIP, 9),
                                                      ("lz4", CODEC_LZ4, 1), ("lz4", CODEC_LZ4, 12)])
def test_the_topics_level_is_used(open_log: OpenLog, name: str, codec: int, level: int) -> None:
    """KIP-390 (Kafka 3.8+): LogConfig.getCompression builds Compression.<codec>().level(
    compression.<codec>.level), and buildRecordsAndAssignOffsets compresses with it."""
    plog = open_log(LogConfig(compression_type=name, **{f"compression_{name}_level": level}))
    raw = make_batch([b"record %d " % i * 20 for i in range(40)])
    blob = bytes(raw[61:])
    plog.append_as_leader(raw, 0, 1)
    stored = _stored(plog)
    assert stored[61:] == compress(codec, blob, level)
    if codec == CODEC_GZIP:
        assert gzip.decompress(stored[61:]) == blob


def test_idempotent_producer_fields_survive_and_a_retry_is_a_duplicate(open_log: OpenLog) -> None:
    """buildRecordsAndAssignOffsets passes firstBatch.producerId(), producerEpoch(), baseSequence() to
    the builder, so producer state (analyzeAndValidateProducerState, which runs on the validated
    records) sees the producer's sequence numbers and recognises the retry."""
    plog = open_log(LogConfig(compression_type="lz4"))
    batch = make_batch([b"p" * 50] * 3, producer_id=5, producer_epoch=0, base_sequence=0)
    first = plog.append_as_leader(bytearray(batch), 0, 1)
    again = plog.append_as_leader(bytearray(batch), 0, 2)
    assert (first.base_offset, first.duplicate) == (0, False)
    assert (again.base_offset, again.last_offset, again.duplicate) == (0, 2, True)
    (_pos, h), = list(iter_batches(_stored(plog)))
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.compression) == (5, 0, 0, CODEC_LZ4)


def test_uncompressed_topic_decompresses(open_log: OpenLog) -> None:
    """compression.type=uncompressed is BrokerCompressionType.UNCOMPRESSED, Compression.NONE: a gzip
    batch goes through validateMessagesAndAssignOffsetsCompressed and is rebuilt without a codec."""
    plog = open_log(LogConfig(compression_type="uncompressed"))
    plog.append_as_leader(make_batch([b"g" * 300, b"h"], compression=CODEC_GZIP), 0, 1)
    data = _stored(plog)
    (_pos, h), = list(iter_batches(data))
    assert h.compression == CODEC_NONE
    assert batch_records(data, h) == bytes(data[61:])
    assert [v for _o, _t, _k, v in _records(data)] == [b"g" * 300, b"h"]


def test_rebuilt_batch_larger_than_max_message_bytes_is_refused(open_log: OpenLog) -> None:
    """UnifiedLog.append re-checks each batch's size against max.message.bytes when
    messageSizeMaybeChanged (a rebuild) and throws RecordTooLargeException (MESSAGE_TOO_LARGE).
    Random bytes grow under gzip."""
    plog = open_log(LogConfig(compression_type="gzip"))
    raw = make_batch([os.urandom(2000)])
    with pytest.raises(KafkaError) as refused:
        plog.append_as_leader(bytearray(raw), 0, 1, max_batch_bytes=len(raw))
    assert refused.value.code == ErrorCode.MESSAGE_TOO_LARGE
    assert plog.log_end_offset == 0
    plog.append_as_leader(bytearray(raw), 0, 1, max_batch_bytes=len(raw) + 100)
    assert plog.log_end_offset == 1


def test_follower_appends_the_leaders_bytes(open_log: OpenLog) -> None:
    """UnifiedLog.appendAsFollower calls append with validateAndAssignOffsets=false: no LogValidator,
    so a follower stores the leader's batch as it is whatever its own compression.type says."""
    plog = open_log(LogConfig(compression_type="zstd", message_timestamp_type="LogAppendTime"))
    leader_batch = build_batch([(None, b"f" * 200, 1_234)], compression=CODEC_SNAPPY)
    plog.append_as_follower(bytes(leader_batch))
    assert _stored(plog) == bytes(leader_batch)


def test_a_produce_request_of_several_batches_is_rebuilt_batch_by_batch(open_log: OpenLog) -> None:
    plog = open_log(LogConfig(compression_type="zstd"))
    two = make_batch([b"1", b"2"]) + make_batch([b"3"], [9_000], compression=CODEC_ZSTD) + make_batch([b"4"], [9_001])
    result = plog.append_as_leader(two, 0, 1)
    assert (result.base_offset, result.last_offset, result.max_timestamp) == (0, 3, 9_001)
    data = _stored(plog)
    assert [(h.base_offset, h.compression) for _p, h in iter_batches(data)] == [(0, 4), (2, 4), (3, 4)]
    assert [(o, v) for o, _t, _k, v in _records(data)] == [(0, b"1"), (1, b"2"), (2, b"3"), (3, b"4")]


# ---- the topic configs as LogConfig reads them ------------------------------------------------------------


def test_from_properties_reads_every_applied_config() -> None:
    cfg = LogConfig.from_properties({
        "compression.type": "zstd", "compression.gzip.level": "5", "compression.lz4.level": "12",
        "compression.zstd.level": "-3", "message.timestamp.type": "LogAppendTime",
        "message.timestamp.difference.max.ms": "100", "message.timestamp.before.max.ms": "200",
        "message.timestamp.after.max.ms": "300", "flush.messages": "7", "flush.ms": "800",
        "segment.jitter.ms": "900", "segment.index.bytes": "4096", "preallocate": "TRUE",
        "some.config.of.another.layer": "x",
    })
    assert (cfg.compression_type, cfg.compression_gzip_level, cfg.compression_lz4_level, cfg.compression_zstd_level) \
        == ("zstd", 5, 12, -3)
    assert (cfg.message_timestamp_type, cfg.message_timestamp_difference_max_ms, cfg.message_timestamp_before_max_ms,
            cfg.message_timestamp_after_max_ms) == ("LogAppendTime", 100, 200, 300)
    assert (cfg.flush_messages, cfg.flush_ms, cfg.segment_jitter_ms, cfg.segment_index_bytes, cfg.preallocate) \
        == (7, 800, 900, 4096, True)
    assert LogConfig.from_properties(cfg.to_properties()) == cfg
    assert LogConfig.from_properties(LogConfig().to_properties()) == LogConfig()


@pytest.mark.parametrize("bad", [
    {"compression.type": "brotli"}, {"compression.type": "ZSTD"}, {"message.timestamp.type": "createtime"},
    {"compression.gzip.level": "0"}, {"compression.gzip.level": "10"}, {"compression.lz4.level": "18"},
    {"compression.zstd.level": "23"}, {"compression.zstd.level": "-131073"}, {"flush.messages": "0"},
    {"flush.ms": "-1"}, {"segment.jitter.ms": "-1"}, {"segment.index.bytes": "3"},
    {"segment.index.bytes": str(1 << 31)}, {"message.timestamp.after.max.ms": "-1"}, {"preallocate": "yes"},
    {"flush.ms": "soon"},
])
def test_invalid_values_are_invalid_config(bad: dict[str, str]) -> None:
    """Kafka 3.9's LogConfig definitions: compression.type in BrokerCompressionType.names(), the levels'
    validators (gzip -1 or 1..9, lz4 1..17, zstd -131072..22), flush.messages atLeast(1), flush.ms,
    segment.jitter.ms and the timestamp windows atLeast(0), segment.index.bytes an INT atLeast(4),
    preallocate a BOOLEAN."""
    with pytest.raises(KafkaError) as e:
        LogConfig.from_properties(bad)
    assert e.value.code == ErrorCode.INVALID_CONFIG


def test_defaults_are_kafkas() -> None:
    """Kafka 3.9's LogConfig / ServerLogConfigs defaults: producer, gzip -1, lz4 9, zstd 3, CreateTime,
    Long.MAX_VALUE for the timestamp windows and both flush settings, jitter 0, 10 MiB index, no
    preallocation."""
    cfg = LogConfig()
    assert (cfg.compression_type, cfg.compression_gzip_level, cfg.compression_lz4_level, cfg.compression_zstd_level,
            cfg.message_timestamp_type) == ("producer", -1, 9, 3, "CreateTime")
    assert cfg.message_timestamp_difference_max_ms == cfg.message_timestamp_before_max_ms == LONG_MAX
    assert cfg.message_timestamp_after_max_ms == cfg.flush_messages == cfg.flush_ms == LONG_MAX
    assert (cfg.segment_jitter_ms, cfg.segment_index_bytes, cfg.preallocate) == (0, 10 * 1024 * 1024, False)


def test_batches_before_the_first_rebuilt_one_are_written_as_sent(open_log: OpenLog) -> None:
    plog = open_log(LogConfig(compression_type="zstd"))
    first = make_batch([b"s" * 400, b"t" * 400], [100, 101], compression=CODEC_ZSTD)
    assert next(iter_batches(first))[1].compression == CODEC_ZSTD
    plog.append_as_leader(first + make_batch([b"u" * 400], [102]), 0, 1)
    data = _stored(plog)
    (p0, h0), (_p1, h1) = list(iter_batches(data))
    assert data[p0 + 12 : p0 + h0.size] == bytes(first[12:])
    assert (h1.base_offset, h1.compression) == (2, CODEC_ZSTD)
    assert [v for _o, _t, _k, v in _records(data)] == [b"s" * 400, b"t" * 400, b"u" * 400]
