"""Transactions across restarts: a clean reopen reads the transaction indexes and snapshots, a crash
rebuilds them from the batches (Kafka's LogSegment.recover with the producer state as of the
segment's base offset), and what the cleaner does keeps them true."""

from __future__ import annotations

import struct
from collections.abc import Callable

import crc32c
import pytest
from _cleaner_support import keyed_batch, read_all
from _txn_batches import A, B, C, append, data, marker, plain

from headwater.storage import LogConfig, PartitionLog
from headwater.storage.cleaner import clean_log, cleanable_range
from headwater.storage.producers import BatchMetadata, ProducerEntry, ProducerStateManager
from headwater.storage.txn_index import AbortedTxn

OpenLog = Callable[..., PartitionLog]
CONFIG = LogConfig(segment_bytes=400, index_interval_bytes=100)


def build(log: PartitionLog) -> None:
    """Transactions spanning segments: A aborted, B committed, C aborted, A open again; LEO 14."""
    append(log, data(A, 0, 2))  # 0-1
    append(log, plain())  # 2
    append(log, data(B, 0))  # 3
    log.roll()
    append(log, data(C, 0))  # 4
    marker(log, A, False, coordinator_epoch=1)  # 5: LSO 3 (B)
    append(log, plain(2))  # 6-7
    log.roll()
    marker(log, B, True, coordinator_epoch=1)  # 8
    append(log, plain())  # 9
    marker(log, C, False, coordinator_epoch=2)  # 10: LSO 11
    log.roll()
    append(log, plain(2))  # 11-12
    append(log, data(A, 2))  # 13: A again, open
    log.high_watermark = 14


def view(log: PartitionLog) -> tuple[object, ...]:
    state = log.producer_state
    return (
        log.log_end_offset,
        log.first_unstable_offset,
        log.last_stable_offset,
        dict(state.ongoing),
        [s.txn_index.entries for s in log.segments],
        log.collect_aborted(0, 14),
        log.collect_aborted(6, 14),
        state.active(),
    )


EXPECTED_ENTRIES = [[], [AbortedTxn(A, 0, 5, 3)], [AbortedTxn(C, 4, 10, 11)], []]


def test_the_scenario_as_written(open_log: OpenLog) -> None:
    log = open_log(CONFIG)
    build(log)
    assert [s.base_offset for s in log.segments] == [0, 4, 8, 11]
    assert [s.txn_index.entries for s in log.segments] == EXPECTED_ENTRIES
    assert log.collect_aborted(0, 14) == [(A, 0), (C, 4)]
    assert log.collect_aborted(6, 14) == [(C, 4)]
    assert (log.first_unstable_offset, log.last_stable_offset) == (13, 13)
    log.validate_state()


@pytest.mark.parametrize("how", ["clean", "crash", "crash-recovery-point", "crash-recovery-point-no-snapshot"])
def test_reopen_gives_the_same_transactions(open_log: OpenLog, how: str) -> None:
    log = open_log(CONFIG)
    build(log)
    before = view(log)
    if how == "clean":
        log.close()
        log = open_log(CONFIG, clean_shutdown=True, high_watermark=14)
    elif how == "crash":
        log.close_without_flush()  # kill -9: nothing flushed, every segment recovered
        log = open_log(CONFIG, high_watermark=14)
    else:
        log.flush()
        log.close_without_flush()
        if how.endswith("no-snapshot"):
            for snap in log.directory.glob("*.snapshot"):
                snap.unlink()  # the state as of 8 comes from segments 0 and 4, markers read whole
        # Trusted up to segment 8: that one and the next are recovered, starting from the
        # producer state as of offset 8 (the snapshot written at that roll, then nothing).
        log = open_log(CONFIG, high_watermark=14, recovery_point=9)
    assert view(log) == before
    log.validate_state()


def test_a_crash_before_any_flush_rebuilds_the_index_files(open_log: OpenLog) -> None:
    log = open_log(CONFIG)
    build(log)
    paths = [s.txn_index.path for s in log.segments]
    assert not any(p is not None and p.exists() and p.stat().st_size for p in paths)  # written at a flush
    log.close_without_flush()
    for snap in log.directory.glob("*.snapshot"):
        snap.unlink()  # no snapshot either: everything from the batches
    log = open_log(CONFIG, high_watermark=14)
    assert [s.txn_index.entries for s in log.segments] == EXPECTED_ENTRIES
    assert log.segments[2].txn_index.path is not None
    assert log.segments[2].txn_index.path.read_bytes() == struct.pack(">hqqqq", 0, C, 4, 10, 11)
    assert log.producer_state.ongoing == {13: A} and log.last_stable_offset == 13


