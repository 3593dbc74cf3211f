"""Leader-side rules of PartitionReplica: high watermark, ISR changes, AlterPartition, acks=all."""

from __future__ import annotations

from _replication_model import ModelLog

from headwater.protocol.errors import ErrorCode
from headwater.replication.partition import (
    AckCheck,
    AlterPartitionOutcome,
    AlterPartitionProposal,
    AlterPartitionResponse,
    FetchDecision,
    FollowerFetch,
    LeaderAndIsrState,
    PartitionReplica,
    Role,
)
from headwater.replication.types import EpochEndOffset, EpochStart, HighWatermarkUpdate

LAG_MS = 10_000
T0 = 1_000_000


def leader(
    *,
    isr: tuple[int, ...] = (1, 2, 3),
    replicas: tuple[int, ...] = (1, 2, 3),
    log: ModelLog | None = None,
    hw: int = 0,
    epoch: int = 1,
    partition_epoch: int = 0,
    min_isr: int = 1,
    now_ms: int = T0,
) -> tuple[PartitionReplica, ModelLog]:
    log = log if log is not None else ModelLog([0] * 10)
    r = PartitionReplica("t", 0, 1, replica_lag_time_max_ms=LAG_MS, min_insync_replicas=min_isr)
    out = r.apply_leader_and_isr(
        LeaderAndIsrState(1, epoch, isr, partition_epoch, replicas),
        log_end_offset=log.log_end_offset,
        latest_epoch=log.latest_epoch(),
        high_watermark=hw,
        now_ms=now_ms,
    )
    assert out.error == ErrorCode.NONE and out.role is Role.LEADER
    assert out.assign_epoch is not None
    log.assign_epoch(out.assign_epoch.epoch, out.assign_epoch.start_offset)
    if out.high_watermark is not None:
        log.high_watermark = out.high_watermark.new
    r.validate_state()
    return r, log


def fetch(r: PartitionReplica, log: ModelLog, replica: int, offset: int, now_ms: int, *,
          last_epoch: int = -1, leader_epoch: int | None = None, update_state: bool = True) -> FetchDecision:
    decision = r.on_follower_fetch(
        FollowerFetch(replica, r.leader_epoch if leader_epoch is None else leader_epoch, offset, last_epoch),
        leader_log_start_offset=log.log_start_offset,
        epoch_end_offset=log.end_offset_for_epoch,
        now_ms=now_ms,
        update_state=update_state,
    )
    r.validate_state()
    return decision


def append(r: PartitionReplica, log: ModelLog, n: int, now_ms: int) -> HighWatermarkUpdate | None:
    for _ in range(n):
        log.append(r.leader_epoch)
    update = r.on_local_append(log.log_end_offset, now_ms)
    r.validate_state()
    return update


def accept(r: PartitionReplica, proposal: AlterPartitionProposal, now_ms: int) -> AlterPartitionOutcome:
    out = r.on_alter_partition_response(
        proposal,
        AlterPartitionResponse(ErrorCode.NONE, proposal.leader_id, proposal.leader_epoch, proposal.new_isr,
                               proposal.partition_epoch + 1),
        now_ms,
    )
    r.validate_state()
    return out


# ---- LeaderAndIsr ----------------------------------------------------------------------------------


def test_become_leader_records_the_epoch_start_and_waits_for_followers() -> None:
    r, log = leader(hw=4, epoch=3)
    assert r.leader_epoch == 3 and r.leader_epoch_start_offset == 10
    assert log.epochs[-1] == (3, 10)
    # Followers' positions are unknown to a new leader: the high watermark stays at the checkpoint.
    assert r.high_watermark == 4
    assert r.progress(2) is not None and r.progress(2).log_end_offset == -1  # type: ignore[union-attr]


def test_an_isr_of_one_commits_at_once() -> None:
    r, log = leader(isr=(1,), hw=0)
    assert r.high_watermark == 10
    assert append(r, log, 3, T0) == HighWatermarkUpdate(10, 13)


