"""What the controller's fast paths at 10,000 partitions must keep exactly as the slow ones were.

The partition state znode is written and read with a direct format and one regex (a failover
reads and writes one per partition); the bytes and values must be those of the JSON path.
"""

from __future__ import annotations

import json

import pytest
from controller_fixtures import elect, requests, run, snapshot, tp

from headwater.controller.effects import (
    ControllerResult,
    LeaderAndIsrRequest,
    ListPartitionReassignmentsResponse,
    PartitionStateWritten,
    TopicAssignmentWritten,
    UpdateMetadataRequest,
)
from headwater.controller.events import (
    AlterPartitionItem,
    AlterPartitionReassignmentsRequested,
    AlterPartitionReceived,
    ListPartitionReassignmentsRequested,
)
from headwater.controller.znodes import PATHS, ReplicaAssignment, ZkSnapshot, encode_topic
from headwater.metadata import zk
from headwater.metadata.zk import PartitionStateZNode
from headwater.protocol.errors import ErrorCode


@pytest.mark.parametrize("state", [
    PartitionStateZNode(1, 7, (1, 2), 3, 0),
    PartitionStateZNode(-1, 0, (3,), 12, 1),
    PartitionStateZNode(1002, 2**31 - 1, (1002, 7, 99), 0, 0),
])
def test_partition_state_bytes_equal_the_json_encoding(state: PartitionStateZNode) -> None:
    data = zk.encode_partition_state(state)
    assert data == json.dumps(zk.partition_state_json(state), separators=(",", ":")).encode()
    assert zk.decode_partition_state("t", 0, data) == state


@pytest.mark.parametrize("data", [
    b'{"leader":1,"controller_epoch":3,"version":1,"isr":[1,2],"leader_epoch":7}',   # other key order
    b'{"controller_epoch": 3, "leader": 1, "version": 1, "leader_epoch": 7, "isr": [1, 2]}',  # spaces
    b'{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":7,"isr":[1,2],"leader_recovery_state":0}',
])
def test_other_spellings_of_a_state_decode_the_same(data: bytes) -> None:
    assert zk.decode_partition_state("t", 0, data) == PartitionStateZNode(1, 7, (1, 2), 3, 0)


@pytest.mark.parametrize("data", [
    b'{"controller_epoch":3,"leader":1,"version":2,"leader_epoch":7,"isr":[1,2]}',
    b'{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":7,"isr":[1,2]}x',
    b'{"controller_epoch":3,"leader":"1","version":1,"leader_epoch":7,"isr":[1,2]}',
])
def test_malformed_states_are_still_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        zk.decode_partition_state("t", 0, data)


# --- the controller core with many partitions ----------------------------------------------------

PER_TOPIC = 600


def big_snapshot(brokers: tuple[int, ...] = (1, 2, 3), topics: int = 2) -> ZkSnapshot:
    """``topics`` topics of PER_TOPIC partitions, RF 3 over brokers 1-3, every ISR full."""
    parts = {f"t{i}": {p: tuple(1 + (p + k) % 3 for k in range(3)) for p in range(PER_TOPIC)} for i in range(topics)}
    states = {tp(name, p): (r[0], 0, r, 0) for name, ps in parts.items() for p, r in ps.items()}
    return snapshot(brokers, parts, states)


def kinds(result: ControllerResult, broker: int) -> list[str]:
    return [type(r).__name__ for r in result.requests if r.broker_id == broker]


def test_a_failover_with_every_broker_alive_writes_nothing() -> None:
    _ctl, result = elect(big_snapshot(), broker_id=2)
    assert result.writes == ()
    # Every broker still learns every partition: one LeaderAndIsr and one UpdateMetadata each.
    assert {b: len(r.partitions) for b, r in requests(result, LeaderAndIsrRequest).items()} == {1: 1200, 2: 1200, 3: 1200}


def test_a_failover_writes_only_partitions_that_change_and_sends_metadata_first() -> None:
    snap = big_snapshot(brokers=(2, 3))     # broker 1 (the old controller) died with its session
    ctl, result = elect(snap, broker_id=2)
    assert len(result.writes) == 2 * PER_TOPIC   # every ISR loses broker 1; a third also get a new leader
    assert all(1 not in st.isr and st.leader in (2, 3) for st in ctl.states.values())
    # 1,200 partitions per broker: an UpdateMetadata of the live brokers alone goes first, so that
    # Metadata names the new controller while the broker works through the LeaderAndIsr.
    for b in (2, 3):
        assert kinds(result, b) == ["UpdateMetadataRequest", "LeaderAndIsrRequest", "UpdateMetadataRequest"]
        first, _, last = (r for r in result.requests if r.broker_id == b)
        assert isinstance(first, UpdateMetadataRequest) and isinstance(last, UpdateMetadataRequest)
        assert first.partitions == () and [x.broker_id for x in first.live_brokers] == [2, 3]
        assert len(last.partitions) == 2 * PER_TOPIC
    # Entries are shared between the brokers' requests, not built per broker.
    lai = requests(result, LeaderAndIsrRequest)
    assert all(a is b for a, b in zip(lai[2].partitions, lai[3].partitions, strict=True))


