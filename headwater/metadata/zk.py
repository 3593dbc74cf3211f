"""Kafka's ZooKeeper znodes: paths and the exact bytes Kafka writes in each, encoded and decoded.

Pure functions, no I/O: the caller reads and writes ZooKeeper (kazoo) and passes bytes. Every
``encode_*`` returns UTF-8 JSON bytes in Kafka's format (compact, no spaces); every ``decode_*``
takes bytes (or str) and returns a value, or raises ``ValueError`` naming the znode and what is
wrong with it.

What the JSON does *not* hold, because ZooKeeper's stat holds it:

- the broker epoch is the ``czxid`` of ``/brokers/ids/<id>``;
- the partition epoch (``PartitionEpoch``/``ZkVersion`` in LeaderAndIsr and UpdateMetadata) is the
  ``version`` of ``.../partitions/<p>/state``;
- the controller's ``epochZkVersion`` (used to fence controller writes) is the ``version`` of
  ``/controller_epoch``.

API (path builders are on ``PATHS``, e.g. ``PATHS.partition_state("t", 0)``; ``PATHS.TOP_LEVEL``
lists the persistent paths every broker creates at start):

================================================  =================================================
znode                                             functions
================================================  =================================================
/controller (E)                                   encode_controller, decode_controller -> Controller
/controller_epoch                                 encode_controller_epoch, decode_controller_epoch
/brokers/ids/<id> (E)                             encode_broker, decode_broker -> BrokerRegistration
/brokers/topics/<t>                               encode_topic, decode_topic -> TopicAssignment
/brokers/topics/<t>/partitions/<p>/state          encode_partition_state, decode_partition_state
                                                  -> PartitionStateZNode
/admin/delete_topics/<t>                          no data (a marker)
/admin/reassign_partitions                        encode_reassign_partitions, decode_reassign_partitions
/admin/preferred_replica_election                 encode_preferred_replica_election, decode_...
/config/<type>/<name>                             encode_config, decode_config
/config/changes/config_change_<seq> (PS)          encode_config_change, decode_config_change
/cluster/id                                       encode_cluster_id, decode_cluster_id
/latest_producer_id_block                         encode_producer_id_block, decode_producer_id_block,
                                                  next_producer_id_block -> ProducerIdBlock
/feature                                          encode_feature, decode_feature -> FeatureZNode
================================================  =================================================

Versions written are those of Kafka 3.4+ with a current IBP: /controller v2, broker v5, topic v3,
partition state v1, config v1, config change v2. Decoders also accept the older versions Kafka
still reads. ``/isr_change_notification`` is created at start but carries nothing here: brokers
at IBP 2.7-IV2 or later report ISR changes with AlterPartition instead.

Topic ids are written in Kafka's form, URL-safe base64 without padding (``kafka_uuid``).
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn
from urllib.parse import quote, unquote_plus

# --- paths ---------------------------------------------------------------------------------------

CONFIG_ENTITY_TYPES = ("topics", "clients", "users", "brokers", "ips")
DEFAULT_ENTITY = "<default>"


class _Paths:
    CONTROLLER = "/controller"
    CONTROLLER_EPOCH = "/controller_epoch"
    BROKER_IDS = "/brokers/ids"
    BROKER_TOPICS = "/brokers/topics"
    BROKER_SEQID = "/brokers/seqid"
    DELETE_TOPICS = "/admin/delete_topics"
    REASSIGN_PARTITIONS = "/admin/reassign_partitions"
    REASSIGNMENT_QUEUE = "/admin/reassignment_queue"  # headwater's own: moves waiting for the per-broker limit
    SELF_HEALING = "/admin/self_healing"  # headwater's own: the healing moves in flight, for the next controller
    PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
    CONFIG_CHANGES = "/config/changes"
    CONFIG_CHANGE_PREFIX = "/config/changes/config_change_"  # create sequential with this path
    ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
    LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
    LOG_DIR_EVENT_PREFIX = "/log_dir_event_notification/log_dir_event_"  # create sequential with this path
    CLUSTER_ID = "/cluster/id"
    LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
    FEATURE = "/feature"

    # Created (persistent, no data) by every broker at start, in Kafka's order.
    TOP_LEVEL: tuple[str, ...] = (
        "/consumers",
        "/brokers/ids",
        "/brokers/topics",
        "/config/changes",
        "/admin/delete_topics",
        "/brokers/seqid",
        "/isr_change_notification",
        "/latest_producer_id_block",
        "/log_dir_event_notification",
        "/config/topics",
        "/config/clients",
        "/config/users",
        "/config/brokers",
        "/config/ips",
    )

    @staticmethod
    def broker(broker_id: int) -> str:
        return f"/brokers/ids/{broker_id}"

    @staticmethod
    def topic(topic: str) -> str:
        return f"/brokers/topics/{topic}"

    @staticmethod
    def partitions(topic: str) -> str:
        return f"/brokers/topics/{topic}/partitions"

    @staticmethod
    def partition(topic: str, partition: int) -> str:
        return f"/brokers/topics/{topic}/partitions/{partition}"

    @staticmethod
    def partition_state(topic: str, partition: int) -> str:
        return f"/brokers/topics/{topic}/partitions/{partition}/state"

    @staticmethod
    def delete_topic(topic: str) -> str:
        return f"/admin/delete_topics/{topic}"

    @staticmethod
    def config(entity_type: str, name: str) -> str:
        """``/config/<type>/<sanitized name>``; ``name`` may be ``"alice/clients/app1"`` for users."""
        if entity_type not in CONFIG_ENTITY_TYPES:
            raise ValueError(f"unknown config entity type {entity_type!r}")
        return f"/config/{entity_type}/{name}"


PATHS = _Paths()


# --- helpers ---------------------------------------------------------------------------------------


def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's string form of a Uuid: URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    if not isinstance(text, str) or len(text) != 22:
        raise ValueError(f"not a Kafka uuid: {text!r}")
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def sanitize(name: str) -> str:
    """Kafka's Sanitizer for user and client names in config paths (URL-encoding, ``%20`` for
    space, ``%2A`` for ``*``)."""
    return quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    return unquote_plus(name)


def _dumps(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode("utf-8")


class _Doc:
    """A parsed JSON object with typed getters whose errors name the znode."""

    def __init__(self, znode: str, data: bytes | str | None, *, allowed: Iterable[str] | None = None) -> None:
        self.znode = znode
        if data is None or len(data) == 0:
            self.fail("no data")
        try:
            doc = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            self.fail(f"not JSON ({exc})")
        if not isinstance(doc, dict):
            self.fail(f"expected a JSON object, got {type(doc).__name__}")
        self.doc: dict[str, Any] = doc
        if allowed is not None:
            unknown = sorted(set(doc) - set(allowed))
            if unknown:
                self.fail(f"unknown keys {unknown}")

    def fail(self, problem: str) -> NoReturn:
        raise ValueError(f"{self.znode}: {problem}")

    def has(self, key: str) -> bool:
        return key in self.doc

    def _get(self, key: str) -> Any:
        if key not in self.doc:
            self.fail(f"missing {key!r}")
        return self.doc[key]

    def get_int(self, key: str, default: int | None = None) -> int:
        if default is not None and key not in self.doc:
            return default
        return self.as_int(self._get(key), repr(key))

    def as_int(self, value: Any, what: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(f"{what} must be an integer, got {value!r}")
        return value

    def get_str(self, key: str) -> str:
        value = self._get(key)
        if not isinstance(value, str):
            self.fail(f"{key!r} must be a string, got {value!r}")
        return value

    def opt_str(self, key: str) -> str | None:
        value = self.doc.get(key)
        if value is not None and not isinstance(value, str):
            self.fail(f"{key!r} must be a string or null, got {value!r}")
        return value

    def int_string(self, key: str) -> int:
        """A long written as a JSON string ("1700000000000")."""
        value = self._get(key)
        if not isinstance(value, str) or not re.fullmatch(r"-?[0-9]+", value):
            self.fail(f"{key!r} must be a decimal string, got {value!r}")
        return int(value)

    def get_obj(self, key: str, default: dict[str, Any] | None = None) -> dict[str, Any]:
        if default is not None and key not in self.doc:
            return default
        value = self._get(key)
        if not isinstance(value, dict):
            self.fail(f"{key!r} must be an object, got {value!r}")
        return value

    def get_list(self, key: str) -> list[Any]:
        value = self._get(key)
        if not isinstance(value, list):
            self.fail(f"{key!r} must be an array, got {value!r}")
        return value

    def ints(self, value: Any, what: str) -> tuple[int, ...]:
        if not isinstance(value, list):
            self.fail(f"{what} must be an array of integers, got {value!r}")
        if all(type(v) is int for v in value):  # the common case, checked in one pass (no bools)
            return tuple(value)
        return tuple(self.as_int(v, what) for v in value)

    def version(self, *accepted: int) -> int:
        v = self.get_int("version")
        if v not in accepted:
            self.fail(f"unsupported version {v} (expected {' or '.join(map(str, accepted))})")
        return v


# --- /controller and /controller_epoch -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Controller:
    broker_id: int
    timestamp_ms: int | None
    kraft_controller_epoch: int = -1  # -1: a ZooKeeper controller; >= 0: KRaft migration


def encode_controller(broker_id: int, timestamp_ms: int, kraft_controller_epoch: int = -1) -> bytes:
    """``/controller`` v2 (Kafka 3.4+): ``{"version":2,"brokerid":1,"timestamp":"<ms>","kraftControllerEpoch":-1}``."""
    return _dumps({"version": 2, "brokerid": broker_id, "timestamp": str(timestamp_ms),
                   "kraftControllerEpoch": kraft_controller_epoch})


def decode_controller(data: bytes | str) -> Controller:
    """v1 or v2. Like Kafka, only ``brokerid`` is required."""
    d = _Doc(PATHS.CONTROLLER, data)
    ts = d.int_string("timestamp") if d.has("timestamp") else None
    return Controller(d.get_int("brokerid"), ts, d.get_int("kraftControllerEpoch", -1))


def encode_controller_epoch(epoch: int) -> bytes:
    """``/controller_epoch``: the epoch as a decimal string, no JSON."""
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes | str) -> int:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes | bytearray) else data
    if not re.fullmatch(r"-?[0-9]+", text.strip()):
        raise ValueError(f"{PATHS.CONTROLLER_EPOCH}: not a decimal integer: {text!r}")
    return int(text)


# --- /brokers/ids/<id> -----------------------------------------------------------------------------

# Kafka's SecurityProtocol names; a listener without an entry in the map must be named after one.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Their ids on the wire (UpdateMetadata endpoints), Kafka's SecurityProtocol.id.
SECURITY_PROTOCOL_IDS = {name: i for i, name in enumerate(SECURITY_PROTOCOLS)}
_ENDPOINT = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


@dataclass(frozen=True, slots=True)
class Endpoint:
    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    endpoints: tuple[Endpoint, ...]
    timestamp_ms: int
    rack: str | None = None
    jmx_port: int = -1
    features: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # name -> (min, max)
    version: int = 5
    # KIP-1066 (Kafka 4.3) in ZooKeeper mode, headwater's fields: the broker's log dirs and the cordoned
    # ones, written only while one is cordoned (KRaft carries them in BrokerRegistration/Heartbeat).
    log_dirs: tuple[str, ...] = ()
    cordoned_log_dirs: tuple[str, ...] = ()

    @property
    def cordoned(self) -> bool:
        """Every log dir cordoned: no new replicas here (Kafka's ``BrokerRegistration.hasUncordonedDirs`` false)."""
        return bool(self.log_dirs) and set(self.log_dirs) <= set(self.cordoned_log_dirs)

    def endpoint(self, listener: str) -> Endpoint | None:
        return next((e for e in self.endpoints if e.listener == listener), None)


def encode_broker(reg: BrokerRegistration) -> bytes:
    """``/brokers/ids/<id>`` v5. ``host``/``port`` are those of the first PLAINTEXT endpoint (null
    and -1 when there is none); ``rack`` only when set; ``features`` ``{}`` for a ZooKeeper broker."""
    plaintext = next((e for e in reg.endpoints if e.security_protocol == "PLAINTEXT"), None)
    doc: dict[str, Any] = {
        "features": {name: {"min_version": lo, "max_version": hi} for name, (lo, hi) in sorted(reg.features.items())},
        "listener_security_protocol_map": {e.listener: e.security_protocol for e in reg.endpoints},
        "endpoints": [e.connection_string() for e in reg.endpoints],
        "jmx_port": reg.jmx_port,
        "port": plaintext.port if plaintext else -1,
        "host": plaintext.host if plaintext else None,
        "version": 5,
        "timestamp": str(reg.timestamp_ms),
    }
    if reg.rack is not None:
        doc["rack"] = reg.rack
    if reg.cordoned_log_dirs:  # Kafka's BrokerIdZNode.decode ignores fields it does not know
        doc["log_dirs"] = list(reg.log_dirs)
        doc["cordoned_log_dirs"] = list(reg.cordoned_log_dirs)
    return _dumps(doc)


def decode_broker(broker_id: int, data: bytes | str) -> BrokerRegistration:
    """Versions 1-5. v1 has one PLAINTEXT endpoint from host/port; v2+ parse ``endpoints`` with the
    listener map (or, when absent, listener names that are security protocol names)."""
    d = _Doc(PATHS.broker(broker_id), data)
    version = d.get_int("version")
    if version < 1:
        d.fail(f"unsupported version {version}")
    jmx_port = d.get_int("jmx_port")
    if version == 1:
        endpoints: tuple[Endpoint, ...] = (Endpoint("PLAINTEXT", d.get_str("host"), d.get_int("port"), "PLAINTEXT"),)
    else:
        protocol_map = {k: v for k, v in d.get_obj("listener_security_protocol_map", {}).items()}
        for listener, protocol in protocol_map.items():
            if protocol not in SECURITY_PROTOCOLS:
                d.fail(f"listener {listener!r} has unknown security protocol {protocol!r}")
        eps = []
        for text in d.get_list("endpoints"):
            m = _ENDPOINT.match(text) if isinstance(text, str) else None
            if m is None:
                d.fail(f"malformed endpoint {text!r}")
            listener = m.group(1)
            protocol = protocol_map.get(listener) if protocol_map else listener
            if protocol not in SECURITY_PROTOCOLS:
                d.fail(f"no security protocol for listener {listener!r}")
            eps.append(Endpoint(listener, m.group(2), int(m.group(3)), protocol))
        endpoints = tuple(eps)
    features: dict[str, tuple[int, int]] = {}
    for name, rng in d.get_obj("features", {}).items():
        if not isinstance(rng, dict):
            d.fail(f"feature {name!r} must be an object")
        features[name] = (d.as_int(rng.get("min_version"), f"feature {name!r} min_version"),
                          d.as_int(rng.get("max_version"), f"feature {name!r} max_version"))
    timestamp = d.int_string("timestamp") if d.has("timestamp") else 0
    dirs = [tuple(d.get_list(key)) if d.has(key) else () for key in ("log_dirs", "cordoned_log_dirs")]
    for key, values in zip(("log_dirs", "cordoned_log_dirs"), dirs, strict=True):
        if not all(isinstance(v, str) for v in values):
            d.fail(f"{key} must be a list of strings")
    return BrokerRegistration(broker_id, endpoints, timestamp, d.opt_str("rack"), jmx_port, features, version,
                              dirs[0], dirs[1])


# --- /brokers/topics/<t> ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    partitions: Mapping[int, tuple[int, ...]]
    topic_id: uuid.UUID | None = None
    adding_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)


