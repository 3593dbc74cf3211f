"""Transactions in a partition log: the producer-state rules on appends, the last stable offset and
the aborted-transaction index, each expectation from the Kafka 3.9 class named next to it."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

from _txn_batches import A, B, C, append, data, error_code, marker, plain, refused
from conftest import FakeClock

from headwater.protocol.errors import ErrorCode
from headwater.records.records import build_marker_batch
from headwater.storage import LogConfig, PartitionLog
from headwater.storage.log import AppendOrigin
from headwater.storage.producers import ActiveProducer
from headwater.storage.txn_index import AbortedTxn

OpenLog = Callable[..., PartitionLog]


def test_last_stable_offset_follows_open_and_unreplicated_transactions(open_log: OpenLog) -> None:
    log = open_log()
    append(log, plain(2))  # 0-1
    assert append(log, data(A, 0, 2)).base_offset == 2  # A's transaction starts at 2
    append(log, plain())  # 4
    # UnifiedLog.lastStableOffset: the first unstable offset when below the high watermark.
    log.high_watermark = 5
    assert (log.first_unstable_offset, log.last_stable_offset) == (2, 2)
    log.high_watermark = 1
    assert log.last_stable_offset == 1
    log.high_watermark = 5
    assert marker(log, A, True) == 5
    # ProducerStateManager.completeTxn: unreplicated until the high watermark passes the marker.
    assert log.high_watermark == 5 and log.last_stable_offset == 2
    log.high_watermark = 6
    assert (log.first_unstable_offset, log.last_stable_offset) == (None, 6)
    assert log.collect_aborted(0, 6) == []  # a commit is not indexed (LogSegment.updateTxnIndex)
    log.validate_state()


def test_aborted_transactions_are_indexed_with_the_lso_of_their_time(open_log: OpenLog) -> None:
    log = open_log()
    append(log, data(A, 0))  # 0
    append(log, data(B, 0))  # 1
    assert marker(log, A, False) == 2
    assert marker(log, B, True) == 3
    append(log, data(C, 0, 2))  # 4-5
    assert marker(log, C, False) == 6
    # ProducerStateManager.lastStableOffset: the earliest other ongoing transaction (B at 1), else
    # the offset after the marker.
    assert log.segments[-1].txn_index.entries == [AbortedTxn(A, 0, 2, 1), AbortedTxn(C, 4, 6, 7)]
    log.high_watermark = 7
    assert log.last_stable_offset == 7
    # TransactionIndex.collectAbortedTxns: last offset >= fetch offset and first offset < upper
    # bound; done after an entry whose LSO reaches the upper bound.
    assert log.collect_aborted(0, 7) == [(A, 0), (C, 4)]
    assert log.collect_aborted(3, 7) == [(C, 4)]
    assert log.collect_aborted(0, 1) == [(A, 0)]
    assert log.collect_aborted(0, 4) == [(A, 0)]
    assert log.collect_aborted(7, 7) == []
    log.validate_state()


def test_collect_starts_at_the_segment_of_the_fetch_offset(open_log: OpenLog) -> None:
    log = open_log()
    append(log, data(A, 0))  # 0, segment 0
    log.roll()
    append(log, plain())  # 1, segment 1
    append(log, data(B, 0))  # 2, B's transaction
    log.roll()
    assert marker(log, A, False) == 3  # segment 3 holds A's abort; B is still open: LSO 2
    assert marker(log, B, False) == 4
    assert [s.txn_index.entries for s in log.segments] == [
        [], [], [AbortedTxn(A, 0, 3, 2), AbortedTxn(B, 2, 4, 5)]
    ]
    # LocalLog.collectAbortedTransactions: from the floor segment on, until an entry's LSO reaches
    # the upper bound.
    assert log.collect_aborted(0, 5) == [(A, 0), (B, 2)]
    assert log.collect_aborted(1, 2) == [(A, 0)]  # A's LSO (2) reaches the bound: B is not looked at
    assert log.collect_aborted(3, 5) == [(A, 0), (B, 2)]
    log.validate_state()


def test_non_transactional_write_during_a_transaction_is_invalid_txn_state(open_log: OpenLog) -> None:
    log = open_log()
    append(log, data(A, 0))
    # ProducerAppendInfo.appendDataBatch: "Expected transactional write from producer".
    assert error_code(append, log, data(A, 1, transactional=False)) == ErrorCode.INVALID_TXN_STATE
    assert log.log_end_offset == 1
    append(log, data(A, 1))  # the same transaction goes on
    marker(log, A, True)
    assert append(log, data(A, 2, transactional=False)).base_offset == 3  # sequences go on across it
    log.validate_state()


def test_marker_fencing(open_log: OpenLog) -> None:
    log = open_log()
    append(log, data(A, 0, epoch=3))
    # ProducerAppendInfo.checkProducerEpoch and checkCoordinatorEpoch.
    assert error_code(marker, log, A, False, epoch=2) == ErrorCode.INVALID_PRODUCER_EPOCH
    marker(log, A, False, epoch=3, coordinator_epoch=5)
    append(log, data(A, 1, epoch=3))
    assert error_code(marker, log, A, True, epoch=3, coordinator_epoch=4) == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert log.log_end_offset == 3 and log.producer_state.ongoing == {2: A}
    assert marker(log, A, True, epoch=3, coordinator_epoch=5) == 3
    # A marker without a transaction is written and completes nothing (appendEndTxnMarker).
    assert marker(log, A, True, epoch=3, coordinator_epoch=6) == 4
    assert log.producer_state.unreplicated[-1].last_offset == 3
    # A marker from a bumped epoch (the coordinator fencing a timed-out producer) ends the
    # transaction and forgets the cached batches (ProducerStateEntry.maybeUpdateProducerEpoch).
    append(log, data(A, 2, epoch=3))  # 5
    assert marker(log, A, False, epoch=4, coordinator_epoch=6) == 6
    entry = log.producer_state.get(A)
    assert entry is not None and (entry.epoch, entry.batches, entry.coordinator_epoch) == (4, [], 6)
    assert error_code(append, log, data(A, 3, epoch=3)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert append(log, data(A, 0, epoch=4)).base_offset == 7
    log.validate_state()


def test_clients_may_not_write_control_batches(open_log: OpenLog) -> None:
    log = open_log()
    # LogValidator.validateBatch, for AppendOrigin.CLIENT.
    err = refused(append, log, build_marker_batch(A, 0, True, 0, 1))
    assert (err.code, err.message) == (
        ErrorCode.INVALID_RECORD, "Clients are not allowed to write control records in topic partition t-0"
    )
    assert log.log_end_offset == 0
    # The coordinator writes transactional offset commits without a sequence: they open the
    # transaction all the same, with the epoch check only (ProducerAppendInfo.maybeValidateDataBatch).
    assert append(log, data(A, -1), AppendOrigin.COORDINATOR).base_offset == 0
    assert append(log, data(A, -1, 2), AppendOrigin.COORDINATOR).base_offset == 1
    assert log.producer_state.ongoing == {0: A}
    assert error_code(append, log, data(A, -1, epoch=-1), AppendOrigin.COORDINATOR) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert (error_code(append, log, data(A, -1, transactional=False), AppendOrigin.COORDINATOR)
            == ErrorCode.INVALID_TXN_STATE)
    marker(log, A, True)
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 4
    # A client's batch with a producer id needs a sequence (LogValidator.validateBatch).
    err = refused(append, log, data(B, -1))
    assert (err.code, err.message) == (
        ErrorCode.INVALID_RECORD, f"Invalid sequence number -1 in record batch with producerId {B}"
    )
    assert log.log_end_offset == 4 and log.producer_state.ongoing == {}
    log.validate_state()


def test_one_request_may_hold_several_transactions_of_one_producer(open_log: OpenLog) -> None:
    """A follower copies data, marker, data, marker of one producer in one append."""
    leader = open_log()
    append(leader, data(A, 0))
    marker(leader, A, False)
    append(leader, data(A, 1))
    marker(leader, A, False)
    follower = PartitionLog("t", 0, leader.directory.parent / "f-0", LogConfig(), clock_ms=lambda: 1)
    try:
        follower.append_as_follower(leader.read(0, 1 << 20).read())
        assert follower.segments[-1].txn_index.entries == leader.segments[-1].txn_index.entries == [
            AbortedTxn(A, 0, 1, 2), AbortedTxn(A, 2, 3, 4)
        ]
        assert follower.producer_state.ongoing == {} and follower.first_unstable_offset == 0
        follower.validate_state()
    finally:
        follower.close()


def test_follower_replays_markers_and_writes_the_same_index(open_log: OpenLog, tmp_path: Path) -> None:
    leader = open_log()
    append(leader, data(A, 0, 2))  # 0-1
    append(leader, data(B, 0))  # 2
    marker(leader, A, False)  # 3: LSO 2 (B)
    append(leader, plain())  # 4
    marker(leader, B, True)  # 5
    append(leader, data(C, 0))  # 6
    marker(leader, C, False, coordinator_epoch=2)  # 7
    append(leader, data(A, 2))  # 8: A again, open
    raw = leader.read(0, 1 << 20).read()
    whole = PartitionLog("t", 0, tmp_path / "whole-0", LogConfig(), clock_ms=lambda: 1)
    piecewise = PartitionLog("t", 0, tmp_path / "pieces-0", LogConfig(), clock_ms=lambda: 1)
    try:
        whole.append_as_follower(raw)  # UnifiedLog.appendAsFollower: one append of everything
        pos = 0
        while pos < len(raw):  # and one batch at a time
            size = struct.unpack_from(">i", raw, pos + 8)[0] + 12
            piecewise.append_as_follower(raw[pos : pos + size])
            pos += size
        for follower in (whole, piecewise):
            assert follower.segments[-1].txn_index.entries == leader.segments[-1].txn_index.entries == [
                AbortedTxn(A, 0, 3, 2), AbortedTxn(C, 6, 7, 8)
            ]
            assert follower.producer_state.ongoing == leader.producer_state.ongoing == {8: A}
            entry = follower.producer_state.get(C)
            assert entry is not None and entry.coordinator_epoch == 2
            for log in (leader, follower):
                log.high_watermark = 9
            assert follower.last_stable_offset == leader.last_stable_offset == 8
            assert follower.collect_aborted(0, 8) == leader.collect_aborted(0, 8) == [(A, 0), (C, 6)]
            follower.flush()
            follower.validate_state()
        leader.flush()
        index = leader.segments[-1].txn_index.path
        assert index is not None
        # Kafka's AbortedTxn: version int16 0, producer id, first offset, last offset, LSO.
        assert index.read_bytes() == struct.pack(">hqqqq", 0, A, 0, 3, 2) + struct.pack(">hqqqq", 0, C, 6, 7, 8)
        for follower in (whole, piecewise):
            follower_index = follower.segments[-1].txn_index.path
            assert follower_index is not None and follower_index.read_bytes() == index.read_bytes()
    finally:
        whole.close()
        piecewise.close()


def test_truncation_below_a_marker_reopens_its_transaction(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_bytes=300))
    append(log, data(A, 0, 2))  # 0-1
    log.roll()
    append(log, plain())  # 2
    assert marker(log, A, False) == 3
    log.high_watermark = 4
    assert log.collect_aborted(0, 4) == [(A, 0)] and log.last_stable_offset == 4
    # UnifiedLog.truncateTo: the index loses the entries from the cut on, the producer state is
    # rebuilt from the batches that stay.
    log.truncate_to(3)
    assert log.segments[-1].txn_index.entries == []
    assert log.producer_state.ongoing == {0: A} and log.last_stable_offset == 0
    assert log.collect_aborted(0, 4) == []
    # The new leader committed it instead.
    log.append_as_follower(_at(build_marker_batch(A, 0, True, 0, 1), 3))
    log.high_watermark = 4
    assert log.last_stable_offset == 4 and log.collect_aborted(0, 4) == []
    log.validate_state()


def _at(batch: bytearray, offset: int) -> bytearray:
    batch[0:8] = offset.to_bytes(8, "big")  # outside the CRC, as a replicated batch carries it
    batch[12:16] = (0).to_bytes(4, "big")
    return batch


def test_retention_takes_the_transaction_index_with_its_segment(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(LogConfig(file_delete_delay_ms=1_000))
    append(log, data(A, 0))
    marker(log, A, False)
    log.roll()
    append(log, plain())
    log.flush()
    first = log.segments[0]
    path = first.txn_index.path
    assert path is not None and path.exists() and path.stat().st_size == 34
    log.high_watermark = 3
    log.delete_records_before(2)
    assert log.segments[0].base_offset == 2 and not path.exists()
    deleted = path.with_name(path.name + ".deleted")
    assert deleted.exists()
    assert log.collect_aborted(2, 3) == []
    clock.now_ms += 10_000
    assert log.delete_expired_files(clock.now_ms) == 1
    assert not deleted.exists()
    log.validate_state()


def test_a_log_start_past_an_open_transaction_bounds_the_lso(open_log: OpenLog) -> None:
    log = open_log()
    append(log, data(A, 0))
    log.roll()
    append(log, plain(3))
    log.high_watermark = 4
    log.delete_records_before(2)
    # UnifiedLog.maybeIncrementFirstUnstableOffset: never below the log start offset.
    assert log.producer_state.first_unstable_offset == 0
    assert (log.first_unstable_offset, log.last_stable_offset) == (2, 2)


def test_active_producers_for_describe_producers(open_log: OpenLog) -> None:
    log = open_log()
    append(log, data(A, 0, 3, epoch=2))
    append(log, data(B, 0, transactional=False))
    marker(log, A, True, epoch=2, coordinator_epoch=7)
    append(log, data(A, 3, epoch=2))
    assert log.producer_state.active() == [
        ActiveProducer(A, 2, 3, 1_000, 7, 5),
        ActiveProducer(B, 0, 0, 1_000, -1, -1),
    ]


def test_rename_dir_moves_the_transaction_index(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log()
    append(log, data(A, 0))
    marker(log, A, False)
    with log.flushes_held() as held:
        assert held
        log.rename_dir(tmp_path / "t-0.moved-future")
    log.flush()
    path = log.segments[0].txn_index.path
    assert path is not None and path.parent == tmp_path / "t-0.moved-future" and path.stat().st_size == 34
