"""The cluster image: brokers, topics, partitions and their assignment, as one value.

Everything that decides (topic admin, later the controller and replication) reads this image;
changes are made by building a new value, so a half-applied change is never visible. The JSON
shapes of topics and partition states follow Kafka's ZooKeeper znodes (``/brokers/topics/<t>``,
``.../partitions/<p>/state``) so the same codecs serve the file store now and ZooKeeper next.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from headwater.metadata import zk


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """One listener of a broker, as registered: clients get the endpoint of the listener they came in on."""

    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    broker_id: int
    host: str  # the address other brokers use (the inter-broker listener)
    port: int
    rack: str | None = None
    endpoints: tuple[BrokerEndpoint, ...] = ()  # every listener; empty means just host:port
    cordoned: bool = False  # every log dir cordoned (KIP-1066): automatic placement gives it no new replicas

    def address(self, listener: str | None) -> tuple[str, int] | None:
        """Where a client of ``listener`` reaches this broker; None when the broker lacks that listener.
        A broker registered without listener names (old registrations) answers on every listener."""
        if not self.endpoints or listener is None:
            return (self.host, self.port)
        ep = next((e for e in self.endpoints if e.listener == listener), None)
        return (ep.host, ep.port) if ep is not None else None


@dataclass(frozen=True, slots=True)
class PartitionState:
    replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()  # in a failed log dir of a live broker (dead brokers' are implied)


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionState]
    configs: Mapping[str, str] = field(default_factory=dict)

    @property
    def replication_factor(self) -> int:
        return len(next(iter(self.partitions.values())).replicas) if self.partitions else 0


@dataclass(frozen=True, slots=True)
class ClusterImage:
    cluster_id: str
    controller_id: int
    brokers: Mapping[int, BrokerInfo]
    topics: Mapping[str, TopicImage]
    next_producer_id: int = 0

    def with_topic(self, topic: TopicImage) -> ClusterImage:
        return replace(self, topics={**self.topics, topic.name: topic})

    def without_topic(self, name: str) -> ClusterImage:
        return replace(self, topics={k: v for k, v in self.topics.items() if k != name})

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        for topic in self.topics.values():
            if topic.topic_id == topic_id:
                return topic
        return None

    def preferred_imbalance(self, broker_id: int) -> int:
        """Partitions whose preferred replica (the first assigned) is ``broker_id`` but which it does not lead."""
        return sum(1 for t in self.topics.values() for p in t.partitions.values()
                   if p.replicas and p.replicas[0] == broker_id and p.leader != broker_id)


# --- JSON codecs in the shape of Kafka's znodes -------------------------------------------------


def topic_assignment_json(topic: TopicImage) -> dict[str, Any]:
    """``/brokers/topics/<topic>`` (version 3: with topic id and adding/removing replicas)."""
    return zk.topic_json(zk.TopicAssignment(
        partitions={p: s.replicas for p, s in topic.partitions.items()},
        topic_id=topic.topic_id,
        adding_replicas={p: s.adding_replicas for p, s in topic.partitions.items()},
        removing_replicas={p: s.removing_replicas for p, s in topic.partitions.items()},
    ))


def partition_state_json(state: PartitionState, controller_epoch: int) -> dict[str, Any]:
    """``/brokers/topics/<t>/partitions/<p>/state``."""
    return zk.partition_state_json(zk.PartitionStateZNode(state.leader, state.leader_epoch, state.isr, controller_epoch))


def image_to_json(image: ClusterImage) -> str:
    """The whole image, for a single broker's local metadata file."""
    doc = {
        "version": 1,
        "cluster_id": image.cluster_id,
        "next_producer_id": image.next_producer_id,
        "topics": {
            name: {
                "assignment": topic_assignment_json(t),
                "states": {str(p): partition_state_json(s, 0) for p, s in sorted(t.partitions.items())},
                "configs": dict(sorted(t.configs.items())),
            }
            for name, t in sorted(image.topics.items())
        },
    }
    return json.dumps(doc, indent=1, sort_keys=True)


def image_from_json(text: str, controller_id: int, brokers: Mapping[int, BrokerInfo]) -> ClusterImage:
    doc = json.loads(text)
    topics: dict[str, TopicImage] = {}
    for name, t in doc["topics"].items():
        assignment = t["assignment"]
        partitions: dict[int, PartitionState] = {}
        for p_str, replicas in assignment["partitions"].items():
            st = t["states"][p_str]
            partitions[int(p_str)] = PartitionState(
                replicas=tuple(replicas),
                leader=st["leader"],
                leader_epoch=st["leader_epoch"],
                isr=tuple(st["isr"]),
                adding_replicas=tuple(assignment.get("adding_replicas", {}).get(p_str, ())),
                removing_replicas=tuple(assignment.get("removing_replicas", {}).get(p_str, ())),
            )
        topics[name] = TopicImage(name, _parse_kafka_uuid(assignment["topic_id"]), partitions, t.get("configs", {}))
    return ClusterImage(doc["cluster_id"], controller_id, brokers, topics, doc.get("next_producer_id", 0))


_kafka_uuid = zk.kafka_uuid
_parse_kafka_uuid = zk.parse_kafka_uuid


def new_cluster_id() -> str:
    return _kafka_uuid(uuid.uuid4())
