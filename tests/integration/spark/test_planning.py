"""The source's offset arithmetic and option checks, without a broker or Spark (fast)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from headwater.spark.errors import TopicSourceError
from headwater.spark.options import EARLIEST, LATEST, TopicPartition, parse_read_options, parse_write_options
from headwater.spark.ranges import (
    OffsetRange,
    limit_offsets,
    offsets_from_json,
    offsets_to_json,
    split_ranges,
)

ranges_strategy = st.lists(
    st.tuples(st.integers(0, 5), st.integers(0, 10_000), st.integers(0, 500)),
    min_size=0,
    max_size=8,
    unique_by=lambda t: t[0],
).map(lambda items: [OffsetRange("t", p, start, start + size) for p, start, size in items])


@given(ranges_strategy, st.one_of(st.none(), st.integers(1, 64)))
def test_split_covers_every_offset_once(ranges: list[OffsetRange], min_partitions: int | None) -> None:
    pieces = split_ranges(ranges, min_partitions)
    covered = sorted((r.partition, o) for r in pieces for o in range(r.from_offset, r.until_offset))
    wanted = sorted((r.partition, o) for r in ranges for o in range(r.from_offset, r.until_offset))
    assert covered == wanted
    assert all(r.size > 0 for r in pieces)
    total = sum(r.size for r in ranges)
    if min_partitions is not None:
        assert len(pieces) >= min(min_partitions, total)


@given(
    st.dictionaries(st.integers(0, 7), st.tuples(st.integers(0, 1000), st.integers(0, 5000)), min_size=1),
    st.integers(1, 10_000),
)
def test_limit_admits_exactly_the_budget(parts: dict[int, tuple[int, int]], max_rows: int) -> None:
    start = {TopicPartition("t", p): s for p, (s, _) in parts.items()}
    latest = {TopicPartition("t", p): s + backlog for p, (s, backlog) in parts.items()}
    end = limit_offsets(start, latest, max_rows)
    assert set(end) == set(latest)
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in end)
    backlog = sum(latest[tp] - start[tp] for tp in latest)
    assert sum(end[tp] - start[tp] for tp in end) == min(max_rows, backlog)


def test_offsets_json_round_trip() -> None:
    offsets = {TopicPartition("a", 0): 5, TopicPartition("a", 10): 7, TopicPartition("b", 1): 0}
    as_json = offsets_to_json(offsets)
    assert as_json == {"a": {"0": 5, "10": 7}, "b": {"1": 0}}
    assert offsets_from_json(as_json) == offsets


BASE = {"kafka.bootstrap.servers": "h:1"}


def test_read_options_follow_spark() -> None:
    opts = parse_read_options(
        {**BASE, "subscribe": "b, a", "startingoffsets": '{"a": {"0": 3, "1": -2}}'}, streaming=False
    )
    assert opts.subscription.topics == ("a", "b")
    assert opts.starting.offsets == {TopicPartition("a", 0): 3, TopicPartition("a", 1): EARLIEST}
    assert opts.ending.default == LATEST
    assert opts.fail_on_data_loss and not opts.include_headers
    stream = parse_read_options(
        {**BASE, "assign": '{"a": [1, 0]}', "maxoffsetspertrigger": "9"}, streaming=True
    )
    assert stream.starting.default == LATEST
    assert stream.subscription.assigned == (TopicPartition("a", 0), TopicPartition("a", 1))
    assert stream.max_offsets_per_trigger == 9


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({"subscribe": "a", "assign": '{"a": [0]}'}, False, "exactly one of"),
        ({}, False, "exactly one of"),
        ({"subscribe": "a", "startingoffsets": "latest"}, False, "startingOffsets=latest is not allowed"),
        ({"subscribe": "a", "endingoffsets": "earliest"}, False, "endingOffsets=earliest is not allowed"),
        ({"subscribe": "a", "endingoffsets": "latest"}, True, "batch reads only"),
        ({"subscribe": "a", "maxoffsetspertrigger": "5"}, False, "streaming reads only"),
        ({"subscribe": "a", "kafka.group.id": "g"}, False, "kafka.group.id is not supported"),
        ({"subscribe": "a", "failondataloss": "perhaps"}, False, "true or false"),
        ({"subscribe": "a", "startingoffsets": "{nope"}, False, "not valid JSON"),
        ({"subscribepattern": "("}, False, "not a valid regular expression"),
    ],
)
def test_bad_read_options(options: dict[str, str], streaming: bool, message: str) -> None:
    with pytest.raises(TopicSourceError, match=message):
        parse_read_options({**BASE, **options}, streaming=streaming)


def test_bootstrap_required_and_write_guarantees_fixed() -> None:
    with pytest.raises(TopicSourceError, match=r"kafka\.bootstrap\.servers is required"):
        parse_read_options({"subscribe": "a"}, streaming=False)
    with pytest.raises(TopicSourceError, match=r"kafka\.acks is not supported"):
        parse_write_options({**BASE, "kafka.acks": "1"})
    assert (
        parse_write_options({**BASE, "topic": "x", "kafka.linger.ms": "20"}).client_config["linger.ms"]
        == "20"
    )
