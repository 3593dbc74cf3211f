"""What the controller is told: frozen event values, one class per input.

Three kinds, which differ in how they may change the controller:

* ZooKeeper facts (the shell saw them through a watch or a read): :class:`ControllerElected`,
  :class:`Resigned`, :class:`BrokerRegistered`, :class:`BrokerExpired`, :class:`TopicConfigChanged`.
  They change the controller's cache without a write (``ControllerState.load`` and
  ``ControllerState.observe``), because ZooKeeper already holds them.
* Requests from brokers and clients, each answered with a response: :class:`ControlledShutdownRequested`,
  :class:`AlterPartitionReceived`, :class:`CreateTopicsRequested`, :class:`DeleteTopicsRequested`,
  :class:`CreatePartitionsRequested`, :class:`AlterPartitionReassignmentsRequested`,
  :class:`ListPartitionReassignmentsRequested`, :class:`ElectLeadersRequested`.
* :class:`LegacyReassignmentRequested` and :class:`PreferredElectionRequested`:
  ``/admin/reassign_partitions`` or ``/admin/preferred_replica_election`` was created (ZooKeeper
  facts, but ones the controller acts on and then rewrites or deletes).
* :class:`AutoRebalanceCheck`: the shell's ``leader.imbalance.check.interval.seconds`` timer fired.
* Responses to the controller's own requests: :class:`StopReplicaResponseReceived`.

Decisions never change the controller's state in :meth:`Controller.handle`; they come back as
ZooKeeper writes, and only :meth:`Controller.apply` of a write that ZooKeeper accepted changes it.
Randomness (placement start index and shift, topic ids) arrives in the events, so the core is
deterministic.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum

from headwater.controller.znodes import TopicPartition, ZkSnapshot
from headwater.metadata.image import BrokerInfo
from headwater.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class ControllerElected:
    """This broker won the election: ``epoch`` is the new ``/controller_epoch`` value and
    ``epoch_zk_version`` the znode version the election's setData returned. ``snapshot`` is what the
    shell read from ZooKeeper right after winning; failover resumes from it."""

    epoch: int
    epoch_zk_version: int
    snapshot: ZkSnapshot


@dataclass(frozen=True, slots=True)
class Resigned:
    """``/controller`` moved or this broker's session expired, or a fenced write failed: stop acting."""


@dataclass(frozen=True, slots=True)
class BrokerRegistered:
    """``/brokers/ids/<id>`` exists with this czxid. A known id with a new epoch is a bounced broker."""

    broker_id: int
    broker_epoch: int
    info: BrokerInfo


@dataclass(frozen=True, slots=True)
class BrokerExpired:
    """``/brokers/ids/<id>`` disappeared (session expired or closed)."""

    broker_id: int


@dataclass(frozen=True, slots=True)
class TopicConfigChanged:
    """``/config/topics/<t>`` now holds ``configs`` (written by whoever handled AlterConfigs)."""

    topic: str
    configs: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class ControlledShutdownRequested:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class AlterPartitionItem:
    """One partition of an AlterPartition request: the leader's proposed ISR, fenced by both epochs."""

    topic: str
    partition: int
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int
    leader_recovery_state: int = 0

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class AlterPartitionReceived:
    broker_id: int
    broker_epoch: int
    partitions: tuple[AlterPartitionItem, ...]


@dataclass(frozen=True, slots=True)
class StopReplicaResponseReceived:
    """A broker answered a StopReplica the controller sent; per-partition error codes."""

    broker_id: int
    partitions: tuple[tuple[TopicPartition, ErrorCode], ...]


@dataclass(frozen=True, slots=True)
class LogDirFailed:
    """``/log_dir_event_notification`` named this broker: one of its log dirs failed."""

    broker_id: int


