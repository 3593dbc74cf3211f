"""``headwater reassign``: a drop-in for kafka-reassign-partitions.sh over the Kafka protocol.

Actions, JSON formats, messages and exit codes are Kafka's (scripts parse them): ``--generate``
proposes a plan with Kafka's placement, ``--execute`` starts one (printing the current assignment
for rollback, setting throttles), ``--verify`` reports progress and clears throttles when nothing
is moving any more, ``--cancel`` reverts, ``--list`` shows what is moving.
"""

from __future__ import annotations

import json
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    DescribeLogDirsRequest,
    IncrementalAlterConfigsRequest,
    ListPartitionReassignmentsRequest,
)

from headwater.admin.client import AdminClient, AdminError
from headwater.admin.jopt import JavaInt, JoptOption, KafkaCommand, given_options, usage_error
from headwater.admin.options import connect
from headwater.admin.replica_log_dirs import LogDirMoves, parse_log_dirs
from headwater.placement import assign_replicas
from headwater.protocol.config_resources import OP_DELETE, OP_SET, RESOURCE_BROKER, RESOURCE_TOPIC
from headwater.protocol.error_messages import exception_class, exception_message, exception_text
from headwater.protocol.errors import ErrorCode, KafkaError

CLIENT_ID = "reassign-partitions-tool"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
BROKER_THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                    "replica.alter.log.dirs.io.max.bytes.per.second")
HELP = "This tool helps to move topic partitions between replicas."
METADATA_SETTLE_S = 10.0  # how long --watch waits for brokers' metadata to catch up with the controller


class ToolError(Exception):
    """A failure Kafka's tool reports as ``Error: <message>`` on stdout, exit 1 (any exception but a
    TerseException reaching its ``main``)."""


class TerseError(ToolError):
    """A failure whose message alone is shown on stdout, exit 1 (Kafka's TerseException)."""


TopicPartition = tuple[str, int]

