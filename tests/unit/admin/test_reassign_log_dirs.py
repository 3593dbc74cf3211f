"""The reassign tool's log-dir moves against Kafka 3.9's ReassignPartitionsCommand (RPC below):
``parsePartitionReassignmentData`` (which replicas get a dir), ``executeMoves`` (retry while
REPLICA_NOT_AVAILABLE, every 100 ms, until ``--timeout``; its lines), ``findLogDirMoveStates`` and
``replicaMoveStatesToString`` (the ``--verify`` lines), ``cancelAssignment`` (moves go back to the
current dir), ``modifyLogDirThrottle``. Replicas print as Java's ``TopicPartitionReplica``
(``topic-partition-broker``).
"""

from __future__ import annotations

from types import SimpleNamespace as NS
from typing import Any

import pytest
from kafka.protocol.admin import (
    AlterReplicaLogDirsRequest,
    DescribeLogDirsRequest,
    IncrementalAlterConfigsRequest,
)

from headwater.admin.replica_log_dirs import LogDirMoves, parse_log_dirs
from headwater.protocol.errors import ErrorCode


class Failed(Exception):
    pass


class Terse(Exception):
    pass


class FakeClient:
    """Answers AlterReplicaLogDirs from ``codes`` (a list per replica, the last repeated) and
    DescribeLogDirs from ``dirs`` (broker -> dir -> [(topic, partition, is_future)])."""

    def __init__(self) -> None:
        self.codes: dict[tuple[str, int, int], list[int]] = {}
        self.dirs: dict[int, dict[str, list[tuple[str, int, bool]]]] = {}
        self.sent: list[tuple[str, int | None, dict[str, Any]]] = []

    def send(self, request_cls: Any, fields: dict[str, Any], *, node_id: int | None = None) -> Any:
        self.sent.append((request_cls.__name__, node_id, fields))
        if request_cls is AlterReplicaLogDirsRequest:
            assert node_id is not None
            results = []
            for d in fields["dirs"]:
                for t in d.topics:
                    parts = []
                    for p in t.partitions:
                        codes = self.codes[(t.name, p, node_id)]
                        parts.append(NS(partition_index=p, error_code=codes.pop(0) if len(codes) > 1 else codes[0]))
                    results.append(NS(topic_name=t.name, partitions=parts))
            return NS(results=results)
        if request_cls is DescribeLogDirsRequest:
            assert node_id is not None
            return NS(results=[NS(log_dir=d, error_code=0, topics=[
                NS(name=t, partitions=[NS(partition_index=p, is_future_key=f)]) for t, p, f in entries])
                for d, entries in self.dirs.get(node_id, {}).items()])
        assert request_cls is IncrementalAlterConfigsRequest
        return NS(responses=[NS(error_code=0, error_message=None)])


def moves(replicas: dict[tuple[str, int, int], str], **kw: Any) -> LogDirMoves:
    clock = [0.0]

    def sleep(s: float) -> None:
        clock[0] += s

    return LogDirMoves(replicas, Failed, Terse, sleep=sleep, clock=lambda: clock[0], **kw)


def test_only_dirs_other_than_any_are_moves() -> None:
    text = ('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","/d/b"]},'
            '{"topic":"u","partition":3,"replicas":[3]}]}')
    assert parse_log_dirs(text) == {("t", 0, 2): "/d/b"}


def test_execute_retries_a_replica_not_there_yet_then_prints_kafkas_line() -> None:
    client = FakeClient()
    client.codes = {("t", 0, 2): [ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.NONE],
                    ("t", 1, 1): [ErrorCode.NONE]}
    out: list[str] = []
    moves({("t", 0, 2): "/d/b", ("t", 1, 1): "/d/a"}).execute(client, out.append)  # type: ignore[arg-type]
    # RPC.executeMoves: "...for replica %s-%s with broker %s %n" (a space before the line end), sorted
    # by broker, then topic and partition.
    assert out == ["Successfully started moving log directory to /d/a for replica t-1 with broker 1 ",
                   "Successfully started moving log directory to /d/b for replica t-0 with broker 2 "]
    assert sum(1 for name, _n, _f in client.sent if name == "AlterReplicaLogDirsRequest") == 1 + 3


