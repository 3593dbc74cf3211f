"""confluent-kafka 2.16 (librdkafka 2.16) against a real broker process.

For each of acks=all / acks=1 and none / gzip / snappy / lz4 / zstd: create a 3-partition topic,
produce 100,000 keyed 100-byte messages with client timestamps, consume them all back from offset 0
with assign(), and check partition by partition: offsets 0.. without gaps, produce order, keys,
values, exact timestamps and the offsets the delivery reports gave. Then ListOffsets (AdminClient)
earliest, latest, max-timestamp and by timestamp against what was read.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from hw_support import (
    Workload,
    check_consumed,
    consume_partitions,
    create_topic,
    expected_offset_for_time,
    timestamp_probes,
)

from headwater.admin.local import BrokerProcess

N_MESSAGES = 100_000
PARTITIONS = 3
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
COMBOS = [(acks, codec) for acks in ("all", "1") for codec in CODECS]


def test_metadata_lists_broker_and_topics(broker: BrokerProcess, topic_name: Callable[..., str]) -> None:
    name = create_topic(broker.bootstrap, topic_name(), PARTITIONS)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    md = admin.list_topics(timeout=10)
    assert md.controller_id == 1
    assert md.cluster_id
    assert {b.id: (b.host, b.port) for b in md.brokers.values()} == {1: ("127.0.0.1", broker.port)}
    topic = md.topics[name]
    assert topic.error is None
    assert sorted(topic.partitions) == list(range(PARTITIONS))
    for p in topic.partitions.values():
        assert (p.leader, list(p.replicas), list(p.isrs), p.error) == (1, [1], [1], None)
    # A topic that does not exist is reported as unknown (auto-create is off on this broker).
    missing = admin.list_topics(topic=topic_name("missing"), timeout=10)
    (t,) = missing.topics.values()
    assert t.error is not None and t.error.code() == 3  # UNKNOWN_TOPIC_OR_PARTITION


def _produce(bootstrap: str, topic: str, workload: Workload, acks: str, codec: str) -> dict[int, tuple[int, int]]:
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "compression.type": codec,
        "linger.ms": 5,
        "queue.buffering.max.messages": 2 * workload.n,
        "message.timeout.ms": 60_000,
    })
    delivered: dict[int, tuple[int, int]] = {}
    errors: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
            return
        delivered[Workload.seq_of(msg.value())] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]

    for i in range(workload.n):
        producer.produce(topic, key=workload.key(i), value=workload.value(i), timestamp=workload.timestamp(i),
                         on_delivery=on_delivery)
        if i % 10_000 == 0:
            producer.poll(0)
    left = producer.flush(60)
    assert left == 0, f"{left} messages still in flight after 60 s"
    assert not errors, f"{len(errors)} delivery errors, first: {errors[0]}"
    assert len(delivered) == workload.n
    return delivered


@pytest.mark.parametrize(("acks", "codec"), COMBOS)
def test_produce_consume_list_offsets(broker: BrokerProcess, topic_name: Callable[..., str], acks: str,
                                      codec: str) -> None:
    topic = create_topic(broker.bootstrap, topic_name(), PARTITIONS)
    workload = Workload.starting_now(N_MESSAGES)
    delivered = _produce(broker.bootstrap, topic, workload, acks, codec)

    ends: dict[int, int] = {p: 0 for p in range(PARTITIONS)}
    for p, off in delivered.values():
        ends[p] = max(ends[p], off + 1)
    assert sum(ends.values()) == N_MESSAGES
    consumed = consume_partitions(broker.bootstrap, topic, ends)
    per_partition = check_consumed(workload, consumed, PARTITIONS, delivered=delivered)
    assert sum(1 for recs in per_partition.values() if recs) >= 2, "keys should spread over the partitions"

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def list_offset(p: int, spec: OffsetSpec) -> tuple[int, int]:
        futures = admin.list_offsets({TopicPartition(topic, p): spec}, request_timeout=10)
        info = futures[TopicPartition(topic, p)].result(timeout=15)
        return info.offset, info.timestamp

    for p, recs in per_partition.items():
        assert list_offset(p, OffsetSpec.earliest())[0] == 0
        assert list_offset(p, OffsetSpec.latest())[0] == len(recs)
        if recs:
            newest = max(recs, key=lambda r: (r.timestamp, -r.offset))
            assert list_offset(p, OffsetSpec.max_timestamp()) == (newest.offset, newest.timestamp)
        for ts in timestamp_probes(recs):
            offset, found_ts = list_offset(p, OffsetSpec.for_timestamp(ts))
            expected = expected_offset_for_time(recs, ts)
            assert offset == expected, f"partition {p}: offset for timestamp {ts} is {offset}, expected {expected}"
            if expected >= 0:
                assert found_ts == recs[expected].timestamp


def test_produce_to_missing_topic_fails_without_creating_it(broker: BrokerProcess,
                                                            topic_name: Callable[..., str]) -> None:
    topic = topic_name("missing")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 1500})
    errors: list[object] = []
    producer.produce(topic, value=b"x", on_delivery=lambda err, msg: errors.append(err))
    started = time.monotonic()
    assert producer.flush(20) == 0
    assert time.monotonic() - started < 20
    assert len(errors) == 1 and errors[0] is not None
    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert topic not in md.topics or md.topics[topic].error is not None
