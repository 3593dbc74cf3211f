"""The config catalogue: every question about a topic or broker config is answered here.

The table (``config_table.py``) holds Kafka 3.9's topic and broker configs plus those Kafka 4.x adds;
``config_def.py`` says what a row is and parses a value as ``ConfigDef.parse`` does. This module
validates what clients set (``LogConfig.validate``, ``DynamicBrokerConfig.validateConfigs``) and
computes the effective values and what DescribeConfigs v4 reports
(``ConfigHelper.createTopicConfigEntry`` / ``createBrokerConfigEntry``). They do no I/O. The names of
the other two modules that callers use are importable from here.

Sources, all on the mirror of apache/kafka, branch 3.9: ``DynamicBrokerConfig.scala``,
``ConfigHelper.scala``, ``ZkAdminManager.scala``, ``LogConfig``, ``KafkaConfig``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from headwater.metadata.config_def import (
    METADATA_VERSIONS,
    ConfigSpec,
    Importance,
    OneOf,
    Parsed,
    Range,
    Scope,
    Special,
    Unit,
    Validator,
    format_value,
    metadata_version,
    normalize,
    parse_list,
    parse_value,
)
from headwater.metadata.config_table import (
    BROKER_CONFIGS,
    CATALOG,
    CLUSTER_LEVEL_LISTENER_CONFIGS,
    DYNAMIC_HERE_ONLY,
    LISTENER_MECHANISM_CONFIGS,
    LISTENER_ONLY_CONFIGS,
    TOPIC_CONFIGS,
)
from headwater.metadata.config_types import ConfigSource, ConfigType
from headwater.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "BROKER_CONFIGS", "CATALOG", "CLUSTER_LEVEL_LISTENER_CONFIGS", "DYNAMIC_HERE_ONLY", "LISTENER_MECHANISM_CONFIGS",
    "LISTENER_ONLY_CONFIGS", "METADATA_VERSIONS", "TOPIC_CONFIGS", "ConfigSpec", "Entry", "Importance", "OneOf",
    "Parsed", "Range", "Scope", "Special", "Synonym", "Unit", "Validator", "alter_error_message",
    "broker_config_synonyms", "broker_value", "describe_broker", "describe_topic", "merged_broker_props",
    "metadata_version", "normalize", "parse_list", "usable_dynamic_configs", "validate_broker_config",
    "validate_dynamic_broker_update", "validate_topic_config", "validate_topic_configs",
]


@dataclass(frozen=True, slots=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class Entry:
    """One config of a DescribeConfigs v4 result."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    is_sensitive: bool
    synonyms: tuple[Synonym, ...]
    type: ConfigType
    documentation: str | None


_LISTENER_CONFIG = re.compile(r"listener\.name\.[^.]*\.(.*)", re.DOTALL)


# --- validation --------------------------------------------------------------------------------------


def validate_topic_config(name: str, value: str | None) -> None:
    """Raise INVALID_CONFIG as Kafka's ``LogConfig.validate`` would for one topic config.

    An unknown name is ``InvalidConfigurationException("Unknown topic config name: ...")``
    (``LogConfig.validateNames``). ``None`` (an IncrementalAlterConfigs DELETE) is never refused: Kafka's
    ``ConfigAdminManager.prepareIncrementalConfigs`` just drops the key before validating what is left.
    """
    if value is None:
        return
    spec = TOPIC_CONFIGS.get(name)
    if spec is None:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
    parse_value(spec, value)


