"""RecordBatch v2 (magic 2) as a view over bytes.

The broker never decodes individual records on the hot path: it reads the 61-byte batch header,
checks the CRC, and rewrites the base offset and the partition leader epoch in place. Neither of
those two fields is covered by the CRC (it starts at ``attributes``), so assigning offsets does not
require re-encoding or re-checksumming, and compressed batches are stored exactly as sent, unless
the topic asks otherwise: a LogAppendTime topic stamps the max timestamp (``set_max_timestamp``,
which recomputes the CRC) and a topic with its own compression.type rebuilds the batch
(``records.convert_batch``).

Layout (big-endian), offsets in bytes from the start of the batch::

    0  base_offset            int64
    8  batch_length           int32   bytes after this field
    12 partition_leader_epoch int32
    16 magic                  int8    must be 2
    17 crc                    uint32  CRC32C of bytes [21, end)
    21 attributes             int16
    23 last_offset_delta      int32
    27 base_timestamp         int64
    35 max_timestamp          int64
    43 producer_id            int64
    51 producer_epoch         int16
    53 base_sequence          int32
    57 record_count           int32
    61 records...
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import crc32c

from headwater.values import value

BASE_OFFSET_POS = 0
LENGTH_POS = 8
LEADER_EPOCH_POS = 12
MAGIC_POS = 16
CRC_POS = 17
ATTRIBUTES_POS = 21
LAST_OFFSET_DELTA_POS = 23
BASE_TIMESTAMP_POS = 27
MAX_TIMESTAMP_POS = 35
PRODUCER_ID_POS = 43
RECORD_COUNT_POS = 57

LOG_OVERHEAD = 12  # base_offset + batch_length: the part not counted in batch_length
HEADER_SIZE = 61
MAGIC_V2 = 2

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40  # the base timestamp is the delete horizon (KIP-534)

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_UINT32 = struct.Struct(">I")


class CorruptRecordError(ValueError):
    """A batch that cannot be trusted: bad magic, bad length, CRC mismatch."""


class UnsupportedMagicError(CorruptRecordError):
    """A batch of an older message format (magic 0 or 1)."""


@value
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, including the 12-byte log overhead."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_log_append_time(self) -> bool:
        """The timestamp type bit: every record's timestamp is ``max_timestamp`` (LogAppendTime)."""
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        # Sequences wrap at 2**31 exactly as Kafka's DefaultRecordBatch does.
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Read the header of the batch starting at ``pos``. Raises on anything that is not magic 2."""
    if len(buf) - pos < HEADER_SIZE:
        # A v0/v1 message set entry can be shorter than a v2 header; check magic when we can.
        if len(buf) - pos > MAGIC_POS and buf[pos + MAGIC_POS] != MAGIC_V2:
            raise UnsupportedMagicError(f"message format magic {buf[pos + MAGIC_POS]} is not supported")
        raise CorruptRecordError("truncated record batch header")
    fields = _HEADER.unpack_from(buf, pos)
    header = BatchHeader(*fields)
    if header.magic != MAGIC_V2:
        raise UnsupportedMagicError(f"message format magic {header.magic} is not supported")
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"record batch length {header.batch_length} is smaller than its header")
    if header.last_offset_delta < 0 or header.record_count < 0:
        raise CorruptRecordError("negative record count or offset delta")
    return header


def create_time_ms(buf: bytes | bytearray | memoryview) -> int | None:
    """The base timestamp of the first batch in ``buf`` when it is a v2 batch stamped by its producer
    (CreateTime): when its first record was made. None otherwise (too short, another magic, LogAppendTime)."""
    if len(buf) < HEADER_SIZE or buf[MAGIC_POS] != MAGIC_V2 or buf[ATTRIBUTES_POS + 1] & TIMESTAMP_TYPE_MASK:
        return None
    return int(_INT64.unpack_from(buf, BASE_TIMESTAMP_POS)[0])


def crc_ok(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    """Check the batch's CRC32C over attributes..end."""
    view = memoryview(buf)[pos + ATTRIBUTES_POS : pos + header.size]
    return crc32c.crc32c(view) == header.crc


def iter_batches(buf: bytes | bytearray | memoryview, *, verify_crc: bool = True) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) of each batch in ``buf``; raise CorruptRecordError on any flaw.

    For a produce request the whole buffer must be whole batches: a partial trailing batch is an error.
    """
    pos = 0
    end = len(buf)
    while pos < end:
        header = parse_header(buf, pos)
        if pos + header.size > end:
            raise CorruptRecordError("record batch extends past the end of the records")
        if verify_crc and not crc_ok(buf, pos, header):
            raise CorruptRecordError(f"record batch CRC mismatch at byte {pos}")
        yield pos, header
        pos += header.size


def scan_valid_prefix(buf: bytes | bytearray | memoryview, *, verify_crc: bool = True) -> tuple[list[tuple[int, BatchHeader]], int]:
    """Return the whole, valid batches at the start of ``buf`` and the byte length they cover.

    Used by log recovery: everything after the first flaw (a torn tail after a crash) is cut.
    """
    batches: list[tuple[int, BatchHeader]] = []
    pos = 0
    end = len(buf)
    while pos < end:
        try:
            header = parse_header(buf, pos)
        except CorruptRecordError:
            break
        if pos + header.size > end:
            break
        if verify_crc and not crc_ok(buf, pos, header):
            break
        batches.append((pos, header))
        pos += header.size
    return batches, pos


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    _INT64.pack_into(buf, pos + BASE_OFFSET_POS, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    _INT32.pack_into(buf, pos + LEADER_EPOCH_POS, epoch)


def set_max_timestamp(buf: bytearray | memoryview, pos: int, header: BatchHeader, log_append_time: bool,
                      max_timestamp: int) -> bool:
    """Kafka's ``DefaultRecordBatch.setMaxTimestamp``: write the timestamp type bit and the max
    timestamp in place and recompute the CRC (both are covered by it); the records and their
    timestamp deltas stay as they are. Like Kafka, the attributes are rewritten from the batch's
    codec, transactional and control bits (and the delete-horizon bit), nothing else.

    Returns False (nothing written) when the batch already says exactly that."""
    if header.max_timestamp == max_timestamp and bool(header.attributes & TIMESTAMP_TYPE_MASK) == log_append_time:
        return False
    attributes = header.attributes & (COMPRESSION_MASK | TRANSACTIONAL_MASK | CONTROL_MASK | DELETE_HORIZON_MASK)
    if log_append_time:
        attributes |= TIMESTAMP_TYPE_MASK
    _INT16.pack_into(buf, pos + ATTRIBUTES_POS, attributes)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_POS, max_timestamp)
    view = memoryview(buf)[pos + ATTRIBUTES_POS : pos + header.size]
    _UINT32.pack_into(buf, pos + CRC_POS, crc32c.crc32c(view))
    return True


def assign_offsets(
    buf: bytearray | memoryview, batches: list[tuple[int, BatchHeader]], next_offset: int, leader_epoch: int
) -> int:
    """Rewrite each batch's base offset (and leader epoch) in place; return the next offset after them."""
    for pos, header in batches:
        set_base_offset(buf, pos, next_offset)
        set_partition_leader_epoch(buf, pos, leader_epoch)
        next_offset += header.last_offset_delta + 1
    return next_offset
