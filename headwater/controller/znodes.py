"""The controller's view of the znodes it reads and writes, and the failover snapshot.

Paths and bytes are :mod:`headwater.metadata.zk`'s (Kafka's exact JSON); this module only maps
them to the controller's values. Two numbers live in ZooKeeper's stat, not in the JSON, and travel
next to it: a state znode's ``version`` is the partition epoch, and a broker znode's ``czxid`` is
the broker epoch.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from headwater.metadata import zk
from headwater.metadata.image import BrokerEndpoint, BrokerInfo

PATHS = zk.PATHS

NO_LEADER = -1
"""``leader`` in a state znode when no replica leads."""
LEADER_DURING_DELETE = -2
"""Leader and leader epoch in UpdateMetadata for a topic queued for deletion; StopReplica's "delete" epoch."""


class TopicPartition(NamedTuple):
    """A named tuple, not a dataclass: failover sorts and hashes 10,000 of these many times, and a
    tuple compares and hashes in C."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class LeaderIsr:
    """One partition state znode: its JSON plus its version (the partition epoch)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """One partition of ``/brokers/topics/<t>``: replicas, and the KIP-455 adding/removing sets."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        """ORS = RS - AR: the replicas before the reassignment (the only persistent copy of them)."""
        if not self.adding_replicas:
            return self.replicas
        return tuple(r for r in self.replicas if r not in self.adding_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """TRS = RS - RR, in target order."""
        if not self.removing_replicas:
            return self.replicas
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """Kafka's ``ReplicaAssignment.reassignTo``: RS = TRS followed by (ORS - TRS), AR = TRS - ORS,
        RR = ORS - TRS. ORS is this assignment's origin, so replacing an ongoing reassignment keeps it."""
        origin = self.origin_replicas
        full = tuple(dict.fromkeys((*target, *origin)))
        return ReplicaAssignment(full, tuple(r for r in full if r not in origin),
                                 tuple(r for r in full if r not in target))


@dataclass(frozen=True, slots=True)
class TopicRecord:
    """``/brokers/topics/<t>`` as the controller holds it."""

    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, ReplicaAssignment]


@dataclass(frozen=True, slots=True)
class LiveBroker:
    """A registered broker: ``broker_epoch`` is the czxid of ``/brokers/ids/<id>``."""

    broker_id: int
    broker_epoch: int
    info: BrokerInfo


@dataclass(frozen=True, slots=True)
class Znode:
    data: bytes | None
    version: int = 0
    czxid: int = 0


@dataclass(frozen=True)
class ZkSnapshot:
    """What a newly elected controller reads before it acts (Kafka's ``initializeControllerContext``)."""

    brokers: Mapping[int, LiveBroker] = field(default_factory=dict)
    topics: Mapping[str, TopicRecord] = field(default_factory=dict)
    configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    states: Mapping[TopicPartition, LeaderIsr] = field(default_factory=dict)
    topics_to_delete: frozenset[str] = frozenset()
    reassign_partitions: Mapping[tuple[str, int], tuple[int, ...]] | None = None
    """``/admin/reassign_partitions`` (None: no such znode; an unreadable document reads as empty)."""
    reassignment_queue: tuple[tuple[TopicPartition, tuple[int, ...]], ...] | None = None
    """``/admin/reassignment_queue`` in order (None: no such znode)."""
    broker_defaults: Mapping[str, str] = field(default_factory=dict)
    """``/config/brokers/<default>``: the cluster-wide dynamic broker configs."""
    preferred_replica_election: frozenset[tuple[str, int]] | None = None
    """``/admin/preferred_replica_election`` (None: no such znode; an unreadable document names nothing)."""


# --- to and from metadata.zk ---------------------------------------------------------------------


def encode_partition_state(state: LeaderIsr) -> bytes:
    return zk.encode_partition_state(
        zk.PartitionStateZNode(state.leader, state.leader_epoch, state.isr, state.controller_epoch))


def decode_partition_state(tp: TopicPartition, data: bytes, version: int) -> LeaderIsr:
    node = zk.decode_partition_state(tp.topic, tp.partition, data)
    return LeaderIsr(node.leader, node.leader_epoch, node.isr, node.controller_epoch, version)


def encode_topic(topic: TopicRecord) -> bytes:
    parts = topic.partitions
    return zk.encode_topic(zk.TopicAssignment(
        {p: a.replicas for p, a in parts.items()},
        topic.topic_id,
        {p: a.adding_replicas for p, a in parts.items() if a.adding_replicas},
        {p: a.removing_replicas for p, a in parts.items() if a.removing_replicas},
    ))


def decode_topic(name: str, data: bytes) -> TopicRecord:
    doc = zk.decode_topic(name, data)
    partitions = {
        p: ReplicaAssignment(r, doc.adding_replicas.get(p, ()), doc.removing_replicas.get(p, ()))
        for p, r in doc.partitions.items()
    }
    return TopicRecord(name, doc.topic_id or uuid.UUID(int=0), partitions)


def broker_info(reg: zk.BrokerRegistration) -> BrokerInfo:
    """host/port: the first PLAINTEXT listener, else the first one; every listener in ``endpoints``
    (the shell picks the inter-broker one, Metadata the client's)."""
    ep = next((e for e in reg.endpoints if e.security_protocol == "PLAINTEXT"), None) or reg.endpoints[0]
    endpoints = tuple(BrokerEndpoint(e.listener, e.host, e.port, e.security_protocol) for e in reg.endpoints)
    return BrokerInfo(reg.broker_id, ep.host, ep.port, reg.rack, endpoints, reg.cordoned)


