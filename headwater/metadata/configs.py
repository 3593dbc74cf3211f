"""Topic and broker configs as the broker uses them: effective values, validation, changes.

What each config is (type, default, validator, dynamic or not, synonyms) is the catalogue's
(``config_catalog.py``, Kafka 3.9's definitions plus 4.x's additions). A topic config that is not
set falls back to the broker's synonym (``log.retention.ms``...): a dynamic per-broker value, the
cluster-wide dynamic default, the static properties, then Kafka's default, which is what
DescribeConfigs reports as the value's source.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath

from headwater.metadata import config_catalog as catalog
from headwater.metadata.config_types import ConfigSource, ConfigType
from headwater.protocol.config_resources import OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT
from headwater.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "CORDONED_LOG_DIRS",
    "HEADWATER_BROKER_CONFIGS",
    "TOPIC_CONFIGS",
    "ConfigSource",
    "ConfigType",
    "ConnectionLimits",
    "adaptive_throttle_settings",
    "apply_incremental",
    "check_broker_configs",
    "check_reconfiguration",
    "check_tiered_storage",
    "connection_limits",
    "copy_max_cpu_pressure",
    "cordoned_log_dirs",
    "effective_topic_config",
    "validate_broker_update",
    "validate_topic_config",
    "validate_topic_configs",
]

TOPIC_CONFIGS = catalog.TOPIC_CONFIGS
validate_topic_config = catalog.validate_topic_config
validate_topic_configs = catalog.validate_topic_configs

# Dynamic broker configs of headwater's own (Kafka has no such names): the rate of reassignment
# copies, how many moves a broker takes part in at once, and the adaptive reassignment throttle
# (docs/operations.md). Type, minimum (as Kafka's ranges; numbers only) and default.
REASSIGNMENT_THROTTLE_MODE = "reassignment.throttle.mode"
ADAPTIVE_MAX_PRODUCE_LATENCY_MS = "reassignment.adaptive.max.produce.latency.ms"
ADAPTIVE_MAX_FOLLOWER_LAG_MS = "reassignment.adaptive.max.follower.lag.ms"
ADAPTIVE_MIN_RATE = "reassignment.adaptive.min.throttled.rate"
ADAPTIVE_MAX_RATE = "reassignment.adaptive.max.throttled.rate"
ADAPTIVE_MAX_CPU_PRESSURE = "reassignment.adaptive.max.cpu.pressure"
ADAPTIVE_LATENCY_FROM = "reassignment.adaptive.produce.latency.from"
COPY_MAX_CPU_PRESSURE = "reassignment.copy.max.cpu.pressure"
SELF_HEALING_ENABLE = "self.healing.enable"
SELF_HEALING_THRESHOLD_MS = "self.healing.broker.failure.threshold.ms"
SELF_HEALING_DRY_RUN = "self.healing.dry.run"
HEADWATER_BROKER_CONFIGS: dict[str, tuple[ConfigType, float, str]] = {
    "reassignment.throttled.rate": (ConfigType.LONG, 0, str((1 << 63) - 1)),
    "reassignment.max.concurrent.moves.per.broker": (ConfigType.INT, 1, str((1 << 31) - 1)),
    REASSIGNMENT_THROTTLE_MODE: (ConfigType.STRING, 0, "static"),
    # A fraction of a ms: produces on a fast network are answered in one or two.
    ADAPTIVE_MAX_PRODUCE_LATENCY_MS: (ConfigType.DOUBLE, 0.1, "100.0"),
    ADAPTIVE_MAX_FOLLOWER_LAG_MS: (ConfigType.LONG, 1, "5000"),
    ADAPTIVE_MIN_RATE: (ConfigType.LONG, 1, "1000000"),
    ADAPTIVE_MAX_RATE: (ConfigType.LONG, 1, "100000000"),
    # A share of wall time (Linux PSI "some"); 1.0 and above: the adaptive mode does not judge by it.
    ADAPTIVE_MAX_CPU_PRESSURE: (ConfigType.DOUBLE, 0.0, "1.0"),
    # Where a produce's latency starts: its request's arrival, or its producer's CreateTime stamp.
    ADAPTIVE_LATENCY_FROM: (ConfigType.STRING, 0, "ArrivalTime"),
    # A share of wall time (Linux PSI "some"); 1.0 and above: the copy never pauses, as in Kafka.
    COPY_MAX_CPU_PRESSURE: (ConfigType.DOUBLE, 0.0, "1.0"),
    # Self-healing (docs/controller.md): off unless enabled; Cruise Control's 30-minute threshold.
    SELF_HEALING_ENABLE: (ConfigType.BOOLEAN, 0, "false"),
    SELF_HEALING_THRESHOLD_MS: (ConfigType.LONG, 0, "1800000"),
    SELF_HEALING_DRY_RUN: (ConfigType.BOOLEAN, 0, "false"),
}
_HEADWATER_CHOICES = {REASSIGNMENT_THROTTLE_MODE: ("static", "adaptive"),
                      ADAPTIVE_LATENCY_FROM: ("ArrivalTime", "CreateTime"),
                      SELF_HEALING_ENABLE: ("true", "false"), SELF_HEALING_DRY_RUN: ("true", "false")}


def adaptive_throttle_settings(configs: Mapping[str, str]) -> tuple[int, int, float, int, float, str] | None:
    """(min rate, max rate, max produce latency ms, max follower lag ms, max CPU pressure, where the
    produce latency starts) when the merged dynamic
    broker configs turn the adaptive reassignment throttle on, else None. A minimum above the
    maximum (a per-broker value against the cluster default) is raised to the maximum."""
    if configs.get(REASSIGNMENT_THROTTLE_MODE, "static").strip().lower() != "adaptive":
        return None

    def setting(name: str) -> float:
        type_, low, default = HEADWATER_BROKER_CONFIGS[name]
        value = _number(configs.get(name, default), type_)
        # Not a number: only a hand-written znode gets here, and gets the default.
        return float(default) if value is None else max(low, value)

    high = int(setting(ADAPTIVE_MAX_RATE))
    # Any case, as the mode; anything else (only a hand-written znode holds it) gets the default.
    given = configs.get(ADAPTIVE_LATENCY_FROM, "").strip().lower()
    latency_from = next((c for c in _HEADWATER_CHOICES[ADAPTIVE_LATENCY_FROM] if c.lower() == given), "ArrivalTime")
    return (min(int(setting(ADAPTIVE_MIN_RATE)), high), high, setting(ADAPTIVE_MAX_PRODUCE_LATENCY_MS),
            int(setting(ADAPTIVE_MAX_FOLLOWER_LAG_MS)), setting(ADAPTIVE_MAX_CPU_PRESSURE), latency_from)


def copy_max_cpu_pressure(configs: Mapping[str, str]) -> float:
    """``reassignment.copy.max.cpu.pressure`` of the merged dynamic broker configs (its default if unset
    or not a number, which only a hand-written znode can hold)."""
    type_, low, default = HEADWATER_BROKER_CONFIGS[COPY_MAX_CPU_PRESSURE]
    value = _number(configs.get(COPY_MAX_CPU_PRESSURE, default), type_)
    return float(default) if value is None else max(low, value)


def _number(value: str, type_: ConfigType) -> float | None:
    """``value`` parsed as Kafka's ConfigDef parses a number of ``type_``, or None if it is not one."""
    try:
        number = float(value.strip()) if type_ is ConfigType.DOUBLE else int(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) else None


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
        if name in _HEADWATER_CHOICES and value is not None:
            if value.strip().lower() not in (choice.lower() for choice in _HEADWATER_CHOICES[name]):
                expected = ("Expected value to be either true or false"  # ConfigDef's words for a BOOLEAN
                            if HEADWATER_BROKER_CONFIGS[name][0] is ConfigType.BOOLEAN
                            else f"String must be one of: {', '.join(_HEADWATER_CHOICES[name])}")
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: {expected}")
            continue
        if name in HEADWATER_BROKER_CONFIGS and value is not None:
            type_, low, _default = HEADWATER_BROKER_CONFIGS[name]
            number = _number(value, type_)
            if number is None:
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"Invalid value {value} for configuration {name}: Not a number of type {type_.name}")
            if number < low:
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"Invalid value {value} for configuration {name}: Value must be at least {low}")
    low_rate, high_rate = configs.get(ADAPTIVE_MIN_RATE), configs.get(ADAPTIVE_MAX_RATE)
    if low_rate is not None and int(low_rate) > int(high_rate if high_rate is not None else HEADWATER_BROKER_CONFIGS[ADAPTIVE_MAX_RATE][2]):
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {low_rate} for configuration {ADAPTIVE_MIN_RATE}: "
                                                   f"Value must be at most {ADAPTIVE_MAX_RATE}")


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