def validate_topic_configs(configs: Mapping[str, str], defaults: Mapping[str, str] | None = None) -> None:
    """A topic's whole override set, then the rules between keys that ``LogConfig.validate`` applies in ZooKeeper
    mode (``validateValues`` and ``validateNoInvalidRemoteStorageConfigsInZK``); ``defaults`` are the values
    the broker would use for keys the topic does not set (Kafka's ``extractLogConfigMap``)."""
    for name, value in configs.items():
        validate_topic_config(name, value)
    merged = {**{k: s.default or "" for k, s in TOPIC_CONFIGS.items()}, **(defaults or {}), **configs}
    low = int(normalize(TOPIC_CONFIGS["min.compaction.lag.ms"], merged["min.compaction.lag.ms"]))
    high = int(normalize(TOPIC_CONFIGS["max.compaction.lag.ms"], merged["max.compaction.lag.ms"]))
    if low > high:
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         f"conflict topic config setting min.compaction.lag.ms ({low}) > max.compaction.lag.ms ({high})")
    if any(normalize(TOPIC_CONFIGS[k], merged[k]) == "true" for k in ("remote.log.delete.on.disable", "remote.log.copy.disable")):
        raise KafkaError(ErrorCode.INVALID_CONFIG, "It is invalid to set `remote.log.delete.on.disable` or "
                                                   "`remote.log.copy.disable` under Zookeeper's mode.")


def _base_name(name: str) -> str | None:
    match = _LISTENER_CONFIG.fullmatch(name)
    return match.group(1) if match else None


def _dynamic_def(name: str) -> ConfigSpec | None:
    """The config ``DynamicConfig.Broker`` would parse ``name`` (or its listener-stripped base) as."""
    spec = BROKER_CONFIGS.get(_base_name(name) or name)
    return spec if spec is not None and spec.dynamic else None


def _per_broker_only(name: str) -> bool:
    """``DynamicBrokerConfig.perBrokerConfigs``: in PerBrokerConfigs, or listener-prefixed and not cluster-level."""
    base = _base_name(name)
    if base is not None:
        return base not in CLUSTER_LEVEL_LISTENER_CONFIGS
    spec = BROKER_CONFIGS.get(name)
    return spec is not None and spec.scope is Scope.PER_BROKER


def _scala_set(names: Iterable[str]) -> str:
    return "Set(" + ", ".join(names) + ")"


def validate_dynamic_broker_update(props: Mapping[str, str | None], *, per_broker: bool,
                                   allow_custom: bool = True) -> None:
    """What ``DynamicBrokerConfig.validateConfigs`` (3.9) refuses in an AlterConfigs /
    IncrementalAlterConfigs BROKER resource, in its order. ``per_broker`` is False for the cluster default
    (an empty resource name). ``None`` values (deletes) are dropped first, as Kafka does.

    Kafka throws ``ConfigException`` and ``ZkAdminManager.alterConfigs`` / ``incrementalAlterConfigs``
    answer ``InvalidConfigurationException`` (INVALID_CONFIG, 40) with the message prefixed by
    ``Invalid config value for resource ConfigResource(type=BROKER, name='<id>'): `` (see
    :func:`alter_error_message`). Names Kafka does not know are custom configs, which ZooKeeper-mode Kafka
    accepts (``DynamicConfig.Broker.validate`` runs with ``customPropsAllowed = true``); pass
    ``allow_custom=False`` to refuse them with the text Kafka uses for unknown quota entity configs.
    """
    names = [k for k, v in props.items() if v is not None]
    fixed = [k for k in names if k in BROKER_CONFIGS and not BROKER_CONFIGS[k].dynamic]
    if fixed:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Cannot update these configs dynamically: {_scala_set(fixed)}")
    bare = [k for k in names if k in LISTENER_ONLY_CONFIGS]
    if bare:
        raise KafkaError(ErrorCode.INVALID_CONFIG, "These security configs can be dynamically updated only per-listener "
                                                   f"using the listener prefix: {_scala_set(bare)}")
    custom = [k for k in names if k not in BROKER_CONFIGS and (_base_name(k) or k) not in BROKER_CONFIGS]
    if custom and not allow_custom:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"requirement failed: Unknown Dynamic Configuration: {_scala_set(custom)}.")
    for name in names:
        spec = _dynamic_def(name)
        value = props[name]
        if spec is not None and value is not None:
            parse_value(spec, value, _base_name(name) or name)
    if not per_broker:
        local = [k for k in names if _per_broker_only(k)]
        if local:
            raise KafkaError(ErrorCode.INVALID_CONFIG, "Cannot update these configs at default cluster level, "
                                                       f"broker id must be specified: {_scala_set(local)}")