def topic_json(assignment: TopicAssignment) -> dict[str, Any]:
    """The ``/brokers/topics/<t>`` document as a dict (v3). ``adding_replicas`` and
    ``removing_replicas`` are always present, listing only partitions with a non-empty list;
    ``topic_id`` is left out when the topic has none."""
    def by_partition(m: Mapping[int, Iterable[int]]) -> dict[str, list[int]]:
        return {str(p): list(r) for p, r in sorted(m.items()) if r}

    doc: dict[str, Any] = {
        "version": 3,
        "partitions": {str(p): list(r) for p, r in sorted(assignment.partitions.items())},
        "adding_replicas": by_partition(assignment.adding_replicas),
        "removing_replicas": by_partition(assignment.removing_replicas),
    }
    if assignment.topic_id is not None:
        doc["topic_id"] = kafka_uuid(assignment.topic_id)
    return doc


def encode_topic(assignment: TopicAssignment) -> bytes:
    return _dumps(topic_json(assignment))


def decode_topic(topic: str, data: bytes | str) -> TopicAssignment:
    """Versions 1-3; missing ``adding_replicas``/``removing_replicas`` mean none."""
    d = _Doc(PATHS.topic(topic), data)
    d.version(1, 2, 3)

    def by_partition(key: str) -> dict[int, tuple[int, ...]]:
        out: dict[int, tuple[int, ...]] = {}
        for p, replicas in d.get_obj(key, {}).items():
            if not (p.isascii() and p.isdigit()):
                d.fail(f"{key!r} has a non-numeric partition {p!r}")
            out[int(p)] = d.ints(replicas, f"{key!r}[{p}]")
        return out

    partitions = by_partition("partitions") if d.has("partitions") else d.fail("missing 'partitions'")
    adding = {p: r for p, r in by_partition("adding_replicas").items() if r}
    removing = {p: r for p, r in by_partition("removing_replicas").items() if r}
    topic_id = None
    if d.opt_str("topic_id") is not None:
        try:
            topic_id = parse_kafka_uuid(d.get_str("topic_id"))
        except ValueError as exc:
            d.fail(f"'topic_id': {exc}")
    return TopicAssignment(partitions, topic_id, adding, removing)


