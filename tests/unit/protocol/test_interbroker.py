"""The ZooKeeper-era inter-broker messages: every version round-trips, and the flexible versions
match bytes built by hand from the wire format."""

from __future__ import annotations

import itertools
import struct
import uuid
from typing import Any

import pytest

from headwater.protocol.apis import API_SPECS, ApiKey, advertised_versions, decode_request
from headwater.protocol.errors import KafkaError
from headwater.protocol.interbroker import (
    MESSAGES,
    AlterPartitionRequest,
    AlterPartitionResponse,
    ControlledShutdownRequest,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    PartitionLeadership,
    StopReplicaRequest,
    UpdateMetadataRequest,
    iter_leader_and_isr,
    leader_and_isr_request,
)

# --- hand encoders, independent of the codec library ----------------------------------------


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def i8(n: int) -> bytes:
    return struct.pack(">b", n)


def i16(n: int) -> bytes:
    return struct.pack(">h", n)


def i32(n: int) -> bytes:
    return struct.pack(">i", n)


def i64(n: int) -> bytes:
    return struct.pack(">q", n)


def cstr(s: str) -> bytes:
    raw = s.encode()
    return uvarint(len(raw) + 1) + raw


def carr(items: list[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


def cints(values: list[int]) -> bytes:
    return carr([i32(v) for v in values])


NO_TAGS = b"\x00"


# --- generic population of every field of a version -----------------------------------------

_counter = itertools.count(1)


def _simple(type_str: str) -> Any:
    n = next(_counter)
    if type_str in ("int8", "int16", "int32", "int64"):
        return n % 100
    if type_str == "bool":
        return n % 2 == 1
    if type_str == "string":
        return f"s{n}"
    if type_str == "uuid":
        return uuid.UUID(int=n)
    raise AssertionError(type_str)


def _populate(data_class: Any, version: int) -> Any:
    """An instance with every untagged field of ``version`` set to a non-default value."""
    values: dict[str, Any] = {}
    for field in data_class._struct.fields.values():
        if not field.for_version_q(version) or field.tagged_field_q(version):
            continue
        if field.is_struct_array():
            values[field.name] = [_populate(field.data_class, version) for _ in range(2)]
        elif field.is_array():
            values[field.name] = [_simple(field.type_str[2:]) for _ in range(3)]
        else:
            values[field.name] = _simple(field.type_str)
    return data_class(version=version, **values)


ALL_VERSIONS = [
    (cls, v) for pair in MESSAGES.values() for cls in pair for v in range(cls.min_version, cls.max_version + 1)
]


@pytest.mark.parametrize(("cls", "version"), ALL_VERSIONS, ids=lambda x: getattr(x, "__name__", str(x)))
def test_every_version_round_trips(cls: Any, version: int) -> None:
    msg = _populate(cls, version)
    raw = msg.encode(version=version)
    back = cls.decode(raw, version=version)
    assert back == msg
    assert back.encode() == raw  # a decoded message keeps its version


def test_version_ranges_are_kafkas() -> None:
    ranges = {cls.__name__: (cls.max_version, cls._flexible_versions[0]) for pair in MESSAGES.values() for cls in pair}
    assert ranges == {
        "LeaderAndIsrRequest": (7, 4), "LeaderAndIsrResponse": (7, 4),
        "StopReplicaRequest": (4, 2), "StopReplicaResponse": (4, 2),
        "UpdateMetadataRequest": (8, 6), "UpdateMetadataResponse": (8, 6),
        "ControlledShutdownRequest": (3, 3), "ControlledShutdownResponse": (3, 3),
        "AlterPartitionRequest": (3, 0), "AlterPartitionResponse": (3, 0),
    }
    assert {k: pair[0].API_KEY for k, pair in MESSAGES.items()} == {4: 4, 5: 5, 6: 6, 7: 7, 56: 56}


# --- LeaderAndIsr ---------------------------------------------------------------------------

TOPIC_ID = uuid.UUID("0123456789abcdef0123456789abcdef")
STATES = [
    PartitionLeadership("orders", 0, controller_epoch=3, leader=2, leader_epoch=7, isr=[2, 3], partition_epoch=11,
                        replicas=[2, 3, 4], adding_replicas=[4], removing_replicas=[3], is_new=True),
    PartitionLeadership("orders", 1, controller_epoch=3, leader=3, leader_epoch=1, isr=[3], partition_epoch=0,
                        replicas=[3, 2], leader_recovery_state=1),
]


def _leader_and_isr(version: int) -> Any:
    return leader_and_isr_request(version, controller_id=1, controller_epoch=3, broker_epoch=4294967296 + 5,
                                  states=STATES, topic_ids={"orders": TOPIC_ID},
                                  live_leaders=[(2, "b2", 9092), (3, "b3", 9093)])


def _lai_partition(p: int, cepoch: int, leader: int, lepoch: int, isr: list[int], pepoch: int, replicas: list[int],
                   adding: list[int], removing: list[int], is_new: bool, lrs: int | None) -> bytes:
    out = i32(p) + i32(cepoch) + i32(leader) + i32(lepoch) + cints(isr) + i32(pepoch) + cints(replicas)
    out += cints(adding) + cints(removing) + i8(int(is_new))
    if lrs is not None:
        out += i8(lrs)
    return out + NO_TAGS


def test_leader_and_isr_v7_bytes() -> None:
    expected = (
        i32(1) + i8(0) + i32(3) + i64(4294967296 + 5) + i8(0)  # controller id, isKRaft, epoch, broker epoch, type
        + carr([
            cstr("orders") + TOPIC_ID.bytes
            + carr([
                _lai_partition(0, 3, 2, 7, [2, 3], 11, [2, 3, 4], [4], [3], True, 0),
                _lai_partition(1, 3, 3, 1, [3], 0, [3, 2], [], [], False, 1),
            ])
            + NO_TAGS
        ])
        + carr([i32(2) + cstr("b2") + i32(9092) + NO_TAGS, i32(3) + cstr("b3") + i32(9093) + NO_TAGS])
        + NO_TAGS
    )
    req = _leader_and_isr(7)
    assert req.encode() == expected
    back = LeaderAndIsrRequest.decode(expected, version=7)
    assert back == req
    rows = iter_leader_and_isr(back)
    assert [(t, tid, p.partition_index, p.adding_replicas, p.removing_replicas, p.is_new) for t, tid, p in rows] == [
        ("orders", TOPIC_ID, 0, [4], [3], True),
        ("orders", TOPIC_ID, 1, [], [], False),
    ]


def test_leader_and_isr_v5_bytes_have_no_recovery_state_or_kraft_flag() -> None:
    expected = (
        i32(1) + i32(3) + i64(4294967296 + 5) + i8(0)
        + carr([
            cstr("orders") + TOPIC_ID.bytes
            + carr([
                _lai_partition(0, 3, 2, 7, [2, 3], 11, [2, 3, 4], [4], [3], True, None),
                _lai_partition(1, 3, 3, 1, [3], 0, [3, 2], [], [], False, None),
            ])
            + NO_TAGS
        ])
        + carr([i32(2) + cstr("b2") + i32(9092) + NO_TAGS, i32(3) + cstr("b3") + i32(9093) + NO_TAGS])
        + NO_TAGS
    )
    assert _leader_and_isr(5).encode() == expected


def test_leader_and_isr_v1_is_ungrouped_with_topic_names() -> None:
    def part(p: int, cepoch: int, leader: int, lepoch: int, isr: list[int], pepoch: int, replicas: list[int],
             is_new: bool) -> bytes:
        ints = lambda xs: i32(len(xs)) + b"".join(i32(x) for x in xs)  # noqa: E731
        return (i16(6) + b"orders" + i32(p) + i32(cepoch) + i32(leader) + i32(lepoch) + ints(isr) + i32(pepoch)
                + ints(replicas) + i8(int(is_new)))

    expected = (
        i32(1) + i32(3) + i32(2)
        + part(0, 3, 2, 7, [2, 3], 11, [2, 3, 4], True) + part(1, 3, 3, 1, [3], 0, [3, 2], False)
        + i32(2) + i32(2) + i16(2) + b"b2" + i32(9092) + i32(3) + i16(2) + b"b3" + i32(9093)
    )
    req = _leader_and_isr(1)
    assert req.encode() == expected
    assert [(t, tid, p.partition_index) for t, tid, p in iter_leader_and_isr(req)] == [("orders", None, 0), ("orders", None, 1)]


def test_leader_and_isr_response_v5_groups_by_topic_id() -> None:
    Err = LeaderAndIsrResponse.LeaderAndIsrTopicError.LeaderAndIsrPartitionError
    resp = LeaderAndIsrResponse(version=5, error_code=0, topics=[LeaderAndIsrResponse.LeaderAndIsrTopicError(
        version=5, topic_id=TOPIC_ID, partition_errors=[Err(version=5, partition_index=1, error_code=6)])])
    assert resp.encode() == i16(0) + carr([TOPIC_ID.bytes + carr([i32(1) + i16(6) + NO_TAGS]) + NO_TAGS]) + NO_TAGS


# --- AlterPartition -------------------------------------------------------------------------


def test_alter_partition_v3_bytes() -> None:
    R = AlterPartitionRequest
    req = R(version=3, broker_id=2, broker_epoch=77, topics=[R.TopicData(version=3, topic_id=TOPIC_ID, partitions=[
        R.TopicData.PartitionData(version=3, partition_index=5, leader_epoch=9, leader_recovery_state=0, partition_epoch=12,
                                  new_isr_with_epochs=[R.TopicData.PartitionData.BrokerState(version=3, broker_id=2, broker_epoch=77),
                                                       R.TopicData.PartitionData.BrokerState(version=3, broker_id=4, broker_epoch=-1)]),
    ])])
    expected = (
        i32(2) + i64(77)
        + carr([TOPIC_ID.bytes + carr([
            i32(5) + i32(9) + carr([i32(2) + i64(77) + NO_TAGS, i32(4) + i64(-1) + NO_TAGS]) + i8(0) + i32(12) + NO_TAGS
        ]) + NO_TAGS])
        + NO_TAGS
    )
    assert req.encode() == expected
    assert AlterPartitionRequest.decode(expected, version=3) == req


def test_alter_partition_v0_bytes_are_alter_isr() -> None:
    R = AlterPartitionRequest
    req = R(version=0, broker_id=2, broker_epoch=77, topics=[R.TopicData(version=0, topic_name="orders", partitions=[
        R.TopicData.PartitionData(version=0, partition_index=5, leader_epoch=9, new_isr=[2, 4], partition_epoch=12)])])
    expected = (i32(2) + i64(77) + carr([cstr("orders") + carr([i32(5) + i32(9) + cints([2, 4]) + i32(12) + NO_TAGS]) + NO_TAGS])
                + NO_TAGS)
    assert req.encode() == expected


def test_alter_partition_response_v2_bytes() -> None:
    R = AlterPartitionResponse
    resp = R(version=2, throttle_time_ms=0, error_code=0, topics=[R.TopicData(version=2, topic_id=TOPIC_ID, partitions=[
        R.TopicData.PartitionData(version=2, partition_index=5, error_code=0, leader_id=2, leader_epoch=9, isr=[2, 4],
                                  leader_recovery_state=0, partition_epoch=13)])])
    expected = (i32(0) + i16(0) + carr([TOPIC_ID.bytes + carr([
        i32(5) + i16(0) + i32(2) + i32(9) + cints([2, 4]) + i8(0) + i32(13) + NO_TAGS]) + NO_TAGS]) + NO_TAGS)
    assert resp.encode() == expected
    assert R.decode(expected, version=2) == resp


# --- tagged fields --------------------------------------------------------------------------


def _update_metadata_v8(**extra: Any) -> Any:
    return UpdateMetadataRequest(version=8, controller_id=1, is_k_raft_controller=False, controller_epoch=3,
                                 broker_epoch=5, topic_states=[], live_brokers=[], **extra)


def test_update_metadata_type_tag_written_only_when_set() -> None:
    fixed = i32(1) + i8(0) + i32(3) + i64(5) + carr([]) + carr([])
    assert _update_metadata_v8().encode() == fixed + NO_TAGS
    with_type = _update_metadata_v8(type=2).encode()
    assert with_type == fixed + uvarint(1) + uvarint(0) + uvarint(1) + i8(2)
    assert UpdateMetadataRequest.decode(with_type, version=8).type == 2
    assert UpdateMetadataRequest.decode(fixed + NO_TAGS, version=8).type == 0


def test_update_metadata_rack_is_nullable() -> None:
    B = UpdateMetadataRequest.UpdateMetadataBroker
    ep = B.UpdateMetadataEndpoint(version=7, port=9092, host="b1", listener="PLAINTEXT", security_protocol=0)
    req = UpdateMetadataRequest(version=7, controller_id=1, controller_epoch=3, broker_epoch=5, topic_states=[],
                                live_brokers=[B(version=7, id=1, endpoints=[ep], rack=None)])
    raw = req.encode()
    assert raw.endswith(carr([i32(1) + carr([i32(9092) + cstr("b1") + cstr("PLAINTEXT") + i16(0) + NO_TAGS]) + b"\x00" + NO_TAGS])
                        + NO_TAGS)
    assert UpdateMetadataRequest.decode(raw, version=7).live_brokers[0].rack is None


def test_stop_replica_v4_bytes() -> None:
    T = StopReplicaRequest.StopReplicaTopicState
    req = StopReplicaRequest(version=4, controller_id=1, is_k_raft_controller=False, controller_epoch=3, broker_epoch=5,
                             topic_states=[T(version=4, topic_name="orders", partition_states=[
                                 T.StopReplicaPartitionState(version=4, partition_index=0, leader_epoch=-2, delete_partition=True)])])
    assert req.encode() == (i32(1) + i8(0) + i32(3) + i64(5)
                            + carr([cstr("orders") + carr([i32(0) + i32(-2) + i8(1) + NO_TAGS]) + NO_TAGS]) + NO_TAGS)


# --- registration in the broker's API table -------------------------------------------------


def _framed(req: Any, client_id: str = "controller-1") -> bytes:
    req.with_header(correlation_id=7, client_id=client_id)
    return bytes(req.encode(header=True))


def test_registered_with_kafkas_zk_broker_ranges() -> None:
    got = {int(k): (API_SPECS[k].min_version, API_SPECS[k].max_version) for k in
           (ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA, ApiKey.CONTROLLED_SHUTDOWN, ApiKey.ALTER_PARTITION)}
    assert got == {4: (0, 7), 5: (0, 4), 6: (0, 8), 7: (1, 3), 56: (0, 3)}
    from kafka.protocol.metadata import ApiVersionsResponse

    advertised = {a.api_key for a in advertised_versions(ApiVersionsResponse)}
    assert {4, 5, 6, 7, 56} <= advertised


def test_decode_request_reads_the_header_and_body() -> None:
    req = decode_request(_framed(_leader_and_isr(7)))
    assert (req.spec.key, req.version, req.correlation_id, req.client_id) == (ApiKey.LEADER_AND_ISR, 7, 7, "controller-1")
    assert req.body == _leader_and_isr(7)
    shutdown = decode_request(_framed(ControlledShutdownRequest(version=3, broker_id=4, broker_epoch=88)))
    assert (shutdown.body.broker_id, shutdown.body.broker_epoch) == (4, 88)


def test_controlled_shutdown_v0_is_refused() -> None:
    frame = i16(7) + i16(0) + i32(1) + i32(4)  # v0: no client id in the header
    with pytest.raises(KafkaError):
        decode_request(frame)
