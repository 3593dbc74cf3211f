"""``headwater transactions`` against Kafka 3.9's kafka-transactions.sh, without a cluster.

Expectations come from ``tools/src/main/java/org/apache/kafka/tools/TransactionsCommand.java`` (TC below)
and ``TransactionsCommandTest.java`` (TCT); usage, help and parse errors are argparse4j 0.7.0's output
for TC's parser (captured from argparse4j itself at 80 columns). The commands run against a fake admin
(the Java ``Admin`` calls); ``TransactionsAdmin`` runs against a fake connection to check the requests
it sends and how it reads the answers.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner, Result
from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.producer.transaction import WriteTxnMarkersRequest, WriteTxnMarkersResponse

from headwater.admin import transactions as tool
from headwater.admin.local import free_port
from headwater.admin.transactions import (
    AbortSpec,
    CallFailed,
    ProducerState,
    TransactionDescription,
    TransactionListing,
    TransactionsAdmin,
    java_order,
    long_hash,
    string_hash,
    tp_hash,
    transactions,
)
from headwater.cli import main
from headwater.protocol.errors import ErrorCode

NOW = 1_700_000_000_000
MINUTE = 60_000


def run(*args: str, columns: int = 80) -> Result:
    return CliRunner(env={"COLUMNS": str(columns)}).invoke(transactions, list(args))


def cells(text: str) -> list[list[str]]:
    """TCT.readOutputAsTable: each line split on whitespace."""
    return [line.split() for line in text.splitlines()]


# --- the command line: argparse4j ------------------------------------------------------------------------

MAIN_USAGE = ("usage: kafka-transactions.sh [-h] [-v] [--command-config FILE]\n"
              "                             --bootstrap-server host:port COMMAND ...\n")
ABORT_USAGE = ("usage: kafka-transactions.sh --bootstrap-server host:port abort [-h]\n"
               "                             --topic TOPIC --partition PARTITION\n"
               "                             [--start-offset START_OFFSET]\n"
               "                             [--producer-id PRODUCER_ID]\n"
               "                             [--producer-epoch PRODUCER_EPOCH]\n"
               "                             [--coordinator-epoch COORDINATOR_EPOCH]\n")
MAIN_HELP = MAIN_USAGE + """
This tool is used to analyze  the  transactional  state of producers in the
cluster. It can be used to detect and recover from hanging transactions.

optional arguments:
  -h, --help             show this help message and exit
  -v, --version          show the version  of  this  Kafka distribution and
                         exit
  --command-config FILE  property file containing configs  to  be passed to
                         admin client
  --bootstrap-server host:port
                         hostname and port for  the  broker  to connect to,
                         in  the   form   `host:port`    (multiple   comma-
                         separated entries can be given)

commands:
  COMMAND
    list                 list transactions
    describe             describe the state of an active transactional-id
    describe-producers   describe the  states  of  active  producers  for a
                         topic partition
    abort                abort    a    hanging     transaction    (requires
                         administrative privileges)
    find-hanging         find hanging transactions
"""
ABORT_HELP = ABORT_USAGE + """
optional arguments:
  -h, --help             show this help message and exit
  --topic TOPIC          topic name
  --partition PARTITION  partition number

Brokers on versions 3.0 and above:
  For newer brokers,  only  the  start  offset  of  the  transaction  to be
  aborted is required

  --start-offset START_OFFSET
                         start offset of the transaction to abort

Brokers on versions older than 3.0:
  For older brokers, you must provide all of these arguments

  --producer-id PRODUCER_ID
                         producer id
  --producer-epoch PRODUCER_EPOCH
                         producer epoch
  --coordinator-epoch COORDINATOR_EPOCH
                         coordinator epoch
"""
FIND_HANGING_HELP = """\
usage: kafka-transactions.sh --bootstrap-server host:port find-hanging [-h]
                             [--broker-id BROKER_ID]
                             [--max-transaction-timeout MAX_TRANSACTION_TIMEOUT]
                             [--topic TOPIC] [--partition PARTITION]

optional arguments:
  -h, --help             show this help message and exit
  --broker-id BROKER_ID  broker id to search for hanging transactions
  --max-transaction-timeout MAX_TRANSACTION_TIMEOUT
                         maximum transaction timeout  in  minutes  to limit
                         the scope of the search (15 minutes by default)
  --topic TOPIC          topic name to  limit  search  to  (required  if --
                         partition is specified)
  --partition PARTITION  partition number