def test_a_small_failover_keeps_leader_and_isr_first() -> None:
    _ctl, result = elect(snapshot((2, 3), {"t": {0: (1, 2, 3)}}, {tp("t"): (1, 0, (1, 2, 3), 0)}), broker_id=2)
    assert kinds(result, 2) == ["LeaderAndIsrRequest", "UpdateMetadataRequest"]


def test_one_request_reassigning_a_topic_writes_its_znode_once() -> None:
    ctl, _ = elect(big_snapshot(brokers=(1, 2, 3, 4)))
    plan = tuple((name, p, (1 + p % 3, 4)) for name in ("t0", "t1") for p in range(PER_TOPIC))
    result = run(ctl, AlterPartitionReassignmentsRequested(plan))
    assert all(r.error == ErrorCode.NONE for r in result.response.partitions)  # type: ignore[union-attr]
    topic_writes = [w for w in result.writes if isinstance(w.change, TopicAssignmentWritten)]
    assert [w.path for w in topic_writes] == [PATHS.topic("t0"), PATHS.topic("t1")]
    for w in topic_writes:                   # the bytes carry every partition's change
        assert w.data == encode_topic(w.change.topic)  # type: ignore[union-attr]
        assert w.standalone                  # only adds replicas: the shell may pipeline it with the bumps
    ongoing = ctl.reassignments()
    assert len(ongoing) == 2 * PER_TOPIC
    for (name, p, target) in plan:
        original = tuple(1 + (p + k) % 3 for k in range(3))
        assert ongoing[tp(name, p)].replicas == ReplicaAssignment(original).reassign_to(target).replicas
        assert ongoing[tp(name, p)].adding_replicas == (4,)
    listed = run(ctl, ListPartitionReassignmentsRequested()).response
    assert isinstance(listed, ListPartitionReassignmentsResponse)
    assert [(o.topic, o.partition, o.replicas, o.adding_replicas, o.removing_replicas) for o in listed.partitions] == [
        (r.topic, r.partition, r.replicas, r.adding_replicas, r.removing_replicas) for _, r in sorted(ongoing.items())]
    some = run(ctl, ListPartitionReassignmentsRequested((("t1", 5), ("t0", 7), ("t1", 5), ("nope", 0)))).response
    assert [(o.topic, o.partition) for o in some.partitions] == [("t1", 5), ("t0", 7)]  # type: ignore[union-attr]


def test_a_bulk_replacement_shrinks_each_isr_before_the_topic_write_that_drops_the_replica() -> None:
    ctl, _ = elect(big_snapshot(brokers=(1, 2, 3, 4, 5, 6), topics=1))
    run(ctl, AlterPartitionReassignmentsRequested(tuple(("t0", p, (4, 5, 3)) for p in range(PER_TOPIC))))
    # Broker 4 catches up and joins every ISR (one AlterPartition per leader); 5 does not, so all stay in flight.
    by_leader: dict[int, list[AlterPartitionItem]] = {}
    for p in range(PER_TOPIC):
        st = ctl.states[tp("t0", p)]
        by_leader.setdefault(st.leader, []).append(
            AlterPartitionItem("t0", p, st.leader_epoch, (*st.isr, 4), st.partition_epoch))
    for leader, items in by_leader.items():
        run(ctl, AlterPartitionReceived(leader, 100 + leader, tuple(items)))
    assert all(4 in st.isr for st in ctl.states.values()) and len(ctl.reassignments()) == PER_TOPIC
    # The replacement drops 4 and 5 (adding replicas of the replaced reassignment): 4 leaves each ISR first.
    result = run(ctl, AlterPartitionReassignmentsRequested(tuple(("t0", p, (6, 3, 2)) for p in range(PER_TOPIC))))
    order = [w.path for w in result.writes]
    assert order.count(PATHS.topic("t0")) == 1
    topic_at = order.index(PATHS.topic("t0"))
    assert not result.writes[topic_at].standalone  # it drops replicas: it must wait for the shrinks
    shrinks = [i for i, w in enumerate(result.writes)
               if isinstance(w.change, PartitionStateWritten) and 4 not in w.change.state.isr]
    assert len(shrinks) >= PER_TOPIC and min(shrinks) < topic_at
    first_shrink = {w.path: i for i, w in reversed(list(enumerate(result.writes)))
                    if isinstance(w.change, PartitionStateWritten) and 4 not in w.change.state.isr}
    assert max(first_shrink.values()) < topic_at
    original = {p: tuple(1 + (p + k) % 3 for k in range(3)) for p in range(PER_TOPIC)}
    for p in range(PER_TOPIC):
        a = ctl.topics["t0"].partitions[p]
        assert a == ReplicaAssignment(original[p]).reassign_to((6, 3, 2))   # the original set is kept
