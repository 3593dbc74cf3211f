"""The classic rebalance protocol, offsets and group admin of the sans-IO coordinator, step by step.

Every step goes through ``Harness.send``, which calls ``validate_state()`` after it.
"""

from __future__ import annotations

import pytest
from group_harness import CONFIG, Harness

from headwater.coordinator import events as ev
from headwater.coordinator.coordinator import TRANSITIONS, Group, GroupCoordinator, GroupState
from headwater.coordinator.records import decode_key, decode_offset_value
from headwater.protocol.errors import ErrorCode

E = ErrorCode


def stable_group(h: Harness, group: str = "g", n: int = 2) -> tuple[int, list[str]]:
    """n dynamic members through a whole rebalance; returns (generation, member ids; the first is the leader)."""
    members = []
    for _ in range(n):  # every member id is handed out first, so the join waits for all of them
        first = h.reply(h.join(group))
        assert isinstance(first, ev.JoinResult) and first.error == E.MEMBER_ID_REQUIRED
        members.append(first.member_id)
    joins = [h.join(group, m) for m in members]
    results = [h.reply(t) for t in joins]
    assert all(isinstance(r, ev.JoinResult) and r.error == E.NONE for r in results), results
    first = results[0]
    assert isinstance(first, ev.JoinResult)
    leader = first.leader
    generation = first.generation
    syncs = {m: h.sync(group, generation, m) for m in members if m != leader}
    syncs[leader] = h.sync(group, generation, leader, tuple((m, f"a-{m}".encode()) for m in members))
    for m, t in syncs.items():
        r = h.reply(t)
        assert isinstance(r, ev.SyncResult) and r.error == E.NONE and r.assignment == f"a-{m}".encode(), r
    assert h.state(group) == "Stable"
    return generation, [leader] + [m for m in members if m != leader]


def test_join_requires_member_id_then_one_generation_for_all() -> None:
    h = Harness()
    a, ta = h.new_member("g")
    # The first member alone completes the join (no initial delay configured).
    ra = h.reply(ta)
    assert isinstance(ra, ev.JoinResult) and ra.error == E.NONE and ra.generation == 1 and ra.leader == a
    assert [m for m, _, _ in ra.members] == [a] and ra.protocol_name == "range"
    b, tb = h.new_member("g")
    assert h.reply(tb) is None and h.state("g") == "PreparingRebalance"  # waits for a to rejoin
    assert h.heartbeat("g", 1, a) == E.REBALANCE_IN_PROGRESS
    ta2 = h.join("g", a)
    ra2, rb = h.reply(ta2), h.reply(tb)
    assert isinstance(ra2, ev.JoinResult) and isinstance(rb, ev.JoinResult)
    assert ra2.generation == rb.generation == 2 and ra2.leader == a
    assert sorted(m for m, _, _ in ra2.members) == sorted([a, b]) and rb.members == ()
    assert h.state("g") == "CompletingRebalance"


def test_sync_waits_for_the_leader_and_the_committed_group_record() -> None:
    h = Harness(auto_commit=False)
    a, ta = h.new_member("g")
    b, _tb = h.new_member("g")
    ta = h.join("g", a)
    h.commit_appends()
    r = h.reply(ta)
    assert isinstance(r, ev.JoinResult)
    gen = r.generation
    tsb = h.sync("g", gen, b)
    assert h.reply(tsb) is None
    tsa = h.sync("g", gen, a, ((a, b"A"), (b, b"B")))
    assert h.reply(tsa) is None and len(h.pending_appends) == 1  # not before the record is committed
    h.commit_appends()
    assert h.reply(tsa) == ev.SyncResult(E.NONE, "consumer", "range", b"A")
    assert h.reply(tsb) == ev.SyncResult(E.NONE, "consumer", "range", b"B")
    assert h.heartbeat("g", gen, a) == E.NONE
    # The committed record is Kafka's GroupMetadataKey.
    assert any(type(decode_key(k)).__name__ == "GroupKey" for k, _ in h.log)


