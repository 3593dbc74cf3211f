"""ListOffsets v0, which Kafka 3.9 serves (removed in 4.0, KIP-896) and older clients still send.

Expected answers from Kafka 3.9's broker:
- ``KafkaApis.handleListOffsetRequestV0``: a timestamp below EARLIEST (-2) is UNSUPPORTED_VERSION for
  its partition; a topic without DESCRIBE is TOPIC_AUTHORIZATION_FAILED; an unknown partition is
  UNKNOWN_TOPIC_OR_PARTITION.
- ``UnifiedLog.legacyFetchOffsetsBefore``: the candidates are each segment's base offset (raised to
  the log start offset) stamped with its file's last-modified time, plus the log end offset stamped
  now when the active segment is not empty. LATEST starts from the last candidate, EARLIEST from
  the first, a timestamp from the newest candidate not after it; up to ``max_num_offsets``
  candidates are returned, largest offset first.
- ``Partition.legacyFetchOffsetsForTimestamp``: for a consumer (replica id -1) offsets above the high
  watermark are replaced by the high watermark.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from hw_support import RawConnection, create_topic
from kafka import KafkaProducer
from kafka.protocol.admin import DeleteRecordsRequest, DeleteRecordsResponse
from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

from headwater.admin.local import BrokerProcess

UNKNOWN_TOPIC_OR_PARTITION = 3
UNSUPPORTED_VERSION = 35
FAR_FUTURE_MS = 1 << 50


def list_offsets_v0(conn: RawConnection, topic: str, partition: int, timestamp: int, max_num: int) -> tuple[int, list[int]]:
    T = ListOffsetsRequest.ListOffsetsTopic
    req = ListOffsetsRequest(version=0, replica_id=-1, topics=[T(name=topic, partitions=[
        T.ListOffsetsPartition(partition_index=partition, timestamp=timestamp, max_num_offsets=max_num)])])
    p = conn.request(req, ListOffsetsResponse, 0).topics[0].partitions[0]
    return p.error_code, list(p.old_style_offsets)


def segment_bases(log_dir: Path, topic: str) -> list[int]:
    return sorted(int(f.name.split(".")[0]) for f in (log_dir / f"{topic}-0").glob("*.log"))


def test_list_offsets_v0_answers_segment_starts(broker: BrokerProcess, topic_name: Callable[..., str]) -> None:
    # One record per segment: a 14-byte segment.bytes rolls before every append after the first.
    topic = create_topic(broker.bootstrap, topic_name(), 1, {"segment.bytes": "14"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=0)
    for i in range(8):
        producer.send(topic, f"r{i}".encode(), partition=0).get(timeout=10)
    producer.close()
    log_dir = broker.data_dir / f"broker-{broker.broker_id}-logs"
    bases = segment_bases(log_dir, topic)
    assert bases == list(range(8)), bases
    # Stamp the segments a minute apart so a timestamp can fall between them.
    now_s = time.time()
    for base in bases:
        t = now_s - 3600 + 60 * base
        os.utime(log_dir / f"{topic}-0" / f"{base:020d}.log", (t, t))

    with RawConnection(broker.bootstrap) as conn:
        assert list_offsets_v0(conn, topic, 0, -1, 1) == (0, [8])
        assert list_offsets_v0(conn, topic, 0, -2, 1) == (0, [0])
        # LATEST with room for more walks back through the segment starts, newest first.
        assert list_offsets_v0(conn, topic, 0, -1, 3) == (0, [8, 7, 6])
        assert list_offsets_v0(conn, topic, 0, FAR_FUTURE_MS, 100) == (0, [8, 7, 6, 5, 4, 3, 2, 1, 0])
        # Segment 3 was last modified at now-3600+180 s: a time just after it finds 3 and older.
        at_3 = int((now_s - 3600 + 180 + 1) * 1000)
        assert list_offsets_v0(conn, topic, 0, at_3, 2) == (0, [3, 2])
        assert list_offsets_v0(conn, topic, 0, 0, 5) == (0, [])
        assert list_offsets_v0(conn, topic, 0, -3, 1) == (UNSUPPORTED_VERSION, [])
        assert list_offsets_v0(conn, topic, 5, -1, 1)[0] == UNKNOWN_TOPIC_OR_PARTITION
        assert list_offsets_v0(conn, "no-such-topic-v0", 0, -1, 1)[0] == UNKNOWN_TOPIC_OR_PARTITION

        # After DeleteRecords to 5 the older segments go, and the first start is the log start.
        T = DeleteRecordsRequest.DeleteRecordsTopic
        resp = conn.request(DeleteRecordsRequest(version=2, timeout_ms=10000, topics=[
            T(name=topic, partitions=[T.DeleteRecordsPartition(partition_index=0, offset=5)])]), DeleteRecordsResponse, 2)
        assert resp.topics[0].partitions[0].error_code == 0
        assert list_offsets_v0(conn, topic, 0, -2, 1) == (0, [5])
        assert list_offsets_v0(conn, topic, 0, FAR_FUTURE_MS, 100)[1][-1] == 5
