"""The transaction coordinator (KIP-98) as a sans-IO state machine: events in, effects out.

Rules (Kafka 3.9's TransactionCoordinator, TransactionMetadata and TransactionStateManager):

* A transactional id lives in ``__transaction_state-<partition_for(id)>``; this coordinator answers
  for the ids of the partitions it loaded (COORDINATOR_LOAD_IN_PROGRESS while loading,
  NOT_COORDINATOR for any other partition).
* States and the moves between them are ``PREVIOUS`` (the states a transaction may enter each state
  from). A move is first *prepared* (the transaction's ``pending`` state is set and its record is
  appended), then *completed* once the record is committed. While a move is pending, requests for
  the id get CONCURRENT_TRANSACTIONS. A failed write drops the pending move, except for an epoch
  fence (below) and a completion (retried at the next Tick).
* InitProducerId: a new id gets the shell's fresh producer id at epoch 0 (Empty). Empty and Complete*
  bump the epoch; at an exhausted epoch (Short.MAX_VALUE - 1) the id gets the fresh producer id at
  epoch 0 instead. Ongoing is aborted with a bumped epoch (the old producer is fenced) and the
  client gets CONCURRENT_TRANSACTIONS, so it retries once the abort completed. Prepare* answers
  CONCURRENT_TRANSACTIONS. With the client's producer id and epoch (KIP-360) a retry of the last
  bump gets the same id and epoch back and any other mismatch PRODUCER_FENCED.
* AddPartitions moves Empty/Complete*/Ongoing to Ongoing with the partitions added (the start time
  is set by the first). EndTxn moves Ongoing to PrepareCommit/PrepareAbort and answers once that is
  written; the markers are then sent, and once they are written the transaction is CompleteCommit/
  CompleteAbort with no partitions. Both check the producer id (INVALID_PRODUCER_ID_MAPPING) and
  epoch (PRODUCER_FENCED) first.
* Tick: an Ongoing transaction older than its timeout is aborted with a bumped epoch (markers go out
  with it, which fences the zombie); an Empty/Complete* id idle for transactional.id.expiration.ms
  is removed with a tombstone.
* Loading replays the partition's records (the last one per id wins, a tombstone removes it) and
  resumes every PrepareCommit/PrepareAbort: its markers are sent again.

The shell passes time in (``now_ms`` on every call) and carries out the returned effects.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Literal

from headwater.coordinator import txn_events as ev
from headwater.coordinator.records import partition_for
from headwater.coordinator.txn_records import (
    STATES_BY_NAME,
    TxnRecordFormatError,
    TxnState,
    TxnValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from headwater.protocol.errors import ErrorCode

__all__ = ["PREVIOUS", "TransactionCoordinator", "Transit", "TxnMetadata", "TxnState", "txn_write_error"]

S = TxnState
E = ErrorCode
NO_PRODUCER_ID = -1
NO_EPOCH = -1
MAX_EPOCH = 2**15 - 1

# state -> the states a transaction may enter it from (Kafka's validPreviousStates)
PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
PREPARED = frozenset({S.PREPARE_COMMIT, S.PREPARE_ABORT})
EXPIRABLE = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})


def epoch_exhausted(epoch: int) -> bool:
    """The last epoch is kept back so that the coordinator can always fence the producer once more."""
    return epoch >= MAX_EPOCH - 1


def txn_write_error(error: ErrorCode) -> ErrorCode:
    """Kafka's mapping of a failed ``__transaction_state`` append to what a producer understands."""
    if error in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                 E.REQUEST_TIMED_OUT):
        return E.COORDINATOR_NOT_AVAILABLE
    if error in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if error in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE):
        return E.UNKNOWN_SERVER_ERROR
    return error


