"""Options of the ``headwater`` format, parsed once on the driver into frozen values.

The names and meanings follow Spark's built-in Kafka source, so a job ports by changing the
format name. Spark hands a data source its options lower-cased, so every lookup here is by the
lower-case name. Anything wrong with the options is a ``TopicSourceError`` raised before a single
task starts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from headwater.spark.errors import TopicSourceError

# Sentinels of Spark's offsets JSON: {"topic": {"0": -2}} means earliest, -1 latest.
EARLIEST = -2
LATEST = -1

_CLIENT_PREFIX = "kafka."

# Client settings the source decides itself; letting a user change them would break the
# exactly-these-offsets guarantee (reads) or the idempotent acks=all guarantee (writes).
_READ_OWNED = frozenset(
    {
        "group.id",
        "auto.offset.reset",
        "enable.auto.commit",
        "enable.auto.offset.store",
        "enable.partition.eof",
        "key.deserializer",
        "value.deserializer",
    }
)
_WRITE_OWNED = frozenset(
    {"enable.idempotence", "acks", "transactional.id", "key.serializer", "value.serializer"}
)

# transactionalIdPrefix and jobId become parts of transactional ids and group ids: the characters
# of a topic name, so they need no quoting in ACLs, tools or logs.
_ID_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,200}")

# Java client settings with no librdkafka equivalent. Spark jobs often carry them; passing them
# on would make librdkafka refuse to start, so they are dropped (documented in docs/spark.md).
_JAVA_ONLY = frozenset(
    {
        "default.api.timeout.ms",
        "max.poll.records",
        "max.poll.interval.ms",
        "key.serializer",
        "value.serializer",
        "key.deserializer",
        "value.deserializer",
    }
)


class TopicPartition(NamedTuple):
    """A partition of a topic. A plain tuple so it pickles small and sorts naturally."""

    topic: str
    partition: int


@dataclass(frozen=True)
class Subscription:
    """Which topics a read covers: exactly one of the three Spark options."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartition, ...] = ()

    def describe(self) -> str:
        if self.pattern is not None:
            return f"subscribePattern={self.pattern!r}"
        if self.assigned:
            return "assign=" + ",".join(f"{tp.topic}-{tp.partition}" for tp in self.assigned)
        return "subscribe=" + ",".join(self.topics)


@dataclass(frozen=True)
class OffsetBound:
    """One end of a read: a default for every partition, refined per partition.

    ``default`` is EARLIEST or LATEST. ``offsets`` holds the partitions named in an offsets JSON
    (values >= 0, or the EARLIEST / LATEST sentinels). ``timestamp_ms`` (one time for every
    partition) or ``timestamps_ms`` (per partition) select the first offset whose record
    timestamp is at or after the time. ``strict`` is set when the user gave per-partition JSON:
    then every partition read must be named in it, as in Spark.
    """

    default: int
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp_ms: int | None = None
    timestamps_ms: Mapping[TopicPartition, int] = field(default_factory=dict)
    strict: bool = False

    def describe(self) -> str:
        if self.timestamp_ms is not None:
            return f"timestamp {self.timestamp_ms}"
        if self.timestamps_ms:
            return "timestamps per partition"
        if self.offsets:
            return "offsets per partition"
        return "earliest" if self.default == EARLIEST else "latest"


@dataclass(frozen=True)
class ReadOptions:
    """Everything a read needs, parsed and checked on the driver."""

    client_config: Mapping[str, str]
    subscription: Subscription
    starting: OffsetBound
    ending: OffsetBound
    timestamp_strategy_latest: bool
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int
    metadata_timeout_ms: int
    metadata_retries: int
    retry_interval_ms: int
    rows_per_batch: int


@dataclass(frozen=True)
class ExactlyOnce:
    """``exactlyOnce=true``: each task writes in one transaction named after ``prefix``.

    ``job_id`` is the batch write's ``jobId`` option; None means a new id for every write (streams
    always use Spark's query id and micro-batch id instead).
    """

    prefix: str
    job_id: str | None = None
    # kafka.transaction.timeout.ms, librdkafka's default unless set: a task's transaction must
    # end within it, or the transaction coordinator aborts it.
    transaction_timeout_ms: int = 60_000


@dataclass(frozen=True)
class WriteOptions:
    """Everything a write needs, parsed and checked on the driver."""

    client_config: Mapping[str, str]
    topic: str | None
    flush_timeout_ms: int
    metadata_timeout_ms: int
    exactly_once: ExactlyOnce | None = None


