"""The follower's FetchRequest v12 writer must write what Kafka's FetchRequest.json (v12: flexible,
topic names, session fields, forgotten topics, rack id) describes: the schema-driven codec reads every
field back, and so does the broker's own strict request parser."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchRequest

from headwater.protocol.fetch import encode_follower_fetch_request
from headwater.protocol.strict import decode_body

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
partitions = st.lists(st.tuples(st.integers(0, 2**31 - 1), i32, i64, i32, i64, i32), max_size=3)
topics = st.lists(st.tuples(st.text(min_size=1, max_size=20), partitions), max_size=3)
forgotten = st.lists(st.tuples(st.text(min_size=1, max_size=20), st.lists(st.integers(0, 2**31 - 1), max_size=3)),
                     max_size=2)


@given(replica=st.integers(0, 2**31 - 1), wait=i32, min_bytes=i32, max_bytes=i32, session=i32, epoch=i32,
       topics=topics, forgotten=forgotten)
def test_the_codec_reads_every_field(replica: int, wait: int, min_bytes: int, max_bytes: int, session: int, epoch: int,
                                     topics: list, forgotten: list) -> None:
    body = encode_follower_fetch_request(replica, wait, min_bytes, max_bytes, session, epoch, topics, forgotten)
    for req in (FetchRequest.decode(body, version=12), decode_body(FetchRequest, 12, memoryview(body))):
        assert (req.replica_id, req.max_wait_ms, req.min_bytes, req.max_bytes, req.isolation_level) == (
            replica, wait, min_bytes, max_bytes, 0)
        assert (req.session_id, req.session_epoch, req.rack_id) == (session, epoch, "")
        assert [(t.topic, [(p.partition, p.current_leader_epoch, p.fetch_offset, p.last_fetched_epoch,
                            p.log_start_offset, p.partition_max_bytes) for p in t.partitions])
                for t in req.topics] == [(name, list(ps)) for name, ps in topics]
        assert [(f.topic, list(f.partitions)) for f in req.forgotten_topics_data] == [
            (name, list(ps)) for name, ps in forgotten]


def test_a_replica_fetch_of_one_partition_byte_for_byte() -> None:
    """Written out from the v12 layout: the fixed fields, compact arrays (count + 1), a compact
    string topic, one partition with its empty tag section, no forgotten topics, rack "" and no tags."""
    body = encode_follower_fetch_request(2, 500, 1, 10485760, 7, 3, [("t", [(0, 5, 100, 4, 0, 1048576)])], [])
    assert body == bytes.fromhex(
        "00000002" "000001f4" "00000001" "00a00000" "00" "00000007" "00000003"
        "02" "0274" "02" "00000000" "00000005" "0000000000000064" "00000004" "0000000000000000" "00100000" "00" "00"
        "01" "01" "00")
