"""The broker's Prometheus endpoint: quota tokens per entity, partitions led, log end offsets."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

from click.testing import CliRunner
from confluent_kafka import Producer
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from headwater.admin.local import BrokerProcess, free_port
from headwater.cli import main


def scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def test_metrics_show_quota_tokens_and_partitions(tmp_path: Path) -> None:
    port = free_port()
    broker = BrokerProcess(1, free_port(), tmp_path, {"metrics.port": str(port)}).start()
    try:
        result = CliRunner().invoke(main, ["configs", "--bootstrap-server", broker.bootstrap, "--alter", "--entity-type",
                                           "clients", "--entity-name", "metered", "--add-config",
                                           "controller_mutation_rate=1"])
        assert result.exit_code == 0, result.output
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="metered")
        try:
            admin.create_topics([NewTopic("m1", 15, 1)])  # burst 11 -> -4
        finally:
            admin.close()
        p = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(10):
            p.produce("m1", value=b"x", partition=i % 3)
        assert p.flush(10) == 0
        key = 'headwater_controller_mutation_remaining_tokens{broker="1",client_id="metered",user=""}'
        deadline = time.monotonic() + 10
        metrics = scrape(port)
        while (key not in metrics or metrics.get('headwater_log_end_offset{broker="1",partition="0",topic="m1"}') != 4)\
                and time.monotonic() < deadline:
            time.sleep(0.3)
            metrics = scrape(port)
        assert -4.5 < metrics[key] < 0  # 11 - 15 = -4, refilling at 1/s
        assert metrics['headwater_partitions_led{broker="1"}'] == 15
        assert metrics['headwater_under_replicated_partitions{broker="1"}'] == 0
        assert metrics['headwater_log_end_offset{broker="1",partition="0",topic="m1"}'] == 4
        # The collector's pauses, per generation.
        for g in "012":
            assert metrics[f'headwater_gc_collections{{broker="1",generation="{g}"}}'] >= 0
            longest = metrics[f'headwater_gc_longest_pause_seconds{{broker="1",generation="{g}"}}']
            assert 0 <= longest <= metrics[f'headwater_gc_pause_seconds{{broker="1",generation="{g}"}}']
        # headwater configs --describe shows the same bucket's tokens next to the quota.
        result = CliRunner().invoke(main, ["configs", "--bootstrap-server", broker.bootstrap, "--describe",
                                           "--entity-type", "clients", "--metrics-url", f"http://127.0.0.1:{port}/metrics"])
        assert result.exit_code == 0, result.output
        line = next(x for x in result.output.splitlines() if "client-id 'metered'" in x)
        assert "controller_mutation_rate=1.0 (remaining tokens -" in line
    finally:
        broker.stop()