"""


@pytest.mark.parametrize(("args", "expected"), [
    (["--help"], MAIN_HELP), (["-h", "--bootstrap-server"], MAIN_HELP),
    (["--bootstrap-server", "b:9092", "abort", "-h"], ABORT_HELP),
    (["--bootstrap-server", "b:9092", "find-hanging", "--topic", "t", "--he"], FIND_HANGING_HELP),
    (["describe", "--help"],  # help wins over the missing --bootstrap-server, which argparse4j checks last
     "usage: kafka-transactions.sh --bootstrap-server host:port describe [-h]\n"
     "                             --transactional-id TRANSACTIONAL_ID\n\n"
     "Describe the state of an active transactional-id.\n\n"
     "optional arguments:\n"
     "  -h, --help             show this help message and exit\n"
     "  --transactional-id TRANSACTIONAL_ID\n"
     "                         transactional id\n"),
])
def test_help_goes_to_stdout_and_exits_1(args: list[str], expected: str) -> None:
    # TC.execute: parser.handleError is silent for the help screen, then Exit.exit(1)
    result = run(*args)
    assert (result.exit_code, result.stdout, result.stderr) == (1, expected, "")


def test_help_fits_the_terminal() -> None:
    # argparse4j: $COLUMNS less 5 is the width; lines are justified to it
    result = run("--help", columns=50)
    assert result.stdout.splitlines()[:4] == [
        "usage: kafka-transactions.sh [-h] [-v]",
        "                             [--command-config FILE]",
        "                             --bootstrap-server host:port",
        "                             COMMAND ..."]
    assert result.stdout.splitlines()[5:8] == ["This   tool   is   used    to   analyze   the",
                                               "transactional  state  of   producers  in  the",
                                               "cluster.  It  can  be   used  to  detect  and"]


@pytest.mark.parametrize("flag", ["-v", "--version", "--vers"])
def test_version(flag: str) -> None:
    # PrintVersionAndExitAction: version and commit, exit 0, whatever else the line holds
    result = run(flag, "--bogus")
    assert (result.exit_code, result.stdout) == (0, "3.9.0 (Commit:a60e31147e6b01ee)\n")


def test_registered_as_transactions() -> None:
    result = CliRunner().invoke(main, ["transactions", "--version"])
    assert (result.exit_code, result.stdout) == (0, "3.9.0 (Commit:a60e31147e6b01ee)\n")


PARTITION_USAGE = ("usage: kafka-transactions.sh --bootstrap-server host:port\n"
                   "                             describe-producers [-h]\n"
                   "                             [--broker-id BROKER_ID] --topic TOPIC\n"
                   "                             --partition PARTITION\n")


@pytest.mark.parametrize(("args", "expected"), [
    ([], MAIN_USAGE + "kafka-transactions.sh: error: too few arguments\n"),
    (["--bootstrap-server", "b:9092"], MAIN_USAGE + "kafka-transactions.sh: error: too few arguments\n"),
    (["describe", "--transactional-id", "t"],
     MAIN_USAGE + "kafka-transactions.sh: error: argument --bootstrap-server is required\n"),
    # TCT.testDescribeTransactionsTransactionalIdRequired
    (["--bootstrap-server", "b:9092", "describe"],
     "usage: kafka-transactions.sh --bootstrap-server host:port describe [-h]\n"
     "                             --transactional-id TRANSACTIONAL_ID\n"
     "kafka-transactions.sh: error: argument --transactional-id is required\n"),
    # TCT.testDescribeProducersTopicRequired / PartitionRequired; with both missing the last is named
    (["--bootstrap-server", "b:9092", "describe-producers", "--partition", "0"],
     PARTITION_USAGE + "kafka-transactions.sh: error: argument --topic is required\n"),
    (["--bootstrap-server", "b:9092", "describe-producers", "--topic", "foo"],
     PARTITION_USAGE + "kafka-transactions.sh: error: argument --partition is required\n"),
    (["--bootstrap-server", "b:9092", "describe-producers"],
     PARTITION_USAGE + "kafka-transactions.sh: error: argument --partition is required\n"),
    # TCT.testDescribeTransactionsTopicRequired / PartitionRequired (abort)
    (["--bootstrap-server", "b:9092", "abort", "--partition", "0", "--start-offset", "9990"],
     ABORT_USAGE + "kafka-transactions.sh: error: argument --topic is required\n"),
    (["--bootstrap-server", "b:9092", "abort", "--topic", "foo", "--start-offset", "9990"],
     ABORT_USAGE + "kafka-transactions.sh: error: argument --partition is required\n"),
    (["--bootstrap-server", "b:9092", "abort", "--topic", "foo", "--partition", "x"],
     ABORT_USAGE + "kafka-transactions.sh: error: argument --partition:  could  not convert 'x'\n"
                   'to Integer (For input string: "x")\n'),
    (["--bootstrap-server", "b:9092", "abort", "--topic", "foo", "--partition", "0", "--producer-epoch", "40000"],
     ABORT_USAGE + "kafka-transactions.sh: error: argument --producer-epoch:  could not convert\n"
                   "'40000' to Short (Value out of range. Value:\"40000\" Radix:10)\n"),
    (["--bootstrap-server", "b:9092", "abort", "--topic", "foo", "--partition", "0", "--p", "1"],
     ABORT_USAGE + "kafka-transactions.sh:  error:  ambiguous  option:   --p   could  match  --\n"
                   "partition, --producer-epoch, --producer-id\n"),
    (["--bootstrap-server", "b:9092", "list", "--duration-filter"],
     "usage: kafka-transactions.sh --bootstrap-server host:port list [-h]\n"
     "                             [--duration-filter DURATION_FILTER]\n"
     "kafka-transactions.sh:  error:  argument  --duration-filter:  expected  one\nargument\n"),
    (["--bootstrap-server", "b:9092", "list", "--duratoin-filter", "1"],
     "usage: kafka-transactions.sh --bootstrap-server host:port list [-h]\n"
     "                             [--duration-filter DURATION_FILTER]\n"
     "kafka-transactions.sh: error: unrecognized arguments: '--duratoin-filter'\n\n"
     "Did you mean:\n\t--duration-filter\n"),
    (["--bootstrap-server", "b:9092", "lsit"],
     MAIN_USAGE + "kafka-transactions.sh: error: invalid choice:  'lsit'  (choose from 'list',\n"
                  "'describe', 'describe-producers', 'abort', 'find-hanging')\n\nDid you mean:\n\tlist\n"),
    (["--bootstrap-server", "b:9092", "desc"],
     MAIN_USAGE + "kafka-transactions.sh:  error:   ambiguous   command:   desc   could  match\n"
                  "describe, describe-producers\n"),
    (["--bootstrap-server", "b:9092", "list", "extra"],
     "usage: kafka-transactions.sh --bootstrap-server host:port list [-h]\n"
     "                             [--duration-filter DURATION_FILTER]\n"
     "kafka-transactions.sh: error: unrecognized arguments: 'extra'\n"),
])
def test_parse_errors_print_usage_and_exit_1(args: list[str], expected: str) -> None:
    result = run(*args)
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", expected)


def test_abbreviations_negative_numbers_and_equals() -> None:
    # argparse4j takes unambiguous prefixes of options and commands, "-1" as a value, and "--opt=value"
    ns = tool.parse(tool.build_parser(), ["--boot=b:1", "ab", "--top", "t", "--partition", "+3",
                                          "--coordinator-epoch", "-1", "--start-offset=-5"])
    assert (ns["bootstrap_server"], ns["command"], ns["topic"], ns["partition"]) == ("b:1", "abort", "t", 3)
    assert (ns["coordinator_epoch"], ns["start_offset"], ns["producer_id"]) == (-1, -5, None)
    ns = tool.parse(tool.build_parser(), ["--bootstrap-server", "b:1", "find-hanging", "--broker-id", "2"])
    assert ns["max_transaction_timeout"] == 15  # TC's default


# --- the commands, against a fake admin --------------------------------------------------------------


class FakeAdmin:
    """The Admin calls TC makes: answers set per test, calls recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.listings: dict[int, list[TransactionListing]] | CallFailed = {}
        self.descriptions: dict[str, TransactionDescription | CallFailed] = {}
        self.producers: dict[tuple[str, int], list[ProducerState]] | CallFailed = {}
        self.topics: list[str] = []
        self.partitions: dict[str, list[tuple[int, list[int]]]] = {}
        self.abort_error: CallFailed | None = None

    def __enter__(self) -> FakeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def list_transactions(self, producer_ids: Any = (), duration_ms: int = -1) -> Any:
        self.calls.append(("list", sorted(producer_ids), duration_ms))
        if isinstance(self.listings, CallFailed):
            raise self.listings
        return self.listings

    def describe_transactions(self, ids: Any) -> Any:
        self.calls.append(("describe", sorted(ids)))
        return {i: self.descriptions.get(i, CallFailed(f"{i} not found", ErrorCode.TRANSACTIONAL_ID_NOT_FOUND))
                for i in ids}

    def describe_producers(self, tps: Any, broker_id: int | None = None) -> Any:
        self.calls.append(("producers", list(tps), broker_id))
        if isinstance(self.producers, CallFailed):
            raise self.producers
        return {tp: self.producers.get(tp, []) for tp in tps}

    def abort_transaction(self, spec: AbortSpec) -> None:
        self.calls.append(("abort", spec))
        if self.abort_error is not None:
            raise self.abort_error

    def list_topics(self) -> list[str]:
        self.calls.append(("topics",))
        return self.topics

    def describe_topics(self, topics: list[str]) -> Any:
        self.calls.append(("describe-topics", topics))
        return {t: self.partitions[t] for t in topics}


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> FakeAdmin:
    fake = FakeAdmin()
    monkeypatch.setattr(tool, "admin_for", lambda ns: fake)
    monkeypatch.setattr(tool, "_now_ms", lambda: NOW)
    return fake


