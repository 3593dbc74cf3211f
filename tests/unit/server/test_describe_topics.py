"""DescribeTopicPartitions' paging, against Kafka's rules (DescribeTopicPartitionsRequestHandler and
KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse, apache/kafka): topics in name order
from the cursor's topic, the cursor's topic from its partition; at most ``limit`` partitions; the
next cursor where the limit cut a topic, or at partition 0 of the next topic when it fell just
after one; a named missing topic is UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an
illegal name), while an all-topics request leaves missing names out."""

from __future__ import annotations

import uuid

from headwater.metadata.image import BrokerInfo, ClusterImage, PartitionState, TopicImage
from headwater.protocol.errors import ErrorCode
from headwater.server.describe_topics import describe_page


def image(**counts: int) -> ClusterImage:
    return ClusterImage("c", 1, {1: BrokerInfo(1, "h", 1)}, {
        name: TopicImage(name, uuid.uuid4(), {p: PartitionState((1,), 1, 0, (1,)) for p in range(n)})
        for name, n in counts.items()})


def shape(page: object) -> list[tuple[str, int, list[int]]]:
    return [(t.name, t.error, [p for p, _s in t.partitions]) for t in page.topics]  # type: ignore[attr-defined]


def test_pages_through_topics_in_name_order() -> None:
    img = image(b=3, a=2, c=1)
    page = describe_page(img, ["c", "a", "b"], None, 4, all_topics=False)
    assert shape(page) == [("a", 0, [0, 1]), ("b", 0, [0, 1])]
    assert page.next_cursor == ("b", 2)
    page = describe_page(img, ["c", "a", "b"], page.next_cursor, 4, all_topics=False)
    assert shape(page) == [("b", 0, [2]), ("c", 0, [0])]
    assert page.next_cursor is None


def test_a_limit_that_ends_a_topic_points_at_the_next_one() -> None:
    page = describe_page(image(a=2, b=1), ["a", "b"], None, 2, all_topics=True)
    assert shape(page) == [("a", 0, [0, 1])]
    assert page.next_cursor == ("b", 0)


def test_missing_topics_named_or_not() -> None:
    img = image(a=1)
    page = describe_page(img, ["a", "gone", "bad name"], None, 10, all_topics=False)
    assert shape(page) == [("a", 0, [0]), ("bad name", ErrorCode.INVALID_TOPIC_EXCEPTION, []),
                           ("gone", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])]
    assert shape(describe_page(img, ["a", "gone"], None, 10, all_topics=True)) == [("a", 0, [0])]


def test_topics_before_the_cursor_are_skipped() -> None:
    page = describe_page(image(a=5, b=5), ["a", "b"], ("b", 3), 10, all_topics=False)
    assert shape(page) == [("b", 0, [3, 4])]