def decode_live_broker(broker_id: int, data: bytes, czxid: int) -> LiveBroker:
    return LiveBroker(broker_id, czxid, broker_info(zk.decode_broker(broker_id, data)))


def decode_reassign_partitions(data: bytes | None) -> dict[tuple[str, int], tuple[int, ...]]:
    """``/admin/reassign_partitions`` as the controller reads it: a document it cannot read is empty
    (Kafka logs a warning and treats it so); the controller then deletes the znode."""
    if not data:
        return {}
    try:
        return zk.decode_reassign_partitions(data)
    except ValueError:
        return {}


def snapshot_from_znodes(znodes: Mapping[str, Znode]) -> ZkSnapshot:
    """Build the failover snapshot from every znode under ``/brokers``, ``/config/topics`` and
    ``/admin/delete_topics``, plus ``/admin/reassign_partitions`` itself.

    The shell reads those subtrees (data plus stat) into a path-keyed map; other paths are ignored.
    """
    brokers: dict[int, LiveBroker] = {}
    topics: dict[str, TopicRecord] = {}
    configs: dict[str, dict[str, str]] = {}
    states: dict[TopicPartition, LeaderIsr] = {}
    to_delete: set[str] = set()
    legacy: dict[tuple[str, int], tuple[int, ...]] | None = None
    queue: tuple[tuple[TopicPartition, tuple[int, ...]], ...] | None = None
    defaults: dict[str, str] = {}
    preferred: frozenset[tuple[str, int]] | None = None
    for path, node in znodes.items():
        parts = path.strip("/").split("/")
        if parts[:2] == ["brokers", "ids"] and len(parts) == 3 and node.data:
            brokers[int(parts[2])] = decode_live_broker(int(parts[2]), node.data, node.czxid)
        elif parts[:2] == ["brokers", "topics"] and len(parts) == 3 and node.data:
            topics[parts[2]] = decode_topic(parts[2], node.data)
        elif parts[:2] == ["brokers", "topics"] and len(parts) == 6 and parts[5] == "state" and node.data:
            tp = TopicPartition(parts[2], int(parts[4]))
            states[tp] = decode_partition_state(tp, node.data, node.version)
        elif parts[:2] == ["config", "topics"] and len(parts) == 3:
            configs[parts[2]] = zk.decode_config("topics", parts[2], node.data) if node.data else {}
        elif parts[:2] == ["admin", "delete_topics"] and len(parts) == 3:
            to_delete.add(parts[2])
        elif path == PATHS.REASSIGN_PARTITIONS:
            legacy = decode_reassign_partitions(node.data)
        elif path == PATHS.REASSIGNMENT_QUEUE:
            queue = decode_reassignment_queue(node.data)
        elif path == BROKER_DEFAULTS and node.data:
            defaults = zk.decode_config("brokers", zk.DEFAULT_ENTITY, node.data)
        elif path == PATHS.PREFERRED_REPLICA_ELECTION:
            preferred = decode_preferred_election(node.data)
    return ZkSnapshot(brokers, topics, configs, states, frozenset(to_delete), legacy, queue, defaults, preferred)


def decode_preferred_election(data: bytes | None) -> frozenset[tuple[str, int]]:
    """``/admin/preferred_replica_election`` as the controller reads it: an unreadable document names
    no partition (the controller then deletes the znode, as for ``/admin/reassign_partitions``)."""
    if not data:
        return frozenset()
    try:
        return frozenset(zk.decode_preferred_replica_election(data))
    except ValueError:
        return frozenset()


BROKER_DEFAULTS = PATHS.config("brokers", zk.DEFAULT_ENTITY)
"""The cluster-wide dynamic broker configs, where the controller reads its reassignment limit."""


def encode_reassignment_queue(entries: Sequence[tuple[TopicPartition, Sequence[int]]]) -> bytes:
    """``/admin/reassignment_queue``: the legacy znode's JSON (version 1), but in queue order, not sorted."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(r)} for tp, r in entries
    ]}, separators=(",", ":")).encode()


def decode_reassignment_queue(data: bytes | None) -> tuple[tuple[TopicPartition, tuple[int, ...]], ...]:
    """Entries in order; a later entry for the same partition replaces the earlier one's target in place.

    Only the controller writes this znode, so an unreadable document is a bug or a hand edit: it reads
    as empty (as Kafka's controller treats an unreadable legacy znode) rather than blocking failover."""
    try:
        doc = json.loads(data or b"")
        out: dict[TopicPartition, tuple[int, ...]] = {}
        for entry in doc["partitions"]:
            replicas = tuple(int(r) for r in entry["replicas"])
            out[TopicPartition(str(entry["topic"]), int(entry["partition"]))] = replicas
    except (ValueError, TypeError, KeyError):
        return ()
    return tuple(out.items())


def encode_self_healing(healing: Mapping[TopicPartition, Iterable[int]]) -> bytes:
    """``/admin/self_healing``: each healing move in flight with the dead brokers it moves away from
    (none for a move away from a failed log dir)."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "away": sorted(brokers)}
        for tp, brokers in sorted(healing.items())
    ]}, separators=(",", ":")).encode()


def decode_self_healing(data: bytes | None) -> dict[TopicPartition, frozenset[int]]:
    """Only the controller writes it; an unreadable document reads as no healing moves (they then
    complete as ordinary reassignments, without the final election)."""
    try:
        doc = json.loads(data or b"")
        return {TopicPartition(str(e["topic"]), int(e["partition"])): frozenset(int(b) for b in e["away"])
                for e in doc["partitions"]}
    except (ValueError, TypeError, KeyError):
        return {}
