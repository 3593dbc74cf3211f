"""The hand-written LeaderAndIsr and UpdateMetadata codec agrees with kafka-python's schema classes:
the same bytes out for every shape the controller sends, the same fields in, and the same refusals."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest

from headwater.controller import effects as fx
from headwater.protocol import control_wire as cw
from headwater.protocol.apis import decode_request
from headwater.protocol.frame import MalformedFrameError
from headwater.protocol.interbroker import (
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    PartitionLeadership,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
    iter_leader_and_isr,
    leader_and_isr_request,
)
from headwater.protocol.strict import decode_body

T1, T2 = uuid.UUID(int=0x1234), uuid.UUID(int=0xABCDEF << 64)
ZERO = uuid.UUID(int=0)


def lai(topic: str, topic_id: uuid.UUID, partition: int, **kw: Any) -> fx.LeaderAndIsrPartition:
    fields: dict[str, Any] = dict(controller_epoch=3, leader=1, leader_epoch=7, isr=(1, 2), partition_epoch=12,
                                  replicas=(1, 2, 3))
    fields.update(kw)
    return fx.LeaderAndIsrPartition(topic, topic_id, partition, **fields)


def ump(topic: str, topic_id: uuid.UUID, partition: int, **kw: Any) -> fx.UpdateMetadataPartition:
    fields: dict[str, Any] = dict(controller_epoch=3, leader=1, leader_epoch=7, isr=(1, 2), partition_epoch=12,
                                  replicas=(1, 2, 3))
    fields.update(kw)
    return fx.UpdateMetadataPartition(topic, topic_id, partition, **fields)


LAI_SHAPES: dict[str, list[fx.LeaderAndIsrPartition]] = {
    "empty": [],
    "one": [lai("a", T1, 0)],
    "many": [lai(f"t{i % 7}", uuid.UUID(int=i % 7 + 1), i, leader=i % 3, isr=tuple(range(i % 4)),
                 replicas=tuple(range(i % 5 + 1))) for i in range(3000)],
    "reassigning": [lai("a", T1, 0, replicas=(1, 2, 3, 4), adding_replicas=(4,), removing_replicas=(1,), is_new=True),
                    lai("b", ZERO, 1, leader=-1, isr=(), leader_recovery_state=1),
                    lai("a", T1, 2, replicas=tuple(range(200)), isr=tuple(range(150)))],
    "names": [lai("ünïcode-topic", T2, 2_147_483_647, leader_epoch=-2, partition_epoch=0), lai("x" * 300, T1, 0)],
}
UM_SHAPES: dict[str, list[fx.UpdateMetadataPartition]] = {
    "empty": [],
    "many": [ump(f"t{i % 7}", uuid.UUID(int=i % 7 + 1), i, leader=i % 3, isr=tuple(range(i % 4)),
                 offline_replicas=(2,) if i % 11 == 0 else ()) for i in range(3000)],
    "offline and deleting": [ump("a", T1, 0, offline_replicas=(2, 3)), ump("b", ZERO, 0, leader=-2, leader_epoch=-2),
                             ump("a", T1, 1, replicas=tuple(range(200)))],
}
LEADERS = [[], [(1, "h1", 9092)], [(1, "h1", 9092), (2, "broker-two.example", 19093)]]
BROKERS = [
    [],
    [cw.LiveBroker(1, None, [(9092, "h1", "PLAINTEXT", 0)])],
    [cw.LiveBroker(1, "rack-a", [(9092, "h1", "PLAINTEXT", 0), (9093, "h1", "SSL", 1)]),
     cw.LiveBroker(2, None, []), cw.LiveBroker(3, "", [(1, "ünï", "SASL_SSL", 3)])],
]


def kafka_python_leader_and_isr(version: int, partitions: list[fx.LeaderAndIsrPartition],
                                leaders: list[tuple[int, str, int]]) -> Any:
    return leader_and_isr_request(
        version, controller_id=1, controller_epoch=3, broker_epoch=42,
        states=[PartitionLeadership(p.topic, p.partition, p.controller_epoch, p.leader, p.leader_epoch, p.isr,
                                    p.partition_epoch, p.replicas, p.adding_replicas, p.removing_replicas, p.is_new,
                                    p.leader_recovery_state) for p in partitions],
        topic_ids={p.topic: p.topic_id for p in partitions}, live_leaders=leaders)


def kafka_python_update_metadata(version: int, partitions: list[fx.UpdateMetadataPartition],
                                 brokers: list[cw.LiveBroker], **extra: Any) -> Any:
    T = UpdateMetadataRequest.UpdateMetadataTopicState
    P = T.UpdateMetadataPartitionState
    B = UpdateMetadataRequest.UpdateMetadataBroker
    E = B.UpdateMetadataEndpoint
    by_topic: dict[str, list[fx.UpdateMetadataPartition]] = {}
    for p in partitions:
        by_topic.setdefault(p.topic, []).append(p)
    return UpdateMetadataRequest(
        version=version, controller_id=1, controller_epoch=3, broker_epoch=42,
        topic_states=[T(topic_name=t, topic_id=ps[0].topic_id, partition_states=[
            P(partition_index=p.partition, controller_epoch=p.controller_epoch, leader=p.leader,
              leader_epoch=p.leader_epoch, isr=list(p.isr), zk_version=p.partition_epoch, replicas=list(p.replicas),
              offline_replicas=list(p.offline_replicas)) for p in ps]) for t, ps in by_topic.items()],
        live_brokers=[B(id=b.broker_id, rack=b.rack, endpoints=[
            E(port=port, host=host, listener=listener, security_protocol=sp) for port, host, listener, sp in b.endpoints])
            for b in brokers],
        **extra)


def assert_same(ours: Any, theirs: Any, path: str = "body") -> None:
    """Every field of our named tuple equals kafka-python's attribute of the same name."""
    if isinstance(ours, tuple) and hasattr(ours, "_fields"):
        for name in ours._fields:
            assert_same(getattr(ours, name), getattr(theirs, name), f"{path}.{name}")
    elif isinstance(ours, list | tuple):
        assert isinstance(theirs, list), path
        assert len(ours) == len(theirs), path
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            assert_same(a, b, f"{path}[{i}]")
    else:
        assert ours == theirs and type(ours) is type(theirs), f"{path}: {ours!r} != {theirs!r}"


