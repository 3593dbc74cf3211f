"""ElectLeaders' answer (API 43), the same from a standalone broker and from a cluster member."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from headwater.protocol.errors import ErrorCode


def elect_leaders_response(req: Any, error: ErrorCode, results: Iterable[tuple[str, int, int, str | None]]) -> Any:
    """``results``: (topic, partition, error code, message), grouped by topic in first-seen order.
    v0 has no top-level error code."""
    T = req.spec.response.ReplicaElectionResult
    P = T.PartitionResult
    by_topic: dict[str, list[Any]] = {}
    for topic, partition, code, message in results:
        by_topic.setdefault(topic, []).append(P(partition_id=partition, error_code=code, error_message=message))
    fields: dict[str, Any] = dict(throttle_time_ms=0, replica_election_results=[
        T(topic=t, partition_result=ps) for t, ps in by_topic.items()])
    if req.version >= 1:
        fields["error_code"] = error
    return req.response(**fields)


def requested_partitions(req: Any) -> tuple[tuple[str, int], ...] | None:
    """The partitions an ElectLeaders request names (None: all), duplicates removed (a set in Kafka)."""
    body = req.body
    if body.topic_partitions is None:
        return None
    return tuple(dict.fromkeys((t.topic, p) for t in body.topic_partitions for p in t.partitions))