def validate_broker_config(name: str, value: str | None, *, dynamic: bool, per_broker: bool = True,
                           allow_custom: bool = True) -> None:
    """One broker config. ``dynamic=True``: an AlterConfigs change, checked as
    :func:`validate_dynamic_broker_update` does. ``dynamic=False``: a static (server.properties) value,
    parsed as ``KafkaConfig`` would; names Kafka does not define are passed through as Kafka does."""
    if dynamic:
        validate_dynamic_broker_update({name: value}, per_broker=per_broker, allow_custom=allow_custom)
        return
    spec = BROKER_CONFIGS.get(name) or BROKER_CONFIGS.get(_base_name(name) or "")
    if spec is not None and value is not None:
        parse_value(spec, value, name)


def alter_error_message(resource_type: str, resource_name: str, message: str) -> str:
    """The text ``ZkAdminManager`` answers a ``ConfigException`` with in (Incremental)AlterConfigs."""
    return f"Invalid config value for resource ConfigResource(type={resource_type}, name='{resource_name}'): {message}"


# --- effective values and DescribeConfigs -------------------------------------------------------------


def broker_config_synonyms(name: str, *, match_listener_override: bool = True) -> list[str]:
    """``DynamicBrokerConfig.brokerConfigSynonyms``: the names that set the same broker config, in precedence."""
    # Kafka's four cases are the topic synonym groups with more than one name; a group answers for its first name
    # and for its unit-converted ones (log.roll.hours, ...), not for log.flush.scheduler.interval.ms.
    for spec in TOPIC_CONFIGS.values():
        group = [s for s, _unit in spec.synonyms]
        if name in group and len(group) > 1 and (name == group[0] or spec.synonyms[group.index(name)][1] is not Unit.MS):
            return group
    base = _base_name(name)
    if base is not None and match_listener_override:
        return [name, next((m for m in LISTENER_MECHANISM_CONFIGS if base.endswith(m)), base)]
    return [name]


def usable_dynamic_configs(props: Mapping[str, str], *, per_broker: bool) -> dict[str, str]:
    """What ``DynamicBrokerConfig.fromPersistentProps`` keeps of a /config/brokers/<id> (``per_broker``) or
    /config/brokers/<default> znode: values that parse, no read-only configs, no bare SSL store configs, and at
    the default level no per-broker ones."""
    kept: dict[str, str] = {}
    for name, value in props.items():
        spec = _dynamic_def(name)
        if spec is not None:
            try:
                parse_value(spec, value, name)
            except KafkaError:
                continue
        fixed = name in BROKER_CONFIGS and not BROKER_CONFIGS[name].dynamic
        if not fixed and name not in LISTENER_ONLY_CONFIGS and (per_broker or not _per_broker_only(name)):
            kept[name] = value
    return kept


def _merge(static_props: Mapping[str, str], *overrides: Mapping[str, str]) -> dict[str, str]:
    """``DynamicBrokerConfig.overrideProps``: each override replaces the key and drops its synonyms."""
    merged = dict(static_props)
    for props in overrides:
        for name, value in props.items():
            for synonym in broker_config_synonyms(name, match_listener_override=False):
                merged.pop(synonym, None)
            merged[name] = value
    return merged


def _broker_value(name: str, merged: Mapping[str, str]) -> Parsed | None:
    """The parsed value ``KafkaConfig`` would hold for a broker config (its default when unset or unparsable)."""
    spec = BROKER_CONFIGS[name]
    for raw in ([merged[name]] if name in merged else []) + ([spec.default] if spec.default is not None else []):
        try:
            return parse_value(spec, raw)
        except KafkaError:
            continue
    return None


