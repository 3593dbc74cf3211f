"""Transactional offset commits in the sans-IO group coordinator (txn_offsets.py): TxnOffsetCommit,
the markers that commit or abort it, require_stable, and loading logs with transactions.

The expected answers are Kafka 3.9's; each test names the method whose rule it checks. One offsets
partition, so the harness's log is that partition's log.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from group_harness import CONFIG, Harness

from headwater.coordinator import events as ev
from headwater.coordinator.records import (
    GroupKey,
    OffsetKey,
    OffsetValue,
    encode_group_key,
    encode_offset_key,
    encode_offset_value,
)
from headwater.protocol.errors import ErrorCode

E = ErrorCode
ONE = replace(CONFIG, num_partitions=1)
T0, T1 = ("t", 0), ("t", 1)


def committed(h: Harness, group: str) -> dict[tuple[str, int], int]:
    return {(o.topic, o.partition): o.offset for o in h.fetch(group).offsets}


def codes(h: Harness, token: int) -> list[ErrorCode]:
    r = h.reply(token)
    assert isinstance(r, ev.PartitionResults), r
    return [c for _, _, c in r.partitions]


def stable(h: Harness, group: str = "g") -> tuple[int, str]:
    """One dynamic member through a whole rebalance: (generation, member id)."""
    first = h.reply(h.join(group))
    assert isinstance(first, ev.JoinResult) and first.error == E.MEMBER_ID_REQUIRED
    joined = h.reply(h.join(group, first.member_id))
    assert isinstance(joined, ev.JoinResult) and joined.error == E.NONE
    synced = h.reply(h.sync(group, joined.generation, joined.member_id, ((joined.member_id, b"a"),)))
    assert isinstance(synced, ev.SyncResult) and synced.error == E.NONE
    return joined.generation, joined.member_id


def offset_record(group: str, tp: tuple[str, int], offset: int) -> tuple[bytes, bytes]:
    return (encode_offset_key(OffsetKey(group, *tp)), encode_offset_value(OffsetValue(offset, -1, "", 1000)))


def txn_record(producer: int, group: str, tp: tuple[str, int], offset: int) -> ev.LoadedTxnRecord:
    return ev.LoadedTxnRecord(producer, *offset_record(group, tp, offset))


def load(h: Harness, records: list[ev.LoadedRecord], epoch: int = 1) -> None:
    h.send(ev.Unloaded(0))
    h.send(ev.LoadStarted(0, epoch))
    h.send(ev.LoadFinished(0, epoch, tuple(records)))


# --- TxnOffsetCommit and its markers --------------------------------------------------------------------


def test_offsets_are_pending_until_the_commit_marker() -> None:
    """GroupMetadata.prepareTxnOffsetCommit / completePendingTxnOffsetCommit: invisible until COMMIT."""
    h = Harness(config=ONE, auto_commit=False)
    t = h.txn_commit("g", {T0: 5, T1: 6}, producer_id=7, epoch=3)
    (append,) = h.pending_appends
    # One transactional batch of the producer (GroupMetadataManager.storeOffsets).
    assert (append.transactional, append.producer_id, append.producer_epoch, len(append.records)) == (True, 7, 3, 2)
    assert h.reply(t) is None  # answered once written
    h.commit_appends()
    assert codes(h, t) == [E.NONE, E.NONE]
    assert h.state("g") == "Empty"  # an unknown group is created for it (GroupCoordinator.handleTxnCommitOffsets)
    assert committed(h, "g") == {}
    assert h.fetch("g", (T0, T1)).offsets[0].offset == -1
    h.marker(0, 7, commit=True)
    assert committed(h, "g") == {T0: 5, T1: 6}


def test_abort_drops_them_and_the_group_made_for_them() -> None:
    h = Harness(config=ONE)
    t = h.txn_commit("g", {T0: 5})
    assert codes(h, t) == [E.NONE]
    h.marker(0, 7, commit=False)
    assert committed(h, "g") == {}
    assert "g" not in h.coord.groups  # no offsets of either kind, never a generation: nothing left of it


def test_a_marker_completes_only_its_producer_in_its_partition() -> None:
    """GroupMetadataManager.handleTxnCompletion: the producer's groups of the completed partitions."""
    h = Harness(config=CONFIG)  # three partitions
    group = "g"
    partition = h.coord.partition_of(group)
    h.txn_commit(group, {T0: 5}, producer_id=7)
    h.txn_commit(group, {T1: 9}, producer_id=8)
    h.send(ev.TxnCompleted((partition + 1) % CONFIG.num_partitions, 7, True))
    h.send(ev.TxnCompleted(partition, 99, True))
    assert committed(h, group) == {}
    h.send(ev.TxnCompleted(partition, 7, True))
    assert committed(h, group) == {T0: 5}
    h.send(ev.TxnCompleted(partition, 8, True))
    assert committed(h, group) == {T0: 5, T1: 9}


