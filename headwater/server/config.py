"""Broker configuration from a Kafka-style ``.properties`` file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit


class ConfigError(ValueError):
    """A broker configuration that cannot work; the message names the key."""


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str
    port: int


@dataclass(frozen=True)
class BrokerConfig:
    props: dict[str, str]
    broker_id: int
    listeners: tuple[Listener, ...]
    advertised: tuple[Listener, ...]
    log_dirs: tuple[Path, ...]
    num_partitions: int
    default_replication_factor: int
    auto_create_topics: bool
    message_max_bytes: int
    socket_request_max_bytes: int
    rack: str | None
    delete_topic_enable: bool

    @property
    def advertised_listener(self) -> Listener:
        return self.advertised[0]


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties, the subset people write: ``key=value`` or ``key: value``, ``#``/``!`` comments."""
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in line:
                key, value = line.split(sep, 1)
                props[key.strip()] = value.strip()
                break
        else:
            raise ConfigError(f"cannot parse line {raw!r}: expected key=value")
    return props


def _listeners(value: str, key: str) -> tuple[Listener, ...]:
    out = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        parts = urlsplit(item)
        if not parts.scheme or parts.port is None:
            raise ConfigError(f"{key}: {item!r} is not of the form NAME://host:port")
        out.append(Listener(parts.scheme.upper(), parts.hostname or "0.0.0.0", parts.port))
    if not out:
        raise ConfigError(f"{key} is empty")
    return tuple(out)


def _int(props: dict[str, str], key: str, default: int) -> int:
    try:
        return int(props.get(key, default))
    except ValueError:
        raise ConfigError(f"{key}={props[key]!r} is not an integer") from None


def _bool(props: dict[str, str], key: str, default: bool) -> bool:
    value = props.get(key, str(default).lower()).lower()
    if value not in ("true", "false"):
        raise ConfigError(f"{key}={value!r} is not true or false")
    return value == "true"


def broker_config(props: dict[str, str]) -> BrokerConfig:
    if "broker.id" not in props and "node.id" not in props:
        raise ConfigError("broker.id is required")
    broker_id = _int(props, "broker.id" if "broker.id" in props else "node.id", 0)
    if broker_id < 0:
        raise ConfigError("broker.id must be >= 0")
    listeners = _listeners(props.get("listeners", "PLAINTEXT://127.0.0.1:9092"), "listeners")
    advertised = _listeners(props["advertised.listeners"], "advertised.listeners") if "advertised.listeners" in props else listeners
    dirs = props.get("log.dirs") or props.get("log.dir")
    if not dirs:
        raise ConfigError("log.dirs is required")
    return BrokerConfig(
        props=props,
        broker_id=broker_id,
        listeners=listeners,
        advertised=advertised,
        log_dirs=tuple(Path(d.strip()) for d in dirs.split(",") if d.strip()),
        num_partitions=_int(props, "num.partitions", 1),
        default_replication_factor=_int(props, "default.replication.factor", 1),
        auto_create_topics=_bool(props, "auto.create.topics.enable", True),
        message_max_bytes=_int(props, "message.max.bytes", 1048588),
        socket_request_max_bytes=_int(props, "socket.request.max.bytes", 104857600),
        rack=props.get("broker.rack"),
        delete_topic_enable=_bool(props, "delete.topic.enable", True),
    )


def load_config(path: Path, overrides: dict[str, str] | None = None) -> BrokerConfig:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    props = parse_properties(text)
    props.update(overrides or {})
    return broker_config(props)
