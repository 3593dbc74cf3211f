"""Valid and malformed request frames for every API key and version we advertise.

Shared by tests/unit/protocol/test_strict_decoding.py (in process, exhaustively) and
tests/integration/security/test_decoder_fuzz.py (a sample, over sockets to a live broker).

``Filler`` builds a fully populated request of one version from kafka-python's schema classes
(which are Kafka's JSON message schemas): ints small, every string and bytes field a unique marker,
arrays of one element, uuids non-zero. The mutations are the ones Kafka's parser refuses (see the
unit test's docstring for where in apache/kafka): a prefix cut, bytes after the last field, a string
or bytes length longer than its value, and null in a field that is not nullable at that version.
"""

from __future__ import annotations

import random
import struct
import uuid
from dataclasses import dataclass
from typing import Any

from kafka.protocol.api_message import ApiMessage

from headwater.protocol.apis import API_SPECS, ApiKey
from headwater.protocol.frame import parse_request_header, write_unsigned_varint

CLIENT_ID = "strict-test"  # contains no marker
CORRELATION_ID = 5

API_VERSIONS: list[tuple[ApiKey, int]] = [
    (spec.key, version) for spec in API_SPECS.values() for version in range(spec.min_version, spec.max_version + 1)
]


def framed(req: Any, correlation_id: int = CORRELATION_ID) -> bytes:
    """Header and body (no size prefix), by kafka-python's generic encoder: some request classes
    override ``encode`` to fix up fields (MetadataRequest v0 sends a null topic list as empty),
    which would hide the nulls sent here on purpose."""
    req.with_header(correlation_id=correlation_id, client_id=CLIENT_ID)
    return bytes(ApiMessage.encode(req, header=True, framed=False))


def body_offset(frame: bytes) -> int:
    key, version = struct.unpack_from(">hh", frame, 0)
    return parse_request_header(frame, API_SPECS[key].is_flexible(version)).body_offset


@dataclass(frozen=True)
class Marker:
    text: bytes
    kind: str  # "string" or "bytes"
    path: str


class Filler:
    """Builds a request of one version with every field set. ``null`` names one field (by path, as
    in ``topics[0].name``) to send as null instead; ``field[0]`` is the element of an array of
    strings or bytes."""

    def __init__(self, version: int, null: str | None = None) -> None:
        self.version = version
        self.null = null
        self.markers: list[Marker] = []
        # (path, nullable) of every field that can be null on the wire. Elements of arrays of
        # strings or bytes are never nullable in Kafka's readers; tagged fields are left out (a
        # null tagged field is its default, which is not sent at all).
        self.nullables: list[tuple[str, bool]] = []

    def message(self, cls: Any) -> Any:
        return cls(version=self.version, **self._fields(cls._struct, "", tagged=False))

    def _fields(self, struct_field: Any, path: str, tagged: bool) -> dict[str, Any]:
        out = {}
        for field in struct_field.fields.values():
            if field.for_version_q(self.version):
                out[field.name] = self._value(field, f"{path}.{field.name}" if path else field.name,
                                              tagged or bool(field.tagged_field_q(self.version)))
        return out

    def _value(self, field: Any, path: str, tagged: bool) -> Any:
        if not tagged and (field.is_array() or field.is_struct() or field.type_str in ("string", "bytes", "records")):
            self.nullables.append((path, bool(field.nullable_for_version_q(self.version))))
        if path == self.null:
            return None
        if field.is_struct_array():
            return [field.data_class(version=self.version, **self._fields(field.array_of, path + "[0]", tagged))]
        if field.is_struct():
            return field.data_class(version=self.version, **self._fields(field, path, tagged))
        if field.is_array():
            elem = field.array_of
            if elem.type_str in ("string", "bytes") and not tagged:
                self.nullables.append((path + "[0]", False))
                if path + "[0]" == self.null:
                    return [None]
            return [self._simple(elem.type_str, path + "[0]")]
        return self._simple(field.type_str, path)

    def _simple(self, type_str: str, path: str) -> Any:
        if type_str == "string":
            text = b"Zq%04d" % len(self.markers)
            self.markers.append(Marker(text, "string", path))
            return text.decode()
        if type_str in ("bytes", "records"):
            text = b"Zb%04d" % len(self.markers)
            self.markers.append(Marker(text, "bytes", path))
            return text
        if type_str == "uuid":
            return uuid.UUID(int=0x1000 + len(self.markers))
        if type_str == "bool":
            return True
        if type_str == "float64":
            return 1.5
        assert type_str in ("int8", "int16", "uint16", "int32", "int64"), type_str
        return 1


