"""``headwater reassign``: a drop-in for kafka-reassign-partitions.sh over the Kafka protocol.

Actions, JSON formats, messages and exit codes are Kafka's (scripts parse them): ``--generate``
proposes a plan with Kafka's placement, ``--execute`` starts one (printing the current assignment
for rollback, setting throttles), ``--verify`` reports progress and clears throttles when nothing
is moving any more, ``--cancel`` reverts, ``--list`` shows what is moving.
"""

from __future__ import annotations

import json
import random
import sys
import time
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
from headwater.admin.options import connect
from headwater.placement import assign_replicas
from headwater.protocol.config_resources import OP_DELETE, OP_SET, RESOURCE_BROKER, RESOURCE_TOPIC
from headwater.protocol.errors import ErrorCode, KafkaError

CLIENT_ID = "reassign-partitions-tool"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
BROKER_THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                    "replica.alter.log.dirs.io.max.bytes.per.second")
HELP = "This tool helps to move topic partitions between replicas."
METADATA_SETTLE_S = 10.0  # how long --watch waits for brokers' metadata to catch up with the controller


class ToolError(Exception):
    """A failure whose message alone is shown (Kafka's TerseException)."""


TopicPartition = tuple[str, int]


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


def format_reassignment_json(assignment: Mapping[TopicPartition, list[int]]) -> str:
    """Kafka's compact form: keys in order, partitions sorted by topic then partition, log_dirs "any"."""
    partitions = [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())
    ]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


