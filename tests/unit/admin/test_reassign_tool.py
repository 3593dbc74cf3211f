"""The reassign tool against Kafka 3.9's kafka-reassign-partitions.sh: JSON handling, move map and
throttle values, usage errors, help, where errors are printed and the exact lines of --verify and
--cancel. Expectations come from ``tools/src/main/java/org/apache/kafka/tools/reassign/
ReassignPartitionsCommand.java`` (RPC below), its ``ReassignPartitionsCommandOptions.java`` and
``ReassignPartitionsCommandArgsTest.java``, and ``server-common/.../util/CommandLineUtils.java``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from headwater.admin import reassign as reassign_module
from headwater.admin.jopt import JoptOption, help_table
from headwater.admin.reassign import (
    Ongoing,
    ToolError,
    format_reassignment_json,
    move_map,
    parse_reassignment_data,
    parse_reassignment_json,
    parse_topics_json,
    reassign,
    throttled_replicas,
)
from headwater.protocol.errors import ErrorCode

DATA = Path(__file__).parent / "data"
HELP_TEXT = "This tool helps to move topic partitions between replicas."  # RPC.HELP_TEXT


def test_output_json_is_kafkas_compact_sorted_form() -> None:
    text = format_reassignment_json({("bar", 1): [7, 8], ("bar", 0): [8, 7], ("abc", 0): [1]})
    assert text == ('{"version":1,"partitions":[{"topic":"abc","partition":0,"replicas":[1],"log_dirs":["any"]},'
                    '{"topic":"bar","partition":0,"replicas":[8,7],"log_dirs":["any","any"]},'
                    '{"topic":"bar","partition":1,"replicas":[7,8],"log_dirs":["any","any"]}]}')
    assert parse_reassignment_json(text) == {("abc", 0): [1], ("bar", 0): [8, 7], ("bar", 1): [7, 8]}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        # RPC.parseExecuteAssignmentArgs, in its order
        ({"version": 1, "partitions": []}, "Partition reassignment list cannot be empty"),
        ({"partitions": [{"topic": "foo", "partition": 0, "replicas": [1, 1]},
                         {"topic": "foo", "partition": 1, "replicas": []}]}, "Partition replica list cannot be empty"),
        ({"version": 1, "partitions": [{"topic": "foo", "partition": 0, "replicas": [1]},
                                       {"topic": "foo", "partition": 0, "replicas": [2]}]},
         "Partition reassignment contains duplicate topic partitions: foo-0"),
        ({"version": 1, "partitions": [{"topic": "foo", "partition": 0, "replicas": [0, 0, 1]}]},
         "Partition replica lists may not contain duplicate entries: foo-0 contains multiple entries for 0"),
        # RPC.parsePartitionReassignmentData; a Java List's toString() for the lists
        ({"version": 2, "partitions": []}, "Not supported version field value 2"),
        ({"version": 1, "partitions": [{"topic": "foo", "partition": 1, "replicas": [1, 2], "log_dirs": ["any"]}]},
         "Size of replicas list [1, 2] is different from size of log dirs list [any] for partition foo-1"),
        # server-common's JsonObject.apply and DecodeJson
        ({"version": 1, "partitions": [{"topic": "foo", "replicas": [1]}]}, "No such field exists: `partition`"),
        ({"partitions": [{"topic": 5, "partition": 0, "replicas": [1]}]}, "Expected `String` value, received 5"),
        ({"partitions": [{"topic": "foo", "partition": "0", "replicas": [1]}]},
         'Expected `Integer` value, received "0"'),
        ({"partitions": [{"topic": "foo", "partition": 0, "replicas": 1}]},
         "Expected `JSON array` value, received 1"),
        ({"partitions": [7]}, "Expected JSON object, received 7"),
        ({"partitions": {"topic": "foo"}}, 'Expected JSON array, received {"topic":"foo"}'),
        ([1, 2], "Expected JSON object, received [1,2]"),
    ],
)
def test_bad_plans_get_kafkas_message(doc: object, message: str) -> None:
    with pytest.raises(ToolError) as err:
        parse_reassignment_json(json.dumps(doc))
    assert str(err.value) == message


def test_verify_and_cancel_read_the_file_without_executes_checks() -> None:
    # RPC.verifyAssignment / cancelAssignment call parsePartitionReassignmentData only: no partitions
    # field is an empty plan and duplicates are kept.
    assert parse_reassignment_data('{"version":1}') == []
    doc = '{"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[1,1]}]}'
    assert parse_reassignment_data(doc) == [(("t", 0), [1]), (("t", 0), [1, 1])]


def test_unparseable_plan_is_jacksons_exception() -> None:
    # RPC.parsePartitionReassignmentData wraps Jackson's JsonParseException in an AdminOperationException,
    # whose message is the cause's toString(); Json.tryParseFull has its own for an empty string.
    with pytest.raises(ToolError) as err:
        parse_reassignment_json("{not json")
    first, location = str(err.value).split("\n")
    assert first.startswith("com.fasterxml.jackson.core.JsonParseException: ")
    assert location == (" at [Source: REDACTED (`StreamReadFeature.INCLUDE_SOURCE_IN_LOCATION` disabled); "
                        "line: 1, column: 2]")
    with pytest.raises(ToolError) as err:
        parse_reassignment_json("")
    assert str(err.value) == ("com.fasterxml.jackson.core.JsonParseException: The input string shouldn't be empty\n"
                              " at [Source: UNKNOWN; byte offset: #UNKNOWN]")


def test_topics_json() -> None:
    # RPC.parseTopicsData: version defaults to 1, duplicates are kept (parseGenerateAssignmentArgs reports them)
    assert parse_topics_json('{"topics":[{"topic":"foo"},{"topic":"bar"}],"version":1}') == ["foo", "bar"]
    assert parse_topics_json('{"topics":[{"topic":"foo"},{"topic":"foo"}]}') == ["foo", "foo"]
    assert parse_topics_json('{"version":1}') == []
    with pytest.raises(ToolError, match=r"^Not supported version field value 3$"):
        parse_topics_json('{"topics":[],"version":3}')
    with pytest.raises(ToolError, match=r"^The input string is not a valid JSON$"):
        parse_topics_json("{")


def test_move_map_and_throttle_values() -> None:
    # foo-0 moves 1,2,3 -> 4,3,2; bar-1 is already moving (adding 5), not in the file.
    ongoing = {("bar", 1): Ongoing([5, 1, 2], [5], [1])}
    current = {("foo", 0): [1, 2, 3], ("bar", 1): [5, 1, 2]}
    moves = move_map(ongoing, current, {("foo", 0): [4, 3, 2]})
    assert moves == {("bar", 1): ([1, 2], [5]), ("foo", 0): ([1, 2, 3], [4])}
    assert throttled_replicas(moves) == {"bar": ("1:1,1:2", "1:5"), "foo": ("0:1,0:2,0:3", "0:4")}


def test_throttle_values_are_in_string_order() -> None:
    moves = {("t", 10): ([2], [1]), ("t", 9): ([3], [1])}
    leaders, followers = throttled_replicas(moves)["t"]
    assert leaders == "10:2,9:3"  # lexicographic, as Kafka's TreeSet of strings
    assert followers == "10:1,9:1"


# --- the command line: usage errors (stderr, then the option table, exit 1) -----------------------


def _kafka_table() -> str:
    """Our option table without headwater's two extra options is Kafka's, byte for byte: the expected
    text is jopt-simple 5.0.4's BuiltinHelpFormatter output for ReassignPartitionsCommandOptions."""
    extra = ("watch", "bootstrap-controller", "metrics-url")
    return help_table(p.doc() for p in reassign.params if isinstance(p, JoptOption) and p.long_name not in extra)


