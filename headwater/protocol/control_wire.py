"""LeaderAndIsr (v5-v7) and UpdateMetadata (v7-v8) requests written and read directly.

These are the controller's bulk requests: after an election of 10,000 partitions each broker gets
one of each, and the ElectLeaders answer waits until the controller's own broker has applied both.
kafka-python's schema classes build an object per partition on both ends, which cost more than the
election itself; here the controller writes the bytes from its own partition records and the broker
reads them into named tuples whose fields are kafka-python's, so that a request read here equals
kafka-python's decode of the same bytes. LeaderAndIsr's answer is written here too. Other versions
still go through ``interbroker.py``'s classes; the unit tests check that both agree, byte for byte
on the way out and field for field on the way in.

The reader is as strict as ``protocol/strict.py``: a length that runs past the frame, a
non-nullable string or array sent as null, a varint over 5 bytes, or a tagged field larger than
what remains raises ``MalformedFrameError``; bytes left after the last field are ignored.

Wire layouts (flexible versions; Kafka's LeaderAndIsrRequest.json and UpdateMetadataRequest.json):
compact strings and arrays (unsigned varint length + 1), uuids as 16 bytes, a tagged-field section
(unsigned varint count, then tag, size, value) closing every struct.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, Protocol

from headwater.protocol.frame import (
    MalformedFrameError,
    read_unsigned_varint,
    write_compact_string,
    write_unsigned_varint,
)

LEADER_AND_ISR_KEY = 4
UPDATE_METADATA_KEY = 6
LEADER_AND_ISR_VERSIONS = range(5, 8)
UPDATE_METADATA_VERSIONS = range(7, 9)

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_HEADER = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
_ZERO_UUID = bytes(16)
_NO_TAGS = b"\x00"


# --- what the controller writes from -----------------------------------------------------------


class LeaderAndIsrEntry(Protocol):
    """One partition of a LeaderAndIsr (the controller's ``effects.LeaderAndIsrPartition``)."""

    @property
    def topic(self) -> str: ...
    @property
    def topic_id(self) -> uuid.UUID | None: ...
    @property
    def partition(self) -> int: ...
    @property
    def controller_epoch(self) -> int: ...
    @property
    def leader(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...
    @property
    def isr(self) -> Sequence[int]: ...
    @property
    def partition_epoch(self) -> int: ...
    @property
    def replicas(self) -> Sequence[int]: ...
    @property
    def adding_replicas(self) -> Sequence[int]: ...
    @property
    def removing_replicas(self) -> Sequence[int]: ...
    @property
    def is_new(self) -> bool: ...
    @property
    def leader_recovery_state(self) -> int: ...


class UpdateMetadataEntry(Protocol):
    """One partition of an UpdateMetadata (the controller's ``effects.UpdateMetadataPartition``)."""

    @property
    def topic(self) -> str: ...
    @property
    def topic_id(self) -> uuid.UUID | None: ...
    @property
    def partition(self) -> int: ...
    @property
    def controller_epoch(self) -> int: ...
    @property
    def leader(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...
    @property
    def isr(self) -> Sequence[int]: ...
    @property
    def partition_epoch(self) -> int: ...
    @property
    def replicas(self) -> Sequence[int]: ...
    @property
    def offline_replicas(self) -> Sequence[int]: ...


class LiveBroker(NamedTuple):
    """An UpdateMetadata broker entry: endpoints as (port, host, listener, security protocol id)."""

    broker_id: int
    rack: str | None
    endpoints: Sequence[tuple[int, str, str, int]]


# --- writing -------------------------------------------------------------------------------------


def _uuid(u: uuid.UUID | None) -> bytes:
    return _ZERO_UUID if u is None else u.bytes


class _Int32Arrays:
    """Compact int32 arrays, each distinct list encoded once: a request repeats a handful of
    replica sets and ISRs across thousands of partitions."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[tuple[int, ...], bytes] = {}

    def __call__(self, items: Sequence[int]) -> bytes:
        key = items if isinstance(items, tuple) else tuple(items)
        out = self._seen.get(key)
        if out is None:
            out = self._seen[key] = write_unsigned_varint(len(key) + 1) + struct.pack(f">{len(key)}i", *key)
        return out


def _by_topic(partitions: Iterable[Any]) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = {}
    for p in partitions:
        ps = grouped.get(p.topic)
        if ps is None:
            ps = grouped[p.topic] = []
        ps.append(p)
    return grouped


def leader_and_isr_body(version: int, *, controller_id: int, controller_epoch: int, broker_epoch: int,
                        partitions: Sequence[LeaderAndIsrEntry], live_leaders: Iterable[tuple[int, str, int]]) -> bytes:
    """The body of a LeaderAndIsr request of ``version`` (5-7), as ``interbroker.leader_and_isr_request``
    would encode it: grouped by topic in first-seen order, each topic with the id of its last entry,
    Type 0 and isKRaftController false (a ZooKeeper controller's)."""
    if version not in LEADER_AND_ISR_VERSIONS:
        raise ValueError(f"LeaderAndIsr v{version} is not written here")
    ints = _Int32Arrays()
    fixed = struct.Struct(">iiii").pack
    pack_i32 = _I32.pack
    recovery = version >= 6
    out = [_I32.pack(controller_id)]
    if version >= 7:
        out.append(b"\x00")
    out += [_I32.pack(controller_epoch), _I64.pack(broker_epoch), b"\x00"]
    grouped = _by_topic(partitions)
    ids = {p.topic: p.topic_id for p in partitions}
    out.append(write_unsigned_varint(len(grouped) + 1))
    for name, ps in grouped.items():
        out += [write_compact_string(name), _uuid(ids[name]), write_unsigned_varint(len(ps) + 1)]
        for p in ps:
            out += [fixed(p.partition, p.controller_epoch, p.leader, p.leader_epoch), ints(p.isr),
                    pack_i32(p.partition_epoch), ints(p.replicas), ints(p.adding_replicas), ints(p.removing_replicas),
                    b"\x01" if p.is_new else b"\x00"]
            if recovery:
                out.append(_I8.pack(p.leader_recovery_state))
            out.append(_NO_TAGS)
        out.append(_NO_TAGS)
    leaders = list(live_leaders)
    out.append(write_unsigned_varint(len(leaders) + 1))
    for broker_id, host, port in leaders:
        out += [_I32.pack(broker_id), write_compact_string(host), _I32.pack(port), _NO_TAGS]
    out.append(_NO_TAGS)
    return b"".join(out)


def update_metadata_topics(version: int, partitions: Sequence[UpdateMetadataEntry]) -> bytes:
    """The TopicStates array of an UpdateMetadata of ``version`` (7-8): grouped by topic in
    first-seen order, each topic with the id of its first entry. The same for every broker, so
    the controller writes it once per request it sends to all of them."""
    if version not in UPDATE_METADATA_VERSIONS:
        raise ValueError(f"UpdateMetadata v{version} is not written here")
    ints = _Int32Arrays()
    fixed = struct.Struct(">iiii").pack
    pack_i32 = _I32.pack
    grouped = _by_topic(partitions)
    out = [write_unsigned_varint(len(grouped) + 1)]
    for name, ps in grouped.items():
        out += [write_compact_string(name), _uuid(ps[0].topic_id), write_unsigned_varint(len(ps) + 1)]
        for p in ps:
            out += [fixed(p.partition, p.controller_epoch, p.leader, p.leader_epoch), ints(p.isr),
                    pack_i32(p.partition_epoch), ints(p.replicas), ints(p.offline_replicas), _NO_TAGS]
        out.append(_NO_TAGS)
    return b"".join(out)


def update_metadata_body(version: int, *, controller_id: int, controller_epoch: int, broker_epoch: int,
                         topics: bytes, live_brokers: Iterable[LiveBroker]) -> bytes:
    """The body of an UpdateMetadata request of ``version`` (7-8) around ``topics`` (from
    ``update_metadata_topics``); isKRaftController false and no Type tag, as a ZooKeeper controller
    sends it."""
    if version not in UPDATE_METADATA_VERSIONS:
        raise ValueError(f"UpdateMetadata v{version} is not written here")
    out = [_I32.pack(controller_id)]
    if version >= 8:
        out.append(b"\x00")
    out += [_I32.pack(controller_epoch), _I64.pack(broker_epoch), topics]
    brokers = list(live_brokers)
    out.append(write_unsigned_varint(len(brokers) + 1))
    for b in brokers:
        out += [_I32.pack(b.broker_id), write_unsigned_varint(len(b.endpoints) + 1)]
        for port, host, listener, protocol in b.endpoints:
            out += [_I32.pack(port), write_compact_string(host), write_compact_string(listener), _I16.pack(protocol), _NO_TAGS]
        out += [write_compact_string(b.rack), _NO_TAGS]
    out.append(_NO_TAGS)
    return b"".join(out)


class _Header:
    __slots__ = ("_response_class", "client_id", "correlation_id")

    def __init__(self, correlation_id: int, client_id: str, response_class: Any) -> None:
        self.correlation_id = correlation_id
        self.client_id = client_id
        self._response_class = response_class

    def get_response_class(self) -> Any:
        return self._response_class


class EncodedRequest:
    """A request body already written, sent by a ``BrokerChannel`` like a kafka-python request
    object (``with_header``, ``header.get_response_class()``, ``encode(header=True, framed=True)``).
    The header is v2 (flexible), which every version written here uses."""

    __slots__ = ("api_key", "body", "header", "response_class", "version")

    def __init__(self, api_key: int, version: int, body: bytes, response_class: Any) -> None:
        self.api_key = api_key
        self.version = version
        self.body = body
        self.response_class = response_class
        self.header: _Header | None = None

    def with_header(self, correlation_id: int = 0, client_id: str = "kafka-python") -> None:
        self.header = _Header(correlation_id, client_id, self.response_class)

    def encode(self, header: bool = False, framed: bool = False) -> bytes:
        parts = []
        if header:
            if self.header is None:
                raise ValueError("No header found")
            client = self.header.client_id.encode()
            parts += [_HEADER.pack(self.api_key, self.version, self.header.correlation_id, len(client)), client, _NO_TAGS]
        parts.append(self.body)
        out = b"".join(parts)
        return _I32.pack(len(out)) + out if framed else out


def leader_and_isr_response(version: int, correlation_id: int, error_code: int,
                            topics: Iterable[tuple[uuid.UUID | None, Sequence[tuple[int, int]]]]) -> bytes:
    """The whole frame (size prefix and response header v1) of a LeaderAndIsr response of ``version``
    (5-7): per topic id, (partition, error code) of each partition, in the order given."""
    if version not in LEADER_AND_ISR_VERSIONS:
        raise ValueError(f"LeaderAndIsr v{version} is not written here")
    entry = struct.Struct(">ihB").pack
    out = [_I32.pack(correlation_id), _NO_TAGS, _I16.pack(error_code)]
    grouped = list(topics)
    out.append(write_unsigned_varint(len(grouped) + 1))
    for topic_id, errors in grouped:
        out += [_uuid(topic_id), write_unsigned_varint(len(errors) + 1)]
        out += [entry(partition, code, 0) for partition, code in errors]
        out.append(_NO_TAGS)
    out.append(_NO_TAGS)
    body = b"".join(out)
    return _I32.pack(len(body)) + body


# --- reading -------------------------------------------------------------------------------------


# The read side: named tuples whose fields are kafka-python's, in its order (every version's fields,
# those the version lacks at their defaults), so that a message read here compares equal to
# kafka-python's decode of the same bytes (its messages equal a tuple of their field values).


class LeaderAndIsrPartitionState(NamedTuple):
    topic_name: str  # v0-v1 only: ""
    partition_index: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: list[int]
    partition_epoch: int
    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]
    is_new: bool
    leader_recovery_state: int


class LeaderAndIsrTopicState(NamedTuple):
    topic_name: str
    topic_id: uuid.UUID | None  # None for the zero uuid, as kafka-python reads it
    partition_states: list[LeaderAndIsrPartitionState]


class LeaderAndIsrLiveLeader(NamedTuple):
    broker_id: int
    host_name: str
    port: int


class LeaderAndIsrBody(NamedTuple):
    controller_id: int
    is_k_raft_controller: bool
    controller_epoch: int
    broker_epoch: int
    type: int
    ungrouped_partition_states: list[Any]  # v0-v1 only: empty
    topic_states: list[LeaderAndIsrTopicState]
    live_leaders: list[LeaderAndIsrLiveLeader]

    @property
    def version(self) -> int:
        raise NotImplementedError  # a class attribute of each version's subclass (_versioned)


class UpdateMetadataPartitionState(NamedTuple):
    topic_name: str  # v0-v4 only: ""
    partition_index: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: list[int]
    zk_version: int
    replicas: list[int]
    offline_replicas: list[int]


class UpdateMetadataTopicState(NamedTuple):
    topic_name: str
    topic_id: uuid.UUID | None
    partition_states: list[UpdateMetadataPartitionState]


class UpdateMetadataEndpoint(NamedTuple):
    port: int
    host: str
    listener: str
    security_protocol: int


class UpdateMetadataBroker(NamedTuple):
    id: int
    v0_host: str  # v0 only: ""
    v0_port: int  # v0 only: 0
    endpoints: list[UpdateMetadataEndpoint]
    rack: str | None


class UpdateMetadataBody(NamedTuple):
    controller_id: int
    is_k_raft_controller: bool
    type: int  # the tagged Type field (v8), 0 when not sent
    controller_epoch: int
    broker_epoch: int
    ungrouped_partition_states: list[Any]  # v0-v4 only: empty
    topic_states: list[UpdateMetadataTopicState]
    live_brokers: list[UpdateMetadataBroker]

    @property
    def version(self) -> int:
        raise NotImplementedError  # a class attribute of each version's subclass (_versioned)


def _versioned(base: type, version: int) -> Any:
    """``base`` with ``version`` as a class attribute: the version is not a field of the message."""
    return type(f"{base.__name__}V{version}", (base,), {"__slots__": (), "version": version})


_LAI_BODIES = {v: _versioned(LeaderAndIsrBody, v) for v in LEADER_AND_ISR_VERSIONS}
_UM_BODIES = {v: _versioned(UpdateMetadataBody, v) for v in UPDATE_METADATA_VERSIONS}


_FIXED4 = struct.Struct(">iiii")
_INT32S = [struct.Struct(f">{n}i") for n in range(128)]
_new = tuple.__new__


def _null(what: str) -> MalformedFrameError:
    return MalformedFrameError(f"non-nullable field {what} was serialized as null")


def _count(data: bytes, pos: int, what: str) -> tuple[int, int]:
    """A compact array or string length (never null here) and the position after it."""
    b = data[pos]
    if 0 < b < 0x80:
        return b - 1, pos + 1
    value, pos = read_unsigned_varint(data, pos)
    if value == 0:
        raise _null(what)
    return value - 1, pos


def _int32s(data: bytes, pos: int, what: str) -> tuple[list[int], int]:
    n, pos = _count(data, pos, what)
    s = _INT32S[n] if n < 128 else struct.Struct(f">{n}i")
    return list(s.unpack_from(data, pos)), pos + 4 * n  # struct.error past the end


def _string_at(data: bytes, pos: int, what: str) -> tuple[str, int]:
    n, pos = _count(data, pos, what)
    end = pos + n
    if end > len(data):
        raise MalformedFrameError(f"{what} of {n} bytes runs past the frame ({len(data) - pos} remain)")
    return data[pos:end].decode(), end


def _uuid_at(data: bytes, pos: int) -> tuple[uuid.UUID | None, int]:
    raw = data[pos : pos + 16]
    if len(raw) != 16:
        raise MalformedFrameError("a uuid runs past the frame")
    return (None if raw == _ZERO_UUID else uuid.UUID(bytes=raw)), pos + 16


def _skip_tags(data: bytes, pos: int, known: dict[int, Callable[[bytes, int, int], None]] | None = None) -> int:
    """A tagged-field section: unknown fields are skipped, a known one must fill its size exactly."""
    count, pos = read_unsigned_varint(data, pos)
    for _ in range(count):
        tag, pos = read_unsigned_varint(data, pos)
        size, pos = read_unsigned_varint(data, pos)
        if pos + size > len(data):
            raise MalformedFrameError(f"tagged field {tag} of {size} bytes runs past the frame "
                                      f"({len(data) - pos} remain)")
        read = known.get(tag) if known else None
        if read is not None:
            read(data, pos, size)
        pos += size
    return pos


def _leader_and_isr(version: int, data: bytes) -> LeaderAndIsrBody:
    unpack4 = _FIXED4.unpack_from
    i32 = _I32.unpack_from
    int32s = _int32s
    State = LeaderAndIsrPartitionState
    recovery = version >= 6
    pos = 0
    (controller_id,) = i32(data, pos)
    pos += 4
    kraft = False
    if version >= 7:
        kraft = data[pos] != 0
        pos += 1
    (controller_epoch,) = i32(data, pos)
    (broker_epoch,) = _I64.unpack_from(data, pos + 4)
    (kind,) = _I8.unpack_from(data, pos + 12)
    pos += 13
    topics = []
    n_topics, pos = _count(data, pos, "TopicStates")
    for _ in range(n_topics):
        name, pos = _string_at(data, pos, "TopicStates[].TopicName")
        topic_id, pos = _uuid_at(data, pos)
        parts: list[LeaderAndIsrPartitionState] = []
        n_parts, pos = _count(data, pos, "TopicStates[].PartitionStates")
        for _ in range(n_parts):
            index, c_epoch, leader, l_epoch = unpack4(data, pos)
            isr, pos = int32s(data, pos + 16, "PartitionStates[].Isr")
            (p_epoch,) = i32(data, pos)
            replicas, pos = int32s(data, pos + 4, "PartitionStates[].Replicas")
            adding, pos = int32s(data, pos, "PartitionStates[].AddingReplicas")
            removing, pos = int32s(data, pos, "PartitionStates[].RemovingReplicas")
            is_new = data[pos] != 0
            pos += 1
            recovery_state = 0
            if recovery:
                (recovery_state,) = _I8.unpack_from(data, pos)
                pos += 1
            parts.append(_new(State, ("", index, c_epoch, leader, l_epoch, isr, p_epoch, replicas, adding, removing,
                                      is_new, recovery_state)))
            if data[pos] == 0:
                pos += 1
            else:
                pos = _skip_tags(data, pos)
        pos = _skip_tags(data, pos)
        topics.append(LeaderAndIsrTopicState(name, topic_id, parts))
    leaders = []
    n_leaders, pos = _count(data, pos, "LiveLeaders")
    for _ in range(n_leaders):
        (broker_id,) = i32(data, pos)
        host, pos = _string_at(data, pos + 4, "LiveLeaders[].HostName")
        (port,) = i32(data, pos)
        pos = _skip_tags(data, pos + 4)
        leaders.append(LeaderAndIsrLiveLeader(broker_id, host, port))
    _skip_tags(data, pos)
    body: LeaderAndIsrBody = _LAI_BODIES[version](controller_id, kraft, controller_epoch, broker_epoch, kind, [], topics,
                                                  leaders)
    return body


def _update_metadata(version: int, data: bytes) -> UpdateMetadataBody:
    unpack4 = _FIXED4.unpack_from
    i32 = _I32.unpack_from
    int32s = _int32s
    State = UpdateMetadataPartitionState
    pos = 0
    (controller_id,) = i32(data, pos)
    pos += 4
    kraft = False
    if version >= 8:
        kraft = data[pos] != 0
        pos += 1
    (controller_epoch,) = i32(data, pos)
    (broker_epoch,) = _I64.unpack_from(data, pos + 4)
    pos += 12
    topics = []
    n_topics, pos = _count(data, pos, "TopicStates")
    for _ in range(n_topics):
        name, pos = _string_at(data, pos, "TopicStates[].TopicName")
        topic_id, pos = _uuid_at(data, pos)
        parts: list[UpdateMetadataPartitionState] = []
        n_parts, pos = _count(data, pos, "TopicStates[].PartitionStates")
        for _ in range(n_parts):
            index, c_epoch, leader, l_epoch = unpack4(data, pos)
            isr, pos = int32s(data, pos + 16, "PartitionStates[].Isr")
            (zk_version,) = i32(data, pos)
            replicas, pos = int32s(data, pos + 4, "PartitionStates[].Replicas")
            offline, pos = int32s(data, pos, "PartitionStates[].OfflineReplicas")
            parts.append(_new(State, ("", index, c_epoch, leader, l_epoch, isr, zk_version, replicas, offline)))
            if data[pos] == 0:
                pos += 1
            else:
                pos = _skip_tags(data, pos)
        pos = _skip_tags(data, pos)
        topics.append(UpdateMetadataTopicState(name, topic_id, parts))
    brokers = []
    n_brokers, pos = _count(data, pos, "LiveBrokers")
    for _ in range(n_brokers):
        (broker_id,) = i32(data, pos)
        endpoints = []
        n_endpoints, pos = _count(data, pos + 4, "LiveBrokers[].Endpoints")
        for _ in range(n_endpoints):
            (port,) = i32(data, pos)
            host, pos = _string_at(data, pos + 4, "Endpoints[].Host")
            listener, pos = _string_at(data, pos, "Endpoints[].Listener")
            (protocol,) = _I16.unpack_from(data, pos)
            pos = _skip_tags(data, pos + 2)
            endpoints.append(UpdateMetadataEndpoint(port, host, listener, protocol))
        rack: str | None = None
        if data[pos] == 0:
            pos += 1
        else:
            rack, pos = _string_at(data, pos, "LiveBrokers[].Rack")
        pos = _skip_tags(data, pos)
        brokers.append(UpdateMetadataBroker(broker_id, "", 0, endpoints, rack))
    kind = [0]

    def read_type(data: bytes, pos: int, size: int) -> None:
        if size != 1:
            raise MalformedFrameError(f"tagged field Type was sent as {size} bytes but its value is 1")
        kind[0] = _I8.unpack_from(data, pos)[0]

    _skip_tags(data, pos, {0: read_type} if version >= 8 else None)
    body: UpdateMetadataBody = _UM_BODIES[version](controller_id, kraft, kind[0], controller_epoch, broker_epoch, [],
                                                    topics, brokers)
    return body


_READERS: dict[tuple[int, int], Callable[[int, bytes], Any]] = {
    **{(LEADER_AND_ISR_KEY, v): _leader_and_isr for v in LEADER_AND_ISR_VERSIONS},
    **{(UPDATE_METADATA_KEY, v): _update_metadata for v in UPDATE_METADATA_VERSIONS},
}


def reads(api_key: int, version: int) -> bool:
    """Whether ``decode`` reads this request (else kafka-python's classes do)."""
    return (api_key, version) in _READERS


def decode(api_key: int, version: int, body: bytes | bytearray | memoryview) -> Any:
    """A LeaderAndIsr or UpdateMetadata request body (after the header) of a version ``reads``
    accepts, or ``MalformedFrameError``."""
    label = f"{'LeaderAndIsrRequest' if api_key == LEADER_AND_ISR_KEY else 'UpdateMetadataRequest'} v{version}"
    try:
        return _READERS[(api_key, version)](version, bytes(body))
    except MalformedFrameError as exc:
        raise MalformedFrameError(f"{label}: {exc}") from None
    except (struct.error, IndexError) as exc:  # a read at or past the end of the body
        raise MalformedFrameError(f"{label}: a field runs past the end of the frame ({exc})") from None
    except UnicodeDecodeError as exc:
        raise MalformedFrameError(f"{label}: cannot decode ({type(exc).__name__}: {exc})") from None
