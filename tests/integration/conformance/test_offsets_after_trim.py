"""OFFSET_BEGINNING and OFFSET_END after DeleteRecords and after log compaction, through
confluent-kafka (librdkafka), kafka-python and KafkaJS.

Each library gets two topics of its own on one broker (its cleaner checks every 100 ms):
``trimmed``, 10 records whose first 4 the library's own admin client deletes (DeleteRecords), and
``compacted`` (``cleanup.policy=compact``, 4 KiB segments, ``min.cleanable.dirty.ratio=0.01``), 60
updates of 5 keys in 6 batches, which the cleaner has compacted up to the active segment before the
tests start. Each library then asks ListOffsets EARLIEST (-2) and LATEST (-1) through its admin or
consumer API, reads with a consumer that starts at the beginning (``auto.offset.reset=earliest`` /
OFFSET_BEGINNING) and one that starts at the end (``latest`` / OFFSET_END) and is then sent a new
record (keyed: a compacted topic refuses a record without a key).

Expected answers, from Kafka 3.9:
- EARLIEST is the log start offset: ``UnifiedLog.fetchOffsetByTimestamp`` answers
  ``TimestampAndOffset(NO_TIMESTAMP, logStartOffset, ...)`` for ``EARLIEST_TIMESTAMP``. DeleteRecords
  moves it (``ReplicaManager.deleteRecords`` -> ``Partition.deleteRecordsOnLeader`` ->
  ``UnifiedLog.maybeIncrementLogStartOffset``), so the trimmed topic's is 4. Compaction does not:
  ``LogCleaner``'s ``Cleaner.cleanSegments`` writes each group of segments into one new segment
  with the group's first base offset (``createNewCleanedSegment(..., segments.head.baseOffset)``)
  and ``UnifiedLog.replaceSegments`` swaps it in without touching ``logStartOffset``, so the
  compacted topic's stays 0 although the record at offset 0 is gone.
- LATEST, for a consumer, is the high watermark: ``Partition.fetchOffsetForTimestamp`` answers
  ``lastFetchableOffset`` (``localLog.highWatermark`` for READ_UNCOMMITTED), here the log end
  (10, 60): compaction never removes the active segment's records.
- A consumer that starts at the beginning fetches from the log start offset and reads what is
  there: offsets 4..9 of the trimmed topic, and of the compacted one the latest record of each key
  below the cleaned boundary (the active segment's base offset) and every record from it on
  (Kafka's documentation, "Log Compaction": the log head is kept as written, the tail keeps the last
  value of each key). One that starts at the end reads exactly the record appended afterwards, at
  the old high watermark.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cluster_support import wait_for
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from hw_support import create_topic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import OffsetSpec as KpOffsetSpec
from kafka import TopicPartition as KpTopicPartition

from headwater.admin.local import BrokerProcess, free_port
from headwater.storage.checkpoint import read_offsets

JS = Path(__file__).resolve().parents[2] / "js"
CLIENTS = ("confluent-kafka", "kafka-python", "kafkajs")
TRIMMED, DELETE_BEFORE = 10, 4
KEYS, ROUNDS = 5, 6  # each round writes every key twice, in one batch
COMPACTED = KEYS * 2 * ROUNDS
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"}
Rec = tuple[int, str | None, str | None]  # offset, key, value


@dataclass
class Topics:
    trimmed: str
    compacted: str
    survivors: list[Rec]  # what a read of the compacted topic from offset 0 must return


def _text(b: bytes | None) -> str | None:
    return None if b is None else b.decode()


def _log_dir(broker: BrokerProcess) -> Path:
    return broker.data_dir / f"broker-{broker.broker_id}-logs"


def _active_base(broker: BrokerProcess, topic: str) -> int:
    return max(int(p.name[:20]) for p in (_log_dir(broker) / f"{topic}-0").glob("*.log"))


def _cleaned_to(broker: BrokerProcess, topic: str) -> int | None:
    """The active segment's base offset once the cleaner's checkpoint has reached it, else None."""
    base = _active_base(broker, topic)
    done = read_offsets(_log_dir(broker) / "cleaner-offset-checkpoint").get((topic, 0), -1)
    return base if base > 0 and done == base else None


@pytest.fixture(scope="module")
def trim_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(1, free_port(), tmp_path_factory.mktemp("offsets-after-trim"), {
        "log.cleaner.backoff.ms": "100", "group.initial.rebalance.delay.ms": "0"})
    try:
        b.start()
        yield b
    finally:
        b.stop()
        if b.alive:
            b.kill9()


@pytest.fixture(scope="module")
def topics(trim_broker: BrokerProcess) -> dict[str, Topics]:
    """Each library's two topics; the compacted ones written and cleaned up to their active segment."""
    bootstrap = trim_broker.bootstrap
    out: dict[str, tuple[str, str, list[Rec]]] = {}
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    for client in CLIENTS:
        tag = f"{client}-{uuid.uuid4().hex[:6]}"
        trimmed = create_topic(bootstrap, f"trimmed-{tag}", 1)
        compacted = create_topic(bootstrap, f"compacted-{tag}", 1, COMPACT)
        for i in range(TRIMMED):
            p.produce(trimmed, f"r{i}".encode(), partition=0)
        written: list[Rec] = []
        for r in range(ROUNDS):
            for i in range(KEYS * 2):
                key, value = f"k{i % KEYS}", f"round {r} write {i} " + "x" * 300
                p.produce(compacted, value.encode(), key.encode(), partition=0)
                written.append((len(written), key, value))
            assert p.flush(15) == 0  # one batch per round: several segments
        out[client] = (trimmed, compacted, written)
    result = {}
    for client, (trimmed, compacted, written) in out.items():
        boundary = wait_for(lambda t=compacted: _cleaned_to(trim_broker, t), 60, f"the cleaner to clean {compacted}")
        latest = {key: offset for offset, key, _ in written if offset < boundary}
        survivors = [rec for rec in written if rec[0] >= boundary or latest[rec[1]] == rec[0]]
        assert survivors[0][0] > 0  # offset 0 was replaced: compaction removed it
        result[client] = Topics(trimmed, compacted, survivors)
    return result


