"""The broker's Prometheus endpoint (``metrics.port``; 0 or absent turns it off).

prometheus_client serves scrapes from its own thread, while the broker's state belongs to the
event loop. So the loop publishes an immutable snapshot once a second and the collector only
reads the latest snapshot: a scrape never touches live state.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client import start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry


@dataclass(frozen=True)
class Snapshot:
    broker_id: int
    # (user, client_id) -> tokens left in the partition-mutation bucket ("" = entity part absent)
    remaining_tokens: dict[tuple[str, str], float] = field(default_factory=dict)
    partitions_led: int = 0
    under_replicated: int = 0
    # (topic, partition) -> log end offset, for every hosted replica
    log_end_offsets: dict[tuple[str, int], int] = field(default_factory=dict)


class BrokerCollector(Collector):
    def __init__(self) -> None:
        self.snapshot: Snapshot | None = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snap = self.snapshot
        if snap is None:
            return
        broker = str(snap.broker_id)
        tokens = GaugeMetricFamily(
            "headwater_controller_mutation_remaining_tokens",
            "Tokens left in a partition-mutation quota bucket (KIP-599); below zero means throttled",
            labels=["broker", "user", "client_id"],
        )
        for (user, client), value in sorted(snap.remaining_tokens.items()):
            tokens.add_metric([broker, user, client], value)
        yield tokens
        led = GaugeMetricFamily("headwater_partitions_led", "Partitions this broker leads", labels=["broker"])
        led.add_metric([broker], snap.partitions_led)
        yield led
        under = GaugeMetricFamily("headwater_under_replicated_partitions",
                                  "Led partitions whose ISR is smaller than their replica set", labels=["broker"])
        under.add_metric([broker], snap.under_replicated)
        yield under
        leo = GaugeMetricFamily("headwater_log_end_offset", "Log end offset of each hosted replica",
                                labels=["broker", "topic", "partition"])
        for (topic, partition), offset in sorted(snap.log_end_offsets.items()):
            leo.add_metric([broker, topic, str(partition)], offset)
        yield leo


def serve(port: int, host: str, collector: BrokerCollector) -> None:
    registry = CollectorRegistry()
    registry.register(collector)
    start_http_server(port, addr=host, registry=registry)
