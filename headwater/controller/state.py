"""The controller's cache: what it believes ZooKeeper holds, and the facts the shell observed.

Three ways change it, and no other:

* :meth:`ControllerState.load`: the snapshot a newly elected controller read.
* :meth:`ControllerState.apply`: a write ZooKeeper accepted.
* :meth:`ControllerState.observe`: a fact the shell saw or a broker reported, which needs no write
  (a registration, a controlled shutdown starting, a topic config, a failed log dir, ...).

Everything else in the package reads it. Partition phases are derived from it (:meth:`phase`) and
may only move along :data:`PARTITION_TRANSITIONS`; :meth:`apply` checks every move.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass
from enum import Enum

from headwater.controller.effects import (
    DeletionMarkerRemoved,
    LegacyReassignmentWritten,
    PartitionStateWritten,
    PreferredElectionRemoved,
    ReassignmentQueueWritten,
    TopicAssignmentWritten,
    TopicConfigRemoved,
    TopicConfigWritten,
    TopicDeletionQueued,
    TopicRemoved,
    ZkWrite,
)
from headwater.controller.events import BrokerExpired, BrokerRegistered, ControllerElected, Event
from headwater.controller.znodes import (
    NO_LEADER,
    LeaderIsr,
    LiveBroker,
    ReplicaAssignment,
    TopicPartition,
    TopicRecord,
)
from headwater.metadata.image import ClusterImage, PartitionState, TopicImage


class PartitionPhase(Enum):
    NON_EXISTENT = "NonExistent"
    NEW = "New"
    ONLINE = "Online"
    OFFLINE = "Offline"
    DELETING = "Deleting"


_P = PartitionPhase
PARTITION_TRANSITIONS: Mapping[PartitionPhase, frozenset[PartitionPhase]] = {
    _P.NON_EXISTENT: frozenset({_P.NEW}),                                      # topic znode written
    _P.NEW: frozenset({_P.NEW, _P.ONLINE, _P.DELETING}),                       # NEW -> NEW: reassigned, still no live replica
    _P.ONLINE: frozenset({_P.ONLINE, _P.OFFLINE, _P.DELETING}),
    _P.OFFLINE: frozenset({_P.ONLINE, _P.OFFLINE, _P.DELETING}),
    _P.DELETING: frozenset({_P.DELETING, _P.NON_EXISTENT}),                    # every replica confirmed deletion
}
"""Moves :meth:`ControllerState.apply` allows for a partition (a write that keeps the phase is a self-move)."""


MAX_MOVES_CONFIG = "reassignment.max.concurrent.moves.per.broker"
UNLIMITED_MOVES = (1 << 31) - 1
"""The config's default: no broker ever waits."""


def max_moves(configs: Mapping[str, str]) -> int:
    """The limit in a broker config map; a missing or unusable value means no limit (the broker's
    config validation refuses such values, so only a hand-written znode has one)."""
    try:
        value = int(configs.get(MAX_MOVES_CONFIG, UNLIMITED_MOVES))
    except ValueError:
        return UNLIMITED_MOVES
    return value if value >= 1 else UNLIMITED_MOVES


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    default_partitions: int = 1
    """``num.partitions``"""
    default_replication_factor: int = 1
    """``default.replication.factor``"""
    delete_topic_enable: bool = True
    unclean_leader_election_enable: bool = False
    """Broker default; the topic config ``unclean.leader.election.enable`` overrides it."""
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    leader_imbalance_check_interval_seconds: int = 300
    """These three (and the unclean default) are overridden by the cluster-wide dynamic broker configs."""


def _flag(value: str | None, default: bool) -> bool:
    return default if value is None else value.strip().lower() == "true"


def _int(value: str | None, default: int, lowest: int) -> int:
    """A dynamic config's integer, or ``default`` for a value the broker's validation would have refused."""
    try:
        n = int(value) if value is not None else default
    except ValueError:
        return default
    return n if n >= lowest else default


# --- facts the controller observes: they change the cache without a write ----------------------


@dataclass(frozen=True, slots=True)
class BrokerUp:
    """A registration under ``/brokers/ids``: a new broker, a new incarnation, or new listeners."""

    broker: LiveBroker


@dataclass(frozen=True, slots=True)
class BrokerDown:
    """A registration is gone (its session expired, or a new incarnation replaced it)."""

    broker_id: int


@dataclass(frozen=True, slots=True)
class ShutdownStarted:
    """A broker asked for a controlled shutdown with its current epoch."""

    broker_id: int


@dataclass(frozen=True, slots=True)
class ReplicaOffline:
    """A replica in a failed log dir: offline until its broker registers again (restarts)."""

    broker_id: int
    tp: TopicPartition