def _get(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name.lower())
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _int(options: Mapping[str, str], name: str, default: int | None, minimum: int) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise TopicSourceError(f"option {name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise TopicSourceError(f"option {name} must be at least {minimum}, got {value}")
    return value


def _required_int(options: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    value = _int(options, name, default, minimum)
    assert value is not None  # a default was given
    return value


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    lowered = raw.lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise TopicSourceError(f"option {name} must be true or false, got {raw!r}")


def client_config(options: Mapping[str, str], owned: frozenset[str]) -> dict[str, str]:
    """The ``kafka.``-prefixed options with the prefix removed, for the client library."""
    config: dict[str, str] = {}
    for key, value in options.items():
        lowered = key.lower()
        if not lowered.startswith(_CLIENT_PREFIX):
            continue
        name = lowered[len(_CLIENT_PREFIX) :]
        if name in owned:
            raise TopicSourceError(
                f"option kafka.{name} is not supported: the headwater source sets it itself "
                "to keep its delivery guarantees"
            )
        if name in _JAVA_ONLY:
            continue
        config[name] = str(value)
    if not config.get("bootstrap.servers"):
        raise TopicSourceError("option kafka.bootstrap.servers is required (host:port[,host:port...])")
    return config


def _json(raw: str, name: str) -> object:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise TopicSourceError(f"option {name} is not valid JSON ({exc.msg}): {raw!r}") from None


def parse_partition_map(raw: str, name: str) -> dict[TopicPartition, int]:
    """Parse Spark's per-partition JSON, ``{"topicA": {"0": 23, "1": -1}}``."""
    parsed = _json(raw, name)
    if not isinstance(parsed, dict):
        raise TopicSourceError(f'option {name} must be a JSON object like {{"topic": {{"0": 10}}}}')
    result: dict[TopicPartition, int] = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            raise TopicSourceError(f"option {name}: the value for topic {topic!r} must be an object")
        for partition, value in partitions.items():
            try:
                number = int(partition)
            except ValueError:
                raise TopicSourceError(f"option {name}: {partition!r} is not a partition number") from None
            if not isinstance(value, int) or isinstance(value, bool):
                raise TopicSourceError(f"option {name}: {topic}-{partition} must map to an integer")
            result[TopicPartition(topic, number)] = value
    return result


def _subscription(options: Mapping[str, str]) -> Subscription:
    subscribe = _get(options, "subscribe")
    pattern = _get(options, "subscribePattern")
    assign = _get(options, "assign")
    given = [
        name
        for name, value in (("subscribe", subscribe), ("subscribePattern", pattern), ("assign", assign))
        if value
    ]
    if len(given) != 1:
        raise TopicSourceError(
            "exactly one of the options subscribe, subscribePattern and assign is required, got "
            + (", ".join(given) if given else "none")
        )
    if subscribe is not None:
        topics = tuple(sorted({t.strip() for t in subscribe.split(",") if t.strip()}))
        if not topics:
            raise TopicSourceError("option subscribe names no topic")
        return Subscription(topics=topics)
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise TopicSourceError(
                f"option subscribePattern is not a valid regular expression: {exc}"
            ) from None
        return Subscription(pattern=pattern)
    assert assign is not None
    parsed = _json(assign, "assign")
    if not isinstance(parsed, dict) or not parsed:
        raise TopicSourceError('option assign must be a JSON object like {"topicA": [0, 1]}')
    assigned: set[TopicPartition] = set()
    for topic, partitions in parsed.items():
        if not isinstance(partitions, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in partitions
        ):
            raise TopicSourceError(f"option assign: topic {topic!r} must map to a list of partition numbers")
        assigned.update(TopicPartition(topic, p) for p in partitions)
    return Subscription(assigned=tuple(sorted(assigned)))


def _bound(
    options: Mapping[str, str],
    *,
    offsets_name: str,
    timestamp_name: str,
    by_timestamp_name: str,
    default: int,
    forbidden: int | None,
) -> OffsetBound:
    # Spark's precedence: one global timestamp, then timestamps per partition, then offsets.
    timestamp_ms = _int(options, timestamp_name, None, 0)
    if timestamp_ms is not None:
        return OffsetBound(default=default, timestamp_ms=timestamp_ms)
    by_timestamp = _get(options, by_timestamp_name)
    if by_timestamp is not None:
        timestamps = parse_partition_map(by_timestamp, by_timestamp_name)
        if any(ts < 0 for ts in timestamps.values()):
            raise TopicSourceError(f"option {by_timestamp_name}: timestamps must be >= 0 (milliseconds)")
        return OffsetBound(default=default, timestamps_ms=timestamps, strict=True)
    raw = _get(options, offsets_name)
    if raw is None:
        return OffsetBound(default=default)
    lowered = raw.lower()
    if lowered in ("earliest", "latest"):
        value = EARLIEST if lowered == "earliest" else LATEST
        if value == forbidden:
            raise TopicSourceError(f"option {offsets_name}={lowered} is not allowed here")
        return OffsetBound(default=value)
    offsets = parse_partition_map(raw, offsets_name)
    for tp, offset in offsets.items():
        if offset < EARLIEST or offset == forbidden:
            raise TopicSourceError(
                f"option {offsets_name}: {tp.topic}-{tp.partition} has offset {offset}, which is not allowed here"
            )
    return OffsetBound(default=default, offsets=offsets, strict=True)


def parse_read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """Check and freeze the options of ``spark.read`` / ``spark.readStream``."""
    starting = _bound(
        options,
        offsets_name="startingOffsets",
        timestamp_name="startingTimestamp",
        by_timestamp_name="startingOffsetsByTimestamp",
        default=LATEST if streaming else EARLIEST,
        # A batch read that starts at latest would always be empty: Spark refuses it too.
        forbidden=None if streaming else LATEST,
    )
    if streaming:
        for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
            if _get(options, name) is not None:
                raise TopicSourceError(f"option {name} is for batch reads only; a stream has no end")
        ending = OffsetBound(default=LATEST)
    else:
        ending = _bound(
            options,
            offsets_name="endingOffsets",
            timestamp_name="endingTimestamp",
            by_timestamp_name="endingOffsetsByTimestamp",
            default=LATEST,
            forbidden=EARLIEST,
        )
        if _get(options, "maxOffsetsPerTrigger") is not None:
            raise TopicSourceError("option maxOffsetsPerTrigger is for streaming reads only")
    strategy = (_get(options, "startingOffsetsByTimestampStrategy") or "error").lower()
    if strategy not in ("error", "latest"):
        raise TopicSourceError(
            f"option startingOffsetsByTimestampStrategy must be error or latest, got {strategy!r}"
        )
    return ReadOptions(
        client_config=client_config(options, _READ_OWNED),
        subscription=_subscription(options),
        starting=starting,
        ending=ending,
        timestamp_strategy_latest=strategy == "latest",
        max_offsets_per_trigger=_int(options, "maxOffsetsPerTrigger", None, 1),
        min_partitions=_int(options, "minPartitions", None, 1),
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        include_headers=_bool(options, "includeHeaders", False),
        poll_timeout_ms=_required_int(options, "kafkaConsumer.pollTimeoutMs", 120_000, 1),
        metadata_timeout_ms=_required_int(options, "metadataTimeoutMs", 10_000, 1),
        metadata_retries=_required_int(options, "fetchOffset.numRetries", 3, 1),
        retry_interval_ms=_required_int(options, "fetchOffset.retryIntervalMs", 1_000, 0),
        rows_per_batch=_required_int(options, "rowsPerBatch", 10_000, 1),
    )


def _identifier(options: Mapping[str, str], name: str) -> str | None:
    raw = _get(options, name)
    if raw is not None and not _ID_PATTERN.fullmatch(raw):
        raise TopicSourceError(
            f"option {name} must be 1 to 200 letters, digits, '.', '_' or '-', got {raw!r}"
        )
    return raw


def _exactly_once(options: Mapping[str, str], *, streaming: bool) -> ExactlyOnce | None:
    prefix = _identifier(options, "transactionalIdPrefix")
    job_id = _identifier(options, "jobId")
    if not _bool(options, "exactlyOnce", False):
        # Either alone would suggest a guarantee the write does not give.
        for name, value in (("transactionalIdPrefix", prefix), ("jobId", job_id)):
            if value is not None:
                raise TopicSourceError(f"option {name} is only used with exactlyOnce=true")
        return None
    if prefix is None:
        raise TopicSourceError(
            "exactlyOnce=true needs the option transactionalIdPrefix: a name for this query or job, "
            "unique among the writers running at the same time (its tasks' transactional ids and "
            "consumer groups are <prefix>-<Spark partition>)"
        )
    if streaming and job_id is not None:
        raise TopicSourceError(
            "option jobId is for batch writes; a stream's tasks are identified by Spark's query id "
            "and micro-batch id"
        )
    timeout = _required_int(options, "kafka.transaction.timeout.ms", ExactlyOnce.transaction_timeout_ms, 1)
    return ExactlyOnce(prefix=prefix, job_id=job_id, transaction_timeout_ms=timeout)


def parse_write_options(options: Mapping[str, str], *, streaming: bool = False) -> WriteOptions:
    """Check and freeze the options of ``df.write`` / ``df.writeStream``."""
    return WriteOptions(
        client_config=client_config(options, _WRITE_OWNED),
        topic=_get(options, "topic"),
        flush_timeout_ms=_required_int(options, "flushTimeoutMs", 300_000, 1),
        metadata_timeout_ms=_required_int(options, "metadataTimeoutMs", 10_000, 1),
        exactly_once=_exactly_once(options, streaming=streaming),
    )


def wants_headers(options: Mapping[str, str]) -> bool:
    """The includeHeaders option alone: it decides the read schema."""
    return _bool(options, "includeHeaders", False)
