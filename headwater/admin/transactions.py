"""``headwater transactions``: a drop-in for kafka-transactions.sh over the Kafka protocol.

Kafka 3.9's ``TransactionsCommand`` inspects the transactional state of producers and recovers hanging
transactions. Sub-commands, options, tables and messages are Kafka's (scripts read them):

- ``list [--duration-filter MS]``: Metadata for the brokers, then ListTransactions (API 66) to every
  one of them (each answers for the coordinators it hosts);
- ``describe --transactional-id ID``: FindCoordinator (key type 1), then DescribeTransactions (65);
- ``describe-producers --topic T --partition P [--broker-id B]``: DescribeProducers (61) to the
  partition's leader, or to the broker given;
- ``abort --topic T --partition P`` and ``--start-offset O`` (DescribeProducers finds the producer whose
  open transaction starts there) or ``--producer-id --producer-epoch --coordinator-epoch``: a
  WriteTxnMarkers (27) ABORT marker for that partition, sent to its leader (needs CLUSTER_ACTION);
- ``find-hanging (--broker-id B | --topic T [--partition P]) [--max-transaction-timeout MIN]``: the
  partitions' open transactions older than the timeout whose coordinator does not know the
  transaction or does not list the partition in it.

Kafka parses this tool's command line with argparse4j 0.7.0, not jopt-simple as its other tools
(``jopt.py``), so usage, help and errors here are argparse4j's: a bad command line prints the usage
and ``kafka-transactions.sh: error: ...`` on stderr, exit 1; ``--help`` prints help on stdout, also
exit 1 (Kafka exits 1 after every parser exception); ``--version`` exits 0. A failed call prints
``<what failed>: <cause>. Enable debug logging for additional detail.`` on stderr, exit 1. Where Kafka
prints a Java HashMap or HashSet, rows and lists come in that map's iteration order.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple, NoReturn, TypeVar

import click
from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer.transaction import WriteTxnMarkersRequest

from headwater.admin.argparse4j import (
    VERSION,
    Arg,
    ArgError,
    HelpOrVersion,
    Parser,
    format_help,
    format_width,
    java_div,
    parse,
)
from headwater.admin.client import AdminClient, AdminError
from headwater.admin.jopt import KAFKA_VERSION
from headwater.admin.options import connect
from headwater.protocol.error_messages import exception_message
from headwater.protocol.errors import ErrorCode as E

KAFKA_COMMIT_ID = "a60e31147e6b01ee"  # what Kafka 3.9.0's AppInfoParser reports with the version
CLIENT_ID = "adminclient-1"  # the Java Admin client's name when the tool sets none
API_TIMEOUT_S = 60.0  # the Java Admin client's default.api.timeout.ms: how long a call keeps retrying
RETRY_BACKOFF_S, MAX_BACKOFF_S = 0.1, 1.0  # retry.backoff.ms, retry.backoff.max.ms
MAX_BATCH_SIZE = 500  # find-hanging asks about this many topics or partitions at a time
TXN_STATES = frozenset({"Ongoing", "PrepareAbort", "PrepareCommit", "CompleteAbort", "CompleteCommit", "Empty",
                        "PrepareEpochFence"})  # Kafka's TransactionState; anything else parses as Unknown

TP = tuple[str, int]
K = TypeVar("K")


def tp_str(tp: TP) -> str:
    return f"{tp[0]}-{tp[1]}"


# --- the command line's parser (argparse4j.py) ------------------------------------------------------------


def build_parser() -> Parser:
    """``TransactionsCommand``'s parser: the base options, then one sub-command per command."""
    topic, partition = Arg(("--topic",), "topic name", required=True), \
        Arg(("--partition",), "partition number", "Integer", required=True)
    commands = [
        Parser("list", [Arg(("--duration-filter",), "Duration (in millis) to filter by: if < 0, all transactions will "
                            "be returned; otherwise, only transactions running longer than this duration will be "
                            "returned", "Long")], "list transactions"),
        Parser("describe", [Arg(("--transactional-id",), "transactional id", required=True)],
               "describe the state of an active transactional-id", "Describe the state of an active transactional-id."),
        Parser("describe-producers", [Arg(("--broker-id",), "optional broker id to describe the producer state on a "
                                          "specific replica", "Integer"), topic, partition],
               "describe the states of active producers for a topic partition"),
        Parser("abort", [topic, partition,
                         Arg(("--start-offset",), "start offset of the transaction to abort", "Long", group=0),
                         Arg(("--producer-id",), "producer id", "Long", group=1),
                         Arg(("--producer-epoch",), "producer epoch", "Short", group=1),
                         Arg(("--coordinator-epoch",), "coordinator epoch", "Integer", group=1)],
               "abort a hanging transaction (requires administrative privileges)",
               groups=[("Brokers on versions 3.0 and above",
                        "For newer brokers, only the start offset of the transaction to be aborted is required"),
                       ("Brokers on versions older than 3.0",
                        "For older brokers, you must provide all of these arguments")]),
        Parser("find-hanging", [
            Arg(("--broker-id",), "broker id to search for hanging transactions", "Integer"),
            Arg(("--max-transaction-timeout",), "maximum transaction timeout in minutes to limit the scope of the "
                "search (15 minutes by default)", "Integer", default=15),
            Arg(("--topic",), "topic name to limit search to (required if --partition is specified)"),
            Arg(("--partition",), "partition number", "Integer")], "find hanging transactions"),
    ]
    return Parser(None, [VERSION, Arg(("--command-config",), "property file containing configs to be passed to "
                                      "admin client", metavar="FILE"),
                         Arg(("--bootstrap-server",), "hostname and port for the broker to connect to, in the form "
                             "`host:port`  (multiple comma-separated entries can be given)", required=True,
                             metavar="host:port")],
                  description="This tool is used to analyze the transactional state of producers in the cluster. It "
                              "can be used to detect and recover from hanging transactions.",
                  commands={c.command: c for c in commands if c.command})


