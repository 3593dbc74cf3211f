"""FetchResponse writer that leaves record bytes where they are, and the follower's side: its
FetchRequest writer and its reader of the response.

The broker encodes the fetch response itself instead of through the codec library because it is
mostly record batches that already sit in segment files, and the library needs them as one
contiguous buffer. Here the response is a list of parts, small ``bytes`` for the fields and
opaque ``RecordsPart`` objects for the records, so the server can ``os.sendfile`` the batches
straight from the page cache. Field layout is Kafka's FetchResponse v4-v16 (tests check it
against the library's decoder).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from headwater.protocol.frame import (
    MalformedFrameError,
    read_unsigned_varint,
    skip_tagged_fields,
    write_array_len,
    write_compact_string,
    write_nullable_string,
    write_string,
    write_tagged_fields,
    write_unsigned_varint,
)
from headwater.values import value

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_FIXED = struct.Struct(">ihqq")  # index, error, high watermark, last stable offset
_I64 = struct.Struct(">q")
_TAG_EPOCH_END = struct.Struct(">iq")
_TAG_LEADER = struct.Struct(">ii")
_ABORTED_ENTRY = struct.Struct(">qq")  # producer id, first offset

MIN_VERSION = 4
MAX_VERSION = 17  # v17 changes only the request (a follower's directory id, KIP-853)
FLEXIBLE_FROM = 12
TOPIC_ID_FROM = 13


class RecordsPart(Protocol):
    """A run of record bytes the server knows how to send (a file range, or bytes)."""

    @property
    def length(self) -> int: ...


@value
class BytesPart:
    data: bytes

    @property
    def length(self) -> int:
        return len(self.data)


@dataclass(slots=True)
class FetchPartitionData:
    partition: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: Sequence[RecordsPart] = ()
    preferred_read_replica: int = -1
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset): tag 0, v12+
    current_leader: tuple[int, int] | None = None  # (leader id, leader epoch): tag 1, v12+
    # (producer id, first offset) of each aborted transaction in the records, for a read_committed
    # fetch; None (written as a null array) for a read_uncommitted one, as Kafka answers.
    aborted_transactions: Sequence[tuple[int, int]] | None = None


@dataclass(slots=True)
class FetchTopicData:
    name: str
    topic_id: uuid.UUID
    partitions: list[FetchPartitionData] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class NodeEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None


def encode_fetch_response(
    version: int,
    correlation_id: int,
    topics: Sequence[FetchTopicData],
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
    node_endpoints: Sequence[NodeEndpoint] = (),
) -> tuple[list[bytes | RecordsPart], int]:
    """Return (parts, frame size). Parts include the 4-byte size prefix; bytes parts are small."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"FetchResponse v{version} is not supported")
    flexible = version >= FLEXIBLE_FROM
    parts: list[bytes | RecordsPart] = []
    head = bytearray()
    head += _I32.pack(correlation_id)
    if flexible:
        head += b"\x00"  # response header v1: no tagged fields
    head += _I32.pack(throttle_time_ms)
    if version >= 7:
        head += _I16.pack(error_code) + _I32.pack(session_id)
    head += write_array_len(len(topics), flexible)
    for topic in topics:
        if version >= TOPIC_ID_FROM:
            head += topic.topic_id.bytes
        else:
            head += write_string(topic.name, flexible)
        head += write_array_len(len(topic.partitions), flexible)
        for p in topic.partitions:
            head += _PARTITION_FIXED.pack(
                p.partition, p.error_code, p.high_watermark, p.last_stable_offset
            )
            if version >= 5:
                head += _I64.pack(p.log_start_offset)
            aborted = p.aborted_transactions
            if aborted is None:
                head += b"\x00" if flexible else _I32.pack(-1)
            else:
                head += write_array_len(len(aborted), flexible)
                for producer_id, first_offset in aborted:
                    head += _ABORTED_ENTRY.pack(producer_id, first_offset)
                    if flexible:
                        head += b"\x00"
            if version >= 11:
                head += _I32.pack(p.preferred_read_replica)
            size = sum(r.length for r in p.records)
            head += write_unsigned_varint(size + 1) if flexible else _I32.pack(size)
            if size:
                parts.append(bytes(head))
                head = bytearray()
                parts.extend(r for r in p.records if r.length)
            if flexible:
                tags: list[tuple[int, bytes]] = []
                if p.diverging_epoch is not None:
                    tags.append((0, _TAG_EPOCH_END.pack(*p.diverging_epoch) + b"\x00"))
                if p.current_leader is not None:
                    tags.append((1, _TAG_LEADER.pack(*p.current_leader) + b"\x00"))
                head += write_tagged_fields(tags)
        if flexible:
            head += b"\x00"
    if flexible:
        top_tags: list[tuple[int, bytes]] = []
        if version >= 16 and node_endpoints:
            body = bytearray(write_array_len(len(node_endpoints), True))
            for ep in node_endpoints:
                body += _I32.pack(ep.node_id) + write_string(ep.host, True) + _I32.pack(ep.port)
                body += write_nullable_string(ep.rack, True) + b"\x00"
            top_tags.append((0, bytes(body)))
        head += write_tagged_fields(top_tags)
    parts.append(bytes(head))
    total = sum(len(x) if isinstance(x, bytes) else x.length for x in parts)
    parts.insert(0, _I32.pack(total))
    return parts, total


# --- the follower's side: writing a FetchRequest v12, reading its response ----------------------------

FOLLOWER_VERSION = 12
"""The Fetch version followers send: topic names (so KIP-227 sessions apply), diverging epochs."""