# --- writing ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", cw.LEADER_AND_ISR_VERSIONS)
@pytest.mark.parametrize("shape", LAI_SHAPES)
@pytest.mark.parametrize("leaders", range(len(LEADERS)))
def test_leader_and_isr_bytes_are_kafka_pythons(version: int, shape: str, leaders: int) -> None:
    partitions = LAI_SHAPES[shape]
    ours = cw.leader_and_isr_body(version, controller_id=1, controller_epoch=3, broker_epoch=42,
                                  partitions=partitions, live_leaders=LEADERS[leaders])
    assert ours == kafka_python_leader_and_isr(version, partitions, LEADERS[leaders]).encode()


@pytest.mark.parametrize("version", cw.UPDATE_METADATA_VERSIONS)
@pytest.mark.parametrize("shape", UM_SHAPES)
@pytest.mark.parametrize("brokers", range(len(BROKERS)))
def test_update_metadata_bytes_are_kafka_pythons(version: int, shape: str, brokers: int) -> None:
    partitions = UM_SHAPES[shape]
    topics = cw.update_metadata_topics(version, partitions)
    ours = cw.update_metadata_body(version, controller_id=1, controller_epoch=3, broker_epoch=42, topics=topics,
                                   live_brokers=BROKERS[brokers])
    assert ours == kafka_python_update_metadata(version, partitions, BROKERS[brokers]).encode()


@pytest.mark.parametrize(("key", "cls", "response"), [(4, LeaderAndIsrRequest, LeaderAndIsrResponse),
                                                       (6, UpdateMetadataRequest, UpdateMetadataResponse)])
def test_encoded_request_frames_as_kafka_python_does(key: int, cls: Any, response: Any) -> None:
    version = 5 if key == 4 else 7
    msg = (kafka_python_leader_and_isr(version, LAI_SHAPES["one"], LEADERS[1]) if key == 4
           else kafka_python_update_metadata(version, UM_SHAPES["empty"], BROKERS[1]))
    ours = cw.EncodedRequest(key, version, msg.encode(), response)
    for m in (msg, ours):
        m.with_header(correlation_id=77, client_id="controller-1")
    assert ours.encode(header=True, framed=True) == msg.encode(header=True, framed=True)
    assert ours.encode() == msg.encode()
    assert ours.header is not None and ours.header.get_response_class() is response


def test_other_versions_are_not_written_here() -> None:
    with pytest.raises(ValueError):
        cw.leader_and_isr_body(4, controller_id=1, controller_epoch=1, broker_epoch=1, partitions=[], live_leaders=[])
    with pytest.raises(ValueError):
        cw.update_metadata_topics(6, [])
    assert not cw.reads(4, 4) and not cw.reads(6, 6) and not cw.reads(5, 5)
    assert all(cw.reads(4, v) for v in range(5, 8)) and all(cw.reads(6, v) for v in range(7, 9))


# --- reading ----------------------------------------------------------------------------------------


