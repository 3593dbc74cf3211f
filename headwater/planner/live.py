"""Read a cluster snapshot from a live cluster over the Kafka protocol only (headwater or Apache Kafka).

Metadata (v1+) gives brokers with racks and every partition's replicas and leader; DescribeLogDirs
gives replica sizes and each broker's log dirs, and DescribeConfigs each broker's ``cordoned.log.dirs``
(KIP-1066, Kafka 4.3 and headwater): a broker whose every log dir is cordoned (or ``*``) is recorded
cordoned, to be drained and never targeted. A broker that does not know the config has none cordoned. A broker that appears in replica lists but not among the live brokers is
recorded as dead (alive = false), so its replicas are moved. Partition size is the leader's replica
size (the bytes a new replica has to copy), or the largest replica's when the leader did not answer.
The protocol does not report disk capacity, so capacities come from ``--capacity`` (a default and
per-broker overrides) or are left unlimited.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

import numpy as np

from headwater.planner.errors import PlannerError
from headwater.planner.model import NO_BROKER, Broker
from headwater.planner.snapshot import Snapshot, wide_frame


def read_live(
    bootstrap: str,
    capacity_bytes: dict[int, int] | None = None,
    default_capacity_bytes: int | None = None,
    client_id: str = "headwater-plan",
    timeout_ms: int = 30_000,
    client_settings: dict[str, Any] | None = None,
) -> Snapshot:
    """``client_settings``: kafka-python keyword arguments (security, client id) from --command-config."""
    try:
        from kafka import KafkaAdminClient
        from kafka.admin import ConfigResource, ConfigResourceType
        from kafka.errors import KafkaError
    except ImportError as exc:  # pragma: no cover - kafka-python is a project dependency
        raise PlannerError(f"kafka-python is needed to read a live cluster ({exc})") from None
    try:
        settings: dict[str, Any] = {"client_id": client_id, **(client_settings or {})}
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=timeout_ms, **settings)
    except KafkaError as exc:
        raise PlannerError(f"cannot connect to {bootstrap}: {exc}") from None
    try:
        cluster = admin.describe_cluster()
        topics = admin.describe_topics()
        log_dirs = admin.describe_log_dirs()
        resources = [ConfigResource(ConfigResourceType.BROKER, str(b.get("broker_id", b.get("node_id"))),
                                    configs=[CORDONED_LOG_DIRS]) for b in cluster.get("brokers", [])]
        described = admin.describe_configs(resources, config_filter="all") if resources else {}
    except KafkaError as exc:
        raise PlannerError(f"reading metadata from {bootstrap} failed: {exc}") from None
    finally:
        admin.close()
    values = {int(name): str(c[CORDONED_LOG_DIRS].get("value") or "")
              for name, configs in described.get("broker", {}).items()
              for c in [configs] if CORDONED_LOG_DIRS in c}
    return snapshot_from_metadata(cluster, topics, log_dirs, capacity_bytes or {}, default_capacity_bytes,
                                  cordoned_brokers(values, log_dirs))


CORDONED_LOG_DIRS = "cordoned.log.dirs"


def cordoned_brokers(values: dict[int, str], log_dirs: list[dict[str, Any]]) -> set[int]:
    """The brokers whose every log dir is cordoned: ``*``, or every dir DescribeLogDirs lists for the
    broker named in its ``cordoned.log.dirs`` (Kafka's ``BrokerRegistration.hasUncordonedDirs`` false)."""
    dirs = {int(e["broker"]): {str(PurePath(str(d.get("log_dir")))) for d in e.get("log_dirs", [])} for e in log_dirs}
    out = set()
    for broker, value in values.items():
        entries = {str(PurePath(v.strip())) if v.strip() != "*" else "*" for v in value.split(",") if v.strip()}
        if "*" in entries or (dirs.get(broker) and dirs[broker] <= entries):
            out.add(broker)
    return out


def snapshot_from_metadata(
    cluster: dict[str, Any],
    topics: list[dict[str, Any]],
    log_dirs: list[dict[str, Any]],
    capacity_bytes: dict[int, int],
    default_capacity_bytes: int | None,
    cordoned: set[int] | None = None,
) -> Snapshot:
    """Build a snapshot from the admin client's dicts (separate from I/O so it can be tested)."""
    live: dict[int, str | None] = {}
    for b in cluster.get("brokers", []):
        bid = int(b.get("broker_id", b.get("node_id", -1)))
        live[bid] = b.get("rack")
    sizes: dict[tuple[str, int, int], int] = {}
    for entry in log_dirs:
        broker = int(entry["broker"])
        for d in entry.get("log_dirs", []):
            for t in d.get("topics", []):
                for p in t.get("partitions", []):
                    if p.get("is_future_key"):
                        continue  # an intra-broker move in progress; the current replica is counted
                    key = (str(t["name"]), int(p["partition_index"]), broker)
                    sizes[key] = max(sizes.get(key, 0), int(p.get("partition_size", 0)))
    names: list[str] = []
    parts: list[int] = []
    reps: list[list[int]] = []
    leaders: list[int] = []
    size_col: list[int] = []
    referenced: set[int] = set()
    for t in sorted(topics, key=lambda x: str(x.get("name"))):
        if int(t.get("error_code", 0)) != 0:
            raise PlannerError(f"metadata for topic {t.get('name')} has error code {t.get('error_code')}")
        for p in sorted(t.get("partitions", []), key=lambda x: int(x["partition_index"])):
            replicas = [int(x) for x in p.get("replica_nodes", [])]
            referenced.update(replicas)
            leader = int(p.get("leader_id", NO_BROKER))
            name = str(t["name"])
            pid = int(p["partition_index"])
            own = sizes.get((name, pid, leader))
            size = (
                own if own is not None else max((sizes.get((name, pid, r), 0) for r in replicas), default=0)
            )
            names.append(name)
            parts.append(pid)
            reps.append(replicas)
            leaders.append(leader if leader in replicas else NO_BROKER)
            size_col.append(size)
    brokers = [
        Broker(bid, rack, capacity_bytes.get(bid, default_capacity_bytes), True, bid in (cordoned or set()))
        for bid, rack in sorted(live.items())
    ]
    racks = {b.rack for b in brokers}
    for bid in sorted(referenced - set(live)):
        # A dead broker's rack is unknown; give it its own so it never counts against a live rack.
        rack = f"dead-{bid}" if racks != {None} else None
        brokers.append(Broker(bid, rack, capacity_bytes.get(bid, default_capacity_bytes), False))
    frame = wide_frame(
        np.array(names, dtype=object), np.array(parts, dtype=np.int64), reps, leaders, np.array(size_col)
    )
    return Snapshot(brokers, frame)
