"""`headwater topics` against a real broker: kafka-topics.sh's actions, messages and exit codes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from headwater.admin.local import BrokerProcess, free_port
from headwater.cli import main


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    broker = BrokerProcess(1, free_port(), Path(tmp_path_factory.mktemp("topics-cli"))).start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


def run(bootstrap: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["topics", "--bootstrap-server", bootstrap, *args])
    return result.exit_code, result.output


def test_create_describe_alter_delete(bootstrap: str) -> None:
    code, out = run(bootstrap, "--create", "--topic", "cli-a", "--partitions", "3", "--replication-factor", "1",
                    "--config", "retention.ms=60000")
    assert (code, out.strip()) == (0, "Created topic cli-a.")
    code, out = run(bootstrap, "--describe", "--topic", "cli-a")
    lines = out.strip().splitlines()
    assert code == 0
    assert lines[0].startswith("Topic: cli-a\tTopicId: ")
    assert "PartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=60000" in lines[0]
    assert lines[1:] == [f"\tTopic: cli-a\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1" for p in range(3)]
    assert run(bootstrap, "--alter", "--topic", "cli-a", "--partitions", "5")[0] == 0
    assert "PartitionCount: 5" in run(bootstrap, "--describe", "--topic", "cli-a")[1]
    assert "cli-a" in run(bootstrap, "--list")[1].split()
    assert run(bootstrap, "--delete", "--topic", "cli-a")[0] == 0
    assert "cli-a" not in run(bootstrap, "--list")[1].split()


def test_errors_name_the_problem(bootstrap: str) -> None:
    assert run(bootstrap, "--create", "--topic", "cli-b", "--partitions", "1")[0] == 0
    code, out = run(bootstrap, "--create", "--topic", "cli-b", "--partitions", "1")
    assert code == 1 and "Topic 'cli-b' already exists." in out
    assert run(bootstrap, "--create", "--topic", "cli-b", "--partitions", "1", "--if-not-exists")[0] == 0
    code, out = run(bootstrap, "--create", "--topic", "cli-c", "--replication-factor", "4")
    assert code == 1 and "Replication factor: 4 larger than available brokers: 1." in out
    code, out = run(bootstrap, "--create", "--topic", "cli-d", "--config", "retention.ms=soon")
    assert code == 1 and "retention.ms" in out
    assert "cli-d" not in run(bootstrap, "--list")[1].split()
    code, out = run(bootstrap, "--alter", "--topic", "cli-b", "--partitions", "1")
    assert code == 1 and "already has 1 partitions" in out
    code, out = run(bootstrap, "--delete", "--topic", "no-such-topic")
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in out
    assert run(bootstrap, "--delete", "--topic", "no-such-topic", "--if-exists")[0] == 0


def test_unreachable_broker_is_a_clear_error() -> None:
    code, out = run(f"127.0.0.1:{free_port()}", "--list")
    assert code == 1 and "cannot connect to 127.0.0.1" in out


def test_topic_max_message_bytes_is_enforced_and_follows_config_changes(bootstrap: str) -> None:
    from confluent_kafka import KafkaError, Producer

    assert run(bootstrap, "--create", "--topic", "cli-small", "--partitions", "1", "--config", "max.message.bytes=2000")[0] == 0
    errors: list[object] = []
    p = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 1_000_000})
    p.produce("cli-small", value=b"x" * 5000, on_delivery=lambda err, _m: errors.append(err))
    p.flush(10)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    result = CliRunner().invoke(main, ["configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "topics",
                                       "--entity-name", "cli-small", "--add-config", "max.message.bytes=100000"])
    assert result.exit_code == 0, result.output
    errors.clear()
    p.produce("cli-small", value=b"x" * 5000, on_delivery=lambda err, _m: errors.append(err))
    p.flush(10)
    assert errors == [None]
