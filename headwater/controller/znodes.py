"""The znodes the controller reads and writes: paths, values and their JSON, and the failover snapshot.

Formats follow Kafka's ZooKeeper layout (``/brokers/ids/<id>``, ``/brokers/topics/<t>`` v3,
``.../partitions/<p>/state`` v1, ``/config/topics/<t>`` v1, ``/admin/delete_topics/<t>``). The
topic and partition-state encoders reuse :mod:`headwater.metadata.image`, so the file store and
ZooKeeper agree byte for byte; the decoders live here because only the controller reads single
znodes. A state znode's ``stat.version`` is the partition epoch, and a broker znode's ``czxid`` is
the broker epoch; both travel next to the JSON as :class:`Znode` fields.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from headwater.metadata.image import (
    BrokerInfo,
    PartitionState,
    TopicImage,
    partition_state_json,
    topic_assignment_json,
)

CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
TOPIC_CONFIGS_PATH = "/config/topics"
DELETE_TOPICS_PATH = "/admin/delete_topics"

NO_LEADER = -1
"""``leader`` in a state znode when no replica leads."""
LEADER_DURING_DELETE = -2
"""Leader and leader epoch in UpdateMetadata for a topic queued for deletion; StopReplica's "delete" epoch."""


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{TOPIC_CONFIGS_PATH}/{topic}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{topic}"


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
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


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, ReplicaAssignment]


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A live broker as the controller knows it: ``broker_epoch`` is the czxid of ``/brokers/ids/<id>``."""

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

    brokers: Mapping[int, BrokerRegistration] = field(default_factory=dict)
    topics: Mapping[str, TopicAssignment] = field(default_factory=dict)
    configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    states: Mapping[TopicPartition, LeaderIsr] = field(default_factory=dict)
    topics_to_delete: frozenset[str] = frozenset()


# --- codecs -------------------------------------------------------------------------------------


def _dump(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def encode_partition_state(state: LeaderIsr) -> bytes:
    ps = PartitionState(replicas=(), leader=state.leader, leader_epoch=state.leader_epoch, isr=state.isr)
    return _dump(partition_state_json(ps, state.controller_epoch))


def decode_partition_state(data: bytes, version: int) -> LeaderIsr:
    doc = json.loads(data)
    return LeaderIsr(
        leader=int(doc["leader"]),
        leader_epoch=int(doc["leader_epoch"]),
        isr=tuple(int(b) for b in doc["isr"]),
        controller_epoch=int(doc["controller_epoch"]),
        partition_epoch=version,
    )


def encode_topic_assignment(topic: TopicAssignment) -> bytes:
    partitions = {
        p: PartitionState(a.replicas, NO_LEADER, 0, (), a.adding_replicas, a.removing_replicas)
        for p, a in topic.partitions.items()
    }
    return _dump(topic_assignment_json(TopicImage(topic.name, topic.topic_id, partitions)))


def decode_topic_assignment(name: str, data: bytes) -> TopicAssignment:
    doc = json.loads(data)
    adding = doc.get("adding_replicas") or {}
    removing = doc.get("removing_replicas") or {}
    partitions = {
        int(p): ReplicaAssignment(
            tuple(int(b) for b in replicas),
            tuple(int(b) for b in adding.get(p, ())),
            tuple(int(b) for b in removing.get(p, ())),
        )
        for p, replicas in doc["partitions"].items()
    }
    raw_id = doc.get("topic_id")
    topic_id = uuid.UUID(bytes=base64.urlsafe_b64decode(raw_id + "=" * (-len(raw_id) % 4))) if raw_id else uuid.UUID(int=0)
    return TopicAssignment(name, topic_id, partitions)


def encode_topic_config(configs: Mapping[str, str]) -> bytes:
    return _dump({"version": 1, "config": dict(sorted(configs.items()))})


def decode_topic_config(data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    return {str(k): str(v) for k, v in json.loads(data).get("config", {}).items()}


def encode_broker_registration(info: BrokerInfo, timestamp_ms: int) -> bytes:
    """``/brokers/ids/<id>`` version 5 with one PLAINTEXT listener."""
    doc: dict[str, Any] = {
        "features": {},
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "endpoints": [f"PLAINTEXT://{info.host}:{info.port}"],
        "jmx_port": -1,
        "port": info.port,
        "host": info.host,
        "version": 5,
        "timestamp": str(timestamp_ms),
    }
    if info.rack is not None:
        doc["rack"] = info.rack
    return _dump(doc)


def decode_broker_registration(broker_id: int, data: bytes, czxid: int) -> BrokerRegistration:
    doc = json.loads(data)
    host, port = doc.get("host"), int(doc.get("port", -1))
    if (host is None or port < 0) and doc.get("endpoints"):
        # "LISTENER://host:port", IPv6 hosts bracketed.
        hostport = str(doc["endpoints"][0]).split("://", 1)[1]
        host_part, _, port_part = hostport.rpartition(":")
        host, port = host_part.strip("[]"), int(port_part)
    return BrokerRegistration(broker_id, czxid, BrokerInfo(broker_id, str(host or ""), port, doc.get("rack")))


def snapshot_from_znodes(znodes: Mapping[str, Znode]) -> ZkSnapshot:
    """Build the failover snapshot from every znode under ``/brokers``, ``/config/topics`` and ``/admin/delete_topics``.

    The shell reads those subtrees (data plus stat) into a path-keyed map; unrelated paths are ignored.
    """
    brokers: dict[int, BrokerRegistration] = {}
    topics: dict[str, TopicAssignment] = {}
    configs: dict[str, dict[str, str]] = {}
    states: dict[TopicPartition, LeaderIsr] = {}
    to_delete: set[str] = set()
    for path, node in znodes.items():
        parts = path.strip("/").split("/")
        if parts[:2] == ["brokers", "ids"] and len(parts) == 3 and node.data:
            brokers[int(parts[2])] = decode_broker_registration(int(parts[2]), node.data, node.czxid)
        elif parts[:2] == ["brokers", "topics"] and len(parts) == 3 and node.data:
            topics[parts[2]] = decode_topic_assignment(parts[2], node.data)
        elif parts[:2] == ["brokers", "topics"] and len(parts) == 6 and parts[5] == "state" and node.data:
            states[TopicPartition(parts[2], int(parts[4]))] = decode_partition_state(node.data, node.version)
        elif parts[:2] == ["config", "topics"] and len(parts) == 3:
            configs[parts[2]] = decode_topic_config(node.data)
        elif parts[:2] == ["admin", "delete_topics"] and len(parts) == 3:
            to_delete.add(parts[2])
    return ZkSnapshot(brokers, topics, configs, states, frozenset(to_delete))
