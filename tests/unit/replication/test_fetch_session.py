"""KIP-227 fetch sessions: the follower's builder against the leader's cache."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.protocol.errors import ErrorCode
from headwater.replication.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    PartitionRequest,
    SessionBuilder,
    SessionCache,
    SessionPartition,
    next_epoch,
)


def pr(offset: int, max_bytes: int = 1 << 20) -> PartitionRequest:
    return PartitionRequest(offset, 3, 2, 0, max_bytes)


def test_the_first_fetch_is_full_then_only_changes_and_forgotten_partitions_travel() -> None:
    b = SessionBuilder()
    wanted = {("t", 0): pr(10), ("t", 1): pr(20), ("u", 0): pr(5)}
    sid, epoch, send, forgotten = b.next_fetch(wanted)
    assert (sid, epoch, send, forgotten) == (0, INITIAL_EPOCH, wanted, [])
    b.on_response(ErrorCode.NONE, 77, epoch, send, forgotten)
    wanted = {("t", 0): pr(12), ("t", 1): pr(20)}  # t-0 moved on, u-0 is no longer fetched
    sid, epoch, send, forgotten = b.next_fetch(wanted)
    assert (sid, epoch, send, forgotten) == (77, 1, {("t", 0): pr(12)}, [("u", 0)])
    b.on_response(ErrorCode.NONE, 77, epoch, send, forgotten)
    assert b.next_fetch(wanted) == (77, 2, {}, [])  # nothing changed: an empty incremental fetch


def test_a_leader_without_sessions_keeps_the_follower_on_full_fetches() -> None:
    b = SessionBuilder()
    wanted = {("t", 0): pr(1)}
    _, epoch, send, forgotten = b.next_fetch(wanted)
    b.on_response(ErrorCode.NONE, 0, epoch, send, forgotten)
    assert b.next_fetch(wanted) == (0, INITIAL_EPOCH, wanted, [])


def test_a_session_error_or_a_lost_connection_goes_back_to_a_full_fetch() -> None:
    for fail in ("not-found", "epoch", "reset"):
        b = SessionBuilder()
        wanted = {("t", 0): pr(1)}
        _, epoch, send, forgotten = b.next_fetch(wanted)
        b.on_response(ErrorCode.NONE, 5, epoch, send, forgotten)
        _, epoch, send, forgotten = b.next_fetch(wanted)
        if fail == "reset":
            b.reset()
        else:
            code = ErrorCode.FETCH_SESSION_ID_NOT_FOUND if fail == "not-found" else ErrorCode.INVALID_FETCH_SESSION_EPOCH
            b.on_response(code, 0, epoch, send, forgotten)
        assert b.next_fetch(wanted) == (0, INITIAL_EPOCH, wanted, [])


def test_epochs_wrap_to_one_and_never_become_initial_or_final() -> None:
    assert next_epoch(1) == 2 and next_epoch(2**31 - 1) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_the_leader_answers_only_news() -> None:
    sp = SessionPartition("t", 0, 10, 3, 2, 0, 1 << 20)
    assert sp.must_answer(0, False, False, 10, 0)           # first answer: the follower knows nothing yet
    assert not sp.must_answer(0, False, False, 10, 0)       # nothing new
    assert sp.must_answer(0, True, False, 10, 0)            # records
    assert sp.must_answer(0, False, False, 11, 0)           # the high watermark moved
    assert sp.must_answer(0, False, False, 11, 4)           # the log start moved
    assert sp.must_answer(ErrorCode.NOT_LEADER_OR_FOLLOWER, False, False, 11, 4)
    assert sp.must_answer(0, False, True, 11, 4)            # a divergence
    assert not sp.must_answer(0, False, False, 11, 4)


def test_the_cache_knows_sessions_by_id_and_replica_and_evicts_the_least_recent() -> None:
    cache = SessionCache(max_sessions=2, idle_evict_ms=1000, rng=random.Random(1))
    a = cache.create(1, now_ms=0)
    b = cache.create(2, now_ms=0)
    assert a is not None and b is not None
    assert a.id != b.id and 0 not in (a.id, b.id)
    assert cache.get(a.id, 2, now_ms=10) is None            # another replica's session
    assert cache.get(a.id, 1, now_ms=10) is a               # a is now the most recently used
    c = cache.create(3, now_ms=20)                          # full: b, the least recently used, goes
    assert c is not None
    assert cache.get(b.id, 2, now_ms=20) is None and cache.get(c.id, 3, now_ms=20) is c
    cache.create(4, now_ms=5_000)                           # a and c idle for over a second: evicted
    assert len(cache) == 1 and cache.get(a.id, 1, now_ms=5_000) is None


def test_a_replica_closes_only_its_own_sessions() -> None:
    cache = SessionCache()
    mine = cache.create(1, now_ms=0)
    assert mine is not None
    cache.remove(mine.id, 2)
    assert cache.get(mine.id, 1, now_ms=0) is mine
    cache.remove(mine.id, 1)
    assert cache.get(mine.id, 1, now_ms=0) is None


def test_partitions_that_got_records_go_to_the_back_of_the_session() -> None:
    cache = SessionCache()
    s = cache.create(1, now_ms=0)
    assert s is not None
    s.apply({("t", p): pr(0) for p in range(4)}, ())
    s.answered_with_records([("t", 0), ("t", 2)])
    assert list(s.partitions) == [("t", 1), ("t", 3), ("t", 0), ("t", 2)]


def test_no_slots_means_no_sessions() -> None:
    """``max.incremental.fetch.session.cache.slots=0``, as in Kafka: every fetch stays full."""
    assert SessionCache(max_sessions=0).create(1, now_ms=0) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from([("t", p) for p in range(6)]), st.integers(0, 4), max_size=6),
                min_size=1, max_size=25),
       st.sets(st.integers(0, 24)))
def test_the_leader_session_always_holds_what_the_follower_wants(rounds: list[dict[tuple[str, int], int]],
                                                                  failures: set[int]) -> None:
    """Random rounds of wanted partitions and offsets, with lost responses: after every answered
    fetch the leader's session holds exactly the follower's wanted partitions, at their positions."""
    cache = SessionCache()
    follower = SessionBuilder()
    for i, offsets in enumerate(rounds):
        wanted = {k: pr(v) for k, v in offsets.items()}
        sid, epoch, send, forgotten = follower.next_fetch(wanted)
        # The leader's side, as Broker._session_fetch does it.
        if epoch == INITIAL_EPOCH:
            cache.remove(sid, 1)
            created = cache.create(1, now_ms=i)
            assert created is not None
            session = created
            session.apply(send, ())
            error, answer_id = ErrorCode.NONE, session.id
        else:
            found = cache.get(sid, 1, now_ms=i)
            assert found is not None and found.epoch == epoch
            found.apply(send, forgotten)
            found.epoch = next_epoch(found.epoch)
            error, answer_id, session = ErrorCode.NONE, found.id, found
        held = {k: PartitionRequest(p.fetch_offset, p.current_leader_epoch, p.last_fetched_epoch,
                                    p.log_start_offset, p.partition_max_bytes) for k, p in session.partitions.items()}
        assert held == wanted
        if i in failures:
            follower.reset()  # the answer was lost: the follower starts over
        else:
            follower.on_response(error, answer_id, epoch, send, forgotten)


def test_the_follower_remembers_the_high_watermark_the_leader_last_answered() -> None:
    """The leader answers a session's partition again only when something changed
    (``must_answer``), so a fetcher made after the answer learns the high watermark from here."""
    b = SessionBuilder()
    wanted = {("t", 0): pr(10), ("t", 1): pr(20)}
    _, epoch, send, forgotten = b.next_fetch(wanted)
    b.on_response(ErrorCode.NONE, 77, epoch, send, forgotten)
    b.answered(("t", 0), 10)
    b.answered(("t", 1), 25)
    assert b.last_told(("t", 0)) == 10 and b.last_told(("t", 1)) == 25
    _, epoch, send, forgotten = b.next_fetch({("t", 0): pr(10)})  # t-1 forgotten: the leader drops it
    b.on_response(ErrorCode.NONE, 77, epoch, send, forgotten)
    assert b.last_told(("t", 0)) == 10 and b.last_told(("t", 1)) is None
    b.reset()
    assert b.last_told(("t", 0)) is None


def test_a_follower_without_a_session_remembers_nothing() -> None:
    b = SessionBuilder()
    _, epoch, send, forgotten = b.next_fetch({("t", 0): pr(1)})
    b.on_response(ErrorCode.NONE, 0, epoch, send, forgotten)  # the leader keeps no session
    b.answered(("t", 0), 5)
    assert b.last_told(("t", 0)) is None
