"""What the replica manager answers when a partition's log dir goes offline (the regressions the
chaos disk-full nemesis found)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.replication.partition import LeaderAndIsrState
from headwater.server.replica_manager import ReplicaManager
from headwater.storage.config import LogConfig
from headwater.storage.manager import LogManager


def _batch() -> bytearray:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=7,
                                        producer_epoch=0, base_sequence=0, batch_size=1 << 20)
    builder.append(0, timestamp=1000, key=None, value=b"v", headers=[])
    return bytearray(builder.build())


def _manager(tmp_path: Path) -> tuple[ReplicaManager, LogManager]:
    logs = LogManager([tmp_path / "d0"], LogConfig(), clock_ms=lambda: 1_000_000)
    logs.load()
    replicas = ReplicaManager(1, logs, replica_lag_time_max_ms=30_000, replica_fetch_backoff_ms=1000,
                              wake=lambda _t, _p: None, broker_address=lambda _b: None, controller_id=lambda: 9,
                              broker_epoch=lambda: 1)
    return replicas, logs


def test_pending_acks_fail_as_a_leadership_change_not_as_a_storage_error(tmp_path: Path) -> None:
    """The batch was written before the dir failed and may be on the followers: NOT_LEADER_OR_FOLLOWER
    makes librdkafka retry the same sequence (deduplicated by the new leader), where a storage error
    made it renumber the retry under a new epoch and duplicate the record."""

    async def scenario() -> ErrorCode:
        replicas, logs = _manager(tmp_path)
        state = LeaderAndIsrState(1, 0, (1, 2), 0, (1, 2))
        assert replicas.become("t", 0, state, topic_id=uuid.UUID(int=1), config=LogConfig(), min_insync_replicas=2,
                               max_message_bytes=1 << 20) == ErrorCode.NONE
        hosted = replicas.leader("t", 0)
        _base, pending = replicas.append(hosted, _batch(), -1, 30_000)
        assert pending is not None and not pending.done()  # waiting for broker 2
        replicas.drop_offline(logs.take_offline(tmp_path / "d0"))
        return await asyncio.wait_for(pending, 1)

    assert asyncio.run(scenario()) == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_an_offline_partition_answers_storage_errors(tmp_path: Path) -> None:
    async def scenario() -> None:
        replicas, logs = _manager(tmp_path)
        replicas.become("t", 0, LeaderAndIsrState(1, 0, (1,), 0, (1,)), topic_id=uuid.UUID(int=1), config=LogConfig(),
                        min_insync_replicas=1, max_message_bytes=1 << 20)
        replicas.drop_offline(logs.take_offline(tmp_path / "d0"))
        with pytest.raises(KafkaError) as refused:
            replicas.leader("t", 0)
        assert refused.value.code == ErrorCode.KAFKA_STORAGE_ERROR
        # Its files cannot be deleted now: the controller keeps the deletion pending until a restart.
        assert replicas.stop_replica("t", 0, delete=True) == ErrorCode.KAFKA_STORAGE_ERROR
        assert (tmp_path / "d0" / "t-0").is_dir()
        # A LeaderAndIsr for it is answered with the storage error the controller acts on.
        assert replicas.become("t", 0, LeaderAndIsrState(1, 1, (1,), 1, (1,)), topic_id=uuid.UUID(int=1),
                               config=LogConfig(), min_insync_replicas=1, max_message_bytes=1 << 20) \
            == ErrorCode.KAFKA_STORAGE_ERROR

    asyncio.run(scenario())
