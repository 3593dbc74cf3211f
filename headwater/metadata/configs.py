"""Topic and broker configs as the broker uses them: effective values, validation, changes.

What each config is (type, default, validator, dynamic or not, synonyms) is the catalogue's
(``config_catalog.py``, Kafka 3.9's definitions plus 4.x's additions). A topic config that is not
set falls back to the broker's synonym (``log.retention.ms``...): a dynamic per-broker value, the
cluster-wide dynamic default, the static properties, then Kafka's default, which is what
DescribeConfigs reports as the value's source.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

from headwater.metadata import config_catalog as catalog
from headwater.metadata.config_types import ConfigSource, ConfigType
from headwater.protocol.config_resources import OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT
from headwater.protocol.errors import ErrorCode, KafkaError

__all__ = ["HEADWATER_BROKER_CONFIGS", "TOPIC_CONFIGS", "ConfigSource", "ConfigType", "apply_incremental", "check_tiered_storage",
           "effective_topic_config", "validate_broker_update", "validate_topic_config", "validate_topic_configs"]

TOPIC_CONFIGS = catalog.TOPIC_CONFIGS
validate_topic_config = catalog.validate_topic_config
validate_topic_configs = catalog.validate_topic_configs

# Dynamic broker configs of headwater's own (Kafka has no such names): the rate of reassignment
# copies, and how many moves a broker takes part in at once. Minimum values as Kafka's ranges.
HEADWATER_BROKER_CONFIGS: dict[str, tuple[ConfigType, int, str]] = {
    "reassignment.throttled.rate": (ConfigType.LONG, 0, str((1 << 63) - 1)),
    "reassignment.max.concurrent.moves.per.broker": (ConfigType.INT, 1, str((1 << 31) - 1)),
}


@functools.lru_cache(maxsize=32)
def _topic_defaults(static: frozenset[tuple[str, str]], dynamic_broker: frozenset[tuple[str, str]],
                    dynamic_default: frozenset[tuple[str, str]]) -> dict[str, tuple[str, ConfigSource]]:
    entries = catalog.describe_topic({}, dict(dynamic_broker), dict(dynamic_default), dict(static))
    return {e.name: (e.value if e.value is not None else "", e.source) for e in entries}


def effective_topic_config(topic_configs: Mapping[str, str], broker_props: Mapping[str, str],
                           dynamic_broker: Mapping[str, str] | None = None,
                           dynamic_default: Mapping[str, str] | None = None) -> dict[str, tuple[str, ConfigSource]]:
    """Every topic config with its value and where it came from (Kafka's ``LogConfig`` of the topic)."""
    out = dict(_topic_defaults(frozenset(broker_props.items()), frozenset((dynamic_broker or {}).items()),
                               frozenset((dynamic_default or {}).items())))
    for name, value in topic_configs.items():
        spec = TOPIC_CONFIGS.get(name)
        if spec is not None:
            out[name] = (catalog.normalize(spec, value), ConfigSource.DYNAMIC_TOPIC_CONFIG)
    return out


def check_tiered_storage(configs: Mapping[str, str], broker_props: Mapping[str, str]) -> None:
    """remote.storage.enable=true on a broker without tiered storage (remote.log.storage.system.enable)
    is refused, as Kafka's LogConfig.validateRemoteStorageOnlyIfSystemEnabled refuses it."""
    value = configs.get("remote.storage.enable")
    if value is not None and value.strip().lower() == "true" \
            and broker_props.get("remote.log.storage.system.enable", "false").strip().lower() != "true":
        raise KafkaError(ErrorCode.INVALID_CONFIG, "Tiered Storage functionality is disabled in the broker. "
                                                   "Topic cannot be configured with remote log storage.")


def validate_broker_update(configs: Mapping[str, str | None], *, per_broker: bool) -> None:
    """A dynamic broker config change (the whole new map of /config/brokers/<id> or <default>), as
    Kafka's DynamicBrokerConfig validates it, and headwater's own keys by their ranges."""
    kafka_keys = {k: v for k, v in configs.items() if k not in HEADWATER_BROKER_CONFIGS}
    catalog.validate_dynamic_broker_update(kafka_keys, per_broker=per_broker)
    for name, value in configs.items():
        if name in HEADWATER_BROKER_CONFIGS and value is not None:
            type_, low, _default = HEADWATER_BROKER_CONFIGS[name]
            try:
                number = int(value)
            except ValueError:
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"Invalid value {value} for configuration {name}: Not a number of type {type_.name}") from None
            if number < low:
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"Invalid value {value} for configuration {name}: Value must be at least {low}")


def _list_type(name: str, broker: bool) -> bool:
    spec = catalog.BROKER_CONFIGS.get(name) if broker else TOPIC_CONFIGS.get(name)
    return spec is not None and spec.type is ConfigType.LIST


def apply_incremental(configs: Mapping[str, str], ops: Sequence[tuple[str, int, str | None]], *,
                      broker: bool = False) -> dict[str, str]:
    """An IncrementalAlterConfigs change, ``(name, operation, value)`` in order, applied to a copy of
    ``configs``. A key named twice, or a null value for anything but DELETE, is INVALID_REQUEST
    (Kafka's ConfigAdminManager). SET and DELETE apply to any config, APPEND and SUBTRACT to LIST
    configs (from the config's default when it is not set, as ``ConfigAdminManager.prepareIncrementalConfigs``).
    The caller validates the result as a whole."""
    names = [name for name, _op, _value in ops]
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [name for name, op, value in ops if op != OP_DELETE and value is None]
    if nulls:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
    out = dict(configs)
    for name, op, value in ops:
        if op == OP_SET and value is not None:
            out[name] = value
        elif op == OP_DELETE:
            out.pop(name, None)  # even an unknown name: Kafka drops the key before validating the rest
        elif op in (OP_APPEND, OP_SUBTRACT):
            if not _list_type(name, broker):
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Config value append is not allowed for config key: {name}")
            spec = catalog.BROKER_CONFIGS.get(name) if broker else TOPIC_CONFIGS.get(name)
            current = out.get(name, spec.default if spec is not None and spec.default else "")
            items = [v.strip() for v in current.split(",") if v.strip()]
            for v in (value or "").split(","):
                v = v.strip()
                if op == OP_APPEND and v and v not in items:
                    items.append(v)
                elif op == OP_SUBTRACT and v in items:
                    items.remove(v)
            out[name] = ",".join(items)
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op}")
    return out
