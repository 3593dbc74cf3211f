"""``headwater leader-election``: a drop-in for kafka-leader-election.sh over the Kafka protocol.

Options, JSON file, messages and exit codes are Kafka 3.9's ``LeaderElectionCommand`` (scripts
parse them). It sends one ElectLeaders (API 43) to the controller named in Metadata, for one
partition (``--topic`` + ``--partition``), the partitions of a JSON file, or every partition
(``--all-topic-partitions``: the request names none, and the controller answers only for the
partitions it elected or could not). Results go to stdout; the command exits 1 when any partition
could not be elected, with ``N replica(s) could not be elected`` on stderr. Everything that stops
the tool earlier (a bad option, a bad file) is one message on stderr and exit 1.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click
from kafka.protocol.admin import ElectionType, ElectLeadersRequest

from headwater.admin.client import AdminError
from headwater.admin.jopt import JavaEnum, JavaInt, JoptOption, KafkaCommand
from headwater.admin.options import connect
from headwater.protocol.error_messages import exception_text
from headwater.protocol.errors import ErrorCode

HELP = ("This tool attempts to elect a new leader for a set of topic partitions. The type of elections "
        "supported are preferred replicas and unclean replicas.")
# Kafka's tool leaves client.id unset, and the Java Admin client then calls itself this.
CLIENT_ID = "adminclient-1"
# Kafka's tool: default.api.timeout.ms 30 s and request.timeout.ms 15 s; the request's timeout_ms is
# what is left of the call's time within the request timeout.
REQUEST_TIMEOUT_MS = 15000
ELECTION_TYPES = {"PREFERRED": ElectionType.PREFERRED, "UNCLEAN": ElectionType.UNCLEAN}
_JSON_MAPPING_EXCEPTION = "com.fasterxml.jackson.databind.JsonMappingException"

TopicPartition = tuple[str, int]


class ElectionError(Exception):
    """What stops the tool: its message goes to stderr, exit 1 (``LeaderElectionCommand.mainNoExit``)."""


def _tp(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def _tps(tps: Iterable[TopicPartition]) -> str:
    return ", ".join(_tp(tp) for tp in sorted(tps))


# --- the JSON file --------------------------------------------------------------------------------


def _mapping_error(message: str) -> ElectionError:
    # Kafka wraps Jackson's JsonMappingException in a RuntimeException: the class is part of the message.
    return ElectionError(f"{_JSON_MAPPING_EXCEPTION}: {message}")


def _json_text(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def parse_election_json(text: str) -> set[TopicPartition]:
    """Kafka's ``parseReplicaElectionData``: ``{"partitions": [{"topic": t, "partition": p}, ...]}``."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        raise ElectionError("Replica election data is empty") from None  # Json.parseFull: not JSON at all
    if not isinstance(doc, dict):
        raise _mapping_error(f"Expected JSON object, received {_json_text(doc)}")
    if "partitions" not in doc:
        raise ElectionError('Replica election data is missing "partitions" field')
    entries = doc["partitions"]
    if not isinstance(entries, list):
        raise _mapping_error(f"Expected JSON array, received {_json_text(entries)}")
    partitions: list[TopicPartition] = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise _mapping_error(f"Expected JSON object, received {_json_text(entry)}")
        for field in ("topic", "partition"):
            if field not in entry:
                raise _mapping_error(f"No such field exists: `{field}`")
        topic, partition = entry["topic"], entry["partition"]
        if not isinstance(topic, str):
            raise _mapping_error(f"Expected `String` value, received {_json_text(topic)}")
        if isinstance(partition, bool) or not isinstance(partition, int) or not -(1 << 31) <= partition < (1 << 31):
            raise _mapping_error(f"Expected `Integer` value, received {_json_text(partition)}")
        partitions.append((topic, partition))
    duplicates = [tp for tp, n in Counter(partitions).items() if n > 1]
    if duplicates:
        raise ElectionError(f"Replica election data contains duplicate partitions: [{_tps(duplicates)}]")
    return set(partitions)


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except FileNotFoundError:
        raise ElectionError(f"java.nio.file.NoSuchFileException: {path}") from None
    except PermissionError:
        raise ElectionError(f"java.nio.file.AccessDeniedException: {path}") from None
    except OSError as exc:
        raise ElectionError(f"java.io.IOException: {exc.strerror}") from None


# --- options ----------------------------------------------------------------------------------------


def check_options(bootstrap_server: str | None, election_type: str | None, topic: str | None,
                  partition: int | None, all_topic_partitions: bool, path_to_json_file: str | None) -> None:
    """``LeaderElectionCommandOptions.validate``, in its order."""
    missing = [name for name, value in (("bootstrap-server", bootstrap_server), ("election-type", election_type))
               if value is None]
    if missing:
        raise ElectionError(f"Missing required option(s): {', '.join(missing)}")
    chosen = [topic is not None, all_topic_partitions, path_to_json_file is not None]
    if sum(chosen) != 1:
        raise ElectionError("One and only one of the following options is required: "
                            "topic, all-topic-partitions, path-to-json-file")
    if topic is not None and partition is None:
        raise ElectionError("Missing required option(s): partition")
    if topic is None and partition is not None:
        raise ElectionError("Option partition is only allowed if topic is used")


# --- the election -----------------------------------------------------------------------------------


def election_request(election_type: str, partitions: set[TopicPartition] | None) -> dict[str, Any]:
    """ElectLeaders' fields: ``topic_partitions`` None asks for every partition."""
    topics: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions or ()):
        topics.setdefault(topic, []).append(partition)
    T = ElectLeadersRequest.TopicPartitions
    return dict(election_type=ELECTION_TYPES[election_type], timeout_ms=REQUEST_TIMEOUT_MS,
                topic_partitions=None if partitions is None else [T(topic=t, partitions=ps) for t, ps in topics.items()])