# --- /brokers/topics/<t>/partitions/<p>/state ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionStateZNode:
    leader: int  # -1: no leader
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = 0  # 1: recovering from an unclean election


def partition_state_json(state: PartitionStateZNode) -> dict[str, Any]:
    """The state document (v1); ``leader_recovery_state`` only when it is 1 (RECOVERING)."""
    doc: dict[str, Any] = {
        "controller_epoch": state.controller_epoch,
        "leader": state.leader,
        "version": 1,
        "leader_epoch": state.leader_epoch,
        "isr": list(state.isr),
    }
    if state.leader_recovery_state != 0:
        doc["leader_recovery_state"] = state.leader_recovery_state
    return doc


def encode_partition_state(state: PartitionStateZNode) -> bytes:
    """The bytes of ``_dumps(partition_state_json(state))``, formatted directly: a controller writes
    one per partition it changes (10,000 at a failover), and ``json.dumps`` was most of that cost."""
    isr = ",".join(map(str, map(int, state.isr)))
    recovery = (f',"leader_recovery_state":{int(state.leader_recovery_state)}'
                if state.leader_recovery_state != 0 else "")
    return (f'{{"controller_epoch":{int(state.controller_epoch)},"leader":{int(state.leader)},"version":1,'
            f'"leader_epoch":{int(state.leader_epoch)},"isr":[{isr}]{recovery}}}').encode()


