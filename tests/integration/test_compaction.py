"""Log compaction on a real broker process, with real clients.

* 100,000 updates over 1,000 keys (confluent-kafka, lz4) to a topic with ``cleanup.policy=compact``
  and small segments: once the cleaner has caught up, confluent-kafka, kafka-python and kcat all
  read back exactly the latest value per key below the active segment, and the active segment as
  written; the metrics endpoint shows what the cleaner read and wrote.
* A tombstone disappears once the clean part of the log is ``delete.retention.ms`` newer than it.
* The cleaner's topic configs go through CreateTopics, IncrementalAlterConfigs and AlterConfigs,
  show in DescribeConfigs, and reach the log: a compacted topic refuses a record without a key.
* kill -9 of the broker while the cleaner is swapping segments (seen by its ``.cleaned``/``.swap``
  files in the partition directory): after a restart every key still reads back its latest value,
  and the cleaner finishes the job.
"""

from __future__ import annotations

import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource
from hw_support import consume_partitions, create_topic, wait_until, watermarks
from kafka import KafkaConsumer, TopicPartition

from headwater.admin.local import BrokerProcess, free_port
from headwater.records.batch import iter_batches
from headwater.storage.checkpoint import read_offsets

KEYS = 1_000
UPDATES = 100_000
FAST_CLEANER = {"log.cleaner.backoff.ms": "100"}


def produce(bootstrap: str, topic: str, updates: list[tuple[bytes, bytes | None]], compression: str = "lz4") -> dict[int, tuple[bytes, bytes | None]]:
    """Produce in order; returns offset -> (key, value) from the delivery reports."""
    acked: dict[int, tuple[bytes, bytes | None]] = {}
    errors: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked[msg.offset()] = (msg.key(), msg.value())  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": compression,
                         "enable.idempotence": True, "acks": "all"})
    for key, value in updates:
        while True:
            try:
                producer.produce(topic, key=key, value=value, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]
    assert len(acked) == len(updates)
    return acked


def updates_for(n: int, keys: int, tag: str = "v") -> list[tuple[bytes, bytes | None]]:
    return [(b"key-%04d" % (i % keys), b"%s-%06d-" % (tag.encode(), i) + b"x" * 40) for i in range(n)]


def partition_dir(broker: BrokerProcess, topic: str) -> Path:
    return broker.data_dir / f"broker-{broker.broker_id}-logs" / f"{topic}-0"


def active_base(broker: BrokerProcess, topic: str) -> int:
    return max(int(p.name[:20]) for p in partition_dir(broker, topic).glob("*.log"))


def cleaner_checkpoint(broker: BrokerProcess, topic: str) -> int:
    path = broker.data_dir / f"broker-{broker.broker_id}-logs" / "cleaner-offset-checkpoint"
    return read_offsets(path).get((topic, 0), -1)


def caught_up(broker: BrokerProcess, topic: str) -> bool:
    return cleaner_checkpoint(broker, topic) == active_base(broker, topic)