def test_failed_group_write_sends_members_back_to_rebalance() -> None:
    h = Harness(auto_commit=False)
    a, ta = h.new_member("g")
    h.commit_appends()
    r = h.reply(ta)
    assert isinstance(r, ev.JoinResult)
    ts = h.sync("g", r.generation, a, ((a, b"A"),))
    h.commit_appends(E.NOT_LEADER_OR_FOLLOWER)
    assert h.reply(ts) == ev.SyncResult(E.NOT_COORDINATOR)
    assert h.state("g") == "PreparingRebalance"


def test_heartbeat_errors() -> None:
    h = Harness()
    gen, (a, _b) = stable_group(h)
    assert h.heartbeat("g", gen, a) == E.NONE
    assert h.heartbeat("g", gen - 1, a) == E.ILLEGAL_GENERATION
    assert h.heartbeat("g", gen, "nobody") == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("other", gen, a) == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("", gen, a) == E.INVALID_GROUP_ID


def test_session_expiry_removes_the_member_and_rebalances() -> None:
    h = Harness()
    gen, (a, b) = stable_group(h)
    for _ in range(5):  # a keeps heartbeating, b is silent
        h.advance(300)
        h.heartbeat("g", gen, a)
    assert b not in h.coord.groups["g"].members
    assert h.state("g") == "PreparingRebalance"
    t = h.join("g", a)
    r = h.reply(t)
    assert isinstance(r, ev.JoinResult) and r.generation == gen + 1 and [m for m, _, _ in r.members] == [a]


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    h = Harness()
    gen, (a, b) = stable_group(h)
    c, tc = h.new_member("g", session_ms=60_000)
    # a and b keep heartbeating (REBALANCE_IN_PROGRESS) but never rejoin.
    for _ in range(5):
        h.advance(900)
        assert h.heartbeat("g", gen, a) == E.REBALANCE_IN_PROGRESS
        h.heartbeat("g", gen, b)
    assert h.reply(tc) is None
    h.advance(600)  # past the 5 s rebalance timeout
    r = h.reply(tc)
    assert isinstance(r, ev.JoinResult) and r.error == E.NONE and r.leader == c
    assert set(h.coord.groups["g"].members) == {c}


def test_pending_member_id_expires() -> None:
    h = Harness()
    first = h.reply(h.join("g"))
    assert isinstance(first, ev.JoinResult) and first.error == E.MEMBER_ID_REQUIRED
    h.advance(1500)
    assert h.coord.groups["g"].pending_members == {}
    r = h.reply(h.join("g", first.member_id))
    assert isinstance(r, ev.JoinResult) and r.error == E.UNKNOWN_MEMBER_ID


def test_leave_group_batched_and_unknown_members() -> None:
    h = Harness()
    gen, (a, b) = stable_group(h)
    t = h.token()
    h.send(ev.LeaveGroup(t, "g", ((a, None), (b, None), ("ghost", None))))
    r = h.reply(t)
    assert isinstance(r, ev.LeaveResult)
    assert [c for _, _, c in r.members] == [E.NONE, E.NONE, E.UNKNOWN_MEMBER_ID]
    assert h.state("g") == "Empty" and h.coord.groups["g"].generation == gen + 1