# Kafka reads the JSON files with Jackson and prints Jackson's exception; these are its words.
_JSON_PARSE_EXCEPTION = "com.fasterxml.jackson.core.JsonParseException"
_JSON_SOURCE = "[Source: REDACTED (`StreamReadFeature.INCLUDE_SOURCE_IN_LOCATION` disabled)"
_UNKNOWN_TOPIC_OR_PARTITION = exception_class(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


@dataclass
class Ongoing:
    replicas: list[int]
    adding: list[int]
    removing: list[int]

    @property
    def queued(self) -> bool:
        """Waiting for reassignment.max.concurrent.moves.per.broker: headwater's controller lists a
        queued partition with its current replicas and no adding or removing replicas, which an
        ongoing reassignment never has."""
        return not self.adding and not self.removing


def _tp(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def _java_list(items: Iterable[object]) -> str:
    """A Java collection's ``toString()``: ``[a, b]``, strings unquoted."""
    return "[" + ", ".join(str(i) for i in items) + "]"


def _json_text(value: object) -> str:
    """A JSON node as Jackson prints it in its messages (compact)."""
    return json.dumps(value, separators=(",", ":"))


def format_reassignment_json(assignment: Mapping[TopicPartition, list[int]]) -> str:
    """Kafka's compact form: keys in order, partitions sorted by topic then partition, log_dirs "any"."""
    partitions = [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())
    ]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


def _parse_json(text: str) -> Any:
    """``Json.tryParseFull``: Jackson's exception for what does not parse, as Kafka prints it."""
    if not text:
        raise ToolError(f"{_JSON_PARSE_EXCEPTION}: The input string shouldn't be empty\n"
                        " at [Source: UNKNOWN; byte offset: #UNKNOWN]")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        # Jackson's class and location lines; the reason is in Python's words, not Jackson's.
        raise ToolError(f"{_JSON_PARSE_EXCEPTION}: {exc.msg}\n at {_JSON_SOURCE}; line: {exc.lineno}, "
                        f"column: {exc.colno}]") from None


def _object(node: Any) -> dict[str, Any]:
    if not isinstance(node, dict):
        raise ToolError(f"Expected JSON object, received {_json_text(node)}")
    return node


def _field(obj: dict[str, Any], name: str) -> Any:
    if name not in obj:
        raise ToolError(f"No such field exists: `{name}`")
    return obj[name]


def _int(node: Any) -> int:
    # Jackson's isInt(): a JSON integer that fits in 32 bits.
    if isinstance(node, bool) or not isinstance(node, int) or not -(1 << 31) <= node < (1 << 31):
        raise ToolError(f"Expected `Integer` value, received {_json_text(node)}")
    return node


def _str(node: Any) -> str:
    if not isinstance(node, str):
        raise ToolError(f"Expected `String` value, received {_json_text(node)}")
    return node


def _list(node: Any) -> list[Any]:
    if not isinstance(node, list):
        raise ToolError(f"Expected `JSON array` value, received {_json_text(node)}")
    return node


def _version(doc: dict[str, Any]) -> int:
    version = _int(doc["version"]) if "version" in doc else 1
    if version != 1:
        raise ToolError(f"Not supported version field value {version}")
    return version


def parse_reassignment_data(text: str) -> list[tuple[TopicPartition, list[int]]]:
    """Kafka's ``parsePartitionReassignmentData``: every entry of the file in order, duplicates kept
    (``--verify`` and ``--cancel`` read the file this way; ``--execute`` checks more)."""
    doc = _object(_parse_json(text))
    _version(doc)
    partitions = doc.get("partitions")
    if partitions is None:
        return []  # no "partitions" field is an empty plan
    if not isinstance(partitions, list):
        raise ToolError(f"Expected JSON array, received {_json_text(partitions)}")
    out: list[tuple[TopicPartition, list[int]]] = []
    for node in partitions:
        entry = _object(node)
        topic = _str(_field(entry, "topic"))
        partition = _int(_field(entry, "partition"))
        replicas = [_int(r) for r in _list(_field(entry, "replicas"))]
        log_dirs = entry.get("log_dirs")
        if log_dirs is not None:
            log_dirs = [_str(d) for d in _list(log_dirs)]
            if len(log_dirs) != len(replicas):
                raise ToolError(f"Size of replicas list {_java_list(replicas)} is different from size of log dirs "
                                f"list {_java_list(log_dirs)} for partition {topic}-{partition}")
        out.append(((topic, partition), replicas))
    return out


def parse_reassignment_json(text: str) -> dict[TopicPartition, list[int]]:
    """The plan ``--execute`` runs: Kafka's ``parseExecuteAssignmentArgs`` checks, in its order."""
    entries = parse_reassignment_data(text)
    if not entries:
        raise ToolError("Partition reassignment list cannot be empty")
    if any(not replicas for _tp_, replicas in entries):
        raise ToolError("Partition replica list cannot be empty")
    counts = Counter(tp for tp, _r in entries)
    duplicates = sorted(tp for tp, n in counts.items() if n > 1)
    if duplicates:
        raise ToolError(f"Partition reassignment contains duplicate topic partitions: {','.join(map(_tp, duplicates))}")
    dup_replicas = [f"{_tp(tp)} contains multiple entries for {','.join(str(b) for b in sorted({x for x in r if r.count(x) > 1}))}"
                    for tp, r in entries if len(set(r)) != len(r)]
    if dup_replicas:
        raise ToolError(f"Partition replica lists may not contain duplicate entries: {'. '.join(dup_replicas)}")
    return dict(entries)


def parse_topics_json(text: str) -> list[str]:
    """Kafka's ``parseTopicsData``: the topics of ``--topics-to-move-json-file``, duplicates kept."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        raise ToolError("The input string is not a valid JSON") from None
    doc = _object(doc)
    _version(doc)
    return [_str(_field(_object(entry), "topic")) for entry in _list(doc.get("topics", []))]


def parse_broker_list(text: str) -> list[int]:
    """``--broker-list``: Java's ``Integer.parseInt`` of each comma-separated entry."""
    parts = text.split(",")
    while parts and not parts[-1]:
        parts.pop()  # Java's split drops trailing empty strings
    brokers = []
    for part in parts:
        if not re.fullmatch(r"[+-]?[0-9]+", part) or not -(1 << 31) <= int(part) < (1 << 31):
            raise ToolError(f'For input string: "{part}"')
        brokers.append(int(part))
    return brokers


# --- cluster access -------------------------------------------------------------------------------


class Cluster:
    def __init__(self, client: AdminClient) -> None:
        self.client = client

    def assignments(self, topics: Iterable[str]) -> dict[TopicPartition, list[int]]:
        wanted = sorted(set(topics))
        meta = self.client.refresh(wanted)
        out: dict[TopicPartition, list[int]] = {}
        for t in meta.topics:
            if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                # Kafka's describeTopics wraps this one in an ExecutionException: the class is printed too.
                raise ToolError(f"{_UNKNOWN_TOPIC_OR_PARTITION}: Topic {t.name} not found.")
            for p in t.partitions:
                out[(t.name, p.partition_index)] = list(p.replica_nodes)
        return out

    def brokers(self) -> dict[int, str | None]:
        self.client.refresh([])
        return {n.node_id: n.rack for n in self.client.nodes.values()}

    def ongoing(self) -> dict[TopicPartition, Ongoing]:
        resp = self.client.send_to_controller(ListPartitionReassignmentsRequest, dict(timeout_ms=30000, topics=None),
                                              lambda r: [r.error_code])
        if resp.error_code:
            raise ToolError(exception_text(resp.error_code, resp.error_message))
        return {(t.name, p.partition_index): Ongoing(list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
                for t in resp.topics for p in t.partitions}

    def alter(self, plan: Mapping[TopicPartition, list[int] | None]) -> dict[TopicPartition, tuple[int, str | None]]:
        T = AlterPartitionReassignmentsRequest.ReassignableTopic
        P = T.ReassignablePartition
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), replicas in sorted(plan.items()):
            by_topic.setdefault(topic, []).append(P(partition_index=partition, replicas=replicas))
        resp = self.client.send_to_controller(
            AlterPartitionReassignmentsRequest,
            dict(timeout_ms=30000, allow_replication_factor_change=True,
                 topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()]),
            lambda r: [r.error_code])
        if resp.error_code:
            return dict.fromkeys(plan, (resp.error_code, resp.error_message))
        return {(t.name, p.partition_index): (p.error_code, p.error_message) for t in resp.responses for p in t.partitions}

    def alter_configs(self, resource_type: int, name: str, ops: list[tuple[str, int, str | None]]) -> None:
        A = IncrementalAlterConfigsRequest.AlterConfigsResource
        C = A.AlterableConfig
        node = int(name) if resource_type == RESOURCE_BROKER else None
        resp = self.client.send(IncrementalAlterConfigsRequest, dict(
            resources=[A(resource_type=resource_type, resource_name=name,
                         configs=[C(name=k, config_operation=op, value=v) for k, op, v in ops])],
            validate_only=False), node_id=node)
        result = resp.responses[0]
        if result.error_code:
            raise ToolError(exception_text(result.error_code, result.error_message))


