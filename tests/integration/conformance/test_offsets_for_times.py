"""Offsets for times, through confluent-kafka (consumer ``offsets_for_times`` and admin
``list_offsets``), kafka-python (``offsets_for_times``) and KafkaJS
(``admin.fetchTopicOffsetsByTimestamp``), on one partition whose records carry client timestamps
in two batches, one of them earlier than the record before it:

    offset     0    1    2    3    4    5
    t0 +       0   10   10   30   20   40      (offsets 0-2 in one batch, 3-5 in another)

Expected answers, from Kafka 3.9: ``UnifiedLog.fetchOffsetByTimestamp`` looks in the first segment
whose largest timestamp is >= the target and ``FileRecords.searchForTimestamp`` answers the first
record, in offset order, whose timestamp is >= the target, with that record's timestamp. So a
target before the first record is offset 0, an exact match of two records the first of them, and an
exact match of a record that follows a later timestamp (t0+20 at offset 4) the earlier offset 3,
whose timestamp 30 is the first >= 20. A target after the last record has no offset: the broker
answers offset -1, timestamp -1, which each library shows its own way: confluent-kafka's consumer
and admin -1, kafka-python ``None`` (``offsets_for_times``: "None will also be returned for the
partition if there are no messages in it"),
KafkaJS the latest offset (``fetchTopicOffsetsByTimestamp`` replaces a negative offset by the high
watermark it fetched first, kafkajs/src/admin/index.js).
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from hw_support import create_topic
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from headwater.admin.local import BrokerProcess

JS = Path(__file__).resolve().parents[2] / "js"
BATCHES = [[0, 10, 10], [30, 20, 40]]  # each record's timestamp - t0, by batch
STAMPS = [dt for batch in BATCHES for dt in batch]
END = len(STAMPS)
# (target timestamp - t0, the offset Kafka answers or None for "no offset")
PROBES = {
    "before-first": (-60_000, 0),
    "first": (0, 0),
    "between": (5, 1),
    "exact-twice": (10, 1),
    "exact-after-later": (20, 3),
    "between-batches": (25, 3),
    "last": (40, 5),
    "after-last": (41, None),
}


@pytest.fixture(scope="module")
def timed(broker: BrokerProcess) -> Iterator[tuple[str, int]]:
    """(topic, t0), produced once for the module."""
    topic = create_topic(broker.bootstrap, f"timed-{uuid.uuid4().hex[:8]}", 1)
    t0 = int(time.time() * 1000) - 3_600_000
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 20})
    offset = 0
    for batch in BATCHES:
        for dt in batch:
            p.produce(topic, f"r{offset}".encode(), partition=0, timestamp=t0 + dt)
            offset += 1
        assert p.flush(15) == 0
    yield topic, t0


def test_confluent_kafka(broker: BrokerProcess, timed: tuple[str, int]) -> None:
    topic, t0 = timed
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"times-{topic}"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        for name, (dt, want) in PROBES.items():
            (found,) = c.offsets_for_times([TopicPartition(topic, 0, t0 + dt)], timeout=10)
            assert found.offset == (-1 if want is None else want), name
            tp = TopicPartition(topic, 0)
            info = admin.list_offsets({tp: OffsetSpec.for_timestamp(t0 + dt)}, request_timeout=10)[tp].result(15)
            expected = (-1, -1) if want is None else (want, t0 + STAMPS[want])
            assert (info.offset, info.timestamp) == expected, name
    finally:
        c.close()


def test_kafka_python(broker: BrokerProcess, timed: tuple[str, int]) -> None:
    topic, t0 = timed
    tp = KpTopicPartition(topic, 0)
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        for name, (dt, want) in PROBES.items():
            found = c.offsets_for_times({tp: t0 + dt})[tp]
            got = None if found is None else (found.offset, found.timestamp)
            assert got == (None if want is None else (want, t0 + STAMPS[want])), name
    finally:
        c.close()


def test_kafkajs(broker: BrokerProcess, timed: tuple[str, int]) -> None:
    topic, t0 = timed
    done = subprocess.run(["node", str(JS / "offsets_by_time.js"), broker.bootstrap, topic,
                           *(str(t0 + dt) for dt, _ in PROBES.values())],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    got = dict(zip(PROBES, json.loads(done.stdout), strict=True))
    assert got == {name: END if want is None else want for name, (_, want) in PROBES.items()}
