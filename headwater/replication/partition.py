"""One partition's replication state on one broker: role, ISR, follower progress, high watermark.

Sans-IO: every method takes the time it needs (``now_ms``) and the log values it needs, changes only
this object, and returns frozen effects for the server shell to carry out (set the high watermark on the
log, send an AlterPartition, record an epoch start, answer a fetch). Nothing here touches a file, a
socket or the clock. Kafka's ``kafka.cluster.Partition`` and ``Replica`` are the model; names of the
Kafka methods each rule comes from are given beside it.

Roles (``apply_leader_and_isr`` decides, ZooKeeper-mode rules from ``ReplicaManager.becomeLeaderOrFollower``):
- A LeaderAndIsr is applied only when its leader epoch is above the current one; an equal or lower epoch
  is answered with STALE_CONTROLLER_EPOCH and changes nothing. A state that does not list this broker
  among its replicas gets UNKNOWN_TOPIC_OR_PARTITION. A leader state whose ISR lacks the leader is
  INVALID_REQUEST (the controller never sends one, and the rules below need the leader in its ISR).
- Becoming leader with a new epoch records (epoch, log end offset) as the epoch's start
  (``maybeAssignEpochStartOffset``): a follower whose log holds a later, abandoned epoch can then
  still find where it diverges.
- When this broker was not leader before, every follower's progress is reset to unknown; a re-elected
  leader keeps the followers' log end offsets (``Replica.resetReplicaState``). Either way a follower in
  the new ISR counts as caught up "now", the others as never caught up.
- Becoming follower (or stopping) drops the leader-side state; acks=all produces still waiting must
  fail with NOT_LEADER_OR_FOLLOWER (``completeDelayedOperationsWhenNotPartitionLeader``).

Leader rules:
- Follower progress (``Replica.updateFetchStateOrThrow``): a fetch at offset ``o`` says the follower's
  log ends at ``o``. Its last caught-up time becomes the fetch time if ``o`` reaches the leader's log
  end offset, else the previous fetch time if ``o`` reaches the leader's log end offset as it was at the
  previous fetch, else stays. So a follower chasing a busy leader still counts as caught up.
- A fetch that reveals a divergence (``last_fetched_epoch`` ends earlier on the leader, or before the
  fetch offset) gets the diverging epoch and does not update progress (``Partition.readRecords``).
- ISR shrink (``maybeShrinkIsr``), checked periodically: an ISR follower whose log end offset differs
  from the leader's and that has not been caught up within ``replica.lag.time.max.ms`` is dropped.
- ISR expansion (``maybeExpandIsr``), checked on each follower fetch: a replica of the assignment
  (an adding replica too) joins when its log end offset reaches both the high watermark and the start
  offset of the leader's epoch (``isFollowerInSync``), and it is eligible (``set_isr_eligible``; ZK: alive).
- One ISR change is in flight at a time, and none is proposed while one is. While an expansion is
  pending, the high watermark and acks=all use the "maximal ISR" (the ISR plus the joining replica,
  KIP-497): assuming the larger set is only stricter, so it is safe if the change fails. A pending
  shrink uses the current ISR, as the change may still fail.
- High watermark (``maybeIncrementLeaderHW``): the smallest log end offset among the maximal ISR and
  the replicas that are caught up and eligible but not yet in it (so a catching-up follower is not
  outrun forever), capped by the leader's log end offset. It only moves up. It does not move while the
  ISR is smaller than min(min.insync.replicas, replicas) (KAFKA-15583, Kafka 3.7).
- acks=all (``appendRecordsToLeader``, ``checkEnoughReplicasReachOffset``): refused with
  NOT_ENOUGH_REPLICAS before the append when the ISR is smaller than the effective min ISR; once the
  high watermark reaches the batch's end it succeeds, or gives NOT_ENOUGH_REPLICAS_AFTER_APPEND if the
  maximal ISR shrank below the effective min ISR meanwhile.
- AlterPartition answers (``handleAlterPartitionUpdate`` / ``handleAlterPartitionError``): an answer to
  a request that is no longer the pending one is ignored. Success with our leader epoch and a partition
  epoch not below ours commits the returned ISR and epoch. INELIGIBLE_REPLICA and
  OPERATION_NOT_ATTEMPTED (the controller says nothing was written) return to the committed state.
  FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID,
  INVALID_REQUEST and NEW_LEADER_ELECTED leave the change pending until the next LeaderAndIsr. Any
  other error is retried with the same request.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import Enum

from headwater.protocol.errors import ErrorCode
from headwater.replication.follower import FollowerFetcher
from headwater.replication.types import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    UNKNOWN_OFFSET,
    EpochEndOffset,
    EpochLookup,
    EpochStart,
    HighWatermarkUpdate,
)
from headwater.values import value

DEFAULT_REPLICA_LAG_TIME_MAX_MS = 30_000
DEFAULT_REPLICA_FETCH_BACKOFF_MS = 1_000

# AlterPartition errors after which the leader waits for a LeaderAndIsr instead of retrying.
_AWAIT_METADATA_ERRORS = frozenset(
    {
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.INVALID_UPDATE_VERSION,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.NEW_LEADER_ELECTED,
    }
)
# AlterPartition errors that say the request was not applied: go back to the committed ISR.
_NOT_APPLIED_ERRORS = frozenset({ErrorCode.INELIGIBLE_REPLICA, ErrorCode.OPERATION_NOT_ATTEMPTED})


class Role(Enum):
    NONE = "none"
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass(frozen=True)
class LeaderAndIsrState:
    """The LeaderAndIsrPartitionState fields a broker acts on (reference §2.1)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    is_new: bool = False


