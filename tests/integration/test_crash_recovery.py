"""Crash recovery of a real broker process.

* kill -9 in the middle of a confluent-kafka produce stream, restart on the same data dir and port,
  keep producing: every acknowledged message is read back at its acknowledged offset, and each
  partition's offsets run from 0 to the high watermark without a gap. With the idempotent
  producer, nothing is duplicated either: the log holds each message exactly once, in order.
* A torn segment: after the broker stopped (cleanly, or by kill -9), the last ``.log`` segment of a
  partition is cut inside its last batch. On restart the partition ends at the last whole batch:
  every batch before the cut reads back intact, and the next produce lands right after it.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer
from hw_support import Workload, check_consumed, consume_partitions, create_topic, wait_until, watermarks
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition
from kafka.errors import CorruptRecordError

from headwater.admin.local import BrokerProcess
from headwater.storage.checkpoint import RECOVERY_POINT_CHECKPOINT, read_offsets

PARTITIONS = 3


class StreamProducer(threading.Thread):
    """Produces ``workload`` with confluent-kafka and records every delivery report."""

    WINDOW = 2_000

    def __init__(self, bootstrap: str, topic: str, workload: Workload, idempotent: bool) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.workload = workload
        self.conf = {
            "bootstrap.servers": bootstrap,
            "acks": "all" if idempotent else "1",
            "enable.idempotence": idempotent,
            "linger.ms": 2,
            "message.timeout.ms": 90_000,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 500,
        }
        self.acked: dict[int, tuple[int, int]] = {}
        self.errors: list[str] = []
        self.produced = 0
        self.flushed_left: int | None = None
        self.failure: BaseException | None = None
        self._lock = threading.Lock()

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def settled_count(self) -> int:
        with self._lock:
            return len(self.acked) + len(self.errors)

    def _on_delivery(self, err: object, msg: object) -> None:
        with self._lock:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.acked[Workload.seq_of(msg.value())] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]

    def run(self) -> None:
        try:
            producer = Producer(self.conf)
            w = self.workload
            for i in range(w.n):
                while True:
                    try:
                        producer.produce(self.topic, key=w.key(i), value=w.value(i), timestamp=w.timestamp(i),
                                         on_delivery=self._on_delivery)
                        break
                    except BufferError:
                        producer.poll(0.05)
                self.produced = i + 1
                if i % 250 == 249:
                    producer.poll(0)
                    # At most WINDOW unacknowledged messages: the stream moves at the broker's pace,
                    # so it is still going when the broker is killed, and waits while it is down.
                    while self.produced - self.settled_count() > self.WINDOW:
                        producer.poll(0.01)
            self.flushed_left = producer.flush(120)
        except BaseException as exc:  # reported by the test
            self.failure = exc


@pytest.mark.parametrize("idempotent", [False, True], ids=["acks1", "idempotent"])
def test_kill9_mid_stream_keeps_every_acknowledged_message(fresh_broker: BrokerProcess,
                                                           topic_name: Callable[..., str], idempotent: bool) -> None:
    topic = create_topic(fresh_broker.bootstrap, topic_name(), PARTITIONS)
    workload = Workload.starting_now(40_000)
    stream = StreamProducer(fresh_broker.bootstrap, topic, workload, idempotent)
    stream.start()
    try:
        wait_until(lambda: stream.acked_count() >= 8_000 or stream.failure, what="8,000 acknowledged messages")
        fresh_broker.kill9()
        produced_at_kill = stream.produced
        acked_at_kill = stream.acked_count()
        assert produced_at_kill < workload.n, "the stream ended before the kill; it must be cut mid-stream"
        fresh_broker.start()
        stream.join(timeout=150)
        assert not stream.is_alive(), "producer did not finish"
    finally:
        stream.join(timeout=5)
    assert stream.failure is None, repr(stream.failure)
    assert stream.flushed_left == 0
    assert not stream.errors, f"{len(stream.errors)} delivery errors, first: {stream.errors[0]}"
    assert len(stream.acked) == workload.n
    assert stream.acked_count() > acked_at_kill

    marks = watermarks(fresh_broker.bootstrap, topic, range(PARTITIONS))
    assert all(low == 0 for low, _high in marks.values())
    ends = {p: high for p, (_low, high) in marks.items()}
    consumed = consume_partitions(fresh_broker.bootstrap, topic, ends)
    if idempotent:
        # Exactly once and in order: consecutive offsets, every message once, at its reported offset.
        check_consumed(workload, consumed, PARTITIONS, delivered=stream.acked)
        return
    at = {(c.partition, c.offset): c for c in consumed}
    for p, end in ends.items():
        got = sorted(off for (q, off) in at if q == p)
        assert got == list(range(end)), f"partition {p}: offsets have gaps below {end}"
    for seq, (p, off) in stream.acked.items():
        rec = at.get((p, off))
        assert rec is not None, f"acknowledged message {seq} at {p}/{off} is missing"
        assert (rec.key, rec.value, rec.timestamp) == (workload.key(seq), workload.value(seq), workload.timestamp(seq))
    # Anything else in the log is a retried copy of a produced message, never garbage.
    for c in consumed:
        assert c.value == workload.value(Workload.seq_of(c.value or b"x"))


# --- torn segment ------------------------------------------------------------------------------------

_BATCH_PREFIX = struct.Struct(">qi")  # base offset, batch length
_LAST_OFFSET_DELTA_AT = 23


def _batches(path: Path) -> list[tuple[int, int, int, int]]:
    """(position, size, base offset, last offset) of each batch in a segment file."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos + 12 <= len(data):
        base, length = _BATCH_PREFIX.unpack_from(data, pos)
        size = 12 + length
        if pos + size > len(data):
            break
        (delta,) = struct.unpack_from(">i", data, pos + _LAST_OFFSET_DELTA_AT)
        out.append((pos, size, base, base + delta))
        pos += size
    assert pos == len(data), f"{path}: {len(data) - pos} bytes after the last whole batch"
    return out


