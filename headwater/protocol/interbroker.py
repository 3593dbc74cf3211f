"""The ZooKeeper-era inter-broker messages: LeaderAndIsr, StopReplica, UpdateMetadata,
ControlledShutdown and AlterPartition.

kafka-python ships no classes for these, so we give it Kafka's message schemas for them
(``headwater/protocol/schemas/*.json``) and let its ``ApiMessage`` build the classes, exactly as
it builds the client APIs. The classes behave like every other kafka-python message::

    req = LeaderAndIsrRequest(version=7, controller_id=1, controller_epoch=3, broker_epoch=42, type=0,
                              topic_states=[...], live_leaders=[...])
    body = req.encode()                                  # the body, no header
    back = LeaderAndIsrRequest.decode(body, version=7)   # equal to req

Field keywords are the snake_case forms of the schema names (``isKRaftController`` becomes
``is_k_raft_controller``); nested structs are attributes of the class
(``LeaderAndIsrRequest.LeaderAndIsrTopicState``, ``AlterPartitionRequest.TopicData.PartitionData``).
Tagged fields (only UpdateMetadata's ``Type``) are written only when passed explicitly. A decoded
message re-encodes with ``msg.encode()`` (it keeps its version); kafka-python's
``encode(version=...)`` needs a message built by its constructor.

The builder helpers below fill the fields a ZooKeeper-mode controller sets for the version it
sends, so callers do not have to know which fields exist in which version.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kafka.protocol.api_header import RequestHeader, ResponseHeader
from kafka.protocol.api_message import ApiMessage
from kafka.util import classproperty

_SCHEMAS = "headwater.protocol.schemas"


class _HeaderBySchema:
    """kafka-python's ApiMessage tells requests from responses by the class attribute ``type``,
    which a message field named ``Type`` (LeaderAndIsr, UpdateMetadata) replaces with its slot.
    Decide from the schema instead."""

    __slots__ = ()
    _json: dict[str, Any]

    @classproperty  # type: ignore[untyped-decorator]
    def header_class(cls) -> Any:
        return RequestHeader if cls._json["type"] == "request" else ResponseHeader

    @classmethod
    def is_request(cls) -> bool:
        return bool(cls._json["type"] == "request")


class LeaderAndIsrRequest(_HeaderBySchema, ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """API key 4, v0-v7, flexible from v4."""


class LeaderAndIsrResponse(_HeaderBySchema, ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """API key 4, v0-v7, flexible from v4."""


class StopReplicaRequest(_HeaderBySchema, ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """API key 5, v0-v4, flexible from v2."""


class StopReplicaResponse(_HeaderBySchema, ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """API key 5, v0-v4, flexible from v2."""


class UpdateMetadataRequest(_HeaderBySchema, ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """API key 6, v0-v8, flexible from v6."""


class UpdateMetadataResponse(_HeaderBySchema, ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """API key 6, v0-v8, flexible from v6."""


class ControlledShutdownRequest(_HeaderBySchema, ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """API key 7, v0-v3, flexible from v3. v0 travels with a request header without client id."""


class ControlledShutdownResponse(_HeaderBySchema, ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """API key 7, v0-v3, flexible from v3."""


class AlterPartitionRequest(_HeaderBySchema, ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """API key 56, v0-v3, flexible in every version."""


class AlterPartitionResponse(_HeaderBySchema, ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """API key 56, v0-v3, flexible in every version."""


# (request, response) per API key.
MESSAGES: dict[int, tuple[Any, Any]] = {
    4: (LeaderAndIsrRequest, LeaderAndIsrResponse),
    5: (StopReplicaRequest, StopReplicaResponse),
    6: (UpdateMetadataRequest, UpdateMetadataResponse),
    7: (ControlledShutdownRequest, ControlledShutdownResponse),
    56: (AlterPartitionRequest, AlterPartitionResponse),
}

# The versions a ZooKeeper-mode 3.4+ controller/broker sends (IBP 3.4 or later).
LEADER_AND_ISR_VERSION = 7
STOP_REPLICA_VERSION = 4
UPDATE_METADATA_VERSION = 8
CONTROLLED_SHUTDOWN_VERSION = 3
ALTER_PARTITION_VERSION = 3

# UpdateMetadata endpoint SecurityProtocol ids.
SECURITY_PROTOCOL_IDS: dict[str, int] = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


# --- builders --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionLeadership:
    """One partition's state as the controller sends it in LeaderAndIsr and UpdateMetadata."""

    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: Sequence[int]
    partition_epoch: int  # zkVersion of the partition state znode
    replicas: Sequence[int]
    adding_replicas: Sequence[int] = ()
    removing_replicas: Sequence[int] = ()
    is_new: bool = False
    leader_recovery_state: int = 0
    offline_replicas: Sequence[int] = ()  # UpdateMetadata only


