"""Idempotent produce against a real broker process.

A real retry is forced by sending the very same ProduceRequest bytes again (same producer id,
epoch and sequence), on the same connection and on a new one, as a client does after a lost
response. The broker must answer every copy with the base offset of the first and keep the batch
once. An older batch of the last five retried after newer ones is a duplicate too; a gap in the
sequence is OUT_OF_ORDER_SEQUENCE_NUMBER (45). The duplicate check survives a clean restart and a
kill -9. confluent-kafka with enable.idempotence=true covers the client side.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Producer
from hw_support import (
    RawConnection,
    Workload,
    build_batch,
    check_consumed,
    consume_partitions,
    create_topic,
    decode_produce_response,
    init_producer_id,
    list_offset,
    produce_request,
)

from headwater.admin.local import BrokerProcess

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
LATEST = -1


def _records(start: int, count: int, ts0: int) -> list[tuple[bytes | None, bytes, int]]:
    return [(b"k%d" % i, b"value-%06d" % i, ts0 + i) for i in range(start, start + count)]


def _send(conn: RawConnection, frame: bytes) -> tuple[int, int]:
    conn.send_bytes(frame)
    return decode_produce_response(conn.recv_frame())


def _read_values(broker: BrokerProcess, topic: str, end: int) -> list[bytes | None]:
    return [c.value for c in sorted(consume_partitions(broker.bootstrap, topic, {0: end}), key=lambda c: c.offset)]


def test_retried_batch_is_not_duplicated(broker: BrokerProcess, topic_name: Callable[..., str]) -> None:
    topic = create_topic(broker.bootstrap, topic_name(), partitions=1)
    ts0 = int(time.time() * 1000)
    with RawConnection(broker.bootstrap) as conn:
        pid, epoch = init_producer_id(conn)
        assert pid >= 0 and epoch >= 0
        batch0 = build_batch(_records(0, 10, ts0), pid, epoch, base_sequence=0)
        frame0 = conn.encode(produce_request(topic, 0, batch0))
        assert _send(conn, frame0) == (0, 0)
        # The same bytes again, on the same connection (same correlation id as well).
        assert _send(conn, frame0) == (0, 0)
        # And again from a new connection, as after a reconnect.
        with RawConnection(broker.bootstrap) as other:
            assert _send(other, frame0) == (0, 0)
        assert list_offset(conn, topic, 0, LATEST)[:2] == (0, 10)

        batch1 = build_batch(_records(10, 5, ts0), pid, epoch, base_sequence=10)
        batch2 = build_batch(_records(15, 5, ts0), pid, epoch, base_sequence=15)
        assert _send(conn, conn.encode(produce_request(topic, 0, batch1))) == (0, 10)
        assert _send(conn, conn.encode(produce_request(topic, 0, batch2))) == (0, 15)
        # An older batch (one of the last five) retried after newer ones is still a duplicate.
        assert _send(conn, conn.encode(produce_request(topic, 0, batch0))) == (0, 0)
        assert _send(conn, conn.encode(produce_request(topic, 0, batch1))) == (0, 10)
        assert list_offset(conn, topic, 0, LATEST)[:2] == (0, 20)

        # A gap in the sequence is refused and appends nothing.
        gap = build_batch(_records(20, 5, ts0), pid, epoch, base_sequence=25)
        code, _ = _send(conn, conn.encode(produce_request(topic, 0, gap)))
        assert code == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert list_offset(conn, topic, 0, LATEST)[:2] == (0, 20)
        # The next batch in sequence still goes in right after.
        nxt = build_batch(_records(20, 5, ts0), pid, epoch, base_sequence=20)
        assert _send(conn, conn.encode(produce_request(topic, 0, nxt))) == (0, 20)

    values = _read_values(broker, topic, 25)
    assert values == [b"value-%06d" % i for i in range(25)]


@pytest.mark.parametrize("how", ["stop", "kill9"])
def test_retry_after_broker_restart_is_not_duplicated(fresh_broker: BrokerProcess, topic_name: Callable[..., str],
                                                     how: str) -> None:
    topic = create_topic(fresh_broker.bootstrap, topic_name(), partitions=1)
    ts0 = int(time.time() * 1000)
    with RawConnection(fresh_broker.bootstrap) as conn:
        pid, epoch = init_producer_id(conn)
        batches = [build_batch(_records(10 * b, 10, ts0), pid, epoch, base_sequence=10 * b) for b in range(3)]
        frames = [conn.encode(produce_request(topic, 0, batch)) for batch in batches]
        for b, frame in enumerate(frames):
            assert _send(conn, frame) == (0, 10 * b)
    if how == "stop":
        assert fresh_broker.stop() == 0
    else:
        fresh_broker.kill9()
    fresh_broker.start()
    with RawConnection(fresh_broker.bootstrap) as conn:
        # The last batch, whose response "got lost" in the restart, is retried: a duplicate.
        assert _send(conn, frames[2]) == (0, 20)
        assert _send(conn, frames[1]) == (0, 10)
        assert list_offset(conn, topic, 0, LATEST)[:2] == (0, 30)
        # The producer carries on in sequence; a skipped sequence is still refused.
        gap = build_batch(_records(30, 10, ts0), pid, epoch, base_sequence=31)
        assert _send(conn, conn.encode(produce_request(topic, 0, gap)))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
        nxt = build_batch(_records(30, 10, ts0), pid, epoch, base_sequence=30)
        assert _send(conn, conn.encode(produce_request(topic, 0, nxt))) == (0, 30)
    assert _read_values(fresh_broker, topic, 40) == [b"value-%06d" % i for i in range(40)]


def test_confluent_idempotent_producer(broker: BrokerProcess, topic_name: Callable[..., str]) -> None:
    topic = create_topic(broker.bootstrap, topic_name(), partitions=3)
    workload = Workload.starting_now(20_000)
    producer = Producer({
        "bootstrap.servers": broker.bootstrap,
        "enable.idempotence": True,
        "linger.ms": 5,
        "batch.num.messages": 500,  # many batches, five in flight per partition
        "compression.type": "lz4",
    })
    delivered: dict[int, tuple[int, int]] = {}
    errors: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            delivered[Workload.seq_of(msg.value())] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]

    for i in range(workload.n):
        producer.produce(topic, key=workload.key(i), value=workload.value(i), timestamp=workload.timestamp(i),
                         on_delivery=on_delivery)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]
    ends = {p: 0 for p in range(3)}
    for p, off in delivered.values():
        ends[p] = max(ends[p], off + 1)
    consumed = consume_partitions(broker.bootstrap, topic, ends)
    check_consumed(workload, consumed, 3, delivered=delivered)
