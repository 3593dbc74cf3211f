"""Reassignment (KIP-455) as ``KafkaController.onPartitionReassignment`` runs it, from the API and
from ``/admin/reassign_partitions``, plus batching by ``reassignment.max.concurrent.moves.per.broker``.

Phase U writes RS/AR/RR to the topic znode, then phase A (TRS not within the ISR) or phase B (it
is); :data:`REASSIGNMENT_PHASES`. Triggers: :class:`AlterPartitionReassignmentsRequested`,
:class:`LegacyReassignmentRequested`, an accepted AlterPartition whose ISR now covers TRS, a target
broker registering, and failover (``/admin/reassign_partitions`` first, then every partition with
AR or RR resumes).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from headwater.controller.effects import (
    AlterPartitionReassignmentsResponse,
    ControllerResult,
    LegacyReassignmentWritten,
    ListPartitionReassignmentsResponse,
    OngoingReassignment,
    ReassignmentQueueWritten,
    ReassignmentResult,
    StopReplicaPartition,
    ZkOp,
    ZkWrite,
)
from headwater.controller.events import (
    AlterPartitionReassignmentsRequested,
    LegacyReassignmentRequested,
    ListPartitionReassignmentsRequested,
)
from headwater.controller.partition_change import PartitionChangeBuilder
from headwater.controller.replication_control import remove_from_isr
from headwater.controller.state import (
    UNLIMITED_MOVES,
    ControllerState,
    LegacyReassignmentSeen,
)
from headwater.controller.znodes import PATHS, ReplicaAssignment, TopicPartition, encode_reassignment_queue
from headwater.metadata import zk
from headwater.protocol.errors import ErrorCode

REASSIGNMENT_PHASES: Mapping[str, str] = {
    "U": "RS = TRS + (ORS - TRS), AR = TRS - ORS, RR = ORS - TRS written to the topic znode before memory. Replicas "
    "that drop out of a replaced reassignment (or the adding replicas of a cancelled one) leave the leadership and "
    "the ISR first (one write each), then get StopReplica(delete=false) and StopReplica(delete=true)",
    "A": "TRS not within the ISR: bump the leader epoch; LeaderAndIsr with RS, AR, RR to the live replicas of RS, "
    "IsNew for AR; the new replicas start fetching",
    "B": "TRS within the ISR: leader moves to the first live TRS replica in the ISR if it is not in TRS or not "
    "live, or if that replica is the preferred one (TRS[0]) and auto.leader.rebalance.enable; else the leader epoch "
    "is bumped; each RR replica leaves the ISR (one write each); RR get "
    "StopReplica(delete=false) then StopReplica(delete=true); the topic znode gets RS = TRS last; the partition "
    "leaves /admin/reassign_partitions if the znode targets TRS; UpdateMetadata to every broker",
}
"""KIP-455 in the ZooKeeper controller (``KafkaController.onPartitionReassignment``)."""


@dataclass(frozen=True, slots=True)
class Reassignment:
    """One ongoing reassignment as :meth:`Controller.reassignments` reports it, as ZooKeeper holds it:
    ``replicas`` (RS), ``adding_replicas`` (AR), ``removing_replicas`` (RR); ``original`` = RS - AR
    (in RS order), ``target`` = RS - RR."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    original: tuple[int, ...]
    target: tuple[int, ...]


LegacyFilter = Callable[[tuple[str, int], tuple[int, ...]], bool]
"""Which entries of ``/admin/reassign_partitions`` to drop: (topic, partition), target -> drop?"""


def _moves_of(a: ReplicaAssignment) -> tuple[int, ...]:
    """The brokers a reassignment occupies: its AR and RR (disjoint by construction)."""
    return (*a.adding_replicas, *a.removing_replicas)