@dataclass(frozen=True, slots=True)
class Transit:
    """The whole metadata a prepared move leads to: what is written, and applied once committed."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]
    start_ms: int
    last_update_ms: int

    def value(self) -> TxnValue:
        return TxnValue(self.producer_id, self.producer_epoch, self.timeout_ms, self.state,
                        tuple(sorted(self.partitions)), self.last_update_ms, self.start_ms)


@dataclass(slots=True)
class TxnMetadata:
    transactional_id: str
    partition: int
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    pending: TxnState | None = None
    # The last epoch fence was not written: the epoch was bumped in memory already, do not bump again.
    failed_epoch_fence: bool = False

    def prepare(self, state: TxnState, update_ms: int, *, producer_id: int | None = None, epoch: int | None = None,
                last_epoch: int | None = None, timeout_ms: int | None = None,
                partitions: Iterable[tuple[str, int]] | None = None, start_ms: int | None = None) -> Transit:
        """Kafka's prepareTransitionTo: check the move, mark it pending, return what it leads to."""
        if self.pending is not None:
            raise AssertionError(f"{self.transactional_id}: preparing {state.value}, {self.pending.value} pending")
        if self.state not in PREVIOUS[state]:
            raise AssertionError(f"{self.transactional_id}: illegal transition {self.state.value} -> {state.value}")
        t = Transit(
            self.producer_id if producer_id is None else producer_id, self.producer_id,
            self.producer_epoch if epoch is None else epoch,
            self.last_producer_epoch if last_epoch is None else last_epoch,
            self.timeout_ms if timeout_ms is None else timeout_ms, state,
            frozenset(self.partitions if partitions is None else partitions),
            self.start_ms if start_ms is None else start_ms, update_ms)
        if t.producer_id < 0 or (state != S.DEAD and t.producer_epoch < 0):
            raise AssertionError(f"{self.transactional_id}: illegal producer {t.producer_id}/{t.producer_epoch}")
        self.pending = state
        return t

    def complete(self, t: Transit) -> None:
        """Kafka's completeTransitionTo: apply a committed move, checking it is the one prepared."""
        same_producer = t.producer_id == self.producer_id and t.producer_epoch == self.producer_epoch
        if self.pending != t.state:
            raise AssertionError(f"{self.transactional_id}: completing {t.state.value}, pending {self.pending}")
        if t.state == S.EMPTY:
            bump = (t.producer_epoch == self.producer_epoch + 1
                    or (t.producer_epoch == 0 and t.producer_id != self.producer_id))
            ok = (t.producer_epoch == self.producer_epoch or bump) and not t.partitions and t.start_ms == -1
            if ok:
                self.timeout_ms, self.producer_epoch, self.last_producer_epoch = (t.timeout_ms, t.producer_epoch,
                                                                                  t.last_producer_epoch)
                self.producer_id, self.last_producer_id = t.producer_id, t.last_producer_id
        elif t.state == S.ONGOING:
            ok = same_producer and self.partitions <= t.partitions and self.timeout_ms == t.timeout_ms
            if ok:
                self.start_ms = t.start_ms
                self.partitions |= t.partitions
        elif t.state in PREPARED:
            ok = (same_producer and self.partitions == t.partitions and self.timeout_ms == t.timeout_ms
                  and self.start_ms == t.start_ms)
        elif t.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            ok = same_producer and self.timeout_ms == t.timeout_ms
            if ok:
                self.start_ms = t.start_ms
                self.partitions.clear()
        else:
            ok = False  # Dead removes the id instead; PrepareEpochFence is never completed
        if not ok:
            raise AssertionError(f"{self.transactional_id}: unexpected transition {self} -> {t}")
        self.last_update_ms = t.last_update_ms
        self.pending = None
        self.state = t.state


class Load(Enum):
    LOADING = "loading"
    LOADED = "loaded"


Answer = Literal["init", "add", "end", "none"]


@dataclass(frozen=True, slots=True)
class _Write:
    kind: Literal["init", "add", "end", "complete", "expire"]
    partition: int
    changes: tuple[tuple[str, Transit], ...]
    answer: Answer = "none"  # the result type of the reply waiting for it
    token: int | None = None
    partitions: tuple[tuple[str, int], ...] = ()  # an AddPartitions' partitions, for its reply
    epoch_fence: bool = False


