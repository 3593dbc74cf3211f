"""``headwater leader-election`` against Kafka 3.9's kafka-leader-election.sh, without a cluster: options
and their checks, help, the JSON file, the request it sends and the lines and exit codes of the
results. Expectations come from ``tools/src/main/java/org/apache/kafka/tools/LeaderElectionCommand.java``
(LEC below) and its ``LeaderElectionCommandErrorTest.java`` / ``LeaderElectionCommandTest.java``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kafka.protocol.admin import ElectionType, ElectLeadersResponse

from headwater.admin import leader_election as tool
from headwater.admin.client import AdminError
from headwater.admin.jopt import JoptOption, help_table
from headwater.admin.leader_election import ElectionError, leader_election, parse_election_json
from headwater.cli import main
from headwater.protocol.errors import ErrorCode

DATA = Path(__file__).parent / "data"
HELP = ("This tool attempts to elect a new leader for a set of topic partitions. The type of elections supported "
        "are preferred replicas and unclean replicas.")  # LEC.LeaderElectionCommandOptions.maybePrintHelpOrVersion


def test_option_table_is_kafkas() -> None:
    # jopt-simple 5.0.4's BuiltinHelpFormatter output for LEC's options (--command-config is ours)
    table = help_table(p.doc() for p in leader_election.params
                       if isinstance(p, JoptOption) and p.long_name != "command-config")
    assert table == (DATA / "kafka_leader_election_help.txt").read_text()


@pytest.mark.parametrize("args", [[], ["--help"], ["--bootstrap-server", "a:1", "--help"]])
def test_help_goes_to_stderr_and_exits_1(args: list[str]) -> None:
    result = CliRunner().invoke(leader_election, args)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr.startswith(HELP + "\nOption ")


def test_registered_as_leader_election() -> None:
    result = CliRunner().invoke(main, ["leader-election", "--version"])
    assert (result.exit_code, result.stdout) == (0, "3.9.0\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [  # LeaderElectionCommandErrorTest and LEC.validate, in its order; no option table after these
        (["--bootstrap-server", "nohost:9092", "--election-type", "unclean", "--topic", "some-topic"],
         "Missing required option(s): partition"),
        (["--bootstrap-server", "nohost:9092", "--election-type", "unclean", "--all-topic-partitions",
          "--partition", "0"], "Option partition is only allowed if topic is used"),
        (["--bootstrap-server", "nohost:9092", "--topic", "some-topic", "--partition", "0"],
         "Missing required option(s): election-type"),
        (["--topic", "some-topic"], "Missing required option(s): bootstrap-server, election-type"),
        (["--bootstrap-server", "nohost:9092", "--election-type", "preferred"],
         "One and only one of the following options is required: topic, all-topic-partitions, path-to-json-file"),
        (["--bootstrap-server", "nohost:9092", "--election-type", "preferred", "--all-topic-partitions",
          "--path-to-json-file", "x.json"],
         "One and only one of the following options is required: topic, all-topic-partitions, path-to-json-file"),
        # jopt-simple's own messages (ExceptionMessages.properties), thrown while parsing
        (["--bootstrap-server", "nohost:9092", "--election-type", "leader", "--all-topic-partitions"],
         "Cannot parse argument 'leader' of option election-type"),
        (["--bootstrap-server", "nohost:9092", "--election-type", "preferred", "--topic", "t", "--partition", "one"],
         "Cannot parse argument 'one' of option partition"),
        (["--bootstrap-server", "nohost:9092", "--unclean"], "unclean is not a recognized option"),
        (["--bootstrap-server"], "Option bootstrap-server requires an argument"),
    ],
)
def test_option_errors_go_to_stderr_and_exit_1(args: list[str], message: str) -> None:
    result = CliRunner().invoke(leader_election, args)
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", message + "\n")


@pytest.mark.parametrize(
    ("text", "message"),
    [  # LEC.parseReplicaElectionData / topicPartitions / toTopicPartition
        ("{", "Replica election data is empty"),
        ("", "Replica election data is empty"),
        ('{"version": 1}', 'Replica election data is missing "partitions" field'),
        ("[1]", "com.fasterxml.jackson.databind.JsonMappingException: Expected JSON object, received [1]"),
        ('{"partitions": 3}', "com.fasterxml.jackson.databind.JsonMappingException: Expected JSON array, received 3"),
        ('{"partitions": [{"topic": "t"}]}',
         "com.fasterxml.jackson.databind.JsonMappingException: No such field exists: `partition`"),
        ('{"partitions": [{"topic": "t", "partition": "0"}]}',
         'com.fasterxml.jackson.databind.JsonMappingException: Expected `Integer` value, received "0"'),
        ('{"partitions": [{"topic": "t", "partition": 1}, {"topic": "t", "partition": 1}, {"topic": "a", '
         '"partition": 0}, {"topic": "a", "partition": 0}]}',
         "Replica election data contains duplicate partitions: [a-0, t-1]"),  # a Set's toString()
    ],
)
def test_bad_json_files(text: str, message: str) -> None:
    with pytest.raises(ElectionError) as err:
        parse_election_json(text)
    assert str(err.value) == message


def test_json_file() -> None:
    doc = {"partitions": [{"topic": "foo", "partition": 1}, {"topic": "foobar", "partition": 2}]}
    assert parse_election_json(json.dumps(doc)) == {("foo", 1), ("foobar", 2)}
    assert parse_election_json('{"partitions": []}') == set()


def test_missing_json_file(tmp_path: Path) -> None:
    # Utils.readFileAsString's NoSuchFileException, wrapped in a RuntimeException: its toString()
    missing = tmp_path / "nope.json"
    result = CliRunner().invoke(leader_election, ["--bootstrap-server", "a:1", "--election-type", "preferred",
                                                  "--path-to-json-file", str(missing)])
    assert (result.exit_code, result.stderr) == (1, f"java.nio.file.NoSuchFileException: {missing}\n")


# --- the election, against a fake controller --------------------------------------------------------


R = ElectLeadersResponse
P = R.ReplicaElectionResult.PartitionResult


def response(results: dict[tuple[str, int], tuple[int, str | None]], error_code: int = 0) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), (code, message) in results.items():
        by_topic.setdefault(topic, []).append(P(partition_id=partition, error_code=code, error_message=message))
    return R(version=2, throttle_time_ms=0, error_code=error_code,
             replica_election_results=[R.ReplicaElectionResult(topic=t, partition_result=ps) for t, ps in by_topic.items()])


class FakeClient:
    sent: list[dict[str, Any]] = []
    answer: Any = None

    def __enter__(self) -> FakeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def send_to_controller(self, request_cls: Any, fields: dict[str, Any], errors_of: Any) -> Any:
        assert request_cls.API_KEY == 43
        FakeClient.sent.append(fields)
        if isinstance(FakeClient.answer, Exception):
            raise FakeClient.answer
        return FakeClient.answer


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> type[FakeClient]:
    FakeClient.sent = []
    FakeClient.answer = response({})
    monkeypatch.setattr(tool, "connect", lambda *_a: FakeClient())
    return FakeClient


def run(*args: str) -> Any:
    return CliRunner().invoke(leader_election, ["--bootstrap-server", "b:9092", *args])


def test_preferred_election_of_one_partition(fake: type[FakeClient]) -> None:
    fake.answer = response({("t", 0): (0, None)})
    result = run("--election-type", "preferred", "--topic", "t", "--partition", "0")
    assert (result.exit_code, result.stderr) == (0, "")
    # LEC.electLeaders: ElectionType's name in the line
    assert result.stdout == "Successfully completed leader election (PREFERRED) for partitions t-0\n"
    [fields] = fake.sent
    assert fields["election_type"] == ElectionType.PREFERRED
    assert [(tp.topic, tp.partitions) for tp in fields["topic_partitions"]] == [("t", [0])]


def test_election_type_ignores_case_and_all_partitions_names_none(fake: type[FakeClient]) -> None:
    # jopt-simple's EnumConverter matches names ignoring case; --all-topic-partitions sends null
    result = run("--election-type", "UnClean", "--all-topic-partitions")
    assert (result.exit_code, result.stdout) == (0, "")
    [fields] = fake.sent
    assert fields["election_type"] == ElectionType.UNCLEAN and fields["topic_partitions"] is None


def test_mixed_results_print_each_kind_and_exit_1(fake: type[FakeClient], tmp_path: Path) -> None:
    # LEC.electLeaders: successes, then no-ops (ElectionNotNeededException), then one line per failure with
    # the exception's toString(); then the AdminCommandFailedException "N replica(s) could not be elected".
    fake.answer = response({("t", 1): (0, None), ("t", 0): (0, None), ("t", 2): (ErrorCode.ELECTION_NOT_NEEDED, None),
                            ("gone", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."),
                            ("t", 3): (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, None)})
    plan = tmp_path / "p.json"
    plan.write_text(json.dumps({"partitions": [{"topic": "t", "partition": p} for p in range(4)]
                                + [{"topic": "gone", "partition": 0}]}))
    result = run("--election-type", "preferred", "--path-to-json-file", str(plan))
    assert result.exit_code == 1
    assert result.stdout == (
        "Successfully completed leader election (PREFERRED) for partitions t-0, t-1\n"
        "Valid replica already elected for partitions t-2\n"
        "Error completing leader election (PREFERRED) for partition: gone-0: "
        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: The partition does not exist.\n"
        "Error completing leader election (PREFERRED) for partition: t-3: "
        "org.apache.kafka.common.errors.PreferredLeaderNotAvailableException: The preferred leader was not available.\n")
    assert result.stderr == "2 replica(s) could not be elected\n"
    [fields] = fake.sent
    assert sorted((tp.topic, tp.partitions) for tp in fields["topic_partitions"]) == [("gone", [0]), ("t", [0, 1, 2, 3])]


def test_nothing_to_elect_is_success(fake: type[FakeClient]) -> None:
    fake.answer = response({("t", 0): (ErrorCode.ELECTION_NOT_NEEDED, None)})
    result = run("--election-type", "preferred", "--topic", "t", "--partition", "0")
    assert (result.exit_code, result.stdout) == (0, "Valid replica already elected for partitions t-0\n")


def test_not_authorized(fake: type[FakeClient]) -> None:
    # LEC.electLeaders: a ClusterAuthorizationException prints its line on stdout, then fails
    fake.answer = response({}, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    result = run("--election-type", "preferred", "--all-topic-partitions")
    assert (result.exit_code, result.stdout, result.stderr) == (
        1, "Not authorized to perform leader election\n", "Not authorized to perform leader election\n")


def test_unreachable_cluster_is_a_timeout(fake: type[FakeClient]) -> None:
    # LeaderElectionCommandErrorTest.testInvalidBroker: the call times out
    fake.answer = AdminError("no broker answered: cannot connect to b:9092: Connection refused")
    result = run("--election-type", "unclean", "--all-topic-partitions")
    assert result.exit_code == 1
    assert result.stdout == "Timeout waiting for election results\n"
    assert result.stderr.startswith("Timeout waiting for election results\n")
