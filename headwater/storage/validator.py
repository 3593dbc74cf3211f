"""What the leader checks and changes in a produced batch before it is written: Kafka 3.9's
``LogValidator`` for RecordBatch v2, driven by the topic's configs.

- A compacted topic refuses records without a key (INVALID_RECORD).
- A CreateTime topic refuses records whose timestamp lies outside
  ``[now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms]``
  (INVALID_TIMESTAMP; the deprecated message.timestamp.difference.max.ms stands in for a side left at
  its default, see ``LogConfig.timestamp_before_max_ms``). A record without a timestamp (-1) passes.
- A batch that says LogAppendTime is refused by a LogAppendTime topic ("Producer should not set
  timestamp type to LogAppendTime"); a CreateTime topic reads every record's timestamp as the
  batch's max timestamp, checks that, and stores the batch as CreateTime.
- Errors are collected per batch, one per record at most (the key check first), with the record's
  index in its batch; the first batch with any error fails the whole append, as Kafka's
  ``processRecordErrors`` does.
- compression.type other than ``producer``, when it differs from the batch's codec, rebuilds the
  batch with the topic's codec and level (``records.convert_batch``, Kafka's
  ``buildRecordsAndAssignOffsets``); a batch already in that codec is kept as it is, whatever level
  it was compressed at, as in Kafka.
- LogAppendTime: a batch that is not rebuilt gets its max timestamp set to the append time and the
  timestamp-type bit (``set_max_timestamp``, which recomputes the CRC); the records' deltas stay.

Records are decoded only when something needs them: a compacted topic, a finite timestamp window,
a rebuild, or a batch that says LogAppendTime. With the defaults a batch is looked at by its header
only, and a LogAppendTime topic changes 20 bytes of it.

Where Kafka reads records anyway (it always does), it also recomputes a CreateTime batch's max
timestamp from them; so does this module whenever it has decoded them. Otherwise the producer's
header is trusted, as the storage layer always has.
"""

from __future__ import annotations

from dataclasses import dataclass

from headwater.protocol.errors import ErrorCode, KafkaError, RecordValidationError
from headwater.records.batch import BatchHeader, CorruptRecordError, parse_header, set_max_timestamp
from headwater.records.records import (
    NO_COMPRESSION,
    RecordFields,
    batch_records,
    convert_batch,
    iter_records,
    record_timestamp,
    scan_records,
)
from headwater.storage.config import PRODUCER_COMPRESSION, LogConfig

NO_TIMESTAMP = -1
_LONG_MAX = (1 << 63) - 1
_INVALID_TIMESTAMP_MESSAGE = "One or more records have been rejected due to invalid timestamp"


@dataclass(frozen=True, slots=True)
class Validated:
    records: bytearray | memoryview  # the batches to write: the same buffer, changed in place, or a rebuilt one
    batches: list[tuple[int, BatchHeader]]  # their positions and (current) headers
    rebuilt: bool  # some batch was rebuilt: sizes may have changed (max.message.bytes is checked again)
    log_append_time_ms: int  # the time stamped on the batches with LogAppendTime, else -1


def _long(value: int) -> int:
    """``value`` as a Java long (two's complement wrap), for arithmetic Kafka does in longs."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def _record_string(header: BatchHeader, record: RecordFields) -> str:
    """Kafka's ``DefaultRecord.toString``."""
    return (f"DefaultRecord(offset={header.base_offset + record.offset_delta}, "
            f"timestamp={record_timestamp(header, record)}, key={max(record.key_length, 0)} bytes, "
            f"value={max(record.value_length, 0)} bytes)")


def _raise(errors: list[tuple[int, str]], timestamp_error: bool) -> None:
    """Kafka's ``LogValidator.processRecordErrors``."""
    if timestamp_error:
        raise RecordValidationError(ErrorCode.INVALID_TIMESTAMP, _INVALID_TIMESTAMP_MESSAGE, errors)
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    raise RecordValidationError(
        ErrorCode.INVALID_RECORD,
        f"One or more records have been rejected due to {len(errors)} record errors in total, and only "
        f"showing the first three errors at most: [{shown}]",
        errors,
    )