def _expected_earliest(t: Topics) -> dict[str, list[Rec]]:
    return {t.trimmed: [(i, None, f"r{i}") for i in range(DELETE_BEFORE, TRIMMED)], t.compacted: t.survivors}


# --- confluent-kafka -------------------------------------------------------------------------------------------

Until = Callable[[dict[str, list[Rec]]], bool]


def _confluent_read(bootstrap: str, start: list[TopicPartition], reset: str, until: Until,
                    then: Callable[[], None] | None = None) -> dict[str, list[Rec]]:
    """Read from ``start`` until ``until(seen)``; ``then`` runs once every partition has its
    starting offset.

    librdkafka's ``position()`` stays OFFSET_INVALID until a message is consumed, so readiness comes
    from its statistics (STATISTICS.md: a partition's ``fetch_state`` is ``active`` and
    ``next_offset`` the offset it fetches from once the offset reset is done)."""
    stats: list[dict[str, Any]] = []
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"trim-{uuid.uuid4().hex[:8]}", "auto.offset.reset": reset,
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100, "statistics.interval.ms": 100,
                  "stats_cb": lambda text: stats.append(json.loads(text))})
    seen: dict[str, list[Rec]] = {tp.topic: [] for tp in start}

    def started() -> bool:
        if not stats:
            return False
        parts = [stats[-1]["topics"].get(tp.topic, {}).get("partitions", {}).get("0", {}) for tp in start]
        return all(p.get("fetch_state") == "active" and p.get("next_offset", -1) >= 0 for p in parts)

    try:
        c.assign(start)
        deadline = time.monotonic() + 30
        while not until(seen):
            assert time.monotonic() < deadline, f"timed out: {seen}"
            for m in c.consume(100, 0.1):
                assert m.error() is None, m.error()
                seen[m.topic()].append((m.offset(), _text(m.key()), _text(m.value())))
            if then is not None and started():
                then()
                then = None
    finally:
        c.close()
    return seen


