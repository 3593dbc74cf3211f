"""The log-directory half of ``headwater reassign``: the ``log_dirs`` of a reassignment plan.

A plan entry's ``log_dirs`` names, for each replica, the absolute log dir it should live in on its
broker, or ``"any"``. Kafka's ``ReassignPartitionsCommand`` then, after AlterPartitionReassignments:
- ``--execute`` sets ``replica.alter.log.dirs.io.max.bytes.per.second`` on the brokers of those
  replicas when ``--replica-alter-log-dirs-throttle`` is given, and sends AlterReplicaLogDirs to each
  broker, again every 100 ms while a broker answers REPLICA_NOT_AVAILABLE (the replica is not
  there yet: a reassignment is still adding it), until ``--timeout`` ms have passed;
- ``--verify`` describes each replica's dirs (DescribeLogDirs, the admin client's
  ``describeReplicaLogDirs``) and prints one line per replica, and keeps the throttles while any
  replica is still moving;
- ``--cancel`` sends the replicas still moving back to their current dir.
The strings are Kafka 3.9's; a replica is printed as Java's ``TopicPartitionReplica``
(``topic-partition-broker``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import click
from kafka.protocol.admin import (
    AlterReplicaLogDirsRequest,
    DescribeLogDirsRequest,
    IncrementalAlterConfigsRequest,
)

from headwater.admin.client import AdminClient
from headwater.protocol.config_resources import OP_SET, RESOURCE_BROKER
from headwater.protocol.errors import ErrorCode

ANY_LOG_DIR = "any"
LOG_DIR_THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"
RETRY_S = 0.1  # Kafka's executeMoves sleeps 100 ms between attempts

Replica = tuple[str, int, int]  # (topic, partition, broker), Kafka's TopicPartitionReplica


def replica_name(r: Replica) -> str:
    """Java's ``TopicPartitionReplica.toString``."""
    return f"{r[0]}-{r[1]}-{r[2]}"


def _order(r: Replica) -> tuple[int, str, int]:
    """Kafka's ``compareTopicPartitionReplicas``: broker, then topic, then partition."""
    return r[2], r[0], r[1]


def parse_log_dirs(text: str) -> dict[Replica, str]:
    """The replicas of a plan with a log dir other than "any". The caller has parsed and checked the
    plan already (``reassign.parse_reassignment_data``), so the JSON here is well formed."""
    out: dict[Replica, str] = {}
    for entry in json.loads(text).get("partitions") or []:
        for broker, log_dir in zip(entry["replicas"], entry.get("log_dirs") or [], strict=False):
            if log_dir != ANY_LOG_DIR:
                out[(entry["topic"], entry["partition"], broker)] = log_dir
    return out


@dataclass(frozen=True)
class DirInfo:
    """Kafka's ``ReplicaLogDirInfo``: where a replica lives now, and where its future log is."""

    current: str | None = None
    future: str | None = None


