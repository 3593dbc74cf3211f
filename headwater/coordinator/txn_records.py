"""The records of ``__transaction_state``, in Kafka's own key and value formats, and the transaction states.

A Kafka broker reading our log (or ``kafka-dump-log --transaction-log-decoder``) must agree with us
byte for byte, so the layouts are those of Kafka's ``TransactionLogKey`` (v0 only) and
``TransactionLogValue`` messages, each prefixed by its int16 version. We write value v0: a 3.9
coordinator writes v1 (the flexible one, with tagged fields) only once the ``transaction.version``
feature is finalized at 1 or more, which a ZooKeeper-era cluster never does. We read v0 and v1.

A removed transactional id is a tombstone: its key with a null value.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import Enum

TRANSACTION_STATE_TOPIC = "__transaction_state"

KEY_VERSION = 0
VALUE_VERSION = 0
MAX_VALUE_VERSION = 1  # v1: flexible (compact strings and arrays, tagged fields)

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class TxnRecordFormatError(ValueError):
    """A ``__transaction_state`` record we cannot read."""


class TxnState(Enum):
    """A transactional id's state; the value is the name Kafka's tools print (DescribeTransactions)."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"


# The status byte of a TransactionLogValue (Kafka's TransactionState ids).
STATE_IDS: dict[TxnState, int] = {state: i for i, state in enumerate(TxnState)}
STATES_BY_ID: dict[int, TxnState] = {i: state for state, i in STATE_IDS.items()}
STATES_BY_NAME: dict[str, TxnState] = {state.value: state for state in TxnState}


@dataclass(frozen=True, slots=True)
class TxnValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: tuple[tuple[str, int], ...]  # sorted; always empty for Empty
    last_update_ms: int
    start_ms: int


# --- writing -----------------------------------------------------------------------------------------


def _str(s: str) -> bytes:
    raw = s.encode()
    return _I16.pack(len(raw)) + raw


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _compact_str(s: str) -> bytes:
    raw = s.encode()
    return _uvarint(len(raw) + 1) + raw


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _str(transactional_id)


def _by_topic(partitions: tuple[tuple[str, int], ...]) -> list[tuple[str, list[int]]]:
    grouped: dict[str, set[int]] = {}
    for topic, partition in partitions:
        grouped.setdefault(topic, set()).add(partition)
    # Kafka groups a hash set, so its order is arbitrary; ours is sorted, to be reproducible.
    return [(topic, sorted(ids)) for topic, ids in sorted(grouped.items())]


def encode_value(v: TxnValue, version: int = VALUE_VERSION) -> bytes:
    if version not in (0, 1):
        raise ValueError(f"TransactionLogValue v{version} does not exist")
    flexible = version == 1
    head = (_I16.pack(version) + _I64.pack(v.producer_id) + _I16.pack(v.producer_epoch) + _I32.pack(v.timeout_ms)
            + _I8.pack(STATE_IDS[v.state]))
    # Empty carries a null partition list, every other state a (possibly empty) list, as Kafka writes them.
    topics = None if v.state == TxnState.EMPTY else _by_topic(v.partitions)
    parts = [head]
    if topics is None:
        parts.append(_uvarint(0) if flexible else _I32.pack(-1))
    elif flexible:
        parts.append(_uvarint(len(topics) + 1))
        for topic, ids in topics:
            parts += [_compact_str(topic), _uvarint(len(ids) + 1), *(_I32.pack(i) for i in ids), _uvarint(0)]
    else:
        parts.append(_I32.pack(len(topics)))
        for topic, ids in topics:
            parts += [_str(topic), _I32.pack(len(ids)), *(_I32.pack(i) for i in ids)]
    parts += [_I64.pack(v.last_update_ms), _I64.pack(v.start_ms)]
    if flexible:
        parts.append(_uvarint(0))  # no tagged fields
    return b"".join(parts)


# --- reading -----------------------------------------------------------------------------------------


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise TxnRecordFormatError(f"record ends at byte {len(self.buf)}, wanted {n} more at {self.pos}")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def i8(self) -> int:
        return int(_I8.unpack(self.take(1))[0])

    def i16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self.take(8))[0])

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self.take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise TxnRecordFormatError("varint longer than 5 bytes")

    def string(self) -> str:
        n = self.i16()
        if n < 0:
            raise TxnRecordFormatError("null where a string is required")
        return self.take(n).decode()

    def compact_string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise TxnRecordFormatError("null where a string is required")
        return self.take(n).decode()

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.take(self.uvarint())


def decode_key(raw: bytes) -> str:
    """The transactional id of a key; TxnRecordFormatError for a key version Kafka does not write here."""
    r = _Reader(raw)
    version = r.i16()
    if version != KEY_VERSION:
        raise TxnRecordFormatError(f"unknown __transaction_state key version {version}")
    return r.string()


def decode_value(raw: bytes) -> TxnValue:
    r = _Reader(raw)
    version = r.i16()
    if not 0 <= version <= MAX_VALUE_VERSION:
        raise TxnRecordFormatError(f"unsupported TransactionLogValue version {version}")
    flexible = version >= 1
    producer_id = r.i64()
    epoch = r.i16()
    timeout = r.i32()
    status = r.i8()
    state = STATES_BY_ID.get(status)
    if state is None:
        raise TxnRecordFormatError(f"unknown transaction status {status}")
    count = r.uvarint() - 1 if flexible else r.i32()
    partitions: list[tuple[str, int]] = []
    for _ in range(max(count, 0)):
        topic = r.compact_string() if flexible else r.string()
        n = r.uvarint() - 1 if flexible else r.i32()
        partitions += [(topic, r.i32()) for _ in range(max(n, 0))]
        if flexible:
            r.skip_tagged_fields()
    last_update = r.i64()
    start = r.i64()
    if flexible:
        r.skip_tagged_fields()
    # Kafka ignores whatever partitions an Empty record lists.
    kept = () if state == TxnState.EMPTY else tuple(sorted(set(partitions)))
    return TxnValue(producer_id, epoch, timeout, state, kept, last_update, start)
