"""The versions current clients send, answered as Kafka 4.x answers them (docs/protocol.md).

- DescribeTopicPartitions v0 (KafkaApis.handleDescribeTopicPartitionsRequest): pages of at most
  ``response_partition_limit`` partitions with a next cursor; a cursor naming a topic the request
  does not list makes every topic INVALID_REQUEST (42).
- DescribeCluster v1+ (AuthHelper.computeDescribeClusterResponse): endpoint type 2 (controller) at a
  broker is MISMATCHED_ENDPOINT_TYPE (114), an unknown type UNSUPPORTED_ENDPOINT_TYPE (115); v2 lists
  brokers with ``is_fenced`` false.
- Metadata v13 carries a top-level error code, NONE.
"""

from __future__ import annotations

from collections.abc import Callable

from hw_support import RawConnection, create_topic
from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse
from kafka.protocol.admin.topics import DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from headwater.admin.local import BrokerProcess

INVALID_REQUEST, MISMATCHED_ENDPOINT_TYPE, UNSUPPORTED_ENDPOINT_TYPE = 42, 114, 115


def describe(conn: RawConnection, topics: list[str], limit: int, cursor: tuple[str, int] | None) -> object:
    Q = DescribeTopicPartitionsRequest
    return conn.request(Q(version=0, topics=[Q.TopicRequest(name=t) for t in topics], response_partition_limit=limit,
                          cursor=None if cursor is None else Q.Cursor(topic_name=cursor[0], partition_index=cursor[1])),
                        DescribeTopicPartitionsResponse, 0)


def test_describe_topic_partitions_pages(broker: BrokerProcess, topic_name: Callable[..., str]) -> None:
    a = create_topic(broker.bootstrap, topic_name("a"), 3)
    b = create_topic(broker.bootstrap, topic_name("b"), 2)
    missing = topic_name("missing")
    with RawConnection(broker.bootstrap) as conn:
        resp = describe(conn, [b, a, missing], 4, None)
        got = [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in resp.topics]
        assert got == [(a, 0, [0, 1, 2]), (b, 0, [0])], got
        assert (resp.next_cursor.topic_name, resp.next_cursor.partition_index) == (b, 1)
        part = resp.topics[0].partitions[0]
        assert (part.leader_id, part.replica_nodes, part.isr_nodes) == (1, [1], [1])
        resp = describe(conn, [b, a, missing], 4, (b, 1))
        got = [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in resp.topics]
        assert got == [(b, 0, [1]), (missing, 3, [])], got
        assert resp.next_cursor is None
        resp = describe(conn, [a], 4, (b, 0))
        assert [(t.name, t.error_code) for t in resp.topics] == [(a, INVALID_REQUEST)]


def test_describe_cluster_endpoint_types_and_v2(broker: BrokerProcess) -> None:
    with RawConnection(broker.bootstrap) as conn:
        def ask(version: int, endpoint_type: int) -> object:
            fields: dict[str, object] = dict(include_cluster_authorized_operations=False)
            if version >= 1:
                fields["endpoint_type"] = endpoint_type
            if version >= 2:
                fields["include_fenced_brokers"] = True
            return conn.request(DescribeClusterRequest(version=version, **fields), DescribeClusterResponse, version)

        ok = ask(2, 1)
        assert ok.error_code == 0 and [(b.broker_id, b.is_fenced) for b in ok.brokers] == [(1, False)]
        assert ask(1, 2).error_code == MISMATCHED_ENDPOINT_TYPE
        assert ask(1, 7).error_code == UNSUPPORTED_ENDPOINT_TYPE


def test_metadata_v13(broker: BrokerProcess, topic_name: Callable[..., str]) -> None:
    name = create_topic(broker.bootstrap, topic_name(), 1)
    T = MetadataRequest.MetadataRequestTopic
    with RawConnection(broker.bootstrap) as conn:
        resp = conn.request(MetadataRequest(version=13, topics=[T(topic_id=None, name=name)],
                                            allow_auto_topic_creation=False, include_topic_authorized_operations=False),
                            MetadataResponse, 13)
    assert resp.error_code == 0
    assert [(t.name, t.error_code, len(t.partitions)) for t in resp.topics] == [(name, 0, 1)]
