"""Idempotent and transactional producer state of one partition: the last batches each producer id
wrote, its ongoing transaction and the coordinator epoch of its last transaction marker.

Sequence rules (Kafka's ``ProducerAppendInfo``), for a client's batches with a producer id and a sequence:
- a producer epoch lower than the known one is fenced: INVALID_PRODUCER_EPOCH;
- a higher epoch (a new producer session) must start at sequence 0, unless the producer is unknown;
- in the same epoch, a batch whose (first, last) sequence equals one of the last
  ``MAX_CACHED_BATCHES`` batches is a retry: it is acknowledged with the original offsets, not written;
- otherwise its first sequence must follow the latest batch's last sequence (mod 2**31); a batch
  ahead of it (a gap) raises ``SequenceGapError``, an OUT_OF_ORDER_SEQUENCE_NUMBER that tells the
  leader where the producer's latest batch is, so it can tell a gap left by retries still on their
  way from a previous leader from a real one (see ``headwater.server.replica_manager``);
- an unknown producer id is accepted at any sequence (its earlier batches may have been deleted).
The coordinator's batches (``AppendOrigin.COORDINATOR``), and any batch without a sequence, get the
epoch check only.

Transaction rules (the same class), for every batch with a producer id:
- a transactional data batch from a producer without an ongoing transaction starts one at the
  batch's first offset, whether or not it has a sequence (the group coordinator writes offset
  commits of a transaction without one); a non-transactional batch from a producer with an ongoing
  transaction is refused: INVALID_TXN_STATE;
- a transaction marker (a control batch) with an epoch lower than the producer's is
  INVALID_PRODUCER_EPOCH; one whose coordinator epoch is lower than the producer's last marker's is
  TRANSACTION_COORDINATOR_FENCED; otherwise it ends the ongoing transaction, if any (a marker without
  one is accepted and completes nothing), and a new epoch forgets the cached batches;
- a completed transaction stays unstable until the high watermark passes its marker. The first
  unstable offset is the lowest first offset of the ongoing and of those completed transactions.

Replicated batches (follower appends, recovery, rebuild on load) update the state without any check.
The state is rebuilt on load from the latest snapshot (written on roll and close) plus the batches
after it (``producer_snapshots.py``); completed transactions are not in snapshots (as in Kafka).
"""

from __future__ import annotations

import enum
import struct
from collections import deque
from dataclasses import dataclass, field, replace

import crc32c

from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.records.batch import NO_SEQUENCE, BatchHeader
from headwater.records.records import ControlRecord

MAX_CACHED_BATCHES = 5
SEQUENCE_MODULUS = 1 << 31
NO_PRODUCER_EPOCH = -1
NO_COORDINATOR_EPOCH = -1

SNAPSHOT_VERSION = 2
# Snapshot file: version int16, crc32c uint32 of everything after it, producer count int32, then
# per producer: id int64, epoch int16, (version 2:) coordinator epoch int32, ongoing transaction's
# first offset int64 (-1: none), last timestamp int64, (both:) batch count int8, and per batch the
# five fields of ``BatchMetadata``.
_SNAPSHOT_HEADER = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_PRODUCER_V1 = struct.Struct(">qhb")
_PRODUCER = struct.Struct(">qhiqqb")
_BATCH = struct.Struct(">iiqqq")


class AppendOrigin(enum.Enum):
    """Who asks for a leader append (Kafka's ``AppendOrigin``): a client's batches are checked in
    full and may not be control batches; the coordinators' writes (transaction markers, offset
    commits) get the epoch checks only."""

    CLIENT = "client"
    COORDINATOR = "coordinator"


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    max_timestamp: int


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    aborted: bool


