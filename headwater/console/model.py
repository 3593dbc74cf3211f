"""The console's page models, built from what the Kafka protocol and the metrics endpoints answered.

Pure: ``Facts`` holds the answers of one poll in plain Python (``reader.py`` fills it from the
kafka-python responses), and ``build_snapshot`` turns them into the JSON the pages render. Nothing
here does I/O, so the pages' meaning is unit-tested without a cluster.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from headwater.admin.reassign import FOLLOWER_THROTTLED_REPLICAS, LEADER_THROTTLED_REPLICAS, Ongoing

TopicPartition = tuple[str, int]
THROTTLE_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")

# The reassignment throttle in force and self-healing, from the brokers' metrics (docs/operations.md,
# "Metrics"): each sample by (metric, its ``broker`` label, its other label's value or "").
StatusKey = tuple[str, str, str]
THROTTLE_RATE = "headwater_reassignment_throttle_rate_bytes_per_second"
THROTTLE_REASON = "headwater_reassignment_throttle_reason"
THROTTLE_P99 = "headwater_reassignment_throttle_produce_p99_ms"
THROTTLE_LAG = "headwater_reassignment_throttle_follower_lag_ms"
THROTTLE_PRESSURE = "headwater_reassignment_throttle_cpu_pressure"
HEALING_ENABLED = "headwater_self_healing_enabled"
HEALING_DRY_RUN = "headwater_self_healing_dry_run"
HEALING_THRESHOLD = "headwater_self_healing_threshold_seconds"
HEALING_IN_FLIGHT = "headwater_self_healing_moves_in_flight"
HEALING_NEXT = "headwater_self_healing_next_action_seconds"
HEALING_DEAD = "headwater_self_healing_dead_broker_seconds"
HEALING_OFFLINE = "headwater_self_healing_offline_dir_seconds"
HEALING_ACTIONS = "headwater_self_healing_actions_total"
STATUS_LABELS = {THROTTLE_RATE: "mode", THROTTLE_REASON: "reason", HEALING_DEAD: "target", HEALING_OFFLINE: "target",
                 HEALING_ACTIONS: "action"}
ACTIONS = ("heal", "cancel", "elect", "dry_run", "failed")
HEALING_ENABLE = "self.healing.enable"
HEALING_CONFIGS = (HEALING_ENABLE, "self.healing.dry.run", "self.healing.broker.failure.threshold.ms")
NO_METRICS = "unknown (no metrics endpoint)"
REASONS = {
    "static": "static: reassignment.throttled.rate as set",
    "start": "starting rate: not judged yet",
    "slow_start": "raising fast (doubling until a signal nears its target): every target met",
    "increase": "raising: every target met",
    "produce_latency": "cut: produce p99 over its target",
    "follower_lag": "cut: follower lag over its target",
    "cpu_pressure": "cut: the host's CPU pressure over its target",
    "near_target": "holding: a signal 3/4 of the way to its target",
    "not_limiting": "holding: the copy does not use the rate",
    "no_samples": "holding: too few produces to judge",
}


@dataclass(frozen=True)
class BrokerFacts:
    node_id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True)
class PartitionFacts:
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...] = ()


@dataclass(frozen=True)
class LogDirFacts:
    path: str
    error: str | None
    sizes: Mapping[TopicPartition, int]

    @property
    def bytes(self) -> int:
        return sum(self.sizes.values())


@dataclass(frozen=True)
class MoveMetric:
    """``headwater_reassignment_*`` of one replica being added, as one broker's role sees it."""

    bytes_to_move: float
    bytes_moved: float
    rate: float
    eta_s: float  # -1: unknown


