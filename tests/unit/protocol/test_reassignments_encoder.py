"""The hand-written ListPartitionReassignmentsResponse must decode, through the codec library, to
exactly what the library itself would have encoded."""

from __future__ import annotations

import io
import random
from dataclasses import dataclass

import pytest
from kafka.protocol.admin import ListPartitionReassignmentsResponse

from headwater.protocol.frame import response_header
from headwater.protocol.reassignments import encode_list_reassignments_response


@dataclass(frozen=True)
class Listing:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


def _reference(listings: list[Listing], correlation_id: int, error_code: int, error_message: str | None) -> bytes:
    T = ListPartitionReassignmentsResponse.OngoingTopicReassignment
    P = T.OngoingPartitionReassignment
    by_topic: dict[str, list[object]] = {}
    for r in listings:
        by_topic.setdefault(r.topic, []).append(P(partition_index=r.partition, replicas=list(r.replicas),
                                                  adding_replicas=list(r.adding_replicas),
                                                  removing_replicas=list(r.removing_replicas)))
    body = ListPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=error_code, error_message=error_message,
        topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()]).encode(version=0)
    head = response_header(correlation_id, flexible=True)
    return (len(head) + len(body)).to_bytes(4, "big") + head + body


def _random_listings(rng: random.Random, n: int) -> list[Listing]:
    topics = ["t", "ünïcode-tópic", "x" * 200] + [f"topic-{i}" for i in range(5)]
    out = []
    for _ in range(n):
        # Mostly small replica sets; now and then one past the one-byte varint length (127).
        size = rng.choice([0, 1, 2, 3, 5, 130])
        replicas = tuple(rng.randrange(-1, 2**31 - 1) for _ in range(size))
        out.append(Listing(rng.choice(topics), rng.randrange(0, 2**31 - 1), replicas,
                           replicas[: rng.randrange(0, size + 1)], replicas[: rng.randrange(0, size + 1)]))
    return out


@pytest.mark.parametrize("seed", range(20))
def test_matches_the_codec_library_byte_for_byte(seed: int) -> None:
    rng = random.Random(seed)
    listings = _random_listings(rng, rng.choice([0, 1, 10, 300]))
    error_code, message = rng.choice([(0, None), (41, "This is not the correct controller for this cluster."), (31, "")])
    frame = encode_list_reassignments_response(0, seed * 7919, listings, error_code=error_code, error_message=message)
    assert frame == _reference(listings, seed * 7919, error_code, message)


def test_decodes_to_the_listing() -> None:
    listings = [Listing("a", 0, (1, 2, 4), (4,), (1,)), Listing("b", 3, (5, 6), (), ()), Listing("a", 7, (9,), (9,), ())]
    frame = encode_list_reassignments_response(0, 42, listings)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert frame[4:8] == (42).to_bytes(4, "big") and frame[8] == 0  # correlation id, no header tags
    resp = ListPartitionReassignmentsResponse.decode(io.BytesIO(frame[9:]), version=0)
    got = [(t.name, p.partition_index, list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
           for t in resp.topics for p in t.partitions]
    assert got == [("a", 0, [1, 2, 4], [4], [1]), ("a", 7, [9], [9], []), ("b", 3, [5, 6], [], [])]


def test_refuses_versions_it_does_not_write() -> None:
    with pytest.raises(ValueError, match="v1"):
        encode_list_reassignments_response(1, 0, [])
