"""acks 0, 1 and -1 with every compression codec (none, gzip, snappy, lz4, zstd), through
confluent-kafka (librdkafka), kafka-python and KafkaJS, against one broker.

Each library sends the same records (null and empty keys and values, headers, one empty header
value) to partition 0 of a topic of its own for each (codec, acks), reads them back with its own
consumer, and they must come back exactly as sent. Expected answers:

- The stored batches carry the producer's codec: a topic's ``compression.type`` defaults to
  ``producer``, "retain the original compression codec set by the producer" (Kafka's topic config
  documentation; ``LogValidator.validateMessagesAndAssignOffsetsCompressed`` assigns offsets in
  place, without recompressing, when the target codec is the source's). A raw Fetch shows each
  batch's codec bits (``attributes & 0x07``), read with kafka-python's record parser.
- Offsets: with acks 1 and -1 the producer is told offsets 0..n-1. With acks 0 the broker sends no
  response (``KafkaApis.handleProduceRequest``: ``if (produceRequest.acks == 0)`` ... no answer), so
  no library can know an offset: Kafka's producer documentation says "the offset given back for
  each record will always be set to -1"; confluent-kafka's ``Message.offset()`` is None ("None if
  not available": librdkafka's offset is ``RD_KAFKA_OFFSET_INVALID``), KafkaJS's ``send()`` resolves
  to ``[]``. kafka-python 3.0.12 differs from Kafka's producer: its sender completes an acks=0 batch
  with a synthetic ``PartitionProduceResponse(error_code=0)`` whose ``base_offset`` is the schema
  default 0 (kafka/producer/sender.py), so it reports each record's index in its batch (one batch
  here: every record is sent before the 50 ms linger ends).

KafkaJS ships GZIP only; tests/js/codecs.js plugs in Snappy, LZ4 and ZSTD (pure JavaScript and
WebAssembly packages pinned in tests/js/package.json). One node process sends every KafkaJS
combination and reads them back with one consumer group, so its group join is paid once.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from hw_support import RawConnection, create_topic, fetch_batches
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from headwater.admin.local import BrokerProcess

JS = Path(__file__).resolve().parents[2] / "js"
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}  # the batch attributes' codec bits
ACKS = (0, 1, -1)
Record = tuple[str | None, str | None, dict[str, str]]
_FILL = "compressible " * 12  # every codec shrinks these (librdkafka sends a batch uncompressed otherwise)
RECORDS: list[Record] = [
    ("k0", f"v0 {_FILL}", {"h": "0"}),
    (None, f"v1 null key {_FILL}", {}),
    ("", f"v2 empty key {_FILL}", {"h": "2", "empty": ""}),
    ("k3 null value", None, {}),
    ("k4 empty value", "", {"h": "4"}),
    ("k5", f"v5 {_FILL}", {"a": "1", "b": "2", "c": "3"}),
    ("k6", f"v6 {_FILL}", {}),
    ("k7", f"v7 {_FILL}", {"last": "yes"}),
]
# What each producer reports as the records' offsets with acks=0 (see the module docstring).
ACKS0_OFFSETS: dict[str, list[int | None]] = {"confluent-kafka": [None] * len(RECORDS),
                                              "kafka-python": list(range(len(RECORDS)))}


def _bytes(s: str | None) -> bytes | None:
    return None if s is None else s.encode()


def _text(b: bytes | None) -> str | None:
    return None if b is None else b.decode()


def _headers(pairs: Any) -> dict[str, str]:
    return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in (pairs or [])}


def stored_codecs(bootstrap: str, topic: str) -> list[tuple[int, int, int]]:
    """(codec, record count, bytes after the batch header) of each batch of partition 0, from a raw Fetch."""
    with RawConnection(bootstrap) as conn:
        return [(b.compression_type, sum(1 for _ in b), len(b._buffer) - b.HEADER_STRUCT.size)
                for b in fetch_batches(conn, topic)]


# Records this small grow under every codec's framing (gzip's header alone is 18 bytes).
TOO_SMALL_TO_COMPRESS = 64


def check_codecs(batches: list[tuple[int, int, int]], codec: str, client: str) -> None:
    """Every batch carries the producer's codec, and the records are all there. librdkafka
    (``rd_kafka_msgset_writer_compress`` in rdkafka_msgset_writer.c) and kafka-python
    (``DefaultRecordBatchBuilder._maybe_compress``) send a batch uncompressed when compressing it would
    not make it smaller. That happens when a record without a value goes in a batch of its own (the
    client split the records, e.g. on a retry), so for them an uncompressed batch is expected
    exactly when it is too small to shrink. KafkaJS compresses every batch."""
    want = CODECS[codec]
    for c, _n, size in batches:
        if c != want:
            assert client != "kafkajs" and c == 0 and size < TOO_SMALL_TO_COMPRESS, batches
    assert any(c == want for c, _n, _size in batches), batches
    assert sum(n for _c, n, _size in batches) == len(RECORDS)


# --- one producer and one consumer per library -------------------------------------------------------------

def run_confluent(bootstrap: str, topic: str, codec: str, acks: int) -> tuple[list[int | None], list[Record]]:
    reports: list[Any] = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "compression.type": codec, "linger.ms": 50,
                  "message.timeout.ms": 15000})
    for key, value, headers in RECORDS:
        p.produce(topic, key=_bytes(key), value=_bytes(value), partition=0,
                  headers=[(k, v.encode()) for k, v in headers.items()] or None,
                  on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    assert p.flush(20) == 0
    assert [err for err, _ in reports] == [None] * len(RECORDS), reports
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"codecs-{topic}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[Record] = []
    deadline = time.monotonic() + 20
    try:
        while len(got) < len(RECORDS) and time.monotonic() < deadline:
            for m in c.consume(len(RECORDS), 0.5):
                assert m.error() is None, m.error()
                got.append((_text(m.key()), _text(m.value()), _headers(m.headers())))
    finally:
        c.close()
    return [offset for _, offset in reports], got


def run_kafka_python(bootstrap: str, topic: str, codec: str, acks: int) -> tuple[list[int | None], list[Record]]:
    p = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, compression_type=None if codec == "none" else codec,
                      enable_idempotence=acks == -1, linger_ms=50)
    try:
        futures = [p.send(topic, key=_bytes(key), value=_bytes(value), partition=0,
                          headers=[(k, v.encode()) for k, v in headers.items()])
                   for key, value, headers in RECORDS]
        p.flush(20)
        offsets = [f.get(timeout=0).offset for f in futures]
    finally:
        p.close(timeout=5)
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=10000)
    try:
        c.assign([KpTopicPartition(topic, 0)])
        c.seek(KpTopicPartition(topic, 0), 0)
        got = [(_text(m.key), _text(m.value), _headers(m.headers)) for _, m in zip(range(len(RECORDS)), c, strict=False)]
    finally:
        c.close()
    return offsets, got


@pytest.fixture(scope="module")
def kafkajs_results(broker: BrokerProcess) -> Iterator[tuple[dict[tuple[str, int], str], dict[str, Any]]]:
    """Every KafkaJS combination at once: (codec, acks) -> topic, and what the script printed."""
    topics = {(codec, acks): create_topic(broker.bootstrap, f"js-{codec}-acks{acks}-{uuid.uuid4().hex[:6]}", 1)
              for codec in CODECS for acks in ACKS}
    spec = {"broker": broker.bootstrap,
            "records": [{"key": k, "value": v, "headers": h} for k, v, h in RECORDS],
            "combos": [{"topic": t, "codec": codec, "acks": acks} for (codec, acks), t in topics.items()]}
    done = subprocess.run(["node", str(JS / "codecs_round_trip.js")], input=json.dumps(spec), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    yield topics, json.loads(done.stdout)


@pytest.mark.parametrize("acks", ACKS, ids=lambda a: f"acks{a}")
@pytest.mark.parametrize("codec", sorted(CODECS))
@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_python_clients_round_trip(broker: BrokerProcess, topic_name: Callable[..., str], client: str, codec: str,
                                   acks: int) -> None:
    topic = create_topic(broker.bootstrap, topic_name(), 1)
    run = run_confluent if client == "confluent-kafka" else run_kafka_python
    offsets, got = run(broker.bootstrap, topic, codec, acks)
    assert got == RECORDS
    assert offsets == (ACKS0_OFFSETS[client] if acks == 0 else list(range(len(RECORDS))))
    check_codecs(stored_codecs(broker.bootstrap, topic), codec, client)


@pytest.mark.parametrize("acks", ACKS, ids=lambda a: f"acks{a}")
@pytest.mark.parametrize("codec", sorted(CODECS))
def test_kafkajs_round_trip(broker: BrokerProcess, kafkajs_results: tuple[dict[tuple[str, int], str], dict[str, Any]],
                            codec: str, acks: int) -> None:
    topics, results = kafkajs_results
    topic = topics[(codec, acks)]
    got = results[topic]
    # One send() of all records to one partition: one RecordMetadata with base offset 0, none for acks 0.
    assert got["sent"] == ([] if acks == 0 else [0])
    assert [r["offset"] for r in got["records"]] == list(range(len(RECORDS)))
    assert [(r["key"], r["value"], r["headers"]) for r in got["records"]] == RECORDS
    check_codecs(stored_codecs(broker.bootstrap, topic), codec, "kafkajs")
