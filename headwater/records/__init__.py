"""RecordBatch v2 view: header fields, CRC32C check, base-offset rewrite. Bytes in, bytes out."""

from headwater.records.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    UnsupportedMagicError,
    assign_offsets,
    crc_ok,
    iter_batches,
    parse_header,
    scan_valid_prefix,
)

__all__ = [
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "BatchHeader",
    "CorruptRecordError",
    "UnsupportedMagicError",
    "assign_offsets",
    "crc_ok",
    "iter_batches",
    "parse_header",
    "scan_valid_prefix",
]