def ok(*args: str) -> list[list[str]]:
    result = run("--bootstrap-server", "localhost:9092", *args)
    assert (result.exit_code, result.stderr) == (0, ""), result.output
    return cells(result.stdout)


def failed(*args: str) -> str:
    result = run("--bootstrap-server", "localhost:9092", *args)
    assert (result.exit_code, result.stdout) == (1, "")
    return result.stderr


@pytest.mark.parametrize("broker", [None, 5])
def test_describe_producers(admin: FakeAdmin, broker: int | None) -> None:
    # TCT.testDescribeProducersLeader / testDescribeProducersSpecificReplica
    admin.producers = {("foo", 5): [ProducerState(12345, 15, 1300, 1599509565, 20, 990),
                                    ProducerState(98765, 30, 2300, 1599509599, None, None)]}
    extra = [] if broker is None else ["--broker-id", str(broker)]
    table = ok("describe-producers", "--topic", "foo", "--partition", "5", *extra)
    assert table == [["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                      "CurrentTransactionStartOffset"],
                     ["12345", "15", "20", "1300", "1599509565", "990"],
                     ["98765", "30", "-1", "2300", "1599509599", "None"]]
    assert admin.calls == [("producers", [("foo", 5)], broker)]


def test_table_cells_are_padded_and_tab_ended(admin: FakeAdmin) -> None:
    # ToolsUtils.prettyPrintTable
    admin.producers = {("foo", 5): [ProducerState(7, 0, 0, 1, None, 3)]}
    result = run("--bootstrap-server", "b:1", "describe-producers", "--topic", "foo", "--partition", "5")
    assert result.stdout == ("ProducerId\tProducerEpoch\tLatestCoordinatorEpoch\tLastSequence\tLastTimestamp\t"
                             "CurrentTransactionStartOffset\t\n"
                             "7         \t0            \t-1                    \t0           \t1            \t"
                             "3                            \t\n")


@pytest.mark.parametrize(("broker", "where"), [(None, "leader"), (3, "broker 3")])
def test_describe_producers_failure(admin: FakeAdmin, broker: int | None, where: str) -> None:
    admin.producers = CallFailed("Failed to describe active producers for partition foo-5 on brokerId 3")
    extra = [] if broker is None else ["--broker-id", str(broker)]
    assert failed("describe-producers", "--topic", "foo", "--partition", "5", *extra) == (
        f"Failed to describe producers for partition foo-5 on {where}: Failed to describe active producers for "
        "partition foo-5 on brokerId 3. Enable debug logging for additional detail.\n")


@pytest.mark.parametrize("duration", [None, 9223372036854775807])
def test_list_transactions(admin: FakeAdmin, duration: int | None) -> None:
    # TCT.testListTransactions
    admin.listings = {1: [TransactionListing("baz", 13579, "CompleteCommit")],
                      0: [TransactionListing("foo", 12345, "Ongoing"), TransactionListing("bar", 98765, "PrepareAbort")]}
    extra = [] if duration is None else ["--duration-filter", str(duration)]
    assert ok("list", *extra) == [["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
                                  ["foo", "0", "12345", "Ongoing"], ["bar", "0", "98765", "PrepareAbort"],
                                  ["baz", "1", "13579", "CompleteCommit"]]
    assert admin.calls == [("list", [], -1 if duration is None else duration)]


def test_list_failure(admin: FakeAdmin) -> None:
    admin.listings = CallFailed("ListTransactions request sent to broker 2 failed because the coordinator is "
                                "shutting down")
    assert failed("list") == ("Failed to list transactions: ListTransactions request sent to broker 2 failed "
                              "because the coordinator is shutting down. Enable debug logging for additional "
                              "detail.\n")


def test_describe_transaction(admin: FakeAdmin) -> None:
    # TCT.testDescribeTransaction: started 5 s ago
    admin.descriptions = {"foo": TransactionDescription(5, "Ongoing", 12345, 15, 10000, NOW - 5000, (("bar", 0),))}
    assert ok("describe", "--transactional-id", "foo") == [
        ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
         "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"],
        ["5", "foo", "12345", "15", "Ongoing", "10000", str(NOW - 5000), "5000", "bar-0"]]


def test_describe_transaction_without_start_and_partitions_in_hash_order(admin: FakeAdmin) -> None:
    # TC prints a HashSet<TopicPartition>: Java's iteration order, not the response's
    tps = (("t", 2), ("t", 0), ("a", 1))
    admin.descriptions = {"x": TransactionDescription(1, "Empty", 3, 0, 60000, None, tps)}
    [_, row] = ok("describe", "--transactional-id", "x")
    assert row[6:8] == ["None", "None"]
    assert row[8] == "a-1,t-2,t-0"  # as java.util.HashSet prints them


def test_describe_transaction_failure(admin: FakeAdmin) -> None:
    assert failed("describe", "--transactional-id", "nope") == (
        "Failed to describe transaction state of transactional-id `nope`: nope not found. Enable debug logging "
        "for additional detail.\n")


def test_abort_by_start_offset(admin: FakeAdmin) -> None:
    # TCT.testNewBrokerAbortTransaction: the producer whose open transaction starts at the offset
    admin.producers = {("foo", 5): [ProducerState(1, 1, 0, 0, 3, 100), ProducerState(12345, 15, 1300, 1599509565,
                                                                                        76, 9173)]}
    assert ok("abort", "--topic", "foo", "--partition", "5", "--start-offset", "9173") == []
    assert admin.calls == [("producers", [("foo", 5)], None), ("abort", AbortSpec(("foo", 5), 12345, 15, 76))]


@pytest.mark.parametrize("coordinator_epoch", [29, -1])
def test_abort_with_producer_id(admin: FakeAdmin, coordinator_epoch: int) -> None:
    # TCT.testOldBrokerAbortTransactionWithUnknownCoordinatorEpoch: -1 is sent as 0
    assert ok("abort", "--topic", "foo", "--partition", "5", "--producer-id", "12345", "--producer-epoch", "15",
              "--coordinator-epoch", str(coordinator_epoch)) == []
    assert admin.calls == [("abort", AbortSpec(("foo", 5), 12345, 15, max(coordinator_epoch, 0)))]


@pytest.mark.parametrize(("args", "message"), [
    # TCT.testDescribeTransactionsStartOffsetOrProducerIdRequired and the two after it
    ([], "The transaction to abort must be identified either with --start-offset (for brokers on 3.0 or above) or "
         "with --producer-id, --producer-epoch, and --coordinator-epoch (for older brokers)"),
    (["--producer-id", "12345"], "Missing required argument --producer-epoch"),
    (["--producer-id", "12345", "--producer-epoch", "15"], "Missing required argument --coordinator-epoch"),
    (["--start-offset", "7"], "Could not find any open transactions starting at offset 7 on partition foo-0"),
])
def test_abort_refusals(admin: FakeAdmin, args: list[str], message: str) -> None:
    admin.producers = {("foo", 0): [ProducerState(1, 1, 0, 0, None, None), ProducerState(2, 1, 0, 0, None, 8)]}
    assert failed("abort", "--topic", "foo", "--partition", "0", *args) == message + "\n"
    assert not [c for c in admin.calls if c[0] == "abort"]


def test_abort_failures(admin: FakeAdmin) -> None:
    admin.producers = CallFailed("boom")
    assert failed("abort", "--topic", "foo", "--partition", "0", "--start-offset", "1") == (
        "Failed to validate producer state for partition foo-0: boom. Enable debug logging for additional detail.\n")
    admin.abort_error = CallFailed("WriteTxnMarkers request with AbortTransactionSpec(topicPartition=foo-0, "
                                   "producerId=1, producerEpoch=2, coordinatorEpoch=0) failed due to cluster "
                                   "authorization error")
    assert failed("abort", "--topic", "foo", "--partition", "0", "--producer-id", "1", "--producer-epoch", "2",
                  "--coordinator-epoch", "0") == (
        "Failed to abort transaction AbortTransactionSpec(topicPartition=foo-0, producerId=1, producerEpoch=2, "
        "coordinatorEpoch=0): WriteTxnMarkers request with AbortTransactionSpec(topicPartition=foo-0, producerId=1, "
        "producerEpoch=2, coordinatorEpoch=0) failed due to cluster authorization error. Enable debug logging for "
        "additional detail.\n")


@pytest.mark.parametrize(("args", "message"), [
    ([], "The `find-hanging` command requires either --topic or --broker-id to limit the scope of the search"),
    (["--broker-id", "0", "--partition", "5"], "The --partition argument requires --topic to be provided"),
])
def test_find_hanging_refusals(admin: FakeAdmin, args: list[str], message: str) -> None:
    # TCT.testFindHangingRequiresEitherBrokerIdOrTopic / RequiresTopicIfPartitionIsSpecified
    assert failed("find-hanging", *args) == message + "\n"


HANGING = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset", "LastTimestamp",
           "Duration(min)"]