def test_one_marker_completes_every_group_of_the_producer() -> None:
    h = Harness(config=ONE)
    h.txn_commit("a", {T0: 1})
    h.txn_commit("b", {T0: 2})
    h.marker(0, 7, commit=True)
    assert (committed(h, "a"), committed(h, "b")) == ({T0: 1}, {T0: 2})


def test_a_later_plain_commit_wins_over_the_transaction() -> None:
    """GroupMetadata.completePendingTxnOffsetCommit keeps the later record of the log (olderThan)."""
    h = Harness(config=ONE)
    h.commit("g", {T0: 1, T1: 1})
    h.txn_commit("g", {T0: 5, T1: 5})
    h.commit("g", {T1: 2})  # written after the transactional record
    assert committed(h, "g") == {T0: 1, T1: 2}
    h.marker(0, 7, commit=True)
    assert committed(h, "g") == {T0: 5, T1: 2}
    # And the log read back agrees.
    load(h, list(h.log))
    assert committed(h, "g") == {T0: 5, T1: 2}


def test_a_plain_commit_written_after_the_marker_arrives_is_not_undone() -> None:
    """GroupMetadata.onOffsetCommitAppend: a plain commit in flight when the marker lands is later in the log."""
    h = Harness(config=ONE, auto_commit=False)
    h.txn_commit("g", {T0: 5})
    h.commit_appends()
    t = h.commit("g", {T0: 8})  # appended (after the transactional batch), not yet acknowledged
    h.send(ev.TxnCompleted(0, 7, True))
    assert committed(h, "g") == {T0: 5}
    h.commit_appends()
    assert codes(h, t) == [E.NONE]
    assert committed(h, "g") == {T0: 8}


def test_a_later_commit_of_the_same_producer_replaces_its_pending_offset() -> None:
    h = Harness(config=ONE)
    h.txn_commit("g", {T0: 5})
    h.txn_commit("g", {T0: 6})
    h.marker(0, 7, commit=True)
    assert committed(h, "g") == {T0: 6}


def test_a_failed_write_drops_the_pending_offsets() -> None:
    """GroupMetadataManager.createPutCacheCallback -> failPendingTxnOffsetCommit, and the error mapping."""
    h = Harness(config=ONE, auto_commit=False)
    h.commit("g", {T1: 1})
    h.commit_appends()
    t = h.txn_commit("g", {T0: 5})
    h.commit_appends(E.NOT_LEADER_OR_FOLLOWER)
    assert codes(h, t) == [E.NOT_COORDINATOR]
    assert h.coord.groups["g"].txn_offsets == {}
    assert h.fetch("g", (T0,), require_stable=True).offsets[0].error == E.NONE
    h.send(ev.TxnCompleted(0, 7, True))
    assert committed(h, "g") == {T1: 1}


def test_a_failed_replacement_drops_the_partition() -> None:
    """GroupMetadata.failPendingTxnOffsetCommit removes the partition's pending offset, even the one an
    earlier, written commit of the same transaction left: a reload would find that one in the log. A
    producer whose TxnOffsetCommit failed retries it or aborts, so the two agree again by its marker."""
    h = Harness(config=ONE, auto_commit=False)
    h.txn_commit("g", {T0: 5})
    h.commit_appends()
    t = h.txn_commit("g", {T0: 6})
    h.commit_appends(E.NOT_LEADER_OR_FOLLOWER)
    assert codes(h, t) == [E.NOT_COORDINATOR]
    assert "g" not in h.coord.groups
    load(h, list(h.log))
    assert h.coord.groups["g"].txn_offsets == {7: {T0: h.coord.groups["g"].txn_offsets[7][T0]}}
    assert h.coord.groups["g"].txn_offsets[7][T0].offset == 5


def test_metadata_too_large_is_per_partition() -> None:
    h = Harness(config=replace(ONE, offset_metadata_max_bytes=3))
    t = h.token()
    h.send(ev.TxnOffsetCommit(t, "g", 7, 0, -1, "", None, (ev.CommittedOffset("t", 0, 5, -1, "toolong"),
                                                           ev.CommittedOffset("t", 1, 6, -1, "ok"))))
    assert codes(h, t) == [E.OFFSET_METADATA_TOO_LARGE, E.NONE]
    h.marker(0, 7, commit=True)
    assert committed(h, "g") == {T1: 6}


