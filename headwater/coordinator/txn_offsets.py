"""Transactional offset commits (KIP-98) for the group coordinator (``coordinator.py``): TxnOffsetCommit,
the markers that commit or abort them, OffsetFetch's ``require_stable``, and reading them back from
``__consumer_offsets``.

Rules (Kafka 3.9's GroupCoordinator, GroupMetadata and GroupMetadataManager):

* A TxnOffsetCommit for a group this coordinator does not know creates it, Empty: a producer may
  commit for a group nobody has joined. Membership is checked only when the request names it (a
  generation >= 0, a member id or a group instance id, as TxnOffsetCommit v3+ sends): then the
  member must be current (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) and the generation the group's
  (ILLEGAL_GENERATION). Generation -1 against an Empty group is always accepted. Nothing else about
  the group's state is checked: unlike OffsetCommit, CompletingRebalance is no refusal, and no
  member's session is extended.
* The offsets are appended as one transactional batch of the producer (its id and epoch, no
  sequence), and are pending from the moment the request is accepted: OffsetFetch does not show
  them. A failed write drops them; a later TxnOffsetCommit of the same producer replaces the pending
  offset of a partition.
* When the producer's COMMIT marker is committed in the group's offsets partition (TxnCompleted),
  every group of that partition with offsets pending from that producer makes them committed, each
  unless the group's committed offset of that partition was written later in the log (an
  OffsetCommit after the transactional record: Kafka's ``completePendingTxnOffsetCommit`` keeps the
  later batch by log offset). An ABORT marker drops them.
* Log order: Kafka compares the batches' log offsets; here :attr:`OffsetEntry.log_order` stands for
  them. Our own writes carry their write id: the shell appends every ``Append`` on the leader, one
  after the other, in write-id order. A record read by a load carries its position minus the number
  of records read, so it is negative: before any write made after the load.
* A marker reported while its partition is loading waits for the load (Kafka completes transactions
  on the scheduler thread that loads), so it applies to what the load read; a partition this
  broker does not lead ignores it (its next leader reads the marker from the log).
* Loading: a record of a transactional batch is pending for its producer until a control batch of
  that producer comes later in the log; COMMIT makes its offsets committed with the same precedence,
  any other control record drops them. A transaction with no marker at the end stays pending.
* ``require_stable`` (OffsetFetch v7+): a partition with a transactional offset pending, or a plain
  commit still being written, answers UNSTABLE_OFFSET_COMMIT (offset -1), per partition; the group's
  error stays NONE (Kafka's ``getOffsets`` / ``hasPendingOffsetCommitsForTopicPartition``).
* OffsetDelete drops the partition's pending transactional offsets too (``removeOffsets``); a group
  keeps living while it has any (``hasOffsets``). A group that only ever held offsets (Empty,
  generation 0) and has none left of either kind once a transaction is aborted or its write failed
  goes at once; Kafka's ``cleanupGroupMetadata`` removes it at the next retention check, with no
  record to delete either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from headwater.coordinator import events as ev
from headwater.coordinator.group import (
    Group,
    GroupState,
    OffsetEntry,
    PartitionLoad,
    PendingWrite,
    coordinator_write_error,
)
from headwater.coordinator.records import (
    GroupValue,
    OffsetKey,
    OffsetValue,
    RecordFormatError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_offset_key,
    encode_offset_value,
)
from headwater.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from headwater.coordinator.coordinator import GroupCoordinator

S = GroupState
TopicPartition = tuple[str, int]


# --- TxnOffsetCommit -------------------------------------------------------------------------------------


def commit(c: GroupCoordinator, e: ev.TxnOffsetCommit, now_ms: int) -> None:
    def fail(code: ErrorCode) -> None:
        c._reply(e.token, ev.PartitionResults(ErrorCode.NONE, tuple((o.topic, o.partition, code) for o in e.offsets)))

    error = c._check_group(e.group_id)
    if error != ErrorCode.NONE:
        return fail(error)
    group = c.groups.get(e.group_id)
    # An unknown group is created Empty (kept only if the commit is written, so a refused one leaves nothing).
    fresh = group is None
    if group is None:
        group = Group(e.group_id, c.partition_of(e.group_id), state_timestamp_ms=now_ms)
    error = _membership_error(group, e)
    if error != ErrorCode.NONE:
        return fail(error)
    results: list[tuple[str, int, ErrorCode]] = []
    records: list[tuple[bytes, bytes | None]] = []
    entries: list[tuple[TopicPartition, OffsetEntry]] = []
    for o in e.offsets:
        metadata = o.metadata or ""
        if len(metadata.encode()) > c.config.offset_metadata_max_bytes:
            results.append((o.topic, o.partition, ErrorCode.OFFSET_METADATA_TOO_LARGE))
            continue
        records.append((encode_offset_key(OffsetKey(e.group_id, o.topic, o.partition)),
                        encode_offset_value(OffsetValue(o.offset, o.leader_epoch, metadata, now_ms))))
        entries.append(((o.topic, o.partition), OffsetEntry(o.offset, o.leader_epoch, metadata, now_ms)))
        results.append((o.topic, o.partition, ErrorCode.NONE))
    if not records:
        return c._reply(e.token, ev.PartitionResults(ErrorCode.NONE, tuple(results)))
    if fresh:
        c.groups[e.group_id] = group
    write_id = c._append(group, records,
                         PendingWrite("txn-commit", e.token, group.group_id, group.generation, tuple(entries),
                                      producer_id=e.producer_id),
                         producer_id=e.producer_id, producer_epoch=e.producer_epoch, transactional=True)
    # Pending from now on (Kafka's prepareTxnOffsetCommit), so require_stable sees the write in flight.
    pending = group.txn_offsets.setdefault(e.producer_id, {})
    for tp, entry in entries:
        entry.log_order = write_id
        pending[tp] = entry
    c.txn_groups.setdefault((group.partition, e.producer_id), set()).add(group.group_id)
    c._commit_results[e.token] = tuple(results)


def _membership_error(group: Group, e: ev.TxnOffsetCommit) -> ErrorCode:
    """Kafka's ``validateOffsetCommit`` for a transactional commit."""
    if group.state == S.DEAD:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if e.generation_id < 0 and group.state == S.EMPTY:
        return ErrorCode.NONE
    if e.generation_id < 0 and not e.member_id and e.group_instance_id is None:
        return ErrorCode.NONE  # an old producer (v0-v2) names no member: nothing to check
    if e.group_instance_id is not None:
        known = group.static_members.get(e.group_instance_id)
        if known is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if known != e.member_id:
            return ErrorCode.FENCED_INSTANCE_ID
    if e.member_id not in group.members:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if e.generation_id != group.generation:
        return ErrorCode.ILLEGAL_GENERATION
    return ErrorCode.NONE


