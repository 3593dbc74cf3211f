"""What the replication tests share: reading a broker's Prometheus endpoint, loading a partition."""

from __future__ import annotations

import os
import time
import urllib.request

from cluster_support import LocalCluster
from confluent_kafka import Producer

Metrics = dict[str, dict[frozenset[tuple[str, str]], float]]
VALUE_BYTES = 10_000


def scrape(cluster: LocalCluster, broker: int) -> Metrics:
    """Prometheus text from one broker: metric name -> {labels -> value}."""
    port = cluster.brokers[broker].props["metrics.port"]
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out: Metrics = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        name, _, rest = series.partition("{")
        labels = frozenset(tuple(kv.split("=", 1)) for kv in rest.rstrip("}").replace('"', "").split(",") if kv)
        out.setdefault(name, {})[labels] = float(value)  # type: ignore[index]
    return out


def load(bootstrap: str, topic: str, size_bytes: int, acks: str = "1") -> float:
    """Write ``size_bytes`` of incompressible values to partition 0; return the seconds it took."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 20, "batch.size": 1_000_000,
                         "log_level": 3})
    value = os.urandom(VALUE_BYTES)
    start = time.monotonic()
    for _ in range(size_bytes // VALUE_BYTES):
        while True:
            try:
                producer.produce(topic, value=value, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0
    return time.monotonic() - start