def test_option_table_is_kafkas() -> None:
    assert _kafka_table() == (DATA / "kafka_reassign_partitions_help.txt").read_text()


@pytest.mark.parametrize("args", [[], ["--help"], ["--list", "--bootstrap-server", "a:1", "--help"]])
def test_help_goes_to_stderr_and_exits_1(args: list[str]) -> None:
    # CommandLineUtils.maybePrintHelpOrVersion: no arguments or --help -> printUsageAndExit(HELP_TEXT)
    result = CliRunner().invoke(reassign, args)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith(HELP_TEXT + "\nOption                                  Description")
    assert "--watch" in result.stderr and "--reassignment-json-file <String:" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [  # ReassignPartitionsCommandArgsTest
        ([" "], "Command must include exactly one action: --generate, --execute, --verify, --cancel, --list"),
        (["--bootstrap-server", "a:1", "--execute", "--verify", "--reassignment-json-file", "x.json"],
         "Command must include exactly one action: --generate, --execute, --verify, --cancel, --list"),
        (["--list"], "Please specify --bootstrap-server"),
        (["--cancel"], "Please specify --bootstrap-server"),
        (["--list", "--bootstrap-server", "a:1", "--bootstrap-controller", "b:1"],
         "Please don't specify both --bootstrap-server and --bootstrap-controller"),
        (["--bootstrap-server", "a:1", "--execute"], 'Missing required argument "[reassignment-json-file]"'),
        (["--bootstrap-server", "a:1", "--generate"], 'Missing required argument "[topics-to-move-json-file]"'),
        (["--bootstrap-server", "a:1", "--topics-to-move-json-file", "x.json", "--generate"],
         'Missing required argument "[broker-list]"'),
        (["--cancel", "--bootstrap-server", "a:1", "--preserve-throttles"],
         'Missing required argument "[reassignment-json-file]"'),
        (["--bootstrap-server", "a:1", "--execute", "--reassignment-json-file", "x.json",
          "--topics-to-move-json-file", "x.json"],
         'Option "[topics-to-move-json-file]" can\'t be used with action "[execute]"'),
        (["--bootstrap-server", "a:1", "--execute", "--reassignment-json-file", "x.json", "--broker-list", "1,2"],
         'Option "[broker-list]" can\'t be used with action "[execute]"'),
        (["--bootstrap-server", "a:1", "--generate", "--broker-list", "1,2", "--throttle", "100",
          "--topics-to-move-json-file", "x.json"], 'Option "[throttle]" can\'t be used with action "[generate]"'),
        (["--bootstrap-server", "a:1", "--verify", "--throttle", "100", "--reassignment-json-file", "x.json"],
         'Option "[throttle]" can\'t be used with action "[verify]"'),
        # the first option not allowed, in command-line order (OptionSet.specs())
        (["--bootstrap-server", "a:1", "--verify", "--timeout", "5", "--throttle", "100",
          "--reassignment-json-file", "x.json"], 'Option "[timeout]" can\'t be used with action "[verify]"'),
        (["--bootstrap-server", "a:1", "--list", "--additional"], 'Option "[additional]" can\'t be used with action "[list]"'),
        (["--list", "--bootstrap-server", "a:1", "--watch"], 'Option "[watch]" can\'t be used with action "[list]"'),
    ],
)
def test_usage_errors_exit_1_with_kafkas_message(args: list[str], message: str) -> None:
    result = CliRunner().invoke(reassign, args)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith(message + "\nOption ")