FOO = {"foo": [(0, [0, 1]), (1, [1, 5])]}


@pytest.mark.parametrize(("args", "searched", "broker"), [
    # TCT.testFindHangingLookupTopicPartitionsForBroker / LookupTopicAndBrokerId / LookupTopicPartitionsForTopic
    (["--broker-id", "5"], [("foo", 1)], 5),
    (["--broker-id", "5", "--topic", "foo"], [("foo", 1)], 5),
    (["--topic", "foo"], [("foo", 0), ("foo", 1)], None),
])
def test_find_hanging_partitions_searched(admin: FakeAdmin, args: list[str], searched: list[Any],
                                          broker: int | None) -> None:
    admin.topics, admin.partitions = ["foo"], FOO
    assert ok("find-hanging", *args) == [HANGING]
    assert admin.calls[-1] == ("producers", searched, broker)
    assert (("topics",) in admin.calls) == ("--topic" not in args)


def open_txn(admin: FakeAdmin, age_ms: int) -> None:
    admin.producers = {("foo", 5): [ProducerState(132, 5, 500, NOW - age_ms, 19, 29384)]}


def test_find_hanging_young_transaction(admin: FakeAdmin) -> None:
    # TCT.testFindHangingSpecifiedTopicPartition: within the 15 minutes, so no coordinator is asked
    open_txn(admin, 0)
    assert ok("find-hanging", "--topic", "foo", "--partition", "5") == [HANGING]
    assert admin.calls == [("producers", [("foo", 5)], None)]