def test_stale_or_foreign_leader_and_isr_changes_nothing() -> None:
    r, _log = leader(epoch=5)
    for epoch in (4, 5):
        out = r.apply_leader_and_isr(LeaderAndIsrState(2, epoch, (2,), 9, (1, 2, 3)), log_end_offset=10,
                                     latest_epoch=5, high_watermark=0, now_ms=T0)
        assert out.error == ErrorCode.STALE_CONTROLLER_EPOCH
    assert r.role is Role.LEADER and r.leader_epoch == 5
    out = r.apply_leader_and_isr(LeaderAndIsrState(2, 6, (2,), 9, (2, 3)), log_end_offset=10,
                                 latest_epoch=5, high_watermark=0, now_ms=T0)
    assert out.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    out = r.apply_leader_and_isr(LeaderAndIsrState(1, 6, (2,), 9, (1, 2)), log_end_offset=10,
                                 latest_epoch=5, high_watermark=0, now_ms=T0)
    assert out.error == ErrorCode.INVALID_REQUEST
    assert r.role is Role.LEADER and r.leader_epoch == 5
    r.validate_state()


def test_reelected_leader_keeps_follower_positions_a_new_one_forgets_them() -> None:
    r, log = leader()
    fetch(r, log, 2, 10, T0)
    out = r.apply_leader_and_isr(LeaderAndIsrState(1, 2, (1, 2, 3), 1, (1, 2, 3)), log_end_offset=10,
                                 latest_epoch=1, high_watermark=0, now_ms=T0 + 5)
    assert out.assign_epoch == EpochStart(2, 10) and not out.stop_fetcher
    assert r.progress(2).log_end_offset == 10  # type: ignore[union-attr]
    assert r.progress(2).last_caught_up_time_ms == T0 + 5  # type: ignore[union-attr]
    # Leader -> follower -> leader: a new leader starts from unknown positions.
    r.apply_leader_and_isr(LeaderAndIsrState(2, 3, (2, 3), 2, (1, 2, 3)), log_end_offset=10,
                           latest_epoch=2, high_watermark=0, now_ms=T0)
    out = r.apply_leader_and_isr(LeaderAndIsrState(1, 4, (1, 3), 3, (1, 2, 3)), log_end_offset=10,
                                 latest_epoch=2, high_watermark=0, now_ms=T0)
    assert out.stop_fetcher
    assert r.progress(2).log_end_offset == -1  # type: ignore[union-attr]
    assert r.progress(2).last_caught_up_time_ms is None  # type: ignore[union-attr]
    assert r.progress(3).last_caught_up_time_ms == T0  # type: ignore[union-attr]
    r.validate_state()


def test_becoming_follower_fails_waiting_acks_and_starts_fetching() -> None:
    r, _log = leader()
    out = r.apply_leader_and_isr(LeaderAndIsrState(2, 2, (2, 3), 1, (1, 2, 3)), log_end_offset=10,
                                 latest_epoch=1, high_watermark=3, now_ms=T0)
    assert out.role is Role.FOLLOWER and out.fail_pending_acks and out.start_fetcher
    assert r.isr == () and r.fetcher is not None
    assert r.fetcher.fetch_offset == 10 and r.fetcher.last_fetched_epoch == 1 and r.fetcher.leader_id == 2
    assert r.high_watermark == 3
    assert r.check_append(-1) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert r.ack_check(5).error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    r.validate_state()
    out = r.stop()
    assert out.role is Role.NONE and out.stop_fetcher and not out.fail_pending_acks
    r.validate_state()


# ---- high watermark --------------------------------------------------------------------------------


def test_high_watermark_is_the_smallest_isr_log_end_and_never_goes_back() -> None:
    r, log = leader()
    fetch(r, log, 2, 5, T0)
    assert r.high_watermark == 0  # replica 3 unknown yet
    d = fetch(r, log, 3, 8, T0)
    assert d.high_watermark_update == HighWatermarkUpdate(0, 5) and d.high_watermark == 5
    d = fetch(r, log, 2, 10, T0)
    assert d.high_watermark == 8
    # A follower reporting a lower position (say it restarted and lost its tail) cannot pull it back.
    d = fetch(r, log, 3, 3, T0)
    assert d.high_watermark_update is None and r.high_watermark == 8
    append(r, log, 5, T0)
    fetch(r, log, 3, 15, T0)
    assert r.high_watermark == 10
    fetch(r, log, 2, 15, T0)
    assert r.high_watermark == 15


