"""Topics: creation, deletion (Kafka's ``TopicDeletionManager``), added partitions and topic configs.

Validation and placement are :mod:`headwater.controller.topics`'; this module turns what they
plan into writes. A deletion is queued with the marker ``/admin/delete_topics/<t>``; each replica
gets StopReplica(delete=true), and once every one has confirmed, the topic's znodes go (topic,
config, then the marker, so that a failover in between resumes the deletion).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Set
from dataclasses import replace

from headwater.controller.effects import (
    CreatePartitionsResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
    DeletionMarkerRemoved,
    StopReplicaPartition,
    TopicAssignmentWritten,
    TopicConfigRemoved,
    TopicConfigWritten,
    TopicDeletionQueued,
    TopicRemoved,
    TopicResult,
    ZkOp,
)
from headwater.controller.events import (
    CreatePartitionsRequested,
    CreateTopicsRequested,
    DeleteTopicsRequested,
    StopReplicaResponseReceived,
    TopicConfigChanged,
)
from headwater.controller.partition_change import PartitionChangeBuilder
from headwater.controller.reassignment import ReassignmentControl
from headwater.controller.replication_control import Election, ReplicationControl
from headwater.controller.state import ControllerState, ReplicaDeleted, TopicConfigSeen
from headwater.controller.topics import plan_create_partitions, plan_create_topic
from headwater.controller.znodes import (
    LEADER_DURING_DELETE,
    NO_LEADER,
    PATHS,
    ReplicaAssignment,
    TopicPartition,
    TopicRecord,
    encode_topic,
)
from headwater.metadata import zk
from headwater.metadata.image import ClusterImage, PartitionState, TopicImage
from headwater.protocol.errors import ErrorCode, KafkaError


def _of_topic(name: str) -> Callable[[tuple[str, int], tuple[int, ...]], bool]:
    return lambda key, _replicas: key[0] == name


class TopicControl:
    def __init__(self, state: ControllerState, replication: ReplicationControl,
                 reassignment: ReassignmentControl) -> None:
        self.state = state
        self.replication = replication
        self.reassignment = reassignment

    # --- events -------------------------------------------------------------------------------------

    def on_create_topics(self, event: CreateTopicsRequested) -> PartitionChangeBuilder:
        cache, config = self.state, self.state.config
        change = PartitionChangeBuilder(cache)
        counts = Counter(t.name for t in event.topics)
        results: list[TopicResult] = []
        for nt in event.topics:
            if counts[nt.name] > 1:
                results.append(TopicResult(nt.name, ErrorCode.INVALID_REQUEST,
                                           f"Create topics request contains duplicate topic name {nt.name}."))
                continue
            if nt.name in cache.deleting:
                results.append(TopicResult(nt.name, ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{nt.name}' is marked for deletion."))
                continue
            try:
                planned = plan_create_topic(
                    self._admin_image(change), nt.name, nt.num_partitions, nt.replication_factor, nt.assignments,
                    nt.configs, default_partitions=config.default_partitions,
                    default_replication_factor=config.default_replication_factor,
                    start_index=event.start_index, shift=event.shift,
                )
            except KafkaError as err:
                results.append(TopicResult(nt.name, err.code, err.message))
                continue
            topic = TopicRecord(nt.name, nt.topic_id,
                                {p: ReplicaAssignment(s.replicas) for p, s in planned.partitions.items()})
            if not event.validate_only:
                # A config znode can outlive its topic (written by an alter that raced a delete): it is
                # overwritten, as Kafka's setOrCreate does. Creating it would fail the whole multi,
                # and every controller after this one would fail the client's retry the same way.
                config_op = ZkOp.SET if nt.name in cache.configs else ZkOp.CREATE
                change.write(config_op, PATHS.config("topics", nt.name), zk.encode_config(nt.configs),
                             TopicConfigWritten(nt.name, dict(nt.configs)), make_parents=True)
                change.write(ZkOp.CREATE, PATHS.topic(nt.name), encode_topic(topic),
                             TopicAssignmentWritten(topic), make_parents=True)
                change.topics[nt.name] = topic
                for p, a in sorted(topic.partitions.items()):
                    change.create_state(TopicPartition(nt.name, p), a.replicas)
            results.append(TopicResult(nt.name, ErrorCode.NONE, None, nt.topic_id, len(topic.partitions),
                                       planned.replication_factor, dict(nt.configs)))
        change.response = CreateTopicsResponse(tuple(results))
        return change

    def on_delete_topics(self, event: DeleteTopicsRequested) -> PartitionChangeBuilder:
        cache = self.state
        change = PartitionChangeBuilder(cache)
        counts = Counter(event.names)
        results: list[TopicResult] = []
        for name in event.names:
            if counts[name] > 1:
                results.append(TopicResult(name, ErrorCode.INVALID_REQUEST, f"Duplicate topic name {name} in request."))
            elif not cache.config.delete_topic_enable:
                results.append(TopicResult(name, ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled."))
            elif name not in cache.topics:
                results.append(TopicResult(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                           "This server does not host this topic-partition."))
            elif name in cache.deleting:
                results.append(TopicResult(name, ErrorCode.NONE))
            else:
                change.write(ZkOp.CREATE, PATHS.delete_topic(name), None, TopicDeletionQueued(name), make_parents=True)
                change.queued_deletions.add(name)
                self.reassignment.legacy_remove(change, _of_topic(name))
                self._start_deletion_requests(change, name, cache.topic_replicas(name))
                results.append(TopicResult(name, ErrorCode.NONE, None, cache.topics[name].topic_id))
        change.response = DeleteTopicsResponse(tuple(results))
        return change

    def on_create_partitions(self, event: CreatePartitionsRequested) -> PartitionChangeBuilder:
        cache = self.state
        change = PartitionChangeBuilder(cache)
        counts = Counter(t.name for t in event.topics)
        results: list[TopicResult] = []
        for np in event.topics:
            if counts[np.name] > 1:
                results.append(TopicResult(np.name, ErrorCode.INVALID_REQUEST, f"Duplicate topic name {np.name} in request."))
                continue
            if np.name in cache.deleting:
                results.append(TopicResult(np.name, ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is queued for deletion."))
                continue
            if any(tp.topic == np.name for tp in cache.reassigning()):
                # ZkAdminManager.createPartitions: no new partitions while the topic znode is being reassigned.
                results.append(TopicResult(np.name, ErrorCode.REASSIGNMENT_IN_PROGRESS,
                                           f"A partition reassignment is in progress for the topic '{np.name}'."))
                continue
            try:
                planned = plan_create_partitions(self._admin_image(change, np.name), np.name, np.count,
                                                 np.assignments, start_index=event.start_index, shift=event.shift)
            except KafkaError as err:
                results.append(TopicResult(np.name, err.code, err.message))
                continue
            old = cache.topics[np.name]
            added = {p: ReplicaAssignment(s.replicas) for p, s in planned.partitions.items() if p not in old.partitions}
            topic = replace(old, partitions={**old.partitions, **added})
            if not event.validate_only:
                change.write(ZkOp.SET, PATHS.topic(np.name), encode_topic(topic), TopicAssignmentWritten(topic))
                change.topics[np.name] = topic
                for p, a in sorted(added.items()):
                    change.create_state(TopicPartition(np.name, p), a.replicas)
            results.append(TopicResult(np.name, ErrorCode.NONE, None, topic.topic_id, len(topic.partitions),
                                       planned.replication_factor))
        change.response = CreatePartitionsResponse(tuple(results))
        return change

    def on_topic_config_changed(self, event: TopicConfigChanged) -> PartitionChangeBuilder:
        """If unclean election became allowed, the topic's offline partitions get an offline election."""
        cache = self.state
        cache.observe(TopicConfigSeen(event.topic, event.configs))
        change = PartitionChangeBuilder(cache)
        if event.topic in cache.topics and event.topic not in cache.deleting and cache.unclean(event.topic):
            for tp in cache.partitions_of(event.topic):
                state = cache.states.get(tp)
                if state is not None and state.leader not in cache.live:
                    self.replication.elect(change, tp, Election.OFFLINE)
        return change

    def on_stop_replica_response(self, event: StopReplicaResponseReceived) -> PartitionChangeBuilder:
        """Deleted replicas confirmed; a topic none of whose replicas is left has its znodes deleted."""
        cache = self.state
        change = PartitionChangeBuilder(cache)
        touched: set[str] = set()
        for tp, code in event.partitions:
            if tp.topic in cache.deleting and code == ErrorCode.NONE:
                cache.observe(ReplicaDeleted(event.broker_id, tp))
                touched.add(tp.topic)
        for name in sorted(touched):
            if not cache.deleting[name]:
                self._complete_deletion(change, name)
        return change

    # --- deletions ----------------------------------------------------------------------------------

    def resume_deletions(self, change: PartitionChangeBuilder, names: Set[str]) -> None:
        """Failover: deletions resume where replicas are left; a marker whose topic is gone is deleted."""
        for name in sorted(names):
            pending = self.state.deleting.get(name)
            if pending is not None:
                self._start_deletion_requests(change, name, pending)
            else:
                change.write(ZkOp.DELETE, PATHS.delete_topic(name), None, DeletionMarkerRemoved(name))

    def resume_deletions_on(self, change: PartitionChangeBuilder, broker_id: int) -> None:
        """A broker registered: its replicas of topics being deleted get StopReplica(delete=true) again."""
        for pending in self.state.deleting.values():
            for tp, b in sorted(pending):
                if b == broker_id:
                    change.stop.setdefault(b, {})[tp] = StopReplicaPartition(
                        tp.topic, tp.partition, LEADER_DURING_DELETE, True)

    def _start_deletion_requests(self, change: PartitionChangeBuilder, topic: str,
                                 pending: Set[tuple[TopicPartition, int]]) -> None:
        live = self.state.live
        for tp, b in sorted(pending):
            if b in live:
                change.stop.setdefault(b, {})[tp] = StopReplicaPartition(
                    tp.topic, tp.partition, LEADER_DURING_DELETE, True)
        change.um.update(self.state.partitions_of(topic))

    def _complete_deletion(self, change: PartitionChangeBuilder, name: str) -> None:
        """Kafka's completeDeleteTopic: topic znode (recursively), config, then the marker, so failover can resume."""
        change.write(ZkOp.DELETE, PATHS.topic(name), None, TopicRemoved(name), recursive=True)
        if name in self.state.configs:
            change.write(ZkOp.DELETE, PATHS.config("topics", name), None, TopicConfigRemoved(name))
        change.write(ZkOp.DELETE, PATHS.delete_topic(name), None, DeletionMarkerRemoved(name))

    def _admin_image(self, change: PartitionChangeBuilder, full_topic: str | None = None) -> ClusterImage:
        """The view topics.py validates against: registered brokers and topic names (one topic in full)."""
        cache = self.state
        names = set(cache.topics) | set(change.topics)
        topics = {n: TopicImage(n, cache.topics[n].topic_id if n in cache.topics else change.topics[n].topic_id, {})
                  for n in names}
        if full_topic is not None and full_topic in cache.topics:
            topic = cache.topics[full_topic]
            parts = {}
            for p, a in topic.partitions.items():
                st = cache.states.get(TopicPartition(full_topic, p))
                leader, epoch, isr = (st.leader, st.leader_epoch, st.isr) if st else (NO_LEADER, 0, ())
                parts[p] = PartitionState(a.replicas, leader, epoch, isr, a.adding_replicas, a.removing_replicas)
            topics[full_topic] = TopicImage(full_topic, topic.topic_id, parts, cache.configs.get(full_topic, {}))
        return ClusterImage("", cache.broker_id, {b: reg.info for b, reg in sorted(cache.live.items())}, topics)