# --- membership ----------------------------------------------------------------------------------------------


def test_membership_is_checked_only_when_named() -> None:
    """GroupCoordinator.validateOffsetCommit(isTransactional = true)."""
    h = Harness(config=ONE)
    generation, member = stable(h)
    # No generation, member or instance (TxnOffsetCommit v0-v2): accepted even by a Stable group.
    assert codes(h, h.txn_commit("g", {T0: 1})) == [E.NONE]
    assert codes(h, h.txn_commit("g", {T0: 2}, generation=generation, member_id=member)) == [E.NONE]
    assert codes(h, h.txn_commit("g", {T0: 3}, generation=generation + 1, member_id=member)) == [E.ILLEGAL_GENERATION]
    assert codes(h, h.txn_commit("g", {T0: 3}, generation=generation, member_id="ghost")) == [E.UNKNOWN_MEMBER_ID]
    # A member id with generation -1 names a member too: it must be current, and -1 is no generation.
    assert codes(h, h.txn_commit("g", {T0: 3}, member_id=member)) == [E.ILLEGAL_GENERATION]
    assert codes(h, h.txn_commit("g", {T0: 3}, generation=generation, member_id=member,
                                 instance_id="unknown")) == [E.UNKNOWN_MEMBER_ID]
    h.marker(0, 7, commit=True)
    assert committed(h, "g") == {T0: 2}


def test_static_member_fenced() -> None:
    h = Harness(config=ONE)
    first = h.reply(h.join("g", instance_id="i1"))
    assert isinstance(first, ev.JoinResult) and first.error == E.NONE
    assert codes(h, h.txn_commit("g", {T0: 1}, generation=first.generation, member_id="old",
                                 instance_id="i1")) == [E.FENCED_INSTANCE_ID]


def test_a_rebalance_in_progress_is_no_refusal() -> None:
    """Unlike OffsetCommit (REBALANCE_IN_PROGRESS), a transactional commit is not refused in CompletingRebalance."""
    h = Harness(config=ONE)
    generation, member = stable(h)
    h.join("g", member)  # the leader rejoins: a new generation, awaiting its SyncGroup
    assert h.state("g") == "CompletingRebalance"
    r = h.reply(h.commit("g", {T0: 1}, generation + 1, member))
    assert isinstance(r, ev.PartitionResults) and r.partitions[0][2] == E.REBALANCE_IN_PROGRESS
    assert codes(h, h.txn_commit("g", {T0: 1}, generation=generation + 1, member_id=member)) == [E.NONE]


def test_an_unknown_group_with_a_generation_is_refused_and_not_kept() -> None:
    h = Harness(config=ONE)
    assert codes(h, h.txn_commit("new", {T0: 1}, generation=3, member_id="m")) == [E.UNKNOWN_MEMBER_ID]
    assert "new" not in h.coord.groups


def test_coordinator_errors() -> None:
    h = Harness(config=ONE)
    assert codes(h, h.txn_commit("", {T0: 1})) == [E.INVALID_GROUP_ID]
    h.send(ev.Unloaded(0))
    assert codes(h, h.txn_commit("g", {T0: 1})) == [E.NOT_COORDINATOR]
    h.send(ev.LoadStarted(0, 1))
    assert codes(h, h.txn_commit("g", {T0: 1})) == [E.COORDINATOR_LOAD_IN_PROGRESS]


# --- OffsetFetch require_stable ---------------------------------------------------------------------------------


def test_require_stable_marks_pending_partitions_unstable() -> None:
    """GroupMetadataManager.getOffsets: UNSTABLE_OFFSET_COMMIT per partition, the group's error NONE."""
    h = Harness(config=ONE)
    h.commit("g", {T0: 1, T1: 1})
    h.txn_commit("g", {T0: 5})
    r = h.fetch("g", (T0, T1, ("u", 0)), require_stable=True)
    assert r.error == E.NONE
    assert [(o.partition if o.topic == "t" else -9, o.offset, o.error) for o in r.offsets] == [
        (0, -1, E.UNSTABLE_OFFSET_COMMIT), (1, 1, E.NONE), (-9, -1, E.NONE)]
    # All partitions: the committed ones, the pending one flagged.
    assert [(o.partition, o.error) for o in h.fetch("g", None, require_stable=True).offsets] == [
        (0, E.UNSTABLE_OFFSET_COMMIT), (1, E.NONE)]
    # Without require_stable the last committed offset is shown.
    assert committed(h, "g") == {T0: 1, T1: 1}
    h.marker(0, 7, commit=False)
    assert [o.error for o in h.fetch("g", (T0,), require_stable=True).offsets] == [E.NONE]


