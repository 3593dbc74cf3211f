"""What the group coordinator is told, and what it answers: frozen values, one class per input.

Every request carries a ``token`` the shell chose; an answer comes back as a :class:`Reply` with
that token, at once or later (a JoinGroup waits for the rebalance, a follower's SyncGroup for the
leader's assignment, an OffsetCommit for its records to be committed). Records to write come back
as :class:`Append` effects; the shell appends them as the leader of the group's ``__consumer_offsets``
partition, waits until they are below the high watermark and reports with :class:`AppendDone`.

Transactions (KIP-98): a :class:`TxnOffsetCommit`'s records are appended as one transactional batch
of its producer and stay pending until the shell reports, with :class:`TxnCompleted`, that the
producer's COMMIT or ABORT marker is committed in that partition.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from headwater.protocol.errors import ErrorCode

# --- requests -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JoinGroup:
    token: int
    group_id: str
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool  # JoinGroup v4+: a new dynamic member first gets MEMBER_ID_REQUIRED


@dataclass(frozen=True, slots=True)
class SyncGroup:
    token: int
    group_id: str
    generation: int
    member_id: str
    instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class Heartbeat:
    token: int
    group_id: str
    generation: int
    member_id: str
    instance_id: str | None


@dataclass(frozen=True, slots=True)
class LeaveGroup:
    token: int
    group_id: str
    members: tuple[tuple[str, str | None], ...]  # (member id, group instance id)


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    token: int
    group_id: str
    generation: int  # -1: a simple (manual-assignment) group or an admin tool
    member_id: str
    instance_id: str | None
    offsets: tuple[CommittedOffset, ...]


@dataclass(frozen=True, slots=True)
class TxnOffsetCommit:
    """Offsets committed inside a transaction: visible once its COMMIT marker is written (TxnCompleted)."""

    token: int
    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: int  # -1, no member id, no instance id: no membership to check (what v0-v2 send)
    member_id: str
    group_instance_id: str | None
    offsets: tuple[CommittedOffset, ...]


@dataclass(frozen=True, slots=True)
class OffsetFetch:
    token: int
    group_id: str
    partitions: tuple[tuple[str, int], ...] | None  # None: every committed offset of the group
    require_stable: bool = False  # v7+: a partition with an offset commit in flight answers UNSTABLE_OFFSET_COMMIT


@dataclass(frozen=True, slots=True)
class OffsetDelete:
    token: int
    group_id: str
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class ListGroups:
    token: int
    states: frozenset[str] = frozenset()  # empty: every state


@dataclass(frozen=True, slots=True)
class DescribeGroups:
    token: int
    group_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeleteGroups:
    token: int
    group_ids: tuple[str, ...]


# --- facts from the shell ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tick:
    """Time passed: session, rebalance and join-delay deadlines, offset retention."""


@dataclass(frozen=True, slots=True)
class AppendDone:
    write_id: int
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class LoadStarted:
    """This broker became leader of an offsets partition at ``leader_epoch``; its log is being read."""

    partition: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class LoadedTxnRecord:
    """A record of a transactional batch of ``producer_id``: it counts once that producer's COMMIT follows."""

    producer_id: int
    key: bytes
    value: bytes | None


@dataclass(frozen=True, slots=True)
class LoadedTxnMarker:
    """A control batch of ``producer_id``: COMMIT (``commit``) or ABORT of its open transaction."""

    producer_id: int
    commit: bool


# A non-transactional record is a plain (key, value) pair (a None value is a tombstone): most of a
# log, kept as cheap as before; the producer id of a non-transactional batch changes nothing here.
LoadedRecord = tuple[bytes, bytes | None] | LoadedTxnRecord | LoadedTxnMarker


@dataclass(frozen=True, slots=True)
class LoadFinished:
    """The records of the partition, in log order, with the transactional context of their batch."""

    partition: int
    leader_epoch: int
    records: tuple[LoadedRecord, ...]


@dataclass(frozen=True, slots=True)
class TxnCompleted:
    """The COMMIT (``commit``) or ABORT marker of ``producer_id`` is committed in offsets ``partition``."""

    partition: int
    producer_id: int
    commit: bool


@dataclass(frozen=True, slots=True)
class Unloaded:
    """This broker is no longer leader of the offsets partition."""

    partition: int


Event = (JoinGroup | SyncGroup | Heartbeat | LeaveGroup | OffsetCommit | TxnOffsetCommit | OffsetFetch | OffsetDelete
         | ListGroups | DescribeGroups | DeleteGroups | Tick | AppendDone | LoadStarted | LoadFinished | TxnCompleted
         | Unloaded)

# --- results -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()  # (member id, instance id, metadata): leader only


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class LeaveResult:
    error: ErrorCode
    members: tuple[tuple[str, str | None, ErrorCode], ...] = ()


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class OffsetFetchResult:
    error: ErrorCode
    offsets: tuple[FetchedOffset, ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionResults:
    """Per-partition errors (OffsetCommit, TxnOffsetCommit, OffsetDelete) and a group-level one (OffsetDelete)."""

    error: ErrorCode
    partitions: tuple[tuple[str, int, ErrorCode], ...] = ()


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True, slots=True)
class ListGroupsResult:
    error: ErrorCode
    groups: tuple[ListedGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    group_id: str
    error: ErrorCode
    state: str = "Dead"
    protocol_type: str = ""
    protocol_name: str = ""
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribeGroupsResult:
    groups: tuple[DescribedGroup, ...]


@dataclass(frozen=True, slots=True)
class DeleteGroupsResult:
    results: tuple[tuple[str, ErrorCode], ...]


Result = (JoinResult | SyncResult | ErrorCode | LeaveResult | OffsetFetchResult | PartitionResults | ListGroupsResult
          | DescribeGroupsResult | DeleteGroupsResult)


# --- effects ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reply:
    token: int
    result: Result


@dataclass(frozen=True, slots=True)
class Append:
    """Records for ``partition`` of ``__consumer_offsets``, as one batch; report with AppendDone(write_id).

    A transactional batch (TxnOffsetCommit) carries its producer's id and epoch and no sequence.
    Appends are written in ``write_id`` order, so that order is their order in the log."""

    write_id: int
    partition: int
    leader_epoch: int
    records: tuple[tuple[bytes, bytes | None], ...]
    producer_id: int = -1
    producer_epoch: int = -1
    transactional: bool = False


@dataclass(frozen=True, slots=True)
class Output:
    replies: tuple[Reply, ...] = ()
    appends: tuple[Append, ...] = ()
    loaded_groups: int = field(default=0)