def _produce_in_batches(bootstrap: str, topic: str, batches: int, per_batch: int) -> dict[int, bytes]:
    """Produce ``batches`` flushes of ``per_batch`` messages to partition 0; returns offset -> value."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    acked: dict[int, bytes] = {}
    errors: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked[msg.offset()] = msg.value()  # type: ignore[attr-defined]

    n = 0
    for _ in range(batches):
        for _ in range(per_batch):
            producer.produce(topic, partition=0, key=b"k%d" % n, value=b"torn-%06d-" % n + b"x" * 200,
                             on_delivery=on_delivery)
            n += 1
        assert producer.flush(30) == 0
    assert not errors
    assert sorted(acked) == list(range(n))
    return acked


@pytest.mark.parametrize(
    ("how", "cut"),
    [("stop", "mid-batch"), ("kill9", "mid-batch"), ("stop", "mid-header"), ("kill9", "mid-header")],
)
def test_segment_cut_inside_last_batch_recovers_to_last_whole_batch(
    fresh_broker: BrokerProcess, topic_name: Callable[..., str], how: str, cut: str
) -> None:
    topic = create_topic(fresh_broker.bootstrap, topic_name(), partitions=1)
    values = _produce_in_batches(fresh_broker.bootstrap, topic, batches=20, per_batch=25)
    if how == "stop":
        assert fresh_broker.stop() == 0
    else:
        fresh_broker.kill9()

    part_dir = fresh_broker.data_dir / f"broker-{fresh_broker.broker_id}-logs" / f"{topic}-0"
    segments = sorted(part_dir.glob("*.log"))
    assert segments, f"no segment in {part_dir}"
    last = segments[-1]
    batches = _batches(last)
    assert len(batches) >= 2, "need at least two batches in the last segment"
    pos, size, base, last_offset = batches[-1]
    assert last_offset == max(values)
    at = pos + (size // 2 if cut == "mid-batch" else 30)
    os.truncate(last, at)
    expected_end = base  # the torn batch is gone; everything before it stays

    fresh_broker.start()
    wait_until(lambda: watermarks(fresh_broker.bootstrap, topic, [0])[0] == (0, expected_end), timeout_s=20,
               what=f"watermarks (0, {expected_end}) after recovery")
    consumed = sorted(consume_partitions(fresh_broker.bootstrap, topic, {0: expected_end}), key=lambda c: c.offset)
    assert [c.offset for c in consumed] == list(range(expected_end))
    assert [c.value for c in consumed] == [values[o] for o in range(expected_end)]
    assert os.path.getsize(last) == pos, "the torn tail should be cut off the segment file"

    # The next produce continues right after the last whole batch.
    more = Producer({"bootstrap.servers": fresh_broker.bootstrap, "acks": "all"})
    offsets: list[int] = []
    more.produce(topic, partition=0, value=b"after-recovery",
                 on_delivery=lambda err, msg: offsets.append(-1 if err else msg.offset()))
    assert more.flush(30) == 0
    assert offsets == [expected_end]
    (rec,) = consume_partitions(fresh_broker.bootstrap, topic, {0: expected_end + 1}, starts={0: expected_end})
    assert (rec.offset, rec.value) == (expected_end, b"after-recovery")


def _flip_byte(path: Path, at: int) -> None:
    """Damage one byte of a record (a value byte near a batch's end: the batch's length stays valid)."""
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0x40]))


def test_flipped_byte_is_cut_by_recovery_after_a_crash(fresh_broker: BrokerProcess, topic_name: Callable[..., str]) -> None:
    """A byte flipped inside a batch that was never flushed: recovery checks every batch's CRC from the
    recovery point on, cuts the log before the damaged batch, and the next produce continues there."""
    topic = create_topic(fresh_broker.bootstrap, topic_name(), partitions=1)
    values = _produce_in_batches(fresh_broker.bootstrap, topic, batches=10, per_batch=25)
    fresh_broker.kill9()
    segment = sorted((fresh_broker.data_dir / f"broker-{fresh_broker.broker_id}-logs" / f"{topic}-0").glob("*.log"))[-1]
    batches = _batches(segment)
    pos, size, base, _last = batches[len(batches) // 2]
    _flip_byte(segment, pos + size - 20)

    fresh_broker.start()
    wait_until(lambda: watermarks(fresh_broker.bootstrap, topic, [0])[0] == (0, base), timeout_s=20,
               what=f"watermarks (0, {base}) after recovery cut the damaged batch")
    consumed = sorted(consume_partitions(fresh_broker.bootstrap, topic, {0: base}), key=lambda c: c.offset)
    assert [c.value for c in consumed] == [values[o] for o in range(base)]


def test_flipped_byte_in_flushed_data_is_caught_by_the_clients_crc_check(
        fresh_broker: BrokerProcess, topic_name: Callable[..., str]) -> None:
    """Below the recovery point (a clean shutdown flushed it) a log is trusted and not rescanned, as in
    Kafka; a damaged batch there is served as stored, and the reader's CRC check refuses it: kafka-python
    raises, it never hands out the damaged records."""
    topic = create_topic(fresh_broker.bootstrap, topic_name(), partitions=1)
    _produce_in_batches(fresh_broker.bootstrap, topic, batches=4, per_batch=25)
    assert fresh_broker.stop() == 0
    segment = sorted((fresh_broker.data_dir / f"broker-{fresh_broker.broker_id}-logs" / f"{topic}-0").glob("*.log"))[-1]
    pos, size, _base, _last = _batches(segment)[0]
    _flip_byte(segment, pos + size - 20)
    fresh_broker.start()

    consumer = KafkaConsumer(bootstrap_servers=fresh_broker.bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=10_000, check_crcs=True)
    try:
        tp = KTopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        with pytest.raises(CorruptRecordError):
            consumer.poll(timeout_ms=10_000)
            consumer.poll(timeout_ms=10_000)
    finally:
        consumer.close()


def test_rolled_segments_become_durable_and_the_recovery_point_follows(
    fresh_broker: BrokerProcess, topic_name: Callable[..., str]
) -> None:
    """A roll leaves its fsyncs to the broker's housekeeping, which flushes on a worker thread; the
    recovery point (and its checkpoint file, which a restart after a crash starts from) must then
    move past the rolled segments, or every crash would recover the whole log."""
    topic = create_topic(fresh_broker.bootstrap, topic_name(), partitions=1, configs={"segment.bytes": "20000"})
    values = _produce_in_batches(fresh_broker.bootstrap, topic, batches=10, per_batch=25)
    part_dir = fresh_broker.data_dir / f"broker-{fresh_broker.broker_id}-logs" / f"{topic}-0"
    bases = sorted(int(p.name[:20]) for p in part_dir.glob("*.log"))
    assert len(bases) >= 3, bases
    checkpoint = part_dir.parent / RECOVERY_POINT_CHECKPOINT
    wait_until(lambda: read_offsets(checkpoint).get((topic, 0), 0) >= bases[-1], timeout_s=20,
               what=f"the recovery point of {topic}-0 to pass its last roll at {bases[-1]}")
    fresh_broker.kill9()
    fresh_broker.start()
    consumed = consume_partitions(fresh_broker.bootstrap, topic, {0: len(values)})
    assert {c.offset: c.value for c in consumed} == values