def _by_topic(states: Iterable[PartitionLeadership]) -> dict[str, list[PartitionLeadership]]:
    grouped: dict[str, list[PartitionLeadership]] = {}
    for s in states:
        grouped.setdefault(s.topic, []).append(s)
    return grouped


def leader_and_isr_request(
    version: int,
    *,
    controller_id: int,
    controller_epoch: int,
    broker_epoch: int,
    states: Iterable[PartitionLeadership],
    topic_ids: dict[str, uuid.UUID],
    live_leaders: Iterable[tuple[int, str, int]],
) -> Any:
    """A LeaderAndIsr request of ``version``: grouped by topic from v2, with topic ids from v5.

    ``live_leaders`` holds (broker id, host, port) of every leader named in ``states``. Fields the
    version does not have are left out; Type is 0 and isKRaftController false, as a ZooKeeper
    controller sends them.
    """
    cls = LeaderAndIsrRequest
    # The common struct is bound twice, once per place it is used, each with its own versions.
    pstate = cls.LeaderAndIsrTopicState.LeaderAndIsrPartitionState if version >= 2 else cls.LeaderAndIsrPartitionState

    def partition(s: PartitionLeadership, with_topic: bool) -> Any:
        fields: dict[str, Any] = {
            "partition_index": s.partition,
            "controller_epoch": s.controller_epoch,
            "leader": s.leader,
            "leader_epoch": s.leader_epoch,
            "isr": list(s.isr),
            "partition_epoch": s.partition_epoch,
            "replicas": list(s.replicas),
        }
        if with_topic:
            fields["topic_name"] = s.topic
        if version >= 1:
            fields["is_new"] = s.is_new
        if version >= 3:
            fields["adding_replicas"] = list(s.adding_replicas)
            fields["removing_replicas"] = list(s.removing_replicas)
        if version >= 6:
            fields["leader_recovery_state"] = s.leader_recovery_state
        return pstate(version=version, **fields)

    states = list(states)
    body: dict[str, Any] = {"controller_id": controller_id, "controller_epoch": controller_epoch}
    if version >= 2:
        body["broker_epoch"] = broker_epoch
        topics = []
        for name, parts in _by_topic(states).items():
            t: dict[str, Any] = {"topic_name": name, "partition_states": [partition(s, False) for s in parts]}
            if version >= 5:
                t["topic_id"] = topic_ids.get(name, uuid.UUID(int=0))
            topics.append(cls.LeaderAndIsrTopicState(version=version, **t))
        body["topic_states"] = topics
    else:
        body["ungrouped_partition_states"] = [partition(s, True) for s in states]
    if version >= 5:
        body["type"] = 0
    if version >= 7:
        body["is_k_raft_controller"] = False
    body["live_leaders"] = [
        cls.LeaderAndIsrLiveLeader(version=version, broker_id=b, host_name=h, port=p) for b, h, p in live_leaders
    ]
    return cls(version=version, **body)


def iter_leader_and_isr(request: Any) -> list[tuple[str, uuid.UUID | None, Any]]:
    """(topic name, topic id or None, partition state) for every partition of a decoded request."""
    out: list[tuple[str, uuid.UUID | None, Any]] = []
    if request.version >= 2:
        for t in request.topic_states:
            tid = t.topic_id if request.version >= 5 else None
            out.extend((t.topic_name, tid, p) for p in t.partition_states)
    else:
        out.extend((p.topic_name, None, p) for p in request.ungrouped_partition_states)
    return out
