"""ProduceResponse writer.

Every produce is answered with one of these, so the broker writes it field by field instead of
building the codec library's objects for it: at the request rates of a replicated topic (a batch per
partition every ``linger.ms``), those objects cost about as much as the append itself. Field layout
is Kafka's ProduceResponse v3-v11 (flexible from v9; the v10+ tagged leader hints are not written,
as they are optional); tests check it byte for byte against the library's encoder.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from headwater.protocol.frame import response_header, write_array_len, write_nullable_string, write_string

_I32 = struct.Struct(">i")
_OFFSETS_V3 = struct.Struct(">ihqq")  # index, error, base offset, log append time
_OFFSETS_V5 = struct.Struct(">ihqqq")  # ... and log start offset
FLEXIBLE_FROM = 9


@dataclass(slots=True)
class PartitionResult:
    index: int
    error_code: int = 0
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_errors: Sequence[tuple[int, str | None]] = field(default_factory=tuple)  # (batch index, message)
    error_message: str | None = None


def encode_produce_response(version: int, correlation_id: int,
                            topics: Sequence[tuple[str, Sequence[PartitionResult]]], throttle_time_ms: int = 0) -> bytes:
    """The whole frame (size prefix, header, body) of a ProduceResponse of ``version`` (3-11)."""
    if not 3 <= version <= 11:
        raise ValueError(f"ProduceResponse v{version} is not written here")
    flexible = version >= FLEXIBLE_FROM
    out = [response_header(correlation_id, flexible), write_array_len(len(topics), flexible)]
    for name, partitions in topics:
        out.append(write_string(name, flexible))
        out.append(write_array_len(len(partitions), flexible))
        for p in partitions:
            if version >= 5:
                out.append(_OFFSETS_V5.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms,
                                            p.log_start_offset))
            else:
                out.append(_OFFSETS_V3.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms))
            if version >= 8:
                out.append(write_array_len(len(p.record_errors), flexible))
                for batch_index, message in p.record_errors:
                    out.append(_I32.pack(batch_index))
                    out.append(write_nullable_string(message, flexible))
                    if flexible:
                        out.append(b"\x00")
                out.append(write_nullable_string(p.error_message, flexible))
            if flexible:
                out.append(b"\x00")
        if flexible:
            out.append(b"\x00")
    out.append(_I32.pack(throttle_time_ms))
    if flexible:
        out.append(b"\x00")
    body = b"".join(out)
    return _I32.pack(len(body)) + body