@pytest.mark.parametrize(
    ("args", "message"),
    [  # jopt-simple 5.0.4's ExceptionMessages.properties; the parse fails before any check
        (["--list", "--bogus"], "bogus is not a recognized option"),
        (["--list", "--bootstrap-server"], "Option bootstrap-server requires an argument"),
        (["--execute", "--throttle", "fast"], "Cannot parse argument 'fast' of option throttle"),
    ],
)
def test_command_lines_jopt_simple_rejects(args: list[str], message: str) -> None:
    result = CliRunner().invoke(reassign, args)
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", message + "\n")


# --- the command line: failures once the options are right (stdout, exit 1) ---------------------


def _plan(tmp_path: Path, text: str) -> str:
    path = tmp_path / "plan.json"
    path.write_text(text)
    return str(path)


def test_bad_plan_file_is_an_error_on_stdout(tmp_path: Path) -> None:
    # RPC.main: anything but a TerseException prints "Error: " + message on stdout, then exits 1.
    # No broker is needed: the plan is rejected before anything is sent.
    plan = _plan(tmp_path, '{"version":1,"partitions":[]}')
    result = CliRunner().invoke(reassign, ["--execute", "--bootstrap-server", "127.0.0.1:1",
                                           "--reassignment-json-file", plan])
    assert (result.exit_code, result.stderr) == (1, "")
    assert result.stdout == "Error: Partition reassignment list cannot be empty\n"


