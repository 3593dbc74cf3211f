"""The demo's applications: producers that remember what the cluster acknowledged, and a consumer
that reads every partition back from offset 0 to check that nothing acknowledged was lost."""

from __future__ import annotations

import hashlib
import threading
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

Key = tuple[str, int, int]  # topic, partition, offset


def digest(key: bytes | None, value: bytes | None) -> bytes:
    return hashlib.blake2b((key or b"") + b"\0" + (value or b""), digest_size=8).digest()


class Ledger:
    """Every acknowledged record's digest by (topic, partition, offset), and the failures."""

    def __init__(self) -> None:
        self.acked: dict[Key, bytes] = {}
        self.failed = 0
        self._lock = threading.Lock()

    def on_ack(self, key: bytes, value: bytes) -> object:
        d = digest(key, value)

        def cb(md: object) -> None:
            with self._lock:
                self.acked[(md.topic, md.partition, md.offset)] = d  # type: ignore[attr-defined]
        return cb

    def on_error(self, _exc: object) -> None:
        with self._lock:
            self.failed += 1

    def count(self, topic: str | None = None) -> int:
        with self._lock:
            return len(self.acked) if topic is None else sum(1 for t, _p, _o in self.acked if t == topic)


def producer(bootstrap: str, client_id: str) -> KafkaProducer:
    """Kafka's defaults since 3.0: acks=all with idempotence."""
    return KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5,
                         retries=100, client_id=client_id)


def preload(bootstrap: str, topic: str, partitions: int, megabytes_each: int, ledger: Ledger) -> float:
    """``megabytes_each`` MB of 4 KiB records into each partition, acks=all; seconds taken."""
    t0 = time.monotonic()
    p = producer(bootstrap, "headwater-demo-loader")
    value_base = b"x" * 4000
    for i in range(megabytes_each * 256):
        for part in range(partitions):
            key = f"load-{part}-{i}".encode()
            value = key + value_base
            p.send(topic, key=key, value=value, partition=part).add_callback(ledger.on_ack(key, value)) \
                .add_errback(ledger.on_error)
    p.flush()
    p.close()
    return time.monotonic() - t0


class LiveProducer(threading.Thread):
    """Keyed acks=all records at a steady pace until stopped, as an application keeps writing
    while operators move its partitions."""

    def __init__(self, bootstrap: str, topic: str, ledger: Ledger, per_second: int = 200) -> None:
        super().__init__(daemon=True, name="live-producer")
        self._producer = producer(bootstrap, "headwater-demo-live")
        self._topic, self._ledger, self._pause = topic, ledger, 1.0 / per_second
        self._stop_event = threading.Event()
        self.sent = 0

    def run(self) -> None:
        while not self._stop_event.wait(self._pause):
            key, value = f"user-{self.sent % 100}".encode(), f"event {self.sent}".encode()
            self._producer.send(self._topic, key=key, value=value).add_callback(self._ledger.on_ack(key, value)) \
                .add_errback(self._ledger.on_error)
            self.sent += 1
        self._producer.flush()
        self._producer.close()

    def finish(self) -> None:
        self._stop_event.set()
        self.join(120)


def missing(bootstrap: str, ledger: Ledger, partitions: dict[str, int]) -> tuple[int, int]:
    """Read every partition of these topics from offset 0: (records read, acknowledged records
    missing or changed)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, client_id="headwater-demo-reader",
                             consumer_timeout_ms=15_000, max_partition_fetch_bytes=4 << 20)
    tps = [TopicPartition(t, p) for t, n in partitions.items() for p in range(n)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    ends = consumer.end_offsets(tps)
    remaining = sum(ends.values())
    read: dict[Key, bytes] = {}
    for record in consumer:
        read[(record.topic, record.partition, record.offset)] = digest(record.key, record.value)
        remaining -= 1
        if remaining <= 0:
            break
    consumer.close()
    lost = sum(1 for k, d in ledger.acked.items() if k[0] in partitions and read.get(k) != d)
    return len(read), lost
