"""The console's page models, built from what the Kafka protocol and the metrics endpoints answered.

Pure: ``Facts`` holds the answers of one poll in plain Python (``reader.py`` fills it from the
kafka-python responses), and ``build_snapshot`` turns them into the JSON the pages render. Nothing
here does I/O, so the pages' meaning is unit-tested without a cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from headwater.admin.reassign import FOLLOWER_THROTTLED_REPLICAS, LEADER_THROTTLED_REPLICAS, Ongoing

TopicPartition = tuple[str, int]
THROTTLE_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")


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


def replica_sizes(log_dirs: Mapping[int, Iterable[LogDirFacts]]) -> dict[tuple[str, int, int], int]:
    """(topic, partition, broker) -> bytes, summed over the broker's log dirs (a replica moving
    between dirs shows in two)."""
    out: dict[tuple[str, int, int], int] = {}
    for broker, dirs in log_dirs.items():
        for d in dirs:
            for (t, p), size in d.sizes.items():
                out[(t, p, broker)] = out.get((t, p, broker), 0) + size
    return out


def _min_isr(configs: Mapping[str, str | None]) -> int:
    value = configs.get("min.insync.replicas")
    return int(value) if value is not None and value.isdigit() else 1


def health(facts: Facts) -> dict[str, list[str]]:
    """Under-replicated (ISR smaller than replicas), under-min-ISR and offline (no leader) partitions."""
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


def brokers_model(facts: Facts) -> list[dict[str, Any]]:
    """One row per broker: the registered ones, and any broker a replica names that is not
    registered (down), so a dead broker stays on the page."""
    replicas: dict[int, int] = {}
    leaders: dict[int, int] = {}
    preferred: dict[int, int] = {}
    preferred_not_leading: dict[int, int] = {}
    for parts in facts.topics.values():
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


def topics_model(facts: Facts) -> list[dict[str, Any]]:
    sizes = replica_sizes(facts.log_dirs)
    out = []
    for topic, parts in sorted(facts.topics.items()):
        rows: list[dict[str, Any]] = []
        for p, pf in sorted(parts.items()):
            by_broker = {b: sizes[(topic, p, b)] for b in pf.replicas if (topic, p, b) in sizes}
            rows.append({
                "partition": p, "leader": pf.leader, "replicas": list(pf.replicas), "isr": list(pf.isr),
                "offline": list(pf.offline), "sizes": {str(b): s for b, s in by_broker.items()},
                "size": by_broker.get(pf.leader, max(by_broker.values(), default=0)),
                "under_replicated": len(pf.isr) < len(pf.replicas),
            })
        out.append({"name": topic, "partitions": rows, "bytes": sum(r["size"] for r in rows)})
    return out


def _throttled_entries(value: str | None) -> set[str]:
    return {e.strip() for e in (value or "").split(",") if e.strip()}


def _is_throttled(facts: Facts, tp: TopicPartition, sources: Iterable[int], adding: Iterable[int]) -> bool:
    """Kafka throttles a move when the topic lists its replicas and the brokers have a rate: the
    follower list names the adding replicas (or ``*``)."""
    configs = facts.topic_configs.get(tp[0], {})
    followers = _throttled_entries(configs.get(FOLLOWER_THROTTLED_REPLICAS))
    leaders = _throttled_entries(configs.get(LEADER_THROTTLED_REPLICAS))
    listed = "*" in followers or any(f"{tp[1]}:{b}" in followers for b in adding) \
        or "*" in leaders or any(f"{tp[1]}:{b}" in leaders for b in sources)
    rated = any(bool(facts.broker_configs.get(b, {}).get(k)) for b in (*sources, *adding) for k in THROTTLE_RATES)
    return listed and rated


class RateTracker:
    """The console's own copy rate per adding replica from successive byte counts, for clusters
    without a metrics endpoint (Apache Kafka has no per-move metric): bytes gained over the last
    ``window_s`` seconds."""

    def __init__(self, window_s: float = 10.0) -> None:
        self.window_s = window_s
        self._samples: dict[tuple[str, int, int], list[tuple[float, int]]] = {}

    def observe(self, at: float, copied: Mapping[tuple[str, int, int], int]) -> None:
        for key, n in copied.items():
            samples = self._samples.setdefault(key, [])
            samples.append((at, n))
            while len(samples) > 2 and samples[0][0] < at - self.window_s:
                samples.pop(0)
        for key in set(self._samples) - set(copied):
            del self._samples[key]  # the move ended: forget it

    def rate(self, key: tuple[str, int, int]) -> float | None:
        samples = self._samples.get(key, [])
        if len(samples) < 2 or samples[-1][0] <= samples[0][0]:
            return None
        return max(0.0, (samples[-1][1] - samples[0][1]) / (samples[-1][0] - samples[0][0]))


def _eta(remaining: int, rate: float | None) -> float | None:
    if remaining <= 0:
        return 0.0
    return remaining / rate if rate else None


def moves_model(facts: Facts, rates: RateTracker | None = None) -> list[dict[str, Any]]:
    """Every partition in flight: original (from) and target (to) replicas, bytes each adding replica
    holds against the largest source replica, and rate and ETA: the brokers' metrics when given
    (the leader's view first: it knows the exact bytes to move), else the console's own estimate."""
    sizes = replica_sizes(facts.log_dirs)
    out = []
    for tp, o in sorted((facts.ongoing or {}).items()):
        sources = [b for b in o.replicas if b not in o.adding]
        target = [b for b in o.replicas if b not in o.removing]
        source_bytes = max((sizes.get((tp[0], tp[1], b), 0) for b in sources), default=0)
        copies: list[dict[str, Any]] = []
        for b in o.adding:
            copied = min(sizes.get((tp[0], tp[1], b), 0), source_bytes) if source_bytes else 0
            metric = facts.move_metrics.get((tp[0], tp[1], b, "leader")) or \
                facts.move_metrics.get((tp[0], tp[1], b, "follower"))
            rate: float | None
            if metric is not None:
                # The broker's ETA when it has one; else the remaining bytes at its rate.
                rate, rate_source = metric.rate, "metrics"
                eta = metric.eta_s if metric.eta_s >= 0 else _eta(source_bytes - copied, rate)
            else:
                rate = rates.rate((tp[0], tp[1], b)) if rates is not None else None
                eta, rate_source = _eta(source_bytes - copied, rate), "estimate"
            copies.append({"broker": b, "copied": copied, "total": source_bytes, "rate": rate, "eta_s": eta,
                           "rate_source": rate_source})
        copied_sum, total_sum = sum(c["copied"] for c in copies), sum(c["total"] for c in copies)
        etas = [c["eta_s"] for c in copies]
        move_rate = sum(c["rate"] or 0.0 for c in copies) if any(c["rate"] is not None for c in copies) else None
        out.append({
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
            "throttled": _is_throttled(facts, tp, sources, o.adding),
        })
    return out


def copied_bytes(facts: Facts) -> dict[tuple[str, int, int], int]:
    """What each adding replica holds now: the input of ``RateTracker.observe``."""
    sizes = replica_sizes(facts.log_dirs)
    return {(tp[0], tp[1], b): sizes.get((tp[0], tp[1], b), 0)
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


def heatmap_model(facts: Facts) -> dict[str, Any]:
    """Broker x topic: replicas each broker holds of each topic (Metadata) and their bytes
    (DescribeLogDirs), each cell with a heat level against the largest cell of its map. Every
    registered broker has a column, so an empty one shows as an empty column."""
    sizes = replica_sizes(facts.log_dirs)
    brokers = sorted(set(facts.brokers) | {b for parts in facts.topics.values() for pf in parts.values()
                                           for b in pf.replicas})
    raw: list[tuple[str, dict[int, int], dict[int, int]]] = []
    for topic, parts in sorted(facts.topics.items()):
        counts = dict.fromkeys(brokers, 0)
        held = dict.fromkeys(brokers, 0)
        for p, pf in parts.items():
            for b in pf.replicas:
                counts[b] += 1
                held[b] += sizes.get((topic, p, b), 0)
        raw.append((topic, counts, held))
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
