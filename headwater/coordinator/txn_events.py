"""What the transaction coordinator is told, and what it answers: frozen values, one class per input.

Every request carries a ``token`` the shell chose; its answer comes back as a :class:`TxnReply` with
that token, at once or once the records it depends on are committed. Records come back as
:class:`TxnAppend` effects: the shell appends them to ``__transaction_state-<partition>`` with
acks=all as that partition's leader and reports with :class:`AppendDone`. :class:`SendMarkers` asks
the shell to write a transaction's commit or abort markers to its partitions (WriteTxnMarkers to
their leaders); it reports with :class:`MarkersWritten` once every partition has its marker or is gone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from headwater.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class TxnConfig:
    num_partitions: int = 50
    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 604_800_000
    abort_interval_ms: int = 10_000
    expire_interval_ms: int = 3_600_000

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> TxnConfig:
        def get(key: str, default: int) -> int:
            raw = props.get(key)
            try:
                return default if raw is None else int(raw)
            except ValueError as exc:
                raise ValueError(f"{key}={raw!r} is not an integer") from exc

        d = cls()
        cfg = cls(
            num_partitions=get("transaction.state.log.num.partitions", d.num_partitions),
            max_timeout_ms=get("transaction.max.timeout.ms", d.max_timeout_ms),
            id_expiration_ms=get("transactional.id.expiration.ms", d.id_expiration_ms),
            abort_interval_ms=get("transaction.abort.timed.out.transaction.cleanup.interval.ms", d.abort_interval_ms),
            expire_interval_ms=get("transaction.remove.expired.transaction.cleanup.interval.ms",
                                   d.expire_interval_ms),
        )
        for name, value in (("transaction.state.log.num.partitions", cfg.num_partitions),
                            ("transaction.max.timeout.ms", cfg.max_timeout_ms),
                            ("transactional.id.expiration.ms", cfg.id_expiration_ms),
                            ("transaction.abort.timed.out.transaction.cleanup.interval.ms", cfg.abort_interval_ms),
                            ("transaction.remove.expired.transaction.cleanup.interval.ms", cfg.expire_interval_ms)):
            if value < 1:
                raise ValueError(f"{name} must be at least 1")
        return cfg


# --- requests -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InitProducerId:
    token: int
    transactional_id: str  # never empty: the shell answers an empty or null one itself
    timeout_ms: int
    producer_id: int  # -1/-1 unless the client recovers its producer (KIP-360)
    producer_epoch: int
    new_producer_id: int  # a fresh id from the shell, used only if the coordinator needs one


@dataclass(frozen=True, slots=True)
class AddPartitions:
    """AddPartitionsToTxn (and AddOffsetsToTxn, as the group's ``__consumer_offsets`` partition)."""

    token: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[tuple[str, int], ...]
    verify_only: bool = False  # AddPartitionsToTxn v4+ from a broker (KIP-890): check, do not add


@dataclass(frozen=True, slots=True)
class EndTxn:
    token: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool


@dataclass(frozen=True, slots=True)
class DescribeTransactions:
    token: int
    transactional_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ListTransactions:
    token: int
    states: frozenset[str] = frozenset()  # empty: every state
    producer_ids: frozenset[int] = frozenset()  # empty: every producer id
    duration_filter_ms: int = -1  # >= 0: only transactions started longer ago than this (KIP-994)


# --- facts from the shell ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LoadStarted:
    """This broker became leader of a ``__transaction_state`` partition; its log is being read."""

    partition: int


@dataclass(frozen=True, slots=True)
class LoadFinished:
    """Every (key, value) of the partition in log order (None: a tombstone); the coordinator epoch is
    the partition's leader epoch."""

    partition: int
    coordinator_epoch: int
    records: tuple[tuple[bytes, bytes | None], ...]


@dataclass(frozen=True, slots=True)
class Unloaded:
    """This broker is no longer leader of the partition."""

    partition: int


@dataclass(frozen=True, slots=True)
class AppendDone:
    """A TxnAppend is below the high watermark (NONE) or failed."""

    write_id: int
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class MarkersWritten:
    """Every partition of a SendMarkers has its marker, or is gone."""

    marker_id: int


@dataclass(frozen=True, slots=True)
class Tick:
    """Time passed: timed-out transactions, idle transactional ids, completion writes to retry."""


TxnEvent = (InitProducerId | AddPartitions | EndTxn | DescribeTransactions | ListTransactions | LoadStarted
            | LoadFinished | Unloaded | AppendDone | MarkersWritten | Tick)

# --- results -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class AddPartitionsResult:
    """``error``: the one error of the whole request, or NONE when the partitions differ (verify_only)."""

    error: ErrorCode
    partitions: tuple[tuple[str, int, ErrorCode], ...] = ()


@dataclass(frozen=True, slots=True)
class EndTxnResult:
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class DescribedTransaction:
    # The defaults are those of Kafka's DescribeTransactionsResponse fields, sent with an error.
    transactional_id: str
    error: ErrorCode
    state: str = ""
    timeout_ms: int = 0
    start_time_ms: int = 0
    producer_id: int = 0
    producer_epoch: int = 0
    partitions: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class DescribeTransactionsResult:
    transactions: tuple[DescribedTransaction, ...]


@dataclass(frozen=True, slots=True)
class ListTransactionsResult:
    error: ErrorCode
    unknown_state_filters: tuple[str, ...] = ()
    transactions: tuple[tuple[str, int, str], ...] = ()  # (transactional id, producer id, state)


TxnResult = (InitProducerIdResult | AddPartitionsResult | EndTxnResult | DescribeTransactionsResult
             | ListTransactionsResult)

# --- effects ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TxnReply:
    token: int
    result: TxnResult


@dataclass(frozen=True, slots=True)
class TxnAppend:
    """Records for ``__transaction_state-<partition>``, acks=all; report with AppendDone(write_id)."""

    write_id: int
    partition: int
    records: tuple[tuple[bytes, bytes | None], ...]


@dataclass(frozen=True, slots=True)
class SendMarkers:
    """Write the markers (WriteTxnMarkers) to ``partitions``; report with MarkersWritten(marker_id)."""

    marker_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[tuple[str, int], ...]


@dataclass(slots=True)
class TxnOutput:
    """What one event led to. Appends are in the order they must reach the log; the shell starts
    them before anything else so that a later event's records never overtake them."""

    appends: list[TxnAppend] = field(default_factory=list)
    markers: list[SendMarkers] = field(default_factory=list)
    replies: list[TxnReply] = field(default_factory=list)