@dataclass(frozen=True, slots=True)
class ActiveProducer:
    """One producer as DescribeProducers reports it."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int  # -1: no ongoing transaction


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: list[BatchMetadata] = field(default_factory=list)
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    txn_first_offset: int | None = None
    last_timestamp: int = -1

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for meta in self.batches:
            if meta.first_sequence == first_seq and meta.last_sequence == last_seq:
                return meta
        return None

    def with_batch(self, epoch: int, meta: BatchMetadata) -> ProducerEntry:
        kept = self.batches if epoch == self.epoch else []
        # Built directly, not with dataclasses.replace: this runs for every idempotent batch.
        return ProducerEntry(self.producer_id, epoch, [*kept, meta][-MAX_CACHED_BATCHES:], self.coordinator_epoch,
                             self.txn_first_offset, meta.max_timestamp)

    def with_epoch(self, epoch: int, timestamp: int) -> ProducerEntry:
        """A write without a sequence: a new epoch forgets the cached batches (Kafka's
        ``ProducerStateEntry.maybeUpdateProducerEpoch``)."""
        batches = self.batches if epoch == self.epoch else []
        return ProducerEntry(self.producer_id, epoch, batches, self.coordinator_epoch, self.txn_first_offset, timestamp)


class SequenceGapError(KafkaError):
    """OUT_OF_ORDER_SEQUENCE_NUMBER for a batch ahead of the producer's latest one, with the log offset
    of that latest batch."""

    def __init__(self, message: str, latest_offset: int) -> None:
        super().__init__(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, message)
        self.latest_offset = latest_offset


def tracks_sequence(header: BatchHeader) -> bool:
    return header.producer_id >= 0 and header.base_sequence >= 0 and not header.is_control


def tracks_producer(header: BatchHeader) -> bool:
    """The batch has a producer id, so it goes through the producer state (Kafka's ``hasProducerId``)."""
    return header.producer_id >= 0


def is_ahead(last_seq: int, next_seq: int) -> bool:
    """``next_seq`` skips sequences after ``last_seq``: within half the (wrapping) sequence space
    past it, as opposed to behind it (an old batch no longer among the cached ones)."""
    return 0 < (next_seq - last_seq - 1) % SEQUENCE_MODULUS < SEQUENCE_MODULUS // 2


def _check_epoch(entry: ProducerEntry, epoch: int, offset: int) -> None:
    if epoch < entry.epoch:
        raise KafkaError(
            ErrorCode.INVALID_PRODUCER_EPOCH,
            f"Epoch of producer {entry.producer_id} at offset {offset} is {epoch}, which is smaller than "
            f"the last seen epoch {entry.epoch}",
        )


def _data_batch(entry: ProducerEntry, header: BatchHeader, first_offset: int, check: bool) -> ProducerEntry:
    """The transaction part of a data batch (the sequence part is done)."""
    if header.is_transactional:
        return entry if entry.txn_first_offset is not None else replace(entry, txn_first_offset=first_offset)
    if entry.txn_first_offset is not None and check:
        raise KafkaError(
            ErrorCode.INVALID_TXN_STATE,
            f"Expected transactional write from producer {entry.producer_id} at offset {first_offset}",
        )
    return entry


def _end_txn(
    entry: ProducerEntry, header: BatchHeader, offset: int, marker: ControlRecord, check: bool
) -> tuple[ProducerEntry, CompletedTxn | None]:
    """Kafka's ``ProducerAppendInfo.appendEndTxnMarker``."""
    if check:
        _check_epoch(entry, header.producer_epoch, offset)
        if entry.coordinator_epoch > marker.coordinator_epoch:
            raise KafkaError(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"Invalid coordinator epoch for producerId {entry.producer_id} at offset {offset}: "
                f"{marker.coordinator_epoch} (zombie), {entry.coordinator_epoch} (current)",
            )
    done = None
    if entry.txn_first_offset is not None:
        done = CompletedTxn(entry.producer_id, entry.txn_first_offset, offset, not marker.commit)
    updated = replace(
        entry.with_epoch(header.producer_epoch, header.max_timestamp),
        coordinator_epoch=marker.coordinator_epoch,
        txn_first_offset=None,
    )
    return updated, done


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}  # first offset of an ongoing transaction -> producer id
        # Completed transactions whose marker is not below the high watermark yet, in marker order.
        self.unreplicated: deque[CompletedTxn] = deque()
        self._first_unstable: int | None = None

    def clear(self) -> None:
        self.load({})

    def load(self, producers: dict[int, ProducerEntry]) -> None:
        """Start over from ``producers`` (a snapshot's): their ongoing transactions, no completed ones."""
        self.producers = producers
        self.ongoing = {e.txn_first_offset: pid for pid, e in producers.items() if e.txn_first_offset is not None}
        self.unreplicated = deque()
        self._refresh()

    def get(self, producer_id: int) -> ProducerEntry | None:
        return self.producers.get(producer_id)

    # ---- the unstable offsets --------------------------------------------------------------------

    @property
    def first_unstable_offset(self) -> int | None:
        """Kafka's ``ProducerStateManager.firstUnstableOffset`` (not clamped to the log start)."""
        return self._first_unstable

    def _refresh(self) -> None:
        first = min(self.ongoing) if self.ongoing else None
        if self.unreplicated:
            done = min(t.first_offset for t in self.unreplicated)
            first = done if first is None else min(first, done)
        self._first_unstable = first

    def stable_offset_after(self, txn: CompletedTxn) -> int:
        """The last stable offset the transaction index records with an aborted transaction: the first
        offset of the earliest other ongoing transaction, else the offset after the marker (Kafka's
        ``ProducerStateManager.lastStableOffset``)."""
        others = [first for first, pid in self.ongoing.items() if pid != txn.producer_id]
        return min(others) if others else txn.last_offset + 1

    def complete(self, txn: CompletedTxn) -> None:
        """The transaction's marker is written: unstable until the high watermark passes the marker."""
        self.ongoing.pop(txn.first_offset, None)
        self.unreplicated.append(txn)
        self._refresh()

    def on_high_watermark(self, offset: int) -> None:
        """Completed transactions whose marker is below ``offset`` (the high watermark, or the log start)
        are stable now."""
        popped = False
        while self.unreplicated and self.unreplicated[0].last_offset < offset:
            self.unreplicated.popleft()
            popped = True
        if popped:
            self._refresh()

    # ---- leader appends --------------------------------------------------------------------------

    def validate(
        self,
        header: BatchHeader,
        staged: dict[int, ProducerEntry],
        first_offset: int,
        last_offset: int,
    ) -> BatchMetadata | None:
        """Check the sequence of one client batch against the state (and earlier batches of the same
        request).

        Returns the original batch's metadata for a duplicate; otherwise stages the new entry in
        ``staged`` and returns None. Raises KafkaError for a fenced or out-of-order batch.
        """
        pid = header.producer_id
        entry = staged.get(pid) or self.producers.get(pid)
        epoch = header.producer_epoch
        first_seq = header.base_sequence
        last_seq = header.last_sequence
        if entry is not None:
            duplicate = entry.find_duplicate(epoch, first_seq, last_seq)
            if duplicate is not None:
                return duplicate
            if epoch < entry.epoch:
                raise KafkaError(
                    ErrorCode.INVALID_PRODUCER_EPOCH,
                    f"producer {pid} epoch {epoch} is older than the current epoch {entry.epoch}",
                )
            # A new epoch, or one without batches yet, starts at 0; otherwise the next sequence follows.
            fresh = epoch != entry.epoch or entry.last_sequence == NO_SEQUENCE
            last_known = NO_SEQUENCE if fresh else entry.last_sequence
            expected = (last_known + 1) % SEQUENCE_MODULUS
            if first_seq != expected:
                message = f"producer {pid} epoch {epoch}: expected sequence {expected}, got {first_seq}"
                if is_ahead(last_known, first_seq):
                    raise SequenceGapError(message, entry.batches[-1].last_offset if entry.batches else -1)
                raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, message)
        else:
            entry = ProducerEntry(pid, NO_PRODUCER_EPOCH)
        meta = BatchMetadata(first_seq, last_seq, first_offset, last_offset, header.max_timestamp)
        staged[pid] = entry.with_batch(epoch, meta)
        return None

    def stage(
        self,
        header: BatchHeader,
        staged: dict[int, ProducerEntry],
        first_offset: int,
        last_offset: int,
        completed: list[CompletedTxn],
        *,
        origin: AppendOrigin,
        marker: ControlRecord | None = None,
    ) -> BatchMetadata | None:
        """Check one leader batch with ``tracks_producer`` and stage its producer's new entry (see the
        module rules); a control batch's ``marker`` is its first record. Returns a duplicate's original
        metadata; a transaction the batch completes is added to ``completed``, for the caller to
        index and ``complete`` after ``commit``. Raises KafkaError."""
        pid = header.producer_id
        entry = staged.get(pid) or self.producers.get(pid) or ProducerEntry(pid, NO_PRODUCER_EPOCH)
        if header.is_control:
            if marker is None or not marker.is_txn_marker:
                raise KafkaError(ErrorCode.INVALID_RECORD, f"control batch at offset {first_offset} is not a transaction marker")
            staged[pid], done = _end_txn(entry, header, first_offset, marker, True)
            if done is not None:
                completed.append(done)
            return None
        if origin is AppendOrigin.CLIENT and header.base_sequence >= 0:
            duplicate = self.validate(header, staged, first_offset, last_offset)
            if duplicate is not None:
                return duplicate
            entry = staged[pid]
        else:
            _check_epoch(entry, header.producer_epoch, first_offset)
            entry = self._sequence_part(entry, header, first_offset, last_offset)
        staged[pid] = _data_batch(entry, header, first_offset, True)
        return None

    @staticmethod
    def _sequence_part(entry: ProducerEntry, header: BatchHeader, first_offset: int, last_offset: int) -> ProducerEntry:
        if header.base_sequence < 0:
            return entry.with_epoch(header.producer_epoch, header.max_timestamp)
        meta = BatchMetadata(header.base_sequence, header.last_sequence, first_offset, last_offset, header.max_timestamp)
        return entry.with_batch(header.producer_epoch, meta)

    def commit(self, staged: dict[int, ProducerEntry]) -> None:
        for pid, entry in staged.items():
            self._put(pid, entry)

    def _put(self, pid: int, entry: ProducerEntry) -> None:
        # A transaction leaves ``ongoing`` only in ``complete``: the last stable offset indexed with
        # an aborted one still counts the others that the same append completes (as in Kafka).
        self.producers[pid] = entry
        first = entry.txn_first_offset
        if first is not None and first not in self.ongoing:
            self.ongoing[first] = pid
            self._refresh()

    # ---- replicated batches ----------------------------------------------------------------------

    def replay(self, header: BatchHeader, marker: ControlRecord | None = None) -> CompletedTxn | None:
        """Apply a batch that is already in the log (follower append, recovery, rebuild): no checks.
        A control batch's ``marker`` is its first record (None: an emptied one, which changes nothing).
        Returns the transaction it completes; the caller indexes it and calls ``complete``."""
        if not tracks_producer(header):
            return None
        pid = header.producer_id
        entry = self.producers.get(pid) or ProducerEntry(pid, NO_PRODUCER_EPOCH)
        done = None
        if header.is_control:
            if marker is None or not marker.is_txn_marker:
                return None
            entry, done = _end_txn(entry, header, header.base_offset, marker, False)
        else:
            entry = self._sequence_part(entry, header, header.base_offset, header.last_offset)
            entry = _data_batch(entry, header, header.base_offset, False)
        self._put(pid, entry)
        return done

    # ---- reading it ------------------------------------------------------------------------------

    def validate_state(self, high_watermark: int) -> None:
        """Assert that the transaction bookkeeping agrees with the producers (tests call it)."""
        ongoing = {e.txn_first_offset: pid for pid, e in self.producers.items() if e.txn_first_offset is not None}
        assert self.ongoing == ongoing, f"ongoing transactions {self.ongoing} disagree with the producers {ongoing}"
        markers = [t.last_offset for t in self.unreplicated]
        assert markers == sorted(markers) and all(m >= high_watermark for m in markers), f"unreplicated {markers}"
        self._refresh_check()

    def _refresh_check(self) -> None:
        cached = self._first_unstable
        self._refresh()
        assert cached == self._first_unstable, f"first unstable offset {cached} is stale"

    def active(self) -> list[ActiveProducer]:
        """Every producer the state knows, for DescribeProducers (Kafka's ``activeProducers``)."""
        return [
            ActiveProducer(
                pid,
                e.epoch,
                e.last_sequence,
                e.last_timestamp,
                e.coordinator_epoch,
                e.txn_first_offset if e.txn_first_offset is not None else -1,
            )
            for pid, e in sorted(self.producers.items())
        ]

    # ---- snapshots -------------------------------------------------------------------------------

    def to_snapshot(self) -> bytes:
        body = bytearray(_COUNT.pack(len(self.producers)))
        for pid in sorted(self.producers):
            e = self.producers[pid]
            txn_first = e.txn_first_offset if e.txn_first_offset is not None else -1
            body += _PRODUCER.pack(pid, e.epoch, e.coordinator_epoch, txn_first, e.last_timestamp, len(e.batches))
            for m in e.batches:
                body += _BATCH.pack(
                    m.first_sequence, m.last_sequence, m.first_offset, m.last_offset, m.max_timestamp
                )
        return _SNAPSHOT_HEADER.pack(SNAPSHOT_VERSION, crc32c.crc32c(body)) + bytes(body)

    @staticmethod
    def from_snapshot(data: bytes) -> dict[int, ProducerEntry]:
        """Decode a snapshot (version 1 or 2); raise ValueError when it is not whole and valid."""
        if len(data) < _SNAPSHOT_HEADER.size + _COUNT.size:
            raise ValueError("snapshot too short")
        version, crc = _SNAPSHOT_HEADER.unpack_from(data, 0)
        body = memoryview(data)[_SNAPSHOT_HEADER.size :]
        if version not in (1, SNAPSHOT_VERSION):
            raise ValueError(f"unsupported snapshot version {version}")
        if crc32c.crc32c(body) != crc:
            raise ValueError("snapshot CRC mismatch")
        try:
            (count,) = _COUNT.unpack_from(body, 0)
            pos = _COUNT.size
            producers: dict[int, ProducerEntry] = {}
            for _ in range(count):
                coordinator_epoch, txn_first, last_ts = NO_COORDINATOR_EPOCH, -1, None
                if version == 1:
                    pid, epoch, nbatches = _PRODUCER_V1.unpack_from(body, pos)
                    pos += _PRODUCER_V1.size
                else:
                    pid, epoch, coordinator_epoch, txn_first, last_ts, nbatches = _PRODUCER.unpack_from(body, pos)
                    pos += _PRODUCER.size
                batches = []
                for _ in range(nbatches):
                    batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                    pos += _BATCH.size
                if last_ts is None:  # version 1 kept no timestamp but the batches'
                    last_ts = batches[-1].max_timestamp if batches else -1
                producers[pid] = ProducerEntry(
                    pid, epoch, batches, coordinator_epoch, txn_first if txn_first >= 0 else None, last_ts
                )
        except struct.error as exc:
            raise ValueError(f"snapshot truncated: {exc}") from None
        if pos != len(body):
            raise ValueError("trailing bytes in snapshot")
        return producers
