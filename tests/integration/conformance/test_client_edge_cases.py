"""Edge cases that client libraries' own tests exercise, with confluent-kafka (librdkafka),
kafka-python and KafkaJS against one broker.

Expected answers, from Kafka's broker:
- A batch larger than the topic's ``max.message.bytes`` is MESSAGE_TOO_LARGE (10) and one under it is
  written (``UnifiedLog.analyzeAndValidateRecords`` / ``LogValidator``); each client reports the code.
- Null and empty keys and values, and headers with empty values, come back exactly as sent: the
  broker stores producers' batches as they are (``LogValidator`` only checks them).
- After DeleteRecords up to offset 4 of 10, the earliest offset is 4 and the latest 10
  (``ReplicaManager.deleteRecords``, ``UnifiedLog.fetchOffsetByTimestamp``); a timestamp after the
  last record has no offset (-1), which each client shows its own way.
- CreateTopics of an illegal name is INVALID_TOPIC_EXCEPTION (17) (``Topic.validate``); Metadata for
  a missing topic without auto-creation is UNKNOWN_TOPIC_OR_PARTITION (3).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from hw_support import create_topic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import NewTopic as KpNewTopic
from kafka.errors import KafkaError as KpError

from headwater.admin.local import BrokerProcess

JS = Path(__file__).resolve().parents[2] / "js"
UNDER, OVER = 9000, 10100  # value sizes around max.message.bytes=10000
SENT = [(None, "v-null-key", {}), ("", "v-empty-key", {}), ("k-null-value", None, {}), ("k-empty-value", "", {}),
        ("k-headers", "v", {"a": "1", "b": ""})]
# What each library shows for "no offset for that timestamp": the broker answers -1, which KafkaJS's
# admin replaces with the latest offset (fetchTopicOffsetsByTimestamp) and kafka-python with None.
AFTER_LAST = {"confluent-kafka": -1, "kafka-python": None, "kafkajs": 10}
MESSAGE_TOO_LARGE, INVALID_TOPIC_EXCEPTION, UNKNOWN_TOPIC_OR_PARTITION = 10, 17, 3

def _headers(pairs: Any) -> dict[str, str]:
    return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in (pairs or [])}


def run_confluent(bootstrap: str, limited: str, records: str, trimmed: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 10000})

    def send(size: int) -> int:
        result: list[Any] = []
        p.produce(limited, b"x" * size, on_delivery=lambda err, _m: result.append(err))
        p.flush(15)
        assert len(result) == 1
        # (A KafkaError compared with None raises inside librdkafka's binding: test identity.)
        return 0 if result[0] is None else int(result[0].code())

    out["under"], out["over"] = send(UNDER), send(OVER)
    for key, value, headers in SENT:
        p.produce(records, key=None if key is None else key.encode(), value=None if value is None else value.encode(),
                  headers=[(k, v.encode()) for k, v in headers.items()] or None)
    for i in range(10):
        p.produce(trimmed, f"r{i}".encode())
    assert p.flush(15) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "edge-confluent", "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(records, 0, 0)])
    seen: list[Any] = []
    deadline = time.monotonic() + 30
    while len(seen) < len(SENT) and time.monotonic() < deadline:
        for m in c.consume(10, 0.5):
            if m.error() is None:
                seen.append((None if m.key() is None else m.key().decode(),
                             None if m.value() is None else m.value().decode(), _headers(m.headers())))
    out["records"] = seen
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.delete_records([TopicPartition(trimmed, 0, 4)]).values():
        fut.result(15)
    out["low"], out["high"] = c.get_watermark_offsets(TopicPartition(trimmed, 0), timeout=10, cached=False)
    found = c.offsets_for_times([TopicPartition(trimmed, 0, int(time.time() * 1000) + 60000)], timeout=10)
    out["after_last"] = found[0].offset
    c.close()
    try:
        admin.create_topics([NewTopic("bad name!", 1, 1)])["bad name!"].result(15)
        out["bad_name"] = 0
    except KafkaException as exc:
        out["bad_name"] = int(exc.args[0].code())
    md = admin.list_topics(topic=f"missing-{time.monotonic_ns()}", timeout=10)
    (t,) = md.topics.values()
    out["missing"] = int(t.error.code()) if t.error is not None else 0
    del admin
    return out


def run_kafka_python(bootstrap: str, limited: str, records: str, trimmed: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=0)

    def send(size: int) -> int:
        try:
            p.send(limited, b"x" * size).get(timeout=15)
            return 0
        except KpError as exc:
            return int(getattr(exc, "errno", -1))

    out["under"], out["over"] = send(UNDER), send(OVER)
    for key, value, headers in SENT:
        p.send(records, key=None if key is None else key.encode(), value=None if value is None else value.encode(),
               headers=[(k, v.encode()) for k, v in headers.items()])
    for i in range(10):
        p.send(trimmed, f"r{i}".encode())
    p.flush(15)
    p.close()
    c = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=10000)
    c.assign([KpTopicPartition(records, 0)])
    out["records"] = [(None if m.key is None else m.key.decode(), None if m.value is None else m.value.decode(),
                       _headers(m.headers)) for _, m in zip(range(len(SENT)), c, strict=False)]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.delete_records({KpTopicPartition(trimmed, 0): 4})
    tp = KpTopicPartition(trimmed, 0)
    out["low"], out["high"] = c.beginning_offsets([tp])[tp], c.end_offsets([tp])[tp]
    found = c.offsets_for_times({tp: int(time.time() * 1000) + 60000})[tp]
    out["after_last"] = None if found is None else found.offset
    c.close()
    try:
        admin.create_topics([KpNewTopic("bad name!", 1, 1)])
        out["bad_name"] = 0
    except KpError as exc:
        out["bad_name"] = int(getattr(exc, "errno", -1))
    try:
        described = admin.describe_topics([f"missing-{time.monotonic_ns()}"])
        out["missing"] = int(described[0]["error_code"]) if described else 0
    except KpError as exc:
        out["missing"] = int(getattr(exc, "errno", -1))
    admin.close()
    return out


def run_kafkajs(bootstrap: str, limited: str, records: str, trimmed: str) -> dict[str, Any]:
    done = subprocess.run(["node", str(JS / "edge_cases.js"), bootstrap, limited, records, trimmed], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    out["records"] = [(r["key"], r["value"], r["headers"]) for r in out["records"]]
    return out


CLIENTS: dict[str, Callable[[str, str, str, str], dict[str, Any]]] = {
    "confluent-kafka": run_confluent, "kafka-python": run_kafka_python, "kafkajs": run_kafkajs}


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_edge_cases(broker: BrokerProcess, topic_name: Callable[..., str], client: str) -> None:
    limited = create_topic(broker.bootstrap, topic_name("limited"), 1, {"max.message.bytes": "10000"})
    records = create_topic(broker.bootstrap, topic_name("records"), 1)
    trimmed = create_topic(broker.bootstrap, topic_name("trimmed"), 1)
    got = CLIENTS[client](broker.bootstrap, limited, records, trimmed)
    assert (got["under"], got["over"]) == (0, MESSAGE_TOO_LARGE), got
    assert got["records"] == [(k, v, h) for k, v, h in SENT], got
    assert (got["low"], got["high"], got["after_last"]) == (4, 10, AFTER_LAST[client]), got
    assert (got["bad_name"], got["missing"]) == (INVALID_TOPIC_EXCEPTION, UNKNOWN_TOPIC_OR_PARTITION), got