def validate_and_convert(
    records: bytearray | memoryview, batches: list[tuple[int, BatchHeader]], config: LogConfig, now_ms: int, partition_name: str,
) -> Validated:
    """Check ``batches`` (CRC and header counts already checked) against ``config`` at ``now_ms`` and
    convert them as the topic asks; raise RecordValidationError (INVALID_RECORD, INVALID_TIMESTAMP)
    or KafkaError (CORRUPT_MESSAGE for records that do not parse). See the module rules."""
    lat = config.log_append_time
    before, after = config.timestamp_before_max_ms, config.timestamp_after_max_ms
    window = not lat and (before != _LONG_MAX or after != _LONG_MAX)
    compact = config.compact
    plain_topic = not lat and not window and not compact and config.compression_type == PRODUCER_COMPRESSION
    if plain_topic and not any(h.is_log_append_time for _, h in batches):
        return Validated(records, batches, False, NO_TIMESTAMP)  # the hot path: nothing to look at
    out = records
    # Once a batch is rebuilt, the batches to write are collected here (views of the others).
    rebuilt_parts: list[bytes | bytearray | memoryview] | None = None
    for n, (pos, header) in enumerate(batches):
        target = config.target_codec(header.compression)
        # Kafka leaves an uncompressed control batch uncompressed (clients cannot write them anyway).
        rebuild = target != header.compression and not (header.compression == NO_COMPRESSION and header.is_control)
        batch = memoryview(records)[pos : pos + header.size]
        fields: list[RecordFields] | None = None
        blob = b""
        if rebuild or window or header.is_log_append_time:
            try:
                blob = batch_records(batch, header)
                fields = scan_records(blob, header.record_count)
            except CorruptRecordError as exc:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
            if window or compact or header.is_log_append_time:
                _check_records(header, fields, config, now_ms, partition_name, window)
        elif compact:
            _check_keys(batch, header, partition_name)
        new_batch: bytes | bytearray | memoryview = batch
        if rebuild:
            assert fields is not None
            new_batch = convert_batch(batch, header, blob, fields, codec=target,
                                      level=config.compression_level(target),
                                      log_append_time_ms=now_ms if lat else None)
            if rebuilt_parts is None:
                rebuilt_parts = [memoryview(records)[b_pos : b_pos + h.size] for b_pos, h in batches[:n]]
        elif lat:
            set_max_timestamp(records, pos, header, True, now_ms)
        elif fields is not None:
            # Kafka's in-place path: the max of the records' timestamps, stored as CreateTime.
            max_ts = max([NO_TIMESTAMP, *(record_timestamp(header, f) for f in fields)])
            set_max_timestamp(records, pos, header, False, max_ts)
        if rebuilt_parts is not None:
            rebuilt_parts.append(new_batch)
    if rebuilt_parts is not None:
        only = rebuilt_parts[0] if len(rebuilt_parts) == 1 else None
        out = only if isinstance(only, bytearray) else bytearray().join(rebuilt_parts)
    new_batches: list[tuple[int, BatchHeader]] = []
    pos = 0
    for _old_pos, _old in batches:
        header = parse_header(out, pos)
        new_batches.append((pos, header))
        pos += header.size
    return Validated(out, new_batches, rebuilt_parts is not None, now_ms if lat else NO_TIMESTAMP)


def _check_keys(batch: memoryview, header: BatchHeader, partition_name: str) -> None:
    """The compacted topic's key check alone, on the fast record walk."""
    try:
        blob = batch_records(batch, header)
        missing = [i for i, rec in enumerate(iter_records(blob, header.record_count)) if rec.key is None]
    except CorruptRecordError as exc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
    if missing:
        why = f"Compacted topic cannot accept message without key in topic partition {partition_name}"
        _raise([(i, why) for i in missing], False)


def _check_records(header: BatchHeader, fields: list[RecordFields], config: LogConfig, now_ms: int,
                   partition_name: str, window: bool) -> None:
    """Kafka's ``validateRecord`` for each record: the key, then the timestamp."""
    errors: list[tuple[int, str]] = []
    timestamp_error = False
    compact, lat = config.compact, config.log_append_time
    before, after = config.timestamp_before_max_ms, config.timestamp_after_max_ms
    batch_lat = header.is_log_append_time
    for i, f in enumerate(fields):
        if compact and f.key_length < 0:
            errors.append((i, f"Compacted topic cannot accept message without key in topic partition {partition_name}"))
            continue
        ts = record_timestamp(header, f)
        if not lat and ts != NO_TIMESTAMP:
            if window:
                diff = _long(now_ms - ts)
                if diff > before or _long(-diff) > after:
                    errors.append((i, f"Timestamp {ts} of message with offset {header.base_offset + f.offset_delta} "
                                      f"is out of range. The timestamp should be within "
                                      f"[{_long(now_ms - before)}, {_long(now_ms + after)}]"))
                    timestamp_error = True
        elif batch_lat:
            errors.append((i, f"Invalid timestamp type in message {_record_string(header, f)}. Producer should not "
                              "set timestamp type to LogAppendTime."))
            timestamp_error = True
    if errors:
        _raise(errors, timestamp_error)

