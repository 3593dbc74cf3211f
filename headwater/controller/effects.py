"""What the controller asks for: fenced ZooKeeper writes, requests to brokers, and responses.

Every :class:`ZkWrite` carries ``controller_epoch_version``: the shell must send it as one
ZooKeeper multi ``[check("/controller_epoch", controller_epoch_version), <the write>]``, exactly
like Kafka's ``KafkaZkClient``, so a deposed controller cannot write. ``change`` says what the
write means to the controller's cache; the shell hands the write back to
:meth:`Controller.apply` once ZooKeeper accepted it.

Broker requests carry the fields of Kafka's LeaderAndIsr v7, UpdateMetadata v8 and StopReplica v4
(ZooKeeper-era controller to broker); each is addressed to one broker and carries that broker's
epoch, so a restarted broker rejects requests meant for its previous life.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from headwater.controller.znodes import PATHS, LeaderIsr, TopicPartition, TopicRecord
from headwater.metadata.image import BrokerInfo
from headwater.protocol.errors import ErrorCode

# --- what a write means to the controller's cache (replayed by Controller.apply) ---------------


@dataclass(frozen=True, slots=True)
class PartitionStateWritten:
    tp: TopicPartition
    state: LeaderIsr


@dataclass(frozen=True, slots=True)
class TopicAssignmentWritten:
    topic: TopicRecord


@dataclass(frozen=True, slots=True)
class TopicConfigWritten:
    topic: str
    configs: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class TopicDeletionQueued:
    topic: str


@dataclass(frozen=True, slots=True)
class TopicRemoved:
    """``/brokers/topics/<t>`` and everything under it (the partition states) is gone."""

    topic: str


@dataclass(frozen=True, slots=True)
class TopicConfigRemoved:
    topic: str


@dataclass(frozen=True, slots=True)
class DeletionMarkerRemoved:
    """``/admin/delete_topics/<t>`` is gone (the last write of a deletion, or a stale marker)."""

    topic: str


@dataclass(frozen=True, slots=True)
class LegacyReassignmentWritten:
    """``/admin/reassign_partitions`` now holds ``partitions`` (None: the znode was deleted)."""

    partitions: Mapping[tuple[str, int], tuple[int, ...]] | None


@dataclass(frozen=True, slots=True)
class ReassignmentQueueWritten:
    """``/admin/reassignment_queue`` now holds ``entries``, in order (None: the znode was deleted)."""

    entries: tuple[tuple[TopicPartition, tuple[int, ...]], ...] | None


@dataclass(frozen=True, slots=True)
class PreferredElectionRemoved:
    """``/admin/preferred_replica_election`` is gone: the elections it asked for were tried."""


Change = (
    PartitionStateWritten
    | TopicAssignmentWritten
    | TopicConfigWritten
    | TopicDeletionQueued
    | TopicRemoved
    | TopicConfigRemoved
    | DeletionMarkerRemoved
    | LegacyReassignmentWritten
    | ReassignmentQueueWritten
    | PreferredElectionRemoved
)


class ZkOp(Enum):
    CREATE = "create"
    SET = "set"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class ZkWrite:
    """One fenced write.

    * CREATE: persistent node with ``data``; ``make_parents`` creates missing parents with null data
      (in the same fenced multi, as Kafka's ``createRecursive`` for ``partitions/<p>``).
    * SET: ``expected_version`` is the znode's version (-1: any); for a partition state it is the
      partition epoch, so the new version is ``expected_version + 1``.
    * DELETE: ``recursive`` deletes children first (each fenced).

    Any failure (the epoch check, a version, a missing or existing node) means this controller's view
    is wrong: the shell must stop applying this result and hand the controller :class:`Resigned`;
    the next controller reloads from ZooKeeper.
    """

    op: ZkOp
    path: str
    data: bytes | None
    controller_epoch_version: int
    change: Change
    expected_version: int = -1
    make_parents: bool = False
    recursive: bool = False
    standalone: bool = False
    """ZooKeeper stays consistent whether or not this write is applied, once the writes of its result
    that are not standalone and come before it are: a topic znode write that only adds replicas
    (phase U of a new reassignment). Partition state writes are always so. The shell may send a run
    of such writes to distinct znodes in several multis at once (a failed one only means the
    controller resigns with some of them applied)."""

    @property
    def parents(self) -> tuple[str, ...]:
        """With ``make_parents``: the ancestors to create (null data) when missing, outermost first.

        Kafka's top-level paths (which every broker creates at start) and their ancestors are left out,
        so for a partition state this is ``.../partitions`` and ``.../partitions/<p>``.
        """
        if not self.make_parents:
            return ()
        parts = self.path.strip("/").split("/")
        ancestors = ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]
        fixed = {a for top in PATHS.TOP_LEVEL for a in _with_ancestors(top)}
        topic_znode = self.path.startswith(PATHS.BROKER_TOPICS + "/") and len(parts) > 3
        return tuple(a for a in ancestors if a not in fixed and not (topic_znode and a.count("/") == 3))


def _with_ancestors(path: str) -> list[str]:
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts) + 1)]


# --- requests to brokers ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LeaderAndIsrPartition:
    topic: str
    topic_id: uuid.UUID
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    is_new: bool = False
    leader_recovery_state: int = 0

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class LeaderAndIsrRequest:
    broker_id: int
    """Destination."""
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[LeaderAndIsrPartition, ...]
    live_leaders: tuple[BrokerInfo, ...]


@dataclass(frozen=True, slots=True)
class UpdateMetadataPartition:
    topic: str
    topic_id: uuid.UUID
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class UpdateMetadataRequest:
    broker_id: int
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[UpdateMetadataPartition, ...]
    live_brokers: tuple[BrokerInfo, ...]


@dataclass(frozen=True, slots=True)
class StopReplicaPartition:
    topic: str
    partition: int
    leader_epoch: int
    """-2 (LEADER_DURING_DELETE) when the topic is being deleted, which overrides the broker's epoch check."""
    delete: bool

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class StopReplicaRequest:
    broker_id: int
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[StopReplicaPartition, ...]


BrokerRequest = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest


# --- responses ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AlterPartitionResult:
    topic: str
    partition: int
    error: ErrorCode
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


@dataclass(frozen=True, slots=True)
class AlterPartitionResponse:
    error: ErrorCode
    partitions: tuple[AlterPartitionResult, ...] = ()


@dataclass(frozen=True, slots=True)
class ControlledShutdownResponse:
    error: ErrorCode
    remaining: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicResult:
    name: str
    error: ErrorCode
    message: str | None = None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CreateTopicsResponse:
    topics: tuple[TopicResult, ...]


@dataclass(frozen=True, slots=True)
class DeleteTopicsResponse:
    topics: tuple[TopicResult, ...]


@dataclass(frozen=True, slots=True)
class CreatePartitionsResponse:
    topics: tuple[TopicResult, ...]


@dataclass(frozen=True, slots=True)
class ReassignmentResult:
    """One partition of AlterPartitionReassignments: NONE, or Kafka's code and message."""

    topic: str
    partition: int
    error: ErrorCode
    message: str | None = None


@dataclass(frozen=True, slots=True)
class AlterPartitionReassignmentsResponse:
    """``error`` is top-level (NOT_CONTROLLER, with no partitions); otherwise one result per distinct
    partition of the request, in request order."""

    error: ErrorCode
    partitions: tuple[ReassignmentResult, ...] = ()
    message: str | None = None


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    """One partition of ListPartitionReassignments: RS, AR and RR as ZooKeeper holds them."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ListPartitionReassignmentsResponse:
    error: ErrorCode
    partitions: tuple[OngoingReassignment, ...] = ()


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """One partition of ElectLeaders: NONE with the leader elected, or Kafka's code and message."""

    topic: str
    partition: int
    error: ErrorCode
    message: str | None = None
    leader: int = -1


@dataclass(frozen=True, slots=True)
class ElectLeadersResponse:
    error: ErrorCode
    partitions: tuple[ElectionResult, ...] = ()


Response = (
    AlterPartitionResponse
    | ControlledShutdownResponse
    | CreateTopicsResponse
    | DeleteTopicsResponse
    | CreatePartitionsResponse
    | AlterPartitionReassignmentsResponse
    | ListPartitionReassignmentsResponse
    | ElectLeadersResponse
)


@dataclass(slots=True)
class ControllerResult:
    """The outcome of one event. The shell applies ``writes`` in order (each fenced, each followed by
    :meth:`Controller.apply`); only if all succeed does it send ``response`` and ``requests``.

    ``requests`` are built on first use, so that the shell can answer first: at 10,000 partitions
    they take longer to build than the answer takes to send. They come out the same whether read
    before or after the writes are applied, or after later events: they are built from values
    captured when the result was made."""

    writes: tuple[ZkWrite, ...] = ()
    response: Response | None = None
    warnings: tuple[str, ...] = ()
    """What an operator must hear about once the writes are accepted (an unclean election)."""
    build: Callable[[], tuple[BrokerRequest, ...]] | None = field(default=None, repr=False, compare=False)
    _requests: tuple[BrokerRequest, ...] | None = field(default=None, repr=False, compare=False)

    @property
    def requests(self) -> tuple[BrokerRequest, ...]:
        if self._requests is None:
            self._requests = self.build() if self.build is not None else ()
            self.build = None
        return self._requests

    @property
    def built(self) -> bool:
        return self._requests is not None or self.build is None

    def drop_requests(self) -> None:
        """Requests not built yet never will be: the controller that decided them resigned (or was elected anew)."""
        if self._requests is None:
            self.build = None
