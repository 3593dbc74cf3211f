"""Topic and broker configuration keys: names, types, defaults, and how topic keys inherit.

A topic config that is not set falls back to the broker's ``log.*`` (or other) synonym, and
that to Kafka's default, which is what DescribeConfigs reports as the value's source.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

from headwater.protocol.config_resources import OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT
from headwater.protocol.errors import ErrorCode, KafkaError


class ConfigType(IntEnum):
    """DescribeConfigs v3+ ``config_type``."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """DescribeConfigs v1+ ``config_source``."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    type: ConfigType
    default: str
    broker_synonym: str | None = None
    choices: tuple[str, ...] = ()
    min_value: int | None = None


_DAY_MS = 24 * 3600 * 1000

TOPIC_CONFIGS: dict[str, ConfigKey] = {
    k.name: k
    for k in (
        ConfigKey("cleanup.policy", ConfigType.LIST, "delete", "log.cleanup.policy", ("delete", "compact")),
        ConfigKey("compression.type", ConfigType.STRING, "producer", "compression.type",
                  ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
        ConfigKey("retention.ms", ConfigType.LONG, str(7 * _DAY_MS), "log.retention.ms", min_value=-1),
        ConfigKey("retention.bytes", ConfigType.LONG, "-1", "log.retention.bytes", min_value=-1),
        ConfigKey("segment.bytes", ConfigType.INT, str(1 << 30), "log.segment.bytes", min_value=14),
        ConfigKey("segment.ms", ConfigType.LONG, str(7 * _DAY_MS), "log.roll.ms", min_value=1),
        ConfigKey("segment.index.bytes", ConfigType.INT, str(10 << 20), "log.index.size.max.bytes", min_value=4),
        ConfigKey("index.interval.bytes", ConfigType.INT, "4096", "log.index.interval.bytes", min_value=0),
        ConfigKey("file.delete.delay.ms", ConfigType.LONG, "60000", "log.segment.delete.delay.ms", min_value=0),
        ConfigKey("flush.messages", ConfigType.LONG, str((1 << 63) - 1), "log.flush.interval.messages", min_value=1),
        ConfigKey("flush.ms", ConfigType.LONG, str((1 << 63) - 1), "log.flush.interval.ms", min_value=0),
        ConfigKey("max.message.bytes", ConfigType.INT, "1048588", "message.max.bytes", min_value=0),
        ConfigKey("min.insync.replicas", ConfigType.INT, "1", "min.insync.replicas", min_value=1),
        ConfigKey("message.timestamp.type", ConfigType.STRING, "CreateTime", "log.message.timestamp.type",
                  ("CreateTime", "LogAppendTime")),
        ConfigKey("unclean.leader.election.enable", ConfigType.BOOLEAN, "false", "unclean.leader.election.enable",
                  ("true", "false")),
        ConfigKey("delete.retention.ms", ConfigType.LONG, str(_DAY_MS), "log.cleaner.delete.retention.ms", min_value=0),
        ConfigKey("min.compaction.lag.ms", ConfigType.LONG, "0", "log.cleaner.min.compaction.lag.ms", min_value=0),
        ConfigKey("max.compaction.lag.ms", ConfigType.LONG, str((1 << 63) - 1), "log.cleaner.max.compaction.lag.ms",
                  min_value=1),
        ConfigKey("min.cleanable.dirty.ratio", ConfigType.DOUBLE, "0.5", "log.cleaner.min.cleanable.ratio"),
        ConfigKey("leader.replication.throttled.replicas", ConfigType.LIST, "", None),
        ConfigKey("follower.replication.throttled.replicas", ConfigType.LIST, "", None),
    )
}


def validate_topic_config(name: str, value: str | None) -> None:
    """Raise INVALID_CONFIG naming the problem; ``None`` (delete) is always valid for a known key."""
    key = TOPIC_CONFIGS.get(name)
    if key is None:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
    if value is None:
        return
    if key.type in (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT):
        try:
            number = int(value)
        except ValueError:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: Not a number of type {key.type.name}") from None
        if key.min_value is not None and number < key.min_value:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: Value must be at least {key.min_value}")
    elif key.type is ConfigType.DOUBLE:
        try:
            ratio = float(value)
        except ValueError:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: Not a number of type DOUBLE") from None
        if name == "min.cleanable.dirty.ratio" and not 0.0 <= ratio <= 1.0:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: Value must be in [0, 1]")
    elif key.choices:
        parts = [v.strip() for v in value.split(",")] if key.type is ConfigType.LIST else [value]
        bad = [p for p in parts if p not in key.choices]
        if bad:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: String must be one of: {', '.join(key.choices)}")


def validate_topic_configs(configs: Mapping[str, str]) -> None:
    """Every key of a topic's whole config set, then the rules between keys (Kafka's LogConfig)."""
    for name, value in configs.items():
        validate_topic_config(name, value)
    low = int(configs.get("min.compaction.lag.ms", TOPIC_CONFIGS["min.compaction.lag.ms"].default))
    high = int(configs.get("max.compaction.lag.ms", TOPIC_CONFIGS["max.compaction.lag.ms"].default))
    if low > high:
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         f"conflict topic config setting min.compaction.lag.ms ({low}) > max.compaction.lag.ms ({high})")


