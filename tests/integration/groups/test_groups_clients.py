"""Consumer groups on one broker with real clients: confluent-kafka, kafka-python and ``kcat -G``.

One group of three different clients shares a 12-partition topic; kafka-python leaves, another
kafka-python member joins. After each rebalance every partition belongs to exactly one member
(as DescribeGroups reports the leader's assignment), every produced offset is consumed, and since
all members commit before each change, no offset below a committed position is read twice: they
continue from the committed offsets. A second test kills the broker with SIGKILL and finds the
committed offsets after restart. A third shows that a static member (group.instance.id) restarting
within its session timeout takes its old place without a rebalance.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from group_support import (
    ConfluentMember,
    KafkaPythonMember,
    KcatMember,
    Member,
    committed,
    produce,
    wait_assignment,
    wait_for,
)
from hw_support import create_topic

from headwater.admin.local import BrokerProcess

GROUP_PROPS = {"offsets.topic.num.partitions": "3", "group.initial.rebalance.delay.ms": "0"}
PARTITIONS = 12
PER_ROUND = 1200  # 100 per partition


def _wait_committed(bootstrap: str, group: str, topic: str, per_partition: int) -> None:
    want = dict.fromkeys(range(PARTITIONS), per_partition)
    wait_for(lambda: committed(bootstrap, group, topic, PARTITIONS) == want, 60,
             f"{group} committed {per_partition} in every partition")


def test_three_clients_share_a_topic_through_a_leave_and_a_join(
        broker_factory: Callable[..., BrokerProcess], topic_name: Callable[..., str]) -> None:
    b = broker_factory(GROUP_PROPS)
    topic = create_topic(b.bootstrap, topic_name(), PARTITIONS)
    group = f"mixed-{topic}"
    produce(b.bootstrap, topic, PARTITIONS, PER_ROUND)
    members: list[Member] = []
    everyone: list[Member] = []
    try:
        for m in (ConfluentMember(b.bootstrap, group, topic).start(), KafkaPythonMember(b.bootstrap, group, topic).start(),
                  KcatMember(b.bootstrap, group, topic)):
            members.append(m)
            everyone.append(m)
        first = wait_assignment(b.bootstrap, group, 3, PARTITIONS)
        assert {k.split("/")[0] for k in first} == {"confluent-member", "kafka-python-member", "kcat-member"}
        _wait_committed(b.bootstrap, group, topic, 100)

        leaver = members.pop(1)
        leaver.stop()
        second = wait_assignment(b.bootstrap, group, 2, PARTITIONS)
        assert {k.split("/")[0] for k in second} == {"confluent-member", "kcat-member"}
        produce(b.bootstrap, topic, PARTITIONS, PER_ROUND)
        _wait_committed(b.bootstrap, group, topic, 200)

        joiner = KafkaPythonMember(b.bootstrap, group, topic).start()
        members.append(joiner)
        everyone.append(joiner)
        third = wait_assignment(b.bootstrap, group, 3, PARTITIONS)
        assert {k.split("/")[0] for k in third} == {"confluent-member", "kafka-python-member", "kcat-member"}
        produce(b.bootstrap, topic, PARTITIONS, PER_ROUND)
        _wait_committed(b.bootstrap, group, topic, 300)
    finally:
        for m in members:
            m.stop()
    consumed = [x for m in everyone for x in m.snapshot()]
    for p in range(PARTITIONS):
        assert {o for q, o in consumed if q == p} == set(range(300)), f"partition {p}: an offset was skipped"
    # Everything below 200 was committed before the last change of membership: read exactly once.
    again = sorted(k for k, n in Counter(consumed).items() if n > 1 and k[1] < 200)
    assert not again, f"read twice although committed: {again[:10]}"
    assert any(o >= 200 for _p, o in joiner.snapshot()), "the member that joined consumed nothing"
    assert not [e for m in everyone for e in m.errors]


def test_committed_offsets_survive_kill9(broker_factory: Callable[..., BrokerProcess],
                                         topic_name: Callable[..., str]) -> None:
    b = broker_factory(GROUP_PROPS)
    topic = create_topic(b.bootstrap, topic_name(), 4)
    group = f"crash-{topic}"
    produce(b.bootstrap, topic, 4, 400)
    m = ConfluentMember(b.bootstrap, group, topic).start()
    try:
        want = dict.fromkeys(range(4), 100)
        wait_for(lambda: committed(b.bootstrap, group, topic, 4) == want, 60, "offsets committed")
    finally:
        m.stop()
    b.kill9()
    b.start()
    assert wait_for(lambda: committed(b.bootstrap, group, topic, 4), 30, "offsets after restart") == want
    # A member of the same group resumes there: it reads only what came after.
    produce(b.bootstrap, topic, 4, 40)
    m2 = ConfluentMember(b.bootstrap, group, topic).start()
    try:
        wait_for(lambda: len(m2.snapshot()) >= 40, 60, "the new messages")
    finally:
        m2.stop()
    assert sorted(o for _p, o in m2.snapshot()) == sorted([100 + i for i in range(10)] * 4)


def test_static_member_restart_does_not_rebalance(broker_factory: Callable[..., BrokerProcess],
                                                  topic_name: Callable[..., str]) -> None:
    """librdkafka static members (group.instance.id) do not leave on close; one restarting within
    its session timeout takes its old place without a rebalance: the other member keeps its partitions."""
    b = broker_factory(GROUP_PROPS)
    topic = create_topic(b.bootstrap, topic_name(), 4)
    group = f"static-{topic}"
    revoked: list[int] = []
    steady = ConfluentMember(b.bootstrap, group, topic, **{"group.instance.id": "steady", "session.timeout.ms": 10000})
    steady.on_revoke = lambda tps: revoked.append(len(tps))
    steady.start()
    bouncing = ConfluentMember(b.bootstrap, group, topic, **{"group.instance.id": "bouncing", "session.timeout.ms": 10000})
    bouncing.start()
    restarted = None
    try:
        before = wait_assignment(b.bootstrap, group, 2, 4)
        revoked.clear()
        bouncing.stop()
        restarted = ConfluentMember(b.bootstrap, group, topic,
                                    **{"group.instance.id": "bouncing", "session.timeout.ms": 10000}).start()
        produce(b.bootstrap, topic, 4, 40)
        wait_for(lambda: len(restarted.snapshot()) >= 20, 30, "the restarted member consuming its partitions")
        after = wait_assignment(b.bootstrap, group, 2, 4)
        assert sorted(map(sorted, before.values())) == sorted(map(sorted, after.values()))
        assert revoked == [], "the other member was rebalanced"
    finally:
        for m in (steady, restarted):
            if m is not None:
                m.stop()
