from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from headwater.placement import assign_replicas, rack_alternated
from headwater.protocol.errors import ErrorCode, KafkaError

RACKS = {0: "r1", 1: "r3", 2: "r3", 3: "r2", 4: "r2", 5: "r1"}


def test_rack_alternated_order() -> None:
    assert rack_alternated(RACKS) == [0, 3, 1, 5, 4, 2]


def test_rack_aware_matches_kafka_vector() -> None:
    # Kafka's AdminRackAwareTest: start index 0, 7 partitions, RF 3.
    got = assign_replicas(list(RACKS), RACKS, 7, 3, start_index=0, shift=0)
    assert got == {0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3], 6: [0, 4, 2]}


def test_rack_unaware_round_robin_with_shift() -> None:
    got = assign_replicas([0, 1, 2, 3, 4], {}, 10, 3, start_index=0, shift=0)
    assert got[0] == [0, 1, 2]
    assert got[4] == [4, 0, 1]
    # After a full round the follower shift grows, so followers move relative to the leader.
    assert got[5] == [0, 2, 3]


@pytest.mark.parametrize(
    ("partitions", "rf", "code", "message"),
    [
        (0, 1, ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."),
        (1, 0, ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."),
        (1, 4, ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor: 4 larger than available brokers: 3."),
    ],
)
def test_errors(partitions: int, rf: int, code: ErrorCode, message: str) -> None:
    with pytest.raises(KafkaError) as err:
        assign_replicas([1, 2, 3], {}, partitions, rf, start_index=0, shift=0)
    assert (err.value.code, err.value.message) == (code, message)


def test_partial_racks_rejected() -> None:
    with pytest.raises(KafkaError) as err:
        assign_replicas([1, 2], {1: "a", 2: None}, 1, 1, start_index=0, shift=0)
    assert err.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


@given(
    n_brokers=st.integers(1, 12),
    n_racks=st.integers(1, 4),
    partitions=st.integers(1, 40),
    rf=st.integers(1, 4),
    start=st.integers(0, 100),
    shift=st.integers(0, 100),
)
def test_invariants(n_brokers: int, n_racks: int, partitions: int, rf: int, start: int, shift: int) -> None:
    rf = min(rf, n_brokers)
    racks = {b: f"r{b % n_racks}" for b in range(n_brokers)}
    got = assign_replicas(list(racks), racks, partitions, rf, start_index=start, shift=shift)
    assert sorted(got) == list(range(partitions))
    used_racks = len(set(racks.values()))
    for replicas in got.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf  # no broker twice
        # Distinct racks while there are enough of them.
        assert len({racks[b] for b in replicas}) == min(rf, used_racks)
    # Leaders spread evenly: no broker leads more than ceil(partitions / brokers).
    leaders = [r[0] for r in got.values()]
    assert max(leaders.count(b) for b in set(leaders)) <= -(-partitions // n_brokers)
