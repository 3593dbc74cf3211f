"""Per-partition log settings, named after Kafka's topic-level configs."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from headwater.protocol.errors import ErrorCode, KafkaError

_WEEK_MS = 7 * 24 * 3600 * 1000
# Index entries hold positions as int32, so a segment file can never be larger than this.
MAX_SEGMENT_BYTES = (1 << 31) - 1
# The smallest segment Kafka accepts (one legacy v0 record); anything smaller can never hold a batch.
MIN_SEGMENT_BYTES = 14
LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1
CLEANUP_POLICIES = ("compact", "delete")  # also the order of the canonical spelling
# compression.type: the codec id each name stands for ("producer" keeps the batch's own codec).
COMPRESSION_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
PRODUCER_COMPRESSION = "producer"
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
# Kafka's index entries: 8 bytes in the offset index, 12 in the time index (segment.index.bytes / these).
OFFSET_INDEX_ENTRY_BYTES = 8
TIME_INDEX_ENTRY_BYTES = 12


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1 << 30  # segment.bytes
    segment_ms: int = _WEEK_MS  # segment.ms
    retention_ms: int = _WEEK_MS  # retention.ms (-1 = keep forever)
    retention_bytes: int = -1  # retention.bytes (-1 = no size limit)
    index_interval_bytes: int = 4096  # index.interval.bytes
    file_delete_delay_ms: int = 60000  # file.delete.delay.ms
    cleanup_policy: str = "delete"  # cleanup.policy: "delete", "compact" or "compact,delete"
    delete_retention_ms: int = 86_400_000  # delete.retention.ms: how long tombstones stay once clean
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms
    max_compaction_lag_ms: int = LONG_MAX  # max.compaction.lag.ms
    compression_type: str = PRODUCER_COMPRESSION  # compression.type: the codec the leader stores batches with
    compression_gzip_level: int = -1  # compression.gzip.level (KIP-390): -1 is zlib's default
    compression_lz4_level: int = 9  # compression.lz4.level
    compression_zstd_level: int = 3  # compression.zstd.level
    message_timestamp_type: str = CREATE_TIME  # message.timestamp.type: CreateTime or LogAppendTime
    message_timestamp_difference_max_ms: int = LONG_MAX  # message.timestamp.difference.max.ms (deprecated)
    message_timestamp_before_max_ms: int = LONG_MAX  # message.timestamp.before.max.ms (KIP-937)
    message_timestamp_after_max_ms: int = LONG_MAX  # message.timestamp.after.max.ms (KIP-937)
    flush_messages: int = LONG_MAX  # flush.messages: fsync once this many messages are unflushed
    flush_ms: int = LONG_MAX  # flush.ms: fsync when the last flush is this old
    segment_jitter_ms: int = 0  # segment.jitter.ms: up to this much is taken off each segment's roll time
    segment_index_bytes: int = 10 << 20  # segment.index.bytes: the offset and time index capacity
    preallocate: bool = False  # preallocate: accepted and kept, segment files are not preallocated

    def __post_init__(self) -> None:
        _check_range("segment.bytes", self.segment_bytes, MIN_SEGMENT_BYTES, MAX_SEGMENT_BYTES)
        _check_range("segment.ms", self.segment_ms, 1, None)
        _check_range("retention.ms", self.retention_ms, -1, None)
        _check_range("retention.bytes", self.retention_bytes, -1, None)
        _check_range("index.interval.bytes", self.index_interval_bytes, 0, None)
        _check_range("file.delete.delay.ms", self.file_delete_delay_ms, 0, None)
        _check_range("delete.retention.ms", self.delete_retention_ms, 0, None)
        _check_range("min.compaction.lag.ms", self.min_compaction_lag_ms, 0, None)
        _check_range("max.compaction.lag.ms", self.max_compaction_lag_ms, 1, None)
        _check_range("compression.lz4.level", self.compression_lz4_level, 1, 17)
        _check_range("compression.zstd.level", self.compression_zstd_level, -131072, 22)
        if self.compression_gzip_level != -1:  # Kafka's GzipCompression: -1 (default) or 1..9
            _check_range("compression.gzip.level", self.compression_gzip_level, 1, 9)
        _check_range("message.timestamp.difference.max.ms", self.message_timestamp_difference_max_ms, 0, None)
        _check_range("message.timestamp.before.max.ms", self.message_timestamp_before_max_ms, 0, None)
        _check_range("message.timestamp.after.max.ms", self.message_timestamp_after_max_ms, 0, None)
        _check_range("flush.messages", self.flush_messages, 1, None)
        _check_range("flush.ms", self.flush_ms, 0, None)
        _check_range("segment.jitter.ms", self.segment_jitter_ms, 0, None)
        _check_range("segment.index.bytes", self.segment_index_bytes, 4, INT_MAX)
        if self.compression_type != PRODUCER_COMPRESSION and self.compression_type not in COMPRESSION_CODECS:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"compression.type={self.compression_type!r}: must be one of "
                             f"{', '.join([*COMPRESSION_CODECS, PRODUCER_COMPRESSION])}")
        if self.message_timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"message.timestamp.type={self.message_timestamp_type!r}: "
                             f"must be {CREATE_TIME} or {LOG_APPEND_TIME}")
        if not isinstance(self.preallocate, bool):
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"preallocate must be a boolean, got {self.preallocate!r}")
        ratio = self.min_cleanable_dirty_ratio
        if not isinstance(ratio, float | int) or isinstance(ratio, bool) or not 0.0 <= ratio <= 1.0:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"min.cleanable.dirty.ratio={ratio!r} is out of range [0, 1]")
        parts = self.cleanup_policy.split(",") if self.cleanup_policy else []
        if not parts or any(p not in CLEANUP_POLICIES for p in parts):
            raise KafkaError(
                ErrorCode.INVALID_CONFIG,
                f"cleanup.policy={self.cleanup_policy!r}: must be a list of {', '.join(CLEANUP_POLICIES)}",
            )

    @property
    def max_segment_ms(self) -> int:
        """How old the active segment may get: a compacted log also rolls by max.compaction.lag.ms,
        so that its records can become cleanable in time (Kafka's LogConfig.maxSegmentMs)."""
        return min(self.segment_ms, self.max_compaction_lag_ms) if self.compact else self.segment_ms

    @property
    def log_append_time(self) -> bool:
        """message.timestamp.type=LogAppendTime: the leader stamps each batch with its append time."""
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def timestamp_before_max_ms(self) -> int:
        """How far in the past a CreateTime timestamp may be. Kafka 3.9's LogConfig
        (getMessageTimestampBeforeMaxMs): message.timestamp.before.max.ms when it is not its default
        (Long.MAX_VALUE), else the deprecated message.timestamp.difference.max.ms."""
        if self.message_timestamp_before_max_ms != LONG_MAX:
            return self.message_timestamp_before_max_ms
        return self.message_timestamp_difference_max_ms

    @property
    def timestamp_after_max_ms(self) -> int:
        """How far in the future a CreateTime timestamp may be; the same rule as ``timestamp_before_max_ms``."""
        if self.message_timestamp_after_max_ms != LONG_MAX:
            return self.message_timestamp_after_max_ms
        return self.message_timestamp_difference_max_ms

    def target_codec(self, source_codec: int) -> int:
        """The codec a batch of ``source_codec`` is stored with (Kafka's
        BrokerCompressionType.targetCompression): the topic's, unless it is ``producer``."""
        if self.compression_type == PRODUCER_COMPRESSION:
            return source_codec
        return COMPRESSION_CODECS[self.compression_type]

    def compression_level(self, codec: int) -> int | None:
        """The topic's level for ``codec`` (compression.<codec>.level); None for a codec without levels."""
        return {1: self.compression_gzip_level, 3: self.compression_lz4_level, 4: self.compression_zstd_level}.get(codec)

    @property
    def max_offset_index_entries(self) -> int:
        """Entries the offset index holds: segment.index.bytes rounded down to whole 8-byte entries
        (Kafka's AbstractIndex sizes its file so)."""
        return self.segment_index_bytes // OFFSET_INDEX_ENTRY_BYTES

    @property
    def max_time_index_entries(self) -> int:
        """Entries the time index holds: segment.index.bytes in whole 12-byte entries."""
        return self.segment_index_bytes // TIME_INDEX_ENTRY_BYTES

    def random_segment_jitter(self, draw: int) -> int:
        """A segment's roll jitter from a random non-negative int ``draw`` (< 2**31): Kafka's
        LogConfig.randomSegmentJitter, ``abs(nextInt()) % min(segment.jitter.ms, segment.ms)``."""
        if self.segment_jitter_ms == 0:
            return 0
        return draw % min(self.segment_jitter_ms, self.segment_ms)

    @property
    def compact(self) -> bool:
        """The cleaner keeps the latest record per key (``compact`` is in cleanup.policy)."""
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        """Time and size retention delete old segments (``delete`` is in cleanup.policy)."""
        return "delete" in self.cleanup_policy.split(",")

    @classmethod
    def from_properties(cls, props: Mapping[str, str], defaults: LogConfig | None = None) -> LogConfig:
        """Build from topic-level config names; unknown keys are ignored (other layers own them)."""
        base = defaults if defaults is not None else cls()
        changes: dict[str, Any] = {}  # field name -> value; __post_init__ checks each
        if "cleanup.policy" in props:
            # Kafka accepts the list in any order and with spaces; store one canonical spelling.
            parts = {p.strip() for p in str(props["cleanup.policy"]).split(",") if p.strip()}
            changes["cleanup_policy"] = ",".join(p for p in CLEANUP_POLICIES if p in parts)
            parts.difference_update(CLEANUP_POLICIES)
            if parts:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"cleanup.policy={props['cleanup.policy']!r} is not a list of delete, compact")
        if "min.cleanable.dirty.ratio" in props:
            raw = props["min.cleanable.dirty.ratio"]
            try:
                changes["min_cleanable_dirty_ratio"] = float(str(raw).strip())
            except ValueError:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"min.cleanable.dirty.ratio={raw!r} is not a number") from None
        for name, field in _PROPERTY_FIELDS.items():
            if name in props:
                raw = props[name]
                try:
                    changes[field] = int(str(raw).strip())
                except ValueError:
                    raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name}={raw!r} is not an integer") from None
        for name, field in _STRING_FIELDS.items():
            if name in props:
                changes[field] = str(props[name]).strip()
        if "preallocate" in props:
            # Kafka's ConfigDef BOOLEAN: "true" or "false", in any case. Accepted and kept (DescribeConfigs
            # shows it); segments are not preallocated, see PartitionLog.
            raw = str(props["preallocate"]).strip().lower()
            if raw not in ("true", "false"):
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"preallocate={props['preallocate']!r} is not a boolean")
            changes["preallocate"] = raw == "true"
        return dataclasses.replace(base, **changes) if changes else base

    def to_properties(self) -> dict[str, str]:
        out = {name: str(getattr(self, field)) for name, field in _PROPERTY_FIELDS.items()}
        out.update({name: str(getattr(self, field)) for name, field in _STRING_FIELDS.items()})
        out["cleanup.policy"] = self.cleanup_policy
        out["min.cleanable.dirty.ratio"] = repr(self.min_cleanable_dirty_ratio)
        out["preallocate"] = "true" if self.preallocate else "false"
        return out


_PROPERTY_FIELDS = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "delete.retention.ms": "delete_retention_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "compression.gzip.level": "compression_gzip_level",
    "compression.lz4.level": "compression_lz4_level",
    "compression.zstd.level": "compression_zstd_level",
    "message.timestamp.difference.max.ms": "message_timestamp_difference_max_ms",
    "message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
    "message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "segment.jitter.ms": "segment_jitter_ms",
    "segment.index.bytes": "segment_index_bytes",
}
_STRING_FIELDS = {
    "compression.type": "compression_type",
    "message.timestamp.type": "message_timestamp_type",
}


def _check_range(name: str, value: int, low: int, high: int | None) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name}={value} is out of range {bound}")
