"""The sans-IO transaction coordinator, step by step, with Kafka 3.9's answers (each test names the
Kafka method whose rule it checks), and seeded random runs of its invariants.

Every step goes through ``Harness.send``, which runs ``validate_state()`` after it.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

import pytest

from headwater.coordinator import txn_events as ev
from headwater.coordinator.transactions import TransactionCoordinator, TxnMetadata
from headwater.coordinator.txn_records import (
    TxnState,
    TxnValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from headwater.protocol.errors import ErrorCode

E = ErrorCode
S = TxnState
CONFIG = ev.TxnConfig(num_partitions=3, max_timeout_ms=60_000, id_expiration_ms=100_000, abort_interval_ms=1000,
                      expire_interval_ms=10_000)
T0 = 1_000_000
TP = (("t", 0),)


@dataclass
class Harness:
    config: ev.TxnConfig = CONFIG
    now_ms: int = T0
    auto_commit: bool = True
    auto_markers: bool = True
    coord: TransactionCoordinator = field(init=False)
    replies: dict[int, ev.TxnResult] = field(default_factory=dict)
    appends: list[ev.TxnAppend] = field(default_factory=list)  # not yet reported
    markers: list[ev.SendMarkers] = field(default_factory=list)  # not yet reported
    sent_markers: list[ev.SendMarkers] = field(default_factory=list)
    written: list[ev.TxnAppend] = field(default_factory=list)  # committed, in order
    log: dict[int, list[tuple[bytes, bytes | None]]] = field(default_factory=dict)
    tokens: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    pids: itertools.count[int] = field(default_factory=lambda: itertools.count(1000))

    def __post_init__(self) -> None:
        self.coord = TransactionCoordinator(self.config)
        for p in range(self.config.num_partitions):
            self.send(ev.LoadStarted(p))
            self.send(ev.LoadFinished(p, 0, ()))

    def send(self, event: ev.TxnEvent) -> ev.TxnOutput:
        out = self.coord.handle(event, self.now_ms)
        self.coord.validate_state()
        for r in out.replies:
            assert r.token not in self.replies, f"token {r.token} answered twice"
            self.replies[r.token] = r.result
        for m in out.markers:
            # Markers go out only once Prepare* with the same producer, epoch and partitions is in the log.
            last = self.last_value(m.transactional_id)
            assert last is not None and last.state == (S.PREPARE_COMMIT if m.commit else S.PREPARE_ABORT), last
            assert (last.producer_id, last.producer_epoch, last.partitions) == (m.producer_id, m.producer_epoch,
                                                                                m.partitions)
        self.appends.extend(out.appends)
        self.markers.extend(out.markers)
        self.sent_markers.extend(out.markers)
        if self.auto_commit:
            self.commit()
        if self.auto_markers:
            self.deliver_markers()
        return out

    def commit(self, error: ErrorCode = E.NONE) -> None:
        while self.appends:
            a = self.appends.pop(0)
            if error == E.NONE:
                self.log.setdefault(a.partition, []).extend(a.records)
                self.written.append(a)
            self.send(ev.AppendDone(a.write_id, error))

    def deliver_markers(self) -> None:
        while self.markers:
            self.send(ev.MarkersWritten(self.markers.pop(0).marker_id))

    def advance(self, ms: int) -> None:
        self.now_ms += ms
        self.send(ev.Tick())

    def reload(self, partition: int, epoch: int) -> ev.TxnOutput:
        self.send(ev.LoadStarted(partition))
        return self.send(ev.LoadFinished(partition, epoch, tuple(self.log.get(partition, ()))))

    # --- requests -------------------------------------------------------------------------------------

    def ask(self, make: object) -> ev.TxnResult | None:
        t = next(self.tokens)
        assert callable(make)
        self.send(make(t))
        return self.replies.get(t)

    def init(self, tid: str, timeout: int = 10_000, pid: int = -1, epoch: int = -1) -> ev.TxnResult | None:
        return self.ask(lambda t: ev.InitProducerId(t, tid, timeout, pid, epoch, next(self.pids)))

    def add(self, tid: str, pid: int, epoch: int, parts: tuple[tuple[str, int], ...] = TP,
            verify: bool = False) -> ev.TxnResult | None:
        return self.ask(lambda t: ev.AddPartitions(t, tid, pid, epoch, parts, verify))

    def end(self, tid: str, pid: int, epoch: int, commit: bool = True) -> ev.TxnResult | None:
        return self.ask(lambda t: ev.EndTxn(t, tid, pid, epoch, commit))

    def describe(self, tid: str) -> ev.DescribedTransaction:
        r = self.ask(lambda t: ev.DescribeTransactions(t, (tid,)))
        assert isinstance(r, ev.DescribeTransactionsResult)
        return r.transactions[0]

    def list(self, **kw: object) -> ev.ListTransactionsResult:
        r = self.ask(lambda t: ev.ListTransactions(t, **kw))  # type: ignore[arg-type]
        assert isinstance(r, ev.ListTransactionsResult)
        return r

    def producer(self, tid: str, timeout: int = 10_000) -> tuple[int, int]:
        r = self.init(tid, timeout)
        assert isinstance(r, ev.InitProducerIdResult) and r.error == E.NONE, r
        return r.producer_id, r.producer_epoch

    def ongoing(self, tid: str, parts: tuple[tuple[str, int], ...] = TP, timeout: int = 10_000) -> tuple[int, int]:
        pid, epoch = self.producer(tid, timeout)
        assert self.add(tid, pid, epoch, parts) == add_result(E.NONE, parts)
        return pid, epoch

    def meta(self, tid: str) -> TxnMetadata:
        return self.coord.txns[tid]

    def last_value(self, tid: str) -> TxnValue | None:
        key = encode_key(tid)
        values = [v for k, v in self.log.get(self.coord.partition_for(tid), []) if k == key]
        assert values, f"nothing written for {tid}"
        return None if values[-1] is None else decode_value(values[-1])


def ids_in(h: Harness, partition: int, n: int) -> list[str]:
    return list(itertools.islice((t for t in (f"tx{i}" for i in itertools.count()) if
                                  h.coord.partition_for(t) == partition), n))


def init_result(error: ErrorCode, pid: int = -1, epoch: int = -1) -> ev.InitProducerIdResult:
    return ev.InitProducerIdResult(error, pid, epoch)


def add_result(error: ErrorCode, parts: tuple[tuple[str, int], ...] = TP) -> ev.AddPartitionsResult:
    return ev.AddPartitionsResult(error, tuple((t, p, error) for t, p in parts))


# --- InitProducerId -------------------------------------------------------------------------------------------


def test_init_new_id_writes_empty_at_epoch_0() -> None:
    # handleInitProducerId: an unknown id gets a new producer id and prepareIncrementProducerEpoch from -1
    h = Harness()
    assert h.init("a") == init_result(E.NONE, 1000, 0)
    (a,) = h.written
    assert a.partition == h.coord.partition_for("a") and decode_key(a.records[0][0]) == "a"
    assert h.last_value("a") == TxnValue(1000, 0, 10_000, S.EMPTY, (), T0, -1)
    # generateProducerId failing (the shell had no id to give): retriable, nothing cached
    assert h.ask(lambda t: ev.InitProducerId(t, "b", 1000, -1, -1, -1)) == init_result(E.COORDINATOR_LOAD_IN_PROGRESS)
    assert "b" not in h.coord.txns


def test_init_bumps_the_epoch_from_empty_and_complete() -> None:
    # prepareInitProducerIdTransit: CompleteAbort | CompleteCommit | Empty -> prepareIncrementProducerEpoch
    h = Harness()
    assert h.producer("a") == (1000, 0)
    assert h.producer("a", timeout=20_000) == (1000, 1)
    assert h.meta("a").timeout_ms == 20_000
    h.add("a", 1000, 1)
    assert h.end("a", 1000, 1, commit=True) == ev.EndTxnResult(E.NONE)
    assert h.meta("a").state == S.COMPLETE_COMMIT and h.producer("a") == (1000, 2)
    h.add("a", 1000, 2)
    h.end("a", 1000, 2, commit=False)
    assert h.meta("a").state == S.COMPLETE_ABORT and h.producer("a") == (1000, 3)


def test_exhausted_epoch_rotates_the_producer_id() -> None:
    # TransactionMetadata.isEpochExhausted (>= Short.MaxValue - 1) -> prepareProducerIdRotation
    h = Harness()
    p = h.coord.partition_for("a")
    h.log[p] = [(encode_key("a"), encode_value(TxnValue(7, 32765, 10_000, S.EMPTY, (), T0, -1)))]
    h.reload(p, 1)
    assert h.producer("a") == (7, 32766)
    r = h.init("a")
    assert isinstance(r, ev.InitProducerIdResult) and r.error == E.NONE and r.producer_id != 7 and r.producer_epoch == 0
    assert (h.meta("a").last_producer_id, h.meta("a").last_producer_epoch) == (7, -1)


def test_kip360_retried_rotation_gets_the_same_new_producer() -> None:
    # isValidProducerId case 3 (previous producer id at an exhausted epoch) and the lastProducerEpoch retry
    h = Harness()
    p = h.coord.partition_for("a")
    h.log[p] = [(encode_key("a"), encode_value(TxnValue(7, 32766, 10_000, S.EMPTY, (), T0, -1)))]
    h.reload(p, 1)
    first = h.init("a", pid=7, epoch=32766)
    assert isinstance(first, ev.InitProducerIdResult) and first.error == E.NONE and first.producer_epoch == 0
    assert h.init("a", pid=7, epoch=32766) == first
    assert h.init("a", pid=7, epoch=32765) == init_result(E.PRODUCER_FENCED)


def test_kip360_bump_retry_and_fencing() -> None:
    # prepareIncrementProducerEpoch with an expected epoch; isValidProducerId; KafkaApis' both-or-neither check
    h = Harness()
    pid, _ = h.producer("a")
    assert h.init("a", pid=pid, epoch=0) == init_result(E.NONE, pid, 1)
    assert h.meta("a").last_producer_epoch == 0
    assert h.init("a", pid=pid, epoch=0) == init_result(E.NONE, pid, 1)  # the answer was lost: same again
    assert h.init("a", pid=pid, epoch=5) == init_result(E.PRODUCER_FENCED)
    assert h.init("a", pid=pid + 77, epoch=1) == init_result(E.PRODUCER_FENCED)
    assert h.init("a", pid=pid, epoch=-1) == init_result(E.INVALID_REQUEST)
    assert h.init("a") == init_result(E.NONE, pid, 2)  # a new producer: last epoch forgotten
    assert h.init("a", pid=pid, epoch=1) == init_result(E.PRODUCER_FENCED)
    # An id unknown here (expired) with the client's old producer: a new producer id, epoch 0.
    r = h.init("b", pid=55, epoch=3)
    assert isinstance(r, ev.InitProducerIdResult) and r.error == E.NONE and r.producer_epoch == 0


def test_init_on_ongoing_fences_aborts_and_answers_concurrent_transactions() -> None:
    # prepareInitProducerIdTransit: Ongoing -> prepareFenceProducerEpoch, endTransaction(ABORT, isFromClient=false)
    h = Harness(auto_markers=False)
    pid, epoch = h.ongoing("a", (("t", 0), ("u", 1)))
    h.auto_commit = False
    t = next(h.tokens)
    h.send(ev.InitProducerId(t, "a", 10_000, -1, -1, 9999))
    assert t not in h.replies  # waits for PrepareAbort to be written
    h.commit()
    assert h.replies[t] == init_result(E.CONCURRENT_TRANSACTIONS)
    assert h.last_value("a") == TxnValue(pid, epoch + 1, 10_000, S.PREPARE_ABORT, (("t", 0), ("u", 1)), T0, T0)
    (m,) = h.markers
    assert (m.producer_id, m.producer_epoch, m.commit, m.partitions) == (pid, epoch + 1, False, (("t", 0), ("u", 1)))
    assert h.end("a", pid, epoch) == ev.EndTxnResult(E.PRODUCER_FENCED)  # the zombie
    assert h.init("a") == init_result(E.CONCURRENT_TRANSACTIONS)  # markers still going out
    h.auto_commit = True
    h.deliver_markers()
    assert h.last_value("a") == TxnValue(pid, epoch + 1, 10_000, S.COMPLETE_ABORT, (), T0, T0)
    assert h.init("a") == init_result(E.NONE, pid, epoch + 2)


def test_init_timeout_is_checked_before_the_coordinator() -> None:
    # handleInitProducerId: validateTransactionTimeoutMs (0 < timeout <= max) comes first
    h = Harness()
    assert h.init("a", timeout=0) == init_result(E.INVALID_TRANSACTION_TIMEOUT)
    assert h.init("a", timeout=60_001) == init_result(E.INVALID_TRANSACTION_TIMEOUT)
    h.send(ev.Unloaded(h.coord.partition_for("a")))
    assert h.init("a", timeout=60_001) == init_result(E.INVALID_TRANSACTION_TIMEOUT)
    assert h.init("a", timeout=60_000) == init_result(E.NOT_COORDINATOR)


def test_a_new_id_is_cached_before_its_first_write() -> None:
    # handleInitProducerId: putTransactionStateIfNotExists before the append; a failed append keeps it
    h = Harness(auto_commit=False)
    assert h.init("a") is None
    h.commit(E.NOT_ENOUGH_REPLICAS)
    assert h.replies[1] == init_result(E.COORDINATOR_NOT_AVAILABLE)
    d = h.describe("a")
    assert (d.error, d.state, d.producer_id, d.producer_epoch) == (E.NONE, "Empty", 1000, -1)
    assert h.add("a", 1000, -1) == add_result(E.INVALID_PRODUCER_ID_MAPPING)  # no producer ever had it
    h.auto_commit = True
    assert h.init("a") == init_result(E.NONE, 1000, 0)  # the cached producer id, not a new one


# --- AddPartitionsToTxn -------------------------------------------------------------------------------------


def test_add_partitions_checks_and_results() -> None:
    # handleAddPartitionsToTransaction: mapping, epoch, pending/prepare, subset shortcut, prepareAddPartitions
    h = Harness()
    two = (("t", 0), ("t", 1))
    assert h.add("nobody", 1, 0, two) == add_result(E.INVALID_PRODUCER_ID_MAPPING, two)
    pid, epoch = h.producer("a")
    assert h.add("a", pid + 1, epoch, two) == add_result(E.INVALID_PRODUCER_ID_MAPPING, two)
    assert h.add("a", pid, epoch + 1, two) == add_result(E.PRODUCER_FENCED, two)
    assert h.add("a", pid, epoch, two) == add_result(E.NONE, two)
    assert h.last_value("a") == TxnValue(pid, epoch, 10_000, S.ONGOING, two, T0, T0)
    writes = len(h.written)
    h.now_ms += 500
    assert h.add("a", pid, epoch, (("t", 1),)) == add_result(E.NONE, (("t", 1),))
    assert len(h.written) == writes  # already in the transaction: nothing written
    assert h.add("a", pid, epoch, (("u", 3),)) == add_result(E.NONE, (("u", 3),))
    assert h.last_value("a") == TxnValue(pid, epoch, 10_000, S.ONGOING, (("t", 0), ("t", 1), ("u", 3)), T0 + 500, T0)


def test_add_partitions_while_preparing_is_concurrent() -> None:
    # handleAddPartitionsToTransaction: PrepareCommit | PrepareAbort -> CONCURRENT_TRANSACTIONS
    h = Harness(auto_markers=False)
    pid, epoch = h.ongoing("a")
    h.end("a", pid, epoch)
    assert h.add("a", pid, epoch, (("v", 0),)) == add_result(E.CONCURRENT_TRANSACTIONS, (("v", 0),))


def test_verify_only_answers_membership_without_writing() -> None:
    # handleVerifyPartitionsInTransaction (KIP-890): NONE if in the transaction, TRANSACTION_ABORTABLE if not
    h = Harness(auto_markers=False)
    pid, epoch = h.ongoing("a")
    writes = len(h.written)
    assert h.add("a", pid, epoch, (("t", 0), ("t", 1)), verify=True) == ev.AddPartitionsResult(
        E.NONE, (("t", 0, E.NONE), ("t", 1, E.TRANSACTION_ABORTABLE)))
    assert h.add("a", pid, epoch + 1, TP, verify=True) == add_result(E.PRODUCER_FENCED)
    assert h.add("b", pid, epoch, TP, verify=True) == add_result(E.INVALID_PRODUCER_ID_MAPPING)
    assert len(h.written) == writes
    h.end("a", pid, epoch)
    assert h.add("a", pid, epoch, TP, verify=True) == add_result(E.CONCURRENT_TRANSACTIONS)


# --- EndTxn -------------------------------------------------------------------------------------------------


def test_commit_prepares_answers_sends_markers_then_completes() -> None:
    # endTransaction: PrepareCommit appended, reply NONE, addTxnMarkersToSend; then writeTxnCompletion
    h = Harness(auto_markers=False)
    parts = (("t", 0), ("u", 1))
    pid, epoch = h.ongoing("a", parts)
    h.auto_commit = False
    t = next(h.tokens)
    h.send(ev.EndTxn(t, "a", pid, epoch, True))
    assert t not in h.replies and not h.markers
    h.commit()
    assert h.replies[t] == ev.EndTxnResult(E.NONE)
    assert h.last_value("a") == TxnValue(pid, epoch, 10_000, S.PREPARE_COMMIT, parts, T0, T0)
    (m,) = h.markers
    assert m == ev.SendMarkers(m.marker_id, "a", pid, epoch, True, 0, parts)
    assert h.describe("a").state == "PrepareCommit"
    h.now_ms += 7
    h.deliver_markers()
    assert h.meta("a").state == S.PREPARE_COMMIT  # Complete* is not in the log yet
    h.commit()
    assert h.last_value("a") == TxnValue(pid, epoch, 10_000, S.COMPLETE_COMMIT, (), T0, T0)
    d = h.describe("a")
    assert (d.state, d.partitions, d.start_time_ms) == ("CompleteCommit", (), T0)


def test_end_txn_outcomes_by_state() -> None:
    # endTransaction: Complete* of the same kind -> NONE, the other -> INVALID_TXN_STATE, Empty -> INVALID_TXN_STATE,
    # Prepare* (its Complete* pending) -> CONCURRENT_TRANSACTIONS
    h = Harness(auto_markers=False)
    assert h.end("a", 1, 0) == ev.EndTxnResult(E.INVALID_PRODUCER_ID_MAPPING)
    pid, epoch = h.producer("a")
    assert h.end("a", pid, epoch, commit=True) == ev.EndTxnResult(E.INVALID_TXN_STATE)
    assert h.end("a", pid, epoch, commit=False) == ev.EndTxnResult(E.INVALID_TXN_STATE)
    assert h.end("a", pid + 1, epoch) == ev.EndTxnResult(E.INVALID_PRODUCER_ID_MAPPING)
    assert h.end("a", pid, epoch + 1) == ev.EndTxnResult(E.PRODUCER_FENCED)
    h.add("a", pid, epoch)
    assert h.end("a", pid, epoch, commit=True) == ev.EndTxnResult(E.NONE)
    assert h.end("a", pid, epoch, commit=True) == ev.EndTxnResult(E.CONCURRENT_TRANSACTIONS)
    assert h.end("a", pid, epoch, commit=False) == ev.EndTxnResult(E.CONCURRENT_TRANSACTIONS)
    h.deliver_markers()
    assert h.end("a", pid, epoch, commit=True) == ev.EndTxnResult(E.NONE)
    assert h.end("a", pid, epoch, commit=False) == ev.EndTxnResult(E.INVALID_TXN_STATE)
    h.add("a", pid, epoch)
    h.end("a", pid, epoch, commit=False)
    h.deliver_markers()
    assert h.end("a", pid, epoch, commit=False) == ev.EndTxnResult(E.NONE)
    assert h.end("a", pid, epoch, commit=True) == ev.EndTxnResult(E.INVALID_TXN_STATE)


def test_a_transaction_without_partitions_completes_without_markers() -> None:
    # TransactionMarkerChannelManager.addTxnMarkersToSend -> maybeWriteTxnCompletion with no partitions
    h = Harness()
    pid, epoch = h.ongoing("a", ())
    assert h.end("a", pid, epoch) == ev.EndTxnResult(E.NONE)
    assert not h.sent_markers
    states = [decode_value(v).state for a in h.written for _, v in a.records if v is not None]
    assert states[-2:] == [S.PREPARE_COMMIT, S.COMPLETE_COMMIT]


# --- writes pending and failing -------------------------------------------------------------------------------


def test_requests_while_a_write_is_pending_get_concurrent_transactions() -> None:
    # TransactionMetadata.pendingState: every path checks pendingTransitionInProgress
    h = Harness()
    pid, epoch = h.producer("a")
    h.auto_commit = False
    assert h.add("a", pid, epoch) is None
    assert h.init("a") == init_result(E.CONCURRENT_TRANSACTIONS)
    assert h.add("a", pid, epoch, (("u", 0),)) == add_result(E.CONCURRENT_TRANSACTIONS, (("u", 0),))
    assert h.end("a", pid, epoch) == ev.EndTxnResult(E.CONCURRENT_TRANSACTIONS)
    assert h.describe("a").state == "Empty"  # not Ongoing before the record is committed
    h.commit()
    assert h.replies[2] == add_result(E.NONE) and h.describe("a").state == "Ongoing"


@pytest.mark.parametrize(("append_error", "answer"), [
    (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.COORDINATOR_NOT_AVAILABLE),
    (E.REQUEST_TIMED_OUT, E.COORDINATOR_NOT_AVAILABLE),
    (E.UNKNOWN_TOPIC_OR_PARTITION, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),
    (E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR),
    (E.MESSAGE_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
    (E.RECORD_LIST_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
    (E.NOT_COORDINATOR, E.NOT_COORDINATOR),
])
def test_a_failed_write_changes_nothing(append_error: ErrorCode, answer: ErrorCode) -> None:
    # appendTransactionToLog: the append error mapping; the pending state is reset
    h = Harness()
    pid, epoch = h.producer("a")
    h.auto_commit = False
    h.add("a", pid, epoch)
    h.commit(append_error)
    assert h.replies[2] == add_result(answer)
    assert h.meta("a").state == S.EMPTY and h.meta("a").pending is None
    h.auto_commit = True
    assert h.add("a", pid, epoch) == add_result(E.NONE)


def test_a_failed_epoch_fence_keeps_the_bump_and_does_not_bump_twice() -> None:
    # endTransaction: isEpochFence + failed append -> hasFailedEpochFence; prepareFenceProducerEpoch does not bump again
    h = Harness(auto_markers=False)
    pid, epoch = h.ongoing("a")
    h.auto_commit = False
    assert h.init("a") is None
    h.commit(E.NOT_ENOUGH_REPLICAS)
    assert h.replies[max(h.replies)] == init_result(E.COORDINATOR_NOT_AVAILABLE)
    assert (h.meta("a").state, h.meta("a").producer_epoch, h.meta("a").failed_epoch_fence) == (S.ONGOING, 1, True)
    assert h.end("a", pid, epoch) == ev.EndTxnResult(E.PRODUCER_FENCED)
    h.auto_commit = True
    assert h.init("a") == init_result(E.CONCURRENT_TRANSACTIONS)
    assert h.markers[0].producer_epoch == epoch + 1 and not h.meta("a").failed_epoch_fence


def test_a_failed_completion_is_written_again_at_the_next_tick() -> None:
    # TransactionMarkerChannelManager.tryAppendToLog: retryOnError keeps the pending state and retries
    h = Harness(auto_markers=False)
    pid, epoch = h.ongoing("a")
    h.end("a", pid, epoch)
    h.auto_commit = False
    h.deliver_markers()  # CompleteCommit is appended
    h.commit(E.REQUEST_TIMED_OUT)
    assert h.meta("a").state == S.PREPARE_COMMIT and not h.appends
    h.advance(1)
    h.commit()
    assert h.meta("a").state == S.COMPLETE_COMMIT and h.last_value("a") is not None


# --- time -----------------------------------------------------------------------------------------------------


def test_timed_out_transaction_is_aborted_with_a_bumped_epoch() -> None:
    # abortTimedOutTransactions: timedOutTransactions (start + timeout < now) -> prepareFenceProducerEpoch + abort
    h = Harness(auto_markers=False)
    pid, epoch = h.ongoing("a", timeout=10_000)
    h.advance(10_000)  # start + timeout == now: not yet
    assert h.meta("a").state == S.ONGOING
    h.advance(1)  # past the timeout, but the abort check runs every abort_interval_ms
    assert h.meta("a").state == S.ONGOING
    h.advance(999)
    assert h.meta("a").state == S.PREPARE_ABORT
    (m,) = h.markers
    assert (m.producer_id, m.producer_epoch, m.commit) == (pid, epoch + 1, False)
    h.deliver_markers()
    assert h.last_value("a") == TxnValue(pid, epoch + 1, 10_000, S.COMPLETE_ABORT, (), T0 + 11_000, T0)
    assert h.add("a", pid, epoch) == add_result(E.PRODUCER_FENCED)
    assert h.end("a", pid, epoch) == ev.EndTxnResult(E.PRODUCER_FENCED)
    assert h.init("a") == init_result(E.NONE, pid, epoch + 2)


def test_idle_ids_are_removed_with_a_tombstone() -> None:
    # removeExpiredTransactionalIds: Empty/Complete* with lastUpdate <= now - expiration -> prepareDead + tombstone
    h = Harness()
    h.producer("a")
    h.now_ms += 50_000
    h.ongoing("b", timeout=60_000)
    h.auto_commit = False
    h.advance(50_000)  # "a" is exactly 100 s idle
    assert h.init("a") == init_result(E.CONCURRENT_TRANSACTIONS)  # its tombstone is being written
    h.commit(E.NOT_LEADER_OR_FOLLOWER)
    assert h.meta("a").pending is None  # a failed tombstone keeps the id
    h.advance(10_000)
    h.commit()
    assert "a" not in h.coord.txns and h.last_value("a") is None
    assert h.describe("a").error == E.TRANSACTIONAL_ID_NOT_FOUND
    assert h.meta("b").state == S.ONGOING or h.meta("b").state == S.PREPARE_ABORT  # never expired while open
    assert [t for t, _, _ in h.list().transactions] == ["b"]


# --- loading and unloading -----------------------------------------------------------------------------------


def test_load_replays_the_log_and_resumes_prepared_transactions() -> None:
    # loadTransactionsForTxnTopicPartition: last record wins, tombstones remove, Prepare* -> prepareComplete + markers
    h = Harness(auto_markers=False)
    p = 1
    x, y, z, w = ids_in(h, p, 4)
    parts = (("t", 0), ("t", 5))

    def rec(tid: str, v: TxnValue | None) -> tuple[bytes, bytes | None]:
        return encode_key(tid), None if v is None else encode_value(v)

    records = (
        rec(x, TxnValue(1, 3, 5000, S.ONGOING, parts, 10, 10)),
        rec(x, TxnValue(1, 3, 5000, S.PREPARE_COMMIT, parts, 11, 10)),
        rec(y, TxnValue(2, 0, 5000, S.EMPTY, (), 10, -1)),
        rec(y, None),
        (b"\x00\x07junk", b"?"),  # a key version we do not know is skipped
        rec(z, TxnValue(3, 9, 5000, S.PREPARE_ABORT, (), 12, 12)),
        rec(w, TxnValue(4, 1, 5000, S.COMPLETE_COMMIT, (), 13, 10)),
    )
    h.send(ev.LoadStarted(p))
    assert h.describe(x).error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.init(x) == init_result(E.COORDINATOR_LOAD_IN_PROGRESS)
    assert h.list().error == E.COORDINATOR_LOAD_IN_PROGRESS
    h.auto_commit = False
    h.log[p] = list(records)
    out = h.send(ev.LoadFinished(p, 5, records))
    (m,) = out.markers
    assert m == ev.SendMarkers(m.marker_id, x, 1, 3, True, 5, parts)
    (a,) = out.appends  # z has no partition to mark: CompleteAbort at once
    assert a.partition == p and decode_value(a.records[0][1] or b"").state == S.COMPLETE_ABORT
    assert h.describe(y).error == E.TRANSACTIONAL_ID_NOT_FOUND
    assert h.describe(w) == ev.DescribedTransaction(w, E.NONE, "CompleteCommit", 5000, 10, 4, 1, ())
    assert h.end(x, 1, 3) == ev.EndTxnResult(E.CONCURRENT_TRANSACTIONS)
    h.deliver_markers()
    h.commit()
    assert (h.meta(x).state, h.meta(z).state) == (S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
    assert h.meta(x).last_update_ms == T0  # prepareComplete's timestamp


def test_unload_answers_waiting_requests_and_drops_the_state() -> None:
    # onResignation -> removeTransactionsForTxnTopicPartition; a late append callback finds NOT_COORDINATOR
    h = Harness(auto_markers=False)
    p = h.coord.partition_for("a")
    a, b, c = ids_in(h, p, 3)
    pid, epoch = h.ongoing(a)
    pid_b, epoch_b = h.ongoing(b)
    h.ongoing(c)
    h.end(b, pid_b, epoch_b)  # its markers are outstanding
    h.auto_commit = False
    t_add, t_init = next(h.tokens), next(h.tokens)
    h.send(ev.AddPartitions(t_add, a, pid, epoch, (("u", 1),)))
    h.send(ev.InitProducerId(t_init, c, 1000, -1, -1, 5))  # fences c: waits for its PrepareAbort
    assert t_add not in h.replies and t_init not in h.replies
    h.send(ev.Unloaded(p))
    assert h.replies[t_add] == add_result(E.NOT_COORDINATOR, (("u", 1),))
    assert h.replies[t_init] == init_result(E.NOT_COORDINATOR)
    assert h.describe(a).error == E.NOT_COORDINATOR and not h.coord.txns
    for stale in h.appends:
        h.send(ev.AppendDone(stale.write_id, E.NONE))  # ignored
    h.appends.clear()
    h.auto_commit = True
    h.reload(p, 1)
    assert h.meta(a).partitions == {("t", 0)}  # the pending add never happened
    assert h.meta(b).state == S.PREPARE_COMMIT and len(h.markers) == 2  # sent again after the reload
    old, new = h.markers
    h.send(ev.MarkersWritten(old.marker_id))  # from before the move: ignored
    assert h.meta(b).state == S.PREPARE_COMMIT and new.coordinator_epoch == 1
    h.send(ev.MarkersWritten(new.marker_id))
    assert h.meta(b).state == S.COMPLETE_COMMIT


def test_ids_of_other_partitions_are_not_ours() -> None:
    # getTransactionState: no cache entry for the partition -> NOT_COORDINATOR
    h = Harness()
    h.send(ev.Unloaded(h.coord.partition_for("a")))
    assert h.add("a", 1, 0) == add_result(E.NOT_COORDINATOR)
    assert h.end("a", 1, 0) == ev.EndTxnResult(E.NOT_COORDINATOR)
    assert h.describe("a").error == E.NOT_COORDINATOR


# --- DescribeTransactions, ListTransactions ----------------------------------------------------------------------


def test_describe() -> None:
    # handleDescribeTransactions
    h = Harness()
    pid, epoch = h.ongoing("a", (("u", 2), ("t", 1)), timeout=30_000)
    assert h.describe("a") == ev.DescribedTransaction("a", E.NONE, "Ongoing", 30_000, T0, pid, epoch,
                                                      (("t", 1), ("u", 2)))
    assert h.describe("zz") == ev.DescribedTransaction("zz", E.TRANSACTIONAL_ID_NOT_FOUND)
    assert h.describe("").error == E.INVALID_REQUEST


def test_list_filters() -> None:
    # listTransactionStates: state names (unknown ones reported), producer ids, duration (KIP-994)
    h = Harness()
    pa, _ = h.producer("a")
    pb, _ = h.ongoing("b")
    pc, ec = h.ongoing("c")
    h.end("c", pc, ec)
    h.now_ms += 5000
    assert h.list().transactions == (("a", pa, "Empty"), ("b", pb, "Ongoing"), ("c", pc, "CompleteCommit"))
    r = h.list(states=frozenset({"Ongoing", "Bogus"}))
    assert (r.error, r.unknown_state_filters, r.transactions) == (E.NONE, ("Bogus",), (("b", pb, "Ongoing"),))
    assert h.list(states=frozenset({"Bogus"})).transactions == ()
    assert h.list(producer_ids=frozenset({pa})).transactions == (("a", pa, "Empty"),)
    # Kafka 3.9 compares now - start with the filter in every state: an Empty id (start -1) always passes.
    assert [t for t, _, _ in h.list(duration_filter_ms=4999).transactions] == ["a", "b", "c"]
    assert [t for t, _, _ in h.list(duration_filter_ms=5000).transactions] == ["a"]


def test_config_and_partition_for() -> None:
    cfg = ev.TxnConfig.from_properties({"transaction.state.log.num.partitions": "7", "transaction.max.timeout.ms": "5",
                                        "transactional.id.expiration.ms": "6",
                                        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "8",
                                        "transaction.remove.expired.transaction.cleanup.interval.ms": "9"})
    assert cfg == ev.TxnConfig(7, 5, 6, 8, 9)
    assert ev.TxnConfig.from_properties({}) == ev.TxnConfig()
    with pytest.raises(ValueError):
        ev.TxnConfig.from_properties({"transaction.state.log.num.partitions": "0"})
    # Utils.abs("abc".hashCode) % 50, with "abc".hashCode == 96354 in Java
    assert TransactionCoordinator(ev.TxnConfig()).partition_for("abc") == 96354 % 50


# --- seeded random runs ----------------------------------------------------------------------------------------


@dataclass
class Producer:
    tid: str
    pid: int = -1
    epoch: int = -1


def run(seed: int, steps: int = 300) -> None:
    rng = random.Random(seed)
    h = Harness(config=ev.TxnConfig(num_partitions=2, max_timeout_ms=5000, id_expiration_ms=20_000,
                                    abort_interval_ms=500, expire_interval_ms=3000),
                auto_commit=False, auto_markers=False)
    producers = [Producer(t) for t in ("p0", "p1", "p2", "p3")]
    sent: list[int] = []
    waiting: dict[int, tuple[str, Producer, bool]] = {}  # token -> (kind, producer, commit)
    acked_commits: list[tuple[str, int, int, int]] = []  # (tid, pid, epoch, log position of its PrepareCommit)
    for _ in range(steps):
        c = rng.choice(producers)
        x = rng.random()
        t = next(h.tokens)
        if x < 0.15:
            kip360 = c.pid >= 0 and rng.random() < 0.3
            h.send(ev.InitProducerId(t, c.tid, rng.choice([300, 2000, 5000]), c.pid if kip360 else -1,
                                     c.epoch if kip360 else -1, next(h.pids)))
            waiting[t] = ("init", c, False)
        elif x < 0.35:
            parts = tuple(sorted({("t", rng.randrange(3)) for _ in range(rng.randrange(4))}))
            h.send(ev.AddPartitions(t, c.tid, c.pid, c.epoch, parts, rng.random() < 0.1))
        elif x < 0.5:
            commit = rng.random() < 0.7
            h.send(ev.EndTxn(t, c.tid, c.pid, c.epoch, commit))
            waiting[t] = ("end", c, commit)
        elif x < 0.6:
            error = E.NONE if rng.random() < 0.8 else rng.choice([E.NOT_ENOUGH_REPLICAS, E.NOT_LEADER_OR_FOLLOWER])
            h.commit(error)
        elif x < 0.72:
            rng.shuffle(h.markers)
            h.deliver_markers()
        elif x < 0.95:
            h.advance(rng.choice([10, 50, 200, 3000]))
        else:
            p = rng.randrange(2)
            h.appends = [a for a in h.appends if a.partition != p]  # never committed
            h.send(ev.Unloaded(p))
            h.reload(p, rng.randrange(1, 1000))
        if t in h.replies or t in waiting:
            sent.append(t)
        for tok, (kind, prod, commit) in list(waiting.items()):
            r = h.replies.get(tok)
            if r is None:
                continue
            del waiting[tok]
            if isinstance(r, ev.InitProducerIdResult) and r.error == E.NONE:
                prod.pid, prod.epoch = r.producer_id, r.producer_epoch
            if kind == "end" and commit and r == ev.EndTxnResult(E.NONE) and h.coord.txns.get(prod.tid) is not None \
                    and h.meta(prod.tid).state == S.PREPARE_COMMIT:
                position = len(h.log[h.coord.partition_for(prod.tid)])
                acked_commits.append((prod.tid, prod.pid, prod.epoch, position))
    # Drain: writes and markers complete, time passes; nothing may wait forever or stay prepared.
    for _ in range(6):
        h.commit()
        h.deliver_markers()
        h.advance(6000)
    h.commit()
    h.deliver_markers()
    unanswered = [t for t in sent if t not in h.replies]
    assert not unanswered, f"seed {seed}: never answered: {unanswered}"
    assert all(m.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT) for m in h.coord.txns.values()), seed
    # An acknowledged commit is committed: the first outcome logged after its PrepareCommit is CompleteCommit.
    for tid, pid, epoch, position in acked_commits:
        key = encode_key(tid)
        later = [decode_value(v) for k, v in h.log[h.coord.partition_for(tid)][position:] if k == key and v is not None]
        outcome = next(v for v in later if v.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT))
        assert (outcome.state, outcome.producer_id, outcome.producer_epoch) == (S.COMPLETE_COMMIT, pid, epoch), seed
    # Per producer id, the logged epoch never goes down.
    for records in h.log.values():
        seen: dict[tuple[bytes, int], int] = {}
        for k, v in records:
            if v is not None:
                val = decode_value(v)
                assert val.producer_epoch >= seen.get((k, val.producer_id), -1), seed
                seen[(k, val.producer_id)] = val.producer_epoch
    # Reading the log back gives what the coordinator holds (but an epoch bumped by a fence never written).
    before = {t: (m.state, m.producer_id, m.producer_epoch, frozenset(m.partitions)) for t, m in h.coord.txns.items()
              if not m.failed_epoch_fence and m.producer_epoch >= 0}
    for p in range(2):
        h.reload(p, 5000)
    after = {t: (m.state, m.producer_id, m.producer_epoch, frozenset(m.partitions)) for t, m in h.coord.txns.items()
             if t in before}
    assert after == before, seed


@pytest.mark.parametrize("seed", range(40))
def test_random_runs(seed: int) -> None:
    run(seed)
