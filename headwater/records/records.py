"""The records inside a RecordBatch v2: enough of each record to compact a log, to validate
record timestamps and to rebuild a batch with the topic's codec (``convert_batch``).

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

import gzip
import struct
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import crc32c
import lz4.frame
import zstandard
from kafka import codec

from headwater.records.batch import (
    ATTRIBUTES_POS,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_POS,
    HEADER_SIZE,
    LENGTH_POS,
    LOG_OVERHEAD,
    RECORD_COUNT_POS,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
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
_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")

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


# ---- conversion on the leader: a topic's compression.type and LogAppendTime -----------------------

# Kafka's default compression levels (KIP-390, Kafka 3.8+: compression.<codec>.level).
GZIP_DEFAULT_LEVEL = -1  # zlib's default (6), Deflater.DEFAULT_COMPRESSION
LZ4_DEFAULT_LEVEL = 9
ZSTD_DEFAULT_LEVEL = 3

_zstd_local = threading.local()


def _zstd_compressor(level: int) -> zstandard.ZstdCompressor:
    """One compressor per level and thread (a ``ZstdCompressor`` must not be shared between threads)."""
    cache: dict[int, zstandard.ZstdCompressor] | None = getattr(_zstd_local, "cache", None)
    if cache is None:
        cache = _zstd_local.cache = {}
    found = cache.get(level)
    if found is None:
        found = cache[level] = zstandard.ZstdCompressor(level=level)
    return found


def compress(codec_id: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """``data`` compressed with ``codec_id`` at ``level`` (None: Kafka's default for the codec), framed
    the way Kafka's own writers frame it: gzip members, xerial-framed snappy, LZ4 frames with
    independent blocks, zstd frames. Snappy has no level."""
    if codec_id == NO_COMPRESSION:
        return bytes(data)
    if codec_id == GZIP:
        return gzip.compress(bytes(data), compresslevel=GZIP_DEFAULT_LEVEL if level is None else level, mtime=0)
    if codec_id == SNAPPY:
        return bytes(codec.snappy_encode(bytes(data)))
    if codec_id == LZ4:
        # lz4's frame format caps HC levels at 16 (LZ4HC_CLEVEL_MAX is 12: higher levels act as it).
        return bytes(lz4.frame.compress(bytes(data), compression_level=min(LZ4_DEFAULT_LEVEL if level is None else level, 16),
                                        block_linked=False, store_size=False))
    if codec_id == ZSTD:
        return bytes(_zstd_compressor(ZSTD_DEFAULT_LEVEL if level is None else level).compress(data))
    raise CorruptRecordError(f"unknown compression codec {codec_id}")


@dataclass(frozen=True, slots=True)
class RecordFields:
    """Every field of one record of a (decompressed) records blob, as positions and numbers."""

    start: int  # first byte of the length varint
    end: int  # one past the record's last byte
    attributes: int
    timestamp_delta: int
    offset_delta: int
    tail: int  # first byte of the key length: key, value and headers run from here to ``end``
    key_length: int  # -1: no key
    value_length: int  # -1: no value (a tombstone)


def scan_records(records: bytes | memoryview, count: int) -> list[RecordFields]:
    """Decode ``count`` records' fields (not their bytes); raise CorruptRecordError when they do not
    fit the blob exactly. Varints of one or two bytes are decoded inline, as in ``iter_records``."""
    out: list[RecordFields] = []
    append = out.append
    buf = records
    pos = 0
    end = len(buf)
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
            if length < 1 or stop > end:
                raise CorruptRecordError(f"record of {length} bytes runs past the end of its batch")
            attributes = buf[body]
            p = body + 1
            b = buf[p]
            if b < 0x80:
                ts_delta, p = (b >> 1) ^ -(b & 1), p + 1
            elif buf[p + 1] < 0x80:
                raw = (b & 0x7F) | (buf[p + 1] << 7)
                ts_delta, p = (raw >> 1) ^ -(raw & 1), p + 2
            else:
                ts_delta, p = _varint(buf, p)
            b = buf[p]
            if b < 0x80:
                offset_delta, p = (b >> 1) ^ -(b & 1), p + 1
            elif buf[p + 1] < 0x80:
                raw = (b & 0x7F) | (buf[p + 1] << 7)
                offset_delta, p = (raw >> 1) ^ -(raw & 1), p + 2
            else:
                offset_delta, p = _varint(buf, p)
            tail = p
            b = buf[p]
            if b < 0x80:
                key_len, p = (b >> 1) ^ -(b & 1), p + 1
            elif buf[p + 1] < 0x80:
                raw = (b & 0x7F) | (buf[p + 1] << 7)
                key_len, p = (raw >> 1) ^ -(raw & 1), p + 2
            else:
                key_len, p = _varint(buf, p)
            if key_len > 0:
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
            append(RecordFields(pos, stop, attributes, ts_delta, offset_delta, tail, key_len, value_len))
            pos = stop
    except IndexError:
        raise CorruptRecordError("record runs past the end of its batch") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes after the last record of a batch")
    return out


def record_timestamp(header: BatchHeader, record: RecordFields) -> int:
    """A record's timestamp as Kafka's DefaultRecordBatch reads it: the batch's max timestamp in a
    LogAppendTime batch, else the base timestamp plus the record's delta."""
    if header.attributes & TIMESTAMP_TYPE_MASK:
        return header.max_timestamp
    return header.base_timestamp + record.timestamp_delta


def _put_varint(out: bytearray, value: int) -> None:
    """Zigzag varint (or varlong: the same bytes for a value in range)."""
    zz = (value << 1) ^ (value >> 63)
    while zz >= 0x80:
        out.append((zz & 0x7F) | 0x80)
        zz >>= 7
    out.append(zz)


def convert_batch(
    batch: bytes | bytearray | memoryview,
    header: BatchHeader,
    records: bytes,
    fields: list[RecordFields],
    *,
    codec: int,
    level: int | None,
    log_append_time_ms: int | None,
) -> bytearray:
    """The batch rebuilt with ``codec``: Kafka's ``LogValidator.buildRecordsAndAssignOffsets``.

    ``records`` is the batch's decompressed blob and ``fields`` its records (``scan_records``).
    As Kafka's MemoryRecordsBuilder writes it: offset deltas 0, 1, ... in record order; the base
    timestamp is the first record's timestamp and each record keeps its timestamp as a delta from
    it; the max timestamp is the largest record timestamp, or ``log_append_time_ms`` with the
    LogAppendTime bit when that is given; producer id, epoch, base sequence and the transactional
    bit are the producer's. Base offset and leader epoch are copied and assigned later, as for any
    batch. Key, value and headers are copied byte for byte.
    """
    if header.attributes & TIMESTAMP_TYPE_MASK:
        times = [header.max_timestamp] * len(fields)
    else:
        base = header.base_timestamp
        times = [base + f.timestamp_delta for f in fields]
    base_ts = times[0] if times else -1
    if (not header.attributes & TIMESTAMP_TYPE_MASK and fields and fields[0].timestamp_delta == 0
            and all(f.offset_delta == i and f.attributes == 0 for i, f in enumerate(fields))):
        body = records  # already what the builder writes: same deltas, same base timestamp
    else:
        rebuilt = bytearray()
        one = bytearray()
        for i, f in enumerate(fields):
            one.clear()
            one.append(0)
            _put_varint(one, times[i] - base_ts)
            _put_varint(one, i)
            one += records[f.tail : f.end]
            _put_varint(rebuilt, len(one))
            rebuilt += one
        body = bytes(rebuilt)
    payload = compress(codec, body, level) if codec != NO_COMPRESSION else body
    attributes = codec | (header.attributes & TRANSACTIONAL_MASK)
    if log_append_time_ms is not None:
        attributes |= TIMESTAMP_TYPE_MASK
        max_ts = log_append_time_ms
    else:
        max_ts = max([-1, *times])
    out = bytearray(_BATCH_HEADER.pack(
        header.base_offset, HEADER_SIZE - LOG_OVERHEAD + len(payload), header.partition_leader_epoch,
        header.magic, 0, attributes, len(fields) - 1, base_ts, max_ts, header.producer_id, header.producer_epoch,
        header.base_sequence, len(fields),
    ))
    out += payload
    _UINT32.pack_into(out, CRC_POS, crc32c.crc32c(memoryview(out)[ATTRIBUTES_POS:]))
    return out


# ---- control records: transaction markers ---------------------------------------------------------

CONTROL_ABORT = 0
CONTROL_COMMIT = 1
_CONTROL_KEY = struct.Struct(">hh")  # version, type (Kafka's ControlRecordType key, version 0)
_END_TXN_VALUE = struct.Struct(">hi")  # version, coordinator epoch (EndTransactionMarker, version 0)
_NO_SEQUENCE = -1
_NO_PARTITION_LEADER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class ControlRecord:
    """The first record of a control batch: its type and, for a transaction marker (ABORT, COMMIT),
    the coordinator epoch its value carries (-1 for other types)."""

    type: int
    coordinator_epoch: int

    @property
    def is_txn_marker(self) -> bool:
        return self.type in (CONTROL_ABORT, CONTROL_COMMIT)

    @property
    def commit(self) -> bool:
        return self.type == CONTROL_COMMIT


def build_marker_batch(
    producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, timestamp_ms: int
) -> bytearray:
    """An end-transaction marker batch, as Kafka's ``MemoryRecords.withEndTransactionMarker`` writes it:
    transactional and control bits, no sequence, one uncompressed record whose key is the control
    type and whose value is the coordinator epoch. Offsets and leader epoch are assigned by the log."""
    record = bytearray(b"\x00")  # record attributes
    _put_varint(record, 0)  # timestamp delta
    _put_varint(record, 0)  # offset delta
    _put_varint(record, _CONTROL_KEY.size)
    record += _CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    _put_varint(record, _END_TXN_VALUE.size)
    record += _END_TXN_VALUE.pack(0, coordinator_epoch)
    _put_varint(record, 0)  # no headers
    body = bytearray()
    _put_varint(body, len(record))
    body += record
    out = bytearray(_BATCH_HEADER.pack(
        0, HEADER_SIZE - LOG_OVERHEAD + len(body), _NO_PARTITION_LEADER_EPOCH, 2, 0,
        TRANSACTIONAL_MASK | CONTROL_MASK, 0, timestamp_ms, timestamp_ms, producer_id, producer_epoch,
        _NO_SEQUENCE, 1,
    ))
    out += body
    _UINT32.pack_into(out, CRC_POS, crc32c.crc32c(memoryview(out)[ATTRIBUTES_POS:]))
    return out


def read_control_record(batch: bytes | bytearray | memoryview, header: BatchHeader) -> ControlRecord | None:
    """The first record of the control batch ``batch`` (whole, starting at its base offset field);
    None when it holds no record (the cleaner emptied it). Raises CorruptRecordError when the key or
    value is too short for its type, as Kafka's ``ControlRecordType.parse`` and
    ``EndTransactionMarker.deserialize`` do."""
    if header.record_count == 0:
        return None
    blob = batch_records(memoryview(batch), header)
    first = scan_records(blob, header.record_count)[0]
    pos = first.tail
    key_length, pos = _varint(blob, pos)
    if key_length < _CONTROL_KEY.size:
        raise CorruptRecordError(f"control record key of {key_length} bytes at offset {header.base_offset}")
    version, kind = _CONTROL_KEY.unpack_from(blob, pos)
    if version < 0:
        raise CorruptRecordError(f"control record key version {version} at offset {header.base_offset}")
    pos += key_length
    if kind not in (CONTROL_ABORT, CONTROL_COMMIT):
        return ControlRecord(kind, -1)
    value_length, pos = _varint(blob, pos)
    if value_length < _END_TXN_VALUE.size:
        raise CorruptRecordError(f"transaction marker value of {value_length} bytes at offset {header.base_offset}")
    value_version, coordinator_epoch = _END_TXN_VALUE.unpack_from(blob, pos)
    if value_version < 0:
        raise CorruptRecordError(f"transaction marker version {value_version} at offset {header.base_offset}")
    return ControlRecord(kind, coordinator_epoch)