def test_static_member_restart_keeps_generation_and_fences_the_old_id() -> None:
    h = Harness()
    ta = h.join("g", instance_id="i-1")
    ra = h.reply(ta)
    assert isinstance(ra, ev.JoinResult) and ra.error == E.NONE  # static members skip MEMBER_ID_REQUIRED
    ts = h.sync("g", ra.generation, ra.member_id, ((ra.member_id, b"A"),), instance_id="i-1")
    assert h.reply(ts) == ev.SyncResult(E.NONE, "consumer", "range", b"A")
    # Restart: same instance id, no member id, same protocols.
    t2 = h.join("g", instance_id="i-1")
    r2 = h.reply(t2)
    assert isinstance(r2, ev.JoinResult) and r2.error == E.NONE and r2.generation == ra.generation
    assert r2.member_id != ra.member_id and h.state("g") == "Stable"
    assert h.heartbeat("g", ra.generation, ra.member_id, "i-1") == E.FENCED_INSTANCE_ID
    assert h.heartbeat("g", ra.generation, r2.member_id, "i-1") == E.NONE
    ts2 = h.sync("g", ra.generation, r2.member_id, instance_id="i-1")
    assert h.reply(ts2) == ev.SyncResult(E.NONE, "consumer", "range", b"A")  # the assignment carried over
    t = h.token()
    h.send(ev.LeaveGroup(t, "g", ((ra.member_id, "i-1"),)))
    r = h.reply(t)
    assert isinstance(r, ev.LeaveResult) and r.members[0][2] == E.FENCED_INSTANCE_ID


def test_inconsistent_protocols_and_bad_session_timeout() -> None:
    h = Harness()
    stable_group(h, n=1)
    r = h.reply(h.join("g", protocols=(("roundrobin", b""),)))
    assert isinstance(r, ev.JoinResult) and r.error == E.INCONSISTENT_GROUP_PROTOCOL
    r = h.reply(h.join("g", protocol_type="connect"))
    assert isinstance(r, ev.JoinResult) and r.error == E.INCONSISTENT_GROUP_PROTOCOL
    r = h.reply(h.join("g2", session_ms=1))
    assert isinstance(r, ev.JoinResult) and r.error == E.INVALID_SESSION_TIMEOUT
    assert "g2" not in h.coord.groups


def test_protocol_chosen_by_vote_among_common_ones() -> None:
    h = Harness()
    both = (("range", b"r"), ("roundrobin", b"rr"))
    rr_first = (("roundrobin", b"rr"), ("range", b"r"))
    a, _ = h.new_member("g", protocols=both)
    b, _tb = h.new_member("g", protocols=rr_first)
    _c, _tc = h.new_member("g", protocols=rr_first)
    ta = h.join("g", a, protocols=both)
    h.join("g", b, protocols=rr_first)
    r = h.reply(ta)
    assert isinstance(r, ev.JoinResult) and r.protocol_name == "roundrobin"
    assert dict((m, meta) for m, _, meta in r.members)[a] == b"rr"


def test_simple_group_commit_is_visible_only_once_committed() -> None:
    h = Harness(auto_commit=False)
    t = h.commit("simple", {("t", 0): 5, ("t", 1): 7})
    assert h.reply(t) is None
    assert [o.offset for o in h.fetch("simple", (("t", 0),)).offsets] == [-1]
    h.commit_appends()
    r = h.reply(t)
    assert isinstance(r, ev.PartitionResults) and [c for *_, c in r.partitions] == [E.NONE, E.NONE]
    assert {(o.topic, o.partition): o.offset for o in h.fetch("simple").offsets} == {("t", 0): 5, ("t", 1): 7}
    assert h.state("simple") == "Empty"
    # The record is Kafka's OffsetCommitKey/Value.
    key, value = h.log[0]
    assert decode_key(key).group == "simple" and value is not None and decode_offset_value(value).offset == 5


def test_commit_failures() -> None:
    h = Harness(auto_commit=False)
    t = h.commit("s", {("t", 0): 1})
    h.commit_appends(E.NOT_LEADER_OR_FOLLOWER)
    r = h.reply(t)
    assert isinstance(r, ev.PartitionResults) and r.partitions == (("t", 0, E.NOT_COORDINATOR),)
    assert h.fetch("s").offsets == ()
    h.auto_commit = True
    t = h.commit("s", {("t", 0): 1}, metadata="x" * 5000)
    r = h.reply(t)
    assert isinstance(r, ev.PartitionResults) and r.partitions == (("t", 0, E.OFFSET_METADATA_TOO_LARGE),)
    r = h.reply(h.commit("nogroup", {("t", 0): 1}, generation=3, member_id="m"))
    assert isinstance(r, ev.PartitionResults) and r.partitions[0][2] == E.ILLEGAL_GENERATION


