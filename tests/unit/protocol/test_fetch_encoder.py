"""The hand-written FetchResponse writer must agree with the schema-driven codec, field for field."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchResponse

from headwater.protocol.fetch import (
    BytesPart,
    FetchPartitionData,
    FetchTopicData,
    NodeEndpoint,
    encode_fetch_response,
)


def _join(parts: list) -> bytes:
    return b"".join(p if isinstance(p, bytes) else p.data for p in parts)


def _decode(buf: bytes, version: int) -> FetchResponse:
    header = 9 if version >= 12 else 8  # size + correlation id (+ empty tag section)
    return FetchResponse.decode(buf[header:], version=version)


partition_strategy = st.builds(
    FetchPartitionData,
    partition=st.integers(0, 2**31 - 1),
    error_code=st.integers(0, 100),
    high_watermark=st.integers(-1, 2**62),
    last_stable_offset=st.integers(-1, 2**62),
    log_start_offset=st.integers(-1, 2**62),
    records=st.lists(st.binary(min_size=0, max_size=64).map(BytesPart), max_size=3),
    preferred_read_replica=st.integers(-1, 10),
    diverging_epoch=st.none() | st.tuples(st.integers(0, 1000), st.integers(0, 2**40)),
    current_leader=st.none() | st.tuples(st.integers(0, 1000), st.integers(0, 1000)),
    aborted_transactions=st.none() | st.lists(st.tuples(st.integers(0, 2**62), st.integers(0, 2**62)), max_size=3),
)


@given(
    version=st.integers(4, 17),
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    topics=st.lists(
        st.builds(FetchTopicData, name=st.text(min_size=1, max_size=20), topic_id=st.uuids(),
                  partitions=st.lists(partition_strategy, max_size=3)),
        max_size=3,
    ),
    endpoints=st.lists(st.builds(NodeEndpoint, st.integers(0, 100), st.text(max_size=10), st.integers(0, 65535),
                                 st.none() | st.text(max_size=5)), max_size=2),
)
def test_matches_codec(version: int, correlation_id: int, topics: list[FetchTopicData], endpoints: list[NodeEndpoint]) -> None:
    parts, size = encode_fetch_response(version, correlation_id, topics, throttle_time_ms=7, error_code=0,
                                        session_id=0, node_endpoints=endpoints)
    buf = _join(parts)
    assert len(buf) == size + 4
    assert int.from_bytes(buf[4:8], "big", signed=True) == correlation_id
    resp = _decode(buf, version)
    assert resp.throttle_time_ms == 7
    assert len(resp.responses) == len(topics)
    for got_t, want_t in zip(resp.responses, topics, strict=True):
        if version >= 13:
            assert got_t.topic_id == want_t.topic_id
        else:
            assert got_t.topic == want_t.name
        for got, want in zip(got_t.partitions, want_t.partitions, strict=True):
            assert got.partition_index == want.partition
            assert got.error_code == want.error_code
            assert got.high_watermark == want.high_watermark
            assert got.last_stable_offset == want.last_stable_offset
            if version >= 5:
                assert got.log_start_offset == want.log_start_offset
            if version >= 11:
                assert got.preferred_read_replica == want.preferred_read_replica
            assert (got.records or b"") == b"".join(r.data for r in want.records)
            if want.aborted_transactions is None:
                assert got.aborted_transactions is None
            else:
                assert [(a.producer_id, a.first_offset) for a in got.aborted_transactions] == list(want.aborted_transactions)
            if version >= 12 and want.current_leader is not None:
                assert (got.current_leader.leader_id, got.current_leader.leader_epoch) == want.current_leader
            if version >= 12 and want.diverging_epoch is not None:
                assert (got.diverging_epoch.epoch, got.diverging_epoch.end_offset) == want.diverging_epoch
    if version >= 16:
        assert [(e.node_id, e.host, e.port, e.rack) for e in (resp.node_endpoints or [])] == [
            (e.node_id, e.host, e.port, e.rack) for e in endpoints
        ]


def test_records_stay_separate_parts() -> None:
    """Record runs are handed back as the objects given, not copied into the header bytes."""
    records = BytesPart(b"x" * 1000)
    parts, _ = encode_fetch_response(12, 1, [FetchTopicData("t", uuid.uuid4(), [FetchPartitionData(0, records=[records])])])
    assert any(p is records for p in parts)
    assert all(len(p) < 100 for p in parts if isinstance(p, bytes))


def test_rejects_unknown_version() -> None:
    with pytest.raises(ValueError):
        encode_fetch_response(18, 1, [])
