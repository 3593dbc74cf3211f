"""The ZooKeeper-mode controller as a sans-IO state machine: events in, fenced writes and requests out.

How the shell drives it (see ``docs/controller.md``)::

    result = controller.handle(event)
    for write in result.writes:                   # in order
        ok = zk.multi([check("/controller_epoch", write.controller_epoch_version), write])
        if not ok:                                # controller moved, or our view is stale
            controller.handle(Resigned()); reply not_controller_response(event); stop
        controller.apply(write)                   # only an accepted write changes the cache
    send result.requests (per-broker FIFO); reply result.response

:class:`Controller` is Kafka's ``KafkaController``: it dispatches each event to its handler
(:data:`EVENT_RULES` says what each does) and runs the flows that span the parts, failover and a
broker's startup. The parts, as Kafka's controller splits them:

* :mod:`~headwater.controller.state`: the cache, its partition phases and transitions, and the
  only three ways it changes (``load``, ``apply``, ``observe``).
* :mod:`~headwater.controller.partition_change`: what one event decides (staged partition states,
  topic znode writes) and the requests that describe it.
* :mod:`~headwater.controller.replication_control`: brokers, ISRs and elections.
* :mod:`~headwater.controller.topic_control`: topic creation, deletion, partitions and configs.
* :mod:`~headwater.controller.reassignment`: KIP-455 reassignment and its batching.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from headwater.controller.effects import (
    AlterPartitionReassignmentsResponse,
    AlterPartitionResponse,
    ControlledShutdownResponse,
    ControllerResult,
    CreatePartitionsResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
    ElectionResult,
    ElectLeadersResponse,
    ListPartitionReassignmentsResponse,
    Response,
    TopicResult,
    ZkWrite,
)
from headwater.controller.events import (
    AlterPartitionReassignmentsRequested,
    AlterPartitionReceived,
    AutoRebalanceCheck,
    BrokerDefaultConfigsChanged,
    BrokerExpired,
    BrokerRegistered,
    ControlledShutdownRequested,
    ControllerElected,
    CreatePartitionsRequested,
    CreateTopicsRequested,
    DeleteTopicsRequested,
    ElectLeadersRequested,
    Event,
    LegacyReassignmentRequested,
    ListPartitionReassignmentsRequested,
    LogDirFailed,
    PreferredElectionRequested,
    ReplicasOffline,
    Resigned,
    StopReplicaResponseReceived,
    TopicConfigChanged,
)
from headwater.controller.partition_change import PartitionChangeBuilder
from headwater.controller.reassignment import Reassignment, ReassignmentControl
from headwater.controller.replication_control import ReplicationControl
from headwater.controller.state import BrokerDefaultsSeen, ControllerConfig, ControllerState, PartitionPhase
from headwater.controller.topic_control import TopicControl
from headwater.controller.znodes import LeaderIsr, LiveBroker, TopicPartition, TopicRecord
from headwater.metadata.image import ClusterImage
from headwater.protocol.errors import ErrorCode

__all__ = [
    "EVENT_RULES",
    "Controller",
    "ControllerConfig",
    "PartitionPhase",
    "Reassignment",
    "not_controller_response",
]

EVENT_RULES: Mapping[type, str] = {
    ControllerElected: "load the snapshot; drop dead brokers from ISRs; elect offline partitions; create missing "
    "states; resume deletions and reassignments; resume /admin/preferred_replica_election (then delete it); "
    "LeaderAndIsr for every partition to its live replicas; full UpdateMetadata to all",
    Resigned: "forget everything; afterwards every event yields no writes and no requests",
    BrokerRegistered: "new broker (or a bounce: failure first): LeaderAndIsr for its replicas, elect offline "
    "partitions, resume its pending deletions, full UpdateMetadata to it, broker list to all",
    BrokerExpired: "elect new leaders where it led (offline election), remove it from every ISR (keep the last)",
    ControlledShutdownRequested: "broker epoch must match; mark shutting down; controlled-shutdown election where it "
    "leads; remove it from ISRs and StopReplica(delete=false) where it follows; answer the partitions it still leads",
    AlterPartitionReceived: "broker epoch, leader epoch, partition epoch and eligibility checks; accepted ISR "
    "written with the same leader epoch; UpdateMetadata to all",
    StopReplicaResponseReceived: "a deleted replica is confirmed; when a topic has none left, delete its znodes",
    CreateTopicsRequested: "validate and place (topics.py / placement.py); write config, assignment, states",
    DeleteTopicsRequested: "write the deletion marker; UpdateMetadata with leader -2; StopReplica(delete=true)",
    CreatePartitionsRequested: "validate and place the added partitions; rewrite the assignment; write new states",
    TopicConfigChanged: "cache the config; if unclean election became allowed, elect that topic's offline partitions",
    AlterPartitionReassignmentsRequested: "validate each partition on its own; the rest start (phase U, then A or B), "
    "replace an ongoing reassignment (keeping the original set) or cancel it (target := original); they leave "
    "/admin/reassign_partitions (the latest request wins). With reassignment.max.concurrent.moves.per.broker, a "
    "target that would put a broker over the limit is queued in /admin/reassignment_queue instead",
    ListPartitionReassignmentsRequested: "answer RS, AR and RR of the ongoing reassignments from the cache, and queued "
    "ones with their current replicas and no AR or RR; no writes",
    BrokerDefaultConfigsChanged: "cache the cluster-wide broker configs (move limit, unclean default, auto rebalance); "
    "start queued moves that now fit; if unclean election became the default, elect offline partitions",
    LogDirFailed: "LeaderAndIsr with the current state of every replica the broker holds, so its answer names the "
    "partitions in the failed dir (KAFKA_STORAGE_ERROR)",
    ReplicasOffline: "those replicas are offline until the broker re-registers: elect a new leader where one led "
    "(never an offline replica), remove them from the ISR (keep the last), list them as offline in UpdateMetadata",
    LegacyReassignmentRequested: "start every readable entry of /admin/reassign_partitions (no liveness check); "
    "entries that cannot start leave the znode, and each completed partition leaves it",
    ElectLeadersRequested: "per partition (None: every partition): unknown, being deleted, ELECTION_NOT_NEEDED (led by "
    "its preferred replica; for UNCLEAN, led by a live broker), else the PREFERRED or UNCLEAN election, "
    "PREFERRED_LEADER_NOT_AVAILABLE / ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica qualifies",
    PreferredElectionRequested: "preferred election for the partitions the znode names that need one; delete the znode",
    AutoRebalanceCheck: "if auto.leader.rebalance.enable: for each broker with more than "
    "leader.imbalance.per.broker.percentage of its preferred partitions led elsewhere, a preferred election for "
    "those not being reassigned",
}


def not_controller_response(event: Event) -> Response | None:
    """The answer to a request this broker cannot serve because it is not (or no longer) the controller."""
    code = ErrorCode.NOT_CONTROLLER
    if isinstance(event, AlterPartitionReceived):
        return AlterPartitionResponse(code)
    if isinstance(event, ControlledShutdownRequested):
        return ControlledShutdownResponse(code)
    if isinstance(event, CreateTopicsRequested):
        return CreateTopicsResponse(tuple(TopicResult(t.name, code) for t in event.topics))
    if isinstance(event, DeleteTopicsRequested):
        return DeleteTopicsResponse(tuple(TopicResult(n, code) for n in event.names))
    if isinstance(event, CreatePartitionsRequested):
        return CreatePartitionsResponse(tuple(TopicResult(t.name, code) for t in event.topics))
    if isinstance(event, AlterPartitionReassignmentsRequested):
        return AlterPartitionReassignmentsResponse(code)
    if isinstance(event, ListPartitionReassignmentsRequested):
        return ListPartitionReassignmentsResponse(code)
    if isinstance(event, ElectLeadersRequested):
        # Kafka's processReplicaLeaderElection on a broker that is not the controller: per partition.
        return ElectLeadersResponse(ErrorCode.NONE, tuple(
            ElectionResult(t, p, code) for t, p in dict.fromkeys(event.partitions or ())))
    return None


Handler = Callable[[Any], ControllerResult | PartitionChangeBuilder]
"""An event's handler: a finished result, or a step for :meth:`Controller.handle` to finish."""


