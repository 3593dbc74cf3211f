"""ListOffsets' special timestamps, on a partition whose log start DeleteRecords moved to 6.

Expected answers from Apache Kafka (UnifiedLog.fetchOffsetByTimestamp and
ReplicaManager.isListOffsetsTimestampUnsupported, 4.x; ListOffsetsRequest.timestampMinSupportedVersion):
- EARLIEST (-2) and EARLIEST_LOCAL (-4, v8+): the log start offset; without tiered storage the local
  log is the whole log, so both answer 6.
- LATEST_TIERED (-5, v9+) and EARLIEST_PENDING_UPLOAD (-6, v11+): nothing is tiered, so offset -1,
  timestamp -1, leader epoch -1, error NONE.
- A special timestamp below the version that introduced it, or a negative timestamp that is none
  of them, is UNSUPPORTED_VERSION (35) for that partition.
"""

from __future__ import annotations

from collections.abc import Callable

from hw_support import RawConnection, create_topic
from kafka import KafkaProducer
from kafka.protocol.admin import DeleteRecordsRequest, DeleteRecordsResponse
from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

from headwater.admin.local import BrokerProcess

UNSUPPORTED_VERSION = 35


def list_offset(conn: RawConnection, topic: str, timestamp: int, version: int) -> tuple[int, int, int, int]:
    """(error code, offset, timestamp, leader epoch) of partition 0."""
    T = ListOffsetsRequest.ListOffsetsTopic
    fields = dict(replica_id=-1, isolation_level=0, topics=[T(name=topic, partitions=[
        T.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=timestamp)])])
    if version >= 10:
        fields["timeout_ms"] = 1000
    resp = conn.request(ListOffsetsRequest(version=version, **fields), ListOffsetsResponse, version)
    p = resp.topics[0].partitions[0]
    return p.error_code, p.offset, p.timestamp, p.leader_epoch


def test_special_timestamps_after_delete_records(broker: BrokerProcess, topic_name: Callable[..., str]) -> None:
    topic = create_topic(broker.bootstrap, topic_name(), 1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    for i in range(10):
        producer.send(topic, f"r{i}".encode(), partition=0)
    producer.flush(10)
    producer.close()
    T = DeleteRecordsRequest.DeleteRecordsTopic
    with RawConnection(broker.bootstrap) as conn:
        resp = conn.request(DeleteRecordsRequest(version=2, timeout_ms=10000, topics=[
            T(name=topic, partitions=[T.DeleteRecordsPartition(partition_index=0, offset=6)])]), DeleteRecordsResponse, 2)
        assert resp.topics[0].partitions[0].error_code == 0

        assert list_offset(conn, topic, -2, 8)[:2] == (0, 6)
        assert list_offset(conn, topic, -4, 8)[:2] == (0, 6)
        assert list_offset(conn, topic, -4, 11)[:2] == (0, 6)
        assert list_offset(conn, topic, -1, 11)[:2] == (0, 10)
        assert list_offset(conn, topic, -5, 9) == (0, -1, -1, -1)
        assert list_offset(conn, topic, -6, 11) == (0, -1, -1, -1)
        # Each special timestamp needs the version that introduced it.
        assert list_offset(conn, topic, -3, 6)[0] == UNSUPPORTED_VERSION
        assert list_offset(conn, topic, -4, 7)[0] == UNSUPPORTED_VERSION
        assert list_offset(conn, topic, -5, 8)[0] == UNSUPPORTED_VERSION
        assert list_offset(conn, topic, -6, 10)[0] == UNSUPPORTED_VERSION
        assert list_offset(conn, topic, -7, 11)[0] == UNSUPPORTED_VERSION