@dataclass
class LogDirMoves:
    """The plan's log-dir moves and how the tool reports failures: ``fail`` for Kafka's
    "Error: <message>" kind, ``fail_terse`` for a TerseException's message alone."""

    replicas: dict[Replica, str]
    fail: Callable[[str], Exception]
    fail_terse: Callable[[str], Exception]
    throttle: int = -1
    timeout_ms: int = 10_000
    sleep: Callable[[float], None] = field(default=time.sleep)
    clock: Callable[[], float] = field(default=time.monotonic)

    # --- --execute ----------------------------------------------------------------------------------

    def set_throttle(self, client: AdminClient, echo: Any, *, warned: bool) -> None:
        """Kafka's ``modifyLogDirThrottle``: on every broker with a replica to move. The warning to
        run --verify is printed once, by whichever throttle comes first."""
        if self.throttle < 0:
            return
        if not warned:
            echo("Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
                 "throttle is removed.")
        A = IncrementalAlterConfigsRequest.AlterConfigsResource
        C = A.AlterableConfig
        for broker in sorted({r[2] for r in self.replicas}):
            resp = client.send(IncrementalAlterConfigsRequest, dict(resources=[A(
                resource_type=RESOURCE_BROKER, resource_name=str(broker),
                configs=[C(name=LOG_DIR_THROTTLE, config_operation=OP_SET, value=str(self.throttle))])],
                validate_only=False), node_id=broker)
            result = resp.responses[0]
            if result.error_code:
                raise self.fail(result.error_message or ErrorCode(result.error_code).name)
        echo(f"The replica-alter-dir throttle limit was set to {self.throttle} B/s")

    def execute(self, client: AdminClient, echo: Any) -> None:
        """Kafka's ``executeMoves``: AlterReplicaLogDirs until every replica took it or the timeout."""
        self.start_moves(client, dict(self.replicas), echo)

    def start_moves(self, client: AdminClient, wanted: Mapping[Replica, str], echo: Any) -> None:
        started = self.clock()
        pending = dict(wanted)
        while True:
            done = self._alter(client, pending)
            for r in sorted(done, key=_order):
                # Kafka's format string ends in a space before the line end.
                echo(f"Successfully started moving log directory to {pending[r]} for replica {r[0]}-{r[1]} "
                     f"with broker {r[2]} ")
            for r in done:
                del pending[r]
            if not pending:
                return
            if (self.clock() - started) * 1000 >= self.timeout_ms:
                names = ",".join(replica_name(r) for r in sorted(pending, key=_order))
                raise self.fail_terse(f"Timed out before log directory move{'' if len(pending) == 1 else 's'} "
                                      f"could be started for: {names}")
            self.sleep(RETRY_S)

    def _alter(self, client: AdminClient, wanted: Mapping[Replica, str]) -> set[Replica]:
        """One AlterReplicaLogDirs per broker (kafka-python's and Kafka's admin clients group them so);
        the replicas that took it. REPLICA_NOT_AVAILABLE is "not yet"; any other error ends the tool."""
        D = AlterReplicaLogDirsRequest.AlterReplicaLogDir
        T = D.AlterReplicaLogDirTopic
        by_broker: dict[int, dict[str, dict[str, list[int]]]] = {}
        for (topic, partition, broker), log_dir in wanted.items():
            by_broker.setdefault(broker, {}).setdefault(log_dir, {}).setdefault(topic, []).append(partition)
        done: set[Replica] = set()
        failed: list[Replica] = []
        for broker, dirs in sorted(by_broker.items()):
            resp = client.send(AlterReplicaLogDirsRequest, dict(dirs=[
                D(path=path, topics=[T(name=t, partitions=sorted(ps)) for t, ps in sorted(topics.items())])
                for path, topics in dirs.items()]), node_id=broker)
            for t in resp.results:
                for p in t.partitions:
                    r = (t.topic_name, p.partition_index, broker)
                    if p.error_code == ErrorCode.NONE:
                        done.add(r)
                    elif p.error_code != ErrorCode.REPLICA_NOT_AVAILABLE:
                        failed.append(r)
        if failed:
            raise self.fail(f"Failed to alter dir for {replica_name(min(failed, key=_order))}")
        return done

    # --- --verify and --cancel ------------------------------------------------------------------------

    def describe(self, client: AdminClient) -> dict[Replica, DirInfo]:
        """Kafka's ``describeReplicaLogDirs``: each broker's DescribeLogDirs of its replicas; dirs that
        are offline (KAFKA_STORAGE_ERROR) hold nothing it can see."""
        out: dict[Replica, DirInfo] = {}
        by_broker: dict[int, dict[str, list[int]]] = {}
        for topic, partition, broker in self.replicas:
            by_broker.setdefault(broker, {}).setdefault(topic, []).append(partition)
        T = DescribeLogDirsRequest.DescribableLogDirTopic
        for broker, topics in sorted(by_broker.items()):
            resp = client.send(DescribeLogDirsRequest, dict(
                topics=[T(topic=t, partitions=sorted(ps)) for t, ps in sorted(topics.items())]), node_id=broker)
            infos = {(t, p, broker): DirInfo() for t, ps in topics.items() for p in ps}
            for d in resp.results:
                if d.error_code == ErrorCode.KAFKA_STORAGE_ERROR:
                    continue
                if d.error_code:
                    raise self.fail(f"The error {ErrorCode(d.error_code).name} for log directory {d.log_dir} in the "
                                    f"response from broker {broker} is illegal")
                for t in d.topics:
                    for p in t.partitions:
                        r = (t.name, p.partition_index, broker)
                        if r not in infos:
                            continue
                        old = infos[r]
                        infos[r] = DirInfo(old.current, d.log_dir) if p.is_future_key else DirInfo(d.log_dir, old.future)
            out.update(infos)
        return out

    def verify_lines(self, client: AdminClient) -> tuple[list[str], bool]:
        """Kafka's ``replicaMoveStatesToString`` lines, and whether any move is still under way."""
        infos = self.describe(client) if self.replicas else {}
        lines: list[str] = []
        ongoing = False
        for r in sorted(self.replicas, key=_order):
            target = self.replicas[r]
            tp = f"{r[0]}-{r[1]}"
            info = infos.get(r)
            if info is None:
                ongoing = True
                lines.append(f"Partition {tp} cannot be found in any live log directory on broker {r[2]}.")
            elif info.current is None:
                ongoing = True
                lines.append(f"Partition {tp} is not found in any live log dir on broker {r[2]}. There is likely an "
                             f"offline log directory on the broker.")
            elif info.future is not None:
                ongoing = True
                if info.future == target:
                    lines.append(f"Reassignment of replica {replica_name(r)} is still in progress.")
                else:
                    lines.append(f"Partition {tp} on broker {r[2]} is being moved to log dir {info.future} instead "
                                 f"of {target}.")
            elif info.current == target:
                lines.append(f"Reassignment of replica {replica_name(r)} completed successfully.")
            else:
                lines.append(f"Partition {tp} on broker {r[2]} is not being moved from log dir {info.current} to "
                             f"{target}.")
        return lines, ongoing

    def cancel(self, client: AdminClient, echo: Any) -> None:
        """Kafka's ``cancelAssignment``, second half: replicas still moving go back to their current dir."""
        infos = self.describe(client)
        back = {r: info.current for r, info in infos.items() if info.current is not None and info.future is not None}
        if not back:
            click.echo("None of the specified partition moves are active.", nl=False)  # Kafka's print: no line end
            return
        self.start_moves(client, {r: d for r, d in back.items() if d is not None}, echo)