def merged_broker_props(static_props: Mapping[str, str], dynamic_broker: Mapping[str, str],
                        dynamic_default: Mapping[str, str]) -> dict[str, str]:
    """The broker's properties once ``DynamicBrokerConfig`` laid the usable dynamic levels over the static
    ones: per broker over cluster default over ``server.properties``."""
    return _merge(static_props, usable_dynamic_configs(dynamic_default, per_broker=False),
                  usable_dynamic_configs(dynamic_broker, per_broker=True))


def broker_value(name: str, merged: Mapping[str, str]) -> Parsed | None:
    """The value ``KafkaConfig`` holds for a broker config of :func:`merged_broker_props` (its default when
    unset or unparsable; None for a config without a default that is not set)."""
    return _broker_value(name, merged)


def _topic_default(spec: ConfigSpec, merged: Mapping[str, str]) -> str | None:
    """The value a topic without an override gets from the broker (``KafkaConfig.extractLogConfigMap``):
    the first synonym that is set, else the first with a default, times its unit (``logRetentionTimeMillis``,
    ``logRollTimeMillis``, ``logFlushIntervalMs``); topic-only configs keep their own default."""
    if not spec.synonyms:
        return spec.default
    chosen = next((s for s in spec.synonyms if s[0] in merged and _broker_value(s[0], merged) is not None), None)
    chosen = chosen or next((s for s in spec.synonyms if BROKER_CONFIGS[s[0]].default is not None), spec.synonyms[0])
    value = _broker_value(chosen[0], merged)
    if value is None:
        return spec.default
    if isinstance(value, int) and not isinstance(value, bool) and chosen[1] is not Unit.MS:
        value *= chosen[1].value
    if spec.name == "retention.ms" and isinstance(value, int) and value < 0:
        value = -1  # KafkaConfig.logRetentionTimeMillis
    if spec.name == "message.format.version":
        value = metadata_version(str(value)) or str(value)  # logMessageFormatVersion.version
    return format_value(value)


def _type_of(name: str) -> ConfigType | None:
    """``KafkaConfig.configType``: the exact name, else what its synonyms (listener base) are."""
    for candidate in [name, *broker_config_synonyms(name)]:
        spec = BROKER_CONFIGS.get(candidate)
        if spec is not None:
            return spec.type
    return None


def _synonyms(primary: str, names: list[str], sensitive: bool, levels: list[tuple[ConfigSource, Mapping[str, str]]]) -> list[Synonym]:
    """``ConfigHelper.configSynonyms``: every level's value of every name, then everything before ``primary``
    dropped (so a topic whose broker value comes only from e.g. log.retention.hours reports DEFAULT_CONFIG)."""
    found = [Synonym(n, None if sensitive else m[n], source) for source, m in levels for n in names if n in m]
    while found and found[0].name != primary:
        found.pop(0)
    return found


# DynamicBrokerConfig.staticDefaultConfigs: KafkaConfig's non-null defaults as strings
_DEFAULTS = {s.name: s.default for s in BROKER_CONFIGS.values() if s.default is not None and not s.quota}


def _levels(dynamic_broker: Mapping[str, str], dynamic_default: Mapping[str, str],
            static_props: Mapping[str, str]) -> list[tuple[ConfigSource, Mapping[str, str]]]:
    return [(ConfigSource.DYNAMIC_BROKER_CONFIG, dynamic_broker), (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, dynamic_default),
            (ConfigSource.STATIC_BROKER_CONFIG, static_props), (ConfigSource.DEFAULT_CONFIG, _DEFAULTS)]


