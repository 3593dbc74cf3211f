"""Brokers, ISRs and elections: Kafka's ``PartitionStateMachine`` / ``ReplicaStateMachine`` /
``Election`` as the ZooKeeper controller applies them, plus the elections an operator asks for
(ElectLeaders, ``/admin/preferred_replica_election``) and the automatic leader rebalance.

Elections (:data:`ELECTION_RULES`, :func:`elect_leader`) pick the first replica in assignment
order that qualifies, and every controller-made change of leader or ISR bumps the leader epoch (a
broker ignores a LeaderAndIsr whose leader epoch is not newer). ISR changes made by the leader
through AlterPartition keep the leader epoch and bump only the partition epoch (the state znode's
version). A broker that leaves is removed from every ISR, except that the last ISR member stays
(with leader -1), so that the one replica known to hold every committed record can lead again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from enum import Enum

from headwater.controller.effects import (
    AlterPartitionResponse,
    AlterPartitionResult,
    ControlledShutdownResponse,
    ControllerResult,
    ElectionResult,
    ElectLeadersResponse,
    PreferredElectionRemoved,
    StopReplicaPartition,
    ZkOp,
)
from headwater.controller.events import (
    AlterPartitionItem,
    AlterPartitionReceived,
    AutoRebalanceCheck,
    BrokerExpired,
    BrokerRegistered,
    ControlledShutdownRequested,
    ElectionType,
    ElectLeadersRequested,
    LogDirFailed,
    PreferredElectionRequested,
    ReplicasOffline,
)
from headwater.controller.partition_change import PartitionChangeBuilder
from headwater.controller.state import (
    BrokerDown,
    BrokerUp,
    ControllerState,
    PartitionPhase,
    ReplicaOffline,
    ShutdownStarted,
)
from headwater.controller.znodes import NO_LEADER, PATHS, LeaderIsr, LiveBroker, TopicPartition
from headwater.protocol.errors import ErrorCode


class Election(Enum):
    OFFLINE = "offline"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"
    PREFERRED = "preferred"
    UNCLEAN = "unclean"


ELECTION_RULES: Mapping[Election, str] = {
    Election.OFFLINE: (
        "leader = first replica in assignment order that is live (registered, not shutting down) and in the ISR; "
        "ISR := ISR members that are live. Otherwise, only if unclean.leader.election.enable: first live replica, "
        "ISR := [it]. Otherwise no leader (the partition stays offline)."
    ),
    Election.CONTROLLED_SHUTDOWN: (
        "leader = first replica in assignment order that is live, in the ISR and not shutting down; "
        "ISR := ISR minus shutting-down brokers. Otherwise the leader stays (reported as remaining)."
    ),
    Election.PREFERRED: (
        "leader = the first replica in assignment order, if it is online (registered, not shutting down, its log "
        "dir not failed) and in the ISR; ISR unchanged. Otherwise no change (PREFERRED_LEADER_NOT_AVAILABLE)."
    ),
    Election.UNCLEAN: (
        "as OFFLINE with unclean.leader.election.enable taken as true whatever the configs say: an operator asked "
        "for it through ElectLeaders. Otherwise no change (ELIGIBLE_LEADERS_NOT_AVAILABLE)."
    ),
}

STRATEGY_NAMES: Mapping[Election, str] = {
    Election.PREFERRED: "PreferredReplicaPartitionLeaderElectionStrategy",
    Election.UNCLEAN: "OfflinePartitionLeaderElectionStrategy(true)",
}
"""How Kafka's controller names the strategy in a failed election's message."""


def elect_leader(
    strategy: Election,
    replicas: Sequence[int],
    isr: Sequence[int],
    live: Set[int],
    shutting_down: Set[int],
    *,
    unclean: bool = False,
) -> tuple[int, tuple[int, ...]] | None:
    """Kafka's ``Election``: the new (leader, ISR) or None. ``live`` excludes shutting-down brokers.

    For PREFERRED, ``replicas`` must be the whole assignment: only its first replica may be chosen."""
    if strategy is Election.PREFERRED:
        first = replicas[0] if replicas else NO_LEADER
        return (first, tuple(isr)) if first in live and first in isr else None
    if strategy is Election.UNCLEAN:
        strategy, unclean = Election.OFFLINE, True
    for r in replicas:
        if r in live and r in isr:
            if strategy is Election.OFFLINE:
                return r, tuple(b for b in isr if b in live)
            return r, tuple(b for b in isr if b not in shutting_down)
    if strategy is Election.OFFLINE and unclean:
        for r in replicas:
            if r in live:
                return r, (r,)
    return None


def remove_from_isr(leader: int, isr: tuple[int, ...], replica: int) -> tuple[int, tuple[int, ...]]:
    """Kafka's OfflineReplica transition: no leader if it led; out of the ISR unless it is the last member."""
    new_leader = NO_LEADER if leader == replica else leader
    new_isr = isr if len(isr) == 1 else tuple(b for b in isr if b != replica)
    return new_leader, new_isr