def effective_topic_config(topic_configs: Mapping[str, str], broker_props: Mapping[str, str]) -> dict[str, tuple[str, ConfigSource]]:
    """Every topic key with its value and where it came from."""
    out: dict[str, tuple[str, ConfigSource]] = {}
    for name, key in TOPIC_CONFIGS.items():
        if name in topic_configs:
            out[name] = (topic_configs[name], ConfigSource.DYNAMIC_TOPIC_CONFIG)
        elif key.broker_synonym and key.broker_synonym in broker_props:
            out[name] = (broker_props[key.broker_synonym], ConfigSource.STATIC_BROKER_CONFIG)
        elif name == "retention.ms" and "log.retention.hours" in broker_props:
            out[name] = (str(int(broker_props["log.retention.hours"]) * 3600 * 1000), ConfigSource.STATIC_BROKER_CONFIG)
        else:
            out[name] = (key.default, ConfigSource.DEFAULT_CONFIG)
    return out


# Broker configs that can change at run time (IncrementalAlterConfigs on a BROKER resource), kept in
# /config/brokers/<id> (or <default>) like Kafka's dynamic broker configs.
DYNAMIC_BROKER_CONFIGS: dict[str, ConfigKey] = {
    k.name: k
    for k in (
        ConfigKey("leader.replication.throttled.rate", ConfigType.LONG, str((1 << 63) - 1), min_value=0),
        ConfigKey("follower.replication.throttled.rate", ConfigType.LONG, str((1 << 63) - 1), min_value=0),
        ConfigKey("replica.alter.log.dirs.io.max.bytes.per.second", ConfigType.LONG, str((1 << 63) - 1), min_value=0),
        ConfigKey("reassignment.throttled.rate", ConfigType.LONG, str((1 << 63) - 1), min_value=0),
        ConfigKey("reassignment.max.concurrent.moves.per.broker", ConfigType.INT, str((1 << 31) - 1), min_value=1),
    )
}


def validate_broker_config(name: str, value: str | None) -> None:
    key = DYNAMIC_BROKER_CONFIGS.get(name)
    if key is None:
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         f"Cannot update broker config {name} dynamically; dynamic configs: {', '.join(DYNAMIC_BROKER_CONFIGS)}")
    if value is None:
        return
    try:
        number = int(value)
    except ValueError:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: Not a number of type {key.type.name}") from None
    if key.min_value is not None and number < key.min_value:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: Value must be at least {key.min_value}")


def apply_incremental(configs: Mapping[str, str], ops: Sequence[tuple[str, int, str | None]], *,
                      broker: bool = False) -> dict[str, str]:
    """An IncrementalAlterConfigs change, ``(name, operation, value)`` in order, applied to a copy of
    ``configs``. A key named twice, or a null value for anything but DELETE, is INVALID_REQUEST
    (Kafka's ConfigAdminManager). Topic configs take SET, DELETE and, for LIST configs, APPEND and
    SUBTRACT, and are validated as a whole set afterwards; broker configs take SET and DELETE and
    are validated here."""
    names = [name for name, _op, _value in ops]
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [name for name, op, value in ops if op != OP_DELETE and value is None]
    if nulls:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
    out = dict(configs)
    for name, op, value in ops:
        if op == OP_SET and value is not None:
            if broker:
                validate_broker_config(name, value)
            out[name] = value
        elif op == OP_DELETE:
            (validate_broker_config if broker else validate_topic_config)(name, None)
            out.pop(name, None)
        elif op in (OP_APPEND, OP_SUBTRACT) or broker:
            key = None if broker else TOPIC_CONFIGS.get(name)
            if key is None or key.type != ConfigType.LIST:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Config value append is not allowed for config key: {name}")
            items = [v for v in out.get(name, "").split(",") if v]
            for v in (value or "").split(","):
                if op == OP_APPEND and v and v not in items:
                    items.append(v)
                elif op == OP_SUBTRACT and v in items:
                    items.remove(v)
            out[name] = ",".join(items)
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op}")
    return out
