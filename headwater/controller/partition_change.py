"""What one event decides: new partition states and topic znodes on top of the cache, then the
fenced writes and the requests that describe them.

A handler stages the smallest new state per partition (:meth:`PartitionChangeBuilder.stage`);
staged states become SETs conditional on the partition epoch, and the LeaderAndIsr /
UpdateMetadata requests describe the final states. A handler that needs several ordered writes of
one partition (reassignment phase B: new leader, then each removed replica out of the ISR, then
the topic znode) flushes the staged state into the write list and stages the next one on top of it.

The requests are built when first read (:class:`RequestPlan`), so that the shell can answer first,
from values captured when the result is made: what happens to the cache afterwards does not
change them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from headwater.controller.effects import (
    BrokerRequest,
    Change,
    ControllerResult,
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    PartitionStateWritten,
    Response,
    StopReplicaPartition,
    StopReplicaRequest,
    TopicAssignmentWritten,
    UpdateMetadataPartition,
    UpdateMetadataRequest,
    ZkOp,
    ZkWrite,
)
from headwater.controller.state import ControllerState
from headwater.controller.znodes import (
    LEADER_DURING_DELETE,
    PATHS,
    LeaderIsr,
    LiveBroker,
    ReplicaAssignment,
    TopicPartition,
    TopicRecord,
    encode_partition_state,
    encode_topic,
)

METADATA_FIRST_PARTITIONS = 1000
"""On failover, a broker whose LeaderAndIsr has this many partitions or more first gets an
UpdateMetadata with the live brokers and no partitions (Kafka's onControllerFailover also sends
brokers an UpdateMetadata before the LeaderAndIsr). A broker works through a LeaderAndIsr of 10,000
partitions for seconds, and until an UpdateMetadata from the new controller arrives it names the old
controller in its Metadata answers, so no client finds the new one. The partitions' UpdateMetadata
keeps its place after the LeaderAndIsr; smaller failovers send no extra request, so the simulation's
runs (a few partitions) are unchanged."""


class PartitionChangeBuilder:
    """What one event decided so far; nothing here is visible to the cache until applied.

    Handlers fill the request fields directly: ``lai`` (broker -> partition -> IsNew), ``um``
    (partitions every broker gets in UpdateMetadata), ``um_full`` (brokers that get every
    partition), ``stop_offline`` and ``stop`` (StopReplica with delete=false, then delete=true)."""

    def __init__(self, state: ControllerState) -> None:
        self.state = state
        self.response: Response | None = None
        self.writes: list[ZkWrite | None] = []
        """In order. None: a topic znode write merged into a later one (see ``set_assignment``)."""
        self.topic_slots: dict[str, int] = {}
        """Topic -> index in ``writes`` of its latest topic znode write, encoded only at ``result``."""
        self.topic_scanned: dict[str, int] = {}
        """Topic -> index from which ``writes`` after its slot are not yet known to be mergeable across."""
        self.topic_slot_partitions: dict[str, set[int]] = {}
        """Topic -> the partitions whose change its pending write carries."""
        self.topic_slot_base: dict[str, TopicRecord] = {}
        """Topic -> the record ZooKeeper holds before its pending write."""
        self.staged: dict[TopicPartition, LeaderIsr] = {}
        self.notify: set[TopicPartition] = set()
        self.created: dict[TopicPartition, LeaderIsr] = {}
        self.topics: dict[str, TopicRecord] = {}
        self.queued_deletions: set[str] = set()
        self.lai: dict[int, dict[TopicPartition, bool]] = {}
        self.um: set[TopicPartition] = set()
        self.um_full: set[int] = set()
        self.um_brokers = False
        self.stop: dict[int, dict[TopicPartition, StopReplicaPartition]] = {}
        self.flushed: dict[TopicPartition, LeaderIsr] = {}
        """States already written (in ``writes``) by this step; a later change of the same partition builds on them."""
        self.stop_offline: dict[int, dict[TopicPartition, StopReplicaPartition]] = {}
        """StopReplica(delete=false) sent before ``stop`` (OfflineReplica, then ReplicaDeletionStarted)."""
        self.legacy_written = False
        self.legacy: dict[tuple[str, int], tuple[int, ...]] | None = None
        self.queue: dict[TopicPartition, tuple[int, ...]] | None = None
        """This step's copy of the reassignment queue once it touched it (None: unchanged)."""
        self.metadata_first = False
        self.warnings: list[str] = []
        """A LeaderAndIsr of METADATA_FIRST_PARTITIONS or more is preceded by an UpdateMetadata of the
        live brokers alone (failover)."""

    # --- the cache plus what this step decided ----------------------------------------------------

    def view(self, tp: TopicPartition) -> LeaderIsr | None:
        return self.staged.get(tp) or self.flushed.get(tp) or self.created.get(tp) or self.state.states.get(tp)

    def base(self, tp: TopicPartition) -> LeaderIsr:
        """The state ZooKeeper will hold once the writes staged so far in ``writes`` are applied."""
        return self.flushed.get(tp) or self.created.get(tp) or self.state.states[tp]

    def assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        topic = self.topics.get(tp.topic) or self.state.topics[tp.topic]
        return topic.partitions[tp.partition]

    def replicas_of(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.assignment(tp).replicas

    def leaving(self, topic: str) -> bool:
        """Being deleted, or queued for deletion by this step."""
        return topic in self.state.deleting or topic in self.queued_deletions

    def active_partitions(self) -> list[TopicPartition]:
        """Partitions with a state (in the cache or created in this step) that are not being deleted."""
        tps = set(self.state.states) | set(self.created)
        deleting, queued = self.state.deleting, self.queued_deletions
        return sorted(tp for tp in tps if tp.topic not in deleting and tp.topic not in queued)

    def reassigning(self) -> list[TopicPartition]:
        return self.state.reassigning(self.topics, self.queued_deletions)

    # --- partition states ---------------------------------------------------------------------------

    def stage(self, tp: TopicPartition, leader: int, isr: tuple[int, ...], *,
              notify: bool = True, bump_leader_epoch: bool = True, force: bool = False) -> LeaderIsr:
        """Stage the smallest change: one new state per partition per step, or nothing if it matches ZooKeeper
        (``force``: a new state even so, to bump the leader epoch)."""
        committed = self.base(tp)
        if leader == committed.leader and isr == committed.isr and not force:
            self.staged.pop(tp, None)
            if tp not in self.flushed:
                self.notify.discard(tp)
            return committed
        state = LeaderIsr(
            leader=leader,
            leader_epoch=committed.leader_epoch + (1 if bump_leader_epoch else 0),
            isr=isr,
            controller_epoch=self.state.epoch,
            partition_epoch=committed.partition_epoch + 1,
        )
        self.staged[tp] = state
        if notify:
            self.notify.add(tp)
        return state

    def flush(self, tp: TopicPartition) -> None:
        """Write the staged state of ``tp`` now, so that later writes of this step come after it."""
        state = self.staged.pop(tp, None)
        if state is None:
            return
        self.writes.append(self._state_write(tp, state))
        self.flushed[tp] = state
        self.um.add(tp)

    def bump(self, tp: TopicPartition) -> None:
        """Kafka's updateLeaderEpoch: a new leader epoch (once per step) so that brokers take the LeaderAndIsr."""
        state = self.view(tp)
        assert state is not None
        committed = self.state.states.get(tp)
        if tp in self.created or (committed is not None and state.leader_epoch > committed.leader_epoch):
            if tp not in self.created:
                self.notify.add(tp)
            return
        self.stage(tp, state.leader, state.isr, force=True)
        self.flush(tp)

    def create_state(self, tp: TopicPartition, replicas: tuple[int, ...]) -> None:
        """NEW -> ONLINE: leader = first live replica, ISR = the live replicas; nothing if none is live."""
        eligible = self.state.eligible()
        live = tuple(r for r in replicas if r in eligible)
        if not live:
            return
        state = LeaderIsr(live[0], 0, live, self.state.epoch, 0)
        self.created[tp] = state
        self.write(ZkOp.CREATE, PATHS.partition_state(tp.topic, tp.partition), encode_partition_state(state),
                   PartitionStateWritten(tp, state), make_parents=True)

    def _state_write(self, tp: TopicPartition, state: LeaderIsr) -> ZkWrite:
        return self.zk_write(ZkOp.SET, PATHS.partition_state(tp.topic, tp.partition), encode_partition_state(state),
                             PartitionStateWritten(tp, state), expected_version=self.base(tp).partition_epoch)

    # --- writes -------------------------------------------------------------------------------------

    def zk_write(self, op: ZkOp, path: str, data: bytes | None, change: Change, *, expected_version: int = -1,
                 make_parents: bool = False, recursive: bool = False) -> ZkWrite:
        """A write fenced by this controller's epoch (not added to the step)."""
        return ZkWrite(op, path, data, self.state.epoch_zk_version, change, expected_version, make_parents, recursive)

    def write(self, op: ZkOp, path: str, data: bytes | None, change: Change, *,
              make_parents: bool = False, recursive: bool = False) -> None:
        """Add a write after those made so far."""
        self.writes.append(self.zk_write(op, path, data, change, make_parents=make_parents, recursive=recursive))

    def set_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        """Rewrite the topic znode with this partition's new assignment (nothing if it is already so).

        One request may reassign all 1,000 partitions of a topic; a znode write (and an encoding of
        the whole topic) per partition was quadratic. So the topic's previous write in this step
        moves here and takes this change too, when only partition state writes (and other topics'
        znode writes) came after it. Moving a topic write later keeps every rule of the phases: a
        partition's ISR still shrinks before the write that drops replicas from RS, and a state
        written earlier than before names only replicas already in ZooKeeper's RS (an ISR member is
        always in RS). Any other write in between (``/admin/reassign_partitions``, deletions) keeps
        the order as it was, and so does a second change of the same partition (phase U then B of
        one partition stay two writes, as the seeds show them).
        """
        name = tp.topic
        topic = self.topics.get(name) or self.state.topics[name]
        if topic.partitions[tp.partition] == assignment:
            return
        slot = self.topic_slots.get(name)
        pending = self.writes[slot] if slot is not None else None
        if (slot is not None and pending is not None and isinstance(pending.change, TopicAssignmentWritten)
                and pending.change.topic is topic and tp.partition not in self.topic_slot_partitions[name]
                and self._mergeable(name)):
            self.writes[slot] = None
            parts = topic.partitions
            assert isinstance(parts, dict)
            parts[tp.partition] = assignment          # this step's own copy (made below), not the cache's
            new = topic
        else:
            if slot is not None:
                self._seal_topic_write(name)
            new = replace(topic, partitions={**topic.partitions, tp.partition: assignment})
            self.topic_slot_partitions[name] = set()
            self.topic_slot_base[name] = topic
        self.topic_slot_partitions[name].add(tp.partition)
        self.writes.append(self.zk_write(ZkOp.SET, PATHS.topic(name), None, TopicAssignmentWritten(new)))
        self.topic_slots[name] = self.topic_scanned[name] = len(self.writes) - 1
        self.topic_scanned[name] += 1
        self.topics[name] = new
        self.um.add(tp)

    def _mergeable(self, name: str) -> bool:
        for i in range(self.topic_scanned[name], len(self.writes)):
            w = self.writes[i]
            if w is not None and not isinstance(w.change, PartitionStateWritten | TopicAssignmentWritten):
                return False
        self.topic_scanned[name] = len(self.writes)
        return True

    def _seal_topic_write(self, name: str) -> None:
        """Encode the topic's pending write as it stands; later changes get a write of their own."""
        slot = self.topic_slots.pop(name)
        pending = self.writes[slot]
        assert pending is not None and isinstance(pending.change, TopicAssignmentWritten)
        record = pending.change.topic
        base = self.topic_slot_base[name]
        # Only adds replicas: valid in ZooKeeper with or without the state writes around it.
        standalone = all(set(record.partitions[p].replicas) >= set(base.partitions[p].replicas)
                         for p in self.topic_slot_partitions[name] if p in base.partitions)
        self.writes[slot] = replace(self.zk_write(ZkOp.SET, PATHS.topic(name), encode_topic(record),
                                                  TopicAssignmentWritten(record)), standalone=standalone)

    # --- the result ---------------------------------------------------------------------------------

    def result(self, last: ZkWrite | None = None) -> ControllerResult:
        """The writes in order (``last`` after every other), the response, and the requests' plan.
        The step is done with afterwards."""
        for name in list(self.topic_slots):
            self._seal_topic_write(name)
        writes = [w for w in self.writes if w is not None]
        for tp in sorted(self.staged):
            writes.append(self._state_write(tp, self.staged[tp]))
            self.um.add(tp)
        live = self.state.live
        for tp in sorted(self.notify):
            for b in self.replicas_of(tp):
                if b in live:
                    self.lai.setdefault(b, {}).setdefault(tp, False)
        for tp in self.created:
            for b in self.replicas_of(tp):
                if b in live:
                    self.lai.setdefault(b, {})[tp] = True
            self.um.add(tp)
        if last is not None:
            writes.append(last)
        return ControllerResult(tuple(writes), self.response, tuple(self.warnings), build=self._plan().build)

    def _plan(self) -> RequestPlan:
        state = self.state
        if self.um_full:
            states = {**state.states, **self.created, **self.flushed, **self.staged}
            topics = {**state.topics, **self.topics}
        else:
            needed = set(self.um)
            for parts in self.lai.values():
                needed.update(parts)
            cache = state.states
            states = {tp: cache[tp] for tp in needed if tp in cache}
            states.update(self.created)
            states.update(self.flushed)
            states.update(self.staged)
            topics = {}
            for name in {tp.topic for tp in states}:
                record = self.topics.get(name) or state.topics.get(name)
                if record is not None:
                    topics[name] = record
        return RequestPlan(
            controller_id=state.broker_id, controller_epoch=state.epoch, live=dict(state.live), states=states,
            topics=topics, deleting=frozenset(state.deleting) | self.queued_deletions,
            offline={b: frozenset(tps) for b, tps in state.offline_replicas.items() if tps},
            lai=self.lai, um=self.um, um_full=self.um_full, um_brokers=self.um_brokers,
            stop_offline=self.stop_offline, stop=self.stop, metadata_first=self.metadata_first,
        )


@dataclass(frozen=True, slots=True)
class RequestPlan:
    """The requests of one result, and every value they name, as the result was made.

    Per broker, in broker order: LeaderAndIsr, UpdateMetadata, StopReplica(delete=false),
    StopReplica(delete=true); with ``metadata_first``, a LeaderAndIsr of METADATA_FIRST_PARTITIONS
    or more is preceded by an UpdateMetadata of the live brokers alone."""

    controller_id: int
    controller_epoch: int
    live: Mapping[int, LiveBroker]
    states: Mapping[TopicPartition, LeaderIsr]
    """Every state the requests name: this step's over the cache's (all of them with ``um_full``)."""
    topics: Mapping[str, TopicRecord]
    deleting: frozenset[str]
    offline: Mapping[int, frozenset[TopicPartition]]
    lai: Mapping[int, Mapping[TopicPartition, bool]]
    um: set[TopicPartition]
    um_full: set[int]
    um_brokers: bool
    stop_offline: Mapping[int, Mapping[TopicPartition, StopReplicaPartition]]
    stop: Mapping[int, Mapping[TopicPartition, StopReplicaPartition]]
    metadata_first: bool

    def build(self) -> tuple[BrokerRequest, ...]:
        live = self.live
        live_brokers = tuple(reg.info for _, reg in sorted(live.items()))
        everyone = bool(self.um) or self.um_brokers
        all_tps: list[TopicPartition] | None = None
        out: list[BrokerRequest] = []
        # Partition entries are the same for every broker: build each once (10,000 at a failover).
        lai_cache: dict[tuple[TopicPartition, bool], LeaderAndIsrPartition] = {}
        um_cache: dict[TopicPartition, UpdateMetadataPartition | None] = {}
        # Every broker's UpdateMetadata carries the same entries (all, or this step's): one tuple each,
        # shared, so the shell builds its wire form once too.
        um_tuples: dict[bool, tuple[UpdateMetadataPartition, ...]] = {}

        def lai_part(tp: TopicPartition, is_new: bool) -> LeaderAndIsrPartition:
            p = lai_cache.get((tp, is_new))
            if p is None:
                p = lai_cache[(tp, is_new)] = self._lai_partition(tp, is_new)
            return p

        def um_part(tp: TopicPartition) -> UpdateMetadataPartition | None:
            if tp not in um_cache:
                um_cache[tp] = self._um_partition(tp)
            return um_cache[tp]

        cid, epoch = self.controller_id, self.controller_epoch
        for b in sorted(live):
            broker_epoch = live[b].broker_epoch
            if b in self.lai:
                parts = tuple(lai_part(tp, is_new) for tp, is_new in sorted(self.lai[b].items()))
                leaders = sorted({p.leader for p in parts if p.leader in live})
                if self.metadata_first and len(parts) >= METADATA_FIRST_PARTITIONS:
                    out.append(UpdateMetadataRequest(b, cid, epoch, broker_epoch, (), live_brokers))
                out.append(LeaderAndIsrRequest(b, cid, epoch, broker_epoch, parts,
                                               tuple(live[x].info for x in leaders)))
            full = b in self.um_full
            if everyone or full:
                um_parts = um_tuples.get(full)
                if um_parts is None:
                    if full:
                        if all_tps is None:
                            all_tps = sorted(self.states)
                        tps: Sequence[TopicPartition] = all_tps
                    else:
                        tps = sorted(self.um)
                    um_parts = um_tuples[full] = tuple(p for p in map(um_part, tps) if p is not None)
                out.append(UpdateMetadataRequest(b, cid, epoch, broker_epoch, um_parts, live_brokers))
            if b in self.stop_offline:
                out.append(StopReplicaRequest(b, cid, epoch, broker_epoch,
                                              tuple(v for _, v in sorted(self.stop_offline[b].items()))))
            if b in self.stop:
                out.append(StopReplicaRequest(b, cid, epoch, broker_epoch,
                                              tuple(v for _, v in sorted(self.stop[b].items()))))
        return tuple(out)

    def _lai_partition(self, tp: TopicPartition, is_new: bool) -> LeaderAndIsrPartition:
        state = self.states[tp]
        topic = self.topics[tp.topic]
        a = topic.partitions[tp.partition]
        return LeaderAndIsrPartition(tp.topic, topic.topic_id, tp.partition, state.controller_epoch, state.leader,
                                     state.leader_epoch, state.isr, state.partition_epoch, a.replicas,
                                     a.adding_replicas, a.removing_replicas, is_new)

    def _um_partition(self, tp: TopicPartition) -> UpdateMetadataPartition | None:
        state = self.states.get(tp)
        topic = self.topics.get(tp.topic)
        if state is None or topic is None:
            return None
        a = topic.partitions[tp.partition]
        live, offline = self.live, self.offline
        down = tuple(b for b in a.replicas if b not in live or (b in offline and tp in offline[b]))
        if tp.topic in self.deleting:
            return UpdateMetadataPartition(tp.topic, topic.topic_id, tp.partition, self.controller_epoch,
                                           LEADER_DURING_DELETE, LEADER_DURING_DELETE, state.isr,
                                           state.partition_epoch, a.replicas, down)
        return UpdateMetadataPartition(tp.topic, topic.topic_id, tp.partition, state.controller_epoch, state.leader,
                                       state.leader_epoch, state.isr, state.partition_epoch, a.replicas, down)