def read_back(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    end = watermarks(bootstrap, topic, [0])[0][1]
    return sorted((c.offset, c.key, c.value) for c in consume_partitions(bootstrap, topic, {0: end}))


def latest(acked: dict[int, tuple[bytes, bytes | None]]) -> dict[bytes, tuple[int, bytes | None]]:
    out: dict[bytes, tuple[int, bytes | None]] = {}
    for offset in sorted(acked):
        key, value = acked[offset]
        out[key] = (offset, value)
    return out


def check_compacted(records: list[tuple[int, bytes, bytes | None]], acked: dict[int, tuple[bytes, bytes | None]],
                    boundary: int) -> None:
    """Below ``boundary`` one record per key, its latest there; from it on every record as written."""
    want = latest(acked)
    want_below = latest({o: kv for o, kv in acked.items() if o < boundary})
    below = [r for r in records if r[0] < boundary]
    assert {k: (o, v) for o, k, v in below} == want_below
    assert len(below) == len(want_below), "a key appears twice in the cleaned part"
    assert [r for r in records if r[0] >= boundary] == [(o, *acked[o]) for o in sorted(acked) if o >= boundary]
    seen = {k: (o, v) for o, k, v in records}
    assert seen == want  # every key, with its latest value


def test_compacted_topic_reads_back_latest_per_key(broker_factory: Callable[..., BrokerProcess],
                                                   topic_name: Callable[..., str]) -> None:
    metrics_port = free_port()
    broker = broker_factory({**FAST_CLEANER, "metrics.port": str(metrics_port)})
    topic = create_topic(broker.bootstrap, topic_name("compact"), 1,
                         {"cleanup.policy": "compact", "segment.bytes": "131072", "min.cleanable.dirty.ratio": "0.01"})
    # A first idempotent producer whose records all get replaced: its last batch stays in the
    # cleaned log as an empty batch (its sequence state), which every client must read past.
    acked = produce(broker.bootstrap, topic, updates_for(50, 50, "early"))
    acked.update(produce(broker.bootstrap, topic, updates_for(UPDATES, KEYS)))
    wait_until(lambda: caught_up(broker, topic), timeout_s=60)
    boundary = active_base(broker, topic)
    assert boundary > 0
    headers = [h for seg in sorted(partition_dir(broker, topic).glob("*.log"))
               for _, h in iter_batches(seg.read_bytes(), verify_crc=True)]
    assert any(h.record_count == 0 and h.last_offset < boundary for h in headers), "no empty batch to read past"
    records = read_back(broker.bootstrap, topic)
    assert len(records) < UPDATES // 2 and records[0][0] >= 50  # the early records are gone
    check_compacted(records, acked, boundary)
    # kafka-python reads the same records from the cleaned batches (gaps, rebuilt lz4 batches).
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=5_000)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got = []
        while len(got) < len(records):
            batch = consumer.poll(timeout_ms=2_000)
            if not batch:
                break
            got.extend((m.offset, m.key, m.value) for m in batch.get(tp, []))
    finally:
        consumer.close()
    assert got == records
    # kcat (librdkafka 2.0) too, from the beginning to the end.
    out = subprocess.run(["/usr/bin/kcat", "-b", broker.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning",
                          "-e", "-q", "-f", "%o %k %s\n"], capture_output=True, text=True, timeout=60, check=True).stdout
    assert [tuple(line.split(" ")) for line in out.splitlines()] == [
        (str(o), k.decode(), v.decode() if v is not None else "") for o, k, v in records]
    figures = scrape_cleaner(metrics_port)
    assert figures["runs"] >= 1 and figures["bytes_read"] > figures["bytes_written"] > 0
    assert figures["last_run_duration_seconds"] > 0 and figures["uncleanable_partitions"] == 0


def scrape_cleaner(port: int) -> dict[str, float]:
    def scrape() -> dict[str, float]:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        prefix = "headwater_log_cleaner_"
        return {line.split("{")[0][len(prefix):]: float(line.rpartition(" ")[2])
                for line in text.splitlines() if line.startswith(prefix)}

    # The broker publishes its figures once a second.
    wait_until(lambda: scrape().get("runs", 0) >= 1, timeout_s=10)
    return scrape()


def test_tombstone_disappears_after_delete_retention(broker_factory: Callable[..., BrokerProcess],
                                                     topic_name: Callable[..., str]) -> None:
    broker = broker_factory(FAST_CLEANER)
    topic = create_topic(broker.bootstrap, topic_name("tomb"), 1,
                         {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01",
                          "delete.retention.ms": "1000"})
    produce(broker.bootstrap, topic, [(b"gone", b"old"), *updates_for(50, 10)], "none")
    produce(broker.bootstrap, topic, [(b"gone", None)], "none")
    deadline = time.monotonic() + 30
    round_ = 0
    while True:
        round_ += 1
        # Newer data moves the clean part's newest timestamp past the tombstone's + 1 s.
        produce(broker.bootstrap, topic, updates_for(60, 10, f"r{round_}"), "none")
        keys = [k for _, k, _ in read_back(broker.bootstrap, topic)]
        if b"gone" not in keys:
            break
        assert time.monotonic() < deadline, "the tombstone is still there"
        time.sleep(0.3)
    assert set(keys) == {b"key-%04d" % i for i in range(10)}


