"""Reading a broker's Prometheus endpoint in the replication tests."""

from __future__ import annotations

import urllib.request

from cluster_support import LocalCluster

Metrics = dict[str, dict[frozenset[tuple[str, str]], float]]


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