def test_require_stable_sees_a_plain_commit_being_written() -> None:
    """GroupMetadata.hasPendingOffsetCommitsForTopicPartition counts plain commits in flight too."""
    h = Harness(config=ONE, auto_commit=False)
    h.commit("g", {T0: 4})
    assert [o.error for o in h.fetch("g", (T0, T1), require_stable=True).offsets] == [E.UNSTABLE_OFFSET_COMMIT, E.NONE]
    h.commit_appends()
    assert [o.offset for o in h.fetch("g", (T0,), require_stable=True).offsets] == [4]


# --- OffsetDelete, expiry --------------------------------------------------------------------------------------


def test_offset_delete_drops_pending_transactional_offsets() -> None:
    """GroupMetadata.removeOffsets removes the partition from every producer's pending offsets."""
    h = Harness(config=ONE)
    h.commit("g", {T0: 1})
    h.txn_commit("g", {T0: 5, T1: 6})
    t = h.token()
    h.send(ev.OffsetDelete(t, "g", (T0,)))
    h.marker(0, 7, commit=True)
    assert committed(h, "g") == {T1: 6}


def test_expiry_keeps_a_group_with_pending_offsets() -> None:
    """GroupMetadata.hasOffsets counts pending transactional offsets: the group is not removed."""
    h = Harness(config=ONE)
    h.commit("g", {T0: 1})
    h.txn_commit("g", {T1: 6})
    h.advance(ONE.offsets_retention_ms + ONE.offsets_retention_check_interval_ms)
    assert committed(h, "g") == {}  # the committed offset expired
    assert h.state("g") == "Empty"
    assert not any(isinstance(r, tuple) and r[0] == encode_group_key(GroupKey("g")) for r in h.log)
    h.marker(0, 7, commit=True)
    assert committed(h, "g") == {T1: 6}


# --- loading ---------------------------------------------------------------------------------------------------


def test_load_with_interleaved_transactions_and_markers() -> None:
    """GroupMetadataManager.doLoadGroupsAndOffsets: pending per producer until its control batch."""
    h = Harness(config=ONE)
    records: list[ev.LoadedRecord] = [
        offset_record("g", T0, 1),
        txn_record(7, "g", T0, 5),
        offset_record("g", T1, 3),
        txn_record(8, "g", T1, 9),
        txn_record(10, "g", ("u", 0), 11),
        offset_record("g", T0, 2),       # later than producer 7's record: it stays
        ev.LoadedTxnMarker(7, True),
        ev.LoadedTxnMarker(8, False),    # aborted: t-1 keeps 3
        ev.LoadedTxnMarker(10, True),    # u-0 had no committed offset: 11
        txn_record(9, "h", T0, 4),       # no marker yet: pending in a group with no other record
        txn_record(11, "g", T1, 20),
        ev.LoadedTxnRecord(11, encode_offset_key(OffsetKey("g", "t", 1)), None),  # its own tombstone
        ev.LoadedTxnMarker(11, True),
        ev.LoadedTxnMarker(12, True),    # a marker with nothing pending
    ]
    load(h, records)
    assert committed(h, "g") == {T0: 2, T1: 3, ("u", 0): 11}
    assert h.state("h") == "Empty" and committed(h, "h") == {}
    assert [o.error for o in h.fetch("h", (T0,), require_stable=True).offsets] == [E.UNSTABLE_OFFSET_COMMIT]
    h.send(ev.TxnCompleted(0, 9, True))
    assert committed(h, "h") == {T0: 4}


def test_a_transaction_committed_in_the_log_wins_over_an_earlier_plain_commit() -> None:
    h = Harness(config=ONE)
    load(h, [txn_record(7, "g", T0, 5), offset_record("g", T0, 9), offset_record("g", T1, 1),
             txn_record(7, "g", T1, 6), ev.LoadedTxnMarker(7, True)])
    assert committed(h, "g") == {T0: 9, T1: 6}