# --- Java's hash order -------------------------------------------------------------------------------------


def _int32(n: int) -> int:
    return (n + (1 << 31)) % (1 << 32) - (1 << 31)


def string_hash(s: str) -> int:
    h, raw = 0, s.encode("utf-16-be")
    for k in range(0, len(raw), 2):
        h = _int32(31 * h + int.from_bytes(raw[k:k + 2], "big"))
    return h


def tp_hash(tp: TP) -> int:
    return _int32(31 * (31 + tp[1]) + string_hash(tp[0]))


def long_hash(n: int) -> int:
    return _int32(n ^ ((n % (1 << 64)) >> 32))


def java_order(keys: Iterable[K], hash_of: Callable[[K], int], capacity: int | None = None) -> list[K]:
    """``keys`` in the order a java.util.HashMap (or HashSet) they were put in, in this order, iterates
    them: by bucket of the final table, then in insertion order."""
    keys = list(dict.fromkeys(keys))
    cap = 16 if capacity is None else 1 << max(0, capacity - 1).bit_length()
    for size in range(1, len(keys) + 1):
        cap *= 2 if size > int(cap * 0.75) else 1

    def bucket(key: K) -> int:
        h = hash_of(key) % (1 << 32)
        return (h ^ (h >> 16)) & (cap - 1)
    return sorted(keys, key=bucket)


# --- the admin calls ---------------------------------------------------------------------------------------


