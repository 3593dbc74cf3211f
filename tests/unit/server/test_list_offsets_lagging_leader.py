"""ListOffsets at a leader whose high watermark still lags the start of its epoch.

Expected answers from Apache Kafka (``Partition.fetchOffsetForTimestamp`` and
``ReplicaManager.fetchOffset``, 3.9 and 4.x): for a client request (replica id -1), while the high
watermark is below the offset at which the leader's epoch began, LATEST is OFFSET_NOT_AVAILABLE
(78), and so is a timestamp lookup (MAX_TIMESTAMP included) that finds nothing below the high
watermark; EARLIEST is answered. A broker's request (replica id >= 0) reads to the log end and is
never refused. Once a follower's fetch moves the high watermark to the epoch's start, every
answer comes back.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder

from headwater.protocol.apis import API_SPECS, ApiKey, Request
from headwater.protocol.errors import ErrorCode
from headwater.protocol.fetch import FOLLOWER_VERSION, decode_follower_fetch_response
from headwater.replication.partition import LeaderAndIsrState
from headwater.server.apis.fetch import FetchApis
from headwater.server.apis.offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, OffsetApis
from headwater.server.replica_manager import ReplicaManager
from headwater.storage.config import LogConfig
from headwater.storage.manager import LogManager

RECORDS = 5


def _batch() -> bytearray:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(RECORDS):
        builder.append(i, timestamp=1000 + i, key=None, value=b"v%d" % i, headers=[])
    return bytearray(builder.build())


def _list(apis: OffsetApis, timestamp: int, replica_id: int = -1) -> tuple[int, int]:
    """(error code, offset) of t-0 in a ListOffsets v7 answer."""
    cls = API_SPECS[ApiKey.LIST_OFFSETS].request
    T = cls.ListOffsetsTopic
    body = cls(version=7, replica_id=replica_id, isolation_level=0, topics=[T(name="t", partitions=[
        T.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=timestamp)])])
    resp = apis.list_offsets(Request(API_SPECS[ApiKey.LIST_OFFSETS], 7, 1, "test", body))
    (p,) = resp.topics[0].partitions
    return p.error_code, p.offset


async def _follower_fetch(apis: FetchApis, offset: int, last_epoch: int, epoch: int) -> None:
    cls = API_SPECS[ApiKey.FETCH].request
    T = cls.FetchTopic
    P = T.FetchPartition
    body = cls(version=FOLLOWER_VERSION, replica_id=2, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
               isolation_level=0, session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
               topics=[T(topic="t", partitions=[P(partition=0, current_leader_epoch=epoch, fetch_offset=offset,
                                                  last_fetched_epoch=last_epoch, log_start_offset=0,
                                                  partition_max_bytes=1 << 20)])])
    frame = bytearray()
    for part in await apis.fetch(Request(API_SPECS[ApiKey.FETCH], FOLLOWER_VERSION, 2, "broker-2-fetch", body)):
        assert isinstance(part, (bytes, bytearray))
        frame += part
    (topic,) = decode_follower_fetch_response(frame[4:]).responses
    assert topic.partitions[0].error_code == ErrorCode.NONE


def test_a_leader_whose_high_watermark_lags_its_epoch_start_refuses_client_offsets(tmp_path: Path) -> None:
    async def scenario() -> None:
        logs = LogManager([tmp_path / "b1"], LogConfig(), clock_ms=lambda: 1_000_000)
        logs.load()
        replicas = ReplicaManager(1, logs, replica_lag_time_max_ms=30_000, replica_fetch_backoff_ms=1000,
                                  wake=lambda _t, _p: None, broker_address=lambda _b: None,
                                  controller_id=lambda: 9, broker_epoch=lambda: 1)

        def become(epoch: int) -> None:
            state = LeaderAndIsrState(1, epoch, (1, 2), epoch, (1, 2))
            assert replicas.become("t", 0, state, topic_id=uuid.UUID(int=1), config=LogConfig(),
                                   min_insync_replicas=1, max_message_bytes=1 << 20) == ErrorCode.NONE

        become(0)
        hosted = replicas.leader("t", 0)
        replicas.append(hosted, _batch(), 1, 30_000)  # acks=1: follower 2 has not fetched it
        assert hosted.plog.log_end_offset == RECORDS and hosted.plog.high_watermark == 0
        # A re-election at epoch 1 starts the epoch at the log end, above the high watermark.
        become(1)
        assert hosted.replica.leader_epoch_start_offset == RECORDS

        ctx: Any = SimpleNamespace(config=SimpleNamespace(props={}), replicas=replicas,
                                   image=SimpleNamespace(topics={}),
                                   authz=SimpleNamespace(enabled=False, topic=lambda *_a: True),
                                   leader=replicas.leader)
        offsets = OffsetApis(ctx)
        assert _list(offsets, LATEST_TIMESTAMP) == (ErrorCode.OFFSET_NOT_AVAILABLE, -1)
        assert _list(offsets, 1000)[0] == ErrorCode.OFFSET_NOT_AVAILABLE  # found at offset 0, not below the HW
        assert _list(offsets, MAX_TIMESTAMP)[0] == ErrorCode.OFFSET_NOT_AVAILABLE
        assert _list(offsets, EARLIEST_TIMESTAMP) == (ErrorCode.NONE, 0)
        assert _list(offsets, LATEST_TIMESTAMP, replica_id=2) == (ErrorCode.NONE, RECORDS)  # a broker: the log end

        # Follower 2 fetches at the log end: the high watermark reaches the epoch's start.
        await _follower_fetch(FetchApis(ctx), RECORDS, 0, 1)
        assert hosted.plog.high_watermark == RECORDS
        assert _list(offsets, LATEST_TIMESTAMP) == (ErrorCode.NONE, RECORDS)
        assert _list(offsets, 1000) == (ErrorCode.NONE, 0)
        assert _list(offsets, MAX_TIMESTAMP) == (ErrorCode.NONE, RECORDS - 1)
        await replicas.stop()
        logs.close()

    asyncio.run(scenario())