@dataclass(frozen=True, slots=True)
class ReplicasOffline:
    """A broker answered LeaderAndIsr with KAFKA_STORAGE_ERROR for these partitions: its replicas of them
    are in a failed log dir until it restarts."""

    broker_id: int
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class NewTopic:
    """One topic of CreateTopics. ``num_partitions``/``replication_factor`` of -1 mean the defaults;
    ``assignments`` (partition -> brokers) replaces both. ``topic_id`` is chosen by the shell."""

    name: str
    topic_id: uuid.UUID
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CreateTopicsRequested:
    """``start_index`` and ``shift`` feed Kafka's placement (Kafka draws them at random per topic)."""

    topics: tuple[NewTopic, ...]
    validate_only: bool = False
    start_index: int = 0
    shift: int = 0


@dataclass(frozen=True, slots=True)
class DeleteTopicsRequested:
    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NewPartitions:
    """CreatePartitions for one topic: the new total ``count`` and optional assignments of the added ones."""

    name: str
    count: int
    assignments: tuple[tuple[int, ...], ...] | None = None


@dataclass(frozen=True, slots=True)
class CreatePartitionsRequested:
    topics: tuple[NewPartitions, ...]
    validate_only: bool = False
    start_index: int = 0
    shift: int = 0


@dataclass(frozen=True, slots=True)
class AlterPartitionReassignmentsRequested:
    """AlterPartitionReassignments (KIP-455): per partition a target replica list, or None to cancel.

    ``allow_replication_factor_change`` is v1's AllowReplicationFactorChange (KIP-860): when False, a
    target whose length differs from the partition's current (or ongoing target) replica count is
    refused with INVALID_REPLICATION_FACTOR."""

    partitions: tuple[tuple[str, int, tuple[int, ...] | None], ...]
    allow_replication_factor_change: bool = True


@dataclass(frozen=True, slots=True)
class ListPartitionReassignmentsRequested:
    """ListPartitionReassignments: these partitions, or None for every ongoing reassignment."""

    partitions: tuple[tuple[str, int], ...] | None = None


@dataclass(frozen=True, slots=True)
class LegacyReassignmentRequested:
    """``/admin/reassign_partitions`` was created with this content (``metadata.zk.decode_reassign_partitions``;
    a document that does not decode is passed as an empty mapping)."""

    partitions: Mapping[tuple[str, int], tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class BrokerDefaultConfigsChanged:
    """``/config/brokers/<default>`` now holds ``configs`` (the cluster-wide dynamic broker defaults).

    The controller reads ``reassignment.max.concurrent.moves.per.broker``, ``unclean.leader.election.enable``
    and the automatic leader rebalance's configs from it."""

    configs: Mapping[str, str]


class ElectionType(IntEnum):
    """ElectLeaders' ElectionType (KIP-460)."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class ElectLeadersRequested:
    """ElectLeaders (KIP-183, KIP-460): elect these partitions' leaders, or every partition's (None).

    With None, partitions whose leader is already right are left out of the answer (KafkaApis)."""

    partitions: tuple[tuple[str, int], ...] | None
    election_type: ElectionType = ElectionType.PREFERRED


@dataclass(frozen=True, slots=True)
class PreferredElectionRequested:
    """``/admin/preferred_replica_election`` was created naming ``partitions`` (an unreadable
    document names none); the controller elects them and deletes the znode."""

    partitions: frozenset[tuple[str, int]]


@dataclass(frozen=True, slots=True)
class AutoRebalanceCheck:
    """Time for the automatic preferred-leader rebalance (``auto.leader.rebalance.enable``)."""


Event = (
    ControllerElected
    | Resigned
    | BrokerRegistered
    | BrokerExpired
    | TopicConfigChanged
    | ControlledShutdownRequested
    | AlterPartitionReceived
    | StopReplicaResponseReceived
    | LogDirFailed
    | ReplicasOffline
    | CreateTopicsRequested
    | DeleteTopicsRequested
    | CreatePartitionsRequested
    | AlterPartitionReassignmentsRequested
    | ListPartitionReassignmentsRequested
    | LegacyReassignmentRequested
    | BrokerDefaultConfigsChanged
    | ElectLeadersRequested
    | PreferredElectionRequested
    | AutoRebalanceCheck
)
