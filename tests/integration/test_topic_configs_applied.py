"""Topic configs the broker applies, end to end against a standalone broker process (issue #25):
compression.type (the leader recompresses), message.timestamp.type=LogAppendTime, the CreateTime
window (message.timestamp.after.max.ms / before.max.ms / difference.max.ms), flush.messages and
flush.ms, segment.index.bytes; segment.jitter.ms and preallocate are accepted.

Expected answers are Kafka 3.9's (sources named in each test). Batches are produced with
confluent-kafka where a client's behaviour is the point, and as raw Produce requests (kafka-python's
record builder) where the exact bytes or the answer's fields are; stored batches are read back with
a raw Fetch, which shows their codec and timestamp type as the broker stores them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, KafkaError, Producer, TopicPartition
from hw_support import (
    PRODUCE_VERSION,
    RawConnection,
    build_batch,
    create_topic,
    fetch_batches,
    list_offset,
    produce_request,
    wait_until,
)
from kafka.protocol.producer import ProduceResponse

from headwater.admin.local import BrokerProcess
from headwater.storage.checkpoint import RECOVERY_POINT_CHECKPOINT, read_offsets

ZSTD = 4
INVALID_TIMESTAMP = 32
LOG_APPEND_TIME = 1  # kafka-python's DefaultRecordBatch.timestamp_type


def _produce_raw(bootstrap: str, topic: str, batch: bytes, acks: int = 1) -> Any:
    """The one partition answer of a Produce v9 carrying ``batch`` to partition 0."""
    with RawConnection(bootstrap) as conn:
        resp = conn.request(produce_request(topic, 0, batch, acks=acks), ProduceResponse, PRODUCE_VERSION)
    (t,) = resp.responses
    (p,) = t.partition_responses
    return p


def _confluent_produce(bootstrap: str, topic: str, values: list[bytes], **conf: Any) -> list[Any]:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, **conf})
    errors: list[Any] = []
    for i, v in enumerate(values):
        p.produce(topic, value=v, key=b"k%d" % i, partition=0,
                  on_delivery=lambda err, _msg: errors.append(err) if err is not None else None)
    assert p.flush(30) == 0
    return errors


def _log_dir(broker: BrokerProcess) -> Path:
    return broker.data_dir / f"broker-{broker.broker_id}-logs"


def test_compression_type_zstd_recompresses_an_uncompressed_producer(broker: BrokerProcess,
                                                                     topic_name: Callable[..., str]) -> None:
    """compression.type=zstd: UnifiedLog.append takes targetCompression from the topic (BrokerCompressionType.
    targetCompression) and LogValidator.validateMessagesAndAssignOffsetsCompressed rebuilds a batch whose
    codec differs (buildRecordsAndAssignOffsets), so the stored batch is zstd though the producer sent
    none; a consumer reads the same records."""
    topic = create_topic(broker.bootstrap, topic_name("zstd"), 1, {"compression.type": "zstd",
                                                                  "compression.zstd.level": "10"})
    values = [b"value %d " % i + b"abcdefgh" * 50 for i in range(200)]
    assert _confluent_produce(broker.bootstrap, topic, values, **{"compression.type": "none"}) == []
    with RawConnection(broker.bootstrap) as conn:
        batches = fetch_batches(conn, topic)
    assert batches and all(b.compression_type == ZSTD for b in batches)
    stored = [r.value for b in batches for r in b]
    assert stored == values[: len(stored)]
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "zstd-readback", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            got.extend(m.value() for m in c.consume(500, 1.0) if m.error() is None)
    finally:
        c.close()
    assert got == values


def test_log_append_time_answers_and_indexes_the_broker_time(broker: BrokerProcess,
                                                             topic_name: Callable[..., str]) -> None:
    """message.timestamp.type=LogAppendTime: LogValidator stamps the batch (setMaxTimestamp(LOG_APPEND_TIME,
    now)); UnifiedLog.append puts validateAndOffsetAssignResult.logAppendTimeMs in LogAppendInfo, which
    ReplicaManager answers as log_append_time_ms; ListOffsets by timestamp (LogSegment.findOffsetByTimestamp)
    finds the batch by that time; consumers see TIMESTAMP_LOG_APPEND_TIME. A CreateTime topic answers -1."""
    topic = create_topic(broker.bootstrap, topic_name("lat"), 1, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    p = _produce_raw(broker.bootstrap, topic, build_batch([(b"k", b"v1", 1_000), (b"k", b"v2", 2_000)]))
    after = int(time.time() * 1000)
    assert p.error_code == 0 and p.base_offset == 0
    lat = p.log_append_time_ms
    assert before <= lat <= after
    with RawConnection(broker.bootstrap) as conn:
        (batch,) = fetch_batches(conn, topic)
        assert batch.timestamp_type == LOG_APPEND_TIME and batch.max_timestamp == lat
        assert [r.timestamp for r in batch] == [lat, lat]
        assert list_offset(conn, topic, 0, 1_500) == (0, 0, lat)  # the CreateTime stamps are gone
        assert list_offset(conn, topic, 0, lat) == (0, 0, lat)
        assert list_offset(conn, topic, 0, lat + 1) == (0, -1, -1)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lat-readback", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        msg = wait_until(lambda: c.poll(1.0), what="a record")
        assert msg.error() is None and msg.timestamp() == (TIMESTAMP_LOG_APPEND_TIME, lat)
    finally:
        c.close()
    plain = create_topic(broker.bootstrap, topic_name("create"), 1)
    assert _produce_raw(broker.bootstrap, plain, build_batch([(b"k", b"v", 1_000)])).log_append_time_ms == -1


def test_after_max_ms_refuses_a_batch_from_the_future(broker: BrokerProcess, topic_name: Callable[..., str]) -> None:
    """message.timestamp.after.max.ms (KIP-937, Kafka 3.6+): LogValidator.validateTimestamp gives each record
    with -(now - timestamp) > after a RecordError(index, "Timestamp <ts> of message with offset <o> is out of
    range. The timestamp should be within [<now - before>, <now + after>]"); processRecordErrors throws
    InvalidTimestampException, which ReplicaManager answers as INVALID_TIMESTAMP (32) with the record errors
    and its message. Nothing is written. librdkafka reports the error to the delivery callback."""
    topic = create_topic(broker.bootstrap, topic_name("after"), 1, {"message.timestamp.after.max.ms": "60000"})
    now = int(time.time() * 1000)
    future = now + 3_600_000
    p = _produce_raw(broker.bootstrap, topic, build_batch([(b"k", b"ok", now), (b"k", b"late", future)]))
    assert p.error_code == INVALID_TIMESTAMP
    assert p.error_message == "One or more records have been rejected due to invalid timestamp"
    ((index, message),) = [(e.batch_index, e.batch_index_error_message) for e in p.record_errors]
    assert index == 1
    assert message.startswith(f"Timestamp {future} of message with offset 1 is out of range. "
                              "The timestamp should be within [")
    low, high = (int(x) for x in message.rsplit("[", 1)[1].rstrip("]").split(", "))
    assert low == high - 60_000 - ((1 << 63) - 1)  # the broker's now - Long.MAX_VALUE (before.max.ms default)
    assert now <= high - 60_000 <= int(time.time() * 1000)
    with RawConnection(broker.bootstrap) as conn:
        assert list_offset(conn, topic, 0, -1)[1] == 0  # nothing written
    errors = _confluent_produce(broker.bootstrap, topic, [b"x"], **{"acks": "all"})
    assert errors == []  # now is inside the window
    prod = Producer({"bootstrap.servers": broker.bootstrap})
    seen: list[Any] = []
    prod.produce(topic, value=b"late", partition=0, timestamp=future, on_delivery=lambda err, _m: seen.append(err))
    prod.flush(30)
    assert len(seen) == 1 and seen[0] is not None and seen[0].code() == KafkaError.INVALID_TIMESTAMP


@pytest.mark.parametrize("config", ["message.timestamp.before.max.ms", "message.timestamp.difference.max.ms"])
def test_old_timestamps_are_refused(broker: BrokerProcess, topic_name: Callable[..., str], config: str) -> None:
    """message.timestamp.before.max.ms, or the deprecated message.timestamp.difference.max.ms standing in
    for it (Kafka 3.9's LogConfig.getMessageTimestampBeforeMaxMs): now - timestamp > before is invalid."""
    topic = create_topic(broker.bootstrap, topic_name("before"), 1, {config: "60000"})
    now = int(time.time() * 1000)
    p = _produce_raw(broker.bootstrap, topic, build_batch([(b"k", b"old", now - 3_600_000)]))
    assert p.error_code == INVALID_TIMESTAMP and [e.batch_index for e in p.record_errors] == [0]
    assert _produce_raw(broker.bootstrap, topic, build_batch([(b"k", b"new", now)])).error_code == 0


def test_flush_messages_and_flush_ms_move_the_recovery_point(broker_factory: Callable[..., BrokerProcess],
                                                              topic_name: Callable[..., str]) -> None:
    """flush.messages=1: UnifiedLog.append flushes once unflushedMessages >= flushInterval, so every
    acknowledged record is fsynced and the recovery point is the log end. flush.ms=1000: LogManager's
    flusher flushes a log whose lastFlushTime is that old. A topic with the defaults (Long.MAX_VALUE) is
    flushed by neither, and its recovery point stays at 0 until a roll or shutdown. The recovery-point
    checkpoint (written every few seconds) shows it."""
    b = broker_factory()
    by_messages = create_topic(b.bootstrap, topic_name("fm"), 1, {"flush.messages": "1"})
    by_time = create_topic(b.bootstrap, topic_name("fms"), 1, {"flush.ms": "1000"})
    neither = create_topic(b.bootstrap, topic_name("plain"), 1)
    for topic in (by_messages, by_time, neither):
        assert _confluent_produce(b.bootstrap, topic, [b"a", b"b", b"c"], acks="1") == []
    checkpoint = _log_dir(b) / RECOVERY_POINT_CHECKPOINT

    def points() -> dict[tuple[str, int], int] | None:
        found = read_offsets(checkpoint)
        wanted = {(by_messages, 0), (by_time, 0), (neither, 0)}
        return found if wanted <= found.keys() and found[(by_messages, 0)] == 3 and found[(by_time, 0)] == 3 else None

    found = wait_until(points, timeout_s=20, what="the recovery points of the flushed topics")
    assert found[(neither, 0)] == 0


def test_segment_index_bytes_rolls_and_the_other_names_are_accepted(broker_factory: Callable[..., BrokerProcess],
                                                                    topic_name: Callable[..., str]) -> None:
    """segment.index.bytes=4 (its minimum, Kafka 3.9 atLeast(4)) holds no index entry, so
    LogSegment.shouldRoll finds the index full and every append to a non-empty segment rolls.
    segment.jitter.ms and preallocate are accepted (topic creation succeeds and produce works)."""
    b = broker_factory()
    topic = create_topic(b.bootstrap, topic_name("idx"), 1, {"segment.index.bytes": "4", "segment.jitter.ms": "1000",
                                                             "preallocate": "true"})
    for i in range(3):
        assert _produce_raw(b.bootstrap, topic, build_batch([(b"k", b"v%d" % i, 1_000)])).error_code == 0
    logs = sorted(p.name for p in (_log_dir(b) / f"{topic}-0").glob("*.log"))
    assert logs == [f"{o:020d}.log" for o in range(3)]