HANGING_ROW = ["foo", "5", "132", "5", "19", "29384", str(NOW - 60 * MINUTE), "60"]


def test_find_hanging_no_transactional_id(admin: FakeAdmin) -> None:
    # TCT.testFindHangingNoMappedTransactionalId
    open_txn(admin, 60 * MINUTE)
    admin.listings = {1: []}
    assert ok("find-hanging", "--topic", "foo", "--partition", "5") == [HANGING, HANGING_ROW]
    assert admin.calls[1] == ("list", [132], -1)


def test_find_hanging_transactional_id_not_found(admin: FakeAdmin) -> None:
    # TCT.testFindHangingWithNoTransactionDescription
    open_txn(admin, 60 * MINUTE)
    admin.listings = {1: [TransactionListing("bar", 132, "Ongoing")]}
    assert ok("find-hanging", "--topic", "foo", "--partition", "5") == [HANGING, HANGING_ROW]
    assert admin.calls[2] == ("describe", ["bar"])


@pytest.mark.parametrize(("partition", "hanging"), [(("foo", 10), True), (("foo", 5), False)])
def test_find_hanging_asks_the_coordinator(admin: FakeAdmin, partition: tuple[str, int], hanging: bool) -> None:
    # TCT.testFindHangingDoesNotFilterByTransactionInProgressWithDifferentPartitions and
    # testFindHangingFilterByTransactionInProgressWithSamePartition
    open_txn(admin, 60 * MINUTE)
    admin.listings = {1: [TransactionListing("bar", 132, "Ongoing")]}
    admin.descriptions = {"bar": TransactionDescription(1, "Ongoing", 132, 5, 60000, NOW, (partition,))}
    assert ok("find-hanging", "--topic", "foo", "--partition", "5", "--max-transaction-timeout", "0") == (
        [HANGING, HANGING_ROW] if hanging else [HANGING])


