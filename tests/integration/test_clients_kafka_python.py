"""kafka-python 3.0.12 (pure Python) against a real broker process.

Same acceptance as the confluent-kafka and kcat modules: for acks=all / acks=1 and none / gzip /
snappy / lz4 / zstd, create a 3-partition topic (KafkaAdminClient), produce keyed 100-byte
messages with client timestamps, consume them back from offset 0 with assign(), check offsets,
order, keys, values, timestamps and the offsets the producer futures reported, then ListOffsets
(beginning_offsets, end_offsets, offsets_for_times).

Sizes: kafka-python produces about 17,000 messages/s on 2 cores, so 100,000 messages on all ten
combinations would take about a minute of CI on its own. The full 100,000 run on two combinations
(acks=all uncompressed, acks=1 zstd); the other eight use 20,000 messages, which is still hundreds
of batches per partition and exercises the same code paths. acks=all runs with kafka-python's
default idempotent producer (InitProducerId, sequence numbers); acks=1 with idempotence off, as
kafka-python requires.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hw_support import Consumed, Workload, check_consumed, expected_offset_for_time, timestamp_probes
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from headwater.admin.local import BrokerProcess

PARTITIONS = 3
FULL = 100_000
REDUCED = 20_000
CODECS = [None, "gzip", "snappy", "lz4", "zstd"]
FULL_COMBOS = {("all", None), (1, "zstd")}
COMBOS = [
    pytest.param(acks, codec, FULL if (acks, codec) in FULL_COMBOS else REDUCED, id=f"acks{acks}-{codec or 'none'}")
    for acks in ("all", 1)
    for codec in CODECS
]


def _admin(broker: BrokerProcess) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)


def _create_topic(broker: BrokerProcess, name: str) -> None:
    admin = _admin(broker)
    try:
        result = admin.create_topics([NewTopic(name, PARTITIONS, 1)])
        (t,) = result["topics"]
        assert (t["name"], t["error_code"], t["num_partitions"]) == (name, 0, PARTITIONS)
    finally:
        admin.close()


def test_metadata(broker: BrokerProcess, topic_name: Callable[..., str]) -> None:
    name = topic_name()
    _create_topic(broker, name)
    admin = _admin(broker)
    try:
        cluster = admin.describe_cluster()
        assert cluster["controller_id"] == 1
        assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [(1, "127.0.0.1", broker.port)]
        assert name in admin.list_topics()
        (t,) = admin.describe_topics([name])
        assert t["error_code"] == 0
        parts = sorted(t["partitions"], key=lambda p: p["partition_index"])
        assert [p["partition_index"] for p in parts] == list(range(PARTITIONS))
        for p in parts:
            assert (p["leader_id"], p["replica_nodes"], p["isr_nodes"]) == (1, [1], [1])
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        assert consumer.partitions_for_topic(name) == set(range(PARTITIONS))
    finally:
        consumer.close()


def _produce(broker: BrokerProcess, topic: str, workload: Workload, acks: str | int,
             codec: str | None) -> dict[int, tuple[int, int]]:
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        acks=acks,
        compression_type=codec,
        enable_idempotence=acks == "all",
        linger_ms=10,
        batch_size=128 * 1024,
    )
    try:
        futures = [
            producer.send(topic, key=workload.key(i), value=workload.value(i), timestamp_ms=workload.timestamp(i))
            for i in range(workload.n)
        ]
        producer.flush(timeout=120)
        delivered = {}
        for i, fut in enumerate(futures):
            md = fut.get(timeout=0)
            assert md.timestamp == workload.timestamp(i)
            delivered[i] = (md.partition, md.offset)
    finally:
        producer.close(timeout=10)
    return delivered


def _consume(broker: BrokerProcess, topic: str, total: int) -> list[Consumed]:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             max_partition_fetch_bytes=8 * 1024 * 1024, fetch_max_bytes=32 * 1024 * 1024)
    out: list[Consumed] = []
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        empty_polls = 0
        while len(out) < total and empty_polls < 60:
            batch = consumer.poll(timeout_ms=500, max_records=20_000)
            empty_polls = 0 if batch else empty_polls + 1
            for tp, records in batch.items():
                for r in records:
                    assert r.timestamp_type == 0, "CreateTime expected"
                    out.append(Consumed(tp.partition, r.offset, r.key, r.value, r.timestamp))
    finally:
        consumer.close()
    return out


@pytest.mark.parametrize(("acks", "codec", "n"), COMBOS)
def test_produce_consume_list_offsets(broker: BrokerProcess, topic_name: Callable[..., str], acks: str | int,
                                      codec: str | None, n: int) -> None:
    topic = topic_name()
    _create_topic(broker, topic)
    workload = Workload.starting_now(n)
    delivered = _produce(broker, topic, workload, acks, codec)
    consumed = _consume(broker, topic, n)
    per_partition = check_consumed(workload, consumed, PARTITIONS, delivered=delivered)

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        tps = {p: TopicPartition(topic, p) for p in range(PARTITIONS)}
        assert consumer.beginning_offsets(list(tps.values())) == {tp: 0 for tp in tps.values()}
        assert consumer.end_offsets(list(tps.values())) == {tps[p]: len(recs) for p, recs in per_partition.items()}
        for p, recs in per_partition.items():
            for ts in timestamp_probes(recs):
                found = consumer.offsets_for_times({tps[p]: ts})[tps[p]]
                expected = expected_offset_for_time(recs, ts)
                if expected < 0:
                    assert found is None, f"partition {p}, timestamp {ts}: {found}, expected none"
                else:
                    assert found is not None, f"partition {p}, timestamp {ts}: none, expected {expected}"
                    assert (found.offset, found.timestamp) == (expected, recs[expected].timestamp)
    finally:
        consumer.close()