def test_member_commits_checked_against_generation_and_state() -> None:
    h = Harness()
    gen, (a, b) = stable_group(h)
    ok = h.reply(h.commit("g", {("t", 0): 3}, gen, a))
    assert isinstance(ok, ev.PartitionResults) and ok.partitions[0][2] == E.NONE
    stale = h.reply(h.commit("g", {("t", 0): 4}, gen - 1, a))
    assert isinstance(stale, ev.PartitionResults) and stale.partitions[0][2] == E.ILLEGAL_GENERATION
    anon = h.reply(h.commit("g", {("t", 0): 4}))
    assert isinstance(anon, ev.PartitionResults) and anon.partitions[0][2] == E.UNKNOWN_MEMBER_ID
    # During PreparingRebalance members of the current generation may still commit what they consumed.
    h.new_member("g")
    during = h.reply(h.commit("g", {("t", 0): 5}, gen, b))
    assert isinstance(during, ev.PartitionResults) and during.partitions[0][2] == E.NONE
    assert h.fetch("g").offsets[0].offset == 5


def test_delete_groups() -> None:
    h = Harness()
    stable_group(h, "busy")
    h.commit("idle", {("t", 0): 1, ("t", 1): 2})
    t = h.token()
    h.send(ev.DeleteGroups(t, ("busy", "idle", "missing")))
    r = h.reply(t)
    assert r == ev.DeleteGroupsResult((("busy", E.NON_EMPTY_GROUP), ("idle", E.NONE), ("missing", E.GROUP_ID_NOT_FOUND)))
    assert "idle" not in h.coord.groups and h.fetch("idle").offsets == ()
    tombstones = [decode_key(k) for k, v in h.log if v is None]
    assert len(tombstones) == 3  # two offsets and the group


def test_offset_delete_refuses_subscribed_topics() -> None:
    h = Harness()
    sub = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x00"  # consumer protocol v0: ["t"]
    a, ta = h.new_member("g", protocols=(("range", sub),))
    r = h.reply(ta)
    assert isinstance(r, ev.JoinResult)
    h.sync("g", r.generation, a, ((a, b""),))
    h.commit("g", {("t", 0): 1, ("u", 0): 2}, r.generation, a)
    t = h.token()
    h.send(ev.OffsetDelete(t, "g", (("t", 0), ("u", 0))))
    res = h.reply(t)
    assert res == ev.PartitionResults(E.NONE, (("t", 0, E.GROUP_SUBSCRIBED_TO_TOPIC), ("u", 0, E.NONE)))
    assert [(o.topic, o.offset) for o in h.fetch("g").offsets] == [("t", 1)]
    t = h.token()
    h.send(ev.OffsetDelete(t, "nope", (("t", 0),)))
    assert h.reply(t) == ev.PartitionResults(E.GROUP_ID_NOT_FOUND)


def test_offsets_of_an_empty_group_expire_with_the_group() -> None:
    h = Harness()
    gen, (a, b) = stable_group(h)
    h.commit("g", {("t", 0): 9}, gen, a)
    t = h.token()
    h.send(ev.LeaveGroup(t, "g", ((a, None), (b, None))))
    assert h.state("g") == "Empty"
    h.advance(30_000)
    assert h.fetch("g").offsets[0].offset == 9  # not yet: retention counts from becoming Empty
    h.advance(31_000)
    assert "g" not in h.coord.groups and h.fetch("g").offsets == ()


