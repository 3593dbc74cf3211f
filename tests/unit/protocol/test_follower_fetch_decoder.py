"""The follower's FetchResponse v12 reader must read what the schema-driven codec writes (Kafka's
FetchResponse.json, v12: flexible, topic names, aborted transactions, the diverging-epoch and
current-leader tags), hand the records over as a view of the frame, and refuse a cut-off frame."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchResponse

from headwater.protocol.fetch import decode_follower_fetch_response
from headwater.protocol.frame import MalformedFrameError

P = FetchResponse.FetchableTopicResponse.PartitionData

partitions = st.builds(
    lambda index, error, hw, lso, start, aborted, records, diverging, leader: P(
        partition_index=index, error_code=error, high_watermark=hw, last_stable_offset=lso, log_start_offset=start,
        aborted_transactions=None if aborted is None else [
            P.AbortedTransaction(producer_id=pid, first_offset=off) for pid, off in aborted],
        preferred_read_replica=-1, records=records,
        diverging_epoch=P.EpochEndOffset(epoch=diverging[0], end_offset=diverging[1]) if diverging else None,
        current_leader=P.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1]) if leader else None,
    ),
    st.integers(0, 2**31 - 1), st.integers(0, 120), st.integers(-1, 2**62), st.integers(-1, 2**62),
    st.integers(-1, 2**62), st.none() | st.lists(st.tuples(st.integers(0, 2**62), st.integers(0, 2**62)), max_size=2),
    st.none() | st.binary(max_size=300), st.none() | st.tuples(st.integers(0, 1000), st.integers(0, 2**40)),
    st.none() | st.tuples(st.integers(0, 1000), st.integers(0, 1000)),
)


def _frame(correlation_id: int, resp: FetchResponse) -> bytes:
    return struct.pack(">i", correlation_id) + b"\x00" + resp.encode(version=12)


@given(correlation_id=st.integers(-(2**31), 2**31 - 1), error=st.integers(0, 120), session=st.integers(0, 2**31 - 1),
       topics=st.lists(st.tuples(st.text(min_size=1, max_size=12), st.lists(partitions, max_size=3)), max_size=3))
def test_reads_what_the_codec_writes(correlation_id: int, error: int, session: int, topics: list) -> None:
    resp = FetchResponse(version=12, throttle_time_ms=3, error_code=error, session_id=session, responses=[
        FetchResponse.FetchableTopicResponse(topic=name, partitions=parts) for name, parts in topics])
    got = decode_follower_fetch_response(bytearray(_frame(correlation_id, resp)))
    assert (got.correlation_id, got.error_code, got.session_id) == (correlation_id, error, session)
    assert [t.topic for t in got.responses] == [name for name, _ in topics]
    for got_t, (_name, want_parts) in zip(got.responses, topics, strict=True):
        for g, w in zip(got_t.partitions, want_parts, strict=True):
            assert (g.partition_index, g.error_code, g.high_watermark, g.log_start_offset) == (
                w.partition_index, w.error_code, w.high_watermark, w.log_start_offset)
            assert (None if g.records is None else bytes(g.records)) == w.records
            if w.diverging_epoch is None:
                assert g.diverging_epoch is None
            else:
                assert g.diverging_epoch is not None
                assert (g.diverging_epoch.epoch, g.diverging_epoch.end_offset) == (
                    w.diverging_epoch.epoch, w.diverging_epoch.end_offset)


def test_records_are_a_view_of_the_frame_not_a_copy() -> None:
    records = bytes(range(256)) * 64
    resp = FetchResponse(version=12, throttle_time_ms=0, error_code=0, session_id=1, responses=[
        FetchResponse.FetchableTopicResponse(topic="t", partitions=[P(
            partition_index=0, error_code=0, high_watermark=5, last_stable_offset=5, log_start_offset=0,
            aborted_transactions=None, preferred_read_replica=-1, records=records)])])
    frame = bytearray(_frame(7, resp))
    got = decode_follower_fetch_response(frame).responses[0].partitions[0].records
    assert isinstance(got, memoryview) and bytes(got) == records
    frame[frame.index(records[:64])] ^= 0xFF  # the view sees a change of the frame's bytes
    assert got[0] == records[0] ^ 0xFF


def test_a_cut_off_frame_is_refused() -> None:
    resp = FetchResponse(version=12, throttle_time_ms=0, error_code=0, session_id=1, responses=[
        FetchResponse.FetchableTopicResponse(topic="orders", partitions=[P(
            partition_index=3, error_code=0, high_watermark=9, last_stable_offset=9, log_start_offset=0,
            aborted_transactions=[P.AbortedTransaction(producer_id=1, first_offset=2)], preferred_read_replica=-1,
            records=b"x" * 40, diverging_epoch=P.EpochEndOffset(epoch=2, end_offset=7))])])
    frame = _frame(1, resp)
    decode_follower_fetch_response(frame)
    for cut in range(len(frame) - 1):
        with pytest.raises(MalformedFrameError):
            decode_follower_fetch_response(frame[:cut])
