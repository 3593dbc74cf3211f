"""KIP-1066: automatic placement leaves out brokers whose log dirs are all cordoned.

Expected behaviour (Kafka 4.3): ``ClusterControlManager.usableBrokers`` skips a registration without
``BrokerRegistration.hasUncordonedDirs``, so CreateTopics and CreatePartitions never place a replica
there; with too few usable brokers they fail with INVALID_REPLICATION_FACTOR
(``CordonedLogDirsIntegrationTest.testCordonUncordonLogDirs`` expects ``InvalidReplicationFactorException``).
A manual assignment may still name a cordoned broker (Kafka 4.3.1 does not refuse it). The message is
ZooKeeper-mode Kafka's ``AdminUtils.assignReplicasToBrokers`` one, counting the usable brokers.
"""

from __future__ import annotations

import pytest

from headwater.controller.topics import plan_create_partitions, plan_create_topic
from headwater.metadata.image import BrokerInfo, ClusterImage
from headwater.protocol.errors import ErrorCode, KafkaError


def image(cordoned: set[int], n: int = 4, racks: bool = False) -> ClusterImage:
    brokers = {i: BrokerInfo(i, "127.0.0.1", 9000 + i, f"r{i % 2}" if racks else None, (), i in cordoned)
               for i in range(1, n + 1)}
    return ClusterImage("cid", 1, brokers, {})


@pytest.mark.parametrize("racks", [False, True])
def test_cordoned_brokers_get_no_new_replicas(racks: bool) -> None:
    img = image({2, 3}, racks=racks)
    for start in range(4):
        topic = plan_create_topic(img, "t", 8, 2, {}, {}, default_partitions=1, default_replication_factor=1,
                                  start_index=start, shift=start)
        assert {b for s in topic.partitions.values() for b in s.replicas} == {1, 4}
        grown = plan_create_partitions(img.with_topic(topic), "t", 12, None, start_index=start, shift=0)
        assert {b for p, s in grown.partitions.items() if p >= 8 for b in s.replicas} == {1, 4}


def test_too_few_usable_brokers_is_invalid_replication_factor() -> None:
    with pytest.raises(KafkaError) as refused:
        plan_create_topic(image({1, 2, 3, 4}), "t", 1, 1, {}, {}, default_partitions=1, default_replication_factor=1,
                          start_index=0, shift=0)
    assert (refused.value.code, refused.value.message) == (
        ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor: 1 larger than available brokers: 0.")
    topic = plan_create_topic(image(set()), "t", 1, 2, {}, {}, default_partitions=1, default_replication_factor=1,
                              start_index=0, shift=0)
    with pytest.raises(KafkaError) as refused:
        plan_create_partitions(image({1, 2, 3}).with_topic(topic), "t", 2, None, start_index=0, shift=0)
    assert (refused.value.code, refused.value.message) == (
        ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor: 2 larger than available brokers: 1.")
    img = image({1, 2})
    with pytest.raises(KafkaError) as refused:
        plan_create_topic(img, "u", 1, 3, {}, {}, default_partitions=1, default_replication_factor=1,
                          start_index=0, shift=0)
    assert refused.value.message == "Replication factor: 3 larger than available brokers: 2."


def test_a_manual_assignment_may_name_a_cordoned_broker() -> None:
    topic = plan_create_topic(image({1, 2, 3, 4}), "t", -1, -1, {0: [1, 2]}, {}, default_partitions=1,
                              default_replication_factor=1, start_index=0, shift=0)
    assert topic.partitions[0].replicas == (1, 2)