class ReplicationControl:
    """Leaders and ISRs as brokers come, go, fail a log dir, shut down, or change an ISR."""

    def __init__(self, state: ControllerState) -> None:
        self.state = state

    # --- elections --------------------------------------------------------------------------------

    def elect(self, change: PartitionChangeBuilder, tp: TopicPartition, strategy: Election) -> bool:
        state = change.view(tp)
        assert state is not None
        cache = self.state
        assignment = change.replicas_of(tp)
        if strategy is Election.PREFERRED:
            online = {r for r in assignment[:1] if cache.replica_online(r, tp)}
            chosen = elect_leader(strategy, assignment, state.isr, online, cache.shutting_down)
        else:
            replicas = [r for r in assignment if not cache.replica_offline(r, tp)]
            chosen = elect_leader(strategy, replicas, state.isr, cache.eligible(), cache.shutting_down,
                                  unclean=cache.unclean(tp.topic))
        if chosen is None:
            return False
        new = change.stage(tp, chosen[0], chosen[1])
        if chosen[0] not in state.isr:
            change.warnings.append(
                f"Unclean leader election for partition {tp.topic}-{tp.partition}: broker {chosen[0]} leads at leader "
                f"epoch {new.leader_epoch} though it was not in the ISR {list(state.isr)}; records above its log end "
                f"offset that the ISR held are lost, and the other replicas truncate to it")
        return True

    def elect_requested(self, change: PartitionChangeBuilder, tp: TopicPartition,
                        kind: ElectionType) -> ElectionResult:
        """One partition of ElectLeaders, as Kafka's processReplicaLeaderElection decides it: unknown,
        being deleted, already led as asked (ELECTION_NOT_NEEDED), elected, or no eligible replica."""
        cache = self.state

        def answer(code: ErrorCode, message: str | None = None, leader: int = NO_LEADER) -> ElectionResult:
            return ElectionResult(tp.topic, tp.partition, code, message, leader)

        if not cache.exists(tp):
            return answer(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
        if change.leaving(tp.topic):
            return answer(ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted")
        strategy = Election.PREFERRED if kind is ElectionType.PREFERRED else Election.UNCLEAN
        failed = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE if kind is ElectionType.PREFERRED
                  else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)
        state = change.view(tp)
        if state is None:
            return answer(failed, f"LeaderAndIsr information doesn't exist for partition {tp.topic}-{tp.partition} "
                                  "in NewPartition state")
        if kind is ElectionType.PREFERRED:
            needed = state.leader != change.replicas_of(tp)[0]
        else:
            needed = state.leader == NO_LEADER or state.leader not in cache.live
        if not needed:
            return answer(ErrorCode.ELECTION_NOT_NEEDED)
        if not self.elect(change, tp, strategy):
            return answer(failed, f"Failed to elect leader for partition {tp.topic}-{tp.partition} under strategy "
                                  f"{STRATEGY_NAMES[strategy]}")
        elected = change.view(tp)
        assert elected is not None
        return answer(ErrorCode.NONE, leader=elected.leader)

    def on_elect_leaders(self, event: ElectLeadersRequested) -> PartitionChangeBuilder:
        change = PartitionChangeBuilder(self.state)
        if event.partitions is None:
            wanted = [tp for tp in change.active_partitions() if self.state.exists(tp)]
        else:
            wanted = list(dict.fromkeys(TopicPartition(t, p) for t, p in event.partitions))  # a set in Kafka
        results = tuple(self.elect_requested(change, tp, event.election_type) for tp in wanted)
        change.response = ElectLeadersResponse(ErrorCode.NONE, results)
        return change

    def elect_preferred_from_znode(self, change: PartitionChangeBuilder, partitions: Set[TopicPartition]) -> None:
        """``/admin/preferred_replica_election`` (Kafka's ZkTriggered election): elect the partitions it
        names that exist, are not being deleted and are not led by their preferred replica yet; then
        delete the znode, whatever the outcome."""
        for tp in sorted(partitions):
            if self.state.exists(tp) and not change.leaving(tp.topic) and change.view(tp) is not None:
                self.elect_requested(change, tp, ElectionType.PREFERRED)
                change.flush(tp)                # the elections are written before the znode goes
        change.write(ZkOp.DELETE, PATHS.PREFERRED_REPLICA_ELECTION, None, PreferredElectionRemoved())

    def on_preferred_election_requested(self, event: PreferredElectionRequested) -> PartitionChangeBuilder:
        change = PartitionChangeBuilder(self.state)
        self.elect_preferred_from_znode(change, {TopicPartition(t, p) for t, p in event.partitions})
        return change

    def _led_elsewhere(self) -> dict[int, tuple[int, list[TopicPartition]]]:
        """Per preferred replica: the number of partitions it should lead, and those of them led by
        another broker. Topics being deleted are left out; a partition without a state counts in the
        number only."""
        cache = self.state
        totals: dict[int, int] = {}
        off: dict[int, list[TopicPartition]] = {}
        for name, topic in cache.topics.items():
            if name in cache.deleting:
                continue
            for p, a in topic.partitions.items():
                preferred = a.replicas[0]
                totals[preferred] = totals.get(preferred, 0) + 1
                tp = TopicPartition(name, p)
                state = cache.states.get(tp)
                if state is not None and state.leader != preferred:
                    off.setdefault(preferred, []).append(tp)
        return {broker: (total, off.get(broker, [])) for broker, total in totals.items()}

    def preferred_imbalance(self) -> dict[int, tuple[int, int]]:
        """Per preferred replica: (partitions it should lead, of those led by another broker)."""
        return {broker: (total, len(off)) for broker, (total, off) in self._led_elsewhere().items()}

    def on_auto_rebalance(self, event: AutoRebalanceCheck) -> PartitionChangeBuilder | ControllerResult:
        """Kafka's checkAndTriggerAutoLeaderRebalance: for each broker whose share of partitions led by
        another broker exceeds ``leader.imbalance.per.broker.percentage``, a preferred election for
        those partitions whose preferred replica can lead (online, in the ISR). Partitions being
        reassigned are left alone: their leader follows the reassignment."""
        cache = self.state
        if not cache.auto_rebalance():
            return ControllerResult()
        change = PartitionChangeBuilder(cache)
        threshold = cache.imbalance_percentage() / 100
        for _broker, (total, off) in sorted(self._led_elsewhere().items()):
            if len(off) / total <= threshold:
                continue
            for tp in sorted(off):
                if not change.assignment(tp).is_being_reassigned:
                    self.elect(change, tp, Election.PREFERRED)
        return change

    def fail_replicas(self, change: PartitionChangeBuilder, tp: TopicPartition, dead: Set[int]) -> None:
        """Replicas on ``dead`` brokers went offline: elect if the leader is among them, then drop them from the ISR."""
        state = change.view(tp)
        assert state is not None
        if state.leader in dead:
            self.elect(change, tp, Election.OFFLINE)
        for b in sorted(dead):
            state = change.view(tp)
            assert state is not None
            if b == state.leader or b in state.isr:
                leader, isr = remove_from_isr(state.leader, state.isr, b)
                change.stage(tp, leader, isr)

    def trigger_online(self, change: PartitionChangeBuilder) -> None:
        """Kafka's triggerOnlinePartitionStateChange: NEW and OFFLINE partitions get a leader if they can."""
        cache = self.state
        for name in sorted(cache.topics):
            if change.leaving(name):
                continue
            for p, a in sorted(cache.topics[name].partitions.items()):
                tp = TopicPartition(name, p)
                state = change.view(tp)
                if state is None:
                    change.create_state(tp, a.replicas)
                elif state.leader not in cache.live:
                    self.elect(change, tp, Election.OFFLINE)

    def drop_unregistered(self, change: PartitionChangeBuilder) -> None:
        """Failover: replicas on brokers that are not registered leave their ISRs (and their leadership)."""
        live = self.state.live
        for tp in change.active_partitions():
            state = self.state.states[tp]
            dead = {b for b in (*state.isr, state.leader) if b != NO_LEADER and b not in live}
            if dead:
                self.fail_replicas(change, tp, dead)

    def _fail_brokers(self, change: PartitionChangeBuilder, dead: Set[int]) -> None:
        for tp in change.active_partitions():
            if tp not in self.state.states:
                continue
            state = change.view(tp)
            assert state is not None
            hit = {b for b in dead if b == state.leader or b in state.isr}
            if hit:
                self.fail_replicas(change, tp, hit)
        self.trigger_online(change)

    # --- brokers ------------------------------------------------------------------------------------

    def register(self, change: PartitionChangeBuilder, event: BrokerRegistered) -> bool:
        """Take in a registration; True if it is a new incarnation (a bounce fails the previous one first).

        A new incarnation gets a LeaderAndIsr for its replicas, and offline partitions are elected."""
        reg = LiveBroker(event.broker_id, event.broker_epoch, event.info)
        known = self.state.live.get(event.broker_id)
        if known is not None and known.broker_epoch == event.broker_epoch:
            self.state.observe(BrokerUp(reg))       # listeners changed; same incarnation
            return False
        if known is not None:                       # bounced: its previous incarnation failed
            self.state.observe(BrokerDown(event.broker_id))
            self._fail_brokers(change, {event.broker_id})
        self.state.observe(BrokerUp(reg))
        for tp in change.active_partitions():
            if event.broker_id in change.replicas_of(tp):
                change.lai.setdefault(event.broker_id, {}).setdefault(tp, False)
        self.trigger_online(change)
        return True

    def on_broker_expired(self, event: BrokerExpired) -> PartitionChangeBuilder | ControllerResult:
        if event.broker_id not in self.state.live:
            return ControllerResult()
        self.state.observe(BrokerDown(event.broker_id))
        change = PartitionChangeBuilder(self.state)
        self._fail_brokers(change, {event.broker_id})
        change.um_brokers = True
        return change

    def on_log_dir_failed(self, event: LogDirFailed) -> PartitionChangeBuilder:
        change = PartitionChangeBuilder(self.state)
        if event.broker_id in self.state.live:
            for tp in change.active_partitions():
                if event.broker_id in change.replicas_of(tp):
                    change.lai.setdefault(event.broker_id, {}).setdefault(tp, False)
        return change

    def on_replicas_offline(self, event: ReplicasOffline) -> PartitionChangeBuilder | ControllerResult:
        b = event.broker_id
        cache = self.state
        if b not in cache.live:
            return ControllerResult()  # it restarted or left meanwhile: what it reported is stale
        change = PartitionChangeBuilder(cache)
        for tp in event.partitions:
            if cache.replica_offline(b, tp) or tp not in cache.states or tp.topic in cache.deleting:
                continue
            cache.observe(ReplicaOffline(b, tp))
            state = change.view(tp)
            assert state is not None
            if b == state.leader or b in state.isr:
                self.fail_replicas(change, tp, {b})
            change.um.add(tp)
        return change

    def on_controlled_shutdown(self, event: ControlledShutdownRequested) -> PartitionChangeBuilder | ControllerResult:
        reg = self.state.live.get(event.broker_id)
        if reg is None:
            return ControllerResult(response=ControlledShutdownResponse(ErrorCode.BROKER_NOT_AVAILABLE))
        if event.broker_epoch != -1 and event.broker_epoch != reg.broker_epoch:
            return ControllerResult(response=ControlledShutdownResponse(ErrorCode.STALE_BROKER_EPOCH))
        self.state.observe(ShutdownStarted(event.broker_id))
        change = PartitionChangeBuilder(self.state)
        replicas_of = self.state.replicas_of
        mine = [tp for tp in change.active_partitions()
                if event.broker_id in replicas_of(tp) and len(replicas_of(tp)) > 1]
        for tp in mine:
            state = change.view(tp)
            assert state is not None
            if state.leader == event.broker_id:
                self.elect(change, tp, Election.CONTROLLED_SHUTDOWN)
                continue
            if event.broker_id in state.isr:
                leader, isr = remove_from_isr(state.leader, state.isr, event.broker_id)
                state = change.stage(tp, leader, isr)
            change.stop.setdefault(event.broker_id, {})[tp] = StopReplicaPartition(
                tp.topic, tp.partition, state.leader_epoch, False)
        remaining = []
        for tp in mine:
            state = change.view(tp)
            if state is not None and state.leader == event.broker_id:
                remaining.append(tp)
        change.response = ControlledShutdownResponse(ErrorCode.NONE, tuple(remaining))
        return change

    # --- AlterPartition -----------------------------------------------------------------------------

    def on_alter_partition(self, event: AlterPartitionReceived) -> PartitionChangeBuilder | ControllerResult:
        """The leader's ISR changes, each checked on its own; the response lists every item's outcome."""
        reg = self.state.live.get(event.broker_id)
        if reg is None or reg.broker_epoch != event.broker_epoch:
            return ControllerResult(response=AlterPartitionResponse(ErrorCode.STALE_BROKER_EPOCH))
        change = PartitionChangeBuilder(self.state)
        results = [self._alter_one(change, event.broker_id, item) for item in event.partitions]
        change.response = AlterPartitionResponse(ErrorCode.NONE, tuple(results))
        return change

    def _alter_one(self, change: PartitionChangeBuilder, broker_id: int, item: AlterPartitionItem) -> AlterPartitionResult:
        tp = item.tp
        cache = self.state

        def fail(code: ErrorCode) -> AlterPartitionResult:
            return AlterPartitionResult(tp.topic, tp.partition, code)

        if tp.topic in cache.deleting or cache.phase(tp) in (PartitionPhase.NON_EXISTENT, PartitionPhase.NEW):
            return fail(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        cur = change.view(tp)
        assert cur is not None
        if item.leader_epoch > cur.leader_epoch:
            return fail(ErrorCode.NOT_CONTROLLER)
        if item.leader_epoch < cur.leader_epoch:
            return fail(ErrorCode.FENCED_LEADER_EPOCH)
        if cur.leader != broker_id:
            return fail(ErrorCode.NOT_LEADER_OR_FOLLOWER)

        def ok(st: LeaderIsr) -> AlterPartitionResult:
            return AlterPartitionResult(tp.topic, tp.partition, ErrorCode.NONE, st.leader, st.leader_epoch, st.isr,
                                        st.partition_epoch)

        if item.new_isr == cur.isr and item.leader_recovery_state == 0:
            return ok(cur)                          # a retry of a change already made
        if item.partition_epoch != cur.partition_epoch:
            return fail(ErrorCode.INVALID_UPDATE_VERSION)
        new_isr = item.new_isr
        if (not new_isr or broker_id not in new_isr or len(set(new_isr)) != len(new_isr)
                or (item.leader_recovery_state == 1 and len(new_isr) > 1)):
            return fail(ErrorCode.INVALID_REQUEST)
        replicas = cache.replicas_of(tp)
        for b in new_isr:
            added = b not in cur.isr
            if b not in replicas or b not in cache.live or (added and b in cache.shutting_down):
                return fail(ErrorCode.INELIGIBLE_REPLICA)
        return ok(change.stage(tp, cur.leader, new_isr, notify=False, bump_leader_epoch=False))