_CANONICAL_STATE = re.compile(
    rb'\{"controller_epoch":(-?\d+),"leader":(-?\d+),"version":1,"leader_epoch":(-?\d+),"isr":\[((?:-?\d+(?:,-?\d+)*)?)\]\}')


def decode_partition_state(topic: str, partition: int, data: bytes | str) -> PartitionStateZNode:
    # The exact form encode_partition_state writes (and Kafka too) is read with one regex match;
    # a new controller reads 10,000 of these before it can serve. Any other form takes the checked path.
    m = _CANONICAL_STATE.fullmatch(data.encode() if isinstance(data, str) else data)
    if m is not None:
        isr = tuple(int(b) for b in m[4].split(b",")) if m[4] else ()
        return PartitionStateZNode(int(m[2]), int(m[3]), isr, int(m[1]), 0)
    d = _Doc(PATHS.partition_state(topic, partition), data)
    d.version(1)
    lrs = d.get_int("leader_recovery_state", 0)
    if lrs not in (0, 1):
        d.fail(f"'leader_recovery_state' must be 0 or 1, got {lrs}")
    return PartitionStateZNode(d.get_int("leader"), d.get_int("leader_epoch"), d.ints(d.get_list("isr"), "'isr'"),
                               d.get_int("controller_epoch"), lrs)


