"""KIP-1066 ``cordoned.log.dirs`` on a standalone broker: which log dir a new partition goes to, and
CreateTopics / auto-creation when every dir is cordoned.

Expected behaviour (apache/kafka trunk, KIP-1066, Kafka 4.3):
- ``LogManager.nextLogDirs``: a new partition goes to the uncordoned log dir holding the fewest.
- ``CordonedLogDirsIntegrationTest.testStaticCordonUncordonLogDirs``: with ``cordoned.log.dirs=*`` in the
  broker's properties CreateTopics fails with InvalidReplicationFactorException, and after the config is
  set to an empty list dynamically it succeeds.
- A Metadata request that auto-creates the topic carries the creation's error for it
  (``AutoTopicCreationManager.createTopicsInZk``, 3.9: errors other than TOPIC_ALREADY_EXISTS and
  REQUEST_TIMED_OUT are passed through).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from hw_support import RawConnection
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from headwater.admin.local import BrokerProcess

INVALID_REPLICATION_FACTOR = 38


def set_cordoned(admin: AdminClient, value: str) -> None:
    resource = ConfigResource("broker", "1", incremental_configs=[
        ConfigEntry("cordoned.log.dirs", value, incremental_operation=AlterConfigOpType.SET)])
    next(iter(admin.incremental_alter_configs([resource]).values())).result(30)


def test_new_partitions_go_to_uncordoned_dirs(broker_factory: Callable[..., BrokerProcess], tmp_path: Path,
                                              topic_name: Callable[..., str]) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    broker = broker_factory({"log.dirs": f"{a},{b}"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    set_cordoned(admin, str(a))
    name = topic_name()
    admin.create_topics([NewTopic(name, 4, 1)], operation_timeout=10)[name].result(30)
    assert sorted(p.name for p in b.iterdir() if p.name.startswith(name)) == [f"{name}-{p}" for p in range(4)]
    assert not [p for p in a.iterdir() if p.name.startswith(name)]


def test_every_dir_cordoned_refuses_new_topics_until_uncordoned(broker_factory: Callable[..., BrokerProcess],
                                                                topic_name: Callable[..., str]) -> None:
    broker = broker_factory({"cordoned.log.dirs": "*", "auto.create.topics.enable": "true"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = topic_name()
    try:
        admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=10)[name].result(30)
        raise AssertionError("created on a cordoned broker")
    except KafkaException as exc:
        assert exc.args[0].code() == INVALID_REPLICATION_FACTOR
    with RawConnection(broker.bootstrap) as conn:
        md = conn.request(MetadataRequest(version=9, topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                          allow_auto_topic_creation=True), MetadataResponse, 9)
    assert [(t.name, t.error_code) for t in md.topics] == [(name, INVALID_REPLICATION_FACTOR)]
    set_cordoned(admin, "")  # the dynamic value replaces the static one
    admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=10)[name].result(30)
