"""Per-partition log settings, named after Kafka's topic-level configs."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from headwater.protocol.errors import ErrorCode, KafkaError

_WEEK_MS = 7 * 24 * 3600 * 1000
# Index entries hold positions as int32, so a segment file can never be larger than this.
MAX_SEGMENT_BYTES = (1 << 31) - 1
# The smallest segment Kafka accepts (one legacy v0 record); anything smaller can never hold a batch.
MIN_SEGMENT_BYTES = 14


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1 << 30  # segment.bytes
    segment_ms: int = _WEEK_MS  # segment.ms
    retention_ms: int = _WEEK_MS  # retention.ms (-1 = keep forever)
    retention_bytes: int = -1  # retention.bytes (-1 = no size limit)
    index_interval_bytes: int = 4096  # index.interval.bytes
    file_delete_delay_ms: int = 60000  # file.delete.delay.ms

    def __post_init__(self) -> None:
        _check_range("segment.bytes", self.segment_bytes, MIN_SEGMENT_BYTES, MAX_SEGMENT_BYTES)
        _check_range("segment.ms", self.segment_ms, 1, None)
        _check_range("retention.ms", self.retention_ms, -1, None)
        _check_range("retention.bytes", self.retention_bytes, -1, None)
        _check_range("index.interval.bytes", self.index_interval_bytes, 0, None)
        _check_range("file.delete.delay.ms", self.file_delete_delay_ms, 0, None)

    @classmethod
    def from_properties(cls, props: Mapping[str, str], defaults: LogConfig | None = None) -> LogConfig:
        """Build from topic-level config names; unknown keys are ignored (other layers own them)."""
        base = defaults if defaults is not None else cls()
        changes: dict[str, int] = {}
        for name, field in _PROPERTY_FIELDS.items():
            if name in props:
                raw = props[name]
                try:
                    changes[field] = int(str(raw).strip())
                except ValueError:
                    raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name}={raw!r} is not an integer") from None
        return dataclasses.replace(base, **changes) if changes else base

    def to_properties(self) -> dict[str, str]:
        return {name: str(getattr(self, field)) for name, field in _PROPERTY_FIELDS.items()}


_PROPERTY_FIELDS = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "file.delete.delay.ms": "file_delete_delay_ms",
}


def _check_range(name: str, value: int, low: int, high: int | None) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name}={value} is out of range {bound}")
