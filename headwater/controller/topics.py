"""Topic admin decisions: validate a create / add-partitions request against the cluster image.

Pure functions: they take the image and the request and return the new topic (or raise
KafkaError with Kafka's code and message). Applying the result (persisting it, creating logs) is
the caller's business, so a rejected request changes nothing.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence

from headwater.metadata.configs import validate_topic_configs
from headwater.metadata.image import ClusterImage, PartitionState, TopicImage
from headwater.placement import assign_replicas
from headwater.protocol.errors import ErrorCode, KafkaError

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(name: str) -> None:
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, topic name: {name}",
        )
    if not _LEGAL_NAME.match(name):
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name {name} is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'",
        )


def _validate_assignment(replicas: Sequence[int], live: set[int], partition: int) -> None:
    if not replicas:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Empty replica list for partition {partition}.")
    if len(set(replicas)) != len(replicas):
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Duplicate brokers in replica assignment for partition {partition}: {list(replicas)}.")
    unknown = [b for b in replicas if b not in live]
    if unknown:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Unknown broker(s) {unknown} in replica assignment for partition {partition}.")


def _placeable(image: ClusterImage, live: Sequence[int]) -> tuple[list[int], dict[int, str | None]]:
    """The brokers automatic placement may use, with their racks: every registered broker but those whose
    log dirs are all cordoned (KIP-1066: ``ClusterControlManager.usableBrokers`` skips a registration without
    ``hasUncordonedDirs``). A manual assignment may still name them, as Kafka 4.3 allows."""
    usable = [b for b in live if not image.brokers[b].cordoned]
    return usable, {b: image.brokers[b].rack for b in usable}


def _new_partitions(assignment: Mapping[int, Sequence[int]]) -> dict[int, PartitionState]:
    return {
        p: PartitionState(replicas=tuple(r), leader=r[0], leader_epoch=0, isr=tuple(r))
        for p, r in sorted(assignment.items())
    }


def plan_create_topic(
    image: ClusterImage,
    name: str,
    num_partitions: int,
    replication_factor: int,
    assignments: Mapping[int, Sequence[int]],
    configs: Mapping[str, str],
    *,
    default_partitions: int,
    default_replication_factor: int,
    start_index: int,
    shift: int,
) -> TopicImage:
    validate_topic_name(name)
    if name in image.topics:
        raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    validate_topic_configs(configs)
    live = sorted(image.brokers)
    if assignments:
        if num_partitions != -1 or replication_factor != -1:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
            )
        expected = sorted(assignments)
        if expected != list(range(len(expected))):
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partitions should be a consecutive 0-based integer sequence")
        sizes = {len(r) for r in assignments.values()}
        if len(sizes) != 1:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "All partitions should have the same number of replicas")
        for p, replicas in assignments.items():
            _validate_assignment(replicas, set(live), p)
        assignment = {p: list(r) for p, r in assignments.items()}
    else:
        partitions = default_partitions if num_partitions == -1 else num_partitions
        rf = default_replication_factor if replication_factor == -1 else replication_factor
        usable, racks = _placeable(image, live)
        assignment = assign_replicas(usable, racks, partitions, rf, start_index=start_index, shift=shift)
    return TopicImage(name=name, topic_id=uuid.uuid4(), partitions=_new_partitions(assignment), configs=dict(configs))


def plan_create_partitions(
    image: ClusterImage,
    name: str,
    count: int,
    assignments: Sequence[Sequence[int]] | None,
    *,
    start_index: int,
    shift: int,
) -> TopicImage:
    topic = image.topics.get(name)
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    if any(s.adding_replicas or s.removing_replicas for s in topic.partitions.values()):
        raise KafkaError(ErrorCode.REASSIGNMENT_IN_PROGRESS, "A partition reassignment is in progress.")
    current = len(topic.partitions)
    if count < current:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic currently has {current} partitions, which is higher than the requested {count}.")
    if count == current:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
    added = count - current
    live = sorted(image.brokers)
    if assignments is not None:
        if len(assignments) != added:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Increasing the number of partitions by {added} but {len(assignments)} assignments provided.",
            )
        new = {current + i: list(r) for i, r in enumerate(assignments)}
        for p, replicas in new.items():
            _validate_assignment(replicas, set(live), p)
            if len(replicas) != topic.replication_factor:
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Inconsistent replication factor between partitions, partition 0 has {topic.replication_factor} "
                    f"while partition {p} has {len(replicas)} replicas.",
                )
    else:
        usable, racks = _placeable(image, live)
        new = assign_replicas(
            usable, racks, added, topic.replication_factor, start_index=start_index, shift=shift, start_partition=current
        )
    return TopicImage(topic.name, topic.topic_id, {**topic.partitions, **_new_partitions(new)}, topic.configs)