def test_find_hanging_max_timeout_in_minutes(admin: FakeAdmin) -> None:
    open_txn(admin, 3 * MINUTE)
    admin.listings = {1: []}
    assert ok("find-hanging", "--topic", "foo", "--partition", "5", "--max-transaction-timeout", "3") == [HANGING]
    assert len(ok("find-hanging", "--topic", "foo", "--partition", "5", "--max-transaction-timeout", "2")) == 2


def test_find_hanging_failures(admin: FakeAdmin) -> None:
    admin.producers = CallFailed("boom")
    assert failed("find-hanging", "--broker-id", "3", "--topic", "foo", "--partition", "5") == (
        "Failed to describe producers for 1 partitions on broker Optional[3]: boom. Enable debug logging for "
        "additional detail.\n")
    open_txn(admin, 60 * MINUTE)
    admin.listings = {1: [TransactionListing("bar", 132, "Ongoing")]}
    admin.descriptions = {"bar": CallFailed("denied", ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)}
    assert failed("find-hanging", "--topic", "foo", "--partition", "5") == (
        "Failed to describe 1 transactions: denied. Enable debug logging for additional detail.\n")


def test_missing_command_config(tmp_path: Any) -> None:
    # TC.buildAdminClient: Utils.loadProps' FileNotFoundException
    missing = tmp_path / "admin.properties"
    result = run("--bootstrap-server", "b:1", "--command-config", str(missing), "list")
    assert (result.exit_code, result.stderr) == (1, f"Failed to load admin client properties: {missing} (No such "
                                                    "file or directory). Enable debug logging for additional detail.\n")


def test_unreachable_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    # the Java client keeps trying until default.api.timeout.ms, then fails the call
    monkeypatch.setattr(tool, "API_TIMEOUT_S", 0.3)
    port = free_port()  # nobody listens there
    result = run("--bootstrap-server", f"127.0.0.1:{port}", "list")
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == ("Failed to list transactions: Timed out waiting for a node assignment. Call: "
                             "listTransactions(api=METADATA). Enable debug logging for additional detail.\n")


def test_java_hash_order() -> None:
    # what java.util.HashMap / HashSet (Java 17) print for these keys, put in this order
    assert string_hash("foo") == 101574 and string_hash("hello world, it is long") == -1987755275
    tps = [(f"topic{i % 7}", i) for i in range(40)]  # 40 keys: the table grew to 64
    assert [f"{t}-{p}" for t, p in java_order(tps, tp_hash)][:8] == [
        "topic1-1", "topic3-3", "topic5-5", "topic0-28", "topic2-30", "topic4-32", "topic6-34", "topic1-22"]
    assert java_order([132, 5000000000, -7, 1 << 40, 17, 1, 16, 99999], long_hash) == [
        1 << 40, 16, 17, 1, 132, 5000000000, -7, 99999]
    assert java_order(["zeta", "alpha", "__consumer_offsets"], string_hash, 3) == ["zeta", "__consumer_offsets", "alpha"]
    assert [p for _t, p in java_order([("foo", i * 3) for i in range(5)], tp_hash, 5)] == [6, 12, 3, 0, 9]


# --- TransactionsAdmin, against a fake connection ---------------------------------------------------------


