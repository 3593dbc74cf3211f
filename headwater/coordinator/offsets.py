"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete and offset expiry, for the group
coordinator (``coordinator.py``), which dispatches to these functions and carries their state.

Rules:

A commit is answered once its records are committed; only then is it visible to OffsetFetch.
Generation -1 commits are accepted for an Empty group (simple groups, admin tools). Offsets of an
Empty group expire ``offsets.retention.minutes`` after it became Empty (for a group with no protocol
type: after each commit), and the group with them. A Stable consumer group's offsets of topics none
of its members subscribes to expire that long after their commit. A group with transactional
offsets pending is not removed with its expired ones (``txn_offsets.py`` has those).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from headwater.coordinator import events as ev
from headwater.coordinator import txn_offsets
from headwater.coordinator.group import Group, GroupState, OffsetEntry, PartitionLoad, PendingWrite
from headwater.coordinator.records import (
    GroupKey,
    OffsetKey,
    OffsetValue,
    encode_group_key,
    encode_offset_key,
    encode_offset_value,
    subscribed_topics,
)
from headwater.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from headwater.coordinator.coordinator import GroupCoordinator

S = GroupState


def commit(c: GroupCoordinator, e: ev.OffsetCommit, now_ms: int) -> None:
    def fail(code: ErrorCode) -> None:
        c._reply(e.token, ev.PartitionResults(code, tuple((o.topic, o.partition, code) for o in e.offsets)))

    error = c._check_group(e.group_id)
    if error != ErrorCode.NONE:
        return fail(error)
    group = c.groups.get(e.group_id)
    if group is None:
        if e.generation >= 0:
            return fail(ErrorCode.ILLEGAL_GENERATION)
        group = Group(e.group_id, c.partition_of(e.group_id), state_timestamp_ms=now_ms)
        c.groups[e.group_id] = group
    if group.state == S.DEAD:
        return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not (e.generation < 0 and group.state == S.EMPTY):
        error = c._member_error(group, e.member_id, e.instance_id)
        if error != ErrorCode.NONE:
            return fail(error)
        if e.generation != group.generation:
            return fail(ErrorCode.ILLEGAL_GENERATION)
        if group.state == S.COMPLETING_REBALANCE:
            return fail(ErrorCode.REBALANCE_IN_PROGRESS)
        member = group.members[e.member_id]
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
    results: list[tuple[str, int, ErrorCode]] = []
    records: list[tuple[bytes, bytes | None]] = []
    entries: list[tuple[tuple[str, int], OffsetEntry | None]] = []
    for o in e.offsets:
        metadata = o.metadata or ""
        if len(metadata.encode()) > c.config.offset_metadata_max_bytes:
            results.append((o.topic, o.partition, ErrorCode.OFFSET_METADATA_TOO_LARGE))
            continue
        entry = OffsetEntry(o.offset, o.leader_epoch, metadata, now_ms)
        records.append((encode_offset_key(OffsetKey(e.group_id, o.topic, o.partition)),
                        encode_offset_value(OffsetValue(o.offset, o.leader_epoch, metadata, now_ms))))
        entries.append(((o.topic, o.partition), entry))
        results.append((o.topic, o.partition, ErrorCode.NONE))
    if not records:
        return c._reply(e.token, ev.PartitionResults(ErrorCode.NONE, tuple(results)))
    c._append(group, records, PendingWrite("commit", e.token, group.group_id, group.generation, tuple(entries)))
    # The answer (with the per-partition errors found so far) waits for the write.
    c._commit_results[e.token] = tuple(results)


