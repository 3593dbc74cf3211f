"""OffsetCommit to a topic or partition that does not exist.

Kafka's ``KafkaApis.handleOffsetCommitRequest`` (3.9) checks, after the group and topic ACLs and
before the group coordinator sees anything, that each topic is in the broker's metadata cache and
each partition exists: every partition of an unknown topic, and an unknown partition of a known
topic, answers UNKNOWN_TOPIC_OR_PARTITION (3) and no offset is stored for it. kafka-python's and
the Java admin client's ``alter_consumer_group_offsets`` send the same OffsetCommit (simple-group
form: generation -1, empty member id).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from hw_support import RawConnection, create_topic
from kafka.protocol.consumer.group import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

from headwater.admin.local import BrokerProcess

UNKNOWN_TOPIC_OR_PARTITION = 3


def test_commit_to_unknown_topic_or_partition_is_refused_per_partition(
        broker: BrokerProcess, topic_name: Callable[..., str]) -> None:
    known = create_topic(broker.bootstrap, topic_name(), 2)
    missing = topic_name("missing")
    group = f"g-{uuid.uuid4().hex[:6]}"
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    with RawConnection(broker.bootstrap) as conn:
        # The offsets topic exists once a coordinator was found.
        for _ in range(50):
            found = conn.request(FindCoordinatorRequest(version=3, key=group, key_type=0), FindCoordinatorResponse, 3)
            if found.error_code == 0:
                break
        assert found.error_code == 0

        def part(index: int, offset: int) -> object:
            return P(partition_index=index, committed_offset=offset, committed_leader_epoch=-1,
                     committed_metadata="")

        resp = conn.request(OffsetCommitRequest(
            version=8, group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            topics=[T(name=known, partitions=[part(0, 5), part(7, 9)]), T(name=missing, partitions=[part(0, 3)])]),
            OffsetCommitResponse, 8)
        codes = {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}
        assert codes == {(known, 0): 0, (known, 7): UNKNOWN_TOPIC_OR_PARTITION, (missing, 0): UNKNOWN_TOPIC_OR_PARTITION}

        FT = OffsetFetchRequest.OffsetFetchRequestTopic
        fetched = conn.request(OffsetFetchRequest(version=7, group_id=group, topics=[
            FT(name=known, partition_indexes=[0, 7]), FT(name=missing, partition_indexes=[0])], require_stable=False),
            OffsetFetchResponse, 7)
        stored = {(t.name, p.partition_index): p.committed_offset for t in fetched.topics for p in t.partitions}
        assert stored == {(known, 0): 5, (known, 7): -1, (missing, 0): -1}