class FakeClient:
    """AdminClient's surface: ``refresh`` answers Metadata, ``send`` pops a queued answer per API key."""

    def __init__(self, leaders: dict[tuple[str, int], int], brokers: tuple[int, ...] = (1, 2, 3)) -> None:
        self.leaders = leaders
        self.nodes = {b: SimpleNamespace(node_id=b, host=f"h{b}", port=9092) for b in brokers}
        self.sent: list[tuple[str, int | None, Any]] = []
        self.answers: dict[int, list[Any]] = {}
        self.versions: dict[int, int] = {}

    def refresh(self, topics: list[str] | None = None) -> Any:
        self.sent.append(("Metadata", None, topics))
        names = sorted({t for t, _p in self.leaders}) if topics is None else topics
        return SimpleNamespace(brokers=list(self.nodes.values()), topics=[
            SimpleNamespace(name=t, error_code=0 if any(k[0] == t for k in self.leaders) else 3, partitions=[
                SimpleNamespace(partition_index=p, leader_id=leader, error_code=0, replica_nodes=[leader])
                for (topic, p), leader in sorted(self.leaders.items()) if topic == t]) for t in names])

    def version_for(self, address: tuple[str, int], api_key: int, client_max: int) -> int:
        return min(self.versions.get(api_key, client_max), client_max)

    def send(self, request_cls: Any, fields: dict[str, Any], *, node_id: int | None = None,
             max_version: int | None = None) -> Any:
        version = min(self.versions.get(request_cls.API_KEY, 99), request_cls.max_version if max_version is None
                      else max_version)
        request = request_cls(version=version, **{k: v for k, v in fields.items()
                                                  if request_cls.fields[k].for_version_q(version)})
        request.encode()  # every field is one the request has, of the right type
        self.sent.append((request_cls.__name__, node_id, request))
        answer = self.answers[request_cls.API_KEY].pop(0)
        return answer(request) if callable(answer) else answer

    def close(self) -> None:
        pass


def txn_admin(client: FakeClient) -> TransactionsAdmin:
    admin = TransactionsAdmin(client, timeout_s=0.5)  # type: ignore[arg-type]
    return admin


def test_list_transactions_asks_every_broker() -> None:
    client = FakeClient({})
    L = ListTransactionsResponse
    client.answers[66] = [L(version=1, throttle_time_ms=0, error_code=0, unknown_state_filters=[], transaction_states=[
        L.TransactionState(transactional_id=f"t{b}", producer_id=b, transaction_state=s)])
        for b, s in ((1, "Ongoing"), (2, "Dead"), (3, "Empty"))]
    assert txn_admin(client).list_transactions([7], 1000) == {
        1: [TransactionListing("t1", 1, "Ongoing")], 2: [TransactionListing("t2", 2, "Unknown")],
        3: [TransactionListing("t3", 3, "Empty")]}
    assert client.sent[0] == ("Metadata", None, [])  # the brokers only
    assert [(name, node, r.producer_id_filters, r.duration_filter) for name, node, r in client.sent[1:]] == [
        ("ListTransactionsRequest", b, [7], 1000) for b in (1, 2, 3)]


def test_list_transactions_duration_filter_needs_v1() -> None:
    client = FakeClient({})
    client.versions[66] = 0
    with pytest.raises(CallFailed, match=r"^Duration filter can be set only when using API version 1 or higher\. "):
        txn_admin(client).list_transactions(duration_ms=0)


def test_describe_transactions_finds_the_coordinator() -> None:
    client = FakeClient({})
    F, D = FindCoordinatorResponse, DescribeTransactionsResponse
    client.answers[10] = [F(version=4, throttle_time_ms=0, coordinators=[
        F.Coordinator(key="a", node_id=2, host="h2", port=9092, error_code=0, error_message=None),
        F.Coordinator(key="b", node_id=2, host="h2", port=9092, error_code=0, error_message=None)])]
    client.answers[65] = [D(version=0, throttle_time_ms=0, transaction_states=[
        D.TransactionState(error_code=0, transactional_id="a", transaction_state="Ongoing", transaction_timeout_ms=60000,
                           transaction_start_time_ms=123, producer_id=9, producer_epoch=1,
                           topics=[D.TransactionState.TopicData(topic="t", partitions=[0, 1])]),
        D.TransactionState(error_code=ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, transactional_id="b", transaction_state="",
                           transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1,
                           topics=[])])]
    got = txn_admin(client).describe_transactions(["a", "b"])
    assert got["a"] == TransactionDescription(2, "Ongoing", 9, 1, 60000, 123, (("t", 0), ("t", 1)))
    assert isinstance(got["b"], CallFailed) and got["b"].code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    assert str(got["b"]) == "DescribeTransactions request for transactionalId `b` failed because the ID could not be found"
    [find, describe] = client.sent
    assert (find[0], find[2].key_type, find[2].coordinator_keys) == ("FindCoordinatorRequest", 1, ["a", "b"])
    assert (describe[1], describe[2].transactional_ids) == (2, ["a", "b"])


def test_describe_transactions_looks_again_after_not_coordinator() -> None:
    client = FakeClient({})
    F, D = FindCoordinatorResponse, DescribeTransactionsResponse
    client.answers[10] = [F(version=4, throttle_time_ms=0, coordinators=[F.Coordinator(
        key="a", node_id=n, host="h", port=1, error_code=0, error_message=None)]) for n in (1, 3)]

    def state(code: int) -> Any:
        return D(version=0, throttle_time_ms=0, transaction_states=[D.TransactionState(
            error_code=code, transactional_id="a", transaction_state="Empty", transaction_timeout_ms=1,
            transaction_start_time_ms=-1, producer_id=4, producer_epoch=0, topics=[])])
    client.answers[65] = [state(ErrorCode.NOT_COORDINATOR), state(0)]
    assert txn_admin(client).describe_transactions(["a"])["a"] == TransactionDescription(3, "Empty", 4, 0, 1, None, ())
    assert [(name, node) for name, node, _r in client.sent] == [
        ("FindCoordinatorRequest", None), ("DescribeTransactionsRequest", 1),
        ("FindCoordinatorRequest", None), ("DescribeTransactionsRequest", 3)]