def test_missing_plan_file_is_named(tmp_path: Path) -> None:
    # Utils.readFileAsString: java.nio.file.NoSuchFileException, whose message is the path
    missing = str(tmp_path / "nope.json")
    result = CliRunner().invoke(reassign, ["--verify", "--bootstrap-server", "127.0.0.1:1",
                                           "--reassignment-json-file", missing])
    assert (result.exit_code, result.stdout) == (1, f"Error: {missing}\n")


def test_invalid_json_plan(tmp_path: Path) -> None:
    plan = _plan(tmp_path, '{"version":1,"partitions":[}')
    result = CliRunner().invoke(reassign, ["--cancel", "--bootstrap-server", "127.0.0.1:1",
                                           "--reassignment-json-file", plan])
    assert result.exit_code == 1
    assert result.stdout.startswith("Error: com.fasterxml.jackson.core.JsonParseException: ")
    assert result.stdout.endswith("; line: 1, column: 28]\n")


class FakeCluster:
    """What the tool asks the cluster, answered from fixed state: topic t (partitions 0-1) exists, the
    topic gone does not; ``ongoing`` is what ListPartitionReassignments lists."""

    def __init__(self, _client: Any) -> None:
        self.ongoing_moves: dict[tuple[str, int], Ongoing] = dict(STATE["ongoing"])
        self.altered: dict[tuple[str, int], list[int] | None] = {}

    def ongoing(self) -> dict[tuple[str, int], Ongoing]:
        return self.ongoing_moves

    def assignments(self, topics: set[str]) -> dict[tuple[str, int], list[int]]:
        if "gone" in topics:
            raise ToolError("org.apache.kafka.common.errors.UnknownTopicOrPartitionException: Topic gone not found.")
        return {("t", 0): [1, 2], ("t", 1): [2, 3]} if "t" in topics else {}

    def brokers(self) -> dict[int, str | None]:
        return {1: None, 2: None, 3: None}

    def alter(self, plan: dict[tuple[str, int], list[int] | None]) -> dict[tuple[str, int], tuple[int, str | None]]:
        self.altered.update(plan)
        return {tp: STATE["alter_result"] for tp in plan}

    def alter_configs(self, *_args: Any) -> None:
        pass


STATE: dict[str, Any] = {}


@pytest.fixture
def fake_cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    STATE.clear()
    STATE.update(ongoing={}, alter_result=(0, None))
    monkeypatch.setattr(reassign_module, "Cluster", FakeCluster)
    yield STATE


def _run(tmp_path: Path, action: str, plan: str, *extra: str) -> Any:
    return CliRunner().invoke(reassign, [f"--{action}", "--bootstrap-server", "127.0.0.1:1",
                                         "--reassignment-json-file", _plan(tmp_path, plan), *extra])


PLAN_T_AND_GONE = ('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]},'
                   '{"topic":"t","partition":1,"replicas":[1,2]},{"topic":"gone","partition":0,"replicas":[1,2,3]}]}')


@pytest.mark.usefixtures("fake_cluster")
def test_verify_with_an_unknown_topic_keeps_the_other_partitions_replicas(tmp_path: Path) -> None:
    # RPC.findPartitionReassignmentStates describes each topic on its own: an unknown topic's partitions
    # have no replicas (topicDescriptionFutureToState), the others keep theirs. Then verifyReplicaMoves
    # prints its (empty) report, and clearAllThrottles its two lines.
    result = _run(tmp_path, "verify", PLAN_T_AND_GONE)
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "Status of partition reassignment:\n"
        "There is no active reassignment of partition gone-0, but replica set is  rather than 1,2,3.\n"
        "Reassignment of partition t-0 is completed.\n"
        "There is no active reassignment of partition t-1, but replica set is 2,3 rather than 1,2.\n"
        "\n"
        "Clearing broker-level throttles on brokers 1,2,3\n"
        "Clearing topic-level throttles on topics gone,t\n")