@dataclass(frozen=True, slots=True)
class _Markers:
    transactional_id: str
    partition: int
    coordinator_epoch: int
    complete: Transit  # written once the markers are


class TransactionCoordinator:
    def __init__(self, config: ev.TxnConfig) -> None:
        self.config = config
        self.txns: dict[str, TxnMetadata] = {}
        self.partitions: dict[int, tuple[Load, int]] = {}  # partition -> (load state, coordinator epoch)
        self._write_ids = itertools.count(1)
        self._marker_ids = itertools.count(1)
        self._writes: dict[int, _Write] = {}
        self._markers: dict[int, _Markers] = {}
        self._retries: dict[str, tuple[int, Transit]] = {}  # completion writes that failed: id -> (epoch, transit)
        self._next_abort_ms = 0
        self._next_expire_ms = 0
        self._out = ev.TxnOutput()

    # --- entry point -------------------------------------------------------------------------------------

    def handle(self, event: ev.TxnEvent, now_ms: int) -> ev.TxnOutput:
        self._out = ev.TxnOutput()
        match event:
            case ev.InitProducerId():
                self._init_producer_id(event, now_ms)
            case ev.AddPartitions():
                self._add_partitions(event, now_ms)
            case ev.EndTxn():
                self._end_txn(event, now_ms)
            case ev.DescribeTransactions():
                self._reply(event.token, ev.DescribeTransactionsResult(
                    tuple(self._describe(t) for t in event.transactional_ids)))
            case ev.ListTransactions():
                self._reply(event.token, self._list(event, now_ms))
            case ev.AppendDone():
                self._append_done(event, now_ms)
            case ev.MarkersWritten():
                self._markers_written(event)
            case ev.Tick():
                self._tick(now_ms)
            case ev.LoadStarted():
                self._unload(event.partition)
                self.partitions[event.partition] = (Load.LOADING, -1)
            case ev.LoadFinished():
                self._load(event, now_ms)
            case ev.Unloaded():
                self._unload(event.partition)
            case _:
                raise TypeError(f"not a transaction coordinator event: {event!r}")
        return self._out

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    # --- helpers -----------------------------------------------------------------------------------------

    def _coordinator_error(self, transactional_id: str) -> ErrorCode:
        found = self.partitions.get(self.partition_for(transactional_id))
        if found is None:
            return E.NOT_COORDINATOR
        return E.COORDINATOR_LOAD_IN_PROGRESS if found[0] == Load.LOADING else E.NONE

    def _reply(self, token: int | None, result: ev.TxnResult) -> None:
        if token is not None:
            self._out.replies.append(ev.TxnReply(token, result))

    def _answer(self, answer: Answer, token: int | None, error: ErrorCode,
                partitions: tuple[tuple[str, int], ...] = ()) -> None:
        """Answer a request with just an error code, in its own result type."""
        if answer == "init":
            self._reply(token, ev.InitProducerIdResult(error))
        elif answer == "add":
            self._reply(token, ev.AddPartitionsResult(error, tuple((t, p, error) for t, p in partitions)))
        elif answer == "end":
            self._reply(token, ev.EndTxnResult(error))

    def _write(self, w: _Write) -> None:
        write_id = next(self._write_ids)
        self._writes[write_id] = w
        records = tuple((encode_key(tid), None if t.state == S.DEAD else encode_value(t.value()))
                        for tid, t in w.changes)
        self._out.appends.append(ev.TxnAppend(write_id, w.partition, records))

    # --- InitProducerId ------------------------------------------------------------------------------------

    def _init_producer_id(self, e: ev.InitProducerId, now_ms: int) -> None:
        def fail(code: ErrorCode) -> None:
            self._reply(e.token, ev.InitProducerIdResult(code))

        if (e.producer_id == NO_PRODUCER_ID) != (e.producer_epoch == NO_EPOCH):
            return fail(E.INVALID_REQUEST)  # KafkaApis: both or neither
        if not 0 < e.timeout_ms <= self.config.max_timeout_ms:
            return fail(E.INVALID_TRANSACTION_TIMEOUT)
        error = self._coordinator_error(e.transactional_id)
        if error != E.NONE:
            return fail(error)
        expected = None if e.producer_id == NO_PRODUCER_ID else (e.producer_id, e.producer_epoch)
        meta = self.txns.get(e.transactional_id)
        if meta is None:
            if e.new_producer_id < 0:
                return fail(E.COORDINATOR_LOAD_IN_PROGRESS)  # no producer id to give: retriable, as in Kafka
            # Cached before its first record is written, as Kafka does: a retry after a failed write
            # finds it (and reuses its producer id).
            meta = TxnMetadata(e.transactional_id, self.partition_for(e.transactional_id), e.new_producer_id,
                               NO_PRODUCER_ID, NO_EPOCH, NO_EPOCH, e.timeout_ms, S.EMPTY, last_update_ms=now_ms)
            self.txns[e.transactional_id] = meta
        if meta.pending is not None:
            return fail(E.CONCURRENT_TRANSACTIONS)
        if expected is not None and not self._valid_producer(meta, *expected):
            return fail(E.PRODUCER_FENCED)
        if meta.state in PREPARED:
            return fail(E.CONCURRENT_TRANSACTIONS)
        if meta.state == S.ONGOING:
            # The ongoing transaction is aborted (and its producer fenced) first; the client retries.
            return self._fence_and_abort(meta, "init", e.token, now_ms)
        if meta.state not in EXPIRABLE:
            raise AssertionError(f"{meta.transactional_id} is {meta.state.value}")
        expected_epoch = None if expected is None else expected[1]
        if epoch_exhausted(meta.producer_epoch) and expected_epoch in (None, meta.producer_epoch):
            if e.new_producer_id < 0:
                return fail(E.COORDINATOR_LOAD_IN_PROGRESS)
            # prepareProducerIdRotation: the next producer id, from epoch 0
            transit: Transit | ErrorCode = meta.prepare(
                S.EMPTY, now_ms, producer_id=e.new_producer_id, epoch=0,
                last_epoch=meta.producer_epoch if expected is not None else NO_EPOCH, timeout_ms=e.timeout_ms,
                partitions=(), start_ms=-1)
        else:
            transit = self._increment_epoch(meta, e.timeout_ms, expected_epoch, now_ms)
        if isinstance(transit, ErrorCode):
            return fail(transit)
        self._write(_Write("init", meta.partition, ((meta.transactional_id, transit),), "init", e.token))

    @staticmethod
    def _valid_producer(meta: TxnMetadata, producer_id: int, epoch: int) -> bool:
        """A client recovering its producer (KIP-360) may go on if the id was just created, names its
        current producer id, or names the previous one at an exhausted epoch (a retried rotation)."""
        return (meta.producer_epoch == NO_EPOCH or producer_id == meta.producer_id
                or (producer_id == meta.last_producer_id and epoch_exhausted(epoch)))

    @staticmethod
    def _increment_epoch(meta: TxnMetadata, timeout_ms: int, expected_epoch: int | None,
                         now_ms: int) -> Transit | ErrorCode:
        """Kafka's prepareIncrementProducerEpoch."""
        bumped = meta.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_EPOCH
        elif meta.producer_epoch == NO_EPOCH or expected_epoch == meta.producer_epoch:
            epoch, last = bumped, meta.producer_epoch
        elif expected_epoch == meta.last_producer_epoch:
            # A retry of the bump it never got the answer to: the same epoch again.
            epoch, last = meta.producer_epoch, meta.last_producer_epoch
        else:
            return E.PRODUCER_FENCED
        # An exhausted epoch rotates the producer id instead, unless this is a retry (no bump).
        assert epoch == meta.producer_epoch or not epoch_exhausted(meta.producer_epoch)
        return meta.prepare(S.EMPTY, now_ms, epoch=epoch, last_epoch=last, timeout_ms=timeout_ms, partitions=(),
                            start_ms=-1)

    def _fence_and_abort(self, meta: TxnMetadata, answer: Answer, token: int | None, now_ms: int) -> None:
        """Kafka's prepareFenceProducerEpoch followed by an abort from the coordinator: the epoch goes
        up by one (not again if the last fence was never written) and PrepareAbort is written with it."""
        epoch = meta.producer_epoch if meta.failed_epoch_fence else meta.producer_epoch + 1
        if epoch > MAX_EPOCH:
            return self._answer(answer, token, E.UNKNOWN_SERVER_ERROR)
        # The bump takes effect at once, before the write, as in Kafka: the old producer is fenced
        # even if the write fails (then failed_epoch_fence keeps the next fence from bumping again).
        meta.producer_epoch = epoch
        meta.last_producer_epoch = NO_EPOCH
        transit = meta.prepare(S.PREPARE_ABORT, now_ms)
        self._write(_Write("end", meta.partition, ((meta.transactional_id, transit),), answer, token,
                           epoch_fence=True))

    # --- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------------------

    def _add_partitions(self, e: ev.AddPartitions, now_ms: int) -> None:
        partitions = tuple(dict.fromkeys(e.partitions))

        def fail(code: ErrorCode) -> None:
            self._answer("add", e.token, code, partitions)

        error = self._coordinator_error(e.transactional_id)
        if error != E.NONE:
            return fail(error)
        meta = self.txns.get(e.transactional_id)
        if meta is None or meta.producer_id != e.producer_id:
            return fail(E.INVALID_PRODUCER_ID_MAPPING)
        if meta.producer_epoch != e.producer_epoch:
            return fail(E.PRODUCER_FENCED)
        if meta.producer_epoch == NO_EPOCH:
            # Cached by an InitProducerId whose write failed: no producer was ever given this id.
            return fail(E.INVALID_PRODUCER_ID_MAPPING)
        if e.verify_only:
            # handleVerifyPartitionsInTransaction: no pending check, the append is validated again later.
            if meta.state in PREPARED:
                return fail(E.CONCURRENT_TRANSACTIONS)
            return self._reply(e.token, ev.AddPartitionsResult(E.NONE, tuple(
                (t, p, E.NONE if (t, p) in meta.partitions else E.TRANSACTION_ABORTABLE) for t, p in partitions)))
        if meta.pending is not None or meta.state in PREPARED:
            return fail(E.CONCURRENT_TRANSACTIONS)
        if meta.state == S.ONGOING and meta.partitions.issuperset(partitions):
            return fail(E.NONE)  # nothing to write
        start = now_ms if meta.state in EXPIRABLE else meta.start_ms
        transit = meta.prepare(S.ONGOING, now_ms, partitions=meta.partitions | set(partitions), start_ms=start)
        self._write(_Write("add", meta.partition, ((meta.transactional_id, transit),), "add", e.token, partitions))

    # --- EndTxn ----------------------------------------------------------------------------------------------

    def _end_txn(self, e: ev.EndTxn, now_ms: int) -> None:
        def fail(code: ErrorCode) -> None:
            self._reply(e.token, ev.EndTxnResult(code))

        error = self._coordinator_error(e.transactional_id)
        if error != E.NONE:
            return fail(error)
        meta = self.txns.get(e.transactional_id)
        if meta is None or meta.producer_id != e.producer_id:
            return fail(E.INVALID_PRODUCER_ID_MAPPING)
        if meta.producer_epoch != e.producer_epoch:
            return fail(E.PRODUCER_FENCED)
        if meta.pending is not None:
            return fail(E.CONCURRENT_TRANSACTIONS)  # (markers being written: Prepare* has Complete* pending)
        state = meta.state
        if state == S.ONGOING:
            transit = meta.prepare(S.PREPARE_COMMIT if e.commit else S.PREPARE_ABORT, now_ms)
            return self._write(_Write("end", meta.partition, ((meta.transactional_id, transit),), "end", e.token))
        same_kind = state in ((S.COMPLETE_COMMIT, S.PREPARE_COMMIT) if e.commit
                              else (S.COMPLETE_ABORT, S.PREPARE_ABORT))
        if same_kind:
            # A retry: done already (Complete*), or still being done (Prepare*).
            return fail(E.NONE if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) else E.CONCURRENT_TRANSACTIONS)
        fail(E.INVALID_TXN_STATE)  # Empty, or the other outcome

    def _send_markers(self, meta: TxnMetadata, coordinator_epoch: int, complete: Transit) -> None:
        if not meta.partitions:
            # No partition to mark: Complete* right away (Kafka finds no pending markers and writes it).
            return self._write(_Write("complete", meta.partition, ((meta.transactional_id, complete),)))
        marker_id = next(self._marker_ids)
        self._markers[marker_id] = _Markers(meta.transactional_id, meta.partition, coordinator_epoch, complete)
        self._out.markers.append(ev.SendMarkers(
            marker_id, meta.transactional_id, meta.producer_id, meta.producer_epoch,
            meta.state == S.PREPARE_COMMIT, coordinator_epoch, tuple(sorted(meta.partitions))))

    def _prepare_complete(self, meta: TxnMetadata, coordinator_epoch: int, now_ms: int) -> None:
        """Kafka's prepareComplete once Prepare* is in the log (or loaded): markers, then Complete*."""
        meta.failed_epoch_fence = False
        target = S.COMPLETE_COMMIT if meta.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        self._send_markers(meta, coordinator_epoch, meta.prepare(target, now_ms, partitions=()))

    def _markers_written(self, e: ev.MarkersWritten) -> None:
        m = self._markers.pop(e.marker_id, None)
        if m is None:
            return  # its partition was unloaded meanwhile
        meta = self.txns.get(m.transactional_id)
        if self.partitions.get(m.partition) != (Load.LOADED, m.coordinator_epoch) or meta is None \
                or meta.pending != m.complete.state:
            return
        self._write(_Write("complete", m.partition, ((m.transactional_id, m.complete),)))

    # --- writes completing ---------------------------------------------------------------------------------------

    def _append_done(self, e: ev.AppendDone, now_ms: int) -> None:
        w = self._writes.pop(e.write_id, None)
        if w is None:
            return  # its partition was unloaded meanwhile; the reply went out then
        ok = e.error == E.NONE
        error = txn_write_error(e.error)
        if w.kind == "expire":
            for tid, t in w.changes:
                meta = self.txns.get(tid)
                if meta is not None and meta.pending == S.DEAD:
                    if ok and meta.producer_epoch == t.producer_epoch:
                        del self.txns[tid]
                    else:
                        meta.pending = None
            return
        ((tid, transit),) = w.changes
        meta = self.txns[tid]  # present: an id with a pending write is neither expired nor unloaded
        if w.kind == "complete":
            if ok:
                meta.complete(transit)
            else:
                # Kafka retries a failed completion; we do at the next Tick, whatever the error, so a
                # transaction is never left in Prepare* while this broker still leads its partition.
                self._retries[tid] = (self.partitions[w.partition][1], transit)
            return
        if not ok:
            meta.pending = None
            if w.epoch_fence:
                meta.failed_epoch_fence = True
            return self._answer(w.answer, w.token, error, w.partitions)
        meta.complete(transit)
        if w.kind == "init":
            self._reply(w.token, ev.InitProducerIdResult(E.NONE, meta.producer_id, meta.producer_epoch))
        elif w.kind == "add":
            self._reply(w.token, ev.AddPartitionsResult(E.NONE, tuple((t, p, E.NONE) for t, p in w.partitions)))
        else:  # "end": Prepare* is written; the client's EndTxn is answered now, the fencing InitProducerId retries
            self._answer(w.answer, w.token, E.CONCURRENT_TRANSACTIONS if w.answer == "init" else E.NONE)
            self._prepare_complete(meta, self.partitions[w.partition][1], now_ms)

    # --- time ---------------------------------------------------------------------------------------------------

    def _tick(self, now_ms: int) -> None:
        retries, self._retries = self._retries, {}
        for tid, (coordinator_epoch, transit) in retries.items():
            meta = self.txns.get(tid)
            if meta is not None and meta.pending == transit.state \
                    and self.partitions.get(meta.partition) == (Load.LOADED, coordinator_epoch):
                self._write(_Write("complete", meta.partition, ((tid, transit),)))
        if now_ms >= self._next_abort_ms:
            self._next_abort_ms = now_ms + self.config.abort_interval_ms
            self._abort_timed_out(now_ms)
        if now_ms >= self._next_expire_ms:
            self._next_expire_ms = now_ms + self.config.expire_interval_ms
            self._expire_ids(now_ms)

    def _abort_timed_out(self, now_ms: int) -> None:
        for meta in sorted(self.txns.values(), key=lambda m: m.transactional_id):
            if meta.pending is None and meta.state == S.ONGOING and meta.start_ms + meta.timeout_ms < now_ms:
                self._fence_and_abort(meta, "none", None, now_ms)

    def _expire_ids(self, now_ms: int) -> None:
        by_partition: dict[int, list[tuple[str, Transit]]] = {}
        for meta in sorted(self.txns.values(), key=lambda m: m.transactional_id):
            if meta.pending is None and meta.state in EXPIRABLE \
                    and meta.last_update_ms <= now_ms - self.config.id_expiration_ms:
                # prepareDead keeps the last update time: a tombstone is not an update
                transit = meta.prepare(S.DEAD, meta.last_update_ms, partitions=())
                by_partition.setdefault(meta.partition, []).append((meta.transactional_id, transit))
        for partition, changes in sorted(by_partition.items()):
            self._write(_Write("expire", partition, tuple(changes)))

    # --- DescribeTransactions, ListTransactions -------------------------------------------------------------------

    def _describe(self, transactional_id: str) -> ev.DescribedTransaction:
        if not transactional_id:
            return ev.DescribedTransaction(transactional_id, E.INVALID_REQUEST)
        error = self._coordinator_error(transactional_id)
        if error != E.NONE:
            return ev.DescribedTransaction(transactional_id, error)
        meta = self.txns.get(transactional_id)
        if meta is None or meta.state == S.DEAD:
            return ev.DescribedTransaction(transactional_id, E.TRANSACTIONAL_ID_NOT_FOUND)
        return ev.DescribedTransaction(transactional_id, E.NONE, meta.state.value, meta.timeout_ms, meta.start_ms,
                                       meta.producer_id, meta.producer_epoch, tuple(sorted(meta.partitions)))

    def _list(self, e: ev.ListTransactions, now_ms: int) -> ev.ListTransactionsResult:
        if any(load == Load.LOADING for load, _ in self.partitions.values()):
            return ev.ListTransactionsResult(E.COORDINATOR_LOAD_IN_PROGRESS)
        unknown = tuple(sorted(s for s in e.states if s not in STATES_BY_NAME))
        wanted = {STATES_BY_NAME[s] for s in e.states if s in STATES_BY_NAME}

        def include(m: TxnMetadata) -> bool:
            if m.state == S.DEAD or (e.producer_ids and m.producer_id not in e.producer_ids):
                return False
            if e.states and m.state not in wanted:
                return False
            # Kafka 3.9 compares with the start time whatever the state (an Empty one's is -1).
            return not (e.duration_filter_ms >= 0 and now_ms - m.start_ms <= e.duration_filter_ms)

        listed = tuple((m.transactional_id, m.producer_id, m.state.value)
                       for m in sorted(self.txns.values(), key=lambda m: m.transactional_id) if include(m))
        return ev.ListTransactionsResult(E.NONE, unknown, listed)

    # --- loading ------------------------------------------------------------------------------------------------

    def _load(self, e: ev.LoadFinished, now_ms: int) -> None:
        if self.partitions.get(e.partition, (None, 0))[0] != Load.LOADING:
            return  # unloaded meanwhile
        values: dict[str, TxnValue | None] = {}
        for raw_key, raw_value in e.records:
            try:
                tid = decode_key(raw_key)
                values[tid] = None if raw_value is None else decode_value(raw_value)
            except (TxnRecordFormatError, UnicodeDecodeError):
                continue  # a record of a kind we do not know (a newer format) is not ours to act on
        self.partitions[e.partition] = (Load.LOADED, e.coordinator_epoch)
        loaded = []
        for tid, v in values.items():
            # Dead and PrepareEpochFence are never written; should one be read, the id is gone.
            if v is None or v.state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
                continue
            # The previous producer id and epoch are not in the record: a KIP-360 retry of the last
            # bump does not survive a coordinator move (as in Kafka 3.9).
            meta = TxnMetadata(tid, e.partition, v.producer_id, NO_PRODUCER_ID, v.producer_epoch, NO_EPOCH,
                               v.timeout_ms, v.state, set(v.partitions), v.start_ms, v.last_update_ms)
            self.txns[tid] = meta
            loaded.append(meta)
        for meta in loaded:
            if meta.state in PREPARED:
                self._prepare_complete(meta, e.coordinator_epoch, now_ms)

    def _unload(self, partition: int) -> None:
        if self.partitions.pop(partition, None) is None:
            return
        for write_id, w in list(self._writes.items()):
            if w.partition == partition:
                del self._writes[write_id]
                self._answer(w.answer, w.token, E.NOT_COORDINATOR, w.partitions)
        for marker_id, m in list(self._markers.items()):
            if m.partition == partition:
                del self._markers[marker_id]
        for tid in [t for t, meta in self.txns.items() if meta.partition == partition]:
            del self.txns[tid]
            self._retries.pop(tid, None)

    # --- invariants ----------------------------------------------------------------------------------------------

    def validate_state(self) -> None:
        writing: dict[str, int] = {}
        for w in self._writes.values():
            assert self.partitions.get(w.partition, (None, 0))[0] == Load.LOADED, f"a write for unloaded {w.partition}"
            for tid, t in w.changes:
                writing[tid] = writing.get(tid, 0) + 1
                pending = self.txns[tid].pending
                assert pending == t.state, f"{tid}: write of {t.state.value}, pending {pending}"
        marking = {m.transactional_id for m in self._markers.values()}
        assert len(marking) == len(self._markers), "two marker sends for one transaction"
        for tid, m in self.txns.items():
            assert m.transactional_id == tid and m.partition == self.partition_for(tid)
            assert self.partitions.get(m.partition, (None, 0))[0] == Load.LOADED, f"{tid} cached, partition not loaded"
            assert m.state not in (S.DEAD, S.PREPARE_EPOCH_FENCE), f"{tid} is {m.state.value}"
            assert NO_EPOCH <= m.producer_epoch <= MAX_EPOCH, f"{tid}: epoch {m.producer_epoch}"
            assert m.producer_epoch >= 0 or m.state == S.EMPTY, f"{tid}: no epoch in {m.state.value}"
            if m.state in EXPIRABLE:
                assert not m.partitions, f"{tid} is {m.state.value} with partitions"
            if m.state in PREPARED:
                done = S.COMPLETE_COMMIT if m.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
                assert m.pending == done, f"{tid} is {m.state.value}, pending {m.pending}"
                # markers outstanding, or the completion being written, or waiting for its retry
                assert (tid in marking) + writing.get(tid, 0) + (tid in self._retries) == 1, f"{tid}: stuck"
            else:
                assert tid not in marking and tid not in self._retries, f"{tid}: markers in {m.state.value}"
                assert (m.pending is None) == (tid not in writing), f"{tid}: pending {m.pending} without a write"
            assert writing.get(tid, 0) <= 1, f"{tid}: two writes at once"