# --- /admin ----------------------------------------------------------------------------------------


def encode_reassign_partitions(reassignment: Mapping[tuple[str, int], Iterable[int]]) -> bytes:
    """``/admin/reassign_partitions`` v1: ``{"version":1,"partitions":[{"topic":..,"partition":..,"replicas":[..]}]}``."""
    return _dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(reassignment.items())
    ]})


def decode_reassign_partitions(data: bytes | str) -> dict[tuple[str, int], tuple[int, ...]]:
    """Strict, as Kafka binds it to a typed class: any unknown key makes the whole document invalid
    (Kafka's controller then logs a warning and treats the reassignment as empty)."""
    d = _Doc(PATHS.REASSIGN_PARTITIONS, data, allowed=("version", "partitions"))
    d.version(1)
    out: dict[tuple[str, int], tuple[int, ...]] = {}
    for i, entry in enumerate(d.get_list("partitions")):
        if not isinstance(entry, dict):
            d.fail(f"partitions[{i}] must be an object")
        unknown = sorted(set(entry) - {"topic", "partition", "replicas"})
        if unknown:
            d.fail(f"partitions[{i}] has unknown keys {unknown}")
        topic, partition = entry.get("topic"), entry.get("partition")
        if not isinstance(topic, str):
            d.fail(f"partitions[{i}].topic must be a string, got {topic!r}")
        part = d.as_int(partition, f"partitions[{i}].partition")
        out[(topic, part)] = d.ints(entry.get("replicas"), f"partitions[{i}].replicas")
    return out


