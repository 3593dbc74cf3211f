"""`headwater acls` refuses bad option combinations before it connects anywhere, as kafka-acls.sh does."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

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
    (["--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"], "With --consumer you must specify a --group"),
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