def report(election_type: str, results: dict[TopicPartition, tuple[int, str | None]], echo: Any) -> int:
    """Kafka's ``electLeaders`` output: the elected, those that needed none, then one line per failure.
    Returns how many partitions failed."""
    succeeded = [tp for tp, (code, _m) in results.items() if code == ErrorCode.NONE]
    noop = [tp for tp, (code, _m) in results.items() if code == ErrorCode.ELECTION_NOT_NEEDED]
    failed = {tp: r for tp, r in results.items() if r[0] not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)}
    if succeeded:
        echo(f"Successfully completed leader election ({election_type}) for partitions {_tps(succeeded)}")
    if noop:
        echo(f"Valid replica already elected for partitions {_tps(noop)}")
    for tp, (code, message) in sorted(failed.items()):
        echo(f"Error completing leader election ({election_type}) for partition: {_tp(tp)}: "
             f"{exception_text(code, message)}")
    return len(failed)


def elect(client: Any, election_type: str, partitions: set[TopicPartition] | None, echo: Any) -> int:
    """Send ElectLeaders to the controller and print the results; the exit code."""
    def errors_of(resp: Any) -> list[int]:
        return [getattr(resp, "error_code", 0)] + [p.error_code for t in resp.replica_election_results
                                                   for p in t.partition_result]

    try:
        resp = client.send_to_controller(ElectLeadersRequest, election_request(election_type, partitions), errors_of)
    except AdminError as exc:
        # The Java client retries until its 30 s are over and then fails the call with a TimeoutException.
        echo("Timeout waiting for election results")
        raise ElectionError(f"Timeout waiting for election results\nCaused by: {exc}") from None
    top = getattr(resp, "error_code", 0)  # v1+
    if top == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        echo("Not authorized to perform leader election")
        raise ElectionError("Not authorized to perform leader election")
    if top:
        raise ElectionError(f"java.util.concurrent.ExecutionException: {exception_text(top)}")
    results = {(t.topic, p.partition_id): (p.error_code, p.error_message)
               for t in resp.replica_election_results for p in t.partition_result}
    failed = report(election_type, results, echo)
    if failed:
        raise ElectionError(f"{failed} replica(s) could not be elected")
    return 0


# --- the command ------------------------------------------------------------------------------------


@click.command(cls=KafkaCommand, tool_help=HELP, help=HELP,
               short_help="Elect partition leaders, like kafka-leader-election.sh.")
@click.option("--bootstrap-server", cls=JoptOption, described_as="host:port",
              description="A hostname and port for the broker to connect to, in the form host:port. Multiple "
                          "comma separated URLs can be given. REQUIRED.")
@click.option("--admin.config", "admin_config", cls=JoptOption, described_as="config file",
              description="Configuration properties files to pass to the admin client")
@click.option("--command-config", cls=JoptOption, described_as="config file",
              description="The same as --admin.config, the name headwater's other tools use.")
@click.option("--path-to-json-file", cls=JoptOption, described_as="Path to JSON file",
              description='The JSON file with the list  of partition for which leader elections should be '
                          'performed. This is an example format. \n{"partitions":\n\t[{"topic": "foo", '
                          '"partition": 1},\n\t {"topic": "foobar", "partition": 2}]\n}\nNot allowed if '
                          '--all-topic-partitions or --topic flags are specified.')
@click.option("--topic", cls=JoptOption, described_as="topic name",
              description="Name of topic for which to perform an election. Not allowed if --path-to-json-file "
                          "or --all-topic-partitions is specified.")
@click.option("--partition", cls=JoptOption, type=JavaInt(32), described_as="partition id",
              type_indicator="Integer",
              description="Partition id for which to perform an election. REQUIRED if --topic is specified.")
@click.option("--all-topic-partitions", cls=JoptOption, is_flag=True,
              description="Perform election on all of the eligible topic partitions based on the type of "
                          "election (see the --election-type flag). Not allowed if --topic or "
                          "--path-to-json-file is specified.")
@click.option("--election-type", cls=JoptOption, type=JavaEnum(list(ELECTION_TYPES)), described_as="election type",
              type_indicator="[PREFERRED,UNCLEAN]",
              description='Type of election to attempt. Possible values are "preferred" for preferred leader '
                          'election or "unclean" for unclean leader election. If preferred election is '
                          'selection, the election is only performed if the current leader is not the preferred '
                          'leader for the topic partition. If unclean election is selected, the election is only '
                          'performed if there are no leader for the topic partition. REQUIRED.')
def leader_election(bootstrap_server: str | None, admin_config: str | None, command_config: str | None,
                    path_to_json_file: str | None, topic: str | None, partition: int | None,
                    all_topic_partitions: bool, election_type: str | None) -> None:
    """Kafka's ``mainNoExit``: whatever stops the tool is printed on stderr, exit 1; results on stdout."""
    try:
        check_options(bootstrap_server, election_type, topic, partition, all_topic_partitions, path_to_json_file)
        assert bootstrap_server is not None and election_type is not None
        partitions: set[TopicPartition] | None = None
        if path_to_json_file is not None:
            partitions = parse_election_json(_read(path_to_json_file))
        elif topic is not None:
            assert partition is not None
            partitions = {(topic, partition)}
        config = admin_config if admin_config is not None else command_config
        try:
            client = connect(bootstrap_server, CLIENT_ID, None if config is None else Path(config))
        except AdminError as exc:  # the config file, or a bad --bootstrap-server
            raise ElectionError(str(exc)) from None
        with client:
            code = elect(client, election_type, partitions, click.echo)
    except ElectionError as exc:
        click.echo(str(exc), err=True)
        sys.exit(1)
    sys.exit(code)