# --- actions ----------------------------------------------------------------------------------------


def generate(cluster: Cluster, topics_json: str, broker_list: str, disable_rack_aware: bool,
             rng: random.Random | None = None) -> str:
    brokers = parse_broker_list(broker_list)
    dups = sorted({b for b in brokers if brokers.count(b) > 1})
    if dups:
        raise ToolError(f"Broker list contains duplicate entries: {_java_list(dups)}")
    topics = parse_topics_json(topics_json)
    dup_topics = sorted({t for t in topics if topics.count(t) > 1})
    if dup_topics:
        raise ToolError(f"List of topics to reassign contains duplicate entries: {_java_list(dup_topics)}")
    current = cluster.assignments(topics)
    racks_all = cluster.brokers()
    chosen = [b for b in brokers if b in racks_all]  # unknown ids are dropped, as Kafka does
    racks: dict[int, str | None] = {} if disable_rack_aware else {b: racks_all[b] for b in chosen}
    if racks and any(r is not None for r in racks.values()) and any(r is None for r in racks.values()):
        raise ToolError("Not all brokers have rack information. Add --disable-rack-aware in command line to make "
                        "replica assignment without rack information.")
    rng = rng or random.Random()
    proposed: dict[TopicPartition, list[int]] = {}
    for topic in topics:
        parts = sorted(p for (t, p) in current if t == topic)
        rf = len(current[(topic, parts[0])]) if parts else 0
        try:
            placed = assign_replicas(chosen, racks, len(parts), rf, start_index=rng.randrange(max(len(chosen), 1)),
                                     shift=rng.randrange(max(len(chosen), 1)))
        except KafkaError as exc:
            raise ToolError(exc.message or exc.code.name) from None
        for p, replicas in placed.items():
            proposed[(topic, p)] = replicas
    return (f"Current partition replica assignment\n{format_reassignment_json(current)}\n\n"
            f"Proposed partition reassignment configuration\n{format_reassignment_json(proposed)}")


def move_map(ongoing: Mapping[TopicPartition, Ongoing], current: Mapping[TopicPartition, list[int]],
             proposed: Mapping[TopicPartition, list[int]]) -> dict[TopicPartition, tuple[list[int], list[int]]]:
    """(sources, destinations) of every moving partition, Kafka's ``calculateProposedMoveMap``."""
    moves: dict[TopicPartition, tuple[list[int], list[int]]] = {}
    for tp, o in ongoing.items():
        sources = [b for b in o.replicas if b not in o.adding]
        moves[tp] = (sources, list(o.adding))
    for tp, target in proposed.items():
        sources = moves[tp][0] if tp in ongoing else list(current.get(tp, []))
        moves[tp] = (sources, [b for b in target if b not in sources])
    return moves


def throttled_replicas(moves: Mapping[TopicPartition, tuple[list[int], list[int]]]) -> dict[str, tuple[str, str]]:
    """Per topic: the leader and follower throttled-replica values, "p:b" entries in string order."""
    leaders: dict[str, set[str]] = {}
    followers: dict[str, set[str]] = {}
    for (topic, p), (sources, dests) in moves.items():
        leaders.setdefault(topic, set()).update(f"{p}:{b}" for b in sources)
        followers.setdefault(topic, set()).update(f"{p}:{b}" for b in dests if b not in sources)
    return {t: (",".join(sorted(leaders.get(t, ()))), ",".join(sorted(followers.get(t, ())))) for t in leaders}


def execute(cluster: Cluster, plan: Mapping[TopicPartition, list[int]], additional: bool, throttle: int, echo: Any,
            log_dirs: LogDirMoves | None = None) -> int:
    ongoing = cluster.ongoing()
    if ongoing and not additional:
        raise TerseError("Cannot execute because there is an existing partition assignment.  Use --additional to "
                        "override this and create a new partition assignment in addition to the existing one. The "
                        "--additional flag can also be used to change the throttle by resubmitting the current "
                        "reassignment.")
    brokers = cluster.brokers()
    unknown = sorted({b for replicas in plan.values() for b in replicas} - set(brokers))
    if unknown:
        raise ToolError(f"Unknown broker id {unknown[0]}")
    current_all = cluster.assignments({t for t, _p in plan})
    missing = sorted(tp for tp in plan if tp not in current_all)
    if missing:
        raise ToolError(f"{_UNKNOWN_TOPIC_OR_PARTITION}: Unable to find partition: {', '.join(map(_tp, missing))}")
    current = {tp: current_all[tp] for tp in plan}
    echo("Current partition replica assignment\n")
    echo(format_reassignment_json(current))
    echo("\nSave this to use as the --reassignment-json-file option during rollback")
    if throttle >= 0:
        echo("Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is removed.")
        moves = move_map(ongoing, current_all, plan)
        for topic, (leader, follower) in sorted(throttled_replicas(moves).items()):
            cluster.alter_configs(RESOURCE_TOPIC, topic, [(LEADER_THROTTLED_REPLICAS, OP_SET, leader),
                                                          (FOLLOWER_THROTTLED_REPLICAS, OP_SET, follower)])
        involved = sorted({b for s, d in moves.values() for b in (*s, *d)})
        for b in involved:
            cluster.alter_configs(RESOURCE_BROKER, str(b), [(BROKER_THROTTLES[0], OP_SET, str(throttle)),
                                                           (BROKER_THROTTLES[1], OP_SET, str(throttle))])
        echo(f"The inter-broker throttle limit was set to {throttle} B/s")
    if log_dirs is not None and log_dirs.throttle >= 0:
        log_dirs.set_throttle(cluster.client, echo, warned=throttle >= 0)
    results = cluster.alter(dict(plan))
    errors = {tp: r for tp, r in results.items() if r[0] != 0}
    if errors:
        lines = [f"{_tp(tp)}: {exception_message(code, msg)}" for tp, (code, msg) in sorted(errors.items())]
        raise TerseError("Error reassigning partition(s):\n" + "\n".join(lines))
    names = ",".join(_tp(tp) for tp in sorted(plan))
    echo(f"Successfully started partition reassignment{'s' if len(plan) > 1 else ''} for {names}")
    if log_dirs is not None and log_dirs.replicas:
        log_dirs.execute(cluster.client, echo)  # retried while a replica is not on its broker yet
    return 0