def run_confluent(bootstrap: str, t: Topics) -> dict[str, Any]:
    out: dict[str, Any] = {}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.delete_records([TopicPartition(t.trimmed, 0, DELETE_BEFORE)]).values():
        fut.result(15)
    both = (t.trimmed, t.compacted)
    for name, spec in (("low", OffsetSpec.earliest()), ("high", OffsetSpec.latest())):
        tps = {TopicPartition(topic, 0): spec for topic in both}
        out[name] = {tp.topic: fut.result(15).offset for tp, fut in admin.list_offsets(tps, request_timeout=10).items()}
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    out["low_high"] = {topic: c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
                       for topic in both}
    c.close()

    def at_end(seen: dict[str, list[Rec]]) -> bool:
        return all(seen[topic] and seen[topic][-1][0] >= out["high"][topic] - 1 for topic in both)

    # auto.offset.reset=earliest (no committed offset), and OFFSET_BEGINNING.
    out["earliest"] = _confluent_read(bootstrap, [TopicPartition(topic, 0) for topic in both], "earliest", at_end)
    out["beginning"] = _confluent_read(bootstrap, [TopicPartition(topic, 0, OFFSET_BEGINNING) for topic in both],
                                       "error", at_end)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})

    def append() -> None:
        for topic in both:
            p.produce(topic, b"new", b"new", partition=0)
        assert p.flush(15) == 0

    def one_each(seen: dict[str, list[Rec]]) -> bool:
        return all(seen[topic] for topic in both)

    # auto.offset.reset=latest, then OFFSET_END: each reads only what was appended after it started.
    out["latest"] = _confluent_read(bootstrap, [TopicPartition(topic, 0) for topic in both], "latest", one_each, append)
    out["end"] = _confluent_read(bootstrap, [TopicPartition(topic, 0, OFFSET_END) for topic in both], "error",
                                 one_each, append)
    return out


# --- kafka-python ----------------------------------------------------------------------------------------------

def _kp_read(bootstrap: str, topics: tuple[str, ...], reset: str,
             position: Callable[[KafkaConsumer, list[KpTopicPartition]], None], until: Until,
             then: Callable[[], None] | None = None) -> dict[str, list[Rec]]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, auto_offset_reset=reset, enable_auto_commit=False,
                      fetch_max_wait_ms=100)
    seen: dict[str, list[Rec]] = {topic: [] for topic in topics}
    try:
        tps = [KpTopicPartition(topic, 0) for topic in topics]
        c.assign(tps)
        position(c, tps)
        for tp in tps:
            c.position(tp)  # blocks until the starting offset is known
        if then is not None:
            then()
        deadline = time.monotonic() + 30
        while not until(seen):
            assert time.monotonic() < deadline, f"timed out: {seen}"
            for tp, msgs in c.poll(timeout_ms=200).items():
                seen[tp.topic] += [(m.offset, _text(m.key), _text(m.value)) for m in msgs]
    finally:
        c.close()
    return seen