def both(key: int, version: int, body: bytes) -> tuple[Any, Any]:
    cls = LeaderAndIsrRequest if key == 4 else UpdateMetadataRequest
    return cw.decode(key, version, body), decode_body(cls, version, memoryview(body))


@pytest.mark.parametrize("version", cw.LEADER_AND_ISR_VERSIONS)
@pytest.mark.parametrize("shape", LAI_SHAPES)
def test_leader_and_isr_reads_as_kafka_python(version: int, shape: str) -> None:
    body = kafka_python_leader_and_isr(version, LAI_SHAPES[shape], LEADERS[2]).encode()
    ours, theirs = both(4, version, body)
    assert_same(ours, theirs)
    assert ours == theirs  # kafka-python's messages equal a tuple of their fields
    assert ours.version == theirs.version == version
    got = [(t, tid, p.partition_index) for t, tid, p in iter_leader_and_isr(ours)]
    assert got == [(t, tid, p.partition_index) for t, tid, p in iter_leader_and_isr(theirs)]


@pytest.mark.parametrize("version", cw.UPDATE_METADATA_VERSIONS)
@pytest.mark.parametrize("shape", UM_SHAPES)
@pytest.mark.parametrize("brokers", range(len(BROKERS)))
def test_update_metadata_reads_as_kafka_python(version: int, shape: str, brokers: int) -> None:
    body = kafka_python_update_metadata(version, UM_SHAPES[shape], BROKERS[brokers]).encode()
    ours, theirs = both(6, version, body)
    assert_same(ours, theirs)
    assert ours == theirs
    assert ours.version == theirs.version == version


def test_update_metadata_v8_type_tag_and_kraft_flag() -> None:
    body = kafka_python_update_metadata(8, UM_SHAPES["offline and deleting"], BROKERS[2], type=2,
                                        is_k_raft_controller=True).encode()
    ours, theirs = both(6, 8, body)
    assert (ours.type, ours.is_k_raft_controller) == (2, True) == (theirs.type, theirs.is_k_raft_controller)
    assert_same(ours, theirs)
    # Without the tag, Type reads as its default.
    assert cw.decode(6, 8, kafka_python_update_metadata(8, [], []).encode()).type == 0


def _with_unknown_tags(body: bytes, at: int) -> bytes:
    """``body`` with two unknown tagged fields in place of the empty tag section at ``at``."""
    assert body[at] == 0
    return body[:at] + b"\x02" + b"\x05\x02ab" + b"\x7f\x00" + body[at + 1:]


def test_unknown_tagged_fields_are_skipped_as_kafka_python_does() -> None:
    body = kafka_python_leader_and_isr(5, [lai("a", T1, 0)], LEADERS[1]).encode()
    # Header (4 + 4 + 8 + 1), topics count, "a", uuid, partitions count, then the partition's fields:
    # four int32, ISR [1, 2], partition epoch, replicas [1, 2, 3], adding, removing, isNew.
    partition_tags = 17 + 1 + 2 + 16 + 1 + 16 + (1 + 2 * 4) + 4 + (1 + 3 * 4) + 1 + 1 + 1
    for at in (partition_tags, partition_tags + 1, len(body) - 1):
        tagged = _with_unknown_tags(body, at)
        ours, theirs = both(4, 5, tagged)
        assert_same(ours, theirs)
    um = kafka_python_update_metadata(7, [ump("a", T1, 0)], []).encode()
    tagged = _with_unknown_tags(um, len(um) - 1)
    ours, theirs = both(6, 7, tagged)
    assert_same(ours, theirs)


def test_decode_request_uses_the_fast_reader_for_the_controllers_versions() -> None:
    msg = kafka_python_leader_and_isr(5, LAI_SHAPES["reassigning"], LEADERS[1])
    msg.with_header(correlation_id=9, client_id="controller-1")
    req = decode_request(msg.encode(header=True, framed=True)[4:])
    assert isinstance(req.body, cw.LeaderAndIsrBody)
    assert (req.correlation_id, req.client_id, req.version) == (9, "controller-1", 5)
    old = kafka_python_leader_and_isr(4, LAI_SHAPES["reassigning"], LEADERS[1])
    old.with_header(correlation_id=9, client_id="controller-1")
    assert not isinstance(decode_request(old.encode(header=True, framed=True)[4:]).body, cw.LeaderAndIsrBody)


