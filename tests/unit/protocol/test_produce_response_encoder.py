"""The ProduceResponse writer must write, byte for byte, what the schema-driven codec writes from
Kafka's ProduceResponse.json for every version the broker answers (3-11): flexible from v9, log start
offset from v5, record errors and the error message from v8."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.producer import ProduceResponse

from headwater.protocol.frame import response_header
from headwater.protocol.produce import PartitionResult, encode_produce_response

T = ProduceResponse.TopicProduceResponse
P = T.PartitionProduceResponse

i64 = st.integers(-(2**63), 2**63 - 1)
messages = st.none() | st.text(max_size=30)
results = st.builds(PartitionResult, st.integers(0, 2**31 - 1), st.integers(-1, 120), i64, i64, i64,
                    st.lists(st.tuples(st.integers(0, 2**31 - 1), messages), max_size=2), messages)


def _codec_frame(version: int, correlation_id: int, topics: list, throttle: int) -> bytes:
    resp = ProduceResponse(version=version, throttle_time_ms=throttle, responses=[
        T(name=name, partition_responses=[
            P(index=r.index, error_code=r.error_code, base_offset=r.base_offset, log_append_time_ms=r.log_append_time_ms,
              log_start_offset=r.log_start_offset, error_message=r.error_message,
              record_errors=[P.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                             for i, m in r.record_errors])
            for r in parts]) for name, parts in topics])
    body = response_header(correlation_id, version >= 9) + resp.encode(version=version)
    return struct.pack(">i", len(body)) + body


@given(version=st.integers(3, 11), correlation_id=st.integers(-(2**31), 2**31 - 1),
       topics=st.lists(st.tuples(st.text(min_size=1, max_size=12), st.lists(results, max_size=3)), max_size=3),
       throttle=st.integers(0, 2**31 - 1))
def test_writes_what_the_codec_writes(version: int, correlation_id: int, topics: list, throttle: int) -> None:
    assert encode_produce_response(version, correlation_id, topics, throttle) == _codec_frame(
        version, correlation_id, topics, throttle)


def test_a_version_the_broker_does_not_answer_is_refused() -> None:
    with pytest.raises(ValueError, match="v12"):
        encode_produce_response(12, 1, [])