class CallFailed(Exception):
    """An Admin future's failure: ``str()`` is the Java exception's message; ``code`` its error code."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class TransactionListing(NamedTuple):
    transactional_id: str
    producer_id: int
    state: str


class TransactionDescription(NamedTuple):
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int | None  # None where Kafka has an empty Optional
    partitions: tuple[TP, ...]


class ProducerState(NamedTuple):
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int | None
    txn_start_offset: int | None


class AbortSpec(NamedTuple):
    tp: TP
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int

    def __str__(self) -> str:
        return (f"AbortTransactionSpec(topicPartition={tp_str(self.tp)}, producerId={self.producer_id}, "
                f"producerEpoch={self.producer_epoch}, coordinatorEpoch={self.coordinator_epoch})")


def _state(name: str) -> str:
    return name if name in TXN_STATES else "Unknown"


def _topics(tps: Iterable[TP], make: Callable[..., Any]) -> list[Any]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in tps:
        by_topic.setdefault(topic, []).append(partition)
    return [make(name=t, partition_indexes=ps) for t, ps in by_topic.items()]


_RETRY_PARTITION = {E.NOT_LEADER_OR_FOLLOWER, E.REPLICA_NOT_AVAILABLE, E.LEADER_NOT_AVAILABLE, E.BROKER_NOT_AVAILABLE,
                    E.KAFKA_STORAGE_ERROR, E.UNKNOWN_TOPIC_OR_PARTITION}


class TransactionsAdmin:
    """The Java Admin calls the tool makes, with the lookups, retries and failure messages of Kafka
    3.9's admin handlers (``clients/.../admin/internals/*Handler.java``), one request at a time."""

    def __init__(self, client: AdminClient, timeout_s: float = API_TIMEOUT_S) -> None:
        self.client, self.timeout_s = client, timeout_s
        self._call = ""  # the call in progress, named as Kafka's timeouts name it

    def __enter__(self) -> TransactionsAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()

    def _until(self, step: Callable[[], bool]) -> None:
        """Repeat ``step`` until it says it is done, as the Java client retries a lookup or a request after
        a retriable error or a lost connection, until the call's deadline."""
        deadline, backoff = time.monotonic() + self.timeout_s, RETRY_BACKOFF_S
        while True:
            try:
                if step():
                    return
            except AdminError:
                self.client.close()  # connections are made again on the next try
            if time.monotonic() + backoff > deadline:
                raise CallFailed(f"Timed out waiting for a node assignment. Call: {self._call}")
            time.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    def _metadata(self, call: str, topics: list[str] | None) -> Any:
        """Metadata from any broker that answers."""
        answer: list[Any] = []

        def ask() -> bool:
            answer.append(self.client.refresh(topics))
            return True

        self._call = call
        self._until(ask)
        return answer[0]

    def _leaders(self, tps: list[TP], failed: dict[TP, CallFailed]) -> dict[TP, int]:
        """``PartitionLeaderStrategy``: Metadata for the topics; unknown topics and leaderless partitions
        are looked up again, other errors fail their partitions."""
        resp = self.client.refresh(list(dict.fromkeys(t for t, _p in tps)))
        wanted, leaders = set(tps), {}
        for t in resp.topics:
            if (code := t.error_code) in (E.UNKNOWN_TOPIC_OR_PARTITION, E.LEADER_NOT_AVAILABLE, E.BROKER_NOT_AVAILABLE):
                continue
            why = {E.TOPIC_AUTHORIZATION_FAILED: "topic authorization failure",
                   E.INVALID_TOPIC_EXCEPTION: f"invalid topic `{t.name}`"}.get(
                code, f"unexpected error for topic `{t.name}`")
            for tp in (tp for tp in tps if code and tp[0] == t.name):
                failed[tp] = CallFailed(f"Failed to fetch metadata for partition {tp_str(tp)} due to {why}", code)
            for p in [] if code else t.partitions:
                if (tp := (t.name, p.partition_index)) not in wanted or p.error_code in _RETRY_PARTITION:
                    continue
                if p.error_code:
                    failed[tp] = CallFailed(f"Unexpected error during metadata lookup for {tp_str(tp)}", p.error_code)
                elif p.leader_id >= 0:
                    leaders[tp] = p.leader_id
        return leaders

    def list_transactions(self, producer_ids: Iterable[int] = (), duration_ms: int = -1
                          ) -> dict[int, list[TransactionListing]]:
        """ListTransactions to every broker: the listings by broker id."""
        listings: dict[int, list[TransactionListing]] = {}

        def ask(broker: int) -> bool:
            node = self.client.nodes[broker]
            if duration_ms >= 0 and self.client.version_for((node.host, node.port), 66, 1) < 1:
                raise CallFailed("Duration filter can be set only when using API version 1 or higher. If client is "
                                 "connected to an older broker, do not specify duration filter or set duration "
                                 "filter to -1.", E.UNSUPPORTED_VERSION)
            fields = dict(state_filters=[], producer_id_filters=list(producer_ids), duration_filter=duration_ms)
            resp = self.client.send(ListTransactionsRequest, fields, node_id=broker, max_version=1)
            if (code := resp.error_code) == E.COORDINATOR_LOAD_IN_PROGRESS:
                return False
            if code:
                why = "failed because the coordinator is shutting down" if code == E.COORDINATOR_NOT_AVAILABLE \
                    else "failed with an unexpected exception"
                raise CallFailed(f"ListTransactions request sent to broker {broker} {why}", code)
            listings[broker] = [TransactionListing(s.transactional_id, s.producer_id, _state(s.transaction_state))
                                for s in resp.transaction_states]
            return True

        brokers = sorted(b.node_id for b in self._metadata("listTransactions(api=METADATA)", []).brokers)
        self._call = "listTransactions(api=LIST_TRANSACTIONS)"
        for broker in brokers:
            self._until(functools.partial(ask, broker))
        return listings

    def _find_coordinators(self, ids: list[str], found: dict[str, int], results: dict[str, Any]) -> None:
        """``CoordinatorStrategy``: one FindCoordinator (key type TRANSACTION) for all of them, to the bootstrap
        server or else a broker of the cluster. It is batched (v4): every broker that has DescribeTransactions
        (Kafka 3.0, KIP-664) has that too (KIP-699)."""
        fields = dict(key_type=1, coordinator_keys=ids)
        try:
            resp = self.client.send(FindCoordinatorRequest, fields, max_version=4)
        except AdminError:
            self.client.refresh([])
            resp = self.client.send(FindCoordinatorRequest, fields, node_id=next(iter(self.client.nodes), None),
                                    max_version=4)
        for c in resp.coordinators:
            key = f"CoordinatorKey(idValue='{c.key}', type=TRANSACTION)"
            if c.error_code == E.NONE:
                found[c.key] = c.node_id
            elif c.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                results[c.key] = CallFailed(f"FindCoordinator request for transactionalId `{key}` failed due to "
                                            "authorization failure", c.error_code)
            elif c.error_code not in (E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS):
                results[c.key] = CallFailed(f"FindCoordinator request for key `{key}` failed due to an unexpected "
                                            "error", c.error_code)

    def describe_transactions(self, ids: Iterable[str]) -> dict[str, TransactionDescription | CallFailed]:
        """Each id's coordinator, then DescribeTransactions to it: a description or the id's failure."""
        wanted = list(dict.fromkeys(ids))
        results: dict[str, TransactionDescription | CallFailed] = {}
        coordinators: dict[str, int] = {}
        failures = {E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "failed due to authorization failure",
                    E.TRANSACTIONAL_ID_NOT_FOUND: "failed because the ID could not be found"}

        def step() -> bool:
            self._call = "describeTransactions(api=FIND_COORDINATOR)"
            if lost := [t for t in wanted if t not in results and t not in coordinators]:
                self._find_coordinators(lost, coordinators, results)
            by_node: dict[int, list[str]] = {}
            for tid in (t for t in wanted if t not in results and t in coordinators):
                by_node.setdefault(coordinators[tid], []).append(tid)
            self._call = "describeTransactions(api=DESCRIBE_TRANSACTIONS)"
            for node, tids in by_node.items():
                resp = self.client.send(DescribeTransactionsRequest, dict(transactional_ids=tids), node_id=node,
                                        max_version=0)
                for s in resp.transaction_states:
                    if (tid := s.transactional_id) not in tids or s.error_code == E.COORDINATOR_LOAD_IN_PROGRESS:
                        continue
                    if s.error_code in (E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE):
                        coordinators.pop(tid, None)  # moved: find it again
                    elif s.error_code:
                        why = failures.get(s.error_code, "failed due to unexpected error")
                        results[tid] = CallFailed(f"DescribeTransactions request for transactionalId `{tid}` {why}",
                                                  s.error_code)
                    else:
                        start = s.transaction_start_time_ms if s.transaction_start_time_ms >= 0 else None
                        results[tid] = TransactionDescription(
                            node, _state(s.transaction_state), s.producer_id, s.producer_epoch,
                            s.transaction_timeout_ms, start, tuple((t.topic, p) for t in s.topics for p in t.partitions))
            return all(t in results for t in wanted)

        try:
            self._until(step)
        except CallFailed as exc:
            for tid in wanted:
                results.setdefault(tid, exc)
        return results

    def describe_producers(self, tps: Iterable[TP], broker_id: int | None = None) -> dict[TP, list[ProducerState]]:
        """DescribeProducers to each partition's leader (or to ``broker_id``): the active producers of every
        partition; the first partition that fails raises."""
        wanted = list(dict.fromkeys(tps))
        done: dict[TP, list[ProducerState]] = {}
        failed: dict[TP, CallFailed] = {}

        def step() -> bool:
            todo = [tp for tp in wanted if tp not in done]
            self._call = "describeProducers(api=METADATA)"
            targets = self._leaders(todo, failed) if broker_id is None else dict.fromkeys(todo, broker_id)
            for node in dict.fromkeys(targets.values()):
                self._call = "describeProducers(api=DESCRIBE_PRODUCERS)"
                group = [tp for tp in todo if targets.get(tp) == node]
                resp = self.client.send(DescribeProducersRequest, dict(
                    topics=_topics(group, DescribeProducersRequest.TopicRequest)), node_id=node, max_version=0)
                for t in resp.topics:
                    for p in t.partitions:
                        if (tp := (t.name, p.partition_index)) in group:
                            self._producers(tp, p, broker_id, done, failed)
            return bool(failed) or len(done) == len(wanted)

        self._until(step)
        for tp in (tp for tp in wanted if tp in failed):
            raise failed[tp]
        return {tp: done[tp] for tp in wanted}

    @staticmethod
    def _producers(tp: TP, p: Any, broker_id: int | None, done: dict[TP, list[ProducerState]],
                   failed: dict[TP, CallFailed]) -> None:
        """One partition of a DescribeProducers answer (``DescribeProducersHandler.handlePartitionError``):
        an unknown partition is asked about again, a leader that moved looked up again."""
        if (code := p.error_code) == E.NONE:
            done[tp] = [ProducerState(s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp,
                                      s.coordinator_epoch if s.coordinator_epoch >= 0 else None,
                                      s.current_txn_start_offset if s.current_txn_start_offset >= 0 else None)
                        for s in p.active_producers]
        elif code == E.NOT_LEADER_OR_FOLLOWER and broker_id is not None:
            failed[tp] = CallFailed(f"Failed to describe active producers for partition {tp_str(tp)} on brokerId "
                                    f"{broker_id}", code)
        elif code == E.INVALID_TOPIC_EXCEPTION:
            failed[tp] = CallFailed(f"Failed to fetch metadata for partition {tp_str(tp)} due to invalid topic error: "
                                    f"{exception_message(code, p.error_message)}", code)
        elif code == E.TOPIC_AUTHORIZATION_FAILED:
            failed[tp] = CallFailed(f"Failed to describe active producers for partition {tp_str(tp)} due to "
                                    f"authorization failure on topic `{tp[0]}`", code)
        elif code not in (E.NOT_LEADER_OR_FOLLOWER, E.UNKNOWN_TOPIC_OR_PARTITION):
            failed[tp] = CallFailed(f"Failed to describe active producers for partition {tp_str(tp)} due to "
                                    "unexpected error", code)

    def abort_transaction(self, spec: AbortSpec) -> None:
        """A WriteTxnMarkers ABORT marker for the spec's partition, to its leader (``AbortTransactionHandler``)."""
        W = WriteTxnMarkersRequest
        marker = W.WritableTxnMarker(producer_id=spec.producer_id, producer_epoch=spec.producer_epoch,
                                     transaction_result=False, coordinator_epoch=spec.coordinator_epoch,
                                     topics=_topics([spec.tp], W.WritableTxnMarker.WritableTxnMarkerTopic))
        failures = {E.CLUSTER_AUTHORIZATION_FAILED: "failed due to cluster authorization error",
                    E.INVALID_PRODUCER_EPOCH: "failed due an invalid producer epoch",
                    E.TRANSACTION_COORDINATOR_FENCED: f"failed since the provided coordinator epoch "
                                                      f"{spec.coordinator_epoch} has been fenced by the active "
                                                      "coordinator"}

        def step() -> bool:
            self._call = "abortTransaction(api=METADATA)"
            failed: dict[TP, CallFailed] = {}
            leader = self._leaders([spec.tp], failed).get(spec.tp)
            if spec.tp in failed:
                raise failed[spec.tp]
            if leader is None:
                return False
            self._call = "abortTransaction(api=WRITE_TXN_MARKERS)"
            resp = self.client.send(W, dict(markers=[marker]), node_id=leader, max_version=1)
            entries = [(m.producer_id, t.name, p.partition_index, p.error_code)
                       for m in resp.markers for t in m.topics for p in t.partitions]
            if len(entries) != 1 or entries[0][:3] != (spec.producer_id, *spec.tp):
                raise CallFailed(f"WriteTxnMarkers response included unexpected entries: {resp.markers}")
            if (code := entries[0][3]) in (E.NOT_LEADER_OR_FOLLOWER, E.REPLICA_NOT_AVAILABLE, E.BROKER_NOT_AVAILABLE,
                                           E.UNKNOWN_TOPIC_OR_PARTITION):
                return False  # find the leader again
            if code:
                why = failures.get(code, f"failed due to unexpected error: {exception_message(code)}")
                raise CallFailed(f"WriteTxnMarkers request with {spec} {why}", code)
            return True

        self._until(step)

    def list_topics(self) -> list[str]:
        """Every topic, internal ones too (in the order of Kafka's HashMap of them)."""
        return java_order([t.name for t in self._metadata("listTopics", None).topics if t.error_code == E.NONE],
                          string_hash)

    def describe_topics(self, topics: list[str]) -> dict[str, list[tuple[int, list[int]]]]:
        """Each topic's partitions and their replicas; a topic's error fails the call."""
        answered = {t.name: t for t in self._metadata("describeTopics", topics).topics}
        found: dict[str, list[tuple[int, list[int]]]] = {}
        for name in topics:
            t = answered.get(name)
            if t is None or t.error_code:
                code = E.UNKNOWN_TOPIC_OR_PARTITION if t is None else t.error_code
                raise CallFailed(exception_message(code), code)
            found[name] = sorted((p.partition_index, list(p.replica_nodes)) for p in t.partitions)
        return found


