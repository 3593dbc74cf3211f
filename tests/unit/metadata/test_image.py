from __future__ import annotations

import json
import uuid

from headwater.metadata.image import (
    BrokerInfo,
    ClusterImage,
    PartitionState,
    TopicImage,
    image_from_json,
    image_to_json,
    topic_assignment_json,
)


def test_roundtrip_keeps_everything() -> None:
    brokers = {1: BrokerInfo(1, "h", 1)}
    topic = TopicImage("t", uuid.uuid4(), {0: PartitionState((1, 2, 3), 2, 7, (2, 3), adding_replicas=(3,), removing_replicas=(1,)),
                                            1: PartitionState((1,), 1, 0, (1,))}, {"retention.ms": "5"})
    img = ClusterImage("cid", 1, brokers, {"t": topic}, next_producer_id=3000)
    back = image_from_json(image_to_json(img), 1, brokers)
    assert back == img


def test_topic_znode_shape() -> None:
    """/brokers/topics/<t> as Kafka writes it: partitions map, adding/removing only where non-empty."""
    topic = TopicImage("t", uuid.UUID(int=1), {0: PartitionState((4, 3, 2, 1), 1, 1, (1, 2, 3), adding_replicas=(4,),
                                                                   removing_replicas=(1,)), 1: PartitionState((2,), 2, 0, (2,))})
    doc = json.loads(json.dumps(topic_assignment_json(topic)))
    assert doc["version"] == 3
    assert doc["partitions"] == {"0": [4, 3, 2, 1], "1": [2]}
    assert doc["adding_replicas"] == {"0": [4]}
    assert doc["removing_replicas"] == {"0": [1]}
    assert len(doc["topic_id"]) == 22  # Kafka's base64 form without padding
