"""The broker's Prometheus endpoint (``metrics.port``; 0 or absent turns it off).

prometheus_client serves scrapes from its own thread, while the broker's state belongs to the
event loop. So the loop publishes an immutable snapshot once a second and the collector only
reads the latest snapshot: a scrape never touches live state.

Reassignment progress (``headwater_reassignment_*``, see ``headwater/replication/progress.py`` and
docs/operations.md): one series per replica being added, from the partition's leader
(``role="leader"``, exact) and from the adding replica itself (``role="follower"``, its "to move" an
estimate), and per broker the sums over each role. An unknown ETA or size is -1.

The reassignment throttle in force (``headwater_reassignment_throttle_*``, docs/replication.md):
the rate of the reassignment limiters (0: none), why (one series per reason, 1 for the current
one), and for the adaptive mode the produce p99, follower lag and CPU pressure it last judged by (-1: none). The
copy's pace (``headwater_reassignment_copy_*``): the CPU pressure target, the pause in force between
the fetches of a replica being added, and the pressure last judged (-1: none).

Self-healing (``headwater_self_healing_*``, docs/operations.md), from the active controller only:
its settings, the brokers it is counting down (dead, or with a failed log dir), the healing moves
in flight and its actions so far.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client import start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from headwater.controller.self_healing import HealingStatus
from headwater.replication.adaptive_throttle import Reason, ThrottleStatus
from headwater.replication.copy_pacer import PaceStatus
from headwater.replication.progress import MoveProgress, summarize

_MOVE_LABELS = ["broker", "topic", "partition", "replica", "role"]


@dataclass(frozen=True)
class CleanerFigures:
    """The log cleaner's totals since the broker started (``headwater/server/cleaner.py``)."""

    bytes_read: int = 0
    bytes_written: int = 0
    runs: int = 0
    last_run_duration_s: float = 0.0
    in_progress: bool = False
    uncleanable_partitions: int = 0