_REQUEST_TOP = struct.Struct(">iiiibii")  # replica, max wait, min bytes, max bytes, isolation, session id, epoch
# partition, current leader epoch, fetch offset, last fetched epoch, log start offset, max bytes, no tags
_REQUEST_PARTITION = struct.Struct(">iiqiqiB")


def encode_follower_fetch_request(replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
                                  session_id: int, session_epoch: int,
                                  topics: Sequence[tuple[str, Sequence[tuple[int, int, int, int, int, int]]]],
                                  forgotten: Sequence[tuple[str, Sequence[int]]]) -> bytes:
    """The body of a follower's FetchRequest v12 (read_uncommitted, no rack). ``topics`` holds, per
    topic, (partition, current leader epoch, fetch offset, last fetched epoch, log start offset,
    partition max bytes) of each partition; ``forgotten`` the partitions a session drops. A follower
    sends one of these per produce it replicates, and writing it field by field through the codec
    library's objects cost more than the rest of its fetch step."""
    out = [_REQUEST_TOP.pack(replica_id, max_wait_ms, min_bytes, max_bytes, 0, session_id, session_epoch),
           write_unsigned_varint(len(topics) + 1)]
    pack = _REQUEST_PARTITION.pack
    for topic, partitions in topics:
        out.append(write_compact_string(topic))
        out.append(write_unsigned_varint(len(partitions) + 1))
        out += [pack(p, leader_epoch, offset, fetched_epoch, log_start, limit, 0)
                for p, leader_epoch, offset, fetched_epoch, log_start, limit in partitions]
        out.append(b"\x00")
    out.append(write_unsigned_varint(len(forgotten) + 1))
    for topic, gone in forgotten:
        out.append(write_compact_string(topic))
        out.append(write_unsigned_varint(len(gone) + 1))
        out += [_I32.pack(p) for p in gone]
        out.append(b"\x00")
    out.append(b"\x01\x00")  # rack id "" (compact: length + 1), no tagged fields
    return b"".join(out)


@value
class EpochEnd:
    epoch: int
    end_offset: int


@value
class FetchedPartition:
    partition_index: int
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: memoryview | None  # a slice of the response frame: appended as it is, never copied
    diverging_epoch: EpochEnd | None


@value
class FetchedTopic:
    topic: str
    partitions: list[FetchedPartition]


@value
class FetchedResponse:
    correlation_id: int
    error_code: int
    session_id: int
    responses: list[FetchedTopic]


_RESPONSE_TOP = struct.Struct(">ihi")  # throttle time, error, session id
_PARTITION_V12 = struct.Struct(">ihqqq")  # index, error, high watermark, last stable offset, log start
_ABORTED = 16  # producer id, first offset (int64 each), then the entry's tagged fields


def decode_follower_fetch_response(frame: bytes | bytearray | memoryview) -> FetchedResponse:
    """A FetchResponse v12 frame (header included, size prefix not), with each partition's records
    as a memoryview into ``frame``: a follower's fetch of megabytes is decoded without copying them.
    Raises MalformedFrameError for bytes that are not such a response."""
    buf = memoryview(frame)
    end = len(buf)

    def need(pos: int, n: int) -> None:
        if pos + n > end:
            raise MalformedFrameError("fetch response ends inside a field")

    need(0, 4)
    correlation_id = _I32.unpack_from(buf, 0)[0]
    pos = skip_tagged_fields(buf, 4)
    need(pos, _RESPONSE_TOP.size)
    _throttle, error_code, session_id = _RESPONSE_TOP.unpack_from(buf, pos)
    pos += _RESPONSE_TOP.size
    n_topics, pos = read_unsigned_varint(buf, pos)
    topics: list[FetchedTopic] = []
    for _ in range(max(n_topics - 1, 0)):
        name_len, pos = read_unsigned_varint(buf, pos)
        if name_len == 0:
            raise MalformedFrameError("null topic name in a fetch response")
        need(pos, name_len - 1)
        name = bytes(buf[pos:pos + name_len - 1]).decode()
        pos += name_len - 1
        n_parts, pos = read_unsigned_varint(buf, pos)
        parts: list[FetchedPartition] = []
        for _ in range(max(n_parts - 1, 0)):
            need(pos, _PARTITION_V12.size)
            index, perr, hw, _lso, log_start = _PARTITION_V12.unpack_from(buf, pos)
            pos += _PARTITION_V12.size
            n_aborted, pos = read_unsigned_varint(buf, pos)
            for _ in range(max(n_aborted - 1, 0)):
                need(pos, _ABORTED)
                pos = skip_tagged_fields(buf, pos + _ABORTED)
            need(pos, 4)  # preferred read replica
            pos += 4
            size, pos = read_unsigned_varint(buf, pos)
            records = None
            if size:
                need(pos, size - 1)
                records = buf[pos:pos + size - 1]
                pos += size - 1
            diverging = None
            n_tags, pos = read_unsigned_varint(buf, pos)
            for _ in range(n_tags):
                tag, pos = read_unsigned_varint(buf, pos)
                tag_size, pos = read_unsigned_varint(buf, pos)
                need(pos, tag_size)
                if tag == 0:
                    need(pos, _TAG_EPOCH_END.size)
                    diverging = EpochEnd(*_TAG_EPOCH_END.unpack_from(buf, pos))
                pos += tag_size
            parts.append(FetchedPartition(index, perr, hw, log_start, records, diverging))
        pos = skip_tagged_fields(buf, pos)
        topics.append(FetchedTopic(name, parts))
    skip_tagged_fields(buf, pos)
    return FetchedResponse(correlation_id, error_code, session_id, topics)
