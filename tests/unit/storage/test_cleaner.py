"""The cleaner's map and keep rules, its choice of log, and whole cleans of real log directories."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest
from _cleaner_support import keyed_batch, latest_per_key, read_all
from conftest import FakeClock
from kafka.record.default_records import DefaultRecordBatch

from headwater.metadata.configs import validate_topic_configs
from headwater.protocol.errors import ErrorCode, KafkaError, RecordValidationError
from headwater.records.batch import iter_batches, parse_header
from headwater.records.records import batch_records, iter_records
from headwater.storage import LogConfig, PartitionLog
from headwater.storage.cleaner import (
    CLEANER_OFFSET_CHECKPOINT,
    CleanerCheckpoints,
    OffsetMap,
    choose,
    clean_log,
    cleanable_range,
    filter_batch,
    keep_record,
    map_batch,
)

OpenLog = Callable[..., PartitionLog]


# ---- pure rules ------------------------------------------------------------------------------


def test_map_keeps_latest_offset_per_key_from_the_dirty_start() -> None:
    data = keyed_batch([(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (None, b"x")])
    header = parse_header(data)
    m = OffsetMap()
    map_batch(m, data, header, from_offset=0)
    assert m.offsets == {b"a": 2, b"b": 1}
    m2 = OffsetMap()
    map_batch(m2, data, header, from_offset=2)  # offsets below the dirty start are already clean
    assert m2.offsets == {b"a": 2}


def test_keep_rule() -> None:
    m = OffsetMap()
    m.put(b"k", 10)
    assert not keep_record(b"k", True, 9, m, retain_tombstones=True)  # superseded
    assert keep_record(b"k", True, 10, m, retain_tombstones=True)  # the latest
    assert keep_record(b"other", True, 3, m, retain_tombstones=True)  # a key the dirty part never touched
    assert keep_record(b"k", False, 10, m, retain_tombstones=True)  # a tombstone within delete.retention.ms
    assert not keep_record(b"k", False, 10, m, retain_tombstones=False)  # an old tombstone
    assert not keep_record(None, True, 11, m, retain_tombstones=True)  # no key


def test_offset_map_budget() -> None:
    m = OffsetMap(capacity_bytes=250)
    m.put(b"a", 1)
    m.put(b"a", 2)  # the same key costs nothing more
    assert not m.full
    m.put(b"b", 3)
    m.put(b"c", 4)
    assert m.full and len(m) == 3


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4])
def test_filter_batch_keeps_header_fields_and_offsets(compression: int) -> None:
    data = keyed_batch(
        [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"c", None), (b"b", b"2" * 50)],
        timestamp_ms=5_000,
        compression=compression,
        producer_id=7,
        producer_epoch=3,
        base_sequence=40,
    )
    raw = bytearray(data)
    raw[0:8] = (100).to_bytes(8, "big")  # as stored: base offset 100 (outside the CRC)
    header = parse_header(raw)
    m = OffsetMap()
    map_batch(m, raw, header)
    result = filter_batch(raw, header, m, retain_tombstones=False, retain_empty=False)
    assert (result.kept, result.dropped) == (2, 3)
    assert result.data is not None
    (_, out), = list(iter_batches(result.data))  # whole batch, CRC checked
    assert out.compression == compression
    for name in ("base_offset", "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id",
                 "producer_epoch", "base_sequence", "partition_leader_epoch"):
        assert getattr(out, name) == getattr(header, name), name
    assert out.record_count == 2
    recs = list(iter_records(batch_records(result.data, out), out.record_count))
    assert [(out.base_offset + r.offset_delta, r.key) for r in recs] == [(102, b"a"), (104, b"b")]


def test_filter_batch_untouched_and_empty() -> None:
    data = bytes(keyed_batch([(b"a", b"1"), (b"b", b"1")], producer_id=1, producer_epoch=0, base_sequence=0))
    header = parse_header(data)
    m = OffsetMap()
    map_batch(m, data, header)
    assert filter_batch(data, header, m, retain_tombstones=True, retain_empty=False).data == data
    m.put(b"a", 5)
    m.put(b"b", 6)
    assert filter_batch(data, header, m, retain_tombstones=True, retain_empty=False).data is None
    empty = filter_batch(data, header, m, retain_tombstones=True, retain_empty=True).data
    assert empty is not None
    (_, eh), = list(iter_batches(empty))
    assert (eh.record_count, eh.last_offset_delta, eh.producer_id, eh.base_sequence) == (0, 1, 1, 0)


def test_corrupt_records_are_refused() -> None:
    data = bytearray(keyed_batch([(b"a", b"1")]))
    header = parse_header(data)
    data[61] = 0x7E  # the record's length varint now claims 63 bytes
    with pytest.raises(ValueError):
        list(iter_records(batch_records(data, header), 1))


# ---- choosing --------------------------------------------------------------------------------


def small(**kw: object) -> LogConfig:
    base: dict[str, object] = {"segment_bytes": 1_000, "cleanup_policy": "compact", "file_delete_delay_ms": 0}
    base.update(kw)
    return LogConfig(**base)  # type: ignore[arg-type]


def fill(plog: PartitionLog, updates: list[tuple[bytes, bytes | None]], ts: int = 1_000) -> None:
    for i, (k, v) in enumerate(updates):
        plog.append_as_leader(keyed_batch([(k, v)], timestamp_ms=ts + i), 0, ts + i)
    plog.high_watermark = plog.log_end_offset


def test_cleanable_range_and_choice(tmp_path: Path, clock: FakeClock) -> None:
    a = PartitionLog("a", 0, tmp_path / "a-0", small(), clock_ms=clock)
    b = PartitionLog("b", 0, tmp_path / "b-0", small(min_cleanable_dirty_ratio=0.99), clock_ms=clock)
    try:
        fill(a, [(b"k%d" % (i % 3), b"v" * 20) for i in range(50)])
        fill(b, [(b"k%d" % (i % 3), b"v" * 20) for i in range(50)])
        ca = cleanable_range(a, None, clock())
        assert ca.first_dirty == 0 and ca.end_offset == a.segments[-1].base_offset
        assert ca.clean_bytes == 0 and ca.ratio == 1.0
        # The high watermark caps the range at a segment boundary.
        a.high_watermark = a.segments[1].base_offset + 1
        assert cleanable_range(a, None, clock()).end_offset == a.segments[1].base_offset
        a.high_watermark = a.log_end_offset
        # min.compaction.lag.ms: segments with records newer than the lag wait.
        a.config = small(min_compaction_lag_ms=10 ** 9)
        assert cleanable_range(a, None, clock()).dirty_bytes == 0
        a.config = small()
        cb = cleanable_range(b, None, clock())
        assert cb.ratio == 1.0 and choose([(a, ca), (b, cb)]) in ((a, ca), (b, cb))  # both all dirty
        half = cleanable_range(a, a.segments[1].base_offset, clock())
        assert 0 < half.ratio < 1
        assert choose([(a, half), (b, cb)]) == (b, cb)  # the dirtier one first
        b.config = small(min_cleanable_dirty_ratio=1.0)
        assert choose([(b, cb)]) is None  # a ratio must be above the threshold
        c = cleanable_range(a, a.segments[-1].base_offset, clock())
        assert c.dirty_bytes == 0 and choose([(a, c)]) is None
    finally:
        a.close()
        b.close()


# ---- whole cleans ----------------------------------------------------------------------------


def test_clean_keeps_latest_per_key(open_log: OpenLog) -> None:
    plog = open_log(small())
    rng = random.Random(5)
    updates = [(b"k%02d" % rng.randrange(20), b"v%04d" % i) for i in range(250)]
    fill(plog, updates)
    before = read_all(plog)
    expected = latest_per_key(before)
    active_base = plog.segments[-1].base_offset
    c = cleanable_range(plog, None, 0)
    done = clean_log(plog, c)
    assert done is not None
    checkpoint, stats = done
    assert checkpoint == active_base
    assert stats.records_dropped > 0 and stats.bytes_written < stats.bytes_read
    plog.validate_state()
    after = read_all(plog)
    clean_part = [r for r in after if r[0] < active_base]
    # Below the active segment: exactly one record per key, the latest one, with its offset and timestamp.
    assert len({r[2] for r in clean_part}) == len(clean_part)
    for offset, ts, key, value in clean_part:
        assert key is not None
        if offset < active_base and expected[key][0] < active_base:
            assert (offset, value) == expected[key]
        assert (offset, ts, key, value) in before
    assert latest_per_key(after) == expected
    assert [r for r in after if r[0] >= active_base] == [r for r in before if r[0] >= active_base]
    # Reopening reads the same log (indexes of the cleaned segments are valid).
    plog.close()
    again = PartitionLog("t", 0, plog.directory, plog.config, clock_ms=lambda: 0, clean_shutdown=True)
    try:
        again.validate_state()
        assert read_all(again) == after
        assert again.read(active_base - 1, 1 << 20).size_bytes > 0  # fetch from inside a cleaned range
    finally:
        again.close()


def test_second_clean_from_checkpoint_and_tombstones(open_log: OpenLog, clock: FakeClock) -> None:
    plog = open_log(small(delete_retention_ms=1_000))
    fill(plog, [(b"a", b"1"), (b"b", b"1")] * 10, ts=1_000)
    fill(plog, [(b"a", None)], ts=2_000)  # delete a
    fill(plog, [(b"b", b"%d" % i) for i in range(20)], ts=2_100)
    first = clean_log(plog, cleanable_range(plog, None, clock()))
    assert first is not None
    ckpt = first[0]
    keys = {(k, v) for _, _, k, v in read_all(plog) if k == b"a"}
    assert keys == {(b"a", None)}  # the tombstone stays: nothing was clean before
    # Much later data: the clean part's newest timestamp moves past the tombstone + delete.retention.ms.
    fill(plog, [(b"b", b"x%d" % i) for i in range(30)], ts=10_000)
    c = cleanable_range(plog, ckpt, clock())
    assert c.first_dirty == ckpt and c.clean_bytes > 0
    second = clean_log(plog, c)
    assert second is not None
    fill(plog, [(b"c", b"x%d" % i) for i in range(30)], ts=20_000)
    third = clean_log(plog, cleanable_range(plog, second[0], clock()))
    assert third is not None
    assert all(k != b"a" for _, _, k, _ in read_all(plog))  # the delete took the key with it
    plog.validate_state()


def test_idempotent_producer_state_survives_clean(open_log: OpenLog) -> None:
    plog = open_log(small())
    for i in range(30):
        plog.append_as_leader(keyed_batch([(b"k", b"%d" % i)], producer_id=9, producer_epoch=0, base_sequence=i), 0, 1_000 + i)
    for i in range(30):
        plog.append_as_leader(keyed_batch([(b"k", b"z%d" % i)]), 0, 2_000 + i)  # supersedes all of pid 9's records
    plog.high_watermark = plog.log_end_offset
    plog.roll()
    assert clean_log(plog, cleanable_range(plog, None, 0)) is not None
    headers = [h for seg in plog.segments for _, h in seg.iter_headers()]
    mine = [h for h in headers if h.producer_id == 9]
    # Every record of pid 9 is gone; its last batch stays as an empty header (others may stay
    # empty too, where a whole group of segments emptied and keeps its last batch).
    assert mine and all(h.record_count == 0 for h in mine) and mine[-1].base_sequence == 29
    assert sum(h.record_count for h in headers if h.producer_id == -1 and h.base_offset < 60) <= 1
    plog.close()
    again = PartitionLog("t", 0, plog.directory, plog.config, clock_ms=lambda: 0)
    try:
        entry = again.producer_state.get(9)
        assert entry is not None and entry.last_sequence == 29
        # The next sequence is accepted, a gap is not.
        again.append_as_leader(keyed_batch([(b"k", b"n")], producer_id=9, producer_epoch=0, base_sequence=30), 0, 3_000)
        with pytest.raises(KafkaError) as e:
            again.append_as_leader(keyed_batch([(b"k", b"n")], producer_id=9, producer_epoch=0, base_sequence=40), 0, 3_000)
        assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    finally:
        again.close()


def test_produce_without_key_to_compacted_topic_is_invalid_record(open_log: OpenLog) -> None:
    plog = open_log(small())
    for compression in (0, 1):
        with pytest.raises(RecordValidationError) as e:
            plog.append_as_leader(keyed_batch([(b"k", b"v"), (None, b"v"), (b"k", None), (None, None)],
                                              compression=compression), 0, 1)
        assert e.value.code == ErrorCode.INVALID_RECORD
        assert [i for i, _ in e.value.record_errors] == [1, 3]
        assert "Compacted topic cannot accept message without key in topic partition t-0" in e.value.record_errors[0][1]
    assert plog.log_end_offset == 0
    plog.append_as_leader(keyed_batch([(b"k", b"v"), (b"k", None)]), 0, 1)  # keys, tombstone: fine
    plog.config = small(cleanup_policy="delete")
    plog.append_as_leader(keyed_batch([(None, b"v")]), 0, 1)  # not compacted: a key is optional
    assert plog.log_end_offset == 3


def test_compact_alone_ignores_time_retention(open_log: OpenLog) -> None:
    compact = open_log(small(retention_ms=1))
    fill(compact, [(b"k%d" % i, b"v" * 30) for i in range(40)])
    segments = len(compact.segments)
    assert compact.enforce_retention(now_ms=10 ** 9) == 0 and len(compact.segments) == segments
    compact.config = small(retention_ms=1, cleanup_policy="compact,delete")
    assert compact.enforce_retention(now_ms=10 ** 9) == segments  # the active one too (a new one starts)


def test_map_budget_cleans_in_several_runs(open_log: OpenLog) -> None:
    plog = open_log(small())
    fill(plog, [(b"key-%03d" % (i % 60), b"v%d" % i) for i in range(200)])
    expected = latest_per_key(read_all(plog))
    c = cleanable_range(plog, None, 0)
    done = clean_log(plog, c, map_capacity_bytes=3_000)  # about 28 keys: stops after a few segments
    assert done is not None and done[0] < c.end_offset
    ckpt = done[0]
    while True:
        c = cleanable_range(plog, ckpt, 0)
        if c.dirty_bytes == 0:
            break
        more = clean_log(plog, c, map_capacity_bytes=3_000)
        assert more is not None and more[0] > ckpt
        ckpt = more[0]
    assert latest_per_key(read_all(plog)) == expected
    plog.validate_state()


def test_checkpoint_file(tmp_path: Path) -> None:
    cps = CleanerCheckpoints([tmp_path])
    assert cps.get(tmp_path, "t", 0) is None
    cps.update(tmp_path, "t", 0, 42, {("t", 0), ("u", 1)})
    cps.update(tmp_path, "u", 1, 7, {("u", 1)})  # t-0 is gone: its entry goes too
    text = (tmp_path / CLEANER_OFFSET_CHECKPOINT).read_text()
    assert text == "0\n1\nu 1 7\n"
    assert CleanerCheckpoints([tmp_path]).get(tmp_path, "u", 1) == 7


def test_config_parsing() -> None:
    cfg = LogConfig.from_properties({"cleanup.policy": "delete, compact", "min.cleanable.dirty.ratio": "0.25",
                                     "delete.retention.ms": "5", "max.compaction.lag.ms": "100"})
    assert (cfg.cleanup_policy, cfg.compact, cfg.delete) == ("compact,delete", True, True)
    assert (cfg.min_cleanable_dirty_ratio, cfg.delete_retention_ms, cfg.max_compaction_lag_ms) == (0.25, 5, 100)
    assert LogConfig.from_properties(cfg.to_properties()) == cfg
    for bad in ({"cleanup.policy": "shred"}, {"min.cleanable.dirty.ratio": "2"}, {"delete.retention.ms": "-1"},
                {"min.cleanable.dirty.ratio": "x"}):
        with pytest.raises(KafkaError) as e:
            LogConfig.from_properties(bad)
        assert e.value.code == ErrorCode.INVALID_CONFIG


def test_swap_refused_when_retention_took_the_segments(open_log: OpenLog) -> None:
    plog = open_log(small())
    fill(plog, [(b"k%d" % (i % 5), b"v%03d" % i) for i in range(80)])
    second = plog.segments[1].base_offset
    done_once = False

    def retention_meanwhile(name: str) -> None:
        nonlocal done_once
        if name == "swap-synced" and not done_once:
            done_once = True
            plog.delete_records_before(second)  # DeleteRecords: the first segment (the first group) goes

    c = cleanable_range(plog, None, 0)
    done = clean_log(plog, c, on_step=retention_meanwhile)
    assert done is not None
    checkpoint, stats = done
    assert stats.groups_refused == 1 and checkpoint == c.first_dirty  # the next run maps everything again
    assert not [p for p in plog.directory.iterdir() if p.name.endswith((".swap", ".cleaned"))]
    assert plog.log_start_offset == second
    plog.validate_state()
    records = read_all(plog)
    assert latest_per_key(records) == latest_per_key([r for r in records if r[0] >= second])


def test_follower_append_accepts_the_gaps_of_a_cleaned_leader(open_log: OpenLog, tmp_path: Path) -> None:
    leader = open_log(small())
    fill(leader, [(b"k%d" % (i % 3), b"v%03d" % i) for i in range(60)])
    assert clean_log(leader, cleanable_range(leader, None, 0)) is not None
    follower = PartitionLog("t", 0, tmp_path / "follower" / "t-0", small(), clock_ms=lambda: 0)
    try:
        offset = 0
        while offset < leader.log_end_offset:
            chunk = leader.read(offset, 300).read()
            result = follower.append_as_follower(chunk)
            offset = result.last_offset + 1
        assert follower.log_end_offset == leader.log_end_offset
        follower.high_watermark = follower.log_end_offset
        assert read_all(follower) == read_all(leader)
        follower.validate_state()
        with pytest.raises(KafkaError) as e:
            follower.append_as_follower(leader.read(0, 300).read())  # below the log end: refused
        assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    finally:
        follower.close()


def test_cleaned_part_never_ends_in_a_gap(open_log: OpenLog) -> None:
    plog = open_log(small(cleanup_policy="delete"))
    fill(plog, [(b"k%d" % (i % 4), b"v" * 30) for i in range(40)])
    plog.append_as_leader(keyed_batch([(None, b"written before the topic was compacted")]), 0, 2_000)
    plog.roll()  # the keyless record ends the last segment before an empty active one
    plog.high_watermark = plog.log_end_offset
    plog.config = small()
    assert clean_log(plog, cleanable_range(plog, None, 0)) is not None
    segs = plog.segments
    assert segs[-1].size_bytes == 0 and segs[-2].next_offset == segs[-1].base_offset == plog.log_end_offset
    last = list(segs[-2].iter_headers())[-1][1]
    assert last.record_count == 0 and last.last_offset == plog.log_end_offset - 1
    assert all(k is not None for _, _, k, _ in read_all(plog))


def test_file_slices_taken_before_a_clean_stay_readable(open_log: OpenLog, clock: FakeClock) -> None:
    plog = open_log(small(file_delete_delay_ms=60_000))
    fill(plog, [(b"k%d" % (i % 3), b"v%03d" % i) for i in range(60)])
    in_flight = plog.read(0, 1 << 20)  # a fetch response being sent while the cleaner swaps
    before = in_flight.read()
    assert clean_log(plog, cleanable_range(plog, None, clock())) is not None
    assert any(p.name.endswith(".deleted") for p in plog.directory.iterdir())
    assert plog.delete_expired_files(clock()) == 0  # not before file.delete.delay.ms
    assert in_flight.read() == before
    clock.now_ms += 60_000
    assert plog.delete_expired_files(clock()) > 0
    assert not any(p.name.endswith(".deleted") for p in plog.directory.iterdir())


def test_record_walk_matches_kafka_python_for_all_varint_widths() -> None:
    rng = random.Random(3)
    records: list[tuple[bytes | None, bytes | None]] = []
    for i in range(300):  # offset deltas up to 299: one and two byte varints
        key = None if i % 17 == 0 else b"k" * rng.choice([1, 63, 64, 200, 9_000])
        value = None if i % 11 == 0 else b"v" * rng.choice([0, 1, 62, 63, 64, 8_191, 8_192, 70_000])
        records.append((key, value))
    data = keyed_batch(records)
    header = parse_header(data)
    walked = [(r.offset_delta, r.key, r.has_value) for r in iter_records(batch_records(data, header), header.record_count)]
    expected = [(r.offset, r.key, r.value is not None) for r in DefaultRecordBatch(bytes(data))]
    assert walked == expected


def test_topic_config_validation_of_cleaner_keys() -> None:
    validate_topic_configs({"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.3",
                            "min.compaction.lag.ms": "10", "max.compaction.lag.ms": "10"})
    for bad in ({"cleanup.policy": "compact,shred"}, {"min.cleanable.dirty.ratio": "1.5"},
                {"delete.retention.ms": "-1"}, {"max.compaction.lag.ms": "0"},
                {"min.compaction.lag.ms": "11", "max.compaction.lag.ms": "10"}):
        with pytest.raises(KafkaError) as e:
            validate_topic_configs(bad)
        assert e.value.code == ErrorCode.INVALID_CONFIG, bad


def test_max_compaction_lag_rolls_the_active_segment(open_log: OpenLog) -> None:
    plog = open_log(small(segment_bytes=1 << 20, max_compaction_lag_ms=1_000))
    plog.append_as_leader(keyed_batch([(b"k", b"1")]), 0, 10_000)
    plog.append_as_leader(keyed_batch([(b"k", b"2")]), 0, 10_500)
    assert len(plog.segments) == 1
    plog.append_as_leader(keyed_batch([(b"k", b"3")]), 0, 11_001)  # the active segment is older than 1 s
    assert len(plog.segments) == 2
    assert LogConfig(segment_ms=5_000, max_compaction_lag_ms=1_000).max_segment_ms == 5_000  # not compacted