@dataclass(frozen=True)
class GcFigures:
    """Per generation (0, 1, 2): collections, seconds spent in them, the longest one
    (``headwater/server/gc_policy.py``)."""

    collections: tuple[int, ...] = (0, 0, 0)
    seconds: tuple[float, ...] = (0.0, 0.0, 0.0)
    longest_s: tuple[float, ...] = (0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Snapshot:
    broker_id: int
    # (user, client_id) -> tokens left in the partition-mutation bucket ("" = entity part absent)
    remaining_tokens: dict[tuple[str, str], float] = field(default_factory=dict)
    partitions_led: int = 0
    under_replicated: int = 0
    # partitions whose preferred replica (the first assigned) is this broker but which another leads
    preferred_imbalance: int = 0
    # (topic, partition) -> log end offset, for every hosted replica
    log_end_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    # every replica being added that this broker leads the partition of, or is
    reassignment_moves: tuple[MoveProgress, ...] = ()
    cleaner: CleanerFigures = field(default_factory=CleanerFigures)
    gc: GcFigures = field(default_factory=GcFigures)
    fetch_sessions: int = 0
    consumer_fetch_bytes: dict[str, int] = field(default_factory=dict)  # client id -> bytes served
    reassignment_throttle: ThrottleStatus | None = None
    copy_pace: PaceStatus | None = None
    self_healing: HealingStatus | None = None  # on the active controller only


class BrokerCollector(Collector):
    def __init__(self) -> None:
        self.snapshot: Snapshot | None = None

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
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
        imbalance = GaugeMetricFamily(
            "headwater_preferred_replica_imbalance",
            "Partitions whose preferred replica is this broker but which another broker (or none) leads; "
            "the automatic leader rebalance and ElectLeaders PREFERRED bring it to zero", labels=["broker"])
        imbalance.add_metric([broker], snap.preferred_imbalance)
        yield imbalance
        under = GaugeMetricFamily("headwater_under_replicated_partitions",
                                  "Led partitions whose ISR is smaller than their replica set", labels=["broker"])
        under.add_metric([broker], snap.under_replicated)
        yield under
        sessions = GaugeMetricFamily("headwater_fetch_sessions",
                                     "Incremental fetch sessions (KIP-227) this broker keeps for its followers",
                                     labels=["broker"])
        sessions.add_metric([broker], snap.fetch_sessions)
        yield sessions
        leo = GaugeMetricFamily("headwater_log_end_offset", "Log end offset of each hosted replica",
                                labels=["broker", "topic", "partition"])
        for (topic, partition), offset in sorted(snap.log_end_offsets.items()):
            leo.add_metric([broker, topic, str(partition)], offset)
        yield leo
        served = CounterMetricFamily("headwater_consumer_fetch_bytes", "Record bytes this broker served to each "
                                     "consumer client id (a follower serving a consumer in its rack counts here)",
                                     labels=["broker", "client_id"])
        for client, size in sorted(snap.consumer_fetch_bytes.items()):
            served.add_metric([broker, client], size)
        yield served
        yield from _reassignment(broker, snap.reassignment_moves)
        if snap.reassignment_throttle is not None:
            yield from _throttle(broker, snap.reassignment_throttle)
        if snap.copy_pace is not None:
            yield from _copy_pace(broker, snap.copy_pace)
        if snap.self_healing is not None:
            yield from _self_healing(broker, snap.self_healing)
        yield from _cleaner(broker, snap.cleaner)
        yield from _gc(broker, snap.gc)


def _gc(broker: str, g: GcFigures) -> Iterator[GaugeMetricFamily]:
    for name, doc, values in (
        ("collections", "Garbage collections of each generation since the broker started", g.collections),
        ("pause_seconds", "Seconds the garbage collector stopped the broker for, per generation", g.seconds),
        ("longest_pause_seconds", "The longest single garbage collection of each generation", g.longest_s),
    ):
        family = GaugeMetricFamily(f"headwater_gc_{name}", doc, labels=["broker", "generation"])
        for generation, value in enumerate(values):
            family.add_metric([broker, str(generation)], value)
        yield family


def _cleaner(broker: str, c: CleanerFigures) -> Iterator[GaugeMetricFamily]:
    for name, doc, value in (
        ("bytes_read", "Bytes the log cleaner read since the broker started", c.bytes_read),
        ("bytes_written", "Bytes the log cleaner wrote since the broker started", c.bytes_written),
        ("runs", "Logs the log cleaner finished cleaning since the broker started", c.runs),
        ("last_run_duration_seconds", "How long the log cleaner's last finished run took", c.last_run_duration_s),
        ("in_progress", "1 while the log cleaner is cleaning a log", int(c.in_progress)),
        ("uncleanable_partitions", "Logs the cleaner gave up on until restart after an error", c.uncleanable_partitions),
    ):
        family = GaugeMetricFamily(f"headwater_log_cleaner_{name}", doc, labels=["broker"])
        family.add_metric([broker], value)
        yield family


def _reassignment(broker: str, moves: tuple[MoveProgress, ...]) -> Iterator[GaugeMetricFamily]:
    def family(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
        return GaugeMetricFamily(f"headwater_reassignment_{name}", doc, labels=labels)

    to_move = family("bytes_to_move", "Bytes the replica being added must hold (leader: its log; follower: estimate)",
                     _MOVE_LABELS)
    moved = family("bytes_moved", "Bytes the replica being added holds so far", _MOVE_LABELS)
    rate = family("rate_bytes_per_second", "Copy rate of the replica being added over the last 10 s", _MOVE_LABELS)
    eta = family("eta_seconds", "Seconds until the replica being added holds everything at the current rate (-1: unknown)",
                 _MOVE_LABELS)
    for m in sorted(moves, key=lambda m: (m.topic, m.partition, m.replica, m.role)):
        labels = [broker, m.topic, str(m.partition), str(m.replica), m.role]
        to_move.add_metric(labels, m.bytes_to_move)
        moved.add_metric(labels, m.bytes_moved)
        rate.add_metric(labels, m.rate_bytes_per_s)
        eta.add_metric(labels, -1 if m.eta_s is None else m.eta_s)
    yield from (to_move, moved, rate, eta)
    b_moves = family("broker_moves", "Replicas being added this broker takes part in, per role", ["broker", "role"])
    b_to_move = family("broker_bytes_to_move", "Sum of bytes_to_move over this broker's moves, per role", ["broker", "role"])
    b_moved = family("broker_bytes_moved", "Sum of bytes_moved over this broker's moves, per role", ["broker", "role"])
    b_rate = family("broker_rate_bytes_per_second", "Sum of the copy rates of this broker's moves, per role",
                    ["broker", "role"])
    b_eta = family("broker_eta_seconds", "Seconds until this broker's moves are done at the current rate (-1: unknown)",
                   ["broker", "role"])
    for s in summarize(moves):
        b_moves.add_metric([broker, s.role], s.moves)
        b_to_move.add_metric([broker, s.role], s.bytes_to_move)
        b_moved.add_metric([broker, s.role], s.bytes_moved)
        b_rate.add_metric([broker, s.role], s.rate_bytes_per_s)
        b_eta.add_metric([broker, s.role], -1 if s.eta_s is None else s.eta_s)
    yield from (b_moves, b_to_move, b_moved, b_rate, b_eta)


def _throttle(broker: str, t: ThrottleStatus) -> Iterator[GaugeMetricFamily]:
    rate = GaugeMetricFamily("headwater_reassignment_throttle_rate_bytes_per_second",
                             "Rate of the reassignment limiters (replicas being added) in force, bytes/s (0: none)",
                             labels=["broker", "mode"])
    rate.add_metric([broker, t.mode], t.rate)
    yield rate
    reason = GaugeMetricFamily("headwater_reassignment_throttle_reason",
                               "Why the reassignment rate is what it is: 1 for the current reason", labels=["broker", "reason"])
    for r in Reason:
        reason.add_metric([broker, r.value], int(r is t.reason))
    yield reason
    for name, doc, value in (
        ("produce_p99_ms", "p99 of acks=all produce latency the adaptive throttle last judged by (-1: none)",
         t.produce_p99_ms),
        ("follower_lag_ms", "Largest in-sync follower lag of led partitions the adaptive throttle last judged by "
                            "(-1: none)", t.follower_lag_ms),
        ("cpu_pressure", "Share of the last tick in which some task on the host waited for a CPU, as the adaptive "
                         "throttle judged it (-1: not judged)", t.cpu_pressure),
    ):
        family = GaugeMetricFamily(f"headwater_reassignment_throttle_{name}", doc, labels=["broker"])
        family.add_metric([broker], -1 if value is None else value)
        yield family


def _copy_pace(broker: str, p: PaceStatus) -> Iterator[GaugeMetricFamily]:
    for name, doc, value in (
        ("max_cpu_pressure", "reassignment.copy.max.cpu.pressure (1.0 or more: the copy never pauses)", p.max_pressure),
        ("pause_ms", "Pause before each fetch of a replica being added, from the host's CPU pressure", p.pause_ms),
        ("cpu_pressure", "Share of the last judged window in which some task waited for a CPU (-1: none)",
         p.pressure),
    ):
        family = GaugeMetricFamily(f"headwater_reassignment_copy_{name}", doc, labels=["broker"])
        family.add_metric([broker], -1 if value is None else value)
        yield family


def _self_healing(broker: str, h: HealingStatus) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    for name, doc, value in (
        ("enabled", "1 when self.healing.enable is true", int(h.config.enabled)),
        ("dry_run", "1 when self.healing.dry.run is true (decisions are only logged)", int(h.config.dry_run)),
        ("threshold_seconds", "self.healing.broker.failure.threshold.ms, in seconds",
         h.config.broker_failure_threshold_ms / 1000),
        ("moves_in_flight", "Partitions whose healing move is still copying", h.healing),
        ("next_action_seconds", "Seconds until the next dead broker or failed log dir is due (-1: none waiting)",
         -1 if h.waiting_for < 0 else h.waiting_for / 1000),
    ):
        family = GaugeMetricFamily(f"headwater_self_healing_{name}", doc, labels=["broker"])
        family.add_metric([broker], value)
        yield family
    for name, doc, clocks in (
        ("dead_broker_seconds", "How long each broker named by replicas has been unregistered", h.dead_for_ms),
        ("offline_dir_seconds", "How long each broker has had replicas in a failed log dir", h.offline_for_ms),
    ):
        family = GaugeMetricFamily(f"headwater_self_healing_{name}", doc, labels=["broker", "target"])
        for target, ms in sorted(clocks.items()):
            family.add_metric([broker, str(target)], ms / 1000)
        yield family
    actions = CounterMetricFamily("headwater_self_healing_actions", "Self-healing actions since this broker became "
                                  "the controller: heal (moves started), cancel, elect, dry_run, failed",
                                  labels=["broker", "action"])
    for action, count in sorted(h.actions.items()):
        actions.add_metric([broker, action], count)
    yield actions


def serve(port: int, host: str, collector: BrokerCollector) -> None:
    registry = CollectorRegistry()
    registry.register(collector)
    start_http_server(port, addr=host, registry=registry)