# --- refusals -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "version"), [(4, 5), (4, 7), (6, 7), (6, 8)])
def test_every_truncation_is_refused_by_both(key: int, version: int) -> None:
    body = (kafka_python_leader_and_isr(version, LAI_SHAPES["reassigning"], LEADERS[2]).encode() if key == 4
            else kafka_python_update_metadata(version, UM_SHAPES["offline and deleting"], BROKERS[2]).encode())
    cls = LeaderAndIsrRequest if key == 4 else UpdateMetadataRequest
    for cut in range(len(body)):
        with pytest.raises(MalformedFrameError):
            cw.decode(key, version, body[:cut])
        with pytest.raises(MalformedFrameError):
            decode_body(cls, version, memoryview(body[:cut]))


def test_null_where_kafka_forbids_it_is_refused() -> None:
    body = kafka_python_leader_and_isr(5, [lai("a", T1, 0)], []).encode()
    topic_name_at = 17 + 1
    assert body[topic_name_at:topic_name_at + 2] == b"\x02a"
    null_name = body[:topic_name_at] + b"\x00" + body[topic_name_at + 2:]
    with pytest.raises(MalformedFrameError, match="TopicName was serialized as null"):
        cw.decode(4, 5, null_name)
    isr_at = topic_name_at + 2 + 16 + 1 + 16
    assert body[isr_at] == 3
    null_isr = body[:isr_at] + b"\x00" + body[isr_at + 9:]
    with pytest.raises(MalformedFrameError, match="Isr was serialized as null"):
        cw.decode(4, 5, null_isr)
    for bad in (null_name, null_isr):
        with pytest.raises(MalformedFrameError):
            decode_body(LeaderAndIsrRequest, 5, memoryview(bad))


def test_tagged_field_past_the_frame_or_of_the_wrong_size_is_refused() -> None:
    body = kafka_python_update_metadata(8, [], []).encode()
    assert body[-1] == 0
    past = body[:-1] + b"\x01\x09\x10" + b"x"  # an unknown tag claiming 16 bytes, 1 sent
    wrong = body[:-1] + b"\x01\x00\x02\x01\x00"  # Type (int8) sent as 2 bytes
    for bad in (past, wrong):
        with pytest.raises(MalformedFrameError):
            cw.decode(6, 8, bad)
        with pytest.raises(MalformedFrameError):
            decode_body(UpdateMetadataRequest, 8, memoryview(bad))


def test_a_varint_over_five_bytes_and_bad_utf8_are_refused() -> None:
    body = kafka_python_leader_and_isr(5, [lai("a", T1, 0)], []).encode()
    long_count = body[:17] + b"\x82\x80\x80\x80\x80\x00" + body[18:]
    bad_utf8 = body[:18] + b"\x02\xff" + body[20:]
    for bad in (long_count, bad_utf8):
        with pytest.raises(MalformedFrameError):
            cw.decode(4, 5, bad)
        with pytest.raises(MalformedFrameError):
            decode_body(LeaderAndIsrRequest, 5, memoryview(bad))


def test_bytes_left_over_are_ignored_as_kafka_does() -> None:
    body = kafka_python_update_metadata(7, [ump("a", T1, 0)], BROKERS[1]).encode() + b"\x00\x00\x00"
    ours, theirs = both(6, 7, body)
    assert_same(ours, theirs)


def test_large_arrays_and_counts() -> None:
    many = [lai("big", T1, i, isr=tuple(range(130)), replicas=tuple(range(300))) for i in range(3)]
    body = kafka_python_leader_and_isr(6, many, LEADERS[1]).encode()
    ours, theirs = both(4, 6, body)
    assert_same(ours, theirs)
    assert struct.calcsize(">i") * 300 < len(body)


@pytest.mark.parametrize("version", cw.LEADER_AND_ISR_VERSIONS)
@pytest.mark.parametrize("topics", [
    [],
    [(T1, [(0, 0)])],
    [(T1, [(p, 0) for p in range(1000)]), (None, [(3, 56), (2_147_483_647, -1)]), (T2, [])],
])
def test_leader_and_isr_response_is_kafka_pythons(version: int, topics: list[tuple[uuid.UUID | None, Any]]) -> None:
    T = LeaderAndIsrResponse.LeaderAndIsrTopicError
    P = T.LeaderAndIsrPartitionError
    for error in (0, 31):
        theirs = LeaderAndIsrResponse(version=version, error_code=error, topics=[
            T(topic_id=tid or ZERO, partition_errors=[P(partition_index=p, error_code=c) for p, c in errs])
            for tid, errs in topics])
        frame = cw.leader_and_isr_response(version, 123, error, topics)
        head = struct.pack(">i", 123) + b"\x00"
        body = theirs.encode(version=version)
        assert frame == struct.pack(">i", len(head) + len(body)) + head + body
        back = LeaderAndIsrResponse.decode(frame[4:], version=version, header=True)
        assert back.error_code == error and len(back.topics) == len(topics)
