"""Follower-side rules: FollowerFetcher decisions, truncation after a leader change, out-of-range resets."""

from __future__ import annotations

import pytest
from _replication_model import ModelLog

from headwater.protocol.errors import ErrorCode
from headwater.replication.follower import (
    AppendRecords,
    AwaitLeaderAndIsr,
    Backoff,
    FetchRequestFields,
    FetchState,
    FollowerFetcher,
    Ignore,
    ListLeaderOffsets,
    PartitionFetchResponse,
    Truncate,
    TruncateFullyAndStartAt,
    truncation_offset,
)
from headwater.replication.partition import FollowerFetch, LeaderAndIsrState, PartitionReplica, Role
from headwater.replication.types import EpochEndOffset

T0 = 1_000_000
BACKOFF_MS = 500


def fetcher_for(log: ModelLog, *, leader_id: int = 2, epoch: int = 2) -> FollowerFetcher:
    return FollowerFetcher(leader_id=leader_id, leader_epoch=epoch, log_end_offset=log.log_end_offset,
                           latest_epoch=log.latest_epoch(), high_watermark=log.high_watermark,
                           fetch_backoff_ms=BACKOFF_MS)


def respond(f: FollowerFetcher, log: ModelLog, req: FetchRequestFields, resp: PartitionFetchResponse,
            now_ms: int = T0) -> object:
    action = f.on_fetch_response(req, resp, log_end_offset=log.log_end_offset,
                                 end_offset_for_epoch=log.end_offset_for_epoch, now_ms=now_ms)
    f.validate_state()
    return action


def test_old_leader_truncates_its_unacknowledged_tail_after_a_leader_change() -> None:
    """A led epoch 1 and wrote 0..9; B got 0..4, became leader in epoch 2 at 5 and wrote 5..7."""
    a_log = ModelLog([1] * 10)
    a_log.high_watermark = 5
    b_log = ModelLog([1] * 5)
    b_log.high_watermark = 5
    b = PartitionReplica("t", 0, 2, replica_lag_time_max_ms=10_000)
    out = b.apply_leader_and_isr(LeaderAndIsrState(2, 2, (1, 2), 1, (1, 2)), log_end_offset=5,
                                 latest_epoch=1, high_watermark=5, now_ms=T0)
    assert out.assign_epoch is not None
    b_log.assign_epoch(out.assign_epoch.epoch, out.assign_epoch.start_offset)
    b_log.append_entries([2, 2, 2])
    b.on_local_append(8, T0)

    a = PartitionReplica("t", 0, 1)
    out = a.apply_leader_and_isr(LeaderAndIsrState(2, 2, (1, 2), 1, (1, 2)), log_end_offset=10,
                                 latest_epoch=1, high_watermark=5, now_ms=T0)
    assert out.role is Role.FOLLOWER and out.start_fetcher and a.fetcher is not None
    f = a.fetcher

    def round_trip() -> object:
        req = f.next_request(T0)
        assert req is not None and req.leader_id == 2 and req.current_leader_epoch == 2
        d = b.on_follower_fetch(FollowerFetch(1, req.current_leader_epoch, req.fetch_offset, req.last_fetched_epoch),
                                leader_log_start_offset=0, epoch_end_offset=b_log.end_offset_for_epoch, now_ms=T0)
        b.validate_state()
        entries = b_log.records[req.fetch_offset:] if d.read_records else []
        resp = PartitionFetchResponse(d.error, d.high_watermark, d.log_start_offset, d.diverging_epoch, len(entries))
        action = respond(f, a_log, req, resp)
        if isinstance(action, Truncate):
            a_log.truncate_to(action.offset)
            f.on_truncated(a_log.log_end_offset, a_log.latest_epoch())
        elif isinstance(action, AppendRecords):
            a_log.append_entries(entries)
            update = f.on_appended(a_log.log_end_offset, a_log.latest_epoch())
            a_log.high_watermark = update.high_watermark
        return action

    assert round_trip() == Truncate(5)
    assert a_log.records == [1] * 5, "offsets 5..9 of epoch 1 were never committed"
    assert b.high_watermark == 5, "a diverging fetch does not count as progress"
    assert f.next_request(T0) == FetchRequestFields(2, 2, 5, 1)
    assert isinstance(round_trip(), AppendRecords)
    assert a_log.records == b_log.records == [1] * 5 + [2] * 3
    assert b.high_watermark == 5  # the fetch at 5 tells B that A holds 0..4
    assert isinstance(round_trip(), AppendRecords)
    assert b.high_watermark == 8 and a_log.high_watermark == 8
    assert f.last_fetched_epoch == 2 and f.in_sync


