"""KIP-599 against a real broker, with the real clients' own protocol versions.

kafka-python sends CreateTopics v7 (strict): topics over the quota fail with error 89 and the
rest succeed. librdkafka sends CreateTopics v4 (permissive): every topic is created and the
client is slowed by throttle_time_ms and channel muting.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from confluent_kafka.admin import NewTopic as ConfluentTopic
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import ThrottlingQuotaExceededError

from headwater.admin.local import BrokerProcess, free_port
from headwater.cli import main


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    broker = BrokerProcess(1, free_port(), Path(tmp_path_factory.mktemp("quota")),
                           {"controller.quota.window.num": "2", "controller.quota.window.size.seconds": "1"}).start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


def configs(bootstrap: str, *args: str) -> str:
    result = CliRunner().invoke(main, ["configs", "--bootstrap-server", bootstrap, *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_strict_client_gets_89_for_exactly_the_topics_over(bootstrap: str) -> None:
    configs(bootstrap, "--alter", "--entity-type", "clients", "--entity-name", "strict-app",
            "--add-config", "controller_mutation_rate=5")  # burst 2 windows x 1 s x 5 = 10
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="strict-app")
    try:
        # 6 + 6 partitions: the first takes 10 -> 4, the second is admitted whole -> -2, the rest refused.
        topics = [NewTopic(f"strict-{i}", 6, 1) for i in range(4)]
        result = admin.create_topics(topics, raise_errors=False)
        codes = {t["name"]: t["error_code"] for t in result["topics"]}
        assert codes == {"strict-0": 0, "strict-1": 0, "strict-2": 89, "strict-3": 89}
        # kafka-python pauses the connection for the throttle (2 tokens of debt at 5/s = 400 ms).
        time.sleep(0.5)
        listed = set(admin.list_topics())
        assert {"strict-0", "strict-1"} <= listed
        assert not {"strict-2", "strict-3"} & listed
        # Half a token back: strict-2 is admitted whole (-5.5), strict-3 is refused again.
        with pytest.raises(ThrottlingQuotaExceededError):
            admin.create_topics([NewTopic("strict-2", 6, 1), NewTopic("strict-3", 6, 1)])
        time.sleep(1.3)
        admin.create_topics([NewTopic("strict-3", 6, 1)])
        assert "strict-3" in admin.list_topics()
    finally:
        admin.close()


def test_permissive_client_is_slowed_not_refused(bootstrap: str) -> None:
    configs(bootstrap, "--alter", "--entity-type", "clients", "--entity-name", "rdkafka-app",
            "--add-config", "controller_mutation_rate=20")  # burst 40
    admin = ConfluentAdmin({"bootstrap.servers": bootstrap, "client.id": "rdkafka-app"})
    started = time.monotonic()
    for batch in range(3):
        futures = admin.create_topics([ConfluentTopic(f"perm-{batch}-{i}", 10, 1) for i in range(6)])
        for fut in futures.values():
            fut.result(30)  # permissive: no error
    elapsed = time.monotonic() - started
    # 180 partitions at 20/s with a burst of 40 cannot finish before (180 - 40) / 20 = 7 s of throttling
    # have been served, less the last request's own throttle (it is paid after the response).
    assert elapsed >= 3.5, elapsed
    names = admin.list_topics(timeout=10).topics
    assert all(f"perm-{b}-{i}" in names for b in range(3) for i in range(6))


def test_unlimited_client_is_never_throttled(bootstrap: str) -> None:
    from kafka.protocol.admin import CreateTopicsRequest

    from headwater.admin.client import AdminClient

    T = CreateTopicsRequest.CreatableTopic
    with AdminClient(bootstrap, client_id="free-app") as client:
        for version in (4, 7):  # permissive and strict
            resp = client.send(CreateTopicsRequest, dict(topics=[
                T(name=f"free-v{version}-{i}", num_partitions=20, replication_factor=1, assignments=[], configs=[])
                for i in range(10)], timeout_ms=30000, validate_only=False), max_version=version)
            assert [t.error_code for t in resp.topics] == [0] * 10
            assert resp.throttle_time_ms == 0


def test_user_default_applies_to_anonymous_and_validate_only_is_free(bootstrap: str) -> None:
    configs(bootstrap, "--alter", "--entity-type", "users", "--entity-default", "--add-config", "controller_mutation_rate=1")
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="someone")
        try:
            # validate_only consumes nothing: 100 partitions validated twice, then a real create still fits the burst.
            for _ in range(2):
                admin.create_topics([NewTopic("dry-run", 100, 1)], validate_only=True)
            admin.create_topics([NewTopic("fits", 2, 1)])
            result = admin.create_topics([NewTopic("over-a", 1, 1), NewTopic("over-b", 1, 1)], raise_errors=False)
            codes = {t["name"]: t["error_code"] for t in result["topics"]}
            assert codes == {"over-a": 0, "over-b": 89} or codes == {"over-a": 89, "over-b": 89}
        finally:
            admin.close()
    finally:
        configs(bootstrap, "--alter", "--entity-type", "users", "--entity-default", "--delete-config", "controller_mutation_rate")


def test_bad_quota_input_changes_nothing(bootstrap: str) -> None:
    before = configs(bootstrap, "--describe", "--entity-type", "clients")
    for add in ("controller_mutation_rate=-1", "producer_byte_rate=5"):
        result = CliRunner().invoke(main, ["configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type",
                                           "clients", "--entity-name", "x", "--add-config", add])
        assert result.exit_code == 1
    assert configs(bootstrap, "--describe", "--entity-type", "clients") == before


def test_topics_tool_retries_after_the_throttle_unless_told_not_to(bootstrap: str) -> None:
    # The tool's client id is headwater-topics; burst 2 windows x 1 s x 2/s = 4 tokens.
    configs(bootstrap, "--alter", "--entity-type", "clients", "--entity-name", "headwater-topics",
            "--add-config", "controller_mutation_rate=2")
    try:
        def create(*args: str) -> tuple[int, str]:
            result = CliRunner().invoke(main, ["topics", "--bootstrap-server", bootstrap, "--create", *args])
            return result.exit_code, result.output

        assert create("--topic", "tool-a", "--partitions", "6")[0] == 0  # admitted whole: 4 -> -2
        code, out = create("--topic", "tool-b", "--partitions", "1", "--no-retry-on-quota-violation")
        assert code == 1 and "quota" in out.lower()
        started = time.monotonic()
        code, out = create("--topic", "tool-b", "--partitions", "1")  # waits out the throttle, then succeeds
        assert code == 0, out
        assert time.monotonic() - started >= 0.5  # the debt of 2 tokens at 2/s had to be paid first
    finally:
        configs(bootstrap, "--alter", "--entity-type", "clients", "--entity-name", "headwater-topics",
                "--delete-config", "controller_mutation_rate")