def test_groups_reload_from_the_log_and_unload() -> None:
    h = Harness()
    gen, (a, b) = stable_group(h)
    h.commit("g", {("t", 0): 11}, gen, a)
    h.commit("s", {("t", 1): 4})
    h.commit("s", {("t", 1): 6})
    # Another broker becomes leader of every partition and replays the committed log.
    other = Harness()
    other.coord = GroupCoordinator(CONFIG)
    for p in range(CONFIG.num_partitions):
        other.send(ev.LoadStarted(p, 1))
    assert other.fetch("g").error == E.COORDINATOR_LOAD_IN_PROGRESS
    for p in range(CONFIG.num_partitions):
        other.send(ev.LoadFinished(p, 1, tuple(r for r in h.log if _partition_of(r[0]) == p)))
    assert other.state("g") == "Stable" and set(other.coord.groups["g"].members) == {a, b}
    assert other.heartbeat("g", gen, a) == E.NONE
    assert other.fetch("g").offsets[0].offset == 11
    assert other.fetch("s").offsets[0].offset == 6
    # Unloading answers waiting requests and forgets the groups.
    pending = other.join("g", a)  # the leader rejoins: a rebalance that waits for b
    assert other.reply(pending) is None
    other.send(ev.Unloaded(other.coord.partition_of("g")))
    assert isinstance(r := other.reply(pending), ev.JoinResult) and r.error == E.NOT_COORDINATOR
    assert other.heartbeat("g", gen, a) == E.NOT_COORDINATOR


def _partition_of(key: bytes) -> int:
    return GroupCoordinator(CONFIG).partition_of(decode_key(key).group)


def test_list_and_describe() -> None:
    h = Harness()
    _gen, (a, b) = stable_group(h)
    h.commit("s", {("t", 0): 1})
    t = h.token()
    h.send(ev.ListGroups(t))
    assert h.reply(t) == ev.ListGroupsResult(E.NONE, (ev.ListedGroup("g", "consumer", "Stable"), ev.ListedGroup("s", "", "Empty")))
    t = h.token()
    h.send(ev.ListGroups(t, frozenset({"Empty"})))
    r = h.reply(t)
    assert isinstance(r, ev.ListGroupsResult) and [g.group_id for g in r.groups] == ["s"]
    t = h.token()
    h.send(ev.DescribeGroups(t, ("g", "unknown")))
    r = h.reply(t)
    assert isinstance(r, ev.DescribeGroupsResult)
    g, unknown = r.groups
    assert (g.state, g.protocol_type, g.protocol_name) == ("Stable", "consumer", "range")
    assert {m.member_id: m.assignment for m in g.members} == {a: f"a-{a}".encode(), b: f"a-{b}".encode()}
    assert (unknown.state, unknown.error) == ("Dead", E.NONE)


def test_not_coordinator_for_partitions_not_loaded() -> None:
    h = Harness()
    h.send(ev.Unloaded(h.coord.partition_of("g")))
    r = h.reply(h.join("g"))
    assert isinstance(r, ev.JoinResult) and r.error == E.NOT_COORDINATOR


def test_transition_table_refuses_other_moves() -> None:
    coord = GroupCoordinator(CONFIG)
    g = Group("g", 0)
    for target, sources in TRANSITIONS.items():
        for source in GroupState:
            g.state = source
            if source in sources:
                coord._transition(g, target, 0)
                assert g.state == target
            else:
                with pytest.raises(AssertionError):
                    coord._transition(g, target, 0)



def test_stable_group_keeps_subscribed_offsets_and_expires_the_others() -> None:
    h = Harness()
    sub = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x00"  # consumer protocol v0: ["t"]
    a, ta = h.new_member("g", protocols=(("range", sub),), session_ms=600_000)
    r = h.reply(ta)
    assert isinstance(r, ev.JoinResult)
    h.sync("g", r.generation, a, ((a, b""),))
    h.commit("g", {("t", 0): 1, ("old", 0): 2}, r.generation, a)
    for _ in range(7):
        h.advance(10_000)
        assert h.heartbeat("g", r.generation, a) == E.NONE
    assert h.state("g") == "Stable"
    assert [(o.topic, o.offset) for o in h.fetch("g").offsets] == [("t", 1)]