def test_high_watermark_does_not_move_under_min_isr() -> None:
    r, log = leader(isr=(1,), min_isr=2, hw=10)
    assert append(r, log, 5, T0) is None and r.high_watermark == 10
    assert r.set_min_insync_replicas(1, T0) == HighWatermarkUpdate(10, 15)
    # The effective min ISR never exceeds the replica count.
    r2, _log2 = leader(isr=(1,), replicas=(1,), min_isr=3, hw=0)
    assert r2.effective_min_isr == 1 and r2.high_watermark == 10


def test_a_caught_up_follower_outside_the_isr_holds_the_high_watermark() -> None:
    r, log = leader(isr=(1,), replicas=(1, 2))
    d = fetch(r, log, 2, 10, T0)
    assert d.alter_partition is not None
    r.on_alter_partition_response(d.alter_partition, AlterPartitionResponse(ErrorCode.INELIGIBLE_REPLICA), T0)
    assert r.pending_alter_partition is None and r.isr == (1,)
    # Not in the ISR, but caught up a moment ago: the leader waits for it rather than outrun it.
    assert append(r, log, 10, T0 + 1) is None
    assert r.high_watermark == 10
    # Once it is no longer caught up, only the ISR counts.
    assert append(r, log, 1, T0 + LAG_MS + 1) == HighWatermarkUpdate(10, 21)


# ---- ISR expansion ---------------------------------------------------------------------------------


def test_follower_joins_the_isr_when_it_reaches_the_high_watermark() -> None:
    r, log = leader(isr=(1, 2), log=ModelLog([0] * 10), hw=10)
    fetch(r, log, 2, 10, T0)
    assert r.high_watermark == 10
    assert fetch(r, log, 3, 9, T0).alter_partition is None
    d = fetch(r, log, 3, 10, T0)
    assert d.alter_partition == AlterPartitionProposal("t", 0, 1, 1, (1, 2, 3), 0, proposal_id=1)
    assert r.isr == (1, 2) and r.maximal_isr == {1, 2, 3}
    out = accept(r, d.alter_partition, T0)
    assert out.committed and r.isr == (1, 2, 3) and r.partition_epoch == 1
    assert r.pending_alter_partition is None


def test_a_fetch_read_again_after_its_wait_leaves_the_follower_state_alone() -> None:
    # Kafka's Partition.fetchRecords updates a follower's fetch state only when the fetch arrives
    # (updateFetchState = !readFromPurgatory): the DelayedFetch's read at the end of the wait
    # answers with the log as it is then, but moves neither the follower's progress, nor the
    # high watermark, nor the ISR.
    r, log = leader(isr=(1, 2), log=ModelLog([0] * 10), hw=8)
    fetch(r, log, 2, 8, T0)
    before = r.progress(3)
    d = fetch(r, log, 3, 10, T0 + 5, update_state=False)
    assert d.read_records and d.high_watermark == 8 and d.alter_partition is None
    assert d.high_watermark_update is None
    assert r.progress(3) == before and r.maximal_isr == {1, 2}
    d = fetch(r, log, 2, 10, T0 + 5, update_state=False)
    assert d.high_watermark_update is None and r.high_watermark == 8
    # It is still a fetch from a fenced epoch or beyond the log end, answered with its error.
    assert fetch(r, log, 2, 10, T0, leader_epoch=0, update_state=False).error == ErrorCode.FENCED_LEADER_EPOCH
    assert fetch(r, log, 2, 11, T0, update_state=False).error == ErrorCode.OFFSET_OUT_OF_RANGE
    # The same fetches counted as arrivals move all three.
    assert fetch(r, log, 2, 10, T0 + 5).high_watermark_update is not None
    assert fetch(r, log, 3, 10, T0 + 5).alter_partition is not None


def test_follower_joins_only_after_the_leader_epoch_start() -> None:
    # The high watermark (4, from the checkpoint) lags the new epoch's start (10).
    r, log = leader(isr=(1, 2), hw=4)
    d = fetch(r, log, 3, 6, T0)
    assert d.alter_partition is None, "LEO >= HW is not enough: it must reach the leader's epoch start"
    d = fetch(r, log, 3, 10, T0)
    assert d.alter_partition is not None and d.alter_partition.new_isr == (1, 2, 3)