def test_truncation_when_the_follower_never_saw_the_leaders_epoch_takes_two_rounds() -> None:
    # Follower: epoch 1 at 0..4, abandoned epoch 3 at 5..7. Leader: epoch 1 at 0..3, epoch 2 at 4..5, epoch 4 from 6.
    follower = ModelLog([1] * 5 + [3] * 3)
    leader = ModelLog([1] * 4 + [2] * 2 + [4] * 2)
    assert leader.end_offset_for_epoch(3) == (2, 6)
    first = truncation_offset(EpochEndOffset(2, 6), follower.log_end_offset, follower.end_offset_for_epoch)
    assert first == 5, "we never had epoch 2: cut where our epoch 1 ends and ask again"
    follower.truncate_to(first)
    assert leader.end_offset_for_epoch(1) == (1, 4)
    second = truncation_offset(EpochEndOffset(1, 4), follower.log_end_offset, follower.end_offset_for_epoch)
    assert second == 4
    follower.truncate_to(second)
    assert follower.records == leader.records[:4]


def test_truncation_offset_edge_cases() -> None:
    log = ModelLog([1] * 5 + [2] * 5)
    assert truncation_offset(EpochEndOffset(-1, 7), 10, log.end_offset_for_epoch) == 7
    assert truncation_offset(EpochEndOffset(1, -1), 10, log.end_offset_for_epoch) == 10
    assert truncation_offset(EpochEndOffset(2, 12), 10, log.end_offset_for_epoch) == 10
    assert truncation_offset(EpochEndOffset(1, 3), 10, log.end_offset_for_epoch) == 3
    empty = ModelLog()
    assert truncation_offset(EpochEndOffset(1, 3), 0, empty.end_offset_for_epoch) == 0


def test_fetch_request_fields_and_append_progress() -> None:
    log = ModelLog([1] * 4)
    log.high_watermark = 2
    f = fetcher_for(log, epoch=3)
    req = f.next_request(T0)
    assert req == FetchRequestFields(2, 3, 4, 1)
    action = respond(f, log, req, PartitionFetchResponse(ErrorCode.NONE, high_watermark=9, log_start_offset=1,
                                                         records_size_bytes=300))
    assert action == AppendRecords(4, 300)
    assert f.next_request(T0) is None, "no new fetch before the append is reported"
    log.append_entries([3, 3, 3])
    update = f.on_appended(log.log_end_offset, log.latest_epoch())
    assert update.high_watermark == 7, "min(leader HW 9, log end 7)"
    assert update.advance_log_start_to == 1
    assert f.lag == 2 and not f.in_sync
    assert f.next_request(T0) == FetchRequestFields(2, 3, 7, 3)
    with pytest.raises(ValueError):
        f.on_appended(7, 3)


def test_stale_responses_are_ignored() -> None:
    log = ModelLog([1] * 4)
    f = fetcher_for(log)
    req = f.next_request(T0)
    assert req is not None
    for stale in (FetchRequestFields(2, 1, 4, 1), FetchRequestFields(2, 2, 3, 1), FetchRequestFields(5, 2, 4, 1)):
        assert respond(f, log, stale, PartitionFetchResponse(ErrorCode.NONE, 10, 0)) == Ignore()
    assert f.state is FetchState.FETCHING
    assert f.on_request_failed(FetchRequestFields(2, 2, 0, 1), T0) == Ignore()
    assert f.on_request_failed(req, T0) == Backoff(T0 + BACKOFF_MS)
    assert f.state is FetchState.DELAYED


