"""Transactions in a partition log (KIP-98): transaction markers, the aborted-transaction index and
the batches that feed them. Plain functions over a ``PartitionLog`` (``log.py``) and its segments.

Rules (Kafka 3.9's ``UnifiedLog`` and ``LogSegment``):
- Every append (leader or follower) first updates the producer state (``producers.py``), then, for
  each transaction a marker in it completes, in order: an aborted one gets an entry in the
  transaction index of the segment holding its marker, with the last stable offset of that moment
  (``ProducerStateManager.stable_offset_after``); then the transaction is completed, unstable until
  the high watermark passes its marker.
- Recovery of a segment starts from the producer state as of its base offset
  (``producer_snapshots.state_at``) and replays its batches one by one, completing each transaction
  as its marker comes, which rebuilds the segment's transaction index (Kafka's ``LogSegment.recover``).
- A control batch's type and coordinator epoch are in its record, so replay reads control batches
  whole (data batches by their header only). An emptied control batch (the cleaner's) changes nothing.
- ``collect_aborted``: from the segment holding the fetch offset on, the entries overlapping
  ``[fetch_offset, upper_bound)``, stopping after an entry whose last stable offset reaches the upper
  bound (Kafka's ``LocalLog.collectAbortedTransactions``).
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from typing import TYPE_CHECKING

from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.records.batch import BatchHeader, CorruptRecordError
from headwater.records.records import ControlRecord, read_control_record
from headwater.storage.producers import CompletedTxn, ProducerStateManager, tracks_producer
from headwater.storage.segment import LogSegment
from headwater.storage.txn_index import AbortedTxn

if TYPE_CHECKING:
    from headwater.storage.log import PartitionLog

_log = logging.getLogger("headwater.storage.log")


def leader_marker(records: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> ControlRecord | None:
    """The record of a control batch a coordinator asks to append; CORRUPT_MESSAGE when unreadable."""
    try:
        return read_control_record(memoryview(records)[pos : pos + header.size], header)
    except CorruptRecordError as exc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None


def replayed_marker(batch: bytes | bytearray | memoryview, header: BatchHeader) -> ControlRecord | None:
    """The record of a control batch already in the log (its CRC held): one that does not parse
    is treated like an emptied one, with a warning, rather than stopping a follower or a load."""
    try:
        return read_control_record(batch, header)
    except CorruptRecordError as exc:
        _log.warning("unreadable control batch at offset %d: %s", header.base_offset, exc)
        return None


def check_client_batch(log: PartitionLog, header: BatchHeader) -> None:
    """Kafka's ``LogValidator.validateBatch`` for a client's batch: no control batches, and a batch
    with a producer id has a sequence (only the coordinators write such batches without one)."""
    if header.is_control:
        raise KafkaError(
            ErrorCode.INVALID_RECORD,
            f"Clients are not allowed to write control records in topic partition {log.topic}-{log.partition}",
        )
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise KafkaError(
            ErrorCode.INVALID_RECORD,
            f"Invalid sequence number {header.base_sequence} in record batch with producerId {header.producer_id}",
        )


def index_completed(log: PartitionLog, seg: LogSegment, state: ProducerStateManager,
                    completed: list[CompletedTxn]) -> None:
    """Index the aborted ones of ``completed`` (their markers are in ``seg``) and complete them all."""
    for txn in completed:
        if txn.aborted:
            entry = AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, state.stable_offset_after(txn))
            if seg.txn_index.append(entry):
                log._directory_unsynced = True  # a new file: the next flush fsyncs the directory
        state.complete(txn)


def replay_follower_batches(log: PartitionLog, records: bytes | bytearray | memoryview,
                            batches: list[tuple[int, BatchHeader]]) -> None:
    """The producer state and transaction index after a follower append of ``batches`` (written to the
    active segment): every batch first, then the completed transactions (as Kafka's append does)."""
    state = log.producer_state
    completed: list[CompletedTxn] = []
    for pos, header in batches:
        if not tracks_producer(header):
            continue
        marker = replayed_marker(memoryview(records)[pos : pos + header.size], header) if header.is_control else None
        done = state.replay(header, marker)
        if done is not None:
            completed.append(done)
    if completed:
        index_completed(log, log._segments[-1], state, completed)


def recover_batch(state: ProducerStateManager, seg: LogSegment, header: BatchHeader, batch: memoryview) -> bool:
    """One batch of a segment being recovered; True when this created its transaction index file."""
    if not tracks_producer(header):
        return False
    done = state.replay(header, replayed_marker(batch, header) if header.is_control else None)
    if done is None:
        return False
    created = False
    if done.aborted:
        entry = AbortedTxn(done.producer_id, done.first_offset, done.last_offset, state.stable_offset_after(done))
        created = seg.txn_index.append(entry)
    state.complete(done)
    return created


def replay_segment(state: ProducerStateManager, seg: LogSegment, start: int, end: int) -> None:
    """Replay the batches of ``seg`` from the one holding ``start`` up to those at ``end`` (exclusive),
    completing transactions as their markers come; no index is written."""
    if seg.next_offset <= start or seg.base_offset >= end:
        return
    found = seg.locate(start)
    if found is None:
        return
    for pos, header in seg.iter_headers(found[0]):
        if header.base_offset >= end:
            break
        if not tracks_producer(header):
            continue
        marker = replayed_marker(seg.read_batch(pos, header.size), header) if header.is_control else None
        done = state.replay(header, marker)
        if done is not None:
            state.complete(done)


def collect_aborted(segments: list[LogSegment], bases: list[int], fetch_offset: int,
                    upper_bound: int) -> list[tuple[int, int]]:
    """(producer id, first offset) of the aborted transactions overlapping ``[fetch_offset,
    upper_bound)``, in Kafka's order (see the module rules)."""
    i = bisect_right(bases, fetch_offset) - 1
    if i < 0:
        return []  # below the first segment: Kafka's floorSegment finds none
    found: list[AbortedTxn] = []
    for seg in segments[i:]:
        if seg.txn_index.collect(fetch_offset, upper_bound, found):
            break
    return [(t.producer_id, t.first_offset) for t in found]