def verify(cluster: Cluster, plan: Mapping[TopicPartition, list[int]], preserve_throttles: bool,
           echo: Any, log_dirs: LogDirMoves | None = None) -> tuple[int, bool]:
    """Returns (exit code, everything in the plan done).

    A partition that is not moving is compared with its current replicas; one whose topic or
    partition does not exist has none, so it reads "replica set is  rather than ..." as in Kafka
    (``topicDescriptionFutureToState``), while the other partitions of the plan keep theirs.
    """
    ongoing = cluster.ongoing()
    current = _known_assignments(cluster, {t for t, _p in plan})
    echo("Status of partition reassignment:")
    all_done = True
    for tp in sorted(plan):
        target = plan[tp]
        if tp in ongoing:
            all_done = False
            queued = " (queued)" if ongoing[tp].queued else ""
            echo(f"Reassignment of partition {_tp(tp)} is still in progress{queued}.")
            continue
        replicas = current.get(tp, [])
        if replicas == target:
            echo(f"Reassignment of partition {_tp(tp)} is completed.")
        else:
            echo(f"There is no active reassignment of partition {_tp(tp)}, but replica set is "
                 f"{','.join(map(str, replicas))} rather than {','.join(map(str, target))}.")
    # Kafka then prints the state of the plan's log-directory moves, one line each (an empty line for
    # none), and keeps the throttles while one is under way (``verifyReplicaMoves``).
    lines, moves_ongoing = log_dirs.verify_lines(cluster.client) if log_dirs is not None and log_dirs.replicas \
        else ([], False)
    echo("\n".join(lines))
    if not ongoing and not moves_ongoing and not preserve_throttles:
        clear_throttles(cluster, plan, echo)
    return 0, all_done and not moves_ongoing


def _known_assignments(cluster: Cluster, topics: set[str]) -> dict[TopicPartition, list[int]]:
    """The replicas of the topics that exist (Kafka describes each topic on its own)."""
    try:
        return cluster.assignments(topics)
    except ToolError:
        pass
    out: dict[TopicPartition, list[int]] = {}
    for topic in sorted(topics):
        try:
            out.update(cluster.assignments({topic}))
        except ToolError:
            continue  # an unknown topic: its partitions have no replicas
    return out


def replica_sizes(cluster: Cluster, broker_ids: Iterable[int]) -> dict[tuple[str, int, int], int]:
    """Bytes of every replica on these brokers (DescribeLogDirs): (topic, partition, broker) -> size."""
    out: dict[tuple[str, int, int], int] = {}
    for b in sorted(set(broker_ids)):
        try:
            resp = cluster.client.send(DescribeLogDirsRequest, dict(topics=None), node_id=b)
        except AdminError:
            continue  # a broker that is down shows no progress
        for d in resp.results:
            for t in d.topics:
                for p in t.partitions:
                    out[(t.name, p.partition_index, b)] = out.get((t.name, p.partition_index, b), 0) + p.partition_size
    return out


@dataclass(frozen=True)
class CopyProgress:
    """One adding replica of a moving partition: bytes it holds against the largest source replica."""

    tp: TopicPartition
    replicas: tuple[int, ...]
    broker: int
    copied: int
    source: int

    @property
    def share(self) -> float:
        return min(1.0, self.copied / self.source) if self.source else 1.0


def copy_progress(ongoing: Mapping[TopicPartition, Ongoing],
                  sizes: Mapping[tuple[str, int, int], int]) -> list[CopyProgress]:
    out = []
    for tp, o in sorted(ongoing.items()):
        source = max((sizes.get((tp[0], tp[1], b), 0) for b in o.replicas if b not in o.adding), default=0)
        out += [CopyProgress(tp, tuple(o.replicas), b, sizes.get((tp[0], tp[1], b), 0), source) for b in o.adding]
    return out