# --- broker configs that need the whole broker config to check (KafkaConfig.validateValues) -------------

CORDONED_LOG_DIRS = "cordoned.log.dirs"
CORDON_ALL = "*"  # ServerLogConfigs.CORDONED_LOG_DIRS_ALL
MAX_CONNECTIONS = "max.connections"
MAX_CONNECTIONS_PER_IP = "max.connections.per.ip"
MAX_CONNECTIONS_PER_IP_OVERRIDES = "max.connections.per.ip.overrides"
_VALID_HOST = re.compile(r"[0-9a-zA-Z\-%._:]*")  # Utils.VALID_HOST_CHARACTERS
_INT_MAX = (1 << 31) - 1


def cordoned_log_dirs(value: str, log_dirs: Sequence[str]) -> list[str]:
    """KIP-1066 (Kafka 4.3): the log dirs ``cordoned.log.dirs`` cordons on a broker with ``log_dirs``, in
    ``log.dirs`` order. ``*`` cordons them all (``AbstractKafkaConfig.cordonedLogDirs``); any other entry
    must name one of ``log_dirs`` (the same path: ``/d/`` is ``/d``), or INVALID_CONFIG with the message of
    ``DynamicLogConfig.validateCordonedLogDirs`` (apache/kafka trunk), which names every such entry."""
    entries = catalog.parse_list(value)
    if CORDON_ALL in entries:
        return list(log_dirs)

    def same(entry: str, log_dir: str) -> bool:
        return bool(entry) and PurePath(entry) == PurePath(log_dir)

    invalid = [e for e in entries if not any(same(e, d) for d in log_dirs)]
    if invalid:
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         f"Invalid value [{', '.join(entries)}] for configuration {CORDONED_LOG_DIRS}: Invalid entries "
                         f"in {CORDONED_LOG_DIRS}: [{', '.join(invalid)}]. All cordoned log dirs must be entries of "
                         "log.dirs or log.dir.")
    return [d for d in log_dirs if any(same(e, d) for e in entries)]