# --- the commands ------------------------------------------------------------------------------------------


class ToolExit(Exception):
    """``printErrorAndExit``: the message on stderr, exit 1."""


def _fail(what: str, cause: CallFailed) -> NoReturn:
    raise ToolExit(f"{what}: {cause}. Enable debug logging for additional detail.")


def table(headers: list[str], rows: list[list[str]]) -> str:
    """``ToolsUtils.prettyPrintTable``: each cell padded to its column's width and followed by a tab."""
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    return "".join("".join(c.ljust(w) + "\t" for c, w in zip(r, widths, strict=True)) + "\n" for r in [headers, *rows])


LIST_HEADERS = ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
DESCRIBE_HEADERS = ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"]
PRODUCERS_HEADERS = ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                     "CurrentTransactionStartOffset"]
HANGING_HEADERS = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                   "LastTimestamp", "Duration(min)"]

Out = Callable[[str], None]
Clock = Callable[[], int]


def _none(n: int | None) -> str:
    return "None" if n is None else str(n)


def _or(n: int | None, default: int) -> int:
    return default if n is None else n


def run_list(admin: TransactionsAdmin, ns: dict[str, Any], out: Out, now_ms: Clock) -> None:
    try:
        by_broker = admin.list_transactions(duration_ms=_or(ns.get("duration_filter"), -1))
    except CallFailed as exc:
        _fail("Failed to list transactions", exc)
    out(table(LIST_HEADERS, [[t.transactional_id, str(b), str(t.producer_id), t.state]
                             for b in java_order(by_broker, _int32) for t in by_broker[b]]))