def test_ineligible_replica_does_not_join() -> None:
    r, log = leader(isr=(1, 2), hw=10)
    r.set_isr_eligible({1, 2}, T0)
    assert fetch(r, log, 3, 10, T0).alter_partition is None
    r.set_isr_eligible(None, T0)
    assert fetch(r, log, 3, 10, T0).alter_partition is not None


def test_adding_replica_fetches_and_joins_when_caught_up() -> None:
    log = ModelLog([0] * 10)
    r = PartitionReplica("t", 0, 1, replica_lag_time_max_ms=LAG_MS)
    r.apply_leader_and_isr(LeaderAndIsrState(1, 1, (1, 2), 0, (1, 2, 4), adding_replicas=(4,)),
                           log_end_offset=10, latest_epoch=0, high_watermark=10, now_ms=T0)
    assert r.adding_replicas == (4,)
    assert fetch(r, log, 4, 0, T0).alter_partition is None
    d = fetch(r, log, 4, 10, T0)
    assert d.alter_partition is not None and d.alter_partition.new_isr == (1, 2, 4)


def test_high_watermark_uses_the_maximal_isr_while_an_expansion_is_pending() -> None:
    r, log = leader(isr=(1, 2), hw=10)
    fetch(r, log, 2, 10, T0)
    append(r, log, 10, T0)
    proposal = fetch(r, log, 3, 10, T0).alter_partition
    assert proposal is not None
    # Replica 2 reaches 20; with the committed ISR {1, 2} the HW would be 20, but 3 counts already.
    d = fetch(r, log, 2, 20, T0)
    assert d.high_watermark_update is None and r.high_watermark == 10
    assert r.ack_check(20).done is False
    # While the change is in flight nothing else is proposed, not even a shrink.
    assert r.check_isr(T0 + 10 * LAG_MS) is None
    d = fetch(r, log, 3, 20, T0)
    assert d.high_watermark_update == HighWatermarkUpdate(10, 20)
    # A failed expansion goes back to the committed ISR; the stricter HW did no harm.
    r.on_alter_partition_response(proposal, AlterPartitionResponse(ErrorCode.OPERATION_NOT_ATTEMPTED), T0)
    assert r.maximal_isr == {1, 2} and r.high_watermark == 20


# ---- ISR shrink ------------------------------------------------------------------------------------


def test_stuck_follower_is_dropped_after_the_lag_time() -> None:
    r, log = leader(hw=10)
    fetch(r, log, 2, 10, T0)
    fetch(r, log, 3, 10, T0)
    append(r, log, 5, T0 + 1)
    fetch(r, log, 2, 15, T0 + 2)
    assert r.check_isr(T0 + LAG_MS) is None, "caught up at T0: still within the lag time"
    fetch(r, log, 2, 15, T0 + LAG_MS)
    proposal = r.check_isr(T0 + LAG_MS + 1)
    assert proposal is not None and proposal.new_isr == (1, 2)
    assert r.out_of_sync_replicas(T0 + LAG_MS + 1) == {3}


def test_follower_at_the_leader_end_is_never_out_of_sync() -> None:
    r, log = leader(hw=10)
    fetch(r, log, 2, 10, T0)
    fetch(r, log, 3, 10, T0)
    # An idle partition: no fetches for a long time, but nobody lags.
    assert r.check_isr(T0 + 100 * LAG_MS) is None


def test_follower_chasing_a_busy_leader_stays_in_sync() -> None:
    """Each fetch reaches what the leader had at the previous fetch: caught up then (lastCaughtUpTime)."""
    r, log = leader(isr=(1, 2), replicas=(1, 2), hw=10)
    now = T0
    fetch(r, log, 2, 10, now)
    for _ in range(20):
        now += LAG_MS // 2
        before = log.log_end_offset
        append(r, log, 3, now - 1)
        fetch(r, log, 2, before, now)  # always one append behind
        assert r.check_isr(now) is None
    # A follower that stops fetching falls out.
    assert r.check_isr(now + LAG_MS) is not None


