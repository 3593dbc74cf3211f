"""Broker configuration from a Kafka-style ``.properties`` file."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from headwater.metadata.configs import check_broker_configs
from headwater.metadata.zk import SECURITY_PROTOCOLS
from headwater.protocol.errors import KafkaError

_LISTENER = re.compile(r"([A-Za-z][A-Za-z0-9_]*)://(\[[0-9A-Fa-f:.]+\]|[^:/\s]*):([0-9]+)")


class ConfigError(ValueError):
    """A broker configuration that cannot work; the message names the key."""




@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


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
    inter_broker_listener: str = "PLAINTEXT"
    max_request_partition_size_limit: int = 2000  # DescribeTopicPartitions' page size cap (Kafka's default)
    # replica.selector.class is Kafka's RackAwareReplicaSelector: consumers read from a replica in
    # their rack (KIP-392). Off by default, as in Kafka.
    rack_aware_reads: bool = False
    # Kafka's controlled shutdown settings (KafkaConfig's defaults).
    controlled_shutdown_enable: bool = True
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 5000

    @property
    def advertised_listener(self) -> Listener:
        """The endpoint other brokers reach this one on: the inter-broker listener's advertised address."""
        return next((lst for lst in self.advertised if lst.name == self.inter_broker_listener), self.advertised[0])

    def listener(self, name: str) -> Listener:
        return next(lst for lst in self.listeners if lst.name == name)


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


def protocol_map(props: dict[str, str]) -> dict[str, str]:
    """``listener.security.protocol.map`` (``CLIENT:SASL_SSL,REPLICATION:SSL``); without it, Kafka's
    default maps each security protocol name to itself."""
    value = props.get("listener.security.protocol.map")
    if value is None:
        return {p: p for p in SECURITY_PROTOCOLS}
    out: dict[str, str] = {}
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name:
            raise ConfigError(f"listener.security.protocol.map: {item!r} is not of the form NAME:PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"listener.security.protocol.map: {protocol!r} is not one of {', '.join(SECURITY_PROTOCOLS)}")
        out[name] = protocol
    return out


def _listeners(value: str, key: str, protocols: dict[str, str]) -> tuple[Listener, ...]:
    out: list[Listener] = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        # Not urlsplit: listener names have underscores (SASL_SSL), which URL schemes may not.
        m = _LISTENER.fullmatch(item)
        if m is None or int(m.group(3)) > 65535:
            raise ConfigError(f"{key}: {item!r} is not of the form NAME://host:port")
        name, host, port = m.group(1).upper(), m.group(2), int(m.group(3))
        host = host[1:-1] if host.startswith("[") else host
        if name not in protocols:
            raise ConfigError(f"{key}: listener {name} has no entry in listener.security.protocol.map")
        if any(lst.name == name for lst in out):
            raise ConfigError(f"{key}: listener name {name} appears more than once")
        out.append(Listener(name, host or "0.0.0.0", port, protocols[name]))
    if not out:
        raise ConfigError(f"{key} is empty")
    return tuple(out)


def _inter_broker_listener(props: dict[str, str], listeners: tuple[Listener, ...], protocols: dict[str, str]) -> str:
    """``inter.broker.listener.name``, or the listener named after ``security.inter.broker.protocol``
    (PLAINTEXT by default), as Kafka resolves them; the two keys together are an error."""
    name = props.get("inter.broker.listener.name")
    protocol = props.get("security.inter.broker.protocol")
    if name is not None and protocol is not None:
        raise ConfigError("inter.broker.listener.name and security.inter.broker.protocol cannot both be set")
    if name is None:
        protocol = (protocol or "PLAINTEXT").upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"security.inter.broker.protocol={protocol!r} is not one of {', '.join(SECURITY_PROTOCOLS)}")
        name = protocol
        if not any(lst.name == name for lst in listeners):
            # A single-listener broker (the old configs) talks to its peers on that listener.
            if len(listeners) == 1 and "security.inter.broker.protocol" not in props:
                return listeners[0].name
            raise ConfigError(f"security.inter.broker.protocol={protocol}: no listener named {protocol}")
    name = name.strip().upper()
    if not any(lst.name == name for lst in listeners):
        raise ConfigError(f"inter.broker.listener.name={name} is not one of the listeners")
    return name


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
    protocols = protocol_map(props)
    listeners = _listeners(props.get("listeners", "PLAINTEXT://127.0.0.1:9092"), "listeners", protocols)
    advertised = _listeners(props["advertised.listeners"], "advertised.listeners", protocols) \
        if "advertised.listeners" in props else listeners
    if len({lst.port for lst in listeners}) != len(listeners):
        raise ConfigError("listeners: each listener needs its own port")
    for adv in advertised:
        if not any(lst.name == adv.name for lst in listeners):
            raise ConfigError(f"advertised.listeners: {adv.name} is not one of the listeners")
    dirs = props.get("log.dirs") or props.get("log.dir")
    if not dirs:
        raise ConfigError("log.dirs is required")
    log_dirs = tuple(Path(d.strip()) for d in dirs.split(",") if d.strip())
    try:  # what KafkaConfig refuses at start: cordoned.log.dirs outside log.dirs, max.connections.per.ip*
        check_broker_configs(props, {}, {}, [str(d) for d in log_dirs])
    except KafkaError as exc:
        raise ConfigError(exc.message or str(exc)) from None
    return BrokerConfig(
        props=props,
        broker_id=broker_id,
        listeners=listeners,
        advertised=advertised,
        log_dirs=log_dirs,
        num_partitions=_int(props, "num.partitions", 1),
        default_replication_factor=_int(props, "default.replication.factor", 1),
        auto_create_topics=_bool(props, "auto.create.topics.enable", True),
        message_max_bytes=_int(props, "message.max.bytes", 1048588),
        socket_request_max_bytes=_int(props, "socket.request.max.bytes", 104857600),
        rack=props.get("broker.rack"),
        delete_topic_enable=_bool(props, "delete.topic.enable", True),
        inter_broker_listener=_inter_broker_listener(props, listeners, protocols),
        max_request_partition_size_limit=_int(props, "max.request.partition.size.limit", 2000),
        rack_aware_reads=_replica_selector(props),
        controlled_shutdown_enable=_bool(props, "controlled.shutdown.enable", True),
        controlled_shutdown_max_retries=_int(props, "controlled.shutdown.max.retries", 3),
        controlled_shutdown_retry_backoff_ms=_int(props, "controlled.shutdown.retry.backoff.ms", 5000),
    )


RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def _replica_selector(props: dict[str, str]) -> bool:
    value = props.get("replica.selector.class", "").strip()
    if value and value != RACK_AWARE_SELECTOR:
        raise ConfigError(f"replica.selector.class={value}: the selector available is {RACK_AWARE_SELECTOR}")
    return bool(value)


def load_config(path: Path, overrides: dict[str, str] | None = None) -> BrokerConfig:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    props = parse_properties(text)
    props.update(overrides or {})
    return broker_config(props)