def run_describe(admin: TransactionsAdmin, ns: dict[str, Any], out: Out, now_ms: Clock) -> None:
    tid = ns["transactional_id"]
    if isinstance(d := admin.describe_transactions([tid])[tid], CallFailed):
        _fail(f"Failed to describe transaction state of transactional-id `{tid}`", d)
    duration = None if d.start_time_ms is None else now_ms() - d.start_time_ms
    out(table(DESCRIBE_HEADERS, [[str(d.coordinator_id), tid, str(d.producer_id), str(d.producer_epoch), d.state,
                                  str(d.timeout_ms), _none(d.start_time_ms), _none(duration),
                                  ",".join(tp_str(tp) for tp in java_order(d.partitions, tp_hash))]]))


def run_describe_producers(admin: TransactionsAdmin, ns: dict[str, Any], out: Out, now_ms: Clock) -> None:
    tp, broker = (ns["topic"], ns["partition"]), ns.get("broker_id")
    try:
        states = admin.describe_producers([tp], broker)[tp]
    except CallFailed as exc:
        _fail(f"Failed to describe producers for partition {tp_str(tp)} on "
              f"{'leader' if broker is None else f'broker {broker}'}", exc)
    out(table(PRODUCERS_HEADERS, [[str(s.producer_id), str(s.producer_epoch), str(_or(s.coordinator_epoch, -1)),
                                   str(s.last_sequence), str(s.last_timestamp), _none(s.txn_start_offset)]
                                  for s in states]))