def fetch(c: GroupCoordinator, e: ev.OffsetFetch) -> ev.OffsetFetchResult:
    error = c._check_group(e.group_id)
    if error != ErrorCode.NONE:
        return ev.OffsetFetchResult(error)
    group = c.groups.get(e.group_id)
    offsets = group.offsets if group is not None else {}
    wanted = sorted(offsets) if e.partitions is None else list(e.partitions)
    # require_stable: a partition whose offset may still change answers UNSTABLE_OFFSET_COMMIT, per
    # partition (Kafka's getOffsets); the consumer retries until the transaction is over.
    unstable = txn_offsets.unstable_partitions(c, group) if e.require_stable and group is not None else set()
    out = []
    for tp in wanted:
        entry = offsets.get(tp)
        if tp in unstable:
            out.append(ev.FetchedOffset(tp[0], tp[1], -1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT))
        elif entry is None:
            out.append(ev.FetchedOffset(tp[0], tp[1], -1, -1, ""))
        else:
            out.append(ev.FetchedOffset(tp[0], tp[1], entry.offset, entry.leader_epoch, entry.metadata))
    return ev.OffsetFetchResult(ErrorCode.NONE, tuple(out))


def delete_offsets(c: GroupCoordinator, e: ev.OffsetDelete, now_ms: int) -> None:
    error = c._check_group(e.group_id)
    group = c.groups.get(e.group_id)
    if error == ErrorCode.NONE and (group is None or group.state == S.DEAD):
        error = ErrorCode.GROUP_ID_NOT_FOUND
    if error != ErrorCode.NONE or group is None:
        return c._reply(e.token, ev.PartitionResults(error))
    subscribed: frozenset[str] = frozenset()
    if group.state != S.EMPTY:
        subscribed = frozenset().union(*(subscribed_topics(m.metadata(group.protocol_name))
                                         for m in group.members.values()))
    results = []
    records: list[tuple[bytes, bytes | None]] = []
    entries: list[tuple[tuple[str, int], OffsetEntry | None]] = []
    for topic, partition in e.partitions:
        if topic in subscribed:
            results.append((topic, partition, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC))
            continue
        results.append((topic, partition, ErrorCode.NONE))
        if (topic, partition) in group.offsets:
            records.append((encode_offset_key(OffsetKey(group.group_id, topic, partition)), None))
            entries.append(((topic, partition), None))
    txn_offsets.drop_pending(group, {(t, p) for t, p, code in results if code == ErrorCode.NONE})
    if not records:
        return c._reply(e.token, ev.PartitionResults(ErrorCode.NONE, tuple(results)))
    c._append(group, records, PendingWrite("delete-offsets", e.token, group.group_id, group.generation,
                                               tuple(entries)))
    c._commit_results[e.token] = tuple(results)


def expire_offsets(c: GroupCoordinator, now_ms: int) -> None:
    retention = c.config.offsets_retention_ms
    for group in list(c.groups.values()):
        if group.state not in (S.EMPTY, S.STABLE) or any(p.group_id == group.group_id for p in c._pending.values()):
            continue
        if c.partitions.get(group.partition, (None, 0))[0] != PartitionLoad.LOADED:
            continue
        if group.state == S.STABLE:
            # A consumer group in use keeps the offsets of what it subscribes to; those of topics
            # no member subscribes to any more expire by commit time (KIP-496).
            subscribed = frozenset().union(*(subscribed_topics(m.metadata(group.protocol_name))
                                             for m in group.members.values()))
            if group.protocol_type != "consumer" or not subscribed:
                continue
            expired = [tp for tp, o in group.offsets.items()
                       if tp[0] not in subscribed and now_ms - o.commit_timestamp_ms >= retention]
        elif group.protocol_type:
            expired = list(group.offsets) if now_ms - group.state_timestamp_ms >= retention else []
        else:
            expired = [tp for tp, o in group.offsets.items() if now_ms - o.commit_timestamp_ms >= retention]
        if not expired:
            continue
        records: list[tuple[bytes, bytes | None]] = [
            (encode_offset_key(OffsetKey(group.group_id, t, p)), None) for t, p in sorted(expired)]
        if group.state == S.EMPTY and len(expired) == len(group.offsets) and not group.txn_offsets:
            # Nothing left: the group goes too (it turns Dead once the tombstones are committed).
            records.append((encode_group_key(GroupKey(group.group_id)), None))
        c._append(group, records, PendingWrite("expire", None, group.group_id, group.generation,
                                                   tuple((tp, None) for tp in expired)))
