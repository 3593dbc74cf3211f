"""Batches for the transaction tests: a producer's (transactional or not) data batches, built with
kafka-python's builder as a client would send them."""

from __future__ import annotations

import pytest
from _storage_batches import make_batch
from kafka.record.default_records import DefaultRecordBatchBuilder

from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.storage import PartitionLog
from headwater.storage.log import AppendOrigin, AppendResult

A, B, C = 100, 200, 300


def data(pid: int, seq: int, n: int = 1, *, epoch: int = 0, transactional: bool = True,
         keys: list[bytes] | None = None) -> bytearray:
    """One batch of ``n`` records from producer ``pid`` at sequence ``seq`` (-1: none)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional, producer_id=pid,
                                        producer_epoch=epoch, base_sequence=seq, batch_size=1 << 30)
    for i in range(n):
        key = keys[i] if keys is not None else b"k%d" % i
        builder.append(i, timestamp=1_000 + i, key=key, value=b"v%d" % i, headers=[])
    return bytearray(builder.build())


def plain(n: int = 1) -> bytearray:
    return make_batch([b"p%d" % i for i in range(n)])


def append(log: PartitionLog, records: bytearray, origin: AppendOrigin = AppendOrigin.CLIENT) -> AppendResult:
    return log.append_as_leader(records, 0, 1, origin=origin)


def marker(log: PartitionLog, pid: int, commit: bool, *, epoch: int = 0, coordinator_epoch: int = 0) -> int:
    """Append an end marker as the transaction coordinator does; its offset."""
    return log.append_marker(pid, epoch, commit, coordinator_epoch, 0, 1).base_offset


def refused(call: object, *args: object, **kwargs: object) -> KafkaError:
    assert callable(call)
    with pytest.raises(KafkaError) as e:
        call(*args, **kwargs)
    return e.value


def error_code(call: object, *args: object, **kwargs: object) -> ErrorCode:
    return refused(call, *args, **kwargs).code