def test_verify_with_a_move_in_progress_keeps_the_throttles(tmp_path: Path, fake_cluster: dict[str, Any]) -> None:
    fake_cluster["ongoing"] = {("t", 0): Ongoing([3, 1, 2], [3], [2])}
    result = _run(tmp_path, "verify", '{"partitions":[{"topic":"t","partition":0,"replicas":[3,1]}]}')
    assert result.stdout == "Status of partition reassignment:\nReassignment of partition t-0 is still in progress.\n\n"


def test_cancel_lines_singular(tmp_path: Path, fake_cluster: dict[str, Any]) -> None:
    # RPC.cancelAssignment: "reassignment%s" pluralised on the count; the log-dir line is printed
    # without a line end (System.out.print), so the throttle line continues it.
    fake_cluster["ongoing"] = {("t", 0): Ongoing([3, 1, 2], [3], [2])}
    result = _run(tmp_path, "cancel", '{"partitions":[{"topic":"t","partition":0,"replicas":[3,1]}]}')
    assert result.exit_code == 0, result.output
    assert result.stdout == ("Successfully cancelled partition reassignment for: t-0\n"
                             "None of the specified partition moves are active.Clearing broker-level throttles on "
                             "brokers 1,2,3\nClearing topic-level throttles on topic t\n")


def test_cancel_lines_plural_and_preserved_throttles(tmp_path: Path, fake_cluster: dict[str, Any]) -> None:
    fake_cluster["ongoing"] = {("t", 0): Ongoing([3, 1, 2], [3], [2]), ("t", 1): Ongoing([2, 3], [], [])}
    result = _run(tmp_path, "cancel", PLAN_T_AND_GONE, "--preserve-throttles")
    assert result.exit_code == 0, result.output
    assert result.stdout == ("Successfully cancelled partition reassignments for: t-0,t-1\n"
                             "None of the specified partition moves are active.")


@pytest.mark.usefixtures("fake_cluster")
def test_cancel_with_nothing_moving(tmp_path: Path) -> None:
    result = _run(tmp_path, "cancel", '{"partitions":[{"topic":"t","partition":0,"replicas":[3,1]}]}',
                  "--preserve-throttles")
    assert result.stdout == ("None of the specified partition reassignments are active.\n"
                             "None of the specified partition moves are active.")


def test_cancel_failure_is_terse(tmp_path: Path, fake_cluster: dict[str, Any]) -> None:
    # A TerseException: the message alone on stdout; each partition's exception message (here the
    # error's default message from Errors.java, the response having none).
    fake_cluster["ongoing"] = {("t", 0): Ongoing([3, 1, 2], [3], [2])}
    fake_cluster["alter_result"] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
    result = _run(tmp_path, "cancel", '{"partitions":[{"topic":"t","partition":0,"replicas":[3,1]}]}')
    assert result.exit_code == 1
    assert result.stdout == ("Error cancelling partition reassignment for:\n"
                             "t-0: No partition reassignment is in progress.\n")


def test_execute_over_an_ongoing_reassignment_is_terse(tmp_path: Path, fake_cluster: dict[str, Any]) -> None:
    fake_cluster["ongoing"] = {("t", 1): Ongoing([3, 2], [3], [])}
    result = _run(tmp_path, "execute", '{"partitions":[{"topic":"t","partition":0,"replicas":[3,1]}]}')
    assert result.exit_code == 1
    assert result.stdout.startswith("Cannot execute because there is an existing partition assignment.  Use "
                                    "--additional to override this")


@pytest.mark.usefixtures("fake_cluster")
def test_execute_with_unknown_partitions_names_them_all(tmp_path: Path) -> None:
    # RPC.getReplicaAssignmentForPartitions: an UnknownTopicOrPartitionException inside an
    # ExecutionException, whose message is the cause's toString()
    result = _run(tmp_path, "execute", '{"partitions":[{"topic":"t","partition":5,"replicas":[1]},'
                                       '{"topic":"t","partition":7,"replicas":[1]}]}')
    assert (result.exit_code, result.stdout) == (1, "Error: org.apache.kafka.common.errors."
                                                    "UnknownTopicOrPartitionException: Unable to find partition: "
                                                    "t-5, t-7\n")