def run_abort(admin: TransactionsAdmin, ns: dict[str, Any], out: Out, now_ms: Clock) -> None:
    tp, start = (ns["topic"], ns["partition"]), ns.get("start_offset")
    if start is None and ns.get("producer_id") is None:
        raise ToolExit("The transaction to abort must be identified either with --start-offset (for brokers on 3.0 "
                       "or above) or with --producer-id, --producer-epoch, and --coordinator-epoch (for older brokers)")
    if start is None:
        for option in ("producer_epoch", "coordinator_epoch"):
            if ns.get(option) is None:
                raise ToolExit(f"Missing required argument --{option.replace('_', '-')}")
        # A transaction that hung before its first marker shows coordinator epoch -1; 0 is no greater
        # than any leader epoch, so the marker is accepted.
        spec = AbortSpec(tp, ns["producer_id"], ns["producer_epoch"], max(ns["coordinator_epoch"], 0))
    else:
        try:
            states = admin.describe_producers([tp])[tp]
        except CallFailed as exc:
            _fail(f"Failed to validate producer state for partition {tp_str(tp)}", exc)
        if (found := next((s for s in states if s.txn_start_offset == start), None)) is None:
            raise ToolExit(f"Could not find any open transactions starting at offset {start} on partition {tp_str(tp)}")
        # Kafka narrows the epoch to a short, as the marker carries it.
        spec = AbortSpec(tp, found.producer_id, (found.producer_epoch + 0x8000) % 0x10000 - 0x8000,
                         _or(found.coordinator_epoch, 0))
    try:
        admin.abort_transaction(spec)
    except CallFailed as exc:
        _fail(f"Failed to abort transaction {spec}", exc)


