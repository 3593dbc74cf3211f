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
CLEANUP_POLICIES = ("compact", "delete")  # also the order of the canonical spelling


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
        return dataclasses.replace(base, **changes) if changes else base

    def to_properties(self) -> dict[str, str]:
        out = {name: str(getattr(self, field)) for name, field in _PROPERTY_FIELDS.items()}
        out["cleanup.policy"] = self.cleanup_policy
        out["min.cleanable.dirty.ratio"] = repr(self.min_cleanable_dirty_ratio)
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
}


def _check_range(name: str, value: int, low: int, high: int | None) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name}={value} is out of range {bound}")