@value
class ReplicaProgress:
    """What the leader knows of one follower (Kafka's ``ReplicaState``). Times are ``None`` for never."""

    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int | None = None
    last_caught_up_time_ms: int | None = None
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    broker_epoch: int = -1

    def is_caught_up(self, leader_log_end_offset: int, now_ms: int, lag_time_max_ms: int) -> bool:
        return self.log_end_offset == leader_log_end_offset or (
            self.last_caught_up_time_ms is not None and now_ms - self.last_caught_up_time_ms <= lag_time_max_ms
        )

    def after_fetch(
        self, fetch_offset: int, log_start_offset: int, now_ms: int, leader_log_end_offset: int, broker_epoch: int
    ) -> ReplicaProgress:
        caught_up = self.last_caught_up_time_ms
        if fetch_offset >= leader_log_end_offset:
            caught_up = now_ms if caught_up is None else max(caught_up, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset and self.last_fetch_time_ms is not None:
            # It reached what the leader had when it last fetched: it was caught up back then.
            prev = self.last_fetch_time_ms
            caught_up = prev if caught_up is None else max(caught_up, prev)
        return ReplicaProgress(
            log_end_offset=fetch_offset,
            log_start_offset=log_start_offset,
            last_fetch_time_ms=now_ms,
            last_caught_up_time_ms=caught_up,
            last_fetch_leader_log_end_offset=max(leader_log_end_offset, self.last_fetch_leader_log_end_offset),
            broker_epoch=broker_epoch,
        )


@dataclass(frozen=True)
class AlterPartitionProposal:
    """An AlterPartition partition entry to send to the controller (reference §2.5)."""

    topic: str
    partition: int
    leader_id: int
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int
    leader_recovery_state: int = 0
    proposal_id: int = 0  # tells an answer to this request from one to an earlier, equal-looking request


@dataclass(frozen=True)
class AlterPartitionResponse:
    """A partition's AlterPartition answer; a top-level error goes in ``error`` too."""

    error: ErrorCode
    leader_id: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


@dataclass(frozen=True)
class AlterPartitionOutcome:
    committed: bool = False
    retry: AlterPartitionProposal | None = None  # resend after the shell's retry backoff
    high_watermark: HighWatermarkUpdate | None = None


@dataclass(frozen=True)
class PendingIsrChange:
    proposal: AlterPartitionProposal
    committed_isr: tuple[int, ...]
    joining: int | None  # the replica an expansion adds; None for a shrink

    @property
    def maximal_isr(self) -> frozenset[int]:
        extra = () if self.joining is None else (self.joining,)
        return frozenset((*self.committed_isr, *extra))


@dataclass(frozen=True)
class LeaderAndIsrOutcome:
    error: ErrorCode
    role: Role
    new_leader_epoch: bool = False
    assign_epoch: EpochStart | None = None  # leader: record in the log's leader-epoch cache first
    high_watermark: HighWatermarkUpdate | None = None
    start_fetcher: bool = False  # follower: (re)start fetching from ``replica.fetcher`` (new leader or epoch)
    stop_fetcher: bool = False  # no longer a follower: stop fetching for this partition
    fail_pending_acks: bool = False  # not leader any more: fail waiting acks=all with NOT_LEADER_OR_FOLLOWER


@value
class FollowerFetch:
    """A Fetch partition entry from a replica (``replica_id >= 0``)."""

    replica_id: int
    current_leader_epoch: int  # -1 when the request version has none
    fetch_offset: int
    last_fetched_epoch: int  # -1 when absent
    log_start_offset: int = UNKNOWN_OFFSET
    replica_epoch: int = -1  # the fetching broker's epoch (ReplicaState v15+); -1 = not checked


@value
class FetchDecision:
    """How the leader answers one follower fetch; read records only when ``read_records``."""

    error: ErrorCode = ErrorCode.NONE
    diverging_epoch: EpochEndOffset | None = None
    high_watermark: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    in_sync: bool = False  # a committed ISR member: leader-side replication throttles skip it
    high_watermark_update: HighWatermarkUpdate | None = None
    alter_partition: AlterPartitionProposal | None = None

    @property
    def read_records(self) -> bool:
        return self.error == ErrorCode.NONE and self.diverging_epoch is None


@value
class AckCheck:
    """Whether an acks=all produce ending before ``required_offset`` can be answered, and with what."""

    done: bool
    error: ErrorCode = ErrorCode.NONE


@dataclass
class _LeaderState:
    epoch_start_offset: int
    log_end_offset: int
    # When leadership came here from another broker (this replica was a follower); kept through
    # later epochs of the same leader, None when it led from the start.
    took_over_ms: int | None = None
    followers: dict[int, ReplicaProgress] = field(default_factory=dict)
    pending: PendingIsrChange | None = None


class PartitionReplica:
    """Replication state of ``topic``-``partition`` on broker ``broker_id``. See the module rules."""

    def __init__(
        self,
        topic: str,
        partition: int,
        broker_id: int,
        *,
        replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
        min_insync_replicas: int = 1,
        replica_fetch_backoff_ms: int = DEFAULT_REPLICA_FETCH_BACKOFF_MS,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.broker_id = broker_id
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.replica_fetch_backoff_ms = replica_fetch_backoff_ms
        self._min_insync_replicas = min_insync_replicas
        self._role = Role.NONE
        self._leader_id = -1
        self._leader_epoch = UNDEFINED_EPOCH
        self._partition_epoch = -1
        self._replicas: tuple[int, ...] = ()
        self._adding: tuple[int, ...] = ()
        self._removing: tuple[int, ...] = ()
        self._isr: tuple[int, ...] = ()
        self._high_watermark = 0
        self._eligible: frozenset[int] | None = None  # None: every replica may join the ISR
        self._leader: _LeaderState | None = None
        self._proposals = 0
        self.fetcher: FollowerFetcher | None = None

    # ---- read-only view ----------------------------------------------------------------------------

    @property
    def role(self) -> Role:
        return self._role

    @property
    def is_leader(self) -> bool:
        return self._role is Role.LEADER

    @property
    def leader_id(self) -> int:
        return self._leader_id

    @property
    def leader_epoch(self) -> int:
        return self._leader_epoch

    @property
    def partition_epoch(self) -> int:
        return self._partition_epoch

    @property
    def replicas(self) -> tuple[int, ...]:
        return self._replicas

    @property
    def adding_replicas(self) -> tuple[int, ...]:
        return self._adding

    @property
    def removing_replicas(self) -> tuple[int, ...]:
        return self._removing

    @property
    def isr(self) -> tuple[int, ...]:
        """The committed ISR (leader only; empty otherwise, as in Kafka's ``makeFollower``)."""
        return self._isr

    @property
    def maximal_isr(self) -> frozenset[int]:
        ls = self._leader
        if ls is not None and ls.pending is not None:
            return ls.pending.maximal_isr
        return frozenset(self._isr)

    @property
    def pending_alter_partition(self) -> AlterPartitionProposal | None:
        ls = self._leader
        return ls.pending.proposal if ls is not None and ls.pending is not None else None

    @property
    def high_watermark(self) -> int:
        if self._role is Role.FOLLOWER and self.fetcher is not None:
            return self.fetcher.high_watermark
        return self._high_watermark

    @property
    def log_end_offset(self) -> int:
        """The leader's log end offset as last reported to this object (leader only)."""
        return self._leader.log_end_offset if self._leader is not None else UNKNOWN_OFFSET

    @property
    def leader_epoch_start_offset(self) -> int | None:
        return self._leader.epoch_start_offset if self._leader is not None else None

    @property
    def took_over_ms(self) -> int | None:
        """When leadership came to this broker from another one (leader only; None if it never did)."""
        return self._leader.took_over_ms if self._leader is not None else None

    @property
    def min_insync_replicas(self) -> int:
        return self._min_insync_replicas

    @property
    def effective_min_isr(self) -> int:
        """min.insync.replicas capped by the replica count (Kafka's ``effectiveMinIsr``)."""
        return min(self._min_insync_replicas, len(set(self._replicas) | {self.broker_id}))

    def progress(self, replica_id: int) -> ReplicaProgress | None:
        return self._leader.followers.get(replica_id) if self._leader is not None else None

    def isr_follower_lag_ms(self, now_ms: int) -> int | None:
        """How far behind the most lagging in-sync follower is, in ms: 0 if it holds the leader's
        whole log, else the time since it was last caught up, the figure Kafka's ISR shrink compares
        with ``replica.lag.time.max.ms`` (``getOutOfSyncReplicas``). ``None`` when this broker does
        not lead or no other replica is in sync. For the adaptive reassignment throttle."""
        ls = self._leader
        if ls is None:
            return None
        worst: int | None = None
        for rid in self._isr:
            p = ls.followers.get(rid)
            if rid == self.broker_id or p is None:
                continue
            caught_up = p.last_caught_up_time_ms
            lag = 0 if p.log_end_offset >= ls.log_end_offset else now_ms - (caught_up if caught_up is not None else now_ms)
            worst = lag if worst is None else max(worst, lag)
        return worst

    def is_in_sync(self, replica_id: int) -> bool:
        return self._role is Role.LEADER and replica_id in self._isr

    # ---- client request checks -------------------------------------------------------------------

    def check_leader_epoch(self, current_leader_epoch: int, *, require_leader: bool = True) -> ErrorCode:
        """The error for a client or replica request at ``current_leader_epoch`` (-1: no check)."""
        if current_leader_epoch >= 0:
            if current_leader_epoch < self._leader_epoch:
                return ErrorCode.FENCED_LEADER_EPOCH
            if current_leader_epoch > self._leader_epoch:
                return ErrorCode.UNKNOWN_LEADER_EPOCH
        if require_leader and self._role is not Role.LEADER:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if not require_leader and self._role is Role.NONE:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.NONE

    def check_append(self, acks: int, current_leader_epoch: int = -1) -> ErrorCode:
        """Before a leader append: NOT_LEADER_OR_FOLLOWER, epoch errors, or NOT_ENOUGH_REPLICAS for acks=all."""
        error = self.check_leader_epoch(current_leader_epoch)
        if error != ErrorCode.NONE:
            return error
        if acks == -1 and len(self._isr) < self.effective_min_isr:
            return ErrorCode.NOT_ENOUGH_REPLICAS
        return ErrorCode.NONE

    def ack_check(self, required_offset: int) -> AckCheck:
        """Whether an acks=all produce whose last offset is ``required_offset - 1`` is complete."""
        if self._role is not Role.LEADER:
            return AckCheck(True, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if self._high_watermark < required_offset:
            return AckCheck(False)
        return AckCheck(True, self.ack_error())

    def ack_error(self) -> ErrorCode:
        """The error of an acks=all produce that the high watermark has just passed."""
        if self._role is not Role.LEADER:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if len(self.maximal_isr) < self.effective_min_isr:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    # ---- LeaderAndIsr / StopReplica ----------------------------------------------------------------

    def apply_leader_and_isr(
        self,
        state: LeaderAndIsrState,
        *,
        log_end_offset: int,
        latest_epoch: int | None,
        high_watermark: int,
        now_ms: int,
    ) -> LeaderAndIsrOutcome:
        """Apply a LeaderAndIsr partition state; ``log_*`` and ``high_watermark`` describe the local log."""
        if state.leader_epoch <= self._leader_epoch:
            return LeaderAndIsrOutcome(ErrorCode.STALE_CONTROLLER_EPOCH, self._role)
        if self.broker_id not in state.replicas:
            return LeaderAndIsrOutcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, self._role)
        if state.leader == self.broker_id:
            if self.broker_id not in state.isr:
                return LeaderAndIsrOutcome(ErrorCode.INVALID_REQUEST, self._role)
            return self._become_leader(state, log_end_offset, high_watermark, now_ms)
        return self._become_follower(state, log_end_offset, latest_epoch, high_watermark)

    def _set_assignment(self, state: LeaderAndIsrState) -> None:
        self._leader_id = state.leader
        self._leader_epoch = state.leader_epoch
        self._partition_epoch = state.partition_epoch
        self._replicas = tuple(state.replicas)
        self._adding = tuple(state.adding_replicas)
        self._removing = tuple(state.removing_replicas)

    def _become_leader(
        self, state: LeaderAndIsrState, log_end_offset: int, high_watermark: int, now_ms: int
    ) -> LeaderAndIsrOutcome:
        was_follower = self._role is Role.FOLLOWER
        previous = self._leader
        self._set_assignment(state)
        self._role = Role.LEADER
        self._isr = tuple(state.isr)
        self.fetcher = None
        followers: dict[int, ReplicaProgress] = {}
        for rid in self._replicas:
            if rid == self.broker_id:
                continue
            in_isr = rid in self._isr
            old = previous.followers.get(rid) if previous is not None else None
            if old is None:
                # A new leader knows nothing of its followers' logs (``resetReplicaState(isNewLeader)``).
                followers[rid] = ReplicaProgress(last_caught_up_time_ms=now_ms if in_isr else None)
            else:
                followers[rid] = replace(
                    old,
                    last_fetch_leader_log_end_offset=log_end_offset,
                    last_fetch_time_ms=now_ms if in_isr else None,
                    last_caught_up_time_ms=now_ms if in_isr else None,
                )
        self._leader = _LeaderState(epoch_start_offset=log_end_offset, log_end_offset=log_end_offset,
                                    took_over_ms=now_ms if was_follower else previous.took_over_ms if previous else None,
                                    followers=followers)
        self._high_watermark = max(0, min(high_watermark, log_end_offset))
        hw = self._maybe_increment_high_watermark(now_ms)
        return LeaderAndIsrOutcome(
            ErrorCode.NONE,
            Role.LEADER,
            new_leader_epoch=True,
            assign_epoch=EpochStart(state.leader_epoch, log_end_offset),
            high_watermark=hw,
            stop_fetcher=was_follower,
        )

    def _become_follower(
        self, state: LeaderAndIsrState, log_end_offset: int, latest_epoch: int | None, high_watermark: int
    ) -> LeaderAndIsrOutcome:
        was_leader = self._role is Role.LEADER
        self._set_assignment(state)
        self._role = Role.FOLLOWER
        self._isr = ()
        self._leader = None
        self._high_watermark = max(0, min(high_watermark, log_end_offset))
        if state.leader < 0:
            # No leader elected (offline partition): nothing to fetch from until the next LeaderAndIsr.
            self.fetcher = None
            return LeaderAndIsrOutcome(ErrorCode.NONE, Role.FOLLOWER, new_leader_epoch=True,
                                       stop_fetcher=True, fail_pending_acks=was_leader)
        previous = self.fetcher
        self.fetcher = FollowerFetcher(
            leader_id=state.leader,
            leader_epoch=state.leader_epoch,
            log_end_offset=log_end_offset,
            latest_epoch=latest_epoch,
            high_watermark=self._high_watermark,
            fetch_backoff_ms=self.replica_fetch_backoff_ms,
        )
        if previous is not None:
            self.fetcher.learn_leader_high_watermark(previous.leader_high_watermark)
        return LeaderAndIsrOutcome(
            ErrorCode.NONE, Role.FOLLOWER, new_leader_epoch=True, start_fetcher=True, fail_pending_acks=was_leader
        )

    def stop(self) -> LeaderAndIsrOutcome:
        """StopReplica: forget the role; the leader epoch is kept so older LeaderAndIsr stay fenced."""
        was_leader = self._role is Role.LEADER
        was_follower = self._role is Role.FOLLOWER
        self._role = Role.NONE
        self._leader = None
        self._isr = ()
        self.fetcher = None
        return LeaderAndIsrOutcome(ErrorCode.NONE, Role.NONE, stop_fetcher=was_follower,
                                   fail_pending_acks=was_leader)

    # ---- configuration -----------------------------------------------------------------------------

    def set_min_insync_replicas(self, value: int, now_ms: int) -> HighWatermarkUpdate | None:
        self._min_insync_replicas = value
        return self._maybe_increment_high_watermark(now_ms) if self._leader is not None else None

    def set_isr_eligible(self, broker_ids: Iterable[int] | None, now_ms: int) -> HighWatermarkUpdate | None:
        """Brokers that may join the ISR (ZooKeeper mode: the live brokers); None means all."""
        self._eligible = None if broker_ids is None else frozenset(broker_ids)
        return self._maybe_increment_high_watermark(now_ms) if self._leader is not None else None

    def _is_eligible(self, replica_id: int) -> bool:
        return self._eligible is None or replica_id in self._eligible

    # ---- leader: appends, fetches, ISR -------------------------------------------------------------

    def _require_leader(self) -> _LeaderState:
        if self._leader is None:
            raise ValueError(f"{self.topic}-{self.partition}: not the leader")
        return self._leader

    def on_local_append(self, log_end_offset: int, now_ms: int) -> HighWatermarkUpdate | None:
        """The leader's log grew to ``log_end_offset``; with an ISR of one the high watermark follows."""
        ls = self._require_leader()
        if log_end_offset < ls.log_end_offset:
            raise ValueError(f"a leader's log never shrinks: {log_end_offset} < {ls.log_end_offset}")
        ls.log_end_offset = log_end_offset
        return self._maybe_increment_high_watermark(now_ms)

    def on_follower_fetch(
        self,
        fetch: FollowerFetch,
        *,
        leader_log_start_offset: int,
        epoch_end_offset: EpochLookup,
        now_ms: int,
        update_state: bool = True,
    ) -> FetchDecision:
        """Validate a replica's fetch, update its progress, maybe propose an ISR expansion.

        ``epoch_end_offset`` is the leader log's epoch-cache lookup; it is called only when the fetch
        carries a last fetched epoch. ``update_state=False`` answers a fetch read again after its
        wait: the follower's progress was taken when it arrived (Partition.fetchRecords updates the
        follower's state only outside the purgatory).
        """
        error = self.check_leader_epoch(fetch.current_leader_epoch)
        if error != ErrorCode.NONE:
            return FetchDecision(error)
        ls = self._require_leader()
        if fetch.replica_id not in ls.followers:
            # Known epoch but unknown replica: the follower may be ahead of us (a reassignment
            # adding it), so it retries; without an epoch we cannot tell (``followerReplicaOrThrow``).
            code = ErrorCode.UNKNOWN_LEADER_EPOCH if fetch.current_leader_epoch >= 0 else ErrorCode.NOT_LEADER_OR_FOLLOWER
            return FetchDecision(code)
        hw, leo = self._high_watermark, ls.log_end_offset
        in_sync = fetch.replica_id in self._isr

        def answer(error: ErrorCode = ErrorCode.NONE, diverging: EpochEndOffset | None = None) -> FetchDecision:
            return FetchDecision(error, diverging, hw, leader_log_start_offset, in_sync)

        if fetch.last_fetched_epoch >= 0:
            epoch, end_offset = epoch_end_offset(fetch.last_fetched_epoch)
            if epoch == UNDEFINED_EPOCH or end_offset == UNDEFINED_EPOCH_OFFSET:
                return answer(ErrorCode.OFFSET_OUT_OF_RANGE)
            if fetch.fetch_offset < leader_log_start_offset:
                return answer(ErrorCode.OFFSET_OUT_OF_RANGE)
            if epoch < fetch.last_fetched_epoch or end_offset < fetch.fetch_offset:
                return answer(diverging=EpochEndOffset(epoch, end_offset))
        if not leader_log_start_offset <= fetch.fetch_offset <= leo:
            return answer(ErrorCode.OFFSET_OUT_OF_RANGE)
        if not update_state:
            return answer()

        ls.followers[fetch.replica_id] = ls.followers[fetch.replica_id].after_fetch(
            fetch.fetch_offset, fetch.log_start_offset, now_ms, leo, fetch.replica_epoch
        )
        proposal = self._maybe_expand_isr(fetch.replica_id)
        update = self._maybe_increment_high_watermark(now_ms)
        return FetchDecision(
            ErrorCode.NONE,
            None,
            self._high_watermark,
            leader_log_start_offset,
            in_sync,
            update,
            proposal,
        )

    def _maybe_expand_isr(self, replica_id: int) -> AlterPartitionProposal | None:
        ls = self._require_leader()
        if ls.pending is not None or replica_id in self._isr or not self._is_eligible(replica_id):
            return None
        leo = ls.followers[replica_id].log_end_offset
        if leo < self._high_watermark or leo < ls.epoch_start_offset:
            return None
        return self._propose(tuple(sorted((*self._isr, replica_id))), joining=replica_id)

    def check_isr(self, now_ms: int) -> AlterPartitionProposal | None:
        """The periodic shrink check (Kafka runs it every replica.lag.time.max.ms / 2)."""
        ls = self._leader
        if ls is None or ls.pending is not None:
            return None
        out = self.out_of_sync_replicas(now_ms)
        if not out:
            return None
        return self._propose(tuple(r for r in self._isr if r not in out), joining=None)

    def out_of_sync_replicas(self, now_ms: int) -> frozenset[int]:
        ls = self._leader
        if ls is None:
            return frozenset()
        out = set()
        for rid in self._isr:
            if rid == self.broker_id:
                continue
            p = ls.followers.get(rid)
            if p is None or not p.is_caught_up(ls.log_end_offset, now_ms, self.replica_lag_time_max_ms):
                out.add(rid)
        return frozenset(out)

    def _propose(self, new_isr: tuple[int, ...], joining: int | None) -> AlterPartitionProposal:
        ls = self._require_leader()
        self._proposals += 1
        proposal = AlterPartitionProposal(
            topic=self.topic,
            partition=self.partition,
            leader_id=self.broker_id,
            leader_epoch=self._leader_epoch,
            new_isr=new_isr,
            partition_epoch=self._partition_epoch,
            proposal_id=self._proposals,
        )
        ls.pending = PendingIsrChange(proposal, self._isr, joining)
        return proposal

    def on_alter_partition_response(
        self, proposal: AlterPartitionProposal, response: AlterPartitionResponse, now_ms: int
    ) -> AlterPartitionOutcome:
        ls = self._leader
        if ls is None or ls.pending is None or ls.pending.proposal != proposal:
            return AlterPartitionOutcome()  # superseded by a LeaderAndIsr or another change
        if response.error == ErrorCode.NONE:
            if response.leader_epoch != self._leader_epoch or response.partition_epoch < self._partition_epoch:
                # A stale answer; Kafka stays pending and waits for metadata.
                return AlterPartitionOutcome()
            self._isr = tuple(response.isr)
            self._partition_epoch = response.partition_epoch
            ls.pending = None
            return AlterPartitionOutcome(committed=True, high_watermark=self._maybe_increment_high_watermark(now_ms))
        if response.error in _NOT_APPLIED_ERRORS:
            ls.pending = None
            return AlterPartitionOutcome()
        if response.error in _AWAIT_METADATA_ERRORS:
            return AlterPartitionOutcome()
        return AlterPartitionOutcome(retry=proposal)

    def _maybe_increment_high_watermark(self, now_ms: int) -> HighWatermarkUpdate | None:
        ls = self._leader
        if ls is None or len(self._isr) < self.effective_min_isr:
            return None
        maximal = self.maximal_isr
        leo = ls.log_end_offset
        new_hw = leo
        for rid, p in ls.followers.items():
            if p.log_end_offset < new_hw and (
                rid in maximal
                or (p.is_caught_up(leo, now_ms, self.replica_lag_time_max_ms) and self._is_eligible(rid))
            ):
                new_hw = p.log_end_offset
        if new_hw <= self._high_watermark:
            return None
        old, self._high_watermark = self._high_watermark, new_hw
        return HighWatermarkUpdate(old, new_hw)

    # ---- invariants --------------------------------------------------------------------------------

    def validate_state(self) -> None:
        """Assert the module's invariants (tests call it after every step)."""
        assert self._high_watermark >= 0
        if self._role is Role.LEADER:
            ls = self._leader
            assert ls is not None and self.fetcher is None
            assert self._leader_id == self.broker_id
            assert self.broker_id in self._isr, "the ISR always holds the leader"
            assert set(self._isr) <= set(self._replicas), "the ISR is part of the assignment"
            assert self._high_watermark <= ls.log_end_offset
            assert ls.epoch_start_offset <= ls.log_end_offset
            assert set(ls.followers) == set(self._replicas) - {self.broker_id}
            if ls.pending is not None:
                pending = ls.pending
                assert pending.committed_isr == self._isr
                assert self.broker_id in pending.proposal.new_isr
                if pending.joining is not None:
                    assert pending.joining not in self._isr
                    assert set(pending.proposal.new_isr) == set(self._isr) | {pending.joining}
                else:
                    assert set(pending.proposal.new_isr) < set(self._isr)
        else:
            assert self._leader is None and self._isr == ()
            if self._role is Role.FOLLOWER and self.fetcher is not None:
                assert self.fetcher.current_leader_epoch == self._leader_epoch
                self.fetcher.validate_state()
            if self._role is Role.NONE:
                assert self.fetcher is None