def test_pending_shrink_keeps_the_removed_replica_in_the_high_watermark_until_committed() -> None:
    r, log = leader(hw=10)
    fetch(r, log, 2, 10, T0)
    fetch(r, log, 3, 10, T0)
    append(r, log, 10, T0 + 1)
    fetch(r, log, 2, 20, T0 + LAG_MS)
    proposal = r.check_isr(T0 + LAG_MS + 1)
    assert proposal is not None and proposal.new_isr == (1, 2)
    assert r.maximal_isr == {1, 2, 3}
    assert fetch(r, log, 2, 20, T0 + LAG_MS + 2).high_watermark_update is None
    out = accept(r, proposal, T0 + LAG_MS + 3)
    assert out.high_watermark == HighWatermarkUpdate(10, 20)
    assert r.isr == (1, 2) and r.partition_epoch == 1


# ---- AlterPartition answers ------------------------------------------------------------------------


def _shrinking() -> tuple[PartitionReplica, ModelLog, AlterPartitionProposal]:
    r, log = leader(hw=10)
    fetch(r, log, 2, 10, T0)
    append(r, log, 1, T0)
    fetch(r, log, 2, 11, T0 + LAG_MS)
    proposal = r.check_isr(T0 + LAG_MS + 1)
    assert proposal is not None
    return r, log, proposal


def test_alter_partition_errors_that_wait_for_leader_and_isr() -> None:
    for error in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        r, _log, proposal = _shrinking()
        out = r.on_alter_partition_response(proposal, AlterPartitionResponse(error), T0)
        assert out.retry is None and not out.committed
        assert r.pending_alter_partition == proposal, "stays pending: no new proposal until new metadata"
        assert r.check_isr(T0 + 10 * LAG_MS) is None
        r.apply_leader_and_isr(LeaderAndIsrState(1, 2, (1, 2), 5, (1, 2, 3)), log_end_offset=11,
                               latest_epoch=1, high_watermark=10, now_ms=T0 + 10 * LAG_MS)
        assert r.pending_alter_partition is None and r.isr == (1, 2) and r.partition_epoch == 5
        r.validate_state()


def test_retriable_alter_partition_errors_resend_the_same_request() -> None:
    r, _, proposal = _shrinking()
    for error in (ErrorCode.NOT_CONTROLLER, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.STALE_BROKER_EPOCH):
        out = r.on_alter_partition_response(proposal, AlterPartitionResponse(error), T0)
        assert out.retry == proposal
    out = accept(r, proposal, T0)
    assert out.committed and r.isr == (1, 2)


def test_stale_alter_partition_answers_are_ignored() -> None:
    r, _, proposal = _shrinking()
    other = AlterPartitionProposal("t", 0, 1, 1, (1, 2), 0, proposal_id=99)
    assert r.on_alter_partition_response(other, AlterPartitionResponse(ErrorCode.NONE, 1, 1, (1, 2), 1), T0) \
        .committed is False
    # Success, but for an older leader epoch or partition epoch: ignored (Kafka waits for metadata).
    assert not r.on_alter_partition_response(proposal, AlterPartitionResponse(ErrorCode.NONE, 1, 0, (1, 2), 1),
                                             T0).committed
    r.apply_leader_and_isr(LeaderAndIsrState(1, 2, (1, 2, 3), 7, (1, 2, 3)), log_end_offset=11,
                           latest_epoch=1, high_watermark=10, now_ms=T0)
    # The answer to a request made before the LeaderAndIsr changes nothing.
    assert not r.on_alter_partition_response(proposal, AlterPartitionResponse(ErrorCode.NONE, 1, 1, (1, 2), 1),
                                             T0).committed
    assert r.isr == (1, 2, 3) and r.partition_epoch == 7
    r.validate_state()


# ---- acks=all --------------------------------------------------------------------------------------


def test_acks_all_completes_exactly_when_the_high_watermark_passes_the_batch() -> None:
    r, log = leader(isr=(1, 2), replicas=(1, 2), hw=10, min_isr=2)
    fetch(r, log, 2, 10, T0)
    assert r.check_append(-1) == ErrorCode.NONE
    append(r, log, 5, T0)  # offsets 10..14: required offset 15
    assert r.ack_check(15).done is False
    fetch(r, log, 2, 14, T0)
    assert r.high_watermark == 14 and r.ack_check(15).done is False
    fetch(r, log, 2, 15, T0)
    assert r.ack_check(15).done and r.ack_check(15).error == ErrorCode.NONE