def producers_answer(request: Any, code: int = 0, start: int = 5) -> Any:
    R = DescribeProducersResponse
    S = R.TopicResponse.PartitionResponse.ProducerState
    return R(version=0, throttle_time_ms=0, topics=[R.TopicResponse(name=t.name, partitions=[
        R.TopicResponse.PartitionResponse(partition_index=p, error_code=code, error_message=None, active_producers=[
            S(producer_id=7, producer_epoch=2, last_sequence=4, last_timestamp=99, coordinator_epoch=-1,
              current_txn_start_offset=start)] if code == 0 else []) for p in t.partition_indexes])
        for t in request.topics])


def test_describe_producers_goes_to_each_leader() -> None:
    client = FakeClient({("t", 0): 1, ("t", 1): 2, ("u", 0): 1})
    client.answers[61] = [producers_answer, producers_answer]
    got = txn_admin(client).describe_producers([("t", 0), ("t", 1), ("u", 0)])
    assert got[("t", 1)] == [ProducerState(7, 2, 4, 99, None, 5)]
    assert [(node, [(t.name, t.partition_indexes) for t in r.topics]) for name, node, r in client.sent[1:]] == [
        (1, [("t", [0]), ("u", [0])]), (2, [("t", [1])])]


def test_describe_producers_not_leader() -> None:
    # a leader that moved: looked up again; a broker given by the user: a failure
    client = FakeClient({("t", 0): 1})
    client.answers[61] = [lambda r: producers_answer(r, ErrorCode.NOT_LEADER_OR_FOLLOWER), producers_answer]
    assert txn_admin(client).describe_producers([("t", 0)])[("t", 0)][0].txn_start_offset == 5
    assert [name for name, _n, _r in client.sent] == ["Metadata", "DescribeProducersRequest"] * 2
    client.answers[61] = [lambda r: producers_answer(r, ErrorCode.NOT_LEADER_OR_FOLLOWER)]
    with pytest.raises(CallFailed, match=r"^Failed to describe active producers for partition t-0 on brokerId 3$"):
        txn_admin(client).describe_producers([("t", 0)], 3)


def test_unknown_topic_times_out() -> None:
    client = FakeClient({})
    with pytest.raises(CallFailed, match=r"^Timed out waiting for a node assignment\. Call: describeProducers"
                                         r"\(api=METADATA\)$"):
        txn_admin(client).describe_producers([("nope", 0)])


def markers_answer(request: Any, code: int = 0) -> Any:
    W = WriteTxnMarkersResponse
    R = W.WritableTxnMarkerResult
    return W(version=1, markers=[R(producer_id=m.producer_id, topics=[R.WritableTxnMarkerTopicResult(
        name=t.name, partitions=[R.WritableTxnMarkerTopicResult.WritableTxnMarkerPartitionResult(
            partition_index=p, error_code=code) for p in t.partition_indexes]) for t in m.topics])
        for m in request.markers])


def test_abort_writes_an_abort_marker_to_the_leader() -> None:
    client = FakeClient({("t", 3): 2})
    client.answers[27] = [markers_answer]
    txn_admin(client).abort_transaction(AbortSpec(("t", 3), 12345, 15, 76))
    [(name, node, request)] = client.sent[1:]
    assert (name, node, request.version) == ("WriteTxnMarkersRequest", 2, 1)
    [m] = request.markers
    assert (m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch) == (12345, 15, False, 76)
    assert [(t.name, t.partition_indexes) for t in m.topics] == [("t", [3])]


@pytest.mark.parametrize(("code", "why"), [
    (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "failed due to cluster authorization error"),
    (ErrorCode.TRANSACTION_COORDINATOR_FENCED, "failed since the provided coordinator epoch 76 has been fenced by "
                                               "the active coordinator"),
    (ErrorCode.INVALID_PRODUCER_EPOCH, "failed due an invalid producer epoch"),
    (ErrorCode.CORRUPT_MESSAGE, "failed due to unexpected error: This message has failed its CRC checksum, exceeds "
                                "the valid size, has a null key for a compacted topic, or is otherwise corrupt."),
])
def test_abort_errors(code: int, why: str) -> None:
    # AbortTransactionHandler.handleError
    client = FakeClient({("t", 3): 2})
    client.answers[27] = [lambda r: markers_answer(r, code)]
    with pytest.raises(CallFailed) as err:
        txn_admin(client).abort_transaction(AbortSpec(("t", 3), 12345, 15, 76))
    assert str(err.value) == ("WriteTxnMarkers request with AbortTransactionSpec(topicPartition=t-3, producerId=12345, "
                              f"producerEpoch=15, coordinatorEpoch=76) {why}")


def test_requests_are_kafkas() -> None:
    # the request classes and versions Kafka 3.9's admin client uses
    assert (ListTransactionsRequest.API_KEY, DescribeTransactionsRequest.API_KEY, DescribeProducersRequest.API_KEY,
            WriteTxnMarkersRequest.API_KEY, FindCoordinatorRequest.API_KEY) == (66, 65, 61, 27, 10)
