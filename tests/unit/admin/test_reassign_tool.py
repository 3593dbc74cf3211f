"""The reassign tool's JSON handling, move map and throttle values, and its usage errors (Kafka's strings)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from headwater.admin.reassign import (
    Ongoing,
    ToolError,
    format_reassignment_json,
    move_map,
    parse_reassignment_json,
    parse_topics_json,
    reassign,
    throttled_replicas,
)


def test_output_json_is_kafkas_compact_sorted_form() -> None:
    text = format_reassignment_json({("bar", 1): [7, 8], ("bar", 0): [8, 7], ("abc", 0): [1]})
    assert text == ('{"version":1,"partitions":[{"topic":"abc","partition":0,"replicas":[1],"log_dirs":["any"]},'
                    '{"topic":"bar","partition":0,"replicas":[8,7],"log_dirs":["any","any"]},'
                    '{"topic":"bar","partition":1,"replicas":[7,8],"log_dirs":["any","any"]}]}')
    assert parse_reassignment_json(text) == {("abc", 0): [1], ("bar", 0): [8, 7], ("bar", 1): [7, 8]}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"version": 1, "partitions": []}, "Partition reassignment list cannot be empty"),
        ({"version": 1, "partitions": [{"topic": "foo", "partition": 0, "replicas": []}]}, "Partition replica list cannot be empty"),
        ({"version": 1, "partitions": [{"topic": "foo", "partition": 0, "replicas": [1]},
                                       {"topic": "foo", "partition": 0, "replicas": [2]}]},
         "Partition reassignment contains duplicate topic partitions: foo-0"),
        ({"version": 1, "partitions": [{"topic": "foo", "partition": 0, "replicas": [0, 0, 1]}]},
         "Partition replica lists may not contain duplicate entries: foo-0 contains multiple entries for 0"),
        ({"version": 2, "partitions": []}, "Not supported version field value 2"),
        ({"version": 1, "partitions": [{"topic": "foo", "partition": 1, "replicas": [1, 2], "log_dirs": ["any"]}]},
         "Size of replicas list [1, 2] is different from size of log dirs list ['any'] for partition foo-1"),
        ({"version": 1, "partitions": [{"topic": "foo", "replicas": [1]}]}, '"partition" number'),
    ],
)
def test_bad_plans_name_the_problem(doc: object, message: str) -> None:
    with pytest.raises(ToolError) as err:
        parse_reassignment_json(json.dumps(doc))
    assert message in str(err.value)


def test_unparseable_plan() -> None:
    with pytest.raises(ToolError, match="Unable to parse"):
        parse_reassignment_json("{not json")


def test_topics_json() -> None:
    assert parse_topics_json('{"topics":[{"topic":"foo"},{"topic":"bar"}],"version":1}') == ["foo", "bar"]
    assert parse_topics_json('{"topics":[{"topic":"foo"}]}') == ["foo"]  # version defaults to 1
    with pytest.raises(ToolError, match="duplicate entries: foo"):
        parse_topics_json('{"topics":[{"topic":"foo"},{"topic":"foo"}]}')
    with pytest.raises(ToolError, match="Not supported version field value 3"):
        parse_topics_json('{"topics":[],"version":3}')


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


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "Command must include exactly one action: --generate, --execute, --verify, --cancel, --list"),
        (["--list", "--verify"], "Command must include exactly one action"),
        (["--list"], "Please specify either --bootstrap-server or --bootstrap-controller"),
        (["--list", "--bootstrap-server", "a:1", "--bootstrap-controller", "b:1"],
         "Please don't specify both --bootstrap-server and --bootstrap-controller"),
        (["--verify", "--bootstrap-server", "a:1"], 'Missing required argument "[reassignment-json-file]"'),
        (["--verify", "--bootstrap-server", "a:1", "--reassignment-json-file", "x.json", "--throttle", "5"],
         'Option "[throttle]" can\'t be used with action "[verify]"'),
        (["--list", "--bootstrap-server", "a:1", "--watch"], 'Option "[watch]" can\'t be used with action "[list]"'),
    ],
)
def test_usage_errors_exit_1_with_kafkas_message(args: list[str], message: str) -> None:
    result = CliRunner().invoke(reassign, args)
    assert result.exit_code == 1
    assert message in result.output
    assert "This tool helps to move topic partitions between replicas." in result.output


def test_bad_plan_file_changes_nothing_and_exits_1(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text('{"version":1,"partitions":[]}')
    # No broker needed: the plan is rejected before anything is sent.
    result = CliRunner().invoke(reassign, ["--execute", "--bootstrap-server", "127.0.0.1:1", "--reassignment-json-file", str(plan)])
    assert result.exit_code == 1
    assert "Partition reassignment list cannot be empty" in result.output
