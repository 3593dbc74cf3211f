"""Framing and request/response headers. Sans-IO: bytes in, frames and headers out.

A Kafka frame is a 4-byte big-endian size followed by that many bytes. A request starts with a
header whose version depends on whether the API version is "flexible": v1 (api key, api version,
correlation id, nullable client id) or v2 (v1 plus tagged fields). Responses use header v0
(correlation id) or v1 (plus tagged fields), except ApiVersions, whose response header is always
v0 so that a client can read it before it knows which versions the broker speaks.

The header is parsed here rather than through the codec library because the library copies the
whole remaining frame to parse a few bytes; on a 1 MiB produce request that copy is the largest
cost of decoding.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

SIZE_BYTES = 4
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_REQUEST_FIXED = struct.Struct(">hhi")  # api_key, api_version, correlation_id


class MalformedFrameError(ValueError):
    """The bytes cannot be a Kafka request: the connection that sent them is closed."""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int  # where the request body starts in the frame


def read_unsigned_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise MalformedFrameError("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise MalformedFrameError("varint longer than 5 bytes")


def write_unsigned_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def write_compact_string(value: str | None) -> bytes:
    """A flexible version's (nullable) string: unsigned varint of length + 1 (0 for null), UTF-8."""
    if value is None:
        return b"\x00"
    raw = value.encode()
    return write_unsigned_varint(len(raw) + 1) + raw


def write_string(value: str, flexible: bool) -> bytes:
    """A non-null string: compact in flexible versions, else int16 length and UTF-8."""
    if flexible:
        return write_compact_string(value)
    raw = value.encode("utf-8")
    return _INT16.pack(len(raw)) + raw


def write_nullable_string(value: str | None, flexible: bool) -> bytes:
    if flexible:
        return write_compact_string(value)
    return _INT16.pack(-1) if value is None else write_string(value, False)


def write_array_len(n: int, flexible: bool) -> bytes:
    """An array's count: unsigned varint of n + 1 in flexible versions, else int32."""
    return write_unsigned_varint(n + 1) if flexible else _INT32.pack(n)


def write_tagged_fields(fields: list[tuple[int, bytes]]) -> bytes:
    out = bytearray(write_unsigned_varint(len(fields)))
    for tag, payload in fields:
        out += write_unsigned_varint(tag)
        out += write_unsigned_varint(len(payload))
        out += payload
    return bytes(out)


def skip_tagged_fields(buf: bytes | bytearray | memoryview, pos: int) -> int:
    count, pos = read_unsigned_varint(buf, pos)
    for _ in range(count):
        _tag, pos = read_unsigned_varint(buf, pos)
        size, pos = read_unsigned_varint(buf, pos)
        pos += size
        if pos > len(buf):
            raise MalformedFrameError("tagged field past the end of the frame")
    return pos


def peek_api(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request frame body."""
    if len(frame) < _REQUEST_FIXED.size:
        raise MalformedFrameError(f"request of {len(frame)} bytes is shorter than a request header")
    key, version, correlation_id = _REQUEST_FIXED.unpack_from(frame, 0)
    return key, version, correlation_id


def parse_request_header(frame: bytes | bytearray | memoryview, flexible: bool) -> RequestHeader:
    """Parse header v1 (or v2 when ``flexible``) at the start of a frame body."""
    key, version, correlation_id = peek_api(frame)
    pos = _REQUEST_FIXED.size
    if pos + 2 > len(frame):
        raise MalformedFrameError("truncated client id")
    (length,) = _INT16.unpack_from(frame, pos)
    pos += 2
    client_id: str | None = None
    if length >= 0:
        if pos + length > len(frame):
            raise MalformedFrameError("client id past the end of the frame")
        try:
            client_id = bytes(frame[pos : pos + length]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedFrameError("client id is not UTF-8") from exc
        pos += length
    elif length != -1:
        raise MalformedFrameError(f"client id length {length}")
    if flexible:
        pos = skip_tagged_fields(frame, pos)
    return RequestHeader(key, version, correlation_id, client_id, pos)


def response_header(correlation_id: int, flexible: bool) -> bytes:
    """Response header v0, or v1 with an empty tagged-field section."""
    head = _INT32.pack(correlation_id)
    return head + b"\x00" if flexible else head


def frame_size(prefix: bytes | bytearray | memoryview, max_bytes: int) -> int:
    (size,) = _INT32.unpack_from(prefix, 0)
    if size < 0 or size > max_bytes:
        raise MalformedFrameError(f"frame size {size} outside [0, {max_bytes}]")
    return int(size)

