"""Which changes answer a waiting fetch. Kafka's DelayedFetch completes a follower's fetch (isolation
up to the log end) on new bytes, an error or a leadership change, never on a high watermark alone
(DelayedFetch.tryComplete compares the fetch offset with the log end offset for a follower), and
when its wait expires the log is read then (DelayedFetch.onComplete), so the follower learns the
high watermark of that moment. A consumer's fetch reads up to the high watermark, so a new one
answers it at once. A throttle's debt paid changes the answer of the throttled follower only
(headwater wakes it then rather than at the end of its wait; Kafka's leaves it to the wait), so
it answers no other follower's fetch."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

from headwater.protocol.fetch import FetchPartitionData, FetchTopicData
from headwater.server.apis.fetch import FetchApis


def _apis() -> FetchApis:
    ctx: Any = SimpleNamespace(config=SimpleNamespace(props={}))
    return FetchApis(ctx)


TOPICS = [FetchTopicData("orders", uuid.UUID(int=0), [FetchPartitionData(0), FetchPartitionData(1)])]


async def _woken(follower: bool, wake: str | None) -> tuple[bool, float]:
    """(read again?, seconds waited) of a fetch with a 0.3 s max wait, woken at once by ``wake``."""
    apis = _apis()
    loop = asyncio.get_running_loop()
    started = loop.time()
    waiting = asyncio.ensure_future(apis._wait_for_data(TOPICS, 0.3, 2 if follower else -1))
    await asyncio.sleep(0)
    if wake is not None:
        getattr(apis, wake)("orders", 1)
    result = await waiting
    assert not apis._waiters and not apis._follower_waiters and not apis._hw_moved  # nothing left behind
    assert not apis._waiting_replica
    return result, loop.time() - started


def test_a_new_high_watermark_answers_a_consumer_at_once() -> None:
    again, waited = asyncio.run(_woken(follower=False, wake="wake_readers"))
    assert again and waited < 0.2


def test_a_follower_waits_its_max_wait_out_then_reads_the_new_high_watermark() -> None:
    again, waited = asyncio.run(_woken(follower=True, wake="wake_readers"))
    assert again and waited >= 0.3


def test_new_records_answer_both_at_once() -> None:
    for follower in (False, True):
        again, waited = asyncio.run(_woken(follower=follower, wake="wake"))
        assert again and waited < 0.2


def test_a_quiet_wait_ends_at_its_max_wait_with_its_first_read() -> None:
    for follower in (False, True):
        again, waited = asyncio.run(_woken(follower=follower, wake=None))
        assert not again and waited >= 0.3


async def _two_followers_one_throttled() -> tuple[bool, float, bool, float]:
    """Followers 2 and 4 wait on the same partition; the debt of 4's throttle is paid."""
    apis = _apis()
    loop = asyncio.get_running_loop()
    started = loop.time()
    in_sync = asyncio.ensure_future(apis._wait_for_data(TOPICS, 0.3, 2))
    adding = asyncio.ensure_future(apis._wait_for_data(TOPICS, 0.3, 4))
    await asyncio.sleep(0)
    apis.wake_replica("orders", 1, 4)
    adding_again = await adding
    adding_waited = loop.time() - started
    in_sync_again = await in_sync
    in_sync_waited = loop.time() - started
    assert not apis._follower_waiters and not apis._waiting_replica
    return adding_again, adding_waited, in_sync_again, in_sync_waited


def test_a_paid_throttle_answers_the_throttled_follower_only() -> None:
    adding_again, adding_waited, in_sync_again, in_sync_waited = asyncio.run(_two_followers_one_throttled())
    assert adding_again and adding_waited < 0.2
    assert not in_sync_again and in_sync_waited >= 0.3
