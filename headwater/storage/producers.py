"""Idempotent-producer state of one partition: the last batches each producer id wrote.

Rules (Kafka's ``ProducerAppendInfo``), applied only to batches with a producer id and a sequence:
- a producer epoch lower than the known one is fenced: INVALID_PRODUCER_EPOCH;
- a higher epoch (a new producer session) must start at sequence 0, unless the producer is unknown;
- in the same epoch, a batch whose (first, last) sequence equals one of the last
  ``MAX_CACHED_BATCHES`` batches is a retry: it is acknowledged with the original offsets, not written;
- otherwise its first sequence must follow the latest batch's last sequence (mod 2**31); a batch
  ahead of it (a gap) raises ``SequenceGapError``, an OUT_OF_ORDER_SEQUENCE_NUMBER that tells the
  leader where the producer's latest batch is, so it can tell a gap left by retries still on their
  way from a previous leader from a real one (see ``headwater.server.replica_manager``);
- an unknown producer id is accepted at any sequence (its earlier batches may have been deleted).
Replicated batches (follower appends, rebuild on load) update the state without these checks.

The state is rebuilt on load from the latest snapshot (written on roll and close) plus the batch
headers after it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import crc32c

from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.records.batch import NO_SEQUENCE, BatchHeader

MAX_CACHED_BATCHES = 5
SEQUENCE_MODULUS = 1 << 31
NO_PRODUCER_EPOCH = -1

SNAPSHOT_VERSION = 1
# Snapshot file: version int16, crc32c uint32 of everything after it, producer count int32, then
# per producer: id int64, epoch int16, batch count int8, and per batch the five fields below.
_SNAPSHOT_HEADER = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_PRODUCER = struct.Struct(">qhb")
_BATCH = struct.Struct(">iiqqq")


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    max_timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: list[BatchMetadata] = field(default_factory=list)

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
        return ProducerEntry(self.producer_id, epoch, [*kept, meta][-MAX_CACHED_BATCHES:])


class SequenceGapError(KafkaError):
    """OUT_OF_ORDER_SEQUENCE_NUMBER for a batch ahead of the producer's latest one, with the log offset
    of that latest batch."""

    def __init__(self, message: str, latest_offset: int) -> None:
        super().__init__(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, message)
        self.latest_offset = latest_offset


def tracks_sequence(header: BatchHeader) -> bool:
    return header.producer_id >= 0 and header.base_sequence >= 0 and not header.is_control


def is_ahead(last_seq: int, next_seq: int) -> bool:
    """``next_seq`` skips sequences after ``last_seq``: within half the (wrapping) sequence space
    past it, as opposed to behind it (an old batch no longer among the cached ones)."""
    return 0 < (next_seq - last_seq - 1) % SEQUENCE_MODULUS < SEQUENCE_MODULUS // 2


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def clear(self) -> None:
        self.producers = {}

    def get(self, producer_id: int) -> ProducerEntry | None:
        return self.producers.get(producer_id)

    def validate(
        self,
        header: BatchHeader,
        staged: dict[int, ProducerEntry],
        first_offset: int,
        last_offset: int,
    ) -> BatchMetadata | None:
        """Check one leader batch against the state (and earlier batches of the same request).

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

    def commit(self, staged: dict[int, ProducerEntry]) -> None:
        self.producers.update(staged)

    def replay(self, header: BatchHeader) -> None:
        """Apply a batch that is already in the log (follower append, rebuild): no checks."""
        if not tracks_sequence(header):
            return
        pid = header.producer_id
        entry = self.producers.get(pid) or ProducerEntry(pid, NO_PRODUCER_EPOCH)
        meta = BatchMetadata(
            header.base_sequence,
            header.last_sequence,
            header.base_offset,
            header.last_offset,
            header.max_timestamp,
        )
        self.producers[pid] = entry.with_batch(header.producer_epoch, meta)

    def to_snapshot(self) -> bytes:
        body = bytearray(_COUNT.pack(len(self.producers)))
        for pid in sorted(self.producers):
            entry = self.producers[pid]
            body += _PRODUCER.pack(pid, entry.epoch, len(entry.batches))
            for m in entry.batches:
                body += _BATCH.pack(
                    m.first_sequence, m.last_sequence, m.first_offset, m.last_offset, m.max_timestamp
                )
        return _SNAPSHOT_HEADER.pack(SNAPSHOT_VERSION, crc32c.crc32c(body)) + bytes(body)

    @staticmethod
    def from_snapshot(data: bytes) -> dict[int, ProducerEntry]:
        """Decode a snapshot; raise ValueError when it is not whole and valid."""
        if len(data) < _SNAPSHOT_HEADER.size + _COUNT.size:
            raise ValueError("snapshot too short")
        version, crc = _SNAPSHOT_HEADER.unpack_from(data, 0)
        body = memoryview(data)[_SNAPSHOT_HEADER.size :]
        if version != SNAPSHOT_VERSION:
            raise ValueError(f"unsupported snapshot version {version}")
        if crc32c.crc32c(body) != crc:
            raise ValueError("snapshot CRC mismatch")
        try:
            (count,) = _COUNT.unpack_from(body, 0)
            pos = _COUNT.size
            producers: dict[int, ProducerEntry] = {}
            for _ in range(count):
                pid, epoch, nbatches = _PRODUCER.unpack_from(body, pos)
                pos += _PRODUCER.size
                batches = []
                for _ in range(nbatches):
                    batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                    pos += _BATCH.size
                producers[pid] = ProducerEntry(pid, epoch, batches)
        except struct.error as exc:
            raise ValueError(f"snapshot truncated: {exc}") from None
        if pos != len(body):
            raise ValueError("trailing bytes in snapshot")
        return producers