@dataclass(frozen=True, slots=True)
class ReplicaDeleted:
    """A replica of a topic being deleted answered StopReplica(delete=true) without error."""

    broker_id: int
    tp: TopicPartition


@dataclass(frozen=True, slots=True)
class TopicConfigSeen:
    """``/config/topics/<t>`` holds ``configs`` (written by AlterConfigs, outside the controller)."""

    topic: str
    configs: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class BrokerDefaultsSeen:
    """``/config/brokers/<default>`` holds ``configs``: the cluster-wide dynamic broker configs."""

    configs: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class LegacyReassignmentSeen:
    """``/admin/reassign_partitions`` was created with ``partitions``."""

    partitions: Mapping[tuple[str, int], tuple[int, ...]]


Fact = (
    BrokerUp
    | BrokerDown
    | ShutdownStarted
    | ReplicaOffline
    | ReplicaDeleted
    | TopicConfigSeen
    | BrokerDefaultsSeen
    | LegacyReassignmentSeen
)


class ControllerState:
    """The cache. Its attributes are read freely by the rest of the package and changed only by
    :meth:`load`, :meth:`apply`, :meth:`observe` and :meth:`reset`."""

    def __init__(self, broker_id: int, config: ControllerConfig) -> None:
        self.broker_id = broker_id
        self.config = config
        self.reset()

    def reset(self) -> None:
        self.active = False
        self.epoch = 0
        self.epoch_zk_version = -1
        self.live: dict[int, LiveBroker] = {}
        self.shutting_down: set[int] = set()
        self.topics: dict[str, TopicRecord] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.states: dict[TopicPartition, LeaderIsr] = {}
        self.deleting: dict[str, set[tuple[TopicPartition, int]]] = {}
        """Topic being deleted -> the replicas (partition, broker) that have not confirmed yet."""
        self.legacy: dict[tuple[str, int], tuple[int, ...]] | None = None
        self.queued: dict[TopicPartition, tuple[int, ...]] = {}   # insertion order is queue order
        self.queue_znode = False
        self.max_moves = UNLIMITED_MOVES
        self.broker_defaults: dict[str, str] = {}
        self.preferred_election: frozenset[TopicPartition] | None = None
        """``/admin/preferred_replica_election`` as read at failover (None: absent), until deleted."""
        self.offline_replicas: dict[int, set[TopicPartition]] = {}
        """Replicas in a failed log dir, per broker, until that broker registers again."""

    # --- the three ways in ----------------------------------------------------------------------

    def load(self, event: ControllerElected) -> None:
        """Start over from what the newly elected controller read from ZooKeeper."""
        self.reset()
        self.active = True
        self.epoch, self.epoch_zk_version = event.epoch, event.epoch_zk_version
        snap = event.snapshot
        self.live = dict(snap.brokers)
        self.topics = dict(snap.topics)
        self.configs = {name: dict(c) for name, c in snap.configs.items()}
        self.states = {
            tp: st for tp, st in snap.states.items()
            if tp.topic in self.topics and tp.partition in self.topics[tp.topic].partitions
        }
        for name in sorted(snap.topics_to_delete):
            if name in self.topics:
                self.deleting[name] = self.topic_replicas(name)
        self.broker_defaults = dict(snap.broker_defaults)
        self.max_moves = max_moves(snap.broker_defaults)
        self.preferred_election = (None if snap.preferred_replica_election is None
                                   else frozenset(TopicPartition(t, p) for t, p in snap.preferred_replica_election))
        self.queued = dict(snap.reassignment_queue or ())
        self.queue_znode = snap.reassignment_queue is not None
        self.legacy = None if snap.reassign_partitions is None else dict(snap.reassign_partitions)

    def apply(self, write: ZkWrite) -> None:
        """ZooKeeper accepted ``write``: make the cache say what ZooKeeper now says."""
        if not self.active:
            return
        change = write.change
        if isinstance(change, PartitionStateWritten):
            before = self.phase(change.tp)
            self.states[change.tp] = change.state
            self._check_moves({change.tp: before})
        elif isinstance(change, TopicAssignmentWritten):
            topic = change.topic
            tps = [TopicPartition(topic.name, p) for p in topic.partitions]
            before_all = {tp: self.phase(tp) for tp in tps}
            self.topics[topic.name] = topic
            self._check_moves(before_all)
        elif isinstance(change, TopicConfigWritten):
            self.configs[change.topic] = dict(change.configs)
        elif isinstance(change, TopicDeletionQueued):
            tps = self.partitions_of(change.topic)
            before_all = {tp: self.phase(tp) for tp in tps}
            self.deleting[change.topic] = self.topic_replicas(change.topic)
            self._check_moves(before_all)
        elif isinstance(change, TopicRemoved):
            tps = self.partitions_of(change.topic)
            before_all = {tp: self.phase(tp) for tp in tps}
            self.topics.pop(change.topic, None)
            self.deleting.pop(change.topic, None)
            for tp in tps:
                self.states.pop(tp, None)
            self._check_moves(before_all)
        elif isinstance(change, TopicConfigRemoved):
            self.configs.pop(change.topic, None)
        elif isinstance(change, LegacyReassignmentWritten):
            self.legacy = None if change.partitions is None else dict(change.partitions)
        elif isinstance(change, ReassignmentQueueWritten):
            self.queued = dict(change.entries or ())
            self.queue_znode = change.entries is not None
        elif isinstance(change, PreferredElectionRemoved):
            self.preferred_election = None
        else:
            assert isinstance(change, DeletionMarkerRemoved)

    def observe(self, fact: Fact) -> None:
        """Take in a fact that ZooKeeper already holds, or that a broker reported."""
        if isinstance(fact, BrokerUp):
            self.live[fact.broker.broker_id] = fact.broker
        elif isinstance(fact, BrokerDown):
            self.live.pop(fact.broker_id, None)
            self.shutting_down.discard(fact.broker_id)
            self.offline_replicas.pop(fact.broker_id, None)  # a restart opens its log dirs afresh
        elif isinstance(fact, ShutdownStarted):
            self.shutting_down.add(fact.broker_id)
        elif isinstance(fact, ReplicaOffline):
            self.offline_replicas.setdefault(fact.broker_id, set()).add(fact.tp)
        elif isinstance(fact, ReplicaDeleted):
            pending = self.deleting.get(fact.tp.topic)
            if pending is not None:
                pending.discard((fact.tp, fact.broker_id))
        elif isinstance(fact, TopicConfigSeen):
            self.configs[fact.topic] = dict(fact.configs)
        elif isinstance(fact, BrokerDefaultsSeen):
            self.broker_defaults = dict(fact.configs)
            self.max_moves = max_moves(fact.configs)
        else:
            assert isinstance(fact, LegacyReassignmentSeen)
            self.legacy = {(t, p): tuple(r) for (t, p), r in fact.partitions.items()}

    # --- checks -----------------------------------------------------------------------------------

    def validate(self) -> None:
        """Raise AssertionError if the cache breaks a rule."""
        if not self.active:
            assert not (self.live or self.topics or self.states or self.deleting or self.shutting_down)
            return
        assert self.epoch >= 1 and self.epoch_zk_version >= 0
        for b, reg in self.live.items():
            assert reg.broker_id == b == reg.info.broker_id, reg
        assert self.shutting_down <= set(self.live), (self.shutting_down, set(self.live))
        for name, topic in self.topics.items():
            assert topic.name == name
            assert sorted(topic.partitions) == list(range(len(topic.partitions))), (name, sorted(topic.partitions))
            for p, a in topic.partitions.items():
                assert a.replicas and len(set(a.replicas)) == len(a.replicas), (name, p, a)
                if a.is_being_reassigned:
                    # RS = TRS + (ORS - TRS), AR = TRS - ORS, RR = ORS - TRS, both sets non-empty
                    assert a.origin_replicas and a.target_replicas, (name, p, a)
                    assert ReplicaAssignment(a.origin_replicas).reassign_to(a.target_replicas) == a, (name, p, a)
        for tp, st in self.states.items():
            assert tp.topic in self.topics and tp.partition in self.topics[tp.topic].partitions, tp
            replicas = self.replicas_of(tp)
            assert st.isr, (tp, st)
            assert len(set(st.isr)) == len(st.isr), (tp, st)
            assert set(st.isr) <= set(replicas), (tp, st, replicas)
            assert st.leader == NO_LEADER or st.leader in st.isr, (tp, st)
            assert st.leader_epoch >= 0 and st.partition_epoch >= 0, (tp, st)
            assert st.controller_epoch <= self.epoch, (tp, st)
        for name, pending in self.deleting.items():
            assert name in self.topics, name
            for tp, b in pending:
                assert tp.topic == name and b in self.replicas_of(tp), (tp, b)

    def _check_moves(self, before: Mapping[TopicPartition, PartitionPhase]) -> None:
        for tp, old in before.items():
            new = self.phase(tp)
            assert new in PARTITION_TRANSITIONS[old], f"illegal partition move {tp}: {old.value} -> {new.value}"

    # --- reading ----------------------------------------------------------------------------------

    def phase(self, tp: TopicPartition) -> PartitionPhase:
        topic = self.topics.get(tp.topic)
        if topic is None or tp.partition not in topic.partitions:
            return PartitionPhase.NON_EXISTENT
        if tp.topic in self.deleting:
            return PartitionPhase.DELETING
        state = self.states.get(tp)
        if state is None:
            return PartitionPhase.NEW
        return PartitionPhase.ONLINE if state.leader in self.live else PartitionPhase.OFFLINE

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        t = self.topics.get(topic)
        return [TopicPartition(topic, p) for p in sorted(t.partitions)] if t else []

    def replicas_of(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.topics[tp.topic].partitions[tp.partition].replicas

    def topic_replicas(self, topic: str) -> set[tuple[TopicPartition, int]]:
        """Every (partition, broker) replica of a topic."""
        return {(tp, b) for tp in self.partitions_of(topic) for b in self.replicas_of(tp)}

    def exists(self, tp: TopicPartition) -> bool:
        topic = self.topics.get(tp.topic)
        return topic is not None and tp.partition in topic.partitions

    def eligible(self) -> set[int]:
        """Brokers that may lead or join an ISR: registered and not shutting down."""
        return set(self.live) - self.shutting_down

    def unclean(self, topic: str) -> bool:
        """The topic's config, else the cluster-wide dynamic default, else the controller's own config."""
        value = self.configs.get(topic, {}).get("unclean.leader.election.enable")
        return _flag(value, self.unclean_default())

    def unclean_default(self) -> bool:
        return _flag(self.broker_defaults.get("unclean.leader.election.enable"),
                     self.config.unclean_leader_election_enable)

    def auto_rebalance(self) -> bool:
        return _flag(self.broker_defaults.get("auto.leader.rebalance.enable"), self.config.auto_leader_rebalance_enable)

    def imbalance_percentage(self) -> int:
        return _int(self.broker_defaults.get("leader.imbalance.per.broker.percentage"),
                    self.config.leader_imbalance_per_broker_percentage, 0)

    def rebalance_interval_s(self) -> int:
        return _int(self.broker_defaults.get("leader.imbalance.check.interval.seconds"),
                    self.config.leader_imbalance_check_interval_seconds, 1)

    def replica_online(self, broker_id: int, tp: TopicPartition) -> bool:
        """Kafka's isReplicaOnline: registered, not shutting down, and not in a failed log dir."""
        return broker_id in self.live and broker_id not in self.shutting_down and not self.replica_offline(broker_id, tp)

    def replica_offline(self, broker_id: int, tp: TopicPartition) -> bool:
        offline = self.offline_replicas.get(broker_id)
        return offline is not None and tp in offline

    def reassigning(self, topics: Mapping[str, TopicRecord] | None = None,
                    leaving: Set[str] = frozenset()) -> list[TopicPartition]:
        """Partitions with AR or RR, topics being deleted left out. ``topics`` overrides the cache's
        records and ``leaving`` adds topics to leave out (what one event decided so far)."""
        out: list[TopicPartition] = []
        names = set(self.topics) | set(topics) if topics else set(self.topics)
        for name in sorted(names):
            if name in self.deleting or name in leaving:
                continue
            topic = (topics.get(name) if topics else None) or self.topics[name]
            out.extend(TopicPartition(name, p) for p, a in sorted(topic.partitions.items()) if a.is_being_reassigned)
        return out

    def image(self, cluster_id: str) -> ClusterImage:
        """The cluster as clients should see it (topics being deleted left out)."""
        topics: dict[str, TopicImage] = {}
        for name, topic in self.topics.items():
            if name in self.deleting:
                continue
            parts: dict[int, PartitionState] = {}
            for p, a in topic.partitions.items():
                st = self.states.get(TopicPartition(name, p))
                leader, epoch, isr = (st.leader, st.leader_epoch, st.isr) if st else (NO_LEADER, -1, ())
                parts[p] = PartitionState(a.replicas, leader, epoch, isr, a.adding_replicas, a.removing_replicas)
            topics[name] = TopicImage(name, topic.topic_id, parts, dict(self.configs.get(name, {})))
        brokers = {b: reg.info for b, reg in self.live.items()}
        return ClusterImage(cluster_id, self.broker_id, brokers, topics)

    def broker_change_events(self, current: Mapping[int, LiveBroker]) -> list[Event]:
        """Turn the registrations now under ``/brokers/ids`` into events (Kafka's BrokerChange diff)."""
        events: list[Event] = [BrokerExpired(b) for b in sorted(self.live) if b not in current]
        for b, reg in sorted(current.items()):
            known = self.live.get(b)
            if known is None or known.broker_epoch != reg.broker_epoch or known.info != reg.info:
                events.append(BrokerRegistered(b, reg.broker_epoch, reg.info))
        return events
