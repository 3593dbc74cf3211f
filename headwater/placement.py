"""Replica placement for new topics and partitions: Kafka's ``assignReplicasToBrokers``.

Shared by the controller (topic creation) and the admin tools (``reassign --generate``), so it
lives outside both and depends only on the protocol's error type.

Rack-unaware: the broker list in the order given, a start index and a replica shift that grows
each time the partition number wraps around the broker count, so followers of consecutive
"rounds" land on different brokers. Rack-aware: the same over a list that alternates racks, and
each further replica is the next candidate whose rack (and broker) is not used yet, unless every
rack (broker) already is. Randomness comes in as arguments so the function stays pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from headwater.protocol.errors import ErrorCode, KafkaError


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """One broker from each rack in turn; racks by name, brokers ascending within a rack."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in racks.items():
        by_rack.setdefault(rack, []).append(broker)
    lists = [sorted(by_rack[r]) for r in sorted(by_rack)]
    out: list[int] = []
    i = 0
    while len(out) < len(racks):
        for lst in lists:
            if i < len(lst):
                out.append(lst[i])
        i += 1
    return out


def assign_replicas(
    brokers: Sequence[int],
    racks: Mapping[int, str | None],
    n_partitions: int,
    replication_factor: int,
    *,
    start_index: int,
    shift: int,
    start_partition: int = 0,
) -> dict[int, list[int]]:
    if n_partitions <= 0:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    n = len(brokers)
    if replication_factor > n:
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor: {replication_factor} larger than available brokers: {n}.",
        )
    known_racks = {b: r for b, r in racks.items() if b in brokers and r is not None}
    if known_racks and len(known_racks) != n:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Not all brokers have rack information for replica rack aware assignment.",
        )
    start_index %= n
    if not known_racks:
        return _rack_unaware(list(brokers), n_partitions, replication_factor, start_index, shift, start_partition)
    return _rack_aware(known_racks, n_partitions, replication_factor, start_index, shift, start_partition)


def _rack_unaware(
    brokers: list[int], n_partitions: int, rf: int, start_index: int, shift: int, start_partition: int
) -> dict[int, list[int]]:
    n = len(brokers)
    out: dict[int, list[int]] = {}
    for p in range(start_partition, start_partition + n_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start_index) % n
        replicas = [brokers[first]]
        if n > 1:
            replicas += [brokers[_replica_index(first, shift, j, n)] for j in range(rf - 1)]
        out[p] = replicas
    return out


def _rack_aware(
    racks: Mapping[int, str], n_partitions: int, rf: int, start_index: int, shift: int, start_partition: int
) -> dict[int, list[int]]:
    ordered = rack_alternated(racks)
    n = len(ordered)
    n_racks = len(set(racks.values()))
    out: dict[int, list[int]] = {}
    for p in range(start_partition, start_partition + n_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start_index) % n
        leader = ordered[first]
        replicas = [leader]
        used_racks = {racks[leader]}
        used_brokers = {leader}
        k = 0
        for _ in range(rf - 1):
            while True:
                candidate = ordered[_replica_index(first, shift * n_racks, k, n)]
                k += 1
                rack_ok = racks[candidate] not in used_racks or len(used_racks) == n_racks
                broker_ok = candidate not in used_brokers or len(used_brokers) == n
                if rack_ok and broker_ok:
                    replicas.append(candidate)
                    used_racks.add(racks[candidate])
                    used_brokers.add(candidate)
                    break
        out[p] = replicas
    return out