def test_kill9_mid_clean_loses_nothing(broker_factory: Callable[..., BrokerProcess],
                                       topic_name: Callable[..., str]) -> None:
    broker = broker_factory({"log.cleaner.enable": "false"})
    topic = create_topic(broker.bootstrap, topic_name("kill"), 1,
                         {"cleanup.policy": "compact", "segment.bytes": "65536"})
    acked = produce(broker.bootstrap, topic, updates_for(UPDATES, KEYS), "none")
    broker.stop()
    # Restart with the cleaner on, and kill it as soon as a cleaned segment is on its way in.
    broker.props = FAST_CLEANER
    broker.write_config()
    broker.start()
    directory = partition_dir(broker, topic)

    def mid_swap() -> bool:
        return any(p.name.endswith((".cleaned", ".swap")) for p in directory.iterdir())

    wait_until(mid_swap, timeout_s=60, interval_s=0.005)
    broker.kill9()
    # The run did not finish (its checkpoint is written last). Whether the kill left .cleaned or
    # .swap files depends on the instant; the unit tests stop a clean after every single step.
    assert cleaner_checkpoint(broker, topic) == -1
    broker.start()
    check_compacted_or_dirty = read_back(broker.bootstrap, topic)
    assert {k: (o, v) for o, k, v in check_compacted_or_dirty} == latest(acked)
    assert set(check_compacted_or_dirty) <= {(o, *kv) for o, kv in acked.items()}
    # The cleaner, still on, finishes after the restart.
    wait_until(lambda: caught_up(broker, topic), timeout_s=60)
    check_compacted(read_back(broker.bootstrap, topic), acked, active_base(broker, topic))


def _describe(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    res = ConfigResource("topic", topic)
    return admin.describe_configs([res])[res].result(timeout=15)  # type: ignore[no-any-return]


def _produce_keyless(bootstrap: str, topic: str) -> int | None:
    """The error code of producing one record without a key (None: accepted)."""
    codes: list[int | None] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10_000, "retries": 0})
    producer.produce(topic, value=b"no key", partition=0,
                     on_delivery=lambda err, _m: codes.append(None if err is None else err.code()))
    producer.flush(15)
    return codes[0]


def test_cleaner_configs_flow_to_the_log(broker: BrokerProcess, topic_name: Callable[..., str]) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = create_topic(broker.bootstrap, topic_name("cfg"), 1,
                         {"cleanup.policy": "compact,delete", "delete.retention.ms": "5000"})
    configs = _describe(admin, topic)
    assert (configs["cleanup.policy"].value, configs["delete.retention.ms"].value) == ("compact,delete", "5000")
    assert configs["delete.retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert (configs["min.cleanable.dirty.ratio"].value, configs["min.compaction.lag.ms"].value,
            configs["max.compaction.lag.ms"].value) == ("0.5", "0", str((1 << 63) - 1))
    assert _produce_keyless(broker.bootstrap, topic) == KafkaError.INVALID_RECORD

    res = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("min.compaction.lag.ms", "100", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("max.compaction.lag.ms", "600000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(timeout=15)
    configs = _describe(admin, topic)
    assert (configs["min.compaction.lag.ms"].value, configs["max.compaction.lag.ms"].value) == ("100", "600000")
    assert _produce_keyless(broker.bootstrap, topic) is None  # no longer compacted: keys are optional

    for name, value in (("min.cleanable.dirty.ratio", "1.5"), ("min.compaction.lag.ms", "700000")):
        bad = ConfigResource("topic", topic, incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
        with pytest.raises(KafkaException) as e:
            admin.incremental_alter_configs([bad])[bad].result(timeout=15)
        assert e.value.args[0].code() == KafkaError.INVALID_CONFIG, name  # the second: above max.compaction.lag.ms
    assert _describe(admin, topic)["min.compaction.lag.ms"].value == "100"
    # The legacy AlterConfigs replaces the whole set.
    legacy = ConfigResource("topic", topic, set_config={"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.2"})
    admin.alter_configs([legacy])[legacy].result(timeout=15)
    configs = _describe(admin, topic)
    assert (configs["cleanup.policy"].value, configs["min.cleanable.dirty.ratio"].value) == ("compact", "0.2")
    assert configs["delete.retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert _produce_keyless(broker.bootstrap, topic) == KafkaError.INVALID_RECORD
    # DeleteRecords needs "delete" in the policy, as in Kafka.
    produce(broker.bootstrap, topic, [(b"k", b"v")], "none")
    tp = ConfluentTopicPartition(topic, 0, 1)
    with pytest.raises(KafkaException) as e:
        admin.delete_records([tp])[tp].result(timeout=15)
    assert e.value.args[0].code() == KafkaError.POLICY_VIOLATION
