"""Which changes answer a waiting fetch. Kafka's DelayedFetch completes a follower's fetch (isolation
up to the log end) on new bytes, an error or a leadership change, never on a high watermark alone
(DelayedFetch.tryComplete compares the fetch offset with the log end offset for a follower); a
consumer's fetch reads up to the high watermark, so a new one answers it."""

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


async def _woken(follower: bool, wake: str) -> bool:
    apis = _apis()
    waiting = asyncio.ensure_future(apis._wait_for_data(TOPICS, 0.3, follower))
    await asyncio.sleep(0)
    getattr(apis, wake)("orders", 1)
    result = await waiting
    assert not apis._waiters and not apis._follower_waiters  # nothing left registered
    return result


def test_a_new_high_watermark_answers_a_consumer_but_not_a_follower() -> None:
    assert asyncio.run(_woken(follower=False, wake="wake_readers")) is True
    assert asyncio.run(_woken(follower=True, wake="wake_readers")) is False  # waited its max wait out


def test_new_records_answer_both() -> None:
    assert asyncio.run(_woken(follower=False, wake="wake")) is True
    assert asyncio.run(_woken(follower=True, wake="wake")) is True


def test_a_wait_without_a_wake_ends_at_its_max_wait() -> None:
    async def run() -> bool:
        loop = asyncio.get_running_loop()
        started = loop.time()
        woken = await _apis()._wait_for_data(TOPICS, 0.05, True)
        assert loop.time() - started >= 0.05
        return woken

    assert asyncio.run(run()) is False