def write_done(c: GroupCoordinator, pending: PendingWrite, e: ev.AppendDone, now_ms: int) -> None:
    """The transactional batch is committed (its offsets stay pending) or failed (they are dropped)."""
    results = c._commit_results.pop(pending.token or 0, ())
    if e.error == ErrorCode.NONE:
        return c._reply(pending.token, ev.PartitionResults(ErrorCode.NONE, results))
    group = c.groups.get(pending.group_id)
    if group is not None:
        mine = group.txn_offsets.get(pending.producer_id, {})
        for tp, entry in pending.offsets:
            if mine.get(tp) is entry:  # not replaced by a later commit of the producer meanwhile
                del mine[tp]
        if not mine:
            group.txn_offsets.pop(pending.producer_id, None)
            _unindex(c, group, pending.producer_id)
        _forget_if_empty(c, group, now_ms)
    code = coordinator_write_error(e.error)
    c._reply(pending.token, ev.PartitionResults(ErrorCode.NONE, tuple(
        (t, p, code if r == ErrorCode.NONE else r) for t, p, r in results)))


def _unindex(c: GroupCoordinator, group: Group, producer_id: int) -> None:
    key = (group.partition, producer_id)
    groups = c.txn_groups.get(key)
    if groups is not None:
        groups.discard(group.group_id)
        if not groups:
            del c.txn_groups[key]


# --- markers ----------------------------------------------------------------------------------------------


def completed(c: GroupCoordinator, e: ev.TxnCompleted, now_ms: int) -> None:
    """Kafka's ``handleTxnCompletion``: the producer's pending offsets in groups of this partition."""
    state = c.partitions.get(e.partition)
    if state is None:
        return  # not ours: the partition's next leader reads the marker from the log
    if state[0] == PartitionLoad.LOADING:
        c.txn_deferred.setdefault(e.partition, []).append((e.producer_id, e.commit))
        return
    for group_id in sorted(c.txn_groups.pop((e.partition, e.producer_id), set())):
        group = c.groups.get(group_id)
        if group is None:
            continue
        offsets = group.txn_offsets.pop(e.producer_id, {})
        if group.state == S.DEAD:
            continue  # being deleted: nothing to show any more
        if e.commit:
            _commit_pending(group.offsets, offsets)
        _forget_if_empty(c, group, now_ms)


def _forget_if_empty(c: GroupCoordinator, group: Group, now_ms: int) -> None:
    """A group that only held offsets (created by a TxnOffsetCommit, say) and holds none any more."""
    if (group.state == S.EMPTY and group.generation == 0 and not group.members and not group.pending_members
            and not group.offsets and not group.txn_offsets
            and not any(p.group_id == group.group_id for p in c._pending.values())):
        c._transition(group, S.DEAD, now_ms)
        del c.groups[group.group_id]


def _commit_pending(committed: dict[TopicPartition, OffsetEntry], pending: dict[TopicPartition, OffsetEntry]) -> None:
    for tp, entry in pending.items():
        current = committed.get(tp)
        if current is None or current.log_order < entry.log_order:
            committed[tp] = entry


def after_load(c: GroupCoordinator, partition: int, now_ms: int) -> None:
    """Markers reported while the partition loaded, now that its groups are there."""
    for producer_id, commit_ in c.txn_deferred.pop(partition, []):
        completed(c, ev.TxnCompleted(partition, producer_id, commit_), now_ms)