def parse_reassignment_json(text: str) -> dict[TopicPartition, list[int]]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolError(f"Unable to parse the reassignment JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise ToolError('The reassignment JSON must be an object with a "partitions" list')
    version = doc.get("version", 1)
    if version != 1:
        raise ToolError(f"Not supported version field value {version}")
    out: dict[TopicPartition, list[int]] = {}
    duplicates: list[str] = []
    for i, entry in enumerate(doc["partitions"]):
        if not isinstance(entry, dict):
            raise ToolError(f"Partition entry {i} is not an object")
        topic, partition, replicas = entry.get("topic"), entry.get("partition"), entry.get("replicas")
        if not isinstance(topic, str) or not isinstance(partition, int) or isinstance(partition, bool):
            raise ToolError(f'Partition entry {i} needs a "topic" string and a "partition" number')
        if not isinstance(replicas, list) or not all(isinstance(r, int) and not isinstance(r, bool) for r in replicas):
            raise ToolError(f'Partition entry {i} ({topic}-{partition}) needs a "replicas" list of broker ids')
        log_dirs = entry.get("log_dirs")
        if log_dirs is not None:
            if not isinstance(log_dirs, list) or len(log_dirs) != len(replicas):
                size = len(log_dirs) if isinstance(log_dirs, list) else "?"
                raise ToolError(f"Size of replicas list {replicas} is different from size of log dirs list {log_dirs} "
                                f"for partition {topic}-{partition}" if size != "?" else
                                f"log_dirs of {topic}-{partition} must be a list")
            if any(d != "any" for d in log_dirs):
                raise ToolError(f"Moving replicas between log directories is not supported ({topic}-{partition})")
        if (topic, partition) in out:
            duplicates.append(f"{topic}-{partition}")
        out[(topic, partition)] = replicas
    if not out:
        raise ToolError("Partition reassignment list cannot be empty")
    if duplicates:
        raise ToolError(f"Partition reassignment contains duplicate topic partitions: {','.join(duplicates)}")
    if any(not r for r in out.values()):
        raise ToolError("Partition replica list cannot be empty")
    dup_replicas = [f"{_tp(tp)} contains multiple entries for {','.join(str(b) for b in sorted({x for x in r if r.count(x) > 1}))}"
                    for tp, r in sorted(out.items()) if len(set(r)) != len(r)]
    if dup_replicas:
        raise ToolError(f"Partition replica lists may not contain duplicate entries: {'. '.join(dup_replicas)}")
    return out


def parse_topics_json(text: str) -> list[str]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolError(f"Unable to parse the topics JSON: {exc}") from None
    version = doc.get("version", 1) if isinstance(doc, dict) else 1
    if version != 1:
        raise ToolError(f"Not supported version field value {version}")
    if not isinstance(doc, dict) or not isinstance(doc.get("topics"), list):
        raise ToolError('The topics JSON must be an object with a "topics" list')
    topics = []
    for entry in doc["topics"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str):
            raise ToolError('Each entry of "topics" needs a "topic" string')
        topics.append(entry["topic"])
    dups = sorted({t for t in topics if topics.count(t) > 1})
    if dups:
        raise ToolError(f"List of topics to reassign contains duplicate entries: {','.join(dups)}")
    return topics


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
                raise ToolError(f"Topic {t.name} not found.")
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
            raise ToolError(f"Error listing reassignments: {resp.error_message or ErrorCode(resp.error_code).name}")
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
            message = resp.error_message or ErrorCode(resp.error_code).name
            return dict.fromkeys(plan, (resp.error_code, message))
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
            kind = "broker" if resource_type == RESOURCE_BROKER else "topic"
            raise ToolError(f"Failed to change throttle configs of {kind} {name}: "
                            f"{result.error_message or ErrorCode(result.error_code).name}")


# --- actions ----------------------------------------------------------------------------------------


def generate(cluster: Cluster, topics_json: str, broker_list: str, disable_rack_aware: bool,
             rng: random.Random | None = None) -> str:
    try:
        brokers = [int(b) for b in broker_list.split(",") if b.strip()]
    except ValueError:
        raise ToolError(f"Invalid broker list {broker_list!r}: expected ids like 0,1,2") from None
    dups = sorted({b for b in brokers if brokers.count(b) > 1})
    if dups:
        raise ToolError(f"Broker list contains duplicate entries: {dups}")
    topics = parse_topics_json(topics_json)
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


def execute(cluster: Cluster, plan: Mapping[TopicPartition, list[int]], additional: bool, throttle: int, echo: Any) -> int:
    ongoing = cluster.ongoing()
    if ongoing and not additional:
        raise ToolError("Cannot execute because there is an existing partition assignment.  Use --additional to "
                        "override this and create a new partition assignment in addition to the existing one. The "
                        "--additional flag can also be used to change the throttle by resubmitting the current "
                        "reassignment.")
    brokers = cluster.brokers()
    for replicas in plan.values():
        for b in replicas:
            if b not in brokers:
                raise ToolError(f"Unknown broker id {b}")
    current_all = cluster.assignments({t for t, _p in plan})
    for tp in sorted(plan):
        if tp not in current_all:
            raise ToolError(f"Unable to find partition: {_tp(tp)}")
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
    results = cluster.alter(dict(plan))
    errors = {tp: r for tp, r in results.items() if r[0] != 0}
    if errors:
        lines = [f"{_tp(tp)}: {msg or ErrorCode(code).name}" for tp, (code, msg) in sorted(errors.items())]
        raise ToolError("Error reassigning partition(s):\n" + "\n".join(lines))
    names = ",".join(_tp(tp) for tp in sorted(plan))
    echo(f"Successfully started partition reassignment{'s' if len(plan) > 1 else ''} for {names}")
    return 0


def verify(cluster: Cluster, plan: Mapping[TopicPartition, list[int]], preserve_throttles: bool,
           echo: Any) -> tuple[int, bool]:
    """Returns (exit code, everything in the plan done)."""
    ongoing = cluster.ongoing()
    try:
        current = cluster.assignments({t for t, _p in plan})
    except ToolError:
        current = {}
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
    if not ongoing and not preserve_throttles:
        clear_throttles(cluster, plan, echo)
    return 0, all_done


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


def watch_progress(cluster: Cluster, plan: Mapping[TopicPartition, list[int]], interval_s: float,
                   console: Any = None) -> None:
    """Follow the moves in ``plan`` until none is active: bytes copied per adding replica.

    On a terminal, a live table with progress bars. Otherwise (a pipe, a log file, CI), plain lines a
    script can read: a partition's line when it completes, and a progress line whenever the totals
    change, at most once per ``interval_s``.
    """
    from rich.console import Console

    console = console or Console()

    def poll() -> tuple[dict[TopicPartition, Ongoing], list[CopyProgress]]:
        ongoing = {tp: o for tp, o in cluster.ongoing().items() if tp in plan}
        brokers = {b for o in ongoing.values() for b in o.replicas}
        return ongoing, copy_progress(ongoing, replica_sizes(cluster, brokers) if ongoing else {})

    if console.is_terminal:
        _watch_live(console, plan, poll, interval_s)
    else:
        _watch_plain(plan, poll, interval_s)


def _watch_live(console: Any, plan: Mapping[TopicPartition, list[int]], poll: Any, interval_s: float) -> None:
    from rich.live import Live
    from rich.table import Table

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
            ongoing, copies = poll()
            live.update(table(ongoing, copies))
            if not ongoing:
                break
            time.sleep(interval_s)


def _watch_plain(plan: Mapping[TopicPartition, list[int]], poll: Any, interval_s: float) -> None:
    started = time.monotonic()
    reported: set[TopicPartition] = set()
    last = ""
    while True:
        ongoing, copies = poll()
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
    brokers = sorted(set(cluster.brokers()) | {b for r in plan.values() for b in r})
    live = cluster.brokers()
    for b in brokers:
        if b in live:
            cluster.alter_configs(RESOURCE_BROKER, str(b), [(name, OP_DELETE, None) for name in BROKER_THROTTLES])
    echo(f"Clearing broker-level throttles on broker{'s' if len(brokers) > 1 else ''} {','.join(map(str, brokers))}")
    topics = sorted({t for t, _p in plan})
    for t in topics:
        cluster.alter_configs(RESOURCE_TOPIC, t, [(LEADER_THROTTLED_REPLICAS, OP_DELETE, None),
                                                  (FOLLOWER_THROTTLED_REPLICAS, OP_DELETE, None)])
    echo(f"Clearing topic-level throttles on topic{'s' if len(topics) > 1 else ''} {','.join(topics)}")


def cancel(cluster: Cluster, plan: Mapping[TopicPartition, list[int]], preserve_throttles: bool, echo: Any) -> int:
    ongoing = cluster.ongoing()
    # Kafka's rule is that a partition is moving if it adds or removes anything; a queued one (listed
    # with neither) is cancelled too, which takes it out of the controller's queue.
    targets = {tp: None for tp in plan if tp in ongoing}
    if not targets:
        echo("None of the specified partition reassignments are active.")
    else:
        results = cluster.alter(targets)
        errors = {tp: r for tp, r in results.items() if r[0] != 0}
        if errors:
            lines = [f"{_tp(tp)}: {msg or ErrorCode(code).name}" for tp, (code, msg) in sorted(errors.items())]
            raise ToolError("Error cancelling partition reassignment(s) for:\n" + "\n".join(lines))
        echo(f"Successfully cancelled partition reassignment(s) for: {','.join(_tp(tp) for tp in sorted(targets))}")
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


@click.command(context_settings={"help_option_names": ["-h", "--help"]}, help=HELP)
@click.option("--bootstrap-server", default=None, help="host:port of any broker.")
@click.option("--bootstrap-controller", default=None, help="Accepted for compatibility; treated as --bootstrap-server.")
@click.option("--command-config", type=click.Path(path_type=Path, exists=True), default=None,
              help="Client properties: security.protocol, sasl.mechanism, sasl.jaas.config (or "
                   "sasl.username/sasl.password), ssl.truststore.location, ssl.keystore.*, client.id.")
@click.option("--generate", "actions", flag_value="generate", multiple=True)
@click.option("--execute", "actions", flag_value="execute", multiple=True)
@click.option("--verify", "actions", flag_value="verify", multiple=True)
@click.option("--cancel", "actions", flag_value="cancel", multiple=True)
@click.option("--list", "actions", flag_value="list", multiple=True)
@click.option("--topics-to-move-json-file", type=click.Path(path_type=Path), default=None)
@click.option("--broker-list", default=None)
@click.option("--disable-rack-aware", is_flag=True)
@click.option("--reassignment-json-file", type=click.Path(path_type=Path), default=None)
@click.option("--additional", is_flag=True)
@click.option("--throttle", type=int, default=-1, help="Replication throttle in bytes/s during the move.")
@click.option("--replica-alter-log-dirs-throttle", type=int, default=-1)
@click.option("--timeout", type=int, default=10000)
@click.option("--preserve-throttles", is_flag=True)
@click.option("--watch", is_flag=True, help="With --verify: a live view of the moves until they are done, then verify.")
def reassign(bootstrap_server: str | None, bootstrap_controller: str | None, command_config: Path | None,
             actions: tuple[str, ...], topics_to_move_json_file: Path | None, broker_list: str | None,
             disable_rack_aware: bool, reassignment_json_file: Path | None, additional: bool, throttle: int,
             replica_alter_log_dirs_throttle: int, timeout: int, preserve_throttles: bool, watch: bool) -> None:
    def usage(message: str) -> None:
        click.echo(message, err=True)
        click.echo(HELP, err=True)
        sys.exit(1)

    if len(actions) != 1:
        usage("Command must include exactly one action: --generate, --execute, --verify, --cancel, --list")
    action = actions[0]
    if bootstrap_server and bootstrap_controller:
        usage("Please don't specify both --bootstrap-server and --bootstrap-controller")
    bootstrap = bootstrap_server or bootstrap_controller
    if not bootstrap:
        usage("Please specify either --bootstrap-server or --bootstrap-controller")
    if action in ("execute", "verify", "cancel") and reassignment_json_file is None:
        usage('Missing required argument "[reassignment-json-file]"')
    if action == "generate" and (topics_to_move_json_file is None or broker_list is None):
        usage('Missing required argument "[topics-to-move-json-file]"' if topics_to_move_json_file is None
              else 'Missing required argument "[broker-list]"')
    if throttle != -1 and action != "execute":
        usage(f'Option "[throttle]" can\'t be used with action "[{action}]"')
    if watch and action != "verify":
        usage(f'Option "[watch]" can\'t be used with action "[{action}]"')
    if additional and action != "execute":
        usage(f'Option "[additional]" can\'t be used with action "[{action}]"')
    try:
        # A bad plan is refused before anything is sent to the cluster.
        plan = parse_reassignment_json(_read(reassignment_json_file)) if reassignment_json_file is not None else {}
        topics_json = _read(topics_to_move_json_file) if topics_to_move_json_file is not None else ""
        if action == "generate":
            parse_topics_json(topics_json)
        with connect(str(bootstrap), CLIENT_ID, command_config) as client:
            cluster_ = Cluster(client)
            if action == "generate":
                assert topics_to_move_json_file is not None and broker_list is not None
                click.echo(generate(cluster_, topics_json, broker_list, disable_rack_aware))
                code = 0
            elif action == "execute":
                assert reassignment_json_file is not None
                code = execute(cluster_, plan, additional, throttle, click.echo)
            elif action == "verify":
                assert reassignment_json_file is not None
                if watch:
                    watch_progress(cluster_, plan, 1.0)
                    await_metadata(cluster_, plan, METADATA_SETTLE_S)
                code, _done = verify(cluster_, plan, preserve_throttles, click.echo)
            elif action == "cancel":
                assert reassignment_json_file is not None
                code = cancel(cluster_, plan, preserve_throttles, click.echo)
            else:
                code = list_reassignments(cluster_, click.echo)
    except ToolError as exc:
        click.echo(str(exc), err=True)
        sys.exit(1)
    except AdminError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    sys.exit(code)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise ToolError(f"Unable to read {path}: {exc.strerror}") from None