def _ip_overrides(value: str) -> dict[str, int]:
    """``KafkaConfig.maxConnectionsPerIpOverrides`` (3.9): ``Csv.parseCsvMap`` (split at the last ``:``) and
    ``toInt``, with the messages Java gives (IllegalArgumentException, which ZkAdminManager answers
    INVALID_CONFIG)."""
    out: dict[str, int] = {}
    if not value:
        return out
    pairs = re.split(r"\s*,\s*", value)
    while pairs and pairs[-1] == "":
        pairs.pop()  # String.split drops trailing empty strings
    for pair in pairs:
        cut = pair.rfind(":")
        if cut < 0:  # String.substring(0, -1)
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Error parsing configuration property "
                             f"'{MAX_CONNECTIONS_PER_IP_OVERRIDES}': begin 0, end -1, length {len(pair)}")
        host, count = pair[:cut].strip(), pair[cut + 1:].strip()
        if not re.fullmatch(r"[+-]?[0-9]+", count) or not -_INT_MAX - 1 <= int(count) <= _INT_MAX:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f'For input string: "{count}"')  # Integer.parseInt
        out[host] = int(count)
    return out


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Kafka's ConnectionQuotas settings: ``max.connections`` (broker-wide, and per listener with the
    ``listener.name.<l>.`` prefix), ``max.connections.per.ip`` and its per-host overrides."""

    max_connections: int = _INT_MAX
    per_ip: int = _INT_MAX
    per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    per_listener: Mapping[str, int] = field(default_factory=dict)  # listener name -> max.connections


def _int_value(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def connection_limits(static_props: Mapping[str, str], dynamic_broker: Mapping[str, str],
                      dynamic_default: Mapping[str, str], listeners: Sequence[str] = ()) -> ConnectionLimits:
    """The limits the broker runs with; a value that does not parse keeps Kafka's default (it was
    refused when it was set, so only a hand-written znode has one)."""
    merged = catalog.merged_broker_props(static_props, dynamic_broker, dynamic_default)

    def value(name: str) -> int:
        return _int_value(catalog.broker_value(name, merged), _INT_MAX)

    try:
        overrides = _ip_overrides(str(catalog.broker_value(MAX_CONNECTIONS_PER_IP_OVERRIDES, merged) or ""))
    except KafkaError:
        overrides = {}
    per_listener = {}
    for listener in listeners:
        raw = merged.get(f"listener.name.{listener.lower()}.{MAX_CONNECTIONS}", "").strip()
        if re.fullmatch(r"[0-9]+", raw):
            per_listener[listener] = min(int(raw), _INT_MAX)
    return ConnectionLimits(value(MAX_CONNECTIONS), value(MAX_CONNECTIONS_PER_IP), overrides, per_listener)


def check_broker_configs(static_props: Mapping[str, str], dynamic_broker: Mapping[str, str],
                         dynamic_default: Mapping[str, str], log_dirs: Sequence[str]) -> None:
    """What ``KafkaConfig`` (3.9, and 4.3 for KIP-1066) refuses of the broker's whole config once the
    dynamic levels are merged, beyond each value's own type and range: ``DynamicBrokerConfig.validate``
    builds that config for every change, so a change that breaks it is refused (INVALID_CONFIG)."""
    merged = catalog.merged_broker_props(static_props, dynamic_broker, dynamic_default)
    overrides = _ip_overrides(str(catalog.broker_value(MAX_CONNECTIONS_PER_IP_OVERRIDES, merged) or ""))
    if catalog.broker_value(MAX_CONNECTIONS_PER_IP, merged) == 0 and not overrides:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"requirement failed: {MAX_CONNECTIONS_PER_IP} can be set to zero "
                                                   f"only if {MAX_CONNECTIONS_PER_IP_OVERRIDES} property is set.")
    invalid = [host for host in overrides if not _VALID_HOST.fullmatch(host)]
    if invalid:
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         f"{MAX_CONNECTIONS_PER_IP_OVERRIDES} contains invalid addresses : {','.join(invalid)}")
    cordoned = merged.get(CORDONED_LOG_DIRS)
    if cordoned is not None:
        cordoned_log_dirs(cordoned, log_dirs)


# DynamicThreadPool.ReconfigurableConfigs and the acceptors' num.network.threads (3.9)
_THREAD_POOLS = ("num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir", "background.threads",
                 "num.network.threads")
# LogCleaner.ReconfigurableConfigs (3.9)
_CLEANER_CONFIGS = ("log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
                    "log.cleaner.io.buffer.size", "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms")


def check_reconfiguration(static_props: Mapping[str, str], old_broker: Mapping[str, str], old_default: Mapping[str, str],
                          new_broker: Mapping[str, str], new_default: Mapping[str, str]) -> None:
    """What Kafka 3.9's reconfigurables refuse of a change that ConfigDef accepts: a thread count changed to
    less than half or more than double the current one (``DynamicThreadPool.validateReconfiguration``,
    ``DataPlaneAcceptor.validateReconfiguration``), and ``log.cleaner.threads`` below 1 or outside that band
    (``LogCleaner.validateReconfiguration``). ``DynamicBrokerConfig.processReconfiguration`` wraps each in
    ``ConfigException("Invalid dynamic configuration")``, which is all the client is told."""
    old = catalog.merged_broker_props(static_props, old_broker, old_default)
    new = catalog.merged_broker_props(static_props, new_broker, new_default)

    def value(name: str, merged: Mapping[str, str]) -> int:
        return _int_value(catalog.broker_value(name, merged), 1)

    def outside(now: int, before: int) -> bool:
        return now <= 0 or now < before // 2 or now > before * 2

    refused = any(value(n, new) != value(n, old) and outside(value(n, new), value(n, old)) for n in _THREAD_POOLS)
    if any(catalog.broker_value(n, new) != catalog.broker_value(n, old) for n in _CLEANER_CONFIGS):
        threads, current = value("log.cleaner.threads", new), value("log.cleaner.threads", old)
        refused |= threads < 1 or outside(threads, current)
    if refused:
        raise KafkaError(ErrorCode.INVALID_CONFIG, "Invalid dynamic configuration")
