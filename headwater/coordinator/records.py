"""The records of ``__consumer_offsets``, in Kafka's own key and value formats, and the partition of a group.

Kafka's tools (and a broker reading our log) must agree with us byte for byte, so the layouts are
those of Kafka's ``OffsetCommitKey`` / ``OffsetCommitValue`` and ``GroupMetadataKey`` /
``GroupMetadataValue`` messages. A key starts with its int16 version, which tells the kind:
0 and 1 are offset commits, 2 is group metadata. Values carry their own int16 version; we write
OffsetCommitValue v3 and GroupMetadataValue v3 (the last non-flexible ones, what ZooKeeper-era
Kafka 3.x brokers write) and read v0-v3.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
# Kafka's Topic.INTERNAL_TOPICS: Metadata marks them internal.
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3
MAX_READ_VALUE_VERSION = 3  # v4 is flexible (tagged fields); nobody we talk to writes it in ZooKeeper mode

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A ``__consumer_offsets`` record we cannot read."""


def java_string_hashcode(s: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    raw = s.encode("utf-16-be")
    for i in range(0, len(raw), 2):
        h = (31 * h + ((raw[i] << 8) | raw[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % n``; ``Utils.abs`` maps MIN_VALUE to 0, not to itself."""
    h = java_string_hashcode(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    state_timestamp_ms: int
    members: tuple[MemberValue, ...]


# --- writing -----------------------------------------------------------------------------------------


def _str(s: str) -> bytes:
    raw = s.encode()
    return _I16.pack(len(raw)) + raw


def _nstr(s: str | None) -> bytes:
    return _I16.pack(-1) if s is None else _str(s)


def _bytes(b: bytes) -> bytes:
    return _I32.pack(len(b)) + b


def encode_offset_key(key: OffsetKey) -> bytes:
    return _I16.pack(OFFSET_KEY_VERSION) + _str(key.group) + _str(key.topic) + _I32.pack(key.partition)


def encode_group_key(key: GroupKey) -> bytes:
    return _I16.pack(GROUP_KEY_VERSION) + _str(key.group)


def encode_offset_value(v: OffsetValue) -> bytes:
    return (_I16.pack(OFFSET_VALUE_VERSION) + _I64.pack(v.offset) + _I32.pack(v.leader_epoch) + _str(v.metadata)
            + _I64.pack(v.commit_timestamp_ms))


def encode_group_value(v: GroupValue) -> bytes:
    parts = [_I16.pack(GROUP_VALUE_VERSION), _str(v.protocol_type), _I32.pack(v.generation), _nstr(v.protocol),
             _nstr(v.leader), _I64.pack(v.state_timestamp_ms), _I32.pack(len(v.members))]
    for m in v.members:
        parts += [_str(m.member_id), _nstr(m.instance_id), _str(m.client_id), _str(m.client_host),
                  _I32.pack(m.rebalance_timeout_ms), _I32.pack(m.session_timeout_ms), _bytes(m.subscription),
                  _bytes(m.assignment)]
    return b"".join(parts)


# --- reading -----------------------------------------------------------------------------------------


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise RecordFormatError(f"record ends at byte {len(self.buf)}, wanted {n} more at {self.pos}")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def nstr(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self._take(n).decode()

    def str(self) -> str:
        s = self.nstr()
        if s is None:
            raise RecordFormatError("null where a string is required")
        return s

    def bytes(self) -> bytes:
        n = self.i32()
        return b"" if n < 0 else self._take(n)


def decode_key(raw: bytes) -> OffsetKey | GroupKey:
    r = _Reader(raw)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.str(), r.str(), r.i32())
    if version == GROUP_KEY_VERSION:
        return GroupKey(r.str())
    raise RecordFormatError(f"unknown __consumer_offsets key version {version}")


def decode_offset_value(raw: bytes) -> OffsetValue:
    r = _Reader(raw)
    version = r.i16()
    if not 0 <= version <= MAX_READ_VALUE_VERSION:
        raise RecordFormatError(f"unsupported OffsetCommitValue version {version}")
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.str()
    ts = r.i64()
    if version == 1:
        r.i64()  # expireTimestamp: retention is the broker's offsets.retention.minutes
    return OffsetValue(offset, epoch, metadata, ts)


def decode_group_value(raw: bytes) -> GroupValue:
    r = _Reader(raw)
    version = r.i16()
    if not 0 <= version <= MAX_READ_VALUE_VERSION:
        raise RecordFormatError(f"unsupported GroupMetadataValue version {version}")
    protocol_type = r.str()
    generation = r.i32()
    protocol = r.nstr()
    leader = r.nstr()
    ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.i32()):
        member_id = r.str()
        instance_id = r.nstr() if version >= 3 else None
        client_id = r.str()
        client_host = r.str()
        rebalance = r.i32() if version >= 1 else -1
        session = r.i32()
        subscription = r.bytes()
        assignment = r.bytes()
        members.append(MemberValue(member_id, instance_id, client_id, client_host,
                                   rebalance if rebalance >= 0 else session, session, subscription, assignment))
    return GroupValue(protocol_type, generation, protocol, leader, ts, tuple(members))


def subscribed_topics(subscription: bytes) -> frozenset[str]:
    """Topics of a consumer protocol subscription (every version starts with them); empty if unreadable."""
    try:
        r = _Reader(subscription)
        r.i16()
        count = r.i32()
        return frozenset(r.str() for _ in range(max(count, 0)))
    except (RecordFormatError, UnicodeDecodeError):
        return frozenset()
