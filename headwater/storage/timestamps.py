"""Timestamp lookups over a partition log's segments: ListOffsets by timestamp (v1+), the largest
timestamp (-3, KIP-734), and v0's segment-granular answer.

Plain functions over the segment list; ``PartitionLog`` calls them under its I/O error handling
(an ``OSError`` takes the log directory offline and answers KAFKA_STORAGE_ERROR).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from kafka.record.default_records import DefaultRecordBatch

from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.storage.segment import LogSegment


def first_record(
    seg: LogSegment, position: int, size: int, match: Callable[[int, int], bool]
) -> tuple[int, int] | None:
    """The (offset, timestamp) of the first record ``match`` accepts in the batch at ``position``."""
    try:
        batch = DefaultRecordBatch(seg.read_batch(position, size))
        for record in batch:
            if match(record.offset, record.timestamp):
                return int(record.offset), int(record.timestamp)
    except Exception as exc:  # the codecs raise their own types
        raise KafkaError(
            ErrorCode.CORRUPT_MESSAGE, f"cannot decode batch at {position} in {seg.log_path}: {exc}"
        ) from exc
    return None


def offset_for_timestamp(
    segments: list[LogSegment], log_start_offset: int, timestamp_ms: int
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record at or after ``timestamp_ms``, or None."""
    lso = log_start_offset
    for seg in segments:
        if seg.max_timestamp_ms < timestamp_ms or seg.next_offset <= lso:
            continue
        below = seg.time_index.lookup_below(timestamp_ms)
        found = seg.locate(max(below if below is not None else seg.base_offset, lso))
        if found is None:
            continue
        for pos, header in seg.iter_headers(found[0]):
            if header.max_timestamp >= timestamp_ms:
                hit = first_record(seg, pos, header.size, lambda o, t: o >= lso and t >= timestamp_ms)
                if hit is not None:
                    return hit
    return None


def legacy_offsets_before(
    segments: list[LogSegment], log_start_offset: int, timestamp_ms: int, max_num_offsets: int, now_ms: int
) -> list[int]:
    """ListOffsets v0's answer: segment start offsets whose file was last modified at or
    before ``timestamp_ms`` (-1 latest, -2 earliest), newest first, at most ``max_num_offsets``.

    The granularity is the segment and the clock is the file's mtime, as in Kafka's
    ``UnifiedLog.legacyFetchOffsetsBefore``; a non-empty active segment adds the log end
    offset stamped ``now_ms``."""
    points = [(max(s.base_offset, log_start_offset), int(os.stat(s.log_path).st_mtime * 1000)) for s in segments]
    if segments[-1].size_bytes > 0:
        points.append((segments[-1].next_offset, now_ms))
    if timestamp_ms == -1:
        start = len(points) - 1
    elif timestamp_ms == -2:
        start = 0
    else:
        start = len(points) - 1
        while start >= 0 and points[start][1] > timestamp_ms:
            start -= 1
    picked = [points[i][0] for i in range(start, max(start - max(max_num_offsets, 0), -1), -1)]
    return sorted(picked, reverse=True)


def max_timestamp_offset(segments: list[LogSegment]) -> tuple[int, int]:
    """(offset, timestamp) of the first record with the largest timestamp; (-1, -1) if none."""
    best: LogSegment | None = None
    for seg in segments:
        if seg.max_timestamp_ms >= 0 and (best is None or seg.max_timestamp_ms > best.max_timestamp_ms):
            best = seg
    if best is None:
        return -1, -1
    max_ts = best.max_timestamp_ms
    found = best.locate(best.max_timestamp_offset)
    if found is None:
        return best.max_timestamp_offset, max_ts
    for pos, header in best.iter_headers(found[0]):
        if header.max_timestamp == max_ts:
            hit = first_record(best, pos, header.size, lambda o, t: t == max_ts)
            return hit if hit is not None else (header.base_offset, max_ts)
    return best.max_timestamp_offset, max_ts