@pytest.mark.parametrize("damage", ["torn", "garbage", "outside"])
def test_a_damaged_index_of_a_trusted_segment_is_rebuilt(open_log: OpenLog, damage: str) -> None:
    log = open_log(CONFIG)
    build(log)
    before = view(log)
    log.close()
    path = log.segments[2].txn_index.path
    assert path is not None
    good = path.read_bytes()
    if damage == "torn":
        path.write_bytes(good[:-5])
    elif damage == "garbage":
        path.write_bytes(b"\x00\x07" + good[2:])  # an unknown version
    else:
        path.write_bytes(struct.pack(">hqqqq", 0, C, 4, 99, 11))  # a marker past the segment
    log = open_log(CONFIG, clean_shutdown=True, high_watermark=14)
    assert view(log) == before and path.read_bytes() == good


def test_a_torn_index_of_an_unflushed_segment_is_not_trusted(open_log: OpenLog) -> None:
    log = open_log(CONFIG)
    build(log)
    log.flush()
    append(log, data(B, 1))  # 14
    marker(log, B, False, coordinator_epoch=1)  # 15: in the active segment, after the flush
    before = view(log)
    log.close_without_flush()
    path = log.segments[-1].txn_index.path
    assert path is not None and path.exists()  # created with the entry; its bytes come at a flush
    path.write_bytes(struct.pack(">hqqqq", 0, B, 14, 15, 16)[:20])
    log = open_log(CONFIG, high_watermark=14, recovery_point=log.recovery_point)
    assert view(log) == before
    assert log.segments[-1].txn_index.entries == [AbortedTxn(B, 14, 15, 13)]  # A (13) was still open


def test_version_1_snapshots_still_load(open_log: OpenLog) -> None:
    # The first snapshot format: producer id, epoch, batch count, then the batches.
    meta = BatchMetadata(0, 2, 0, 2, 1_002)
    body = struct.pack(">i", 1) + struct.pack(">qhb", A, 4, 1) + struct.pack(">iiqqq", 0, 2, 0, 2, 1_002)
    v1 = struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    assert ProducerStateManager.from_snapshot(v1) == {A: ProducerEntry(A, 4, [meta], -1, None, 1_002)}
    log = open_log()
    append(log, data(A, 0, 3, epoch=4, transactional=False))
    log.close()
    (snapshot,) = log.directory.glob("*.snapshot")
    snapshot.write_bytes(v1)
    log = open_log(clean_shutdown=True)
    assert log.append_as_leader(data(A, 0, 3, epoch=4, transactional=False), 0, 1).duplicate
    assert log.producer_state.active()[0].coordinator_epoch == -1


def test_snapshots_carry_open_transactions(open_log: OpenLog) -> None:
    log = open_log()
    append(log, data(A, 0))
    marker(log, A, True, coordinator_epoch=3)
    append(log, data(A, 1))  # 2: open
    log.close()
    # Loaded from the snapshot at the log end, not replayed.
    state = ProducerStateManager()
    (snapshot,) = log.directory.glob("*.snapshot")
    state.load(ProducerStateManager.from_snapshot(snapshot.read_bytes()))
    assert state.ongoing == {2: A} and state.producers[A].coordinator_epoch == 3
    log = open_log(clean_shutdown=True, high_watermark=3)
    assert log.producer_state.ongoing == {2: A} and log.last_stable_offset == 2
    entry = log.producer_state.get(A)
    assert entry is not None and entry.coordinator_epoch == 3


