"""KIP-599 token bucket and quota resolution, with a fake clock (milliseconds)."""

from __future__ import annotations

import pytest

from headwater.controller.quota import (
    ABSENT,
    DEFAULT_ENTITY,
    MAX_THROTTLE_MS,
    MutationQuotas,
    RequestQuota,
    TokenBucket,
    parse_rate,
    resolve,
)


def test_bucket_starts_full_with_burst() -> None:
    b = TokenBucket.full(rate=5, windows=11, window_seconds=1)
    assert (b.burst, b.tokens) == (55, 55)
    assert not b.exceeded(0)


def test_tokens_go_negative_and_throttle_is_the_debt_over_the_rate() -> None:
    b = TokenBucket.full(rate=10, windows=2, window_seconds=1)  # burst 20
    b.record(50, now_ms=1000)
    assert b.tokens == -30
    assert b.exceeded(1000)
    assert b.throttle_ms(1000) == 3000
    # 1.25 s later 12.5 tokens came back: -17.5 left, 1750 ms to wait.
    assert b.throttle_ms(2250) == 1750
    assert b.exceeded(3999)
    assert not b.exceeded(4000)  # back to exactly 0: not below zero
    assert b.throttle_ms(4000) == 0


def test_refill_is_capped_at_burst() -> None:
    b = TokenBucket.full(rate=1, windows=11, window_seconds=1)
    b.record(5, now_ms=0)
    assert b.tokens == 6
    b.refill(100_000)
    assert b.tokens == 11


def test_throttle_rounds_to_the_millisecond() -> None:
    b = TokenBucket.full(rate=3, windows=1, window_seconds=1)  # burst 3
    b.record(4, now_ms=0)  # -1 token at 3/s = 333.33 ms
    assert b.throttle_ms(0) == 333
    b.record(1, now_ms=0)  # -2 tokens = 666.67 ms
    assert b.throttle_ms(0) == 667


def test_zero_rate_throttles_to_the_wire_maximum() -> None:
    b = TokenBucket.full(rate=0, windows=11, window_seconds=1)
    b.record(1, now_ms=0)
    assert b.throttle_ms(0) == MAX_THROTTLE_MS


RESOLUTION = [
    (("alice", "app"), "user+client"),
    (("alice", DEFAULT_ENTITY), "user+default client"),
    (("alice", ABSENT), "user"),
    ((DEFAULT_ENTITY, "app"), "default user+client"),
    ((DEFAULT_ENTITY, DEFAULT_ENTITY), "default user+default client"),
    ((DEFAULT_ENTITY, ABSENT), "default user"),
    ((ABSENT, "app"), "client"),
    ((ABSENT, DEFAULT_ENTITY), "default client"),
]


@pytest.mark.parametrize("winner", range(len(RESOLUTION)))
def test_resolution_order(winner: int) -> None:
    # Configure the winner and everything less specific: the winner must be chosen.
    quotas = {entity: float(i + 1) for i, (entity, _name) in enumerate(RESOLUTION) if i >= winner}
    entity, rate = resolve(quotas, "alice", "app")  # type: ignore[misc]
    assert entity == RESOLUTION[winner][0], RESOLUTION[winner][1]
    assert rate == winner + 1


def test_no_quota_is_unbounded() -> None:
    q = MutationQuotas()
    rq = RequestQuota(q, "alice", "app", strict=True, now_ms=0)
    assert all(rq.try_consume(1000) for _ in range(100))
    assert rq.throttle_ms == 0
    q.configure({("bob", ABSENT): 1.0})
    assert RequestQuota(q, "alice", "app", strict=True, now_ms=0).bucket is None


def test_strict_refuses_topics_once_below_zero_and_others_go_on() -> None:
    q = MutationQuotas(windows=2, window_seconds=1)
    q.configure({(ABSENT, "app"): 5.0})  # burst 10
    rq = RequestQuota(q, "", "app", strict=True, now_ms=0)
    assert rq.try_consume(8)  # 2 left
    assert rq.try_consume(6)  # admitted whole: -4
    assert not rq.try_consume(1)  # refused, nothing recorded
    assert rq.try_consume(0)  # a topic that mutates nothing is never refused
    assert rq.throttle_ms == 800
    # Another client id shares nothing with this one.
    assert RequestQuota(q, "", "other", strict=True, now_ms=0).bucket is None


def test_strict_reports_no_throttle_without_a_refusal() -> None:
    q = MutationQuotas(windows=1, window_seconds=1)
    q.configure({(ABSENT, DEFAULT_ENTITY): 2.0})
    rq = RequestQuota(q, "", "any", strict=True, now_ms=0)
    assert rq.try_consume(5)
    assert rq.throttle_ms == 0


