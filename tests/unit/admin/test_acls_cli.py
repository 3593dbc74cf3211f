"""`headwater acls` refuses bad option combinations before it connects anywhere, as kafka-acls.sh does."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from headwater.admin.acls import Pattern, _producer_consumer, _resources
from headwater.cli import main

# Nothing listens here: every case must fail on its options, before any connection.
NOWHERE = "127.0.0.1:1"


@pytest.mark.parametrize(("args", "message"), [
    ([], "one of --add, --remove or --list is required"),
    (["--add", "--topic", "t"], "--allow-principal, --deny-principal"),
    (["--add", "--allow-principal", "User:a"], "--topic, --group, --cluster, --transactional-id"),
    (["--add", "--allow-principal", "alice", "--topic", "t"], "is not Type:name"),
    (["--add", "--allow-principal", "User:a", "--operation", "Write", "--group", "g"],
     "ResourceType GROUP only supports operations"),
    (["--add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"], "is not an ACL operation"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"],
     "not valid when adding acls"),
    (["--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"], "With --consumer you must specify a --topic"),
    (["--add", "--allow-principal", "User:a", "--consumer", "--group", "g"], "With --consumer you must specify a --topic"),
    (["--add", "--allow-principal", "User:a", "--consumer", "--topic", "t", "--group", "g", "--cluster"],
     "no --cluster or --transactional-id"),
    (["--add", "--deny-principal", "User:a", "--consumer", "--topic", "t", "--group", "g"],
     "cannot be combined with --producer or --consumer"),
    (["--add", "--allow-principal", "User:a", "--producer", "--group", "g"], "With --producer you must specify a --topic"),
    (["--add", "--allow-principal", "User:a", "--idempotent", "--topic", "t"], "only available if --producer is set"),
    (["--list", "--producer", "--topic", "t"], "only valid with --add or --remove"),
    (["--add", "--allow-principal", "User:a", "--producer", "--operation", "Read", "--topic", "t"],
     "cannot be combined"),
])
def test_usage_errors(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["acls", "--bootstrap-server", NOWHERE, *args])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_operation_names_in_any_spelling_reach_the_connection() -> None:
    # Valid options: the command gets as far as connecting, and says it cannot.
    for spelling in ("ClusterAction", "cluster-action", "CLUSTER_ACTION"):
        result = CliRunner().invoke(main, ["acls", "--bootstrap-server", NOWHERE, "--add", "--allow-principal",
                                           "User:broker", "--operation", spelling, "--cluster"])
        assert result.exit_code == 1 and "cannot connect" in result.output, result.output


def test_consumer_convenience_plan() -> None:
    # kafka-acls' --consumer: READ and DESCRIBE on each topic, READ on each group; with --producer too,
    # the producer's operations on the topics are added.
    resources = _resources(("t",), ("g",), False, (), "PREFIXED")
    assert _producer_consumer(resources, False, True, False) == {
        Pattern("TOPIC", "t", "PREFIXED"): ["READ", "DESCRIBE"], Pattern("GROUP", "g", "PREFIXED"): ["READ"]}
    both = _producer_consumer(_resources(("t",), ("g",), False, (), "LITERAL"), True, True, False)
    assert both[Pattern("TOPIC", "t", "LITERAL")] == ["WRITE", "DESCRIBE", "CREATE", "READ"]
    assert both[Pattern("GROUP", "g", "LITERAL")] == ["READ"]