def test_errors_back_off_or_wait_for_leader_and_isr() -> None:
    log = ModelLog([1] * 4)
    for error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                  ErrorCode.KAFKA_STORAGE_ERROR):
        f = fetcher_for(log)
        req = f.next_request(T0)
        assert req is not None
        assert respond(f, log, req, PartitionFetchResponse(error)) == Backoff(T0 + BACKOFF_MS)
        assert f.next_request(T0 + BACKOFF_MS - 1) is None
        assert f.next_request(T0 + BACKOFF_MS) == req
    f = fetcher_for(log)
    req = f.next_request(T0)
    assert req is not None
    assert respond(f, log, req, PartitionFetchResponse(ErrorCode.FENCED_LEADER_EPOCH)) == AwaitLeaderAndIsr()
    assert f.state is FetchState.FENCED and f.next_request(T0 + 10**9) is None


def test_out_of_range_follower_behind_the_leaders_log_start_starts_over() -> None:
    log = ModelLog([1] * 4)
    f = fetcher_for(log)
    req = f.next_request(T0)
    assert req is not None
    assert respond(f, log, req, PartitionFetchResponse(ErrorCode.OFFSET_OUT_OF_RANGE)) == ListLeaderOffsets(2, 2)
    assert f.next_request(T0) is None
    action = f.on_leader_offsets(leader_log_start_offset=50, leader_log_end_offset=80, log_end_offset=4, now_ms=T0)
    assert action == TruncateFullyAndStartAt(50)
    assert f.on_truncated(50, None) == 0
    assert f.next_request(T0) == FetchRequestFields(2, 2, 50, -1)


def test_out_of_range_follower_ahead_of_the_leader_truncates_to_its_end() -> None:
    log = ModelLog([1] * 10)
    f = fetcher_for(log)
    req = f.next_request(T0)
    assert req is not None
    respond(f, log, req, PartitionFetchResponse(ErrorCode.OFFSET_OUT_OF_RANGE))
    assert f.on_leader_offsets(leader_log_start_offset=0, leader_log_end_offset=6, log_end_offset=10,
                               now_ms=T0) == Truncate(6)
    log.truncate_to(6)
    f.on_truncated(6, 1)
    assert f.next_request(T0) == FetchRequestFields(2, 2, 6, 1)


def test_out_of_range_within_the_leaders_range_fetches_again() -> None:
    log = ModelLog([1] * 10)
    f = fetcher_for(log)
    req = f.next_request(T0)
    assert req is not None
    respond(f, log, req, PartitionFetchResponse(ErrorCode.OFFSET_OUT_OF_RANGE))
    assert f.on_leader_offsets(leader_log_start_offset=3, leader_log_end_offset=20, log_end_offset=10,
                               now_ms=T0) is None
    assert f.next_request(T0) == req
    respond(f, log, req, PartitionFetchResponse(ErrorCode.OFFSET_OUT_OF_RANGE))
    assert f.on_leader_offsets_error(ErrorCode.NOT_LEADER_OR_FOLLOWER, T0) == Backoff(T0 + BACKOFF_MS)
    respond(f, log, req, PartitionFetchResponse(ErrorCode.OFFSET_OUT_OF_RANGE), T0 + BACKOFF_MS)
    f.next_request(T0 + BACKOFF_MS)
    respond(f, log, req, PartitionFetchResponse(ErrorCode.OFFSET_OUT_OF_RANGE), T0 + BACKOFF_MS)
    assert f.on_leader_offsets_error(ErrorCode.FENCED_LEADER_EPOCH, T0) == AwaitLeaderAndIsr()


