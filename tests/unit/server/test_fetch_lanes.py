"""A replica a reassignment adds fetches on a connection of its own, apart from the in-sync ones.

A copy's answers are up to a megabyte each; a produce with acks=all waits for the in-sync
followers' next fetch. Sharing one fetch, every produce's replication waited for the copy's answer
in flight and its append (issue #26). Here a follower's fetch loops run against a fake channel
that records which connection (channel purpose) each Fetch went out on and what it named, then
fails it, so the loops back off and fetch again.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from headwater.protocol.apis import API_SPECS, ApiKey
from headwater.protocol.errors import ErrorCode
from headwater.protocol.strict import decode_body
from headwater.replication.partition import LeaderAndIsrState
from headwater.server.channel import ChannelError
from headwater.server.replica_fetcher import ADDING_LANE, FOLLOW_LANE
from headwater.server.replica_manager import ReplicaManager
from headwater.storage.config import LogConfig
from headwater.storage.manager import LogManager


class _Recorder:
    """Channels that never answer: each Fetch is recorded as (purpose, partitions named), then fails."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, frozenset[tuple[str, int]]]] = []
        self.changed = asyncio.Event()

    def channel(self, _broker_id: int, purpose: str) -> Any:
        recorder = self

        class _Channel:
            async def request(self, req: Any, version: int, timeout_s: float = 30.0, decode: Any = None) -> Any:
                body = decode_body(API_SPECS[ApiKey.FETCH].request, version, memoryview(req.body))
                named = frozenset((t.topic, p.partition) for t in body.topics for p in t.partitions)
                recorder.sent.append((purpose, named))
                recorder.changed.set()
                await asyncio.sleep(0.01)
                raise ChannelError("no answer here")

        return _Channel()

    async def wait_for(self, purpose: str, partitions: set[tuple[str, int]]) -> None:
        while not any(p == purpose and partitions <= named for p, named in self.sent):
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), 5)


def _follower(root: Path, recorder: _Recorder) -> ReplicaManager:
    logs = LogManager([root / "b3"], LogConfig(), clock_ms=lambda: 1_000_000)
    logs.load()
    manager = ReplicaManager(3, logs, replica_lag_time_max_ms=30_000, replica_fetch_backoff_ms=20,
                             wake=lambda _t, _p: None, broker_address=lambda _b: ("127.0.0.1", 1),
                             controller_id=lambda: 9, broker_epoch=lambda: 1)
    manager.fetchers._channel = recorder.channel
    return manager


def _become(manager: ReplicaManager, topic: str, state: LeaderAndIsrState) -> None:
    assert manager.become(topic, 0, state, topic_id=uuid.UUID(int=len(topic)), config=LogConfig(),
                          min_insync_replicas=1, max_message_bytes=1 << 20) == ErrorCode.NONE


def test_a_replica_being_added_fetches_apart_until_its_reassignment_ends(tmp_path: Path) -> None:
    async def scenario() -> None:
        recorder = _Recorder()
        manager = _follower(tmp_path, recorder)
        try:
            # "load": this broker follows broker 1, in sync. "big": a reassignment adds this broker.
            _become(manager, "load", LeaderAndIsrState(1, 0, (1, 2, 3), 0, (1, 2, 3)))
            _become(manager, "big", LeaderAndIsrState(1, 0, (1, 2), 0, (1, 2, 3), adding_replicas=(3,)))
            await recorder.wait_for(FOLLOW_LANE, {("load", 0)})
            await recorder.wait_for(ADDING_LANE, {("big", 0)})
            assert ADDING_LANE != FOLLOW_LANE
            for purpose, named in recorder.sent:
                assert named == ({("big", 0)} if purpose == ADDING_LANE else {("load", 0)}), recorder.sent

            # The reassignment completes: the controller's LeaderAndIsr (a new leader epoch, as its
            # step B bumps it) names no adding replicas, and "big" goes on fetching with the others.
            _become(manager, "big", LeaderAndIsrState(1, 1, (1, 2, 3), 1, (1, 2, 3)))
            await recorder.wait_for(FOLLOW_LANE, {("load", 0), ("big", 0)})
            recorder.sent.clear()
            await asyncio.sleep(0.2)  # several backoffs: each loop fetches again
            assert recorder.sent and all(purpose == FOLLOW_LANE for purpose, _ in recorder.sent), recorder.sent
        finally:
            await manager.fetchers.stop()
            manager.logs.close()

    asyncio.run(scenario())