class OpenTransaction(NamedTuple):
    tp: TP
    state: ProducerState


def _batches(items: list[K]) -> list[list[K]]:
    return [items[i:i + MAX_BATCH_SIZE] for i in range(0, len(items), MAX_BATCH_SIZE)]


def _partitions_to_search(admin: TransactionsAdmin, topic: str | None, partition: int | None,
                          broker: int | None) -> list[TP]:
    if topic is not None and partition is not None:
        return [(topic, partition)]
    try:
        topics = [topic] if topic is not None else admin.list_topics()
    except CallFailed as exc:
        _fail("Failed to list topics", exc)
    found: list[TP] = []
    for batch in _batches(topics):
        try:
            described = admin.describe_topics(batch)
        except CallFailed as exc:
            _fail(f"Failed to describe {len(batch)} topics", exc)
        found += [(t, p) for t in java_order(described, string_hash, len(batch)) for p, replicas in described[t]
                  if broker is None or broker in replicas]
    return found


def _open_transactions(admin: TransactionsAdmin, tps: list[TP], broker: int | None, max_timeout_ms: int,
                       now_ms: Clock) -> list[OpenTransaction]:
    """The partitions' open transactions whose producer wrote nothing for longer than the timeout."""
    candidates: list[OpenTransaction] = []
    for batch in _batches(tps):
        try:
            producers = admin.describe_producers(batch, broker)
        except CallFailed as exc:  # Kafka prints the broker id's Optional
            _fail(f"Failed to describe producers for {len(batch)} partitions on broker "
                  f"{'Optional.empty' if broker is None else f'Optional[{broker}]'}", exc)
        now = now_ms()
        candidates += [OpenTransaction(tp, s) for tp in java_order(producers, tp_hash, len(producers))
                       for s in producers[tp] if s.txn_start_offset is not None
                       and now - s.last_timestamp > max_timeout_ms]
    return candidates