def test_a_log_without_epochs_first_truncates_to_its_high_watermark() -> None:
    f = FollowerFetcher(leader_id=2, leader_epoch=1, log_end_offset=10, latest_epoch=None, high_watermark=6,
                        fetch_backoff_ms=BACKOFF_MS)
    assert f.initial_truncation == Truncate(6) and f.state is FetchState.TRUNCATING
    assert f.next_request(T0) is None
    f.on_truncated(6, None)
    assert f.next_request(T0) == FetchRequestFields(2, 1, 6, -1)
    f.validate_state()


def test_follower_high_watermark_follows_the_leaders_even_down() -> None:
    log = ModelLog([1] * 10)
    log.high_watermark = 10
    f = fetcher_for(log)
    req = f.next_request(T0)
    assert req is not None
    respond(f, log, req, PartitionFetchResponse(ErrorCode.NONE, high_watermark=7, log_start_offset=0))
    assert f.on_appended(10, 1).high_watermark == 7


def test_a_new_leader_epoch_keeps_what_the_follower_knew_of_the_leaders_high_watermark() -> None:
    """A follower in sync stays in sync across a LeaderAndIsr that bumps the epoch: Kafka's follower
    throttle (``!isReplicaInSync && isQuotaExceeded``) must not hold it back as a lagging replica.
    One that lagged keeps lagging, and a fetcher that never had an answer still knows nothing."""
    log = ModelLog([1] * 10)
    log.high_watermark = 10
    r = PartitionReplica("t", 0, 1)
    r.apply_leader_and_isr(LeaderAndIsrState(2, 1, (1, 2), 1, (1, 2)), log_end_offset=10, latest_epoch=1,
                           high_watermark=10, now_ms=T0)
    assert r.fetcher is not None and r.fetcher.lag is None  # no answer yet: not known to be in sync
    r.apply_leader_and_isr(LeaderAndIsrState(2, 2, (1, 2), 2, (1, 2)), log_end_offset=10, latest_epoch=1,
                           high_watermark=10, now_ms=T0)
    assert r.fetcher is not None and r.fetcher.lag is None
    req = r.fetcher.next_request(T0)
    assert req is not None
    respond(r.fetcher, log, req, PartitionFetchResponse(ErrorCode.NONE, high_watermark=10, log_start_offset=0))
    r.fetcher.on_appended(10, 1)
    assert r.fetcher.in_sync
    r.apply_leader_and_isr(LeaderAndIsrState(2, 3, (1, 2), 3, (1, 2)), log_end_offset=10, latest_epoch=1,
                           high_watermark=10, now_ms=T0)
    assert r.fetcher.current_leader_epoch == 3 and r.fetcher.in_sync

    behind = PartitionReplica("t", 0, 1)
    behind.apply_leader_and_isr(LeaderAndIsrState(2, 1, (2,), 1, (1, 2)), log_end_offset=4, latest_epoch=1,
                                high_watermark=4, now_ms=T0)
    assert behind.fetcher is not None
    req = behind.fetcher.next_request(T0)
    assert req is not None
    respond(behind.fetcher, ModelLog([1] * 4), req,
            PartitionFetchResponse(ErrorCode.NONE, high_watermark=10, log_start_offset=0))
    behind.fetcher.on_appended(4, 1)
    behind.apply_leader_and_isr(LeaderAndIsrState(2, 2, (2,), 2, (1, 2)), log_end_offset=4, latest_epoch=1,
                                high_watermark=4, now_ms=T0)
    assert behind.fetcher.lag == 6 and not behind.fetcher.in_sync


def test_an_answer_learned_elsewhere_fills_in_only_what_the_fetcher_does_not_know() -> None:
    log = ModelLog([1] * 10)
    f = fetcher_for(log)
    f.learn_leader_high_watermark(-1)  # an error answer's high watermark says nothing
    assert f.lag is None
    f.learn_leader_high_watermark(10)
    assert f.in_sync
    f.learn_leader_high_watermark(20)  # what the fetcher knows already stays
    assert f.lag == 0