def test_pending_offsets_survive_a_reload_and_complete_after_it() -> None:
    h = Harness(config=ONE)
    h.commit("g", {T0: 1})
    h.txn_commit("g", {T0: 5, T1: 6}, producer_id=7)
    h.txn_commit("g", {T1: 8}, producer_id=8)
    load(h, list(h.log))
    assert committed(h, "g") == {T0: 1}
    h.marker(0, 8, commit=False)
    h.marker(0, 7, commit=True)
    assert committed(h, "g") == {T0: 5, T1: 6}
    load(h, list(h.log), epoch=2)
    assert committed(h, "g") == {T0: 5, T1: 6} and h.coord.groups["g"].txn_offsets == {}


def test_a_marker_reported_while_loading_applies_after_the_load() -> None:
    """Kafka runs handleTxnCompletion on the scheduler thread that loads: after the load."""
    h = Harness(config=ONE)
    h.send(ev.Unloaded(0))
    h.send(ev.LoadStarted(0, 1))
    h.send(ev.TxnCompleted(0, 7, True))  # the marker landed past the end the load reads to
    h.send(ev.LoadFinished(0, 1, (txn_record(7, "g", T0, 5),)))
    assert committed(h, "g") == {T0: 5}


def test_a_marker_for_a_partition_not_led_here_is_ignored() -> None:
    h = Harness(config=ONE)
    h.txn_commit("g", {T0: 5})
    h.send(ev.Unloaded(0))
    h.send(ev.TxnCompleted(0, 7, True))
    assert h.coord.txn_deferred == {} and h.coord.txn_groups == {}
    load(h, list(h.log))  # the log has no marker: still pending
    assert committed(h, "g") == {}
    assert h.coord.groups["g"].txn_offsets[7]


# --- the live state is what the log says ----------------------------------------------------------------------


def _view(h: Harness) -> dict[str, tuple[dict[tuple[str, int], int], dict[int, dict[tuple[str, int], int]]]]:
    """Per group with any offset: (committed offsets, pending offsets per producer)."""
    out = {}
    for gid, g in h.coord.groups.items():
        pending = {pid: {tp: e.offset for tp, e in offs.items()} for pid, offs in g.txn_offsets.items() if offs}
        if g.offsets or pending:
            out[gid] = ({tp: e.offset for tp, e in g.offsets.items()}, pending)
    return out


@pytest.mark.parametrize("seed", range(40))
def test_random_runs_agree_with_a_reload(seed: int) -> None:
    """Plain and transactional commits of three producers, markers, failed writes: reading the log back
    gives the state the coordinator had (markers are reported once the batches before them are written,
    as on a real leader, where a producer's batch is in the log before its marker)."""
    rng = random.Random(seed)
    h = Harness(config=ONE, auto_commit=False)
    epoch = 1
    for step in range(120):
        action = rng.random()
        group, tp = rng.choice(("a", "b")), rng.choice((T0, T1))
        if action < 0.3:
            h.commit(group, {tp: step})
        elif action < 0.6:
            producer = rng.choice((7, 8, 9))
            g = h.coord.groups.get(group)
            if g is None or tp not in g.txn_offsets.get(producer, {}):
                # (not replacing one pending: see test_a_failed_replacement_drops_the_partition)
                h.txn_commit(group, {tp: step}, producer_id=producer)
        elif action < 0.75:
            h.commit_appends(E.NONE if rng.random() < 0.8 else E.NOT_LEADER_OR_FOLLOWER)
        elif action < 0.93:
            h.commit_appends()
            h.marker(0, rng.choice((7, 8, 9)), commit=rng.random() < 0.6)
        else:
            h.commit_appends()
            before = _view(h)
            epoch += 1
            load(h, list(h.log), epoch)
            assert _view(h) == before, f"seed {seed} step {step}"
    h.commit_appends()
    before = _view(h)
    load(h, list(h.log), epoch + 1)
    assert _view(h) == before, f"seed {seed}"


def test_a_group_deleted_with_pending_offsets() -> None:
    """DeleteGroups of an Empty group with a transaction open: the marker finds nothing to show."""
    h = Harness(config=ONE, auto_commit=False)
    h.txn_commit("g", {T0: 5})
    h.commit_appends()
    t = h.token()
    h.send(ev.DeleteGroups(t, ("g",)))
    assert h.state("g") == "Dead"  # its tombstones are being written
    h.send(ev.TxnCompleted(0, 7, True))
    h.commit_appends()
    r = h.reply(t)
    assert isinstance(r, ev.DeleteGroupsResult) and r.results == (("g", E.NONE),)
    assert "g" not in h.coord.groups and committed(h, "g") == {}
