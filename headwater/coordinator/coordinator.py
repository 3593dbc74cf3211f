"""The classic group coordinator as a sans-IO state machine.

Rules of the state machine (Kafka's classic rebalance protocol):

* A group is in one of five states. ``TRANSITIONS`` (``group.py``) lists, for each state, the states a
  group may enter it from; every state change goes through :meth:`_transition`, which refuses
  any other move. A group is created Empty (or loaded from the log as Empty or Stable).
* Empty -> PreparingRebalance: a member joins. The join completes no earlier than
  ``group.initial.rebalance.delay.ms`` later, so a whole starting fleet lands in one generation.
* PreparingRebalance -> CompletingRebalance: every known member has re-sent JoinGroup (and no
  member id handed out with MEMBER_ID_REQUIRED is still outstanding), or the rebalance timeout
  (the largest of the members') passed, in which case dynamic members that did not rejoin are
  removed. The generation goes up by one, a protocol every member supports is chosen by vote, a
  leader is kept or picked, and every waiting JoinGroup is answered (the leader's with the members).
  With no member left the group goes to Empty instead (a new generation with no protocol).
* CompletingRebalance -> Stable: the leader's SyncGroup carries the assignment; once the group
  record is committed in ``__consumer_offsets`` every waiting SyncGroup gets its share.
* Stable / CompletingRebalance -> PreparingRebalance: a member joins, leaves, changes its
  protocols, the leader rejoins, or a session expires (no heartbeat, JoinGroup, SyncGroup or
  OffsetCommit within the member's session timeout while it awaits no answer).
* any -> Dead: the group is deleted (DeleteGroups, offsets expired with no member), or its
  partition is unloaded. A Dead group answers nothing; it is gone from the cache.

Offsets (OffsetCommit, OffsetFetch, OffsetDelete, expiry) are in ``offsets.py``, with their rules,
and transactional ones (TxnOffsetCommit, the markers that complete them, loading them) in
``txn_offsets.py``; the groups' data (``Group``, ``Member``, the states and ``TRANSITIONS``) in ``group.py``.

The shell passes time in (``now_ms`` on every call) and carries out the returned effects.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from headwater.coordinator import events as ev
from headwater.coordinator import offsets, txn_offsets
from headwater.coordinator.group import (
    TRANSITIONS,
    CoordinatorConfig,
    Group,
    GroupState,
    Member,
    OffsetEntry,
    PartitionLoad,
    PendingWrite,
    coordinator_write_error,
    transition,
)
from headwater.coordinator.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    partition_for,
)
from headwater.protocol.errors import ErrorCode

__all__ = ["TRANSITIONS", "CoordinatorConfig", "Group", "GroupCoordinator", "GroupState", "Member", "PartitionLoad"]

S = GroupState


class GroupCoordinator:
    def __init__(self, config: CoordinatorConfig, new_member_suffix: Iterable[str] | None = None) -> None:
        self.config = config
        self.groups: dict[str, Group] = {}
        self.partitions: dict[int, tuple[PartitionLoad, int]] = {}  # offsets partition -> (load state, leader epoch)
        self._write_ids = itertools.count(1)
        self._pending: dict[int, PendingWrite] = {}
        # Member ids are "<client id>-<suffix>"; the shell passes uuids, tests a counter.
        self._suffixes = iter(new_member_suffix) if new_member_suffix is not None else (str(i) for i in itertools.count(1))
        self._next_retention_check_ms = 0
        self._replies: list[ev.Reply] = []
        self._appends: list[ev.Append] = []
        # Answers waiting for their write: per-partition results (OffsetCommit, OffsetDelete), and
        # DeleteGroups results with the number of partition writes still outstanding.
        self._commit_results: dict[int, tuple[tuple[str, int, ErrorCode], ...]] = {}
        self._commit_results_groups: dict[int, tuple[tuple[tuple[str, ErrorCode], ...], int]] = {}
        # Transactions (txn_offsets.py): (offsets partition, producer id) -> groups with offsets pending
        # from it, and the markers reported while a partition loads, applied once it has.
        self.txn_groups: dict[tuple[int, int], set[str]] = {}
        self.txn_deferred: dict[int, list[tuple[int, bool]]] = {}

    # --- entry point -------------------------------------------------------------------------------------

    def handle(self, event: ev.Event, now_ms: int) -> ev.Output:
        self._replies, self._appends = [], []
        loaded = 0
        match event:
            case ev.JoinGroup():
                self._join(event, now_ms)
            case ev.SyncGroup():
                self._sync(event, now_ms)
            case ev.Heartbeat():
                self._reply(event.token, self._heartbeat(event, now_ms))
            case ev.LeaveGroup():
                self._leave(event, now_ms)
            case ev.OffsetCommit():
                offsets.commit(self, event, now_ms)
            case ev.TxnOffsetCommit():
                txn_offsets.commit(self, event, now_ms)
            case ev.OffsetFetch():
                self._reply(event.token, offsets.fetch(self, event))
            case ev.OffsetDelete():
                offsets.delete_offsets(self, event, now_ms)
            case ev.ListGroups():
                self._reply(event.token, self._list(event))
            case ev.DescribeGroups():
                self._reply(event.token, ev.DescribeGroupsResult(tuple(self._describe(g) for g in event.group_ids)))
            case ev.DeleteGroups():
                self._delete_groups(event, now_ms)
            case ev.Tick():
                self._tick(now_ms)
            case ev.AppendDone():
                self._append_done(event, now_ms)
            case ev.LoadStarted():
                self._unload(event.partition)
                self.partitions[event.partition] = (PartitionLoad.LOADING, event.leader_epoch)
            case ev.LoadFinished():
                loaded = self._load(event, now_ms)
            case ev.TxnCompleted():
                txn_offsets.completed(self, event, now_ms)
            case ev.Unloaded():
                self._unload(event.partition)
            case _:
                raise TypeError(f"not a coordinator event: {event!r}")
        return ev.Output(tuple(self._replies), tuple(self._appends), loaded)

    # --- helpers -----------------------------------------------------------------------------------------

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.config.num_partitions)

    def _coordinator_error(self, group_id: str) -> ErrorCode:
        found = self.partitions.get(self.partition_of(group_id))
        if found is None:
            return ErrorCode.NOT_COORDINATOR
        if found[0] == PartitionLoad.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    def _check_group(self, group_id: str) -> ErrorCode:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        return self._coordinator_error(group_id)

    def _reply(self, token: int | None, result: ev.Result) -> None:
        if token is not None:
            self._replies.append(ev.Reply(token, result))

    def _transition(self, group: Group, target: GroupState, now_ms: int) -> None:
        transition(group, target, now_ms)

    def _append(self, group: Group, records: list[tuple[bytes, bytes | None]], pending: PendingWrite, *,
                producer_id: int = -1, producer_epoch: int = -1, transactional: bool = False) -> int:
        write_id = next(self._write_ids)
        epoch = self.partitions[group.partition][1]
        self._pending[write_id] = pending
        self._appends.append(ev.Append(write_id, group.partition, epoch, tuple(records), producer_id, producer_epoch,
                                       transactional))
        return write_id

    def _group_record(self, group: Group, now_ms: int) -> tuple[bytes, bytes]:
        members = tuple(
            MemberValue(m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                        m.session_timeout_ms, m.metadata(group.protocol_name), m.assignment)
            for m in group.members.values()
        )
        value = GroupValue(group.protocol_type or "", group.generation, group.protocol_name, group.leader_id,
                           group.state_timestamp_ms, members)
        return encode_group_key(GroupKey(group.group_id)), encode_group_value(value)

    def _new_member_id(self, client_id: str, instance_id: str | None) -> str:
        return f"{instance_id or client_id}-{next(self._suffixes)}"

    # --- JoinGroup -----------------------------------------------------------------------------------------

    def _join(self, e: ev.JoinGroup, now_ms: int) -> None:
        def fail(code: ErrorCode, member_id: str = "") -> None:
            self._reply(e.token, ev.JoinResult(code, member_id=member_id or e.member_id))

        error = self._check_group(e.group_id)
        if error != ErrorCode.NONE:
            return fail(error)
        cfg = self.config
        if not cfg.min_session_timeout_ms <= e.session_timeout_ms <= cfg.max_session_timeout_ms:
            return fail(ErrorCode.INVALID_SESSION_TIMEOUT)
        group = self.groups.get(e.group_id)
        if group is None:
            if e.member_id:
                return fail(ErrorCode.UNKNOWN_MEMBER_ID)
            group = Group(e.group_id, self.partition_of(e.group_id), state_timestamp_ms=now_ms)
            self.groups[e.group_id] = group
        if group.state == S.DEAD:
            return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group.supports(e.protocol_type, e.protocols):
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if not e.member_id:
            self._join_unknown(group, e, now_ms)
        else:
            self._join_known(group, e, now_ms)

    def _join_unknown(self, group: Group, e: ev.JoinGroup, now_ms: int) -> None:
        if e.instance_id is not None and e.instance_id in group.static_members:
            return self._replace_static(group, e, now_ms)
        if len(group.members) + len(group.pending_members) >= self.config.max_group_size:
            return self._reply(e.token, ev.JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED))
        member_id = self._new_member_id(e.client_id, e.instance_id)
        if e.instance_id is None and e.require_known_member_id:
            # The member must come back with this id: one that crashes right here leaves no member
            # behind that the group would wait for in the next rebalance.
            group.pending_members[member_id] = now_ms + e.session_timeout_ms
            return self._reply(e.token, ev.JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id))
        self._add_member(group, member_id, e, now_ms)

    def _add_member(self, group: Group, member_id: str, e: ev.JoinGroup, now_ms: int) -> None:
        member = Member(member_id, e.instance_id, e.client_id, e.client_host, e.session_timeout_ms,
                        e.rebalance_timeout_ms, e.protocol_type, e.protocols, join_token=e.token,
                        heartbeat_deadline_ms=now_ms + e.session_timeout_ms, is_new=True)
        group.pending_members.pop(member_id, None)
        if not group.members:
            group.protocol_type = e.protocol_type
        group.members[member_id] = member
        if e.instance_id is not None:
            group.static_members[e.instance_id] = member_id
        if group.leader_id is None:
            group.leader_id = member_id
        self._prepare_rebalance(group, now_ms)
        self._maybe_complete_join(group, now_ms)

    def _replace_static(self, group: Group, e: ev.JoinGroup, now_ms: int) -> None:
        """A static member restarted (new member id, same group.instance.id): it takes the old one's place."""
        assert e.instance_id is not None
        old_id = group.static_members[e.instance_id]
        old = group.members[old_id]
        new_id = self._new_member_id(e.client_id, e.instance_id)
        # The old incarnation is fenced: anything it still waits for is answered.
        if old.join_token is not None:
            self._reply(old.join_token, ev.JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=old_id))
        if old.sync_token is not None:
            self._reply(old.sync_token, ev.SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        del group.members[old_id]
        member = Member(new_id, e.instance_id, e.client_id, e.client_host, e.session_timeout_ms, e.rebalance_timeout_ms,
                        e.protocol_type, e.protocols, assignment=old.assignment,
                        heartbeat_deadline_ms=now_ms + e.session_timeout_ms)
        group.members[new_id] = member
        group.static_members[e.instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        if group.state == S.STABLE and old.matches(e.protocols):
            # Same subscription: no rebalance; the group record names the new member id.
            assert group.protocol_name is not None
            self._append(group, [self._group_record(group, now_ms)],
                         PendingWrite("group", None, group.group_id, group.generation))
            self._reply(e.token, self._join_result(group, member, include_members=False))
            return
        member.join_token = e.token
        if group.state == S.PREPARING_REBALANCE:
            self._maybe_complete_join(group, now_ms)
        else:
            self._prepare_rebalance(group, now_ms)
            self._maybe_complete_join(group, now_ms)

    def _join_known(self, group: Group, e: ev.JoinGroup, now_ms: int) -> None:
        if e.member_id in group.pending_members:
            return self._add_member(group, e.member_id, e, now_ms)
        error = self._member_error(group, e.member_id, e.instance_id)
        if error != ErrorCode.NONE:
            return self._reply(e.token, ev.JoinResult(error, member_id=e.member_id))
        member = group.members[e.member_id]
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.state == S.PREPARING_REBALANCE:
            self._update_member(member, e)
            self._maybe_complete_join(group, now_ms)
        elif group.state == S.COMPLETING_REBALANCE:
            if member.matches(e.protocols):
                # Our JoinGroup answer was lost; send it again.
                self._reply(e.token, self._join_result(group, member, include_members=member.member_id == group.leader_id))
            else:
                self._update_member(member, e)
                self._prepare_rebalance(group, now_ms)
                self._maybe_complete_join(group, now_ms)
        elif group.state == S.STABLE:
            if member.member_id == group.leader_id or not member.matches(e.protocols):
                # The leader rejoins to trigger a rebalance (e.g. its topics' metadata changed).
                self._update_member(member, e)
                self._prepare_rebalance(group, now_ms)
                self._maybe_complete_join(group, now_ms)
            else:
                self._reply(e.token, self._join_result(group, member, include_members=False))
        else:  # Empty with members cannot happen; Dead was answered above
            self._reply(e.token, ev.JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=e.member_id))

    def _update_member(self, member: Member, e: ev.JoinGroup) -> None:
        if member.join_token is not None and member.join_token != e.token:
            self._reply(member.join_token, ev.JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id))
        member.protocols = e.protocols
        member.session_timeout_ms = e.session_timeout_ms
        member.rebalance_timeout_ms = e.rebalance_timeout_ms
        member.client_id, member.client_host = e.client_id, e.client_host
        member.join_token = e.token

    def _member_error(self, group: Group, member_id: str, instance_id: str | None) -> ErrorCode:
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is not None and known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def _join_result(self, group: Group, member: Member, include_members: bool) -> ev.JoinResult:
        members: tuple[tuple[str, str | None, bytes], ...] = ()
        if include_members:
            members = tuple((m.member_id, m.instance_id, m.metadata(group.protocol_name)) for m in group.members.values())
        return ev.JoinResult(ErrorCode.NONE, group.generation, group.protocol_type, group.protocol_name,
                             group.leader_id or "", member.member_id, members)

    def _prepare_rebalance(self, group: Group, now_ms: int) -> None:
        if group.state == S.PREPARING_REBALANCE:
            return
        if group.state == S.COMPLETING_REBALANCE:
            self._abort_sync(group, ErrorCode.REBALANCE_IN_PROGRESS)
        was_empty = group.state == S.EMPTY
        self._transition(group, S.PREPARING_REBALANCE, now_ms)
        timeout = group.rebalance_timeout_ms()
        group.rebalance_deadline_ms = now_ms + timeout
        group.join_not_before_ms = now_ms + min(self.config.initial_rebalance_delay_ms, timeout) if was_empty else now_ms

    def _abort_sync(self, group: Group, error: ErrorCode) -> None:
        group.sync_write = None
        for m in group.members.values():
            m.assignment = b""
            if m.sync_token is not None:
                self._reply(m.sync_token, ev.SyncResult(error))
                m.sync_token = None

    def _maybe_complete_join(self, group: Group, now_ms: int, force: bool = False) -> None:
        if group.state != S.PREPARING_REBALANCE:
            return
        if not force and not (group.all_joined() and now_ms >= group.join_not_before_ms):
            return
        # Dynamic members that did not rejoin in time are out; static ones keep their place.
        for m in list(group.members.values()):
            if m.join_token is None and m.instance_id is None:
                self._remove_member(group, m)
        group.pending_members.clear()
        group.generation += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            self._transition(group, S.EMPTY, now_ms)
            self._append(group, [self._group_record(group, now_ms)],
                         PendingWrite("group", None, group.group_id, group.generation))
            return
        group.protocol_name = self._select_protocol(group)
        if group.leader_id not in group.members or group.members[group.leader_id].join_token is None:
            joined = [m.member_id for m in group.members.values() if m.join_token is not None]
            group.leader_id = joined[0] if joined else next(iter(group.members))
        self._transition(group, S.COMPLETING_REBALANCE, now_ms)
        group.rebalance_deadline_ms = now_ms + group.rebalance_timeout_ms()
        for m in group.members.values():
            m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms
            m.is_new = False
            if m.join_token is not None:
                self._reply(m.join_token, self._join_result(group, m, include_members=m.member_id == group.leader_id))
                m.join_token = None

    def _select_protocol(self, group: Group) -> str:
        candidates = group.candidate_protocols()
        votes: dict[str, int] = {}
        order: list[str] = []
        for m in group.members.values():
            choice = next(name for name, _ in m.protocols if name in candidates)
            if choice not in votes:
                order.append(choice)
            votes[choice] = votes.get(choice, 0) + 1
        return max(order, key=lambda name: votes[name])  # ties: the first one voted for

    def _remove_member(self, group: Group, member: Member) -> None:
        if member.join_token is not None:
            self._reply(member.join_token, ev.JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member.member_id))
        if member.sync_token is not None:
            self._reply(member.sync_token, ev.SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        del group.members[member.member_id]
        if member.instance_id is not None and group.static_members.get(member.instance_id) == member.member_id:
            del group.static_members[member.instance_id]
        if group.leader_id == member.member_id:
            group.leader_id = next(iter(group.members), None)

    def _member_gone(self, group: Group, member: Member, now_ms: int) -> None:
        """A member left or its session expired."""
        self._remove_member(group, member)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now_ms)
        self._maybe_complete_join(group, now_ms)

    # --- SyncGroup -------------------------------------------------------------------------------------------

    def _sync(self, e: ev.SyncGroup, now_ms: int) -> None:
        error = self._check_group(e.group_id)
        group = self.groups.get(e.group_id)
        if error == ErrorCode.NONE:
            if group is None or group.state == S.DEAD:
                error = ErrorCode.UNKNOWN_MEMBER_ID
            else:
                error = self._member_error(group, e.member_id, e.instance_id)
        if error == ErrorCode.NONE and group is not None:
            if e.generation != group.generation:
                error = ErrorCode.ILLEGAL_GENERATION
            elif (e.protocol_type is not None and e.protocol_type != group.protocol_type) or (
                    e.protocol_name is not None and e.protocol_name != group.protocol_name):
                error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
            elif group.state == S.EMPTY:
                error = ErrorCode.UNKNOWN_MEMBER_ID
            elif group.state == S.PREPARING_REBALANCE:
                error = ErrorCode.REBALANCE_IN_PROGRESS
        if error != ErrorCode.NONE or group is None:
            return self._reply(e.token, ev.SyncResult(error))
        member = group.members[e.member_id]
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.state == S.STABLE:
            return self._reply(e.token, self._sync_result(group, member))
        # CompletingRebalance
        if member.sync_token is not None and member.sync_token != e.token:
            self._reply(member.sync_token, ev.SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_token = e.token
        if e.member_id == group.leader_id and group.sync_write is None:
            given = dict(e.assignments)
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")
            group.sync_write = self._append(group, [self._group_record(group, now_ms)],
                                            PendingWrite("sync", None, group.group_id, group.generation))

    def _sync_result(self, group: Group, member: Member) -> ev.SyncResult:
        return ev.SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment)

    def _sync_written(self, group: Group, error: ErrorCode, now_ms: int) -> None:
        group.sync_write = None
        if error != ErrorCode.NONE:
            # Not stored: the members must start over (they will look for the coordinator again).
            self._abort_sync(group, coordinator_write_error(error))
            self._prepare_rebalance(group, now_ms)
            return
        self._transition(group, S.STABLE, now_ms)
        for m in group.members.values():
            if m.sync_token is not None:
                self._reply(m.sync_token, self._sync_result(group, m))
                m.sync_token = None
            m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms

    # --- Heartbeat, LeaveGroup -----------------------------------------------------------------------------------

    def _heartbeat(self, e: ev.Heartbeat, now_ms: int) -> ErrorCode:
        error = self._check_group(e.group_id)
        if error != ErrorCode.NONE:
            return error
        group = self.groups.get(e.group_id)
        if group is None or group.state in (S.DEAD, S.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        error = self._member_error(group, e.member_id, e.instance_id)
        if error != ErrorCode.NONE:
            return error
        if e.generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        member = group.members[e.member_id]
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.state == S.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def _leave(self, e: ev.LeaveGroup, now_ms: int) -> None:
        error = self._check_group(e.group_id)
        if error != ErrorCode.NONE:
            return self._reply(e.token, ev.LeaveResult(error))
        group = self.groups.get(e.group_id)
        if group is None or group.state == S.DEAD:
            return self._reply(e.token, ev.LeaveResult(
                ErrorCode.UNKNOWN_MEMBER_ID, tuple((m, i, ErrorCode.UNKNOWN_MEMBER_ID) for m, i in e.members)))
        results = []
        for member_id, instance_id in e.members:
            code = ErrorCode.NONE
            if instance_id is not None:
                known = group.static_members.get(instance_id)
                if known is None:
                    code = ErrorCode.UNKNOWN_MEMBER_ID
                elif member_id and member_id != known:
                    code = ErrorCode.FENCED_INSTANCE_ID
                else:
                    member_id = known
            if code == ErrorCode.NONE:
                if member_id in group.pending_members:
                    del group.pending_members[member_id]
                    self._maybe_complete_join(group, now_ms)
                elif member_id in group.members:
                    self._member_gone(group, group.members[member_id], now_ms)
                else:
                    code = ErrorCode.UNKNOWN_MEMBER_ID
            results.append((member_id, instance_id, code))
        top = results[0][2] if len(results) == 1 else ErrorCode.NONE
        self._reply(e.token, ev.LeaveResult(top, tuple(results)))

    # --- ListGroups, DescribeGroups, DeleteGroups ------------------------------------------------------------------

    def _list(self, e: ev.ListGroups) -> ev.ListGroupsResult:
        if any(load == PartitionLoad.LOADING for load, _ in self.partitions.values()):
            return ev.ListGroupsResult(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        groups = tuple(
            ev.ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
            for g in sorted(self.groups.values(), key=lambda g: g.group_id)
            if g.state != S.DEAD and (not e.states or g.state.value in e.states)
        )
        return ev.ListGroupsResult(ErrorCode.NONE, groups)

    def _describe(self, group_id: str) -> ev.DescribedGroup:
        error = self._check_group(group_id)
        if error != ErrorCode.NONE:
            return ev.DescribedGroup(group_id, error)
        group = self.groups.get(group_id)
        if group is None or group.state == S.DEAD:
            return ev.DescribedGroup(group_id, ErrorCode.NONE)
        stable = group.state == S.STABLE
        members = tuple(
            ev.DescribedMember(m.member_id, m.instance_id, m.client_id, m.client_host,
                               m.metadata(group.protocol_name) if stable else b"", m.assignment if stable else b"")
            for m in group.members.values()
        )
        return ev.DescribedGroup(group_id, ErrorCode.NONE, group.state.value, group.protocol_type or "",
                                 (group.protocol_name or "") if stable else "", members)

    def _delete_groups(self, e: ev.DeleteGroups, now_ms: int) -> None:
        results: list[tuple[str, ErrorCode]] = []
        doomed: list[Group] = []
        for group_id in e.group_ids:
            error = self._check_group(group_id)
            group = self.groups.get(group_id)
            if error == ErrorCode.NONE:
                if group is None or group.state == S.DEAD:
                    error = ErrorCode.GROUP_ID_NOT_FOUND
                elif group.state != S.EMPTY:
                    error = ErrorCode.NON_EMPTY_GROUP
            if error != ErrorCode.NONE or group is None:
                results.append((group_id, error))
                continue
            results.append((group_id, ErrorCode.NONE))
            doomed.append(group)
        by_partition: dict[int, list[Group]] = {}
        for g in doomed:
            self._transition(g, S.DEAD, now_ms)
            by_partition.setdefault(g.partition, []).append(g)
        if not by_partition:
            return self._reply(e.token, ev.DeleteGroupsResult(tuple(results)))
        self._commit_results_groups[e.token] = (tuple(results), len(by_partition))
        for gs in by_partition.values():
            records: list[tuple[bytes, bytes | None]] = []
            for g in gs:
                records += [(encode_offset_key(OffsetKey(g.group_id, t, p)), None) for t, p in sorted(g.offsets)]
                records.append((encode_group_key(GroupKey(g.group_id)), None))
            self._append(gs[0], records, PendingWrite("delete-groups", e.token, gs[0].group_id, -1,
                                                       group_ids=tuple(g.group_id for g in gs)))

    # --- writes completing -----------------------------------------------------------------------------------------

    def _append_done(self, e: ev.AppendDone, now_ms: int) -> None:
        pending = self._pending.pop(e.write_id, None)
        if pending is None:
            return  # its partition was unloaded meanwhile; the reply went out then
        group = self.groups.get(pending.group_id)
        if pending.kind in ("commit", "delete-offsets"):
            results = self._commit_results.pop(pending.token or 0, ())
            if e.error != ErrorCode.NONE:
                code = coordinator_write_error(e.error)
                results = tuple((t, p, code if c == ErrorCode.NONE else c) for t, p, c in results)
                return self._reply(pending.token, ev.PartitionResults(code if pending.kind == "delete-offsets"
                                                                       else ErrorCode.NONE, results))
            if group is not None:
                for tp, entry in pending.offsets:
                    if entry is None:
                        group.offsets.pop(tp, None)
                        continue
                    # The later record in the log wins: a transactional offset committed meanwhile
                    # may come after this one (Kafka's onOffsetCommitAppend).
                    entry.log_order = e.write_id
                    current = group.offsets.get(tp)
                    if current is None or current.log_order < entry.log_order:
                        group.offsets[tp] = entry
            self._reply(pending.token, ev.PartitionResults(ErrorCode.NONE, results))
        elif pending.kind == "txn-commit":
            txn_offsets.write_done(self, pending, e, now_ms)
        elif pending.kind == "sync":
            if group is not None and group.sync_write == e.write_id and group.generation == pending.generation \
                    and group.state == S.COMPLETING_REBALANCE:
                self._sync_written(group, e.error, now_ms)
        elif pending.kind == "delete-groups":
            for gid in pending.group_ids:
                g = self.groups.get(gid)
                if g is not None and g.state == S.DEAD:
                    # Gone from the cache even if the tombstones failed: a Dead group can never come
                    # back to life here, and a reload of the partition reads whatever the log kept.
                    del self.groups[gid]
            assert pending.token is not None
            group_results, waiting = self._commit_results_groups.pop(pending.token)
            if e.error != ErrorCode.NONE:
                code = coordinator_write_error(e.error)
                group_results = tuple((g, code if g in pending.group_ids and c == ErrorCode.NONE else c)
                                      for g, c in group_results)
            if waiting > 1:
                self._commit_results_groups[pending.token] = (group_results, waiting - 1)
            else:
                self._reply(pending.token, ev.DeleteGroupsResult(group_results))
        elif pending.kind == "expire" and group is not None and e.error == ErrorCode.NONE:
            for tp, _ in pending.offsets:
                group.offsets.pop(tp, None)
            if group.state == S.EMPTY and not group.offsets and not group.txn_offsets:
                self._transition(group, S.DEAD, now_ms)
                del self.groups[group.group_id]
        # kind "group": a group record written for the record's sake; a failure is healed by the next one

    # --- time ---------------------------------------------------------------------------------------------------

    def _tick(self, now_ms: int) -> None:
        for group in list(self.groups.values()):
            if self.partitions.get(group.partition, (None, 0))[0] != PartitionLoad.LOADED:
                continue
            for member_id, deadline in list(group.pending_members.items()):
                if now_ms >= deadline:
                    del group.pending_members[member_id]
                    self._maybe_complete_join(group, now_ms)
            for m in list(group.members.values()):
                awaiting = m.join_token is not None or m.sync_token is not None
                if not awaiting and now_ms >= m.heartbeat_deadline_ms and m.member_id in group.members:
                    self._member_gone(group, m, now_ms)
            if group.state == S.PREPARING_REBALANCE:
                if now_ms >= group.rebalance_deadline_ms:
                    self._maybe_complete_join(group, now_ms, force=True)
                else:
                    self._maybe_complete_join(group, now_ms)
            elif group.state == S.COMPLETING_REBALANCE and now_ms >= group.rebalance_deadline_ms \
                    and group.sync_write is None:
                # Members that never sent SyncGroup in time are out, and the rest start over.
                for m in list(group.members.values()):
                    if m.sync_token is None:
                        self._remove_member(group, m)
                self._prepare_rebalance(group, now_ms)
                self._maybe_complete_join(group, now_ms)
        if now_ms >= self._next_retention_check_ms:
            self._next_retention_check_ms = now_ms + self.config.offsets_retention_check_interval_ms
            offsets.expire_offsets(self, now_ms)

    # --- loading ------------------------------------------------------------------------------------------------

    def _load(self, e: ev.LoadFinished, now_ms: int) -> int:
        state = self.partitions.get(e.partition)
        if state is None or state != (PartitionLoad.LOADING, e.leader_epoch):
            return 0  # unloaded, or a newer leadership started loading meanwhile
        log = txn_offsets.replay(e.records)
        offsets: dict[str, dict[tuple[str, int], OffsetEntry]] = log.offsets
        metadata: dict[str, GroupValue | None] = log.metadata
        count = 0
        for group_id in set(offsets) | set(metadata) | set(log.pending):
            value = metadata.get(group_id)
            group_offsets = offsets.get(group_id, {})
            pending = log.pending.get(group_id, {})
            if value is None and not group_offsets and not pending:
                continue
            group = Group(group_id, e.partition, state_timestamp_ms=now_ms, offsets=dict(group_offsets))
            txn_offsets.loaded(self, group, pending)
            if value is not None:
                group.protocol_type = value.protocol_type or None
                group.generation = value.generation
                group.protocol_name = value.protocol
                group.leader_id = value.leader
                if value.state_timestamp_ms >= 0:
                    group.state_timestamp_ms = value.state_timestamp_ms
                for mv in value.members:
                    protocols = ((value.protocol, mv.subscription),) if value.protocol is not None else ()
                    group.members[mv.member_id] = Member(
                        mv.member_id, mv.instance_id, mv.client_id, mv.client_host, mv.session_timeout_ms,
                        mv.rebalance_timeout_ms, value.protocol_type, protocols, mv.assignment,
                        heartbeat_deadline_ms=now_ms + mv.session_timeout_ms)
                    if mv.instance_id is not None:
                        group.static_members[mv.instance_id] = mv.member_id
                group.state = S.STABLE if group.members else S.EMPTY
            self.groups[group_id] = group
            count += 1
        self.partitions[e.partition] = (PartitionLoad.LOADED, e.leader_epoch)
        txn_offsets.after_load(self, e.partition, now_ms)
        return count

    def _unload(self, partition: int) -> None:
        txn_offsets.forget_partition(self, partition)
        if self.partitions.pop(partition, None) is None:
            return
        for group in [g for g in self.groups.values() if g.partition == partition]:
            for m in group.members.values():
                if m.join_token is not None:
                    self._reply(m.join_token, ev.JoinResult(ErrorCode.NOT_COORDINATOR, member_id=m.member_id))
                if m.sync_token is not None:
                    self._reply(m.sync_token, ev.SyncResult(ErrorCode.NOT_COORDINATOR))
            del self.groups[group.group_id]
        for write_id, pending in list(self._pending.items()):
            if self.partition_of(pending.group_id) == partition:
                self._append_done(ev.AppendDone(write_id, ErrorCode.NOT_COORDINATOR), 0)

    # --- invariants ----------------------------------------------------------------------------------------------

    def validate_state(self) -> None:
        for gid, g in self.groups.items():
            assert g.group_id == gid
            assert g.partition == self.partition_of(gid), f"{gid} in partition {g.partition}"
            assert g.partition in self.partitions, f"{gid} cached but its partition is not loaded"
            if g.state == S.EMPTY:
                assert not g.members, f"{gid} is Empty with members"
            if g.members:
                assert g.leader_id in g.members, f"{gid}: leader {g.leader_id} is not a member"
                assert g.protocol_type, f"{gid} has members but no protocol type"
            for iid, mid in g.static_members.items():
                assert mid in g.members and g.members[mid].instance_id == iid, f"{gid}: static {iid} -> {mid}"
            for m in g.members.values():
                if m.sync_token is not None:
                    assert g.state == S.COMPLETING_REBALANCE, f"{gid}: a SyncGroup waits in {g.state.value}"
                if m.join_token is not None:
                    assert g.state == S.PREPARING_REBALANCE, f"{gid}: a JoinGroup waits in {g.state.value}"
            if g.state in (S.STABLE, S.COMPLETING_REBALANCE):
                assert g.protocol_name is not None, f"{gid} is {g.state.value} without a protocol"
                assert all(m.metadata(g.protocol_name) or not m.protocols or g.protocol_name in dict(m.protocols)
                           for m in g.members.values()), f"{gid}: a member does not support {g.protocol_name}"
            assert not set(g.pending_members) & set(g.members), f"{gid}: a member is also pending"
        txn_offsets.validate_state(self)
