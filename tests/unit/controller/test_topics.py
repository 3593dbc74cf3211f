from __future__ import annotations

import uuid

import pytest

from headwater.controller.topics import plan_create_partitions, plan_create_topic, validate_topic_name
from headwater.metadata.image import BrokerInfo, ClusterImage, PartitionState, TopicImage
from headwater.protocol.errors import ErrorCode, KafkaError


def image(n: int = 3) -> ClusterImage:
    brokers = {i: BrokerInfo(i, "127.0.0.1", 9000 + i) for i in range(1, n + 1)}
    return ClusterImage("cid", 1, brokers, {})


def create(img: ClusterImage, name: str = "t", partitions: int = 3, rf: int = 2, assignments=None, configs=None) -> TopicImage:
    return plan_create_topic(img, name, partitions, rf, assignments or {}, configs or {},
                             default_partitions=1, default_replication_factor=1, start_index=0, shift=0)


def test_create_uses_defaults_and_places_replicas() -> None:
    topic = plan_create_topic(image(), "t", -1, -1, {}, {}, default_partitions=4, default_replication_factor=2,
                              start_index=0, shift=0)
    assert len(topic.partitions) == 4
    assert all(len(s.replicas) == 2 and s.leader == s.replicas[0] and s.isr == s.replicas for s in topic.partitions.values())


@pytest.mark.parametrize(
    ("name", "ok"),
    [("a.b_c-1", True), ("", False), (".", False), ("..", False), ("x" * 250, False), ("bad name", False), ("ü", False)],
)
def test_topic_names(name: str, ok: bool) -> None:
    if ok:
        validate_topic_name(name)
    else:
        with pytest.raises(KafkaError) as err:
            validate_topic_name(name)
        assert err.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_existing_topic() -> None:
    img = image()
    img = img.with_topic(create(img))
    with pytest.raises(KafkaError) as err:
        create(img)
    assert err.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert err.value.message == "Topic 't' already exists."


def test_manual_assignment_validation() -> None:
    img = image()
    topic = create(img, partitions=-1, rf=-1, assignments={0: [1, 2], 1: [2, 3]})
    assert topic.partitions[1].replicas == (2, 3)
    for bad in ({0: [1, 1]}, {0: [9]}, {0: []}, {0: [1], 1: [1, 2]}, {1: [1]}):
        with pytest.raises(KafkaError) as err:
            create(img, partitions=-1, rf=-1, assignments=bad)
        assert err.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT, bad


def test_bad_config_rejected() -> None:
    with pytest.raises(KafkaError) as err:
        create(image(), configs={"retention.ms": "soon"})
    assert err.value.code == ErrorCode.INVALID_CONFIG
    with pytest.raises(KafkaError) as err:
        create(image(), configs={"no.such.key": "1"})
    assert err.value.code == ErrorCode.INVALID_CONFIG


def test_create_partitions() -> None:
    img = image()
    img = img.with_topic(create(img, partitions=2, rf=2))
    grown = plan_create_partitions(img, "t", 5, None, start_index=0, shift=0)
    assert sorted(grown.partitions) == [0, 1, 2, 3, 4]
    assert grown.partitions[0] == img.topics["t"].partitions[0]
    for count, code in ((2, ErrorCode.INVALID_PARTITIONS), (1, ErrorCode.INVALID_PARTITIONS)):
        with pytest.raises(KafkaError) as err:
            plan_create_partitions(img, "t", count, None, start_index=0, shift=0)
        assert err.value.code == code
    with pytest.raises(KafkaError) as err:
        plan_create_partitions(img, "t", 3, [[1, 2], [2, 3]], start_index=0, shift=0)
    assert err.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    with pytest.raises(KafkaError) as err:
        plan_create_partitions(img, "nope", 3, None, start_index=0, shift=0)
    assert err.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_create_partitions_refused_during_reassignment() -> None:
    img = image()
    moving = TopicImage("m", uuid.uuid4(), {0: PartitionState((1, 2), 1, 0, (1, 2), adding_replicas=(2,))})
    img = img.with_topic(moving)
    with pytest.raises(KafkaError) as err:
        plan_create_partitions(img, "m", 2, None, start_index=0, shift=0)
    assert err.value.code == ErrorCode.REASSIGNMENT_IN_PROGRESS