class Controller:
    """The controller of one broker. Inactive until :class:`ControllerElected`; inactive again after
    :class:`Resigned` (or discard the instance and build a new one on the next election)."""

    def __init__(self, broker_id: int, config: ControllerConfig | None = None) -> None:
        self.broker_id = broker_id
        self.config = config or ControllerConfig()
        self._state = ControllerState(broker_id, self.config)
        replication = self._replication = ReplicationControl(self._state)
        reassignment = self._reassignment = ReassignmentControl(self._state)
        topics = TopicControl(self._state, replication, reassignment)
        self._topic_control = topics
        # The last result whose requests may not be built yet: a resignation drops them.
        self._unread: ControllerResult | None = None
        self.handlers: Mapping[type, Handler] = {
            ControllerElected: self._on_elected,
            Resigned: self._on_resigned,
            BrokerRegistered: self._on_broker_registered,
            BrokerExpired: replication.on_broker_expired,
            ControlledShutdownRequested: replication.on_controlled_shutdown,
            AlterPartitionReceived: self._on_alter_partition,
            LogDirFailed: replication.on_log_dir_failed,
            ReplicasOffline: replication.on_replicas_offline,
            StopReplicaResponseReceived: topics.on_stop_replica_response,
            CreateTopicsRequested: topics.on_create_topics,
            DeleteTopicsRequested: topics.on_delete_topics,
            CreatePartitionsRequested: topics.on_create_partitions,
            TopicConfigChanged: topics.on_topic_config_changed,
            AlterPartitionReassignmentsRequested: reassignment.on_alter_reassignments,
            ListPartitionReassignmentsRequested: reassignment.on_list_reassignments,
            LegacyReassignmentRequested: reassignment.on_legacy_reassignment,
            BrokerDefaultConfigsChanged: self._on_broker_defaults,
            ElectLeadersRequested: replication.on_elect_leaders,
            PreferredElectionRequested: replication.on_preferred_election_requested,
            AutoRebalanceCheck: replication.on_auto_rebalance,
        }
        """Event type -> handler; the keys are exactly :data:`EVENT_RULES`' (a unit test checks)."""

    # --- queries ----------------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        return self._state.active

    @property
    def epoch(self) -> int:
        return self._state.epoch

    @property
    def epoch_zk_version(self) -> int:
        return self._state.epoch_zk_version

    @property
    def state(self) -> ControllerState:
        """What the controller knows, for the shell's readers (self-healing); only events change it."""
        return self._state

    @property
    def live_brokers(self) -> Mapping[int, LiveBroker]:
        return self._state.live

    @property
    def shutting_down(self) -> frozenset[int]:
        return frozenset(self._state.shutting_down)

    @property
    def topics(self) -> Mapping[str, TopicRecord]:
        return self._state.topics

    @property
    def topic_configs(self) -> Mapping[str, Mapping[str, str]]:
        return self._state.configs

    @property
    def states(self) -> Mapping[TopicPartition, LeaderIsr]:
        return self._state.states

    @property
    def _states(self) -> dict[TopicPartition, LeaderIsr]:
        """The cache's own dict, for tests that break the cache on purpose."""
        return self._state.states

    @property
    def topics_being_deleted(self) -> frozenset[str]:
        return frozenset(self._state.deleting)

    @property
    def legacy_reassignment(self) -> Mapping[tuple[str, int], tuple[int, ...]] | None:
        """``/admin/reassign_partitions`` as the controller knows it (None: absent)."""
        return self._state.legacy

    def reassignments(self) -> dict[TopicPartition, Reassignment]:
        """Every ongoing reassignment (topics being deleted left out), by partition."""
        return self._reassignment.reassignments()

    @property
    def queued(self) -> Mapping[TopicPartition, tuple[int, ...]]:
        """Reassignments waiting for ``reassignment.max.concurrent.moves.per.broker``: partition -> target, in order."""
        return self._state.queued

    @property
    def max_moves_per_broker(self) -> int:
        return self._state.max_moves

    @property
    def auto_rebalance(self) -> bool:
        """``auto.leader.rebalance.enable`` in force (the cluster-wide dynamic value, else this broker's)."""
        return self._state.auto_rebalance()

    @property
    def rebalance_interval_s(self) -> int:
        """``leader.imbalance.check.interval.seconds`` in force."""
        return self._state.rebalance_interval_s()

    def preferred_imbalance(self) -> dict[int, tuple[int, int]]:
        """Per preferred replica: (partitions it should lead, of those led by another broker)."""
        return self._replication.preferred_imbalance()

    def moves_per_broker(self) -> Counter[int]:
        """Ongoing moves per broker: a broker counts once per reassignment that has it in AR or RR."""
        return self._reassignment.moves()

    def pending_deletions(self, topic: str) -> frozenset[tuple[TopicPartition, int]]:
        """Replicas (partition, broker) of a topic being deleted that have not confirmed yet."""
        return frozenset(self._state.deleting.get(topic, ()))

    def phase(self, tp: TopicPartition) -> PartitionPhase:
        return self._state.phase(tp)

    def image(self, cluster_id: str) -> ClusterImage:
        """The cluster as clients should see it (topics being deleted left out)."""
        return self._state.image(cluster_id)

    def broker_change_events(self, current: Mapping[int, LiveBroker]) -> list[Event]:
        """Turn the registrations now under ``/brokers/ids`` into events (Kafka's BrokerChange diff)."""
        return self._state.broker_change_events(current)

    # --- the entry points -------------------------------------------------------------------------

    def handle(self, event: Event) -> ControllerResult:
        """Decide on one event. Raises TypeError for a value that is not one of the events."""
        kind = type(event)
        handler = self.handlers.get(kind)
        if handler is None:
            raise TypeError(f"not a controller event: {event!r}")
        unread, self._unread = self._unread, None
        if unread is not None and (kind is Resigned or kind is ControllerElected or not self._state.active):
            unread.drop_requests()
        if kind is not ControllerElected and not self._state.active:
            return ControllerResult(response=not_controller_response(event))
        outcome = handler(event)
        if isinstance(outcome, ControllerResult):
            return outcome
        result = outcome.result(self._reassignment.settle_queue(outcome))
        self._unread = result
        return result

    def apply(self, write: ZkWrite) -> None:
        """ZooKeeper accepted ``write``: make the cache say what ZooKeeper now says."""
        self._state.apply(write)

    def validate_state(self) -> None:
        """Raise AssertionError if the cache breaks a rule; tests call it after every step."""
        self._state.validate()

    # --- the flows that span the parts --------------------------------------------------------------

    def _on_elected(self, event: ControllerElected) -> ControllerResult | PartitionChangeBuilder:
        """Kafka's onControllerFailover."""
        state = self._state
        if state.active and event.epoch <= state.epoch:
            return ControllerResult()
        state.load(event)
        change = PartitionChangeBuilder(state)
        self._topic_control.resume_deletions(change, event.snapshot.topics_to_delete)
        self._replication.drop_unregistered(change)
        self._replication.trigger_online(change)
        self._reassignment.resume(change)
        if state.preferred_election is not None:
            self._replication.elect_preferred_from_znode(change, state.preferred_election)
        for tp in change.active_partitions():
            for b in change.replicas_of(tp):
                if b in state.live:
                    change.lai.setdefault(b, {}).setdefault(tp, False)
        change.um_full.update(state.live)
        change.metadata_first = True
        return change

    def _on_resigned(self, event: Resigned) -> ControllerResult:
        self._state.reset()
        return ControllerResult()

    def _on_broker_defaults(self, event: BrokerDefaultConfigsChanged) -> PartitionChangeBuilder:
        """A higher move limit makes room (the result starts queued moves that now fit); unclean
        election becoming the default elects offline partitions (Kafka's UncleanLeaderElectionEnable)."""
        state = self._state
        was_unclean = state.unclean_default()
        state.observe(BrokerDefaultsSeen(event.configs))
        change = PartitionChangeBuilder(state)
        if state.unclean_default() and not was_unclean:
            self._replication.trigger_online(change)
        return change

    def _on_broker_registered(self, event: BrokerRegistered) -> PartitionChangeBuilder:
        """Kafka's onBrokerStartup: its replicas, then its reassignments and its pending deletions."""
        change = PartitionChangeBuilder(self._state)
        if self._replication.register(change, event):
            self._reassignment.resume_for_broker(change, event.broker_id)
            self._topic_control.resume_deletions_on(change, event.broker_id)
            change.um_full.add(event.broker_id)
        change.um_brokers = True
        return change

    def _on_alter_partition(self, event: AlterPartitionReceived) -> ControllerResult | PartitionChangeBuilder:
        outcome = self._replication.on_alter_partition(event)
        if isinstance(outcome, PartitionChangeBuilder):
            response = outcome.response
            assert isinstance(response, AlterPartitionResponse)
            for item, res in zip(event.partitions, response.partitions, strict=True):
                if res.error == ErrorCode.NONE:
                    self._reassignment.complete_if_caught_up(outcome, item.tp)
        return outcome
