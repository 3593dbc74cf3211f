"""A follower's Fetch v12 against a leader's real Fetch handler, and the batches to fill a log with."""

from __future__ import annotations

import os
from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder

from headwater.protocol.apis import API_SPECS, ApiKey, Request
from headwater.protocol.fetch import FOLLOWER_VERSION, decode_follower_fetch_response
from headwater.server.apis.fetch import FetchApis

MAX_BYTES = 10 * 1024 * 1024


def batch(i: int) -> bytearray:
    """Ten records of about 10 KB each (about 100 KB), stamped ``1000 + i``."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for j in range(10):
        builder.append(j, timestamp=1000 + i, key=None, value=b"%08d" % i + os.urandom(10_000), headers=[])
    return bytearray(builder.build())


async def follower_fetch(apis: FetchApis, replica_id: int, offset: int, last_epoch: int = -1,
                         max_wait_ms: int = 0) -> Any:
    """One follower Fetch v12 of t-0 from ``offset`` (partition max = request max = 10 MiB), as the
    bytes on the wire decode: the one partition of the answer."""
    cls = API_SPECS[ApiKey.FETCH].request
    T = cls.FetchTopic
    P = T.FetchPartition
    body = cls(version=FOLLOWER_VERSION, replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=1,
               max_bytes=MAX_BYTES, isolation_level=0, session_id=0, session_epoch=-1, rack_id="",
               forgotten_topics_data=[],
               topics=[T(topic="t", partitions=[P(partition=0, current_leader_epoch=0, fetch_offset=offset,
                                                  last_fetched_epoch=last_epoch, log_start_offset=0,
                                                  partition_max_bytes=MAX_BYTES)])])
    req = Request(API_SPECS[ApiKey.FETCH], FOLLOWER_VERSION, 7, f"broker-{replica_id}-fetch", body)
    frame = bytearray()
    for part in await apis.fetch(req):
        frame += part if isinstance(part, (bytes, bytearray)) else os.pread(part.fileno, part.length, part.position)
    (topic,) = decode_follower_fetch_response(frame[4:]).responses
    (partition,) = topic.partitions
    return partition