class ReassignmentControl:
    def __init__(self, state: ControllerState) -> None:
        self.state = state

    # --- queries ------------------------------------------------------------------------------------

    def reassignments(self) -> dict[TopicPartition, Reassignment]:
        out: dict[TopicPartition, Reassignment] = {}
        topics = self.state.topics
        for tp in self.state.reassigning():
            a = topics[tp.topic].partitions[tp.partition]
            out[tp] = Reassignment(tp.topic, tp.partition, a.replicas, a.adding_replicas, a.removing_replicas,
                                   a.origin_replicas, a.target_replicas)
        return out

    def moves(self, change: PartitionChangeBuilder | None = None) -> Counter[int]:
        """Ongoing moves per broker: a broker counts once per reassignment that has it in AR or RR."""
        load: Counter[int] = Counter()
        for tp in change.reassigning() if change is not None else self.state.reassigning():
            topic = (change.topics.get(tp.topic) if change else None) or self.state.topics[tp.topic]
            load.update(_moves_of(topic.partitions[tp.partition]))
        return load

    # --- events -------------------------------------------------------------------------------------

    def on_alter_reassignments(self, event: AlterPartitionReassignmentsRequested) -> PartitionChangeBuilder:
        change = PartitionChangeBuilder(self.state)
        targets: dict[TopicPartition, tuple[int, ...] | None] = {}
        for topic, partition, replicas in event.partitions:           # a map in Kafka: the last entry wins
            targets[TopicPartition(topic, partition)] = None if replicas is None else tuple(replicas)
        results: dict[TopicPartition, ReassignmentResult] = {}
        accepted: dict[TopicPartition, tuple[tuple[int, ...] | None, ReplicaAssignment]] = {}
        for tp, target in targets.items():
            error, new = self._reassignment_error(change, tp, target,
                                                  allow_rf_change=event.allow_replication_factor_change)
            if error is None:
                accepted[tp] = target, new
                results[tp] = ReassignmentResult(tp.topic, tp.partition, ErrorCode.NONE)
            else:
                results[tp] = ReassignmentResult(tp.topic, tp.partition, *error)
        # The latest reassignment wins: accepted partitions leave /admin/reassign_partitions first.
        self.legacy_remove(change, lambda key, _r: TopicPartition(*key) in accepted)
        load = self._load(change)
        for tp, (target, new) in accepted.items():
            error = self._request_move(change, tp, target, load, new)
            if error is not None:
                results[tp] = ReassignmentResult(tp.topic, tp.partition, *error)
        change.response = AlterPartitionReassignmentsResponse(ErrorCode.NONE, tuple(results.values()))
        return change

    def on_list_reassignments(self, event: ListPartitionReassignmentsRequested) -> ControllerResult:
        # Straight from the topic records, without building Reassignment values first: with 10,000 in
        # flight this is answered within the 200 ms that issue #4 asks for.
        cache = self.state
        topics, deleting, queue = cache.topics, cache.deleting, cache.queued

        def ongoing(name: str, p: int) -> OngoingReassignment | None:
            topic = topics.get(name)
            a = topic.partitions.get(p) if topic is not None and name not in deleting else None
            if a is None or not (a.adding_replicas or a.removing_replicas):
                return None
            return OngoingReassignment(name, p, a.replicas, a.adding_replicas, a.removing_replicas)

        def queued(name: str, p: int) -> OngoingReassignment | None:
            # Kafka's answer has no field for "queued": a queued partition is listed as ZooKeeper holds
            # it (RS = its current replicas, no AR, no RR). Being listed keeps kafka-reassign-partitions
            # --verify saying "still in progress", and empty AR and RR (which an ongoing one never has)
            # mark it as queued for `headwater reassign --list`.
            tp = TopicPartition(name, p)
            if tp not in queue or name in deleting or not cache.exists(tp):
                return None
            return OngoingReassignment(name, p, topics[name].partitions[p].replicas, (), ())

        if event.partitions is None:
            wanted: Sequence[tuple[str, int]] = [(name, p) for name in sorted(topics)
                                                 for p in sorted(topics[name].partitions)]
        else:
            wanted = list(dict.fromkeys((t, p) for t, p in event.partitions))
        parts = tuple(o for o in (ongoing(t, p) or (queued(t, p) if queue else None) for t, p in wanted)
                      if o is not None)
        return ControllerResult(response=ListPartitionReassignmentsResponse(ErrorCode.NONE, parts))

    def on_legacy_reassignment(self, event: LegacyReassignmentRequested) -> PartitionChangeBuilder:
        self.state.observe(LegacyReassignmentSeen(event.partitions))
        change = PartitionChangeBuilder(self.state)
        assert self.state.legacy is not None
        self._process_legacy(change, self.state.legacy)
        return change

    # --- resuming -----------------------------------------------------------------------------------

    def resume(self, change: PartitionChangeBuilder) -> None:
        """Failover (Kafka's initializePartitionReassignments): ``/admin/reassign_partitions`` first (it
        supersedes API reassignments of the same partitions), then every other ongoing reassignment.
        What the queue holds starts when the result is made, once these have resumed (they keep their
        places); legacy entries go through the limit."""
        legacy = self.state.legacy
        started = self._process_legacy(change, legacy) if legacy is not None else set()
        for tp in change.reassigning():
            if tp not in started:
                self.reassign(change, tp, change.assignment(tp))

    def resume_for_broker(self, change: PartitionChangeBuilder, broker_id: int) -> None:
        """Kafka's maybeResumeReassignments on broker startup: the reassignments that target it."""
        for tp in change.reassigning():
            a = change.assignment(tp)
            if broker_id in a.target_replicas:
                self.reassign(change, tp, a)

    def complete_if_caught_up(self, change: PartitionChangeBuilder, tp: TopicPartition) -> None:
        """Kafka's maybeCompleteReassignment after an accepted ISR change: phase B once TRS is within the ISR."""
        if tp.topic in self.state.deleting:
            return
        a = change.assignment(tp)
        state = change.view(tp)
        if a.is_being_reassigned and state is not None and set(a.target_replicas) <= set(state.isr):
            change.flush(tp)
            self._complete(change, tp)

    # --- the phases (onPartitionReassignment) -------------------------------------------------------

    def reassign(self, change: PartitionChangeBuilder, tp: TopicPartition, new: ReplicaAssignment) -> None:
        """onPartitionReassignment: phase U if the assignment changes, then A (TRS not within the ISR) or B."""
        current = change.assignment(tp)
        if new != current:
            dropped = tuple(r for r in current.replicas if r not in new.replicas)
            if dropped:
                self._remove_replicas(change, tp, dropped, new.replicas)
            change.set_assignment(tp, new)                                 # U1 (and U2 on apply)
        state = change.view(tp)
        if state is None and any(r in self.state.eligible() for r in new.replicas):
            change.create_state(tp, new.replicas)                          # a NEW partition gets its first leader
            state = change.view(tp)
        if not new.is_being_reassigned or (state is not None and set(new.target_replicas) <= set(state.isr)):
            self._complete(change, tp)
        elif state is not None:
            change.bump(tp)                                                # A1
            for b in new.adding_replicas:                                  # A2: NewReplica, IsNew
                if b in self.state.live and b != state.leader:
                    change.lai.setdefault(b, {})[tp] = True
        change.um.add(tp)

    def _remove_replicas(self, change: PartitionChangeBuilder, tp: TopicPartition, dropped: tuple[int, ...],
                         remaining: tuple[int, ...]) -> None:
        """Replicas leave a partition: leadership moves to a live ISR member of ``remaining`` if one of them led;
        each leaves the ISR (OfflineReplica, one write each); then StopReplica(delete=false), StopReplica(delete=true).

        The ISR shrinks before the topic znode drops them, so ZooKeeper's ISR stays within its replicas."""
        state = change.view(tp)
        if state is not None:
            if state.leader in dropped:
                eligible = self.state.eligible()
                chosen = next((r for r in remaining if r in eligible and r in state.isr and r not in dropped), None)
                if chosen is not None:
                    change.stage(tp, chosen, state.isr)
                    change.flush(tp)
            self._leave_isr(change, tp, dropped)
        self._stop_replicas(change, tp, dropped)

    def _leave_isr(self, change: PartitionChangeBuilder, tp: TopicPartition, replicas: Sequence[int]) -> None:
        """Each replica leaves the leadership and the ISR (OfflineReplica), one write each."""
        for r in replicas:
            st = change.view(tp)
            assert st is not None
            if r == st.leader or r in st.isr:
                leader, isr = remove_from_isr(st.leader, st.isr, r)
                change.stage(tp, leader, isr)
                change.flush(tp)

    def _stop_replicas(self, change: PartitionChangeBuilder, tp: TopicPartition, replicas: Sequence[int]) -> None:
        state = change.view(tp)
        epoch = state.leader_epoch if state is not None else -1
        for r in replicas:
            if r in self.state.live:
                change.stop_offline.setdefault(r, {})[tp] = StopReplicaPartition(tp.topic, tp.partition, epoch, False)
                change.stop.setdefault(r, {})[tp] = StopReplicaPartition(tp.topic, tp.partition, epoch, True)

    def _complete(self, change: PartitionChangeBuilder, tp: TopicPartition) -> None:
        """Phase B: TRS is within the ISR (or nothing is being reassigned any more)."""
        a = change.assignment(tp)
        target, removing = a.target_replicas, a.removing_replicas
        state = change.view(tp)
        if state is not None:
            eligible = self.state.eligible()
            preferred = target[0]
            # A move ends where the plan says: with auto.leader.rebalance.enable, the preferred replica
            # takes over at once rather than at the next rebalance check. A cancel restores the original
            # replicas and keeps its leader (nothing is being reassigned by then).
            hand_back = (a.is_being_reassigned and self.state.auto_rebalance() and state.leader != preferred
                         and preferred in state.isr and self.state.replica_online(preferred, tp))
            if state.leader not in target or state.leader not in eligible or hand_back:  # B3: new leader
                chosen = next((r for r in target if r in eligible and r in state.isr), None)
                if chosen is not None:
                    change.stage(tp, chosen, state.isr)
                    change.flush(tp)
            else:
                change.bump(tp)
            self._leave_isr(change, tp, removing)                              # B4: OfflineReplica, out of the ISR
            change.notify.add(tp)
        self._stop_replicas(change, tp, removing)                              # B4/B5: StopReplica false, true
        change.set_assignment(tp, ReplicaAssignment(target))                   # B6: RS = TRS, last
        self.legacy_remove(change, lambda key, replicas: key == (tp.topic, tp.partition) and replicas == target)  # B7
        change.um.add(tp)                                                      # B8

    # --- validation ---------------------------------------------------------------------------------

    def _reassignment_error(self, change: PartitionChangeBuilder, tp: TopicPartition, target: tuple[int, ...] | None,
                            *, allow_rf_change: bool = True,
                            check_live: bool = True) -> tuple[tuple[ErrorCode, str] | None, ReplicaAssignment]:
        """KafkaController's validateReplicas, then the cancel, existence and deletion checks, in Kafka's order;
        then KIP-860's replication-factor guard and the refusal of a change that needs an unclean election.

        Returns the error (None: valid) and the move itself (RS, AR, RR), which ``_request_move``
        starts as it is while nothing else changed the partition in between."""
        exists = self.state.exists(tp)
        current = change.assignment(tp) if exists else ReplicaAssignment(())
        new = current.reassign_to(current.origin_replicas if target is None else target)
        return self._move_error(change, tp, target, current, new, exists, allow_rf_change, check_live), new

    def _move_error(self, change: PartitionChangeBuilder, tp: TopicPartition, target: tuple[int, ...] | None,
                    current: ReplicaAssignment, new: ReplicaAssignment, exists: bool, allow_rf_change: bool,
                    check_live: bool) -> tuple[ErrorCode, str] | None:
        if target is not None:
            if not target:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified in partition reassignment."
            if len(set(target)) != len(target):
                return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Duplicate replica ids in partition reassignment replica list: {list(target)}")
            if any(r < 0 for r in target):
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica list: {list(target)}"
            adding = new.adding_replicas
            live = self.state.eligible()
            if check_live and not set(adding) <= live:
                return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Replica assignment has brokers that are not alive. Replica list: {list(adding)}, "
                        f"live broker list: {sorted(live)}")
        if target is None and not (exists and (current.is_being_reassigned or tp in self._queue_view(change))):
            return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress."
        if not exists or change.leaving(tp.topic):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
        if target is not None and not allow_rf_change and len(target) != len(current.target_replicas):
            return (ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"The replication factor is changed from {len(current.target_replicas)} to {len(target)}")
        if self._needs_unclean(change, tp, new):
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Unable to {'revert' if target is None else 'change'} partition assignment for "
                    f"{tp.topic}:{tp.partition} because it would require an unclean leader election.")
        return None

    def _needs_unclean(self, change: PartitionChangeBuilder, tp: TopicPartition, new: ReplicaAssignment) -> bool:
        """Replicas leaving RS would take every ISR member with them (only adding replicas are in sync)."""
        state = change.view(tp)
        dropped = set(change.assignment(tp).replicas) - set(new.replicas)
        return state is not None and bool(dropped) and set(state.isr) <= dropped

    # --- /admin/reassign_partitions -----------------------------------------------------------------

    def legacy_remove(self, change: PartitionChangeBuilder, drop: LegacyFilter) -> None:
        """maybeRemoveFromZkReassignment: rewrite /admin/reassign_partitions without some entries, or delete it
        when none are left."""
        current = change.legacy if change.legacy_written else self.state.legacy
        if current is None:
            return
        remaining = {k: r for k, r in current.items() if not drop(k, r)}
        if remaining and len(remaining) == len(current):
            return
        if remaining:
            change.write(ZkOp.SET, PATHS.REASSIGN_PARTITIONS, zk.encode_reassign_partitions(remaining),
                         LegacyReassignmentWritten(remaining))
        else:
            change.write(ZkOp.DELETE, PATHS.REASSIGN_PARTITIONS, None, LegacyReassignmentWritten(None))
        change.legacy_written, change.legacy = True, remaining or None

    def _process_legacy(self, change: PartitionChangeBuilder,
                        partitions: Mapping[tuple[str, int], tuple[int, ...]]) -> set[TopicPartition]:
        """processZkPartitionReassignment: start each entry; entries that cannot start leave the znode."""
        started: set[TopicPartition] = set()
        failed: set[tuple[str, int]] = set()
        load = self._load(change)
        for (topic, partition), target in sorted(partitions.items()):
            tp = TopicPartition(topic, partition)
            error, new = self._reassignment_error(change, tp, tuple(target), check_live=False)
            if error is not None:
                failed.add((topic, partition))
                continue
            started.add(tp)
            if self._request_move(change, tp, tuple(target), load, new) is not None:
                failed.add((topic, partition))
        self.legacy_remove(change, lambda key, _r: key in failed or not partitions)
        return started

    # --- batching: reassignment.max.concurrent.moves.per.broker (beyond Kafka) ----------------------

    def _queue_view(self, change: PartitionChangeBuilder) -> dict[TopicPartition, tuple[int, ...]]:
        """The queue as this step has it; copied on first use, so the cache changes only on apply."""
        if change.queue is None:
            change.queue = dict(self.state.queued)
        return change.queue

    def _load(self, change: PartitionChangeBuilder) -> Counter[int] | None:
        """Ongoing moves per broker, or None when there is no limit (no scan of 10,000 partitions then)."""
        return None if self.state.max_moves >= UNLIMITED_MOVES else self.moves(change)

    def _fits(self, load: Counter[int] | None, current: ReplicaAssignment, new: ReplicaAssignment) -> bool:
        """Would ``new`` keep every broker within the limit, once ``current``'s own moves are given back?"""
        if load is None:
            return True
        mine = Counter(_moves_of(current))
        limit = self.state.max_moves
        return all(load[b] - mine[b] + 1 <= limit for b in _moves_of(new))

    def _started(self, change: PartitionChangeBuilder, load: Counter[int] | None, tp: TopicPartition,
                 before: ReplicaAssignment) -> None:
        if load is not None:
            load.subtract(_moves_of(before))
            load.update(_moves_of(change.assignment(tp)))

    def _request_move(self, change: PartitionChangeBuilder, tp: TopicPartition, target: tuple[int, ...] | None,
                      load: Counter[int] | None, new: ReplicaAssignment) -> tuple[ErrorCode, str] | None:
        """An accepted target (None: cancel) for one partition: start it, or queue it if a broker is at its limit.

        A partition is either ongoing or queued, never both, so the original set stays the one in
        ZooKeeper: a queued partition has RS = ORS. A replacement of an ongoing reassignment that no
        longer fits reverts it (a cancel, which always finishes at once) and queues the new target.
        ``new`` is the move validation computed from the current assignment."""
        current = change.assignment(tp)
        queue = self._queue_view(change) if (self.state.queued or change.queue or load is not None) else None
        if target is None:
            if queue is not None:
                queue.pop(tp, None)             # a queued one just leaves the queue
            if current.is_being_reassigned:
                self.reassign(change, tp, new)
                self._started(change, load, tp, current)
            return None
        if queue is not None and tp in queue and not current.is_being_reassigned:
            queue[tp] = target                  # replaced in place: it keeps its turn
            return None
        if self._fits(load, current, new):
            if queue is not None:
                queue.pop(tp, None)
            self.reassign(change, tp, new)
            self._started(change, load, tp, current)
            return None
        assert queue is not None
        if current.is_being_reassigned:
            revert = current.reassign_to(current.origin_replicas)
            if self._needs_unclean(change, tp, revert):
                return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Unable to queue the change of partition assignment for {tp.topic}:{tp.partition} "
                        f"because reverting the ongoing one would require an unclean leader election.")
            self.reassign(change, tp, revert)
            self._started(change, load, tp, current)
        queue[tp] = target
        return None

    def settle_queue(self, change: PartitionChangeBuilder) -> ZkWrite | None:
        """At the end of every event with a queue, start what now fits; the queue's write, if it changed.

        Phase B, a cancel, a deletion or a higher limit are what make room, and each of them ends here."""
        if change.queue or (change.queue is None and self.state.queued):
            self._drain(change)
        return self._queue_write(change)

    def _drain(self, change: PartitionChangeBuilder) -> None:
        """Start queued reassignments that fit, in queue order; drop those whose topic is gone or going."""
        queue = self._queue_view(change)
        load = self._load(change)
        for tp, target in list(queue.items()):
            if not self.state.exists(tp) or change.leaving(tp.topic):
                del queue[tp]
                continue
            current = change.assignment(tp)
            if current.is_being_reassigned:
                # Only after a failover between a start's phase U and the queue's rewrite: the entry
                # has started. (A partition is otherwise never ongoing and queued at once.)
                if current.target_replicas == target:
                    del queue[tp]
                continue
            new = current.reassign_to(target)
            if self._fits(load, current, new):
                del queue[tp]
                self.reassign(change, tp, new)
                self._started(change, load, tp, current)

    def _queue_write(self, change: PartitionChangeBuilder) -> ZkWrite | None:
        """The queue's znode, written last: a start's phase U comes first, so a failover in between
        finds the partition ongoing and its entry still queued, which ``_drain`` then drops."""
        if change.queue is None or list(change.queue.items()) == list(self.state.queued.items()):
            return None
        entries = tuple(change.queue.items())
        if not entries:
            return change.zk_write(ZkOp.DELETE, PATHS.REASSIGNMENT_QUEUE, None, ReassignmentQueueWritten(None))
        op = ZkOp.SET if self.state.queue_znode else ZkOp.CREATE
        return change.zk_write(op, PATHS.REASSIGNMENT_QUEUE, encode_reassignment_queue(entries),
                               ReassignmentQueueWritten(entries))