def test_the_cleaner_keeps_markers_transactions_and_their_index(open_log: OpenLog) -> None:
    config = LogConfig(segment_bytes=300, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
    log = open_log(config)
    append(log, keyed_batch([(b"k", b"old")]))  # 0
    append(log, data(A, 0, keys=[b"k"]))  # 1: A writes k, then aborts
    log.roll()
    marker(log, A, False)  # 2
    append(log, keyed_batch([(b"j", b"1")]))  # 3
    append(log, keyed_batch([(b"j", b"2")]))  # 4
    log.roll()
    append(log, data(B, 0, keys=[b"j"]))  # 5: B open
    append(log, keyed_batch([(b"j", b"3")]))  # 6
    log.roll()
    log.high_watermark = log.log_end_offset
    entries = [s.txn_index.entries for s in log.segments]
    assert entries[1] == [AbortedTxn(A, 1, 2, 3)]
    # LogCleanerManager.cleanableOffsets: nothing past the last stable offset (5, B open).
    assert cleanable_range(log, None, 0).end_offset == 5
    assert clean_log(log, cleanable_range(log, None, 0)) is not None
    kept = [o for o, _, _, _ in read_all(log)]
    # The aborted write of k does not hide the older k; the marker stays; j's first value goes;
    # nothing past the last stable offset is touched.
    assert kept == [0, 1, 2, 4, 5, 6]
    headers = [h for s in log.segments for _, h in s.iter_headers()]
    assert [h.base_offset for h in headers if h.is_control] == [2]
    assert log.collect_aborted(0, 7) == [(A, 1)]
    assert [s.txn_index.entries for s in log.segments if s.txn_index.entries] == [[AbortedTxn(A, 1, 2, 3)]]
    log.validate_state()
    log.close()
    log = open_log(config, clean_shutdown=True, high_watermark=7)
    assert log.collect_aborted(0, 7) == [(A, 1)] and log.last_stable_offset == 5
    log.validate_state()


def test_a_cleaned_group_never_holds_a_segment_with_aborted_transactions_after_its_first(
    open_log: OpenLog,
) -> None:
    config = LogConfig(segment_bytes=10_000, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
    log = open_log(config)
    for i in range(3):
        append(log, keyed_batch([(b"k", b"%d" % i)]))
        log.roll()
    append(log, data(C, 0, keys=[b"c"]))
    marker(log, C, False)  # segment 3 has an aborted transaction
    log.roll()
    append(log, keyed_batch([(b"k", b"x")]))
    log.roll()
    log.high_watermark = log.log_end_offset
    assert clean_log(log, cleanable_range(log, None, 0)) is not None
    # Segments 0-2 became one; segment 3 started its own group and kept its index file.
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    assert log.segments[1].txn_index.entries == [AbortedTxn(C, 3, 4, 5)]
    log.close()
    log = open_log(config, clean_shutdown=True, high_watermark=7)
    assert log.collect_aborted(0, 7) == [(C, 3)]
    log.validate_state()


class Crash(BaseException):
    """The process dying at a step of a clean (not an Exception: nothing tidies up after it)."""


def _compacted_log_with_an_abort(open_log: OpenLog) -> PartitionLog:
    config = LogConfig(segment_bytes=10_000, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0)
    log = open_log(config)
    append(log, keyed_batch([(b"k", b"0")]))  # 0
    log.roll()
    append(log, data(C, 0, keys=[b"c"]))  # 1
    append(log, keyed_batch([(b"k", b"1")]))  # 2
    log.roll()
    marker(log, C, False)  # 3
    append(log, keyed_batch([(b"k", b"2")]))  # 4
    log.roll()
    log.high_watermark = log.log_end_offset
    log.flush()  # everything trusted: a reopen reads the index files
    return log


def test_a_crash_at_any_step_of_a_clean_keeps_the_transaction_index(open_log: OpenLog) -> None:
    probe = _compacted_log_with_an_abort(open_log)
    steps: list[str] = []
    assert clean_log(probe, cleanable_range(probe, None, 0), on_step=steps.append) is not None
    assert probe.collect_aborted(0, 5) == [(C, 1)]
    probe.close()
    assert "old-renamed-deleted" in steps
    for step in steps:
        for path in probe.directory.iterdir():
            path.unlink()

        def crash_at(name: str, step: str = step) -> None:
            if name == step:
                raise Crash

        log = _compacted_log_with_an_abort(open_log)
        with pytest.raises(Crash):
            clean_log(log, cleanable_range(log, None, 0), on_step=crash_at)
        log.close_without_flush()
        log = open_log(log.config, clean_shutdown=True, recovery_point=5, high_watermark=5)
        assert log.collect_aborted(0, 5) == [(C, 1)], step
        entries = {s.base_offset: s.txn_index.entries for s in log.segments if s.txn_index.entries}
        assert entries == {3: [AbortedTxn(C, 1, 3, 4)]}, step
        log.validate_state()
        log.close()
