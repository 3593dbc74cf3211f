"""ListPartitionReassignmentsResponse writer.

The controller answers this with one entry per moving partition, and during a large move that is
tens of thousands of entries: building the codec library's objects and encoding them cost more than
twice the controller's own work. The message is small and fixed (v0, flexible), so it is written
here straight from the controller's listing. Field layout is Kafka's
ListPartitionReassignmentsResponse v0; tests check it against the library's decoder.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Protocol

from headwater.protocol.frame import write_compact_string, write_unsigned_varint

_HEAD = struct.Struct(">iBih")  # correlation id, empty header tags, throttle time, error code
_I32 = struct.Struct(">i")
_ONE_BYTE_VARINT = 127  # a compact array of n < 127 items has its length (n + 1) in one byte

MIN_VERSION = 0
MAX_VERSION = 0


class Listing(Protocol):
    """One ongoing reassignment, as the controller lists it."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def replicas(self) -> Sequence[int]: ...
    @property
    def adding_replicas(self) -> Sequence[int]: ...
    @property
    def removing_replicas(self) -> Sequence[int]: ...


def _entry_packer(shape: tuple[int, int, int], _cache: dict[tuple[int, int, int], struct.Struct] = {}) -> struct.Struct:  # noqa: B006 - a cache
    """One struct per (replicas, adding, removing) length: partition index, three compact arrays whose
    lengths fit one varint byte, and an empty tag section, in one pack call."""
    packer = _cache.get(shape)
    if packer is None:
        n, a, r = shape
        packer = _cache[shape] = struct.Struct(f">iB{n}iB{a}iB{r}iB")
    return packer


def _entry(r: Listing) -> bytes:
    rs, ar, rr = r.replicas, r.adding_replicas, r.removing_replicas
    n, a, m = len(rs), len(ar), len(rr)
    if n < _ONE_BYTE_VARINT and a < _ONE_BYTE_VARINT and m < _ONE_BYTE_VARINT:
        return _entry_packer((n, a, m)).pack(r.partition, n + 1, *rs, a + 1, *ar, m + 1, *rr, 0)
    return _I32.pack(r.partition) + _int32_array(rs) + _int32_array(ar) + _int32_array(rr) + b"\x00"


def _int32_array(values: Sequence[int]) -> bytes:
    return write_unsigned_varint(len(values) + 1) + struct.pack(f">{len(values)}i", *values)


def encode_list_reassignments_response(
    version: int,
    correlation_id: int,
    listings: Iterable[Listing],
    *,
    error_code: int = 0,
    error_message: str | None = None,
    throttle_time_ms: int = 0,
) -> bytes:
    """The whole frame (size prefix included). Listings of one topic are grouped in first-seen order."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"ListPartitionReassignmentsResponse v{version} is not supported")
    by_topic: dict[str, list[bytes]] = {}
    for r in listings:
        entries = by_topic.get(r.topic)
        if entries is None:
            entries = by_topic[r.topic] = []
        entries.append(_entry(r))
    out = [_HEAD.pack(correlation_id, 0, throttle_time_ms, error_code),
           write_compact_string(error_message),
           write_unsigned_varint(len(by_topic) + 1)]
    for name, entries in by_topic.items():
        out.append(write_compact_string(name))
        out.append(write_unsigned_varint(len(entries) + 1))
        out.extend(entries)
        out.append(b"\x00")
    out.append(b"\x00")
    body = b"".join(out)
    return _I32.pack(len(body)) + body