def test_execute_times_out_with_kafkas_terse_message() -> None:
    client = FakeClient()
    client.codes = {("t", 0, 2): [ErrorCode.REPLICA_NOT_AVAILABLE], ("t", 1, 2): [ErrorCode.REPLICA_NOT_AVAILABLE]}
    with pytest.raises(Terse, match=r"^Timed out before log directory moves could be started for: t-0-2,t-1-2$"):
        moves({("t", 0, 2): "/d/b", ("t", 1, 2): "/d/b"}, timeout_ms=1000).execute(client, print)  # type: ignore[arg-type]


def test_any_other_error_fails_the_tool() -> None:
    client = FakeClient()
    client.codes = {("t", 0, 2): [ErrorCode.LOG_DIR_NOT_FOUND]}
    with pytest.raises(Failed, match=r"^Failed to alter dir for t-0-2$"):
        moves({("t", 0, 2): "/nowhere"}).execute(client, print)  # type: ignore[arg-type]


def test_the_throttle_is_set_on_the_brokers_of_the_moves() -> None:
    client = FakeClient()
    out: list[str] = []
    moves({("t", 0, 2): "/d/b", ("t", 0, 3): "/d/b"}, throttle=1000).set_throttle(client, out.append,  # type: ignore[arg-type]
                                                                                 warned=False)
    assert out == ["Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
                   "throttle is removed.", "The replica-alter-dir throttle limit was set to 1000 B/s"]
    assert [n for _name, n, _f in client.sent] == [2, 3]
    config = client.sent[0][2]["resources"][0].configs[0]
    assert (config.name, config.value) == ("replica.alter.log.dirs.io.max.bytes.per.second", "1000")


def test_verify_lines_are_kafkas_move_states() -> None:
    client = FakeClient()
    client.dirs = {1: {"/d/a": [("done", 0, False), ("cancelled", 0, False), ("moving", 0, False),
                                ("elsewhere", 0, False)],
                       "/d/b": [("moving", 0, True)],
                       "/d/c": [("elsewhere", 0, True)]}}
    plan = {("done", 0, 1): "/d/a", ("cancelled", 0, 1): "/d/b", ("moving", 0, 1): "/d/b",
            ("elsewhere", 0, 1): "/d/b", ("missing", 0, 1): "/d/b"}
    lines, ongoing = moves(plan).verify_lines(client)  # type: ignore[arg-type]
    assert ongoing
    assert lines == [
        "Partition cancelled-0 on broker 1 is not being moved from log dir /d/a to /d/b.",
        "Reassignment of replica done-0-1 completed successfully.",
        "Partition elsewhere-0 on broker 1 is being moved to log dir /d/c instead of /d/b.",
        "Partition missing-0 is not found in any live log dir on broker 1. There is likely an offline log "
        "directory on the broker.",
        "Reassignment of replica moving-0-1 is still in progress.",
    ]
    done, ongoing = moves({("done", 0, 1): "/d/a"}).verify_lines(client)  # type: ignore[arg-type]
    assert not ongoing and done == ["Reassignment of replica done-0-1 completed successfully."]


def test_cancel_sends_moving_replicas_back_to_their_current_dir() -> None:
    client = FakeClient()
    client.dirs = {1: {"/d/a": [("moving", 0, False), ("done", 0, False)], "/d/b": [("moving", 0, True)]}}
    client.codes = {("moving", 0, 1): [ErrorCode.NONE]}
    out: list[str] = []
    moves({("moving", 0, 1): "/d/b", ("done", 0, 1): "/d/a"}).cancel(client, out.append)  # type: ignore[arg-type]
    assert out == ["Successfully started moving log directory to /d/a for replica moving-0 with broker 1 "]
    sent = [f for name, _n, f in client.sent if name == "AlterReplicaLogDirsRequest"]
    assert [(d.path, [(t.name, t.partitions) for t in d.topics]) for d in sent[0]["dirs"]] == [("/d/a", [("moving", [0])])]
