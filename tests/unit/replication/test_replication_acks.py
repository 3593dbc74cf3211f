"""PendingAcks: acks=all produces complete in order when the high watermark passes them, or time out."""

from __future__ import annotations

import pytest

from headwater.protocol.errors import ErrorCode
from headwater.replication.acks import AckCompletion, PendingAcks


def test_completes_exactly_when_the_high_watermark_reaches_the_batch_end() -> None:
    acks: PendingAcks[str] = PendingAcks()
    acks.add("a", 5, 1_000)
    acks.add("b", 3, 1_000)
    acks.add("c", 9, 1_000)
    assert acks.on_high_watermark(2) == []
    assert acks.on_high_watermark(4) == [AckCompletion("b", 3, ErrorCode.NONE)]
    assert acks.on_high_watermark(8) == [AckCompletion("a", 5, ErrorCode.NONE)]
    assert len(acks) == 1 and "c" in acks
    done = acks.on_high_watermark(9, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    assert done == [AckCompletion("c", 9, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)]
    assert len(acks) == 0
    acks.validate_state()


def test_expires_with_request_timed_out_at_the_deadline() -> None:
    acks: PendingAcks[int] = PendingAcks()
    acks.add(1, 10, 500)
    acks.add(2, 20, 300)
    assert acks.next_deadline_ms == 300
    assert acks.expire(299) == []
    assert acks.expire(300) == [AckCompletion(2, 20, ErrorCode.REQUEST_TIMED_OUT)]
    assert acks.next_deadline_ms == 500
    assert acks.on_high_watermark(30) == [AckCompletion(1, 10, ErrorCode.NONE)]
    assert acks.expire(10_000) == [] and acks.next_deadline_ms is None


def test_each_key_completes_once_even_when_reused() -> None:
    acks: PendingAcks[str] = PendingAcks()
    acks.add("k", 10, 100)
    with pytest.raises(ValueError):
        acks.add("k", 11, 100)
    assert acks.expire(100) == [AckCompletion("k", 10, ErrorCode.REQUEST_TIMED_OUT)]
    acks.add("k", 50, 1_000)
    # The old entries of "k" in the offset heap must not complete the new one.
    assert acks.on_high_watermark(20) == []
    assert acks.expire(500) == []
    acks.validate_state()
    assert acks.fail_all(ErrorCode.NOT_LEADER_OR_FOLLOWER) == [
        AckCompletion("k", 50, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    ]
    assert len(acks) == 0 and acks.on_high_watermark(100) == []
