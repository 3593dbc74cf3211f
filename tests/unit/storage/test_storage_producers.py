from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from _storage_batches import make_batch

from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.storage import LogConfig, PartitionLog
from headwater.storage.producers import ProducerStateManager, SequenceGapError

OpenLog = Callable[..., PartitionLog]
PID = 4242


def batch(seq: int, n: int = 1, epoch: int = 0, pid: int = PID) -> bytearray:
    return make_batch(
        [b"v%d" % (seq + i) for i in range(n)], producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )


def code_of(log: PartitionLog, records: bytearray) -> ErrorCode:
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(records, 0, 1)
    return e.value.code


def test_duplicate_is_acknowledged_with_the_original_offsets(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(make_batch([b"other"]), 0, 1)
    first = log.append_as_leader(batch(0, 3), 0, 1)
    assert (first.base_offset, first.last_offset) == (1, 3)
    size = log.size_bytes
    retry = log.append_as_leader(batch(0, 3), 0, 1)
    assert retry.duplicate and (retry.base_offset, retry.last_offset) == (1, 3)
    assert log.size_bytes == size and log.log_end_offset == 4
    nxt = log.append_as_leader(batch(3, 2), 0, 1)
    assert (nxt.base_offset, nxt.duplicate) == (4, False)


def test_out_of_order_sequence(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(batch(0, 2), 0, 1)
    assert code_of(log, batch(5)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert code_of(log, batch(1)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # overlaps, not a cached batch
    assert log.log_end_offset == 2


def test_a_gap_ahead_names_the_latest_batch_and_a_batch_behind_does_not(open_log: OpenLog) -> None:
    """A batch that skips sequences tells the leader where the producer's latest batch is (it
    decides whether the gap may be retries still on their way); an old batch is plain OOS."""
    log = open_log()
    log.append_as_leader(make_batch([b"other"]), 0, 1)
    log.append_as_leader(batch(0, 2), 0, 1)  # offsets 1-2
    with pytest.raises(SequenceGapError) as gap:
        log.append_as_leader(batch(5), 0, 1)
    assert gap.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and gap.value.latest_offset == 2
    with pytest.raises(KafkaError) as behind:
        log.append_as_leader(batch(1), 0, 1)
    assert not isinstance(behind.value, SequenceGapError)
    # A new epoch that does not start at 0 skips its first sequences too.
    with pytest.raises(SequenceGapError) as new_epoch:
        log.append_as_leader(batch(3, epoch=1), 0, 1)
    assert new_epoch.value.latest_offset == 2
    assert log.log_end_offset == 3


def test_only_the_last_five_batches_are_deduplicated(open_log: OpenLog) -> None:
    log = open_log()
    for seq in range(6):
        log.append_as_leader(batch(seq), 0, 1)
    assert log.append_as_leader(batch(1), 0, 1).duplicate
    assert code_of(log, batch(0)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_epoch_fencing_and_new_epoch_rules(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(batch(0, epoch=1), 0, 1)
    assert code_of(log, batch(1, epoch=0)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert code_of(log, batch(1, epoch=2)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    res = log.append_as_leader(batch(0, epoch=2), 0, 1)
    assert not res.duplicate and res.base_offset == 1
    # the old epoch's batch is no longer a duplicate: it is fenced
    assert code_of(log, batch(0, epoch=1)) == ErrorCode.INVALID_PRODUCER_EPOCH


def test_unknown_producer_is_accepted_at_any_sequence(open_log: OpenLog) -> None:
    log = open_log()
    assert log.append_as_leader(batch(42, pid=7), 0, 1).base_offset == 0
    assert code_of(log, batch(44, pid=7)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.append_as_leader(batch(43, pid=7), 0, 1).base_offset == 1


def test_sequence_wraps_at_int32(open_log: OpenLog) -> None:
    log = open_log()
    top = (1 << 31) - 1
    log.append_as_leader(batch(top - 1, 2), 0, 1)  # sequences top-1, top
    assert log.append_as_leader(batch(0), 0, 1).base_offset == 2


def test_rejected_batch_in_a_request_writes_nothing(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(batch(0), 0, 1)
    assert code_of(log, batch(1) + batch(7)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.log_end_offset == 1
    # the first batch of the rejected request was not remembered either
    assert log.append_as_leader(batch(1), 0, 1).base_offset == 1


def test_two_batches_of_one_producer_in_one_request(open_log: OpenLog) -> None:
    log = open_log()
    res = log.append_as_leader(batch(0, 2) + batch(2, 1), 0, 1)
    assert (res.base_offset, res.last_offset) == (0, 2)
    assert log.append_as_leader(batch(2), 0, 1).duplicate


@pytest.mark.parametrize("clean", [True, False])
def test_state_survives_restart(open_log: OpenLog, clean: bool) -> None:
    config = LogConfig(segment_bytes=200)
    log = open_log(config)
    for seq in range(10):
        log.append_as_leader(batch(seq), 0, 1)
    assert len(log.segments) > 2
    if clean:
        log.close()
    else:
        log.close_without_flush()
    log = open_log(config, clean_shutdown=clean)
    retry = log.append_as_leader(batch(9), 0, 1)
    assert retry.duplicate and retry.base_offset == 9
    assert code_of(log, batch(11)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.append_as_leader(batch(10), 0, 1).base_offset == 10


def test_state_after_truncation(open_log: OpenLog) -> None:
    log = open_log(LogConfig(segment_bytes=300))
    for seq in range(6):
        log.append_as_leader(batch(seq), 0, 1)
    log.truncate_to(4)  # drops sequences 4 and 5
    assert log.log_end_offset == 4
    res = log.append_as_leader(batch(4), 0, 1)
    assert not res.duplicate and res.base_offset == 4
    assert log.append_as_leader(batch(3), 0, 1).duplicate
    log.truncate_to(1)
    assert code_of(log, batch(3)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.append_as_leader(batch(1), 0, 1).base_offset == 1
    log.validate_state()


def test_snapshot_round_trip_and_corruption() -> None:
    state = ProducerStateManager()
    staged: dict[int, object] = {}
    from headwater.records.batch import parse_header

    for seq in range(7):
        header = parse_header(batch(seq, epoch=3))
        assert state.validate(header, staged, seq, seq) is None  # type: ignore[arg-type]
    state.commit(staged)  # type: ignore[arg-type]
    data = state.to_snapshot()
    assert ProducerStateManager.from_snapshot(data) == state.producers
    assert len(state.producers[PID].batches) == 5
    broken = bytearray(data)
    broken[-1] ^= 1
    with pytest.raises(ValueError):
        ProducerStateManager.from_snapshot(bytes(broken))
    with pytest.raises(ValueError):
        ProducerStateManager.from_snapshot(data[:-4])


def test_corrupt_snapshot_falls_back_to_scanning(open_log: OpenLog) -> None:
    log = open_log()
    for seq in range(3):
        log.append_as_leader(batch(seq), 0, 1)
    log.close()
    snaps = list(log.directory.glob("*.snapshot"))
    assert [p.name for p in snaps] == [f"{3:020d}.snapshot"]
    snaps[0].write_bytes(b"\0\1garbage")
    log = open_log(clean_shutdown=True)
    assert log.append_as_leader(batch(2), 0, 1).duplicate


def test_a_close_rewrites_the_snapshot_only_when_the_state_moved(open_log: OpenLog) -> None:
    """An idle partition's snapshot at its log end is already right: a clean shutdown of 10,000
    partitions must not rewrite them all. After a truncation or an append it is written again."""
    log = open_log()
    for seq in range(3):
        log.append_as_leader(batch(seq), 0, 1)
    log.close()
    snapshot = log.directory / f"{3:020d}.snapshot"
    first = snapshot.read_bytes()
    os.utime(snapshot, ns=(1, 1))  # a rewrite would give it the current time
    log = open_log(clean_shutdown=True)
    log.close()
    assert snapshot.stat().st_mtime_ns == 1
    log = open_log(clean_shutdown=True)
    log.truncate_to(2)  # the state as of offset 2 forgets sequence 2
    log.append_as_leader(batch(2, epoch=0, pid=PID + 1), 0, 1)  # another producer, same log end
    log.close()
    assert snapshot.read_bytes() != first
    log = open_log(clean_shutdown=True)
    first_producer, second_producer = log.producer_state.get(PID), log.producer_state.get(PID + 1)
    assert first_producer is not None and first_producer.last_sequence == 1
    assert second_producer is not None and second_producer.last_sequence == 2
