"""Kafka's ``ConfigDef`` for the config catalogue: what a config is (type, default, validator,
importance, where a broker may change it), and how a value is parsed and checked the way
``ConfigDef.parse`` does, with Kafka's messages (clients show them). The rows themselves are in
``config_table.py``; the questions asked of them are answered by ``config_catalog.py``. No I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum

from headwater.metadata.config_types import ConfigType
from headwater.protocol.errors import ErrorCode, KafkaError


class Scope(Enum):
    """Where a config lives and, for a broker config, Kafka's "Dynamic Update Mode"."""

    TOPIC = "topic"
    READ_ONLY = "read-only"
    PER_BROKER = "per-broker"
    CLUSTER_WIDE = "cluster-wide"


class Importance(Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class Unit(Enum):
    """How a broker synonym's value turns into the topic config's milliseconds (``ConfigSynonym``)."""

    MS = 1
    MINUTES = 60_000
    HOURS = 3_600_000


@dataclass(frozen=True, slots=True)
class Range:
    """``ConfigDef.Range``: inclusive bounds, either may be open."""

    low: int | float | None = None
    high: int | float | None = None


@dataclass(frozen=True, slots=True)
class OneOf:
    """``ValidString.in`` (or ``ValidList.in`` on a LIST config: each element), ``CaseInsensitiveValidString``."""

    values: tuple[str, ...]
    case_insensitive: bool = False


class Special(Enum):
    """Kafka's validators that are neither a range nor a list of values."""

    NON_EMPTY = "ConfigDef.NonEmptyString"
    NON_NULL = "ConfigDef.NonNullValidator"
    POOL_SIZE = "RemoteLogManagerConfig: -1 or at least 1"
    GZIP_LEVEL = "CompressionType.GZIP.levelValidator"
    METADATA_VERSION = "MetadataVersionValidator"
    QUORUM_VOTERS = "QuorumConfig.ControllerQuorumVotersValidator"
    QUORUM_BOOTSTRAP = "QuorumConfig.ControllerQuorumBootstrapServersValidator"
    THROTTLED_REPLICAS = "ThrottledReplicaListValidator"


Validator = Range | OneOf | Special


@dataclass(frozen=True, slots=True)
class ConfigSpec:
    name: str
    type: ConfigType
    default: str | None  # as DescribeConfigs shows it; None for a null default
    validator: Validator | None
    importance: Importance
    scope: Scope
    doc: str
    synonyms: tuple[tuple[str, Unit], ...] = ()  # topic configs: broker configs to fall back to, in order
    internal: bool = False  # ConfigDef.defineInternal: left out of DescribeConfigs unless set
    quota: bool = False  # dynamic-only broker quota (DynamicConfig.Broker), not a KafkaConfig key
    since: str = "3.9"  # "4.0": on trunk of 2024-10-25 (the 4.0 line) and not in 3.9; "4.3": KIP-1066

    @property
    def is_sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD

    @property
    def dynamic(self) -> bool:
        return self.scope in (Scope.PER_BROKER, Scope.CLUSTER_WIDE)



# MetadataVersion.VERSIONS on 3.9 ("*" marks the versions after LATEST_PRODUCTION, which have no short alias).
METADATA_VERSIONS: tuple[str, ...] = (
    "0.8.0", "0.8.1", "0.8.2", "0.9.0", "0.10.0-IV0", "0.10.0-IV1", "0.10.1-IV0", "0.10.1-IV1", "0.10.1-IV2",
    "0.10.2-IV0", "0.11.0-IV0", "0.11.0-IV1", "0.11.0-IV2", "1.0-IV0", "1.1-IV0", "2.0-IV0", "2.0-IV1",
    "2.1-IV0", "2.1-IV1", "2.1-IV2", "2.2-IV0", "2.2-IV1", "2.3-IV0", "2.3-IV1", "2.4-IV0", "2.4-IV1",
    "2.5-IV0", "2.6-IV0", "2.7-IV0", "2.7-IV1", "2.7-IV2", "2.8-IV0", "2.8-IV1", "3.0-IV0", "3.0-IV1",
    "3.1-IV0", "3.2-IV0", "3.3-IV0", "3.3-IV1", "3.3-IV2", "3.3-IV3", "3.4-IV0", "3.5-IV0", "3.5-IV1",
    "3.5-IV2", "3.6-IV0", "3.6-IV1", "3.6-IV2", "3.7-IV0", "3.7-IV1", "3.7-IV2", "3.7-IV3", "3.7-IV4",
    "3.8-IV0", "3.9-IV0", "4.0-IV0*", "4.0-IV1*",
)
_IBP: dict[str, str] = {v.rstrip("*"): v.rstrip("*") for v in METADATA_VERSIONS}
_IBP.update({v.split("-")[0]: v for v in METADATA_VERSIONS if not v.endswith("*")})  # release -> latest production

_INTEGER = re.compile(r"[+-]?[0-9]+")
_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")
_JAVA_CLASS = re.compile(r"[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*")
_HOST_PORT = re.compile(r"(?:[0-9a-zA-Z\-%._]*://)?\[?([0-9a-zA-Z\-%._:]*)]?:([0-9]+)")
_HOST = re.compile(r"[0-9a-zA-Z\-%._:]*")
_LIST_SEPARATOR = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")  # ConfigDef.COMMA_WITH_WHITESPACE
_JAVA_SPACE = "".join(chr(c) for c in range(33))
_BITS = {ConfigType.SHORT: 16, ConfigType.INT: 32, ConfigType.LONG: 64}

Parsed = bool | int | float | str | list[str]


# --- values as Java prints and parses them -----------------------------------------------------------


def _java_double(x: float) -> str:
    """``Double.toString``: plain between 10^-3 and 10^7, else ``d.dddE[-]n``."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0 or 1e-3 <= abs(x) < 1e7:
        return repr(x)
    sign, digits, exp = Decimal(repr(x)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    return ("-" if sign else "") + f"{text[0]}.{text[1:] or '0'}E{len(digits) - 1 + int(exp)}"


def _java_str(v: object) -> str:
    """``String.valueOf`` of a parsed value, as ``ConfigException`` puts it in "Invalid value ..."."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _java_double(v)
    if isinstance(v, list):
        return "[" + ", ".join(v) + "]"
    return str(v)


def _java_trim(s: str) -> str:
    return s.strip(_JAVA_SPACE)  # String.trim: every char up to U+0020


def _invalid(name: str, value: object, message: str) -> KafkaError:
    # ConfigException(name, value, message)
    return KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {_java_str(value)} for configuration {name}: {message}")


def _parse(name: str, type_: ConfigType, value: str) -> Parsed:
    """``ConfigDef.parseType`` of a string."""
    s = _java_trim(value)
    if type_ is ConfigType.BOOLEAN:
        if s.lower() in ("true", "false"):
            return s.lower() == "true"
        raise _invalid(name, value, "Expected value to be either true or false")
    if type_ in _BITS:
        limit = 1 << (_BITS[type_] - 1)
        if _INTEGER.fullmatch(s) and -limit <= int(s) < limit:
            return int(s)
        raise _invalid(name, value, f"Not a number of type {type_.name}")
    if type_ is ConfigType.DOUBLE:
        if _DOUBLE.fullmatch(s):
            return float(s.rstrip("fFdD"))
        raise _invalid(name, value, "Not a number of type DOUBLE")
    if type_ is ConfigType.LIST:
        return parse_list(value)
    if type_ is ConfigType.CLASS and not _JAVA_CLASS.fullmatch(s):
        raise _invalid(name, value, f"Class {value} could not be found.")  # Utils.loadClass; no JVM to ask here
    return s


def format_value(v: Parsed) -> str:
    """``ConfigDef.convertToString``."""
    if isinstance(v, list):
        return ",".join(v)
    return _java_str(v)


def _num(x: float) -> str:
    return _java_str(float(x)) if isinstance(x, float) else str(x)


def metadata_version(value: str) -> str | None:
    """``MetadataVersion.fromVersionString(value).version()``, or None when Kafka would refuse it."""
    parts = value.split(".")
    while parts and not parts[-1]:
        parts.pop()  # String.split drops trailing empty strings
    n = 3 if value.startswith("0.") else 2
    return _IBP.get(value if n >= len(parts) else ".".join(parts[:n]))


def _check_special(name: str, kind: Special, v: Parsed) -> None:
    if kind is Special.NON_EMPTY and v == "":
        raise _invalid(name, v, "String must be non-empty")
    if kind is Special.POOL_SIZE and isinstance(v, int) and (v < -1 or v == 0):
        raise _invalid(name, v, "Value can be -1 or greater than 0")
    if kind is Special.GZIP_LEVEL and isinstance(v, int) and (v > 9 or (v < 1 and v != -1)):
        raise _invalid(name, v, "Value must be between 1 and 9 or equal to -1")
    if kind is Special.METADATA_VERSION and metadata_version(str(v)) is None:
        raise _invalid(name, v, f"Version {v} is not a valid version")
    if kind is Special.THROTTLED_REPLICAS and isinstance(v, list):
        items = [_java_trim(e) for e in v]
        if not (all(re.fullmatch(r"([0-9]+:[0-9]+)?", e) for e in items) or "".join(items) == "*"):
            raise _invalid(name, v, f"{name} must be the literal '*' or a list of replicas in the following format: "
                                    "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
    if kind in (Special.QUORUM_VOTERS, Special.QUORUM_BOOTSTRAP) and isinstance(v, list):
        for entry in v:
            _check_quorum_entry(name, kind, entry)


def _check_quorum_entry(name: str, kind: Special, entry: str) -> None:
    # QuorumConfig.parseVoterConnections / parseBootstrapServer; these messages carry no "Invalid value" prefix.
    voters = kind is Special.QUORUM_VOTERS
    form = "`{id}@{host}:{port}`." if voters else '"{host}:{port}"'
    address = entry
    if voters:
        parts = entry.split("@")
        while parts and not parts[-1]:
            parts.pop()
        if len(parts) != 2:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid configuration value for {name}. Each entry should be in the form {form}")
        if not (_INTEGER.fullmatch(parts[0]) and -(1 << 31) <= int(parts[0]) < (1 << 31)):
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Failed to parse voter ID as an integer from {parts[0]}")
        address = parts[1]
    match = _HOST_PORT.fullmatch(address)  # Utils.getHost / getPort / validHostPattern
    if match is None or not _HOST.fullmatch(match.group(1)):
        what = "host name"
    elif int(match.group(2)) >= 1 << 31:
        what = "host port"  # Kafka's Integer.parseInt would throw NumberFormatException here
    else:
        return
    where = f"entry {entry}" if voters else entry
    raise KafkaError(ErrorCode.INVALID_CONFIG, f"Failed to parse {what} from {where} for the configuration {name}. "
                                               f"Each entry should be in the form {form}")


def parse_value(spec: ConfigSpec, value: str, name: str | None = None) -> Parsed:
    """Parse ``value`` as ``spec`` and run its validator (``ConfigDef.parseValue``); return the parsed value."""
    name = name or spec.name
    v = _parse(name, spec.type, value)
    rule = spec.validator
    if isinstance(rule, Range) and isinstance(v, (int, float)) and not isinstance(v, bool):
        if rule.low is not None and v < rule.low:
            raise _invalid(name, v, f"Value must be at least {_num(rule.low)}")
        if rule.high is not None and v > rule.high:
            raise _invalid(name, v, f"Value must be no more than {_num(rule.high)}")
    elif isinstance(rule, OneOf):
        for item in v if isinstance(v, list) else [str(v)]:
            if rule.case_insensitive and item.upper() not in rule.values:
                raise _invalid(name, item, "String must be one of (case insensitive): " + ", ".join(rule.values))
            if not rule.case_insensitive and item not in rule.values:
                raise _invalid(name, item, "String must be one of: " + ", ".join(rule.values))
    elif isinstance(rule, Special):
        _check_special(name, rule, v)
    return v


def normalize(spec: ConfigSpec, value: str) -> str:
    """The value as Kafka stores and reports it once parsed (trimmed, ``1, 2`` -> ``1,2``, ``TRUE`` -> ``true``)."""
    try:
        return format_value(parse_value(spec, value))
    except KafkaError:
        return value


def parse_list(value: str) -> list[str]:
    """A LIST config's value as ``ConfigDef.parseType`` reads it: trimmed, split at commas (and the
    whitespace around them), empty entries kept."""
    s = _java_trim(value)
    return _LIST_SEPARATOR.split(s) if s else []