def describe_topic(topic_overrides: Mapping[str, str], dynamic_broker: Mapping[str, str],
                   dynamic_default: Mapping[str, str], static_props: Mapping[str, str]) -> list[Entry]:
    """Every topic config as DescribeConfigs v4 reports it (``ConfigHelper.createTopicConfigEntry``, 3.9).

    ``dynamic_broker`` and ``dynamic_default`` are the /config/brokers/<id> and /config/brokers/<default>
    znodes as stored; what Kafka would ignore of them is dropped here (:func:`usable_dynamic_configs`)."""
    dyn = usable_dynamic_configs(dynamic_broker, per_broker=True)
    dflt = usable_dynamic_configs(dynamic_default, per_broker=False)
    merged = _merge(static_props, dflt, dyn)
    levels = _levels(dyn, dflt, static_props)
    out: list[Entry] = []
    for spec in TOPIC_CONFIGS.values():
        value = normalize(spec, topic_overrides[spec.name]) if spec.name in topic_overrides else _topic_default(spec, merged)
        synonyms = []
        if spec.synonyms:
            primary = spec.synonyms[0][0]
            synonyms = _synonyms(primary, broker_config_synonyms(primary), False, levels)
        if spec.name in topic_overrides:
            synonyms.insert(0, Synonym(spec.name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        out.append(Entry(spec.name, value, source, False, False, tuple(synonyms), spec.type, spec.doc))
    for name in sorted(set(topic_overrides) - set(TOPIC_CONFIGS)):  # unknown type: treated as sensitive
        out.append(Entry(name, None, ConfigSource.DYNAMIC_TOPIC_CONFIG, False, True,
                         (Synonym(name, None, ConfigSource.DYNAMIC_TOPIC_CONFIG),), ConfigType.UNKNOWN, None))
    return out


def _broker_entry(name: str, raw: Parsed | None, per_broker: bool,
                  levels: list[tuple[ConfigSource, Mapping[str, str]]]) -> Entry:
    """``ConfigHelper.createBrokerConfigEntry``."""
    type_ = _type_of(name)
    sensitive = type_ is None or type_ is ConfigType.PASSWORD  # KafkaConfig.maybeSensitive
    value = None if sensitive or raw is None else raw if isinstance(raw, str) else format_value(raw)
    synonyms = [s for s in _synonyms(name, broker_config_synonyms(name), sensitive, levels)
                if per_broker or s.source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
    source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
    spec = BROKER_CONFIGS.get(name)
    read_only = spec is None or spec.quota or not spec.dynamic  # !DynamicBrokerConfig.AllDynamicConfigs.contains
    return Entry(name, value, source, read_only, sensitive, tuple(synonyms), type_ or ConfigType.UNKNOWN,
                 spec.doc if spec else None)


def describe_broker(broker_id: int | None, dynamic_broker: Mapping[str, str], dynamic_default: Mapping[str, str],
                    static_props: Mapping[str, str]) -> list[Entry]:
    """Broker configs as DescribeConfigs v4 reports them (``ConfigHelper.describeConfigs``, 3.9).

    ``broker_id`` None is the cluster-default resource (empty name): only what /config/brokers/<default>
    sets, with only DYNAMIC_DEFAULT_BROKER_CONFIG synonyms. Otherwise every non-internal config plus every
    other key that is set (``allConfigs``: originals ++ nonInternalValues); a key Kafka does not know has
    no type, so it is reported sensitive with no value, as Kafka does. The caller checks that ``broker_id``
    is this broker's (Kafka: INVALID_REQUEST "Unexpected broker id, ...")."""
    dyn = usable_dynamic_configs(dynamic_broker, per_broker=True)
    dflt = usable_dynamic_configs(dynamic_default, per_broker=False)
    levels = _levels(dyn, dflt, static_props)
    if broker_id is None:
        return [_broker_entry(name, value, False, levels) for name, value in dflt.items()]
    merged = _merge(static_props, dflt, dyn)
    known = [s.name for s in BROKER_CONFIGS.values() if not s.internal and not s.quota]
    out = [_broker_entry(name, _broker_value(name, merged), True, levels) for name in known]
    # the rest of originals (internal, quota, listener-prefixed and custom keys) as the strings they were set to
    return out + [_broker_entry(name, merged[name], True, levels) for name in sorted(set(merged) - set(known))]
