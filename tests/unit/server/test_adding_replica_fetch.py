"""A replica being added copies its partition in answers of at most 1 MiB, whatever it asks for.

Fetch sizes are limits, not promises (Kafka's FetchRequest: ``partition_max_bytes`` and
``max_bytes`` bound an answer, and at least one whole batch comes back when there is one), so the
leader may answer a reassignment's new replica with less than its share: one answer then never
holds the leader's or the follower's event loop for more than about a millisecond (issue #26).
In-sync followers keep their whole share. Here a leader's Fetch handler answers real v12 requests,
and a follower log appends what comes back until it ends where the leader's does.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from _follower_fetch import batch, follower_fetch

from headwater.protocol.errors import ErrorCode
from headwater.replication.partition import LeaderAndIsrState
from headwater.server.apis.fetch import FetchApis
from headwater.server.replica_manager import ADDING_REPLICA_READ_BYTES, ReplicaManager
from headwater.storage.config import LogConfig
from headwater.storage.manager import LogManager


def _manager(root: Path, broker_id: int) -> tuple[LogManager, ReplicaManager]:
    logs = LogManager([root / f"b{broker_id}"], LogConfig(), clock_ms=lambda: 1_000_000)
    logs.load()
    return logs, ReplicaManager(broker_id, logs, replica_lag_time_max_ms=30_000, replica_fetch_backoff_ms=1000,
                                wake=lambda _t, _p: None, broker_address=lambda _b: None,
                                controller_id=lambda: 9, broker_epoch=lambda: 1)


async def _fetch_checked(apis: FetchApis, replica_id: int, offset: int, last_epoch: int) -> Any:
    partition = await follower_fetch(apis, replica_id, offset, last_epoch)
    assert partition.error_code == ErrorCode.NONE
    return partition


def test_a_replica_being_added_gets_capped_answers_and_ends_with_every_byte(tmp_path: Path) -> None:
    async def scenario() -> None:
        leader_logs, leader = _manager(tmp_path, 1)
        state = LeaderAndIsrState(1, 0, (1, 2), 0, (1, 2, 3), adding_replicas=(3,))
        assert leader.become("t", 0, state, topic_id=uuid.UUID(int=1), config=LogConfig(), min_insync_replicas=1,
                             max_message_bytes=1 << 20) == ErrorCode.NONE
        hosted = leader.leader("t", 0)
        for i in range(40):  # about 4 MB in batches of about 100 KB
            leader.append(hosted, batch(i), 1, 30_000)
        ctx: Any = SimpleNamespace(config=SimpleNamespace(props={}), replicas=leader,
                                   image=SimpleNamespace(topics={}), authz=SimpleNamespace(enabled=False))
        apis = FetchApis(ctx)
        leader_bytes = hosted.plog.read(0, 1 << 30).read()
        assert len(leader_bytes) > 3 * ADDING_REPLICA_READ_BYTES

        # The in-sync follower asking for 10 MiB gets all of it in one answer.
        assert len((await _fetch_checked(apis, 2, 0, -1)).records) == len(leader_bytes)

        # The replica being added gets whole batches, at most 1 MiB per answer, and copies everything.
        follower_logs = LogManager([tmp_path / "b3"], LogConfig(), clock_ms=lambda: 1_000_000)
        follower_logs.load()
        copy = follower_logs.get_or_create("t", 0)
        sizes = []
        while copy.log_end_offset < hosted.plog.log_end_offset:
            part = await _fetch_checked(apis, 3, copy.log_end_offset, copy.latest_epoch() or -1)
            records = part.records
            assert 0 < len(records) <= ADDING_REPLICA_READ_BYTES
            copy.append_as_follower(records)  # whole batches: a partial one would not parse
            sizes.append(len(records))
        assert len(sizes) >= 4
        assert copy.read(0, 1 << 30).read() == leader_bytes
        await leader.stop()
        leader_logs.close()
        follower_logs.close()

    asyncio.run(scenario())