@dataclass(frozen=True)
class Sample:
    """One valid request of one API version, and what its fields are."""

    key: ApiKey
    version: int
    frame: bytes  # header and body, no size prefix
    markers: list[Marker]
    nullables: list[tuple[str, bool]]

    @property
    def flexible(self) -> bool:
        return API_SPECS[self.key].is_flexible(self.version)

    @property
    def body_offset(self) -> int:
        return body_offset(self.frame)

    def length_prefix(self, marker: Marker) -> tuple[int, int]:
        """(start, end) of ``marker``'s length prefix: an int16 (string) or int32 (bytes) before
        flexible versions, a varint from them on."""
        at = self.frame.index(marker.text)
        n = len(marker.text)
        if self.flexible:
            assert self.frame[at - 1] == n + 1  # the compact length of a 6-byte marker is one byte
            return at - 1, at
        width = 2 if marker.kind == "string" else 4
        assert int.from_bytes(self.frame[at - width : at], "big", signed=True) == n
        return at - width, at

    def overlong(self, marker: Marker, extra: int) -> bytes:
        """The frame with ``marker``'s length ``extra`` bytes longer than its value."""
        start, end = self.length_prefix(marker)
        n = len(marker.text) + extra
        if self.flexible:
            prefix = write_unsigned_varint(n + 1)
        else:
            prefix = struct.pack(">h" if marker.kind == "string" else ">i", n)
        return self.frame[:start] + prefix + self.frame[end:]

    def past_end(self, marker: Marker) -> tuple[int, int]:
        """Two length increases that make ``marker``'s value run past the frame: by one byte more
        than follows the value (the tightest such case), and by the whole frame's size. A smaller
        increase may still parse, as the next fields shifted (Kafka would read that too)."""
        _start, end = self.length_prefix(marker)
        rest = len(self.frame) - end - len(marker.text)
        return rest + 1, len(self.frame)

    def with_null(self, path: str) -> bytes:
        """The same request with the field at ``path`` sent as null (-1, or compact 0)."""
        return framed(Filler(self.version, null=path).message(API_SPECS[self.key].request))

    def malformed(self, rng: random.Random) -> list[tuple[str, bytes]]:
        """A sample of malformed variants, one of each kind this version has, labelled. Bytes left
        over after the last field are not among them: Kafka ignores them, and so does the broker."""
        out: list[tuple[str, bytes]] = []
        body = self.body_offset
        if len(self.frame) > body:
            cut = rng.randrange(body, len(self.frame))
            out.append((f"cut at {cut} of {len(self.frame)}", self.frame[:cut]))
        if self.markers:
            marker = rng.choice(self.markers)
            start, end = self.length_prefix(marker)
            if end - start > 1:
                cut = rng.randrange(start + 1, end)
                out.append((f"cut inside the length of {marker.path}", self.frame[:cut]))
            extra = rng.choice(self.past_end(marker))
            out.append((f"{marker.path} length +{extra}", self.overlong(marker, extra)))
        required = [path for path, nullable in self.nullables if not nullable]
        if required:
            path = rng.choice(required)
            out.append((f"{path} sent as null", self.with_null(path)))
        return out


def sample(key: ApiKey, version: int) -> Sample:
    filler = Filler(version)
    frame = framed(filler.message(API_SPECS[key].request))
    return Sample(key, version, frame, filler.markers, filler.nullables)