def forget_partition(c: GroupCoordinator, partition: int) -> None:
    c.txn_deferred.pop(partition, None)
    for key in [k for k in c.txn_groups if k[0] == partition]:
        del c.txn_groups[key]


# --- OffsetFetch, OffsetDelete ---------------------------------------------------------------------------


def unstable_partitions(c: GroupCoordinator, group: Group) -> set[TopicPartition]:
    """Partitions with an offset commit not yet final: transactional ones pending, plain ones being written."""
    out = {tp for offsets in group.txn_offsets.values() for tp in offsets}
    for p in c._pending.values():
        if p.kind == "commit" and p.group_id == group.group_id:
            out.update(tp for tp, _ in p.offsets)
    return out


def drop_pending(group: Group, partitions: set[TopicPartition]) -> None:
    """OffsetDelete of these partitions drops their pending transactional offsets too (Kafka's removeOffsets)."""
    for offsets in group.txn_offsets.values():
        for tp in partitions & offsets.keys():
            del offsets[tp]
    # A producer left with nothing pending keeps its (empty) place until its marker: the index says
    # where to look, and the marker finds nothing to do.


# --- loading ----------------------------------------------------------------------------------------------


class Replayed:
    """What a partition's log says: committed offsets, pending transactional offsets and group records."""

    __slots__ = ("metadata", "offsets", "pending")

    def __init__(self) -> None:
        self.offsets: dict[str, dict[TopicPartition, OffsetEntry]] = {}
        self.metadata: dict[str, GroupValue | None] = {}
        self.pending: dict[str, dict[int, dict[TopicPartition, OffsetEntry]]] = {}  # group -> producer -> ...


def replay(records: tuple[ev.LoadedRecord, ...]) -> Replayed:
    """Kafka's ``doLoadGroupsAndOffsets`` over the records of one partition, in log order."""
    out = Replayed()
    open_txns: dict[int, dict[tuple[str, str, int], OffsetEntry]] = {}  # producer id -> (group, topic, partition) -> ...
    n = len(records)
    for i, item in enumerate(records):
        if isinstance(item, ev.LoadedTxnMarker):
            txn = open_txns.pop(item.producer_id, {})
            if item.commit:
                for (group_id, topic, partition), entry in txn.items():
                    committed = out.offsets.setdefault(group_id, {})
                    current = committed.get((topic, partition))
                    if current is None or current.log_order < entry.log_order:
                        committed[(topic, partition)] = entry
            continue
        if isinstance(item, ev.LoadedTxnRecord):
            raw_key, raw_value, producer = item.key, item.value, item.producer_id
        else:
            (raw_key, raw_value), producer = item, -1
        try:
            key = decode_key(raw_key)
            if isinstance(key, OffsetKey):
                tp = (key.topic, key.partition)
                if producer >= 0:
                    txn = open_txns.setdefault(producer, {})
                    if raw_value is None:
                        txn.pop((key.group, key.topic, key.partition), None)
                    else:
                        v = decode_offset_value(raw_value)
                        txn[(key.group, key.topic, key.partition)] = OffsetEntry(
                            v.offset, v.leader_epoch, v.metadata, v.commit_timestamp_ms, i - n)
                    continue
                per_group = out.offsets.setdefault(key.group, {})
                if raw_value is None:
                    per_group.pop(tp, None)
                else:
                    v = decode_offset_value(raw_value)
                    per_group[tp] = OffsetEntry(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp_ms, i - n)
            else:
                out.metadata[key.group] = None if raw_value is None else decode_group_value(raw_value)
        except (RecordFormatError, UnicodeDecodeError):
            continue  # a record of a kind we do not know (a newer format) is not ours to act on
    for producer, txn in open_txns.items():
        for (group_id, topic, partition), entry in txn.items():
            out.pending.setdefault(group_id, {}).setdefault(producer, {})[(topic, partition)] = entry
    return out


def loaded(c: GroupCoordinator, group: Group, pending: dict[int, dict[TopicPartition, OffsetEntry]]) -> None:
    """A loaded group's open transactions: pending, and indexed for their markers."""
    for producer, offsets in pending.items():
        if offsets:
            group.txn_offsets[producer] = dict(offsets)
            c.txn_groups.setdefault((group.partition, producer), set()).add(group.group_id)


# --- invariants ---------------------------------------------------------------------------------------------


def validate_state(c: GroupCoordinator) -> None:
    for g in c.groups.values():
        for producer in g.txn_offsets:
            assert g.group_id in c.txn_groups.get((g.partition, producer), set()), \
                f"{g.group_id}: offsets pending from producer {producer} that no marker would find"
    for (partition, _producer), group_ids in c.txn_groups.items():
        assert partition in c.partitions, f"producer index names unloaded partition {partition}"
        assert group_ids, "an empty producer index entry"
    for partition in c.txn_deferred:
        assert c.partitions.get(partition, (None, 0))[0] == PartitionLoad.LOADING, \
            f"markers wait for partition {partition}, which is not loading"
