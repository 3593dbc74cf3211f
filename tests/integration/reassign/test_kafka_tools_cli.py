"""``headwater leader-election`` and ``headwater reassign`` on a real cluster, line for line as Kafka 3.9's
kafka-leader-election.sh and kafka-reassign-partitions.sh print them.

Expected lines and exit codes: ``tools/src/main/java/org/apache/kafka/tools/LeaderElectionCommand.java``
(``electLeaders``: successes, "Valid replica already elected", one "Error completing" line per failure,
then "N replica(s) could not be elected" on stderr and exit 1) and its ``LeaderElectionCommandTest.java``;
``tools/src/main/java/org/apache/kafka/tools/reassign/ReassignPartitionsCommand.java`` (``verifyAssignment``,
``cancelAssignment``). The controller's per-partition answers are those of Kafka's ZooKeeper controller
(``KafkaController.processReplicaLeaderElection``: "The partition does not exist." for an unknown one;
KafkaApis leaves partitions needing no election out when the request names none).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cluster_support import LocalCluster, start_cluster, wait_for

from headwater.cli import main as headwater_cli

NO_AUTO = {"auto.leader.rebalance.enable": "false"}  # the election must be ours, not the rebalance's
UNKNOWN = "org.apache.kafka.common.errors.UnknownTopicOrPartitionException"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = start_cluster(tmp_path_factory.mktemp("kafka-tools"), 3, NO_AUTO)
    try:
        c.wait_registered({1, 2, 3})
        out = cli("topics", "--bootstrap-server", c.bootstrap, "--create", "--topic", "el",
                  "--replica-assignment", "1:2:3,2:3:1,3:1:2")
        assert out.exit_code == 0, out.output
        c.wait_full_isr(["el"], 3)
        yield c
    finally:
        c.stop()


def cli(*args: str) -> Any:
    return CliRunner().invoke(headwater_cli, list(args))


def leader(cluster: LocalCluster, partition: int) -> int:
    return int(cluster.partition_states("el")[partition]["leader"])


def elect(cluster: LocalCluster, *args: str) -> Any:
    return cli("leader-election", "--bootstrap-server", cluster.bootstrap, *args)


def test_preferred_election_after_the_leader_moved_away(cluster: LocalCluster) -> None:
    # Broker 1 fails and comes back; with the automatic rebalance off, el-0 stays led by another broker.
    cluster.brokers[1].kill9()
    wait_for(lambda: leader(cluster, 0) not in (-1, 1), 30, "el-0 to move away from broker 1")
    cluster.restart(1)
    cluster.wait_registered({1})
    cluster.wait_full_isr(["el"], 3)
    assert leader(cluster, 0) != 1

    result = elect(cluster, "--election-type", "preferred", "--topic", "el", "--partition", "0")
    assert (result.exit_code, result.stderr) == (0, ""), result.output
    assert result.stdout == "Successfully completed leader election (PREFERRED) for partitions el-0\n"
    assert leader(cluster, 0) == 1

    # LeaderElectionCommandTest.testElectionResultOutput: the second time, nothing to do
    result = elect(cluster, "--election-type", "PREFERRED", "--topic", "el", "--partition", "0")
    assert (result.exit_code, result.stdout) == (0, "Valid replica already elected for partitions el-0\n")


def test_json_file_with_an_unknown_partition_fails_with_exit_1(cluster: LocalCluster, tmp_path: Path) -> None:
    plan = tmp_path / "elect.json"
    plan.write_text(json.dumps({"partitions": [{"topic": "el", "partition": 1}, {"topic": "el", "partition": 2},
                                               {"topic": "missing", "partition": 0}]}))
    result = elect(cluster, "--election-type", "preferred", "--path-to-json-file", str(plan))
    assert result.exit_code == 1, result.output
    assert result.stdout == (
        "Valid replica already elected for partitions el-1, el-2\n"
        f"Error completing leader election (PREFERRED) for partition: missing-0: {UNKNOWN}: "
        "The partition does not exist.\n")
    assert result.stderr == "1 replica(s) could not be elected\n"


def test_all_partitions_when_every_leader_is_right_prints_nothing(cluster: LocalCluster) -> None:
    wait_for(lambda: all(leader(cluster, p) == p + 1 for p in range(3)), 30, "every preferred leader to lead")
    for kind in ("preferred", "unclean"):
        result = elect(cluster, "--election-type", kind, "--all-topic-partitions")
        assert (result.exit_code, result.stdout, result.stderr) == (0, "", ""), (kind, result.output)


def test_exit_code_and_streams_of_the_real_process(cluster: LocalCluster) -> None:
    proc = subprocess.run([sys.executable, "-m", "headwater", "leader-election", "--bootstrap-server",
                           cluster.bootstrap, "--election-type", "preferred", "--topic", "missing", "--partition", "3"],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1
    assert proc.stdout == (f"Error completing leader election (PREFERRED) for partition: missing-3: {UNKNOWN}: "
                           "The partition does not exist.\n")
    assert proc.stderr == "1 replica(s) could not be elected\n"


def test_reassign_verify_with_an_unknown_topic(cluster: LocalCluster, tmp_path: Path) -> None:
    # verifyAssignment: the unknown topic's partition has no replicas, the others keep theirs; then the
    # (empty) report of log-directory moves.
    lines = {line.partition: line for line in cluster.describe("el")}
    replicas = list(lines[0].replicas)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "el", "partition": 0, "replicas": replicas},
        {"topic": "el", "partition": 1, "replicas": list(reversed(replicas))},
        {"topic": "gone", "partition": 0, "replicas": [1, 2, 3]}]}))
    result = cli("reassign", "--bootstrap-server", cluster.bootstrap, "--verify", "--preserve-throttles",
                 "--reassignment-json-file", str(plan))
    assert (result.exit_code, result.stderr) == (0, ""), result.output
    current_1 = ",".join(map(str, lines[1].replicas))
    assert result.stdout == (
        "Status of partition reassignment:\n"
        "Reassignment of partition el-0 is completed.\n"
        f"There is no active reassignment of partition el-1, but replica set is {current_1} rather than "
        f"{','.join(map(str, reversed(replicas)))}.\n"
        "There is no active reassignment of partition gone-0, but replica set is  rather than 1,2,3.\n"
        "\n")

    # cancelAssignment with nothing moving; its log-dir line has no line end
    result = cli("reassign", "--bootstrap-server", cluster.bootstrap, "--cancel", "--preserve-throttles",
                 "--reassignment-json-file", str(plan))
    assert (result.exit_code, result.stdout) == (0, "None of the specified partition reassignments are active.\n"
                                                    "None of the specified partition moves are active.")
