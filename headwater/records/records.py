"""The records inside a RecordBatch v2: just enough of each record to compact a log.

A record (Kafka's ``DefaultRecord``) is::

    length          varint    bytes after this field
    attributes      int8      unused
    timestampDelta  varlong   from the batch's base timestamp
    offsetDelta     varint    from the batch's base offset
    keyLength       varint    -1 = no key
    key             bytes
    valueLength     varint    -1 = no value (a tombstone)
    value           bytes
    headers         varint count, then the headers

The cleaner never re-encodes a record: it keeps or drops each one whole, so the bytes it keeps are
the bytes the producer sent, and only the batch around them is rebuilt (``rebuild_batch``). The
header fields that give records their offsets and timestamps (base offset, base timestamp) stay as
they were, so every kept record keeps its offset and timestamp.

Compressed batches hold the records compressed as one blob; ``batch_records`` decompresses and
``rebuild_batch`` compresses again with the same codec, through kafka-python's codec functions
(the ones its record builder uses, so the framing is what clients expect).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import crc32c
from kafka import codec

from headwater.records.batch import (
    ATTRIBUTES_POS,
    COMPRESSION_MASK,
    CRC_POS,
    HEADER_SIZE,
    LENGTH_POS,
    LOG_OVERHEAD,
    RECORD_COUNT_POS,
    BatchHeader,
    CorruptRecordError,
)

NO_COMPRESSION = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")

_DECOMPRESS: dict[int, Callable[[bytes], bytes]] = {
    GZIP: codec.gzip_decode,
    SNAPPY: codec.snappy_decode,
    LZ4: codec.lz4_decode,
    ZSTD: codec.zstd_decode,
}
_COMPRESS: dict[int, Callable[[bytes], bytes]] = {
    GZIP: codec.gzip_encode,
    SNAPPY: codec.snappy_encode,
    LZ4: codec.lz4_encode,
    ZSTD: codec.zstd_encode,
}


@dataclass(frozen=True, slots=True)
class RecordView:
    """One record's position in the (decompressed) records blob and the fields compaction reads."""

    start: int  # first byte of the length varint
    end: int  # one past the record's last byte
    offset_delta: int
    key: bytes | None
    has_value: bool  # False for a tombstone


def _varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Decode a zigzag varint at ``pos``: (value, position after it)."""
    shift = 0
    raw = 0
    while True:
        if pos >= len(buf):
            raise CorruptRecordError("record runs past the end of its batch")
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")


def batch_records(batch: bytes | memoryview, header: BatchHeader) -> bytes:
    """The records blob of a batch, decompressed."""
    body = bytes(batch[HEADER_SIZE : header.size])
    compression = header.compression
    if compression == NO_COMPRESSION:
        return body
    decompress = _DECOMPRESS.get(compression)
    if decompress is None:
        raise CorruptRecordError(f"unknown compression codec {compression}")
    try:
        return decompress(body)
    except Exception as exc:  # each codec raises its own types
        raise CorruptRecordError(f"cannot decompress batch at offset {header.base_offset}: {exc}") from exc


def iter_records(records: bytes, count: int) -> Iterator[RecordView]:
    """Walk ``count`` records of a records blob; raise CorruptRecordError when they do not fit it.

    The hot loop of the cleaner: varints of one or two bytes (lengths below 8 KiB, offset deltas
    below 8192) are decoded inline, and the timestamp delta is skipped without decoding.
    """
    pos = 0
    end = len(records)
    buf = records
    try:
        for _ in range(count):
            b = buf[pos]
            if b < 0x80:
                length, body = (b >> 1) ^ -(b & 1), pos + 1
            elif buf[pos + 1] < 0x80:
                raw = (b & 0x7F) | (buf[pos + 1] << 7)
                length, body = (raw >> 1) ^ -(raw & 1), pos + 2
            else:
                length, body = _varint(buf, pos)
            stop = body + length
            if length < 0 or stop > end:
                raise CorruptRecordError(f"record of {length} bytes runs past the end of its batch")
            p = body + 1  # attributes
            while buf[p] & 0x80:  # timestamp delta
                p += 1
            p += 1
            b = buf[p]
            if b < 0x80:
                offset_delta, p = (b >> 1) ^ -(b & 1), p + 1
            elif buf[p + 1] < 0x80:
                raw = (b & 0x7F) | (buf[p + 1] << 7)
                offset_delta, p = (raw >> 1) ^ -(raw & 1), p + 2
            else:
                offset_delta, p = _varint(buf, p)
            b = buf[p]
            if b < 0x80:
                key_len, p = (b >> 1) ^ -(b & 1), p + 1
            elif buf[p + 1] < 0x80:
                raw = (b & 0x7F) | (buf[p + 1] << 7)
                key_len, p = (raw >> 1) ^ -(raw & 1), p + 2
            else:
                key_len, p = _varint(buf, p)
            key: bytes | None = None
            if key_len >= 0:
                key = buf[p : p + key_len]
                p += key_len
            b = buf[p]
            if b < 0x80:
                value_len, p = (b >> 1) ^ -(b & 1), p + 1
            elif buf[p + 1] < 0x80:
                raw = (b & 0x7F) | (buf[p + 1] << 7)
                value_len, p = (raw >> 1) ^ -(raw & 1), p + 2
            else:
                value_len, p = _varint(buf, p)
            if p > stop or (value_len > 0 and p + value_len > stop):
                raise CorruptRecordError("record fields run past the record's length")
            yield RecordView(pos, stop, offset_delta, key, value_len >= 0)
            pos = stop
    except IndexError:
        raise CorruptRecordError("record runs past the end of its batch") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes after the last record of a batch")


def keyless_records(buf: bytes | bytearray | memoryview, batches: list[tuple[int, BatchHeader]]) -> list[int]:
    """Indexes (counted over all records of ``batches``) of the records without a key.

    Raises CorruptRecordError when a batch's records do not parse.
    """
    view = memoryview(buf)
    missing: list[int] = []
    index = 0
    for pos, header in batches:
        blob = batch_records(view[pos : pos + header.size], header)
        for i, rec in enumerate(iter_records(blob, header.record_count)):
            if rec.key is None:
                missing.append(index + i)
        index += header.record_count
    return missing


def rebuild_batch(batch: bytes | memoryview, header: BatchHeader, records: bytes, count: int) -> bytes:
    """The batch with its records replaced by ``records`` (``count`` of them, uncompressed).

    Every header field but length, CRC and record count stays: base offset, last offset delta,
    timestamps, producer id, epoch and base sequence. So the batch still spans the same offsets
    and sequence numbers, which is what the producer-state rebuild on load reads. ``count == 0``
    gives an empty batch that only carries that header.
    """
    compression = header.compression
    if compression != NO_COMPRESSION and count:
        compress = _COMPRESS.get(compression)
        if compress is None:
            raise CorruptRecordError(f"unknown compression codec {compression}")
        body = compress(records)
    else:
        body = records
    out = bytearray(batch[:HEADER_SIZE])
    if not count:
        # No records to compress: write the header uncompressed, as Kafka writes empty batches.
        attributes = struct.unpack_from(">h", out, ATTRIBUTES_POS)[0] & ~COMPRESSION_MASK
        struct.pack_into(">h", out, ATTRIBUTES_POS, attributes)
    out += body
    _INT32.pack_into(out, LENGTH_POS, len(out) - LOG_OVERHEAD)
    _INT32.pack_into(out, RECORD_COUNT_POS, count)
    _UINT32.pack_into(out, CRC_POS, crc32c.crc32c(memoryview(out)[ATTRIBUTES_POS:]))
    return bytes(out)