def test_permissive_accepts_and_throttles() -> None:
    q = MutationQuotas(windows=1, window_seconds=1)
    q.configure({(DEFAULT_ENTITY, ABSENT): 2.0})  # burst 2
    rq = RequestQuota(q, "carol", "x", strict=False, now_ms=0)
    assert rq.try_consume(3) and rq.try_consume(3)
    assert rq.throttle_ms == 2000  # -4 tokens at 2/s


def test_reconfigure_keeps_debt_and_drops_removed_buckets() -> None:
    q = MutationQuotas(windows=1, window_seconds=1)
    q.configure({(ABSENT, "a"): 10.0})
    RequestQuota(q, "", "a", strict=False, now_ms=0).try_consume(15)
    q.configure({(ABSENT, "a"): 5.0})
    assert q.remaining_tokens(0)[(ABSENT, "a")] == -5
    q.configure({})
    assert q.remaining_tokens(0) == {}


@pytest.mark.parametrize("bad", ["-1", "abc", "nan", "inf", None])
def test_bad_rates(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_rate(bad)  # type: ignore[arg-type]


def test_good_rate() -> None:
    assert parse_rate("2.5") == 2.5


def test_parse_entity() -> None:
    from headwater.controller.quota import parse_entity

    assert parse_entity([("user", "alice"), ("client-id", None)]) == ("alice", DEFAULT_ENTITY)
    assert parse_entity([("client-id", "app")]) == (ABSENT, "app")
    for bad in ([], [("ip", "1.2.3.4")], [("user", "a"), ("user", "b")], [("user", "")]):
        with pytest.raises(ValueError):
            parse_entity(bad)  # type: ignore[arg-type]


def test_entity_matches_filters() -> None:
    from headwater.controller.quota import MATCH_ANY, MATCH_DEFAULT, MATCH_EXACT, entity_matches

    assert entity_matches(("alice", "app"), [("user", MATCH_EXACT, "alice")], strict=False)
    assert not entity_matches(("alice", "app"), [("user", MATCH_EXACT, "alice")], strict=True)
    assert entity_matches((DEFAULT_ENTITY, ABSENT), [("user", MATCH_DEFAULT, None)], strict=True)
    assert not entity_matches(("alice", ABSENT), [("user", MATCH_DEFAULT, None)], strict=True)
    assert entity_matches(("bob", ABSENT), [("user", MATCH_ANY, None)], strict=True)
    assert not entity_matches((ABSENT, "app"), [("user", MATCH_ANY, None)], strict=False)


def test_apply_ops() -> None:
    from headwater.controller.quota import QUOTA_KEY, apply_ops

    assert apply_ops({}, [(QUOTA_KEY, 5.0, False)]) == {QUOTA_KEY: 5.0}
    assert apply_ops({QUOTA_KEY: 5.0}, [(QUOTA_KEY, 0.0, True)]) == {}
    for ops in ([("producer_byte_rate", 1.0, False)], [(QUOTA_KEY, -1.0, False)], [(QUOTA_KEY, 1.0, False)] * 2):
        with pytest.raises(ValueError):
            apply_ops({}, ops)


@pytest.mark.parametrize(
    ("entity", "path"),
    [
        (("alice", ABSENT), "users/alice"),
        (("a/b c", "app"), "users/a%2Fb%20c/clients/app"),
        ((DEFAULT_ENTITY, DEFAULT_ENTITY), "users/<default>/clients/<default>"),
        ((ABSENT, DEFAULT_ENTITY), "clients/<default>"),
    ],
)
def test_entity_paths(entity: tuple[str | None, str | None], path: str) -> None:
    from headwater.controller.quota import entity_path, parse_entity_path

    assert entity_path(entity) == path
    assert parse_entity_path(path) == entity


def test_an_older_overlapping_request_does_not_move_the_clock_back() -> None:
    q = MutationQuotas(windows=1, window_seconds=1)
    q.configure({(ABSENT, "c"): 10.0})
    RequestQuota(q, "ANONYMOUS", "c", True, 0).try_consume(10)  # 10 -> 0
    slow = RequestQuota(q, "ANONYMOUS", "c", True, 500)  # arrived at 500 ms, answered later
    RequestQuota(q, "ANONYMOUS", "c", True, 1000).try_consume(5)  # +10 (capped at burst) -> 5
    slow.try_consume(0.0001)  # -> 4.9999, and the clock stays at 1000
    RequestQuota(q, "ANONYMOUS", "c", True, 1000).try_consume(5)  # no time passed: -> -0.0001
    found = q.bucket_for("ANONYMOUS", "c")
    assert found is not None
    assert found[1].tokens == pytest.approx(-0.0001)