@dataclass
class Facts:
    """One poll's answers. A part that failed is absent and its error is in ``errors`` / ``broker_errors``."""

    taken_at: float
    cluster_id: str | None = None
    controller_id: int = -1
    brokers: dict[int, BrokerFacts] = field(default_factory=dict)
    topics: dict[str, dict[int, PartitionFacts]] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, str | None]] = field(default_factory=dict)
    broker_configs: dict[int, dict[str, str | None]] = field(default_factory=dict)
    log_dirs: dict[int, list[LogDirFacts]] = field(default_factory=dict)
    ongoing: dict[TopicPartition, Ongoing] | None = None  # None: ListPartitionReassignments failed
    move_metrics: dict[tuple[str, int, int, str], MoveMetric] = field(default_factory=dict)  # (t, p, replica, role)
    latency_ms: dict[int, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    broker_errors: dict[int, str] = field(default_factory=dict)
    quotas: list[QuotaFacts] | None = None  # None: DescribeClientQuotas failed (its error in quota_error)
    quota_error: str | None = None
    tokens: dict[tuple[str, str], float] | None = None  # None: no metrics endpoint given
    status: dict[StatusKey, float] | None = None  # the throttles' and self-healing's samples; None: no endpoint
    healing_configs: dict[str, str | None] | None = None  # set on the <default> broker entity; None: not read
    healing_config_error: str | None = None


def replica_sizes(log_dirs: Mapping[int, Iterable[LogDirFacts]]) -> dict[tuple[str, int, int], int]:
    """(topic, partition, broker) -> bytes, summed over the broker's log dirs (a replica moving
    between dirs shows in two)."""
    out: dict[tuple[str, int, int], int] = {}
    for broker, dirs in log_dirs.items():
        for d in dirs:
            for (t, p), size in d.sizes.items():
                out[(t, p, broker)] = out.get((t, p, broker), 0) + size
    return out


class Sizes:
    """Replica bytes, looked up as ``replica_sizes`` answers them ((topic, partition, broker) ->
    bytes), without merging every broker's answer into one map each poll: a broker's one log dir's
    map is used as it is."""

    def __init__(self, log_dirs: Mapping[int, Iterable[LogDirFacts]], previous: Sizes | None = None) -> None:
        self.by_broker: dict[int, Mapping[TopicPartition, int]] = {}
        for broker, dirs in log_dirs.items():
            dirs = list(dirs)
            if len(dirs) == 1:
                self.by_broker[broker] = dirs[0].sizes
            else:
                merged: dict[TopicPartition, int] = {}
                for d in dirs:
                    for tp, size in d.sizes.items():
                        merged[tp] = merged.get(tp, 0) + size
                self.by_broker[broker] = merged
        # The partitions with a replica whose bytes differ from ``previous`` (None: no previous).
        # A broker whose answer was the same bytes has the very same map: nothing to compare.
        self.previous = previous
        self.changed: set[TopicPartition] | None = None
        if previous is not None:
            previous.previous = None  # only one step back is ever needed
            changed: set[TopicPartition] = set()
            for b in set(self.by_broker) | set(previous.by_broker):
                new, old = self.by_broker.get(b), previous.by_broker.get(b)
                if new is old:
                    continue
                if new is None or old is None:
                    changed.update(new if new is not None else old or ())
                    continue
                changed.update(tp for tp, size in new.items() if old.get(tp) != size)
                changed.update(old.keys() - new.keys())
            self.changed = changed
        self._changed_topics: set[str] | None = None

    def unchanged_since(self, built_with: object, tp: TopicPartition | None = None, topic: str | None = None) -> bool:
        """Whether what was built with the Sizes ``built_with`` still holds for partition ``tp`` (or
        every partition of ``topic``): ``built_with`` is this one's previous and those bytes did not change."""
        if self.changed is None or built_with is not self.previous:
            return False
        if tp is not None:
            return tp not in self.changed
        if self._changed_topics is None:
            self._changed_topics = {t for t, _p in self.changed}
        return topic not in self._changed_topics

    def get(self, key: tuple[str, int, int], default: int | None = None) -> int | None:
        found = self.by_broker.get(key[2])
        return default if found is None else found.get((key[0], key[1]), default)

    def __contains__(self, key: tuple[str, int, int]) -> bool:
        found = self.by_broker.get(key[2])
        return found is not None and (key[0], key[1]) in found


SizeLookup = Sizes | Mapping[tuple[str, int, int], int]


class ModelCache:
    """What one poll built, kept for the next: a move's row, a topic's rows and heat-map counts, the
    partition health and a topic's parsed throttled-replica lists are built again only when their
    inputs changed. With 10,000 moves in flight almost none change from one second to the next."""

    def __init__(self) -> None:
        self.sizes: Sizes | None = None
        # Each map was built with the Sizes next to it; an entry is carried over as it is (no new
        # objects: with 10,000 moves, new objects each second made Python's full garbage collection,
        # 0.1-0.15 s with everything the console holds, run every other poll).
        self.moves: dict[TopicPartition, tuple[Ongoing, list[tuple[MoveMetric | None, float | None]], dict[str, Any]]] = {}
        self.moves_sizes: Sizes | None = None
        self.order: tuple[object, list[TopicPartition]] | None = None  # the moves in order, for this ongoing map
        self.topics: dict[str, tuple[Mapping[int, PartitionFacts], dict[str, Any]]] = {}
        self.topics_sizes: Sizes | None = None
        self.heat: dict[str, tuple[Mapping[int, PartitionFacts], tuple[dict[int, int], dict[int, int]]]] = {}
        self.heat_sizes: tuple[Sizes, tuple[int, ...]] | None = None
        self.throttle_lists: dict[str, set[str]] = {}
        self.throttle_inputs: tuple[Any, ...] | None = None
        self.health: tuple[tuple[Any, ...], dict[str, list[str]]] | None = None
        self.counts: tuple[Any, tuple[dict[int, int], ...]] | None = None

    def sizes_for(self, facts: Facts) -> Sizes:
        """This poll's replica bytes, with what changed since the last poll's."""
        self.sizes = Sizes(facts.log_dirs, self.sizes)
        return self.sizes


def _min_isr(configs: Mapping[str, str | None]) -> int:
    value = configs.get("min.insync.replicas")
    return int(value) if value is not None and value.isdigit() else 1


def health(facts: Facts, cache: ModelCache | None = None) -> dict[str, list[str]]:
    """Under-replicated (ISR smaller than replicas), under-min-ISR and offline (no leader) partitions."""
    if cache is not None:
        key = (facts.topics, {t: _min_isr(c) for t, c in facts.topic_configs.items()})
        if cache.health is not None and cache.health[0][0] is key[0] and cache.health[0][1] == key[1]:
            return cache.health[1]
        cache.health = (key, health(facts))
        return cache.health[1]
    under, under_min, offline = [], [], []
    for topic, parts in sorted(facts.topics.items()):
        min_isr = _min_isr(facts.topic_configs.get(topic, {}))
        for p, pf in sorted(parts.items()):
            name = f"{topic}-{p}"
            if pf.leader < 0:
                offline.append(name)
            if len(pf.isr) < len(pf.replicas):
                under.append(name)
            if len(pf.isr) < min_isr:
                under_min.append(name)
    return {"under_replicated": under, "under_min_isr": under_min, "offline": offline}


def _broker_counts(topics: Mapping[str, Mapping[int, PartitionFacts]]) -> tuple[dict[int, int], ...]:
    """Per broker: replicas, leaders, partitions it is the preferred leader of, and of those the ones
    another broker leads."""
    replicas: dict[int, int] = {}
    leaders: dict[int, int] = {}
    preferred: dict[int, int] = {}
    preferred_not_leading: dict[int, int] = {}
    for parts in topics.values():
        for pf in parts.values():
            for b in pf.replicas:
                replicas[b] = replicas.get(b, 0) + 1
            if pf.leader >= 0:
                leaders[pf.leader] = leaders.get(pf.leader, 0) + 1
            if pf.replicas:
                first = pf.replicas[0]
                preferred[first] = preferred.get(first, 0) + 1
                if pf.leader != first:
                    preferred_not_leading[first] = preferred_not_leading.get(first, 0) + 1
    return replicas, leaders, preferred, preferred_not_leading


def brokers_model(facts: Facts, cache: ModelCache | None = None) -> list[dict[str, Any]]:
    """One row per broker: the registered ones, and any broker a replica names that is not
    registered (down), so a dead broker stays on the page."""
    if cache is not None and cache.counts is not None and cache.counts[0] is facts.topics:
        replicas, leaders, preferred, preferred_not_leading = cache.counts[1]
    else:
        replicas, leaders, preferred, preferred_not_leading = _broker_counts(facts.topics)
        if cache is not None:
            cache.counts = (facts.topics, (replicas, leaders, preferred, preferred_not_leading))
    return _broker_rows(facts, replicas, leaders, preferred, preferred_not_leading)


def _broker_rows(facts: Facts, replicas: dict[int, int], leaders: dict[int, int], preferred: dict[int, int],
                 preferred_not_leading: dict[int, int]) -> list[dict[str, Any]]:
    rows = []
    for b in sorted(set(facts.brokers) | set(replicas)):
        bf = facts.brokers.get(b)
        dirs = facts.log_dirs.get(b)
        pref = preferred.get(b, 0)
        imbalance = preferred_not_leading.get(b, 0)
        rows.append({
            "id": b,
            "rack": bf.rack if bf else None,
            "endpoint": f"{bf.host}:{bf.port}" if bf else None,
            "controller": b == facts.controller_id,
            "alive": bf is not None,
            "reachable": dirs is not None,
            "latency_ms": facts.latency_ms.get(b),
            "error": facts.broker_errors.get(b) or (None if bf else "not registered (down)"),
            "log_dirs": [{"path": d.path, "bytes": d.bytes, "error": d.error} for d in dirs or ()],
            "bytes": sum(d.bytes for d in dirs) if dirs is not None else None,
            "replicas": replicas.get(b, 0),
            "leaders": leaders.get(b, 0),
            "preferred": pref,
            # Kafka's leader-imbalance ratio per broker: partitions it should lead but does not.
            "imbalance": imbalance,
            "imbalance_pct": round(100.0 * imbalance / pref, 1) if pref else 0.0,
        })
    return rows


def _carried(sizes: SizeLookup, built_with: Sizes | None) -> Sizes | None:
    """``sizes`` when what was built with ``built_with`` may be carried over (it is the last poll's)."""
    return sizes if isinstance(sizes, Sizes) and sizes.changed is not None and built_with is sizes.previous else None


def topics_model(facts: Facts, sizes: SizeLookup | None = None, cache: ModelCache | None = None) -> list[dict[str, Any]]:
    if sizes is None:
        sizes = replica_sizes(facts.log_dirs)
    out = []
    carried = _carried(sizes, cache.topics_sizes) if cache is not None else None
    built: dict[str, tuple[Mapping[int, PartitionFacts], dict[str, Any]]] = {}
    for topic, parts in sorted(facts.topics.items()):
        hit = cache.topics.get(topic) if carried is not None and cache is not None else None
        if hit is not None and (hit[0] is parts or hit[0] == parts) and carried is not None \
                and carried.unchanged_since(carried.previous, topic=topic):
            built[topic] = hit
            out.append(hit[1])
            continue
        rows: list[dict[str, Any]] = []
        for p, pf in sorted(parts.items()):
            by_broker = {b: s for b in pf.replicas if (s := sizes.get((topic, p, b))) is not None}
            rows.append({
                "partition": p, "leader": pf.leader, "replicas": list(pf.replicas), "isr": list(pf.isr),
                "offline": list(pf.offline), "sizes": {str(b): s for b, s in by_broker.items()},
                "size": by_broker.get(pf.leader, max(by_broker.values(), default=0)),
                "under_replicated": len(pf.isr) < len(pf.replicas),
            })
        found = {"name": topic, "partitions": rows, "bytes": sum(r["size"] for r in rows)}
        built[topic] = (parts, found)
        out.append(found)
    if cache is not None:
        cache.topics, cache.topics_sizes = built, sizes if isinstance(sizes, Sizes) else None
    return out


def _throttled_entries(value: str | None) -> set[str]:
    return {e.strip() for e in (value or "").split(",") if e.strip()}


class _Throttles:
    """Which moves Kafka throttles, from one poll's configs. A topic's throttled-replica lists name
    every replica of its moves (10,000 entries for 10,000 moves): each list is parsed once per poll,
    not once per move."""

    def __init__(self, facts: Facts, cache: ModelCache | None = None) -> None:
        self._configs = facts.topic_configs
        self._lists: dict[str, tuple[set[str], set[str]]] = {}
        self._rated = {b for b, c in facts.broker_configs.items() if any(c.get(k) for k in THROTTLE_RATES)}
        # A list's entries by its text, across polls: the same text comes back every second.
        self._parsed = cache.throttle_lists if cache is not None else {}
        self._used: dict[str, set[str]] = {}

    def _entries(self, value: str | None) -> set[str]:
        if not value:
            return set()
        found = self._parsed.get(value)
        if found is None:
            found = _throttled_entries(value)
        self._used[value] = found
        return found

    def _topic(self, topic: str) -> tuple[set[str], set[str]]:
        found = self._lists.get(topic)
        if found is None:
            configs = self._configs.get(topic, {})
            found = self._lists[topic] = (self._entries(configs.get(FOLLOWER_THROTTLED_REPLICAS)),
                                          self._entries(configs.get(LEADER_THROTTLED_REPLICAS)))
        return found

    def same_as_last_poll(self, facts: Facts, cache: ModelCache | None) -> bool:
        """Whether every move is throttled as in the last poll: the same topic configs (the very
        answer, see ``reader.Poller._memo``) and the same brokers with a rate."""
        if cache is None:
            return False
        inputs = (facts.topic_configs, self._rated)
        last, cache.throttle_inputs = cache.throttle_inputs, inputs
        return last is not None and last[0] is inputs[0] and last[1] == inputs[1]

    def keep(self, cache: ModelCache | None) -> None:
        """Keep the lists this poll used (only those) for the next."""
        if cache is not None:
            cache.throttle_lists = self._used

    def __call__(self, tp: TopicPartition, sources: Iterable[int], adding: Iterable[int]) -> bool:
        """Kafka throttles a move when the topic lists its replicas and the brokers have a rate: the
        follower list names the adding replicas (or ``*``)."""
        sources, adding = tuple(sources), tuple(adding)
        if self._rated.isdisjoint((*sources, *adding)):
            return False
        followers, leaders = self._topic(tp[0])
        return "*" in followers or any(f"{tp[1]}:{b}" in followers for b in adding) \
            or "*" in leaders or any(f"{tp[1]}:{b}" in leaders for b in sources)



class RateTracker:
    """The console's own copy rate per adding replica from successive byte counts, for clusters
    without a metrics endpoint (Apache Kafka has no per-move metric): bytes gained over the last
    ``window_s`` seconds.

    Every observation is a sample of every replica observed, as if each kept a list of (time, bytes)
    trimmed to the window (but always two samples at least). With 10,000 moves such lists cost a
    tuple per replica per second; instead the times are kept once for all replicas, and each replica
    keeps only the times its count changed: the samples it would have are rebuilt from both when a
    rate is asked for."""

    def __init__(self, window_s: float = 10.0) -> None:
        self.window_s = window_s
        self._times: list[float] = []  # the observations' times, from the oldest any replica still needs
        self._dropped = 0  # observations dropped from the front of _times: _times[i] is observation _dropped + i
        # Per replica: the observation it was first seen in, and the observations where its count
        # changed with the new counts (observations by number: two may have the same time).
        self._changes: dict[tuple[str, int, int], tuple[int, list[int], list[int]]] = {}
        self._keys_of: object = None  # the ongoing map the replicas were last pruned against

    def _tick(self, at: float) -> int:
        times = self._times
        times.append(at)
        # Samples before this one are out of the window for every replica (and stay out).
        first = min(bisect_left(times, at - self.window_s), len(times) - 2)
        if first > 64:
            del times[:first]
            self._dropped += first
        return self._dropped + len(times) - 1

    def _add(self, key: tuple[str, int, int], tick: int, n: int) -> None:
        found = self._changes.get(key)
        if found is None:
            self._changes[key] = (tick, [tick], [n])
            return
        _first, ticks, counts = found
        if counts[-1] != n:
            ticks.append(tick)
            counts.append(n)
            if len(ticks) > 8 and ticks[1] <= self._dropped:
                # Changes before the oldest observation kept: only the last of them can be needed.
                cut = bisect_right(ticks, self._dropped) - 1
                del ticks[:cut], counts[:cut]

    def observe(self, at: float, copied: Mapping[tuple[str, int, int], int]) -> None:
        tick = self._tick(at)
        for key, n in copied.items():
            self._add(key, tick, n)
        for key in set(self._changes) - set(copied):
            del self._changes[key]  # the move ended: forget it

    def observe_moves(self, at: float, ongoing: Mapping[TopicPartition, Ongoing], sizes: SizeLookup) -> None:
        """``observe(at, copied_bytes(...))`` without building that map: what each adding replica holds."""
        tick = self._tick(at)
        for (t, p), o in ongoing.items():
            for b in o.adding:
                self._add((t, p, b), tick, sizes.get((t, p, b), 0) or 0)
        if ongoing is not self._keys_of:  # the same map (the same answer) has the same moves
            wanted = {(t, p, b) for (t, p), o in ongoing.items() for b in o.adding}
            for key in set(self._changes) - wanted:
                del self._changes[key]
            self._keys_of = ongoing

    def rate(self, key: tuple[str, int, int]) -> float | None:
        found = self._changes.get(key)
        if found is None:
            return None
        first_seen, ticks, counts = found
        times = self._times
        # This replica's samples are the observations from its first; the window keeps the recent
        # ones (and two at least): the first sample left is the later of the two bounds.
        start = max(first_seen - self._dropped, min(bisect_left(times, times[-1] - self.window_s), len(times) - 2))
        if len(times) - start < 2 or times[-1] <= times[start]:
            return None
        at_start = counts[bisect_right(ticks, self._dropped + start) - 1]
        return max(0.0, (counts[-1] - at_start) / (times[-1] - times[start]))


def _eta(remaining: int, rate: float | None) -> float | None:
    if remaining <= 0:
        return 0.0
    return remaining / rate if rate else None


def moves_model(facts: Facts, rates: RateTracker | None = None, sizes: SizeLookup | None = None,
                cache: ModelCache | None = None) -> list[dict[str, Any]]:
    """Every partition in flight: original (from) and target (to) replicas, bytes each adding replica
    holds against the largest source replica, and rate and ETA: the brokers' metrics when given
    (the leader's view first: it knows the exact bytes to move), else the console's own estimate.

    With ``cache``, a move whose inputs (its replicas, their bytes, its metrics or rate, whether it
    is throttled) are those of the last poll keeps the last poll's row."""
    if sizes is None:
        sizes = replica_sizes(facts.log_dirs)
    throttled = _Throttles(facts, cache)
    same_throttles = throttled.same_as_last_poll(facts, cache)
    metrics = facts.move_metrics
    ongoing = facts.ongoing or {}
    carried = _carried(sizes, cache.moves_sizes) if cache is not None and same_throttles else None
    previous = cache.moves if cache is not None else {}
    if cache is not None and cache.order is not None and cache.order[0] is ongoing:
        order = cache.order[1]
    else:
        order = sorted(ongoing)
        if cache is not None:
            cache.order = (ongoing, order)
    built: dict[TopicPartition, tuple[Ongoing, list[tuple[MoveMetric | None, float | None]], dict[str, Any]]] = {}
    out = []
    for tp in order:
        o = ongoing[tp]
        t, p = tp
        hit = previous.get(tp) if carried is not None else None
        if hit is not None and (hit[0] is o or hit[0] == o) and carried is not None and tp not in (carried.changed or ()):
            # The same move with the same bytes: the same row if its metrics (or rates) are the same.
            for (last_metric, last_rate), b in zip(hit[1], o.adding, strict=True):
                metric = metrics.get((t, p, b, "leader")) or metrics.get((t, p, b, "follower"))
                rate = rates.rate((t, p, b)) if metric is None and rates is not None else None
                if not (metric is last_metric or metric == last_metric) or rate != last_rate:
                    break
            else:
                built[tp] = hit
                out.append(hit[2])
                continue
        seen = []
        for b in o.adding:
            metric = metrics.get((t, p, b, "leader")) or metrics.get((t, p, b, "follower"))
            seen.append((metric, rates.rate((t, p, b)) if metric is None and rates is not None else None))
        sources = [b for b in o.replicas if b not in o.adding]
        move = _move_row(tp, o, sources, sizes, seen, throttled(tp, sources, o.adding))
        built[tp] = (o, seen, move)
        out.append(move)
    throttled.keep(cache)
    if cache is not None:
        cache.moves, cache.moves_sizes = built, sizes if isinstance(sizes, Sizes) else None
    return out


def _move_row(tp: TopicPartition, o: Ongoing, sources: list[int], sizes: SizeLookup,
              seen: list[tuple[MoveMetric | None, float | None]], is_throttled: bool) -> dict[str, Any]:
    target = [b for b in o.replicas if b not in o.removing]
    source_bytes = max((sizes.get((tp[0], tp[1], b), 0) or 0 for b in sources), default=0)
    copies: list[dict[str, Any]] = []
    for b, (metric, tracked) in zip(o.adding, seen, strict=True):
        copied = min(sizes.get((tp[0], tp[1], b), 0) or 0, source_bytes) if source_bytes else 0
        rate: float | None
        if metric is not None:
            # The broker's ETA when it has one; else the remaining bytes at its rate.
            rate, rate_source = metric.rate, "metrics"
            eta = metric.eta_s if metric.eta_s >= 0 else _eta(source_bytes - copied, rate)
        else:
            rate = tracked
            eta, rate_source = _eta(source_bytes - copied, rate), "estimate"
        copies.append({"broker": b, "copied": copied, "total": source_bytes, "rate": rate, "eta_s": eta,
                       "rate_source": rate_source})
    copied_sum, total_sum = sum(c["copied"] for c in copies), sum(c["total"] for c in copies)
    etas = [c["eta_s"] for c in copies]
    move_rate = sum(c["rate"] or 0.0 for c in copies) if any(c["rate"] is not None for c in copies) else None
    return {
        "topic": tp[0], "partition": tp[1], "replicas": o.replicas, "from": sources, "to": target,
        "adding": o.adding, "removing": o.removing, "queued": o.queued,
        "copied": copied_sum, "total": total_sum,
        "share": min(1.0, copied_sum / total_sum) if total_sum else (0.0 if o.adding else 1.0),
        "rate": move_rate,
        # A copy with no rate yet (waiting behind another under the throttle): the move's bytes
        # left at the move's rate instead of "unknown".
        "eta_s": max(e for e in etas if e is not None) if etas and all(e is not None for e in etas)
        else _eta(total_sum - copied_sum, move_rate),
        "rate_source": copies[0]["rate_source"] if copies else None,
        "copies": copies,
        "throttled": is_throttled,
    }


def copied_bytes(facts: Facts, sizes: SizeLookup | None = None) -> dict[tuple[str, int, int], int]:
    """What each adding replica holds now: the input of ``RateTracker.observe``."""
    if sizes is None:
        sizes = replica_sizes(facts.log_dirs)
    return {(tp[0], tp[1], b): sizes.get((tp[0], tp[1], b), 0) or 0
            for tp, o in (facts.ongoing or {}).items() for b in o.adding}


def outcome(move: Mapping[str, Any], replicas: Iterable[int] | None) -> str:
    """What became of a move that left the controller's list, from the partition's replicas now."""
    if replicas is None:
        return "topic deleted"
    now = set(replicas)
    if now == set(move["to"]):
        return "completed"
    if now == set(move["from"]):
        return "cancelled"
    return "ending"  # brokers' metadata lags the controller by a moment: looked at again next poll


def throttle_model(facts: Facts) -> dict[str, Any]:
    """The reassignment throttle rates each broker has (as ``reassign --throttle`` sets them)."""
    per_broker = {str(b): {k: facts.broker_configs.get(b, {}).get(k) for k in THROTTLE_RATES}
                  for b in sorted(facts.broker_configs)}
    rates = {v for c in per_broker.values() for v in c.values() if v}
    return {"brokers": per_broker, "rate": next(iter(rates)) if len(rates) == 1 else None, "mixed": len(rates) > 1}


def overall(moves: list[dict[str, Any]]) -> dict[str, Any]:
    copied = sum(m["copied"] for m in moves)
    total = sum(m["total"] for m in moves)
    rate = sum(m["rate"] or 0.0 for m in moves)
    # All the bytes left at all the copies' rate: a move waiting behind another (rate 0 now) still
    # gets an overall ETA, since the throttle's bandwidth passes to it when the first one ends.
    return {"moves": len(moves), "copied": copied, "total": total, "rate": rate,
            "share": min(1.0, copied / total) if total else (1.0 if not moves else 0.0),
            "eta_s": _eta(total - copied, rate) if moves else 0.0}


HEAT_LEVELS = 10  # the pages colour a cell with one of this many CSS classes (no inline styles)


def _level(value: int, top: int) -> int:
    """0 for nothing, else 1..HEAT_LEVELS in proportion to the largest cell."""
    return 0 if value <= 0 or top <= 0 else max(1, round(HEAT_LEVELS * value / top))


def heatmap_model(facts: Facts, sizes: SizeLookup | None = None, cache: ModelCache | None = None) -> dict[str, Any]:
    """Broker x topic: replicas each broker holds of each topic (Metadata) and their bytes
    (DescribeLogDirs), each cell with a heat level against the largest cell of its map. Every
    registered broker has a column, so an empty one shows as an empty column."""
    if sizes is None:
        sizes = replica_sizes(facts.log_dirs)
    if cache is not None and cache.counts is not None and cache.counts[0] is facts.topics:
        holding = set(cache.counts[1][0])  # brokers_model's replica counts of these very topics
    else:
        holding = {b for parts in facts.topics.values() for pf in parts.values() for b in pf.replicas}
    brokers = sorted(set(facts.brokers) | holding)
    raw: list[tuple[str, dict[int, int], dict[int, int]]] = []
    built: dict[str, tuple[Mapping[int, PartitionFacts], tuple[dict[int, int], dict[int, int]]]] = {}
    carried = None
    if cache is not None and cache.heat_sizes is not None and cache.heat_sizes[1] == tuple(brokers):
        carried = _carried(sizes, cache.heat_sizes[0])
    for topic, parts in sorted(facts.topics.items()):
        hit = cache.heat.get(topic) if carried is not None and cache is not None else None
        found = None
        if hit is not None and (hit[0] is parts or hit[0] == parts) and carried is not None \
                and carried.unchanged_since(carried.previous, topic=topic):
            found = hit[1]
        if found is None:
            counts = dict.fromkeys(brokers, 0)
            held = dict.fromkeys(brokers, 0)
            for p, pf in parts.items():
                for b in pf.replicas:
                    counts[b] += 1
                    held[b] += sizes.get((topic, p, b), 0) or 0
            found = (counts, held)
        built[topic] = (parts, found)
        raw.append((topic, *found))
    if cache is not None:
        cache.heat = built
        cache.heat_sizes = (sizes, tuple(brokers)) if isinstance(sizes, Sizes) else None
    top_r = max((n for _t, c, _h in raw for n in c.values()), default=0)
    top_b = max((n for _t, _c, h in raw for n in h.values()), default=0)
    rows = [{"topic": t,
             "replicas": {str(b): {"value": n, "level": _level(n, top_r)} for b, n in c.items()},
             "bytes": {str(b): {"value": n, "level": _level(n, top_b)} for b, n in h.items()}}
            for t, c, h in raw]
    return {"brokers": brokers, "topics": rows}


MUTATION_RATE = "controller_mutation_rate"


@dataclass(frozen=True)
class QuotaFacts:
    """One DescribeClientQuotas entry: its entity ((type, name), name None for the default) and values."""

    entity: tuple[tuple[str, str | None], ...]
    values: Mapping[str, float]


def _token_label(entity: Mapping[str, str | None], entity_type: str) -> str:
    """The label the broker's gauge gives an entity part: absent "", the default "<default>"."""
    if entity_type not in entity:
        return ""
    value = entity[entity_type]
    return "<default>" if value is None else value


def quotas_model(quotas: Iterable[QuotaFacts] | None, tokens: Mapping[tuple[str, str], float] | None,
                 error: str | None = None) -> dict[str, Any]:
    """controller_mutation_rate (KIP-599) per user and client, with the bucket's remaining tokens
    (``headwater_controller_mutation_remaining_tokens``) when a metrics endpoint gives them: a
    negative balance means the entity is being throttled now. ``tokens`` None: no endpoint given."""
    rows = []
    for q in quotas or ():
        if MUTATION_RATE not in q.values:
            continue
        names = dict(q.entity)
        bucket = (_token_label(names, "user"), _token_label(names, "client-id"))
        left = tokens.get(bucket) if tokens is not None else None
        rows.append({
            "user": _token_label(names, "user") or None, "client_id": _token_label(names, "client-id") or None,
            "rate": q.values[MUTATION_RATE], "tokens": left,
            "state": None if tokens is None else "idle" if left is None else "throttled" if left < 0 else "ok",
        })
    rows.sort(key=lambda r: (r["user"] or "", r["client_id"] or ""))
    return {"available": quotas is not None, "error": error, "metrics": tokens is not None, "quotas": rows}


def _by_broker(status: Mapping[StatusKey, float]) -> dict[str, dict[str, dict[str, float]]]:
    """broker label -> metric -> other label's value ("" for none) -> value."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for (name, broker, other), value in status.items():
        out.setdefault(broker, {}).setdefault(name, {})[other] = value
    return out


def _non_negative(value: float | None) -> float | None:
    return None if value is None or value < 0 else value


def throttles_in_force(facts: Facts) -> list[dict[str, Any]]:
    """Per broker, the rate of its reassignment limiters in force (0: no limit), its mode, why, and
    what the adaptive mode last judged by, from ``headwater_reassignment_throttle_*``; a broker
    whose endpoint the console does not read (or that exports none) is unknown, not "no limit"."""
    seen = _by_broker(facts.status or {})
    ids = set(facts.brokers) | {int(b) for b, m in seen.items() if b.isdigit() and THROTTLE_RATE in m}
    rows = []
    for b in sorted(ids):
        mine = seen.get(str(b), {})
        rates = mine.get(THROTTLE_RATE)
        if not rates:
            rows.append({"broker": b, "known": False, "unknown": NO_METRICS})
            continue
        mode, rate = min(rates.items())  # one sample: the mode in force is its label
        reason = min((r for r, v in mine.get(THROTTLE_REASON, {}).items() if v == 1), default=None)
        rows.append({
            "broker": b, "known": True, "mode": mode, "rate": rate, "reason": reason,
            "reason_text": REASONS.get(reason or "", reason),
            "produce_p99_ms": _non_negative(mine.get(THROTTLE_P99, {}).get("")),
            "follower_lag_ms": _non_negative(mine.get(THROTTLE_LAG, {}).get("")),
            "cpu_pressure": _non_negative(mine.get(THROTTLE_PRESSURE, {}).get("")),
        })
    return rows


def self_healing_model(facts: Facts) -> dict[str, Any]:
    """What the active controller's self-healing is doing, from its ``headwater_self_healing_*``
    (only the active controller exports them; another broker's are a former controller's, so they
    are not used), with the configs as set on the <default> broker entity (DescribeConfigs).

    Each broker being counted down has ``in_s``, the seconds left of the threshold: the controller
    acts at its next check after that (if it is enabled; a dry run only logs)."""
    out: dict[str, Any] = {"known": False, "unknown": NO_METRICS, "controller": facts.controller_id,
                           "configured": facts.healing_configs, "configured_error": facts.healing_config_error}
    mine = _by_broker(facts.status or {}).get(str(facts.controller_id), {})
    if HEALING_ENABLED not in mine:
        if THROTTLE_RATE in mine:  # the controller's endpoint is read but has no self-healing (yet)
            out["unknown"] = f"unknown (controller {facts.controller_id}'s metrics endpoint exports no self-healing)"
        return out

    def one(name: str, default: float = 0.0) -> float:
        return mine.get(name, {}).get("", default)

    threshold = one(HEALING_THRESHOLD)

    def clocks(name: str) -> list[dict[str, Any]]:
        found = sorted((int(t), v) for t, v in mine.get(name, {}).items() if t.isdigit())
        return [{"broker": b, "for_s": v, "in_s": max(0.0, threshold - v)} for b, v in found]

    counts = mine.get(HEALING_ACTIONS, {})
    out.update(known=True, unknown=None, enabled=one(HEALING_ENABLED) == 1, dry_run=one(HEALING_DRY_RUN) == 1,
               threshold_s=threshold, moves_in_flight=int(one(HEALING_IN_FLIGHT)),
               next_action_s=_non_negative(one(HEALING_NEXT, -1.0)),
               dead_brokers=clocks(HEALING_DEAD), offline_dirs=clocks(HEALING_OFFLINE),
               actions={a: int(counts.get(a, 0)) for a in sorted({*ACTIONS, *counts}, key=_action_order)})
    return out


def _action_order(action: str) -> tuple[int, str]:
    return (ACTIONS.index(action) if action in ACTIONS else len(ACTIONS), action)