@dataclass(frozen=True)
class BrokerThrottle:
    """A broker's reassignment throttle in force, from its ``headwater_reassignment_throttle_*``
    metrics: the rate (0: none), why, and what the adaptive mode last judged by (-1: nothing)."""

    broker: int
    mode: str
    rate: float
    reason: str
    produce_p99_ms: float = -1.0
    follower_lag_ms: float = -1.0
    cpu_pressure: float = -1.0

    def describe(self) -> str:
        rate = "no limit" if self.rate <= 0 else f"{self.rate / 1e6:.1f} MB/s"
        if self.mode != "adaptive":
            return f"broker {self.broker}: {rate} (static)"
        seen = [f"p99 {self.produce_p99_ms:.1f} ms" if self.produce_p99_ms >= 0 else "",
                f"lag {self.follower_lag_ms:.0f} ms" if self.follower_lag_ms >= 0 else "",
                f"CPU pressure {self.cpu_pressure:.2f}" if self.cpu_pressure >= 0 else ""]
        return f"broker {self.broker}: {rate} adaptive, {', '.join([self.reason, *filter(None, seen)])}"


def parse_throttle_metrics(text: str) -> dict[int, BrokerThrottle]:
    """Broker id -> its throttle, from a Prometheus endpoint's text (a broker's own endpoint has one)."""
    from prometheus_client.parser import text_string_to_metric_families

    found: dict[int, dict[str, Any]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not sample.name.startswith("headwater_reassignment_throttle_") or "broker" not in sample.labels:
                continue
            fields = found.setdefault(int(sample.labels["broker"]), {})
            field_name = sample.name.removeprefix("headwater_reassignment_throttle_")
            if field_name == "rate_bytes_per_second":
                fields["rate"], fields["mode"] = float(sample.value), sample.labels.get("mode", "static")
            elif field_name == "reason" and sample.value == 1:
                fields["reason"] = sample.labels.get("reason", "")
            elif field_name in ("produce_p99_ms", "follower_lag_ms", "cpu_pressure"):
                fields[field_name] = float(sample.value)
    return {b: BrokerThrottle(b, f.get("mode", "static"), f.get("rate", 0.0), f.get("reason", ""),
                              f.get("produce_p99_ms", -1.0), f.get("follower_lag_ms", -1.0),
                              f.get("cpu_pressure", -1.0))
            for b, f in found.items() if "rate" in f}


def read_throttles(metrics_urls: Iterable[str]) -> dict[int, BrokerThrottle]:
    """The throttles of the brokers behind ``metrics_urls``; an endpoint that does not answer shows nothing."""
    import urllib.request

    out: dict[int, BrokerThrottle] = {}
    for url in metrics_urls:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                out.update(parse_throttle_metrics(resp.read().decode()))
        except (OSError, ValueError):
            continue
    return out


def watch_progress(cluster: Cluster, plan: Mapping[TopicPartition, list[int]], interval_s: float,
                   console: Any = None, metrics_urls: Iterable[str] = ()) -> None:
    """Follow the moves in ``plan`` until none is active: bytes copied per adding replica, and with
    ``metrics_urls`` (the brokers' Prometheus endpoints) the reassignment throttle of each broker.

    On a terminal, a live table with progress bars. Otherwise (a pipe, a log file, CI), plain lines a
    script can read: a partition's line when it completes, a progress line whenever the totals
    change, and a throttle line whenever a broker's rate or its reason changes, at most once per
    ``interval_s``.
    """
    from rich.console import Console

    console = console or Console()
    urls = list(metrics_urls)

    def poll() -> tuple[dict[TopicPartition, Ongoing], list[CopyProgress], dict[int, BrokerThrottle]]:
        ongoing = {tp: o for tp, o in cluster.ongoing().items() if tp in plan}
        brokers = {b for o in ongoing.values() for b in o.replicas}
        return (ongoing, copy_progress(ongoing, replica_sizes(cluster, brokers) if ongoing else {}),
                read_throttles(urls) if urls else {})

    if console.is_terminal:
        _watch_live(console, plan, poll, interval_s)
    else:
        _watch_plain(plan, poll, interval_s)


def _watch_live(console: Any, plan: Mapping[TopicPartition, list[int]], poll: Any, interval_s: float) -> None:
    from rich.console import Group
    from rich.live import Live
    from rich.table import Table

    def throttle_table(throttles: Mapping[int, BrokerThrottle]) -> Table:
        t = Table(title="Reassignment throttle")
        for col in ("broker", "mode", "rate", "reason", "produce p99", "follower lag"):
            t.add_column(col, justify="right")
        for b, th in sorted(throttles.items()):
            t.add_row(str(b), th.mode, "no limit" if th.rate <= 0 else f"{th.rate / 1e6:,.1f} MB/s",
                      th.reason, f"{th.produce_p99_ms:.1f} ms" if th.produce_p99_ms >= 0 else "",
                      f"{th.follower_lag_ms:,.0f} ms" if th.follower_lag_ms >= 0 else "")
        return t

    def table(ongoing: Mapping[TopicPartition, Ongoing], copies: list[CopyProgress]) -> Table:
        t = Table(title="Reassignment progress")
        for col in ("partition", "replicas", "adding", "copied", "progress"):
            t.add_column(col, justify="right")
        for tp in sorted(plan):
            o = ongoing.get(tp)
            if o is None:
                t.add_row(_tp(tp), ",".join(map(str, plan[tp])), "", "", "[green]completed[/]")
            elif o.queued:
                t.add_row(_tp(tp), ",".join(map(str, o.replicas)), "", "", "queued")
            elif not o.adding:
                t.add_row(_tp(tp), ",".join(map(str, o.replicas)), "", "", "removing replicas")
            for c in (c for c in copies if c.tp == tp):
                bar = "#" * int(c.share * 20) + "." * (20 - int(c.share * 20))
                t.add_row(_tp(tp), ",".join(map(str, c.replicas)), str(c.broker), f"{c.copied:,} / {c.source:,} B",
                          f"{bar} {c.share:5.1%}")
        return t

    with Live(console=console, refresh_per_second=4) as live:
        while True:
            ongoing, copies, throttles = poll()
            live.update(Group(table(ongoing, copies), throttle_table(throttles)) if throttles else table(ongoing, copies))
            if not ongoing:
                break
            time.sleep(interval_s)


def _watch_plain(plan: Mapping[TopicPartition, list[int]], poll: Any, interval_s: float) -> None:
    started = time.monotonic()
    reported: set[TopicPartition] = set()
    last = ""
    last_throttles: list[tuple[int, float, str]] = []
    while True:
        ongoing, copies, throttles = poll()
        for tp in sorted(plan):
            if tp not in ongoing and tp not in reported:
                reported.add(tp)
                click.echo(f"Partition {_tp(tp)}: completed")
        copied, source = sum(min(c.copied, c.source) for c in copies), sum(c.source for c in copies)
        line = (f"Progress: {len(reported)}/{len(plan)} partitions completed; {len(copies)} replicas copying, "
                f"{copied:,} of {source:,} bytes copied ({copied / source if source else 1.0:.1%})")
        if line != last:
            click.echo(f"[{time.monotonic() - started:7.1f}s] {line}")
            last = line
        # The p99 and lag change every second: a line only when a rate or a reason does.
        key = [(b, th.rate, th.reason) for b, th in sorted(throttles.items())]
        if key != last_throttles:
            click.echo(f"[{time.monotonic() - started:7.1f}s] Throttle: "
                       + "; ".join(th.describe() for _b, th in sorted(throttles.items())))
            last_throttles = key
        if not ongoing:
            break
        time.sleep(interval_s)


def await_metadata(cluster: Cluster, plan: Mapping[TopicPartition, list[int]], timeout_s: float) -> None:
    """Wait (at most ``timeout_s``) until the brokers' metadata shows every partition of ``plan`` at its target.

    The controller answers ListPartitionReassignments from its own state, and a move drops out of
    it the moment the controller has written the final replica set; brokers learn that replica set
    from the controller's UpdateMetadata a moment later. ``--verify`` reads replica sets from a
    broker's metadata, so right after ``--watch`` it could report a finished move as "no active
    reassignment, but replica set is ... rather than ...". A plan that was cancelled or replaced
    never matches: then this gives up after ``timeout_s`` and ``--verify`` says so.
    """
    deadline = time.monotonic() + timeout_s
    topics = {t for t, _p in plan}
    while time.monotonic() < deadline:
        try:
            current = cluster.assignments(topics)
        except ToolError:
            return  # a topic is gone: nothing to wait for, --verify reports it
        if all(current.get(tp) == target for tp, target in plan.items()):
            return
        time.sleep(0.2)


def clear_throttles(cluster: Cluster, plan: Mapping[TopicPartition, list[int]], echo: Any) -> None:
    """Kafka's ``clearAllThrottles``: each line is printed before its configs are deleted."""
    live = cluster.brokers()
    brokers = sorted(set(live) | {b for r in plan.values() for b in r})
    echo(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} {','.join(map(str, brokers))}")
    for b in brokers:
        if b in live:  # a broker that is down has nothing to clear and cannot be asked
            cluster.alter_configs(RESOURCE_BROKER, str(b), [(name, OP_DELETE, None) for name in BROKER_THROTTLES])
    topics = sorted({t for t, _p in plan})
    echo(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} {','.join(topics)}")
    for t in topics:
        cluster.alter_configs(RESOURCE_TOPIC, t, [(LEADER_THROTTLED_REPLICAS, OP_DELETE, None),
                                                  (FOLLOWER_THROTTLED_REPLICAS, OP_DELETE, None)])


def cancel(cluster: Cluster, plan: Mapping[TopicPartition, list[int]], preserve_throttles: bool, echo: Any,
           log_dirs: LogDirMoves | None = None) -> int:
    ongoing = cluster.ongoing()
    # Kafka 3.6's rule is that a partition is moving if it adds or removes anything (3.9's Java port
    # inverted the test on the adding replicas, a regression we do not copy); a queued one (listed with
    # neither) is cancelled too, which takes it out of the controller's queue.
    targets = {tp: None for tp in plan if tp in ongoing}
    if not targets:
        echo("None of the specified partition reassignments are active.")
    else:
        results = cluster.alter(targets)
        errors = {tp: r for tp, r in results.items() if r[0] != 0}
        if errors:
            lines = [f"{_tp(tp)}: {exception_message(code, msg)}" for tp, (code, msg) in sorted(errors.items())]
            raise TerseError(f"Error cancelling partition reassignment{'' if len(errors) == 1 else 's'} for:\n"
                             + "\n".join(lines))
        echo(f"Successfully cancelled partition reassignment{'' if len(targets) == 1 else 's'} for: "
             f"{','.join(_tp(tp) for tp in sorted(targets))}")
    # Then the plan's log-directory moves still under way go back to their current dirs. With none,
    # Kafka prints this line without a line end (``System.out.print``), so the next line starts on it.
    if log_dirs is not None and log_dirs.replicas:
        log_dirs.cancel(cluster.client, echo)
    else:
        click.echo("None of the specified partition moves are active.", nl=False)
    if not preserve_throttles:
        clear_throttles(cluster, plan, echo)
    return 0


def list_reassignments(cluster: Cluster, echo: Any) -> int:
    ongoing = cluster.ongoing()
    if not ongoing:
        echo("No partition reassignments found.")
        return 0
    echo("Current partition reassignments:")
    for tp, o in sorted(ongoing.items()):
        line = f"{_tp(tp)}: replicas: {','.join(map(str, o.replicas))}."
        if o.adding:
            line += f" adding: {','.join(map(str, o.adding))}."
        if o.removing:
            line += f" removing: {','.join(map(str, o.removing))}."
        if o.queued:
            line += " queued."
        echo(line)
    return 0


# Which options go with which action, beyond the action itself and its required arguments: Kafka's
# ``validateAndParseArgs``, plus headwater's --bootstrap-controller (Kafka 4's, here an alias of
# --bootstrap-server), --watch and --metrics-url.
_REQUIRED = {
    "generate": ("topics-to-move-json-file", "broker-list"),
    "execute": ("reassignment-json-file",),
    "verify": ("reassignment-json-file",),
    "cancel": ("reassignment-json-file",),
    "list": (),
}
_BOOTSTRAP = ("bootstrap-server", "bootstrap-controller", "command-config")
_PERMITTED = {
    "generate": (*_BOOTSTRAP, "broker-list", "disable-rack-aware"),
    "execute": (*_BOOTSTRAP, "additional", "throttle", "replica-alter-log-dirs-throttle", "timeout"),
    "verify": (*_BOOTSTRAP, "preserve-throttles", "watch", "metrics-url"),
    "cancel": (*_BOOTSTRAP, "preserve-throttles", "timeout"),
    "list": _BOOTSTRAP,
}
_ACTIONS = ("generate", "execute", "verify", "cancel", "list")
_THROTTLE_HELP = ("will be throttled to this value (bytes/sec). This option can be included with --execute when a "
                  "reassignment is started, and it can be altered by resubmitting the current reassignment along "
                  "with the --additional flag. The throttle rate should be at least 1 KB/s.")
_LONG = JavaInt(64)


def _check_options(given: list[str], actions: tuple[str, ...], bootstrap_server: str | None,
                   bootstrap_controller: str | None) -> str:
    """Kafka's usage checks, in its order; returns the action."""
    if len(actions) != 1:
        usage_error("Command must include exactly one action: " + ", ".join(f"--{a}" for a in _ACTIONS))
    action = actions[0]
    if bootstrap_server is not None and bootstrap_controller is not None:
        usage_error("Please don't specify both --bootstrap-server and --bootstrap-controller")
    if bootstrap_server is None and bootstrap_controller is None:
        usage_error("Please specify --bootstrap-server")
    for name in _REQUIRED[action]:
        if name not in given:
            usage_error(f'Missing required argument "[{name}]"')
    for name in given:
        if name != action and name not in _REQUIRED[action] and name not in _PERMITTED[action]:
            usage_error(f'Option "[{name}]" can\'t be used with action "[{action}]"')
    return action


@click.command(cls=KafkaCommand, tool_help=HELP, help=HELP,
               short_help="Move partitions between brokers, like kafka-reassign-partitions.sh.")
@click.option("--verify", "actions", cls=JoptOption, flag_value="verify", multiple=True,
              description="Verify if the reassignment completed as specified by the --reassignment-json-file "
                          "option. If there is a throttle engaged for the replicas specified, and the rebalance "
                          "has completed, the throttle will be removed")
@click.option("--generate", "actions", cls=JoptOption, flag_value="generate", multiple=True,
              description="Generate a candidate partition reassignment configuration. Note that this only "
                          "generates a candidate assignment, it does not execute it.")
@click.option("--execute", "actions", cls=JoptOption, flag_value="execute", multiple=True,
              description="Kick off the reassignment as specified by the --reassignment-json-file option.")
@click.option("--cancel", "actions", cls=JoptOption, flag_value="cancel", multiple=True,
              description="Cancel an active reassignment.")
@click.option("--list", "actions", cls=JoptOption, flag_value="list", multiple=True,
              description="List all active partition reassignments.")
@click.option("--bootstrap-server", cls=JoptOption, described_as="Server(s) to use for bootstrapping",
              description="REQUIRED: the server(s) to use for bootstrapping.")
@click.option("--bootstrap-controller", cls=JoptOption, described_as="bootstrap controller to connect to",
              description="Accepted as Kafka 4's tool accepts it, and used as --bootstrap-server: a "
                          "ZooKeeper-mode cluster has no KRaft controllers.")
@click.option("--command-config", cls=JoptOption, described_as="Admin client property file",
              description="Property file containing configs to be passed to Admin Client.")
@click.option("--reassignment-json-file", cls=JoptOption, described_as="manual assignment json file path",
              description='The JSON file with the partition reassignment configurationThe format to use is - \n'
                          '{"partitions":\n\t[{"topic": "foo",\n\t  "partition": 1,\n\t  "replicas": [1,2,3],'
                          '\n\t  "log_dirs": ["dir1","dir2","dir3"] }],\n"version":1\n}\nNote that "log_dirs" is '
                          'optional. When it is specified, its length must equal the length of the replicas list. '
                          'The value in this list can be either "any" or the absolution path of the log directory '
                          'on the broker. If absolute log directory path is specified, the replica will be moved '
                          'to the specified log directory on the broker.')
@click.option("--topics-to-move-json-file", cls=JoptOption, described_as="topics to reassign json file path",
              description='Generate a reassignment configuration to move the partitions of the specified topics '
                          'to the list of brokers specified by the --broker-list option. The format to use is - \n'
                          '{"topics":\n\t[{"topic": "foo"},{"topic": "foo1"}],\n"version":1\n}')
@click.option("--broker-list", cls=JoptOption, described_as="brokerlist",
              description='The list of brokers to which the partitions need to be reassigned in the form '
                          '"0,1,2". This is required if --topics-to-move-json-file is used to generate '
                          'reassignment configuration')
@click.option("--disable-rack-aware", cls=JoptOption, is_flag=True,
              description="Disable rack aware replica assignment")
@click.option("--throttle", cls=JoptOption, type=_LONG, default=-1, described_as="throttle",
              type_indicator="Long", shown_default="-1",
              description=f"The movement of partitions between brokers {_THROTTLE_HELP}")
@click.option("--replica-alter-log-dirs-throttle", cls=JoptOption, type=_LONG, default=-1,
              described_as="replicaAlterLogDirsThrottle", type_indicator="Long", shown_default="-1",
              description=f"The movement of replicas between log directories on the same broker {_THROTTLE_HELP}")
@click.option("--timeout", cls=JoptOption, type=_LONG, default=10000, described_as="timeout",
              type_indicator="Long", shown_default="10000",
              description="The maximum time in ms to wait for log directory replica assignment to begin.")
@click.option("--additional", cls=JoptOption, is_flag=True,
              description="Execute this reassignment in addition to any other ongoing ones. This option can also "
                          "be used to change the throttle of an ongoing reassignment.")
@click.option("--preserve-throttles", cls=JoptOption, is_flag=True,
              description="Do not modify broker or topic throttles.")
@click.option("--watch", cls=JoptOption, is_flag=True,
              description="With --verify: follow the moves of the plan until none is active (a live table on a "
                          "terminal, progress lines otherwise), then verify.")
@click.option("--metrics-url", "metrics_urls", cls=JoptOption, multiple=True, described_as="url",
              description="With --verify --watch: a broker's Prometheus endpoint (http://host:port/metrics), "
                          "repeatable; the watch then shows each broker's reassignment throttle (rate, mode, and "
                          "for the adaptive mode why, with the produce p99 and follower lag it judged by).")
def reassign(bootstrap_server: str | None, bootstrap_controller: str | None, command_config: str | None,
             actions: tuple[str, ...], topics_to_move_json_file: str | None, broker_list: str | None,
             disable_rack_aware: bool, reassignment_json_file: str | None, additional: bool, throttle: int,
             replica_alter_log_dirs_throttle: int, timeout: int, preserve_throttles: bool, watch: bool,
             metrics_urls: tuple[str, ...]) -> None:
    """Usage errors go to stderr with the option table (exit 1); everything else Kafka's ``main`` prints
    on stdout: a TerseException's message alone, any other failure as ``Error: <message>`` (exit 1)."""
    action = _check_options(given_options(click.get_current_context()), actions, bootstrap_server,
                            bootstrap_controller)
    bootstrap = str(bootstrap_server if bootstrap_server is not None else bootstrap_controller)
    try:
        with connect(bootstrap, CLIENT_ID, None if command_config is None else Path(command_config)) as client:
            cluster_ = Cluster(client)
            if action == "generate":
                assert topics_to_move_json_file is not None and broker_list is not None
                click.echo(generate(cluster_, _read(topics_to_move_json_file), broker_list, disable_rack_aware))
                code = 0
            elif action == "list":
                code = list_reassignments(cluster_, click.echo)
            else:
                assert reassignment_json_file is not None
                # Each action reads the file first: a bad plan is refused before anything is sent.
                text = _read(reassignment_json_file)
                if action == "execute":
                    code = execute(cluster_, parse_reassignment_json(text), additional, throttle, click.echo,
                                   _log_dirs(text, replica_alter_log_dirs_throttle, timeout))
                elif action == "verify":
                    plan = dict(parse_reassignment_data(text))
                    if watch:
                        watch_progress(cluster_, plan, 1.0, metrics_urls=metrics_urls)
                        await_metadata(cluster_, plan, METADATA_SETTLE_S)
                    code, _done = verify(cluster_, plan, preserve_throttles, click.echo, _log_dirs(text))
                else:
                    code = cancel(cluster_, dict(parse_reassignment_data(text)), preserve_throttles, click.echo,
                                  _log_dirs(text, timeout_ms=timeout))
    except TerseError as exc:
        click.echo(str(exc))
        sys.exit(1)
    except (ToolError, AdminError) as exc:
        click.echo(f"Error: {exc}")
        sys.exit(1)
    sys.exit(code)


def _log_dirs(text: str, throttle: int = -1, timeout_ms: int = 10_000) -> LogDirMoves:
    """The plan's replicas with a log dir other than "any" (the file was checked already)."""
    return LogDirMoves(parse_log_dirs(text), ToolError, TerseError, throttle, timeout_ms)


def _read(path: str) -> str:
    """``Utils.readFileAsString``: a missing or unreadable file is reported by its path alone (the
    message of Java's NoSuchFileException / AccessDeniedException)."""
    try:
        return Path(path).read_text()
    except (FileNotFoundError, PermissionError):
        raise ToolError(path) from None
    except OSError as exc:
        raise ToolError(f"{path}: {exc.strerror}") from None