def encode_preferred_replica_election(partitions: Iterable[tuple[str, int]]) -> bytes:
    return _dumps({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in sorted(partitions)]})


def decode_preferred_replica_election(data: bytes | str) -> set[tuple[str, int]]:
    d = _Doc(PATHS.PREFERRED_REPLICA_ELECTION, data)
    out: set[tuple[str, int]] = set()
    for i, entry in enumerate(d.get_list("partitions")):
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str):
            d.fail(f"partitions[{i}] must be an object with a string 'topic'")
        out.add((entry["topic"], d.as_int(entry.get("partition"), f"partitions[{i}].partition")))
    return out


# --- configs ---------------------------------------------------------------------------------------


def encode_config(config: Mapping[str, str]) -> bytes:
    """``/config/<type>/<name>``: ``{"version":1,"config":{"key":"value"}}``; values are strings."""
    for k, v in config.items():
        if not isinstance(v, str):
            raise ValueError(f"config {k!r}: value must be a string, got {v!r}")
    return _dumps({"version": 1, "config": dict(sorted(config.items()))})


def decode_config(entity_type: str, name: str, data: bytes | str) -> dict[str, str]:
    d = _Doc(PATHS.config(entity_type, name), data)
    d.version(1)
    config = d.get_obj("config")
    for k, v in config.items():
        if not isinstance(v, str):
            d.fail(f"config {k!r} must be a string, got {v!r}")
    return dict(config)


LOG_DIR_FAILURE_EVENT = 1  # Kafka's LogDirEventNotification event type for a failed dir


