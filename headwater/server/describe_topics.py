"""DescribeTopicPartitions (API 75): the paged describe of topics, over the cluster image (pure).

Kafka's rules (``DescribeTopicPartitionsRequestHandler`` and
``KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse``): topics are taken in name order
from the cursor's topic on (all topics when the request names none); the cursor's topic starts at
its partition, the others at 0; at most ``limit`` partitions are answered, and where the limit cuts
a topic (or falls exactly before the next one) the next cursor names where to go on. A named topic
that does not exist is UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name);
an all-topics request just leaves it out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from headwater.controller.topics import validate_topic_name
from headwater.metadata.image import ClusterImage, PartitionState
from headwater.protocol.errors import ErrorCode, KafkaError


@dataclass(frozen=True, slots=True)
class DescribedTopic:
    name: str
    error: ErrorCode
    partitions: tuple[tuple[int, PartitionState], ...] = ()


@dataclass(frozen=True, slots=True)
class DescribePage:
    topics: tuple[DescribedTopic, ...]
    next_cursor: tuple[str, int] | None


def describe_page(image: ClusterImage, names: Iterable[str], cursor: tuple[str, int] | None, limit: int,
                  all_topics: bool) -> DescribePage:
    """One page: ``names`` are the topics to describe (already filtered by the caller's ACLs),
    ``cursor`` the (topic, partition) to start at, ``limit`` >= 1 the partitions to answer at most."""
    start_topic, start_partition = cursor if cursor is not None else ("", 0)
    remaining = limit
    out: list[DescribedTopic] = []
    for name in sorted(n for n in set(names) if n >= start_topic):
        if remaining == 0:
            # The limit fell exactly after the previous topic: go on at the start of this one.
            return DescribePage(tuple(out), (name, 0))
        topic = image.topics.get(name)
        if topic is None:
            if not all_topics:
                out.append(DescribedTopic(name, _missing_code(name)))
            continue
        first = start_partition if name == start_topic else 0
        count = len(topic.partitions)
        upper = min(count, first + remaining)
        parts = tuple((p, topic.partitions[p]) for p in range(first, upper) if p in topic.partitions)
        out.append(DescribedTopic(name, ErrorCode.NONE, parts))
        if upper < count:
            return DescribePage(tuple(out), (name, upper))
        remaining -= len(parts)
    return DescribePage(tuple(out), None)


def _missing_code(name: str) -> ErrorCode:
    try:
        validate_topic_name(name)
    except KafkaError:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