def test_min_insync_replicas_refuses_acks_all_appends() -> None:
    r, _ = leader(isr=(1,), replicas=(1, 2, 3), min_isr=2)
    assert r.check_append(-1) == ErrorCode.NOT_ENOUGH_REPLICAS
    assert r.check_append(1) == ErrorCode.NONE
    assert r.check_append(0) == ErrorCode.NONE
    assert r.check_append(-1, current_leader_epoch=0) == ErrorCode.FENCED_LEADER_EPOCH
    assert r.check_append(-1, current_leader_epoch=2) == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_isr_shrinking_below_min_after_the_append_fails_the_ack() -> None:
    r, log = leader(isr=(1, 2), replicas=(1, 2), hw=10, min_isr=2)
    fetch(r, log, 2, 10, T0)
    append(r, log, 1, T0)
    fetch(r, log, 2, 11, T0)
    append(r, log, 1, T0 + 1)
    proposal = r.check_isr(T0 + LAG_MS + 2)
    assert proposal is not None
    accept(r, proposal, T0 + LAG_MS + 2)
    assert r.isr == (1,)
    assert r.ack_check(11) == AckCheck(True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    assert r.ack_check(12).done is False


# ---- follower fetch validation ---------------------------------------------------------------------


def test_fetch_errors() -> None:
    r, log = leader(epoch=3)
    assert fetch(r, log, 2, 0, T0, leader_epoch=2).error == ErrorCode.FENCED_LEADER_EPOCH
    assert fetch(r, log, 2, 0, T0, leader_epoch=4).error == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert fetch(r, log, 9, 0, T0).error == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert fetch(r, log, 9, 0, T0, leader_epoch=-1).error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    d = fetch(r, log, 2, 11, T0)
    assert d.error == ErrorCode.OFFSET_OUT_OF_RANGE and not d.read_records
    assert r.progress(2).log_end_offset == -1  # type: ignore[union-attr]
    # Without an epoch the leader cannot resolve: OFFSET_OUT_OF_RANGE (the follower resets).
    assert fetch(r, log, 2, 5, T0, last_epoch=7).error == ErrorCode.OFFSET_OUT_OF_RANGE
    follower = PartitionReplica("t", 0, 2)
    follower.apply_leader_and_isr(LeaderAndIsrState(1, 3, (1, 2), 0, (1, 2)), log_end_offset=0,
                                  latest_epoch=None, high_watermark=0, now_ms=T0)
    d = follower.on_follower_fetch(FollowerFetch(3, 3, 0, -1), leader_log_start_offset=0,
                                   epoch_end_offset=log.end_offset_for_epoch, now_ms=T0)
    assert d.error == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_fetch_with_a_diverging_epoch_does_not_update_progress() -> None:
    # Leader log: epoch 1 at 0..4, epoch 2 from 5; it leads in epoch 3 from 8.
    r, log = leader(log=ModelLog([1] * 5 + [2] * 3), epoch=3)
    d = fetch(r, log, 2, 10, T0, last_epoch=1)
    assert d.diverging_epoch == EpochEndOffset(1, 5) and not d.read_records
    assert r.progress(2).log_end_offset == -1  # type: ignore[union-attr]
    log.append(3)
    d = fetch(r, log, 3, 9, T0, last_epoch=2)
    assert d.diverging_epoch == EpochEndOffset(2, 8), "epoch 2 ends at 8 on the leader"
    d = fetch(r, log, 3, 8, T0, last_epoch=2)
    assert d.diverging_epoch is None and d.read_records
    assert r.progress(3).log_end_offset == 8  # type: ignore[union-attr]
    d = fetch(r, log, 2, 5, T0, last_epoch=1)
    assert d.diverging_epoch is None and r.progress(2).log_end_offset == 5  # type: ignore[union-attr]


def test_follower_with_an_epoch_the_leader_never_had_learns_the_largest_below_it() -> None:
    # Leader: epoch 1 at 0..4, then epoch 4 (it never saw epoch 2 or 3).
    r, log = leader(log=ModelLog([1] * 5 + [4] * 3), epoch=5)
    d = fetch(r, log, 2, 7, T0, last_epoch=3)
    assert d.diverging_epoch == EpochEndOffset(1, 5)