def encode_log_dir_event(broker_id: int) -> bytes:
    """A ``log_dir_event_`` notification: ``{"version":1,"broker":<id>,"event":1}`` (a dir failed)."""
    return _dumps({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes) -> int | None:
    """The broker a failure notification names, or None for anything else (unknown event, bad JSON)."""
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("event") != LOG_DIR_FAILURE_EVENT:
        return None
    broker = doc.get("broker")
    return broker if isinstance(broker, int) and not isinstance(broker, bool) else None


def encode_config_change(entity_path: str) -> bytes:
    """A ``config_change_`` notification, v2: ``{"version":2,"entity_path":"topics/foo"}``. The
    path is ``<type>/<sanitized name>``, e.g. ``users/alice/clients/app1`` or ``brokers/<default>``."""
    entity_type = entity_path.split("/", 1)[0]
    if entity_type not in CONFIG_ENTITY_TYPES or "/" not in entity_path:
        raise ValueError(f"bad config entity path {entity_path!r}")
    return _dumps({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes | str, znode: str = PATHS.CONFIG_CHANGE_PREFIX) -> str:
    """The entity path of a notification: v2 ``entity_path``, or the legacy v1
    ``entity_type``/``entity_name`` pair (topics or clients only) joined with ``/``."""
    d = _Doc(znode, data)
    version = d.version(1, 2)
    if version == 1:
        entity_type = d.get_str("entity_type")
        if entity_type not in ("topics", "clients"):
            d.fail(f"version 1 supports topics and clients, not {entity_type!r}")
        path = f"{entity_type}/{d.get_str('entity_name')}"
    else:
        path = d.get_str("entity_path")
    entity_type = path.split("/", 1)[0]
    if entity_type not in CONFIG_ENTITY_TYPES or "/" not in path:
        d.fail(f"bad entity path {path!r}")
    return path


# --- cluster-wide singletons -----------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    """``/cluster/id``: ``{"version":"1","id":"<22-char base64>"}`` (the version is a string)."""
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | str) -> str:
    return _Doc(PATHS.CLUSTER_ID, data).get_str("id")


PRODUCER_ID_BLOCK_SIZE = 1000


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    broker: int
    block_start: int
    block_end: int  # inclusive


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    """``/latest_producer_id_block`` v1; start and end are JSON strings."""
    return _dumps({"version": 1, "broker": block.broker, "block_start": str(block.block_start),
                   "block_end": str(block.block_end)})


def decode_producer_id_block(data: bytes | str | None) -> ProducerIdBlock | None:
    """None for the empty node a broker creates at start (no block allocated yet)."""
    if data is None or len(data) == 0:
        return None
    d = _Doc(PATHS.LATEST_PRODUCER_ID_BLOCK, data)
    d.version(1)
    return ProducerIdBlock(d.get_int("broker"), d.int_string("block_start"), d.int_string("block_end"))


def next_producer_id_block(previous: ProducerIdBlock | None, broker: int) -> ProducerIdBlock:
    """The block after ``previous`` (from 0 when there is none), 1000 ids long. Write it with a
    setData conditional on the version read, and retry on a conflict."""
    start = 0 if previous is None else previous.block_end + 1
    return ProducerIdBlock(broker, start, start + PRODUCER_ID_BLOCK_SIZE - 1)


@dataclass(frozen=True, slots=True)
class FeatureZNode:
    enabled: bool
    features: Mapping[str, int]  # name -> max_version_level


def encode_feature(node: FeatureZNode) -> bytes:
    """``/feature`` v2; a ZooKeeper-mode 3.x cluster finalizes nothing: ``{"version":2,"status":1,"features":{}}``."""
    return _dumps({"version": 2, "status": 1 if node.enabled else 0,
                   "features": {k: {"max_version_level": v} for k, v in sorted(node.features.items())}})


def decode_feature(data: bytes | str) -> FeatureZNode:
    d = _Doc(PATHS.FEATURE, data)
    d.version(1, 2)
    status = d.get_int("status")
    if status not in (0, 1):
        d.fail(f"'status' must be 0 or 1, got {status}")
    features = {}
    for name, levels in d.get_obj("features").items():
        if not isinstance(levels, dict):
            d.fail(f"feature {name!r} must be an object")
        features[name] = d.as_int(levels.get("max_version_level"), f"feature {name!r} max_version_level")
    return FeatureZNode(status == 1, features)