def run_find_hanging(admin: TransactionsAdmin, ns: dict[str, Any], out: Out, now_ms: Clock) -> None:
    broker, topic, partition = ns.get("broker_id"), ns.get("topic"), ns.get("partition")
    if topic is None and broker is None:
        raise ToolExit("The `find-hanging` command requires either --topic or --broker-id to limit the scope of the "
                       "search")
    if partition is not None and topic is None:
        raise ToolExit("The --partition argument requires --topic to be provided")
    candidates = _open_transactions(admin, _partitions_to_search(admin, topic, partition, broker), broker,
                                    ns["max_transaction_timeout"] * 60_000, now_ms)
    hanging: list[OpenTransaction] = []
    by_producer: dict[int, list[OpenTransaction]] = {}
    for c in candidates:
        by_producer.setdefault(c.state.producer_id, []).append(c)
    if candidates:
        try:
            listings = admin.list_transactions(producer_ids=sorted(by_producer))
        except CallFailed as exc:
            _fail(f"Failed to list transactions for {len(by_producer)} producers", exc)
        ids = {t.producer_id: t.transactional_id for b in java_order(listings, _int32) for t in listings[b]
               if t.producer_id in by_producer}
        described = admin.describe_transactions(java_order(set(ids.values()), string_hash)) if ids else {}
        for producer_id in java_order(ids, long_hash):  # a lost id is no description; other failures stop the tool
            if isinstance(failure := described[ids[producer_id]], CallFailed) and \
                    failure.code != E.TRANSACTIONAL_ID_NOT_FOUND:
                _fail(f"Failed to describe {len(ids)} transactions", failure)
        for producer_id in java_order(by_producer, long_hash):
            d = described.get(ids[producer_id]) if producer_id in ids else None
            # The coordinator still writes the markers of the partitions it lists (an ongoing transaction,
            # or one preparing to end); any other open transaction is hanging.
            hanging += [c for c in by_producer[producer_id]
                        if not isinstance(d, TransactionDescription) or c.tp not in d.partitions]
    now = now_ms()
    out(table(HANGING_HEADERS, [[t.tp[0], str(t.tp[1]), str(t.state.producer_id), str(t.state.producer_epoch),
                                 str(_or(t.state.coordinator_epoch, -1)), str(_or(t.state.txn_start_offset, -1)),
                                 str(t.state.last_timestamp), str(java_div(now - t.state.last_timestamp, 60_000))]
                                for t in hanging]))


COMMANDS: dict[str, Callable[[TransactionsAdmin, dict[str, Any], Out, Clock], None]] = {
    "list": run_list, "describe": run_describe, "describe-producers": run_describe_producers, "abort": run_abort,
    "find-hanging": run_find_hanging}


# --- the command line --------------------------------------------------------------------------------------


def admin_for(ns: dict[str, Any]) -> TransactionsAdmin:
    """``buildAdminClient``: the admin client of ``--bootstrap-server`` and ``--command-config``."""
    if (config := ns.get("command_config")) is not None:
        try:
            Path(config).open().close()
        except OSError as exc:  # Utils.loadProps' FileNotFoundException
            raise ToolExit(f"Failed to load admin client properties: {config} ({exc.strerror}). Enable debug "
                           "logging for additional detail.") from None
    try:
        client = connect(ns["bootstrap_server"], CLIENT_ID, None if config is None else Path(config))
        return TransactionsAdmin(client, API_TIMEOUT_S)
    except AdminError as exc:
        raise ToolExit(f"Failed to create new KafkaAdminClient: {exc}") from None


def execute(argv: list[str], make_admin: Callable[[dict[str, Any]], TransactionsAdmin], out: Out, err: Out,
            now_ms: Clock) -> int:
    """``TransactionsCommand.execute``: the exit code."""
    try:
        ns = parse(build_parser(), argv)
    except HelpOrVersion as stop:
        if stop.parser is None:
            out(f"{KAFKA_VERSION} (Commit:{KAFKA_COMMIT_ID})\n")
            return 0
        out(format_help(stop.parser, format_width()))
        return 1
    except ArgError as exc:
        err(exc.render(format_width()))
        return 1
    try:
        with make_admin(ns) as admin:
            COMMANDS[ns["command"]](admin, ns, out, now_ms)
    except ToolExit as exc:
        err(f"{exc}\n")
        return 1
    return 0


class _Argv(click.Command):
    """Hands the command line over untouched: click would take ``--`` and ``--help`` for itself."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.params["argv"], ctx.args = list(args), []
        return []

    def get_help(self, ctx: click.Context) -> str:
        return format_help(build_parser(), format_width())


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@click.command(cls=_Argv, add_help_option=False,
               short_help="Inspect and abort transactions, like kafka-transactions.sh.")
def transactions(argv: list[str]) -> None:
    """Kafka's ``TransactionsCommand.main``: tables on stdout, errors on stderr, Kafka's exit codes."""
    sys.exit(execute(argv, admin_for, lambda s: click.echo(s, nl=False), lambda s: click.echo(s, err=True, nl=False),
                     _now_ms))