def run_kafka_python(bootstrap: str, t: Topics) -> dict[str, Any]:
    out: dict[str, Any] = {}
    both = (t.trimmed, t.compacted)
    tps = [KpTopicPartition(topic, 0) for topic in both]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_records({KpTopicPartition(t.trimmed, 0): DELETE_BEFORE})
        low = admin.list_partition_offsets(dict.fromkeys(tps, KpOffsetSpec.EARLIEST))
        high = admin.list_partition_offsets(dict.fromkeys(tps, KpOffsetSpec.LATEST))
        out["low_high"] = {tp.topic: (low[tp].offset, high[tp].offset) for tp in tps}
    finally:
        admin.close()
    c = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        out["low"] = {tp.topic: off for tp, off in c.beginning_offsets(tps).items()}
        out["high"] = {tp.topic: off for tp, off in c.end_offsets(tps).items()}
    finally:
        c.close()

    def at_end(seen: dict[str, list[Rec]]) -> bool:
        return all(seen[topic] and seen[topic][-1][0] >= out["high"][topic] - 1 for topic in both)

    def reset(_c: KafkaConsumer, _tps: list[KpTopicPartition]) -> None:
        pass  # no committed offset, no group: auto_offset_reset decides

    def to_beginning(c: KafkaConsumer, tps: list[KpTopicPartition]) -> None:
        c.seek_to_beginning(*tps)

    def to_end(c: KafkaConsumer, tps: list[KpTopicPartition]) -> None:
        c.seek_to_end(*tps)

    out["earliest"] = _kp_read(bootstrap, both, "earliest", reset, at_end)
    out["beginning"] = _kp_read(bootstrap, both, "latest", to_beginning, at_end)
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all")

    def append() -> None:
        for topic in both:
            p.send(topic, b"new", b"new", partition=0)
        p.flush(15)

    def one_each(seen: dict[str, list[Rec]]) -> bool:
        return all(seen[topic] for topic in both)

    try:
        out["latest"] = _kp_read(bootstrap, both, "latest", reset, one_each, append)
        out["end"] = _kp_read(bootstrap, both, "earliest", to_end, one_each, append)
    finally:
        p.close(timeout=5)
    return out


# --- KafkaJS ---------------------------------------------------------------------------------------------------

def run_kafkajs(bootstrap: str, t: Topics) -> dict[str, Any]:
    spec = {"broker": bootstrap, "trimmed": t.trimmed, "compacted": t.compacted, "deleteBefore": DELETE_BEFORE}
    done = subprocess.run(["node", str(JS / "offsets_after_trim.js")], input=json.dumps(spec), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    for name in ("earliest", "latest"):
        out[name] = {topic: [tuple(r) for r in recs] for topic, recs in out[name].items()}
    return out


RUN: dict[str, Callable[[str, Topics], dict[str, Any]]] = {
    "confluent-kafka": run_confluent, "kafka-python": run_kafka_python, "kafkajs": run_kafkajs}


@pytest.mark.parametrize("client", CLIENTS)
def test_beginning_and_end_after_delete_records_and_compaction(trim_broker: BrokerProcess, topics: dict[str, Topics],
                                                               client: str) -> None:
    t = topics[client]
    got = RUN[client](trim_broker.bootstrap, t)
    # ListOffsets EARLIEST: the log start offset (DeleteRecords moved it; compaction did not).
    assert got["low"] == {t.trimmed: DELETE_BEFORE, t.compacted: 0}
    # ListOffsets LATEST: the high watermark.
    assert got["high"] == {t.trimmed: TRIMMED, t.compacted: COMPACTED}
    # The same through the library's other API where it has one (confluent-kafka's consumer
    # get_watermark_offsets, kafka-python's admin list_partition_offsets).
    if "low_high" in got:
        assert got["low_high"] == {t.trimmed: (DELETE_BEFORE, TRIMMED), t.compacted: (0, COMPACTED)}
    want = _expected_earliest(t)
    for start in ("earliest", "beginning"):
        if start in got:
            assert got[start] == want, start
    # A consumer that starts at the end reads the appended record only (two such consumers for the
    # Python libraries, one after the other: each appends one record).
    high = got["high"]
    assert got["latest"] == {topic: [(high[topic], "new", "new")] for topic in high}
    if "end" in got:
        assert got["end"] == {topic: [(high[topic] + 1, "new", "new")] for topic in high}
