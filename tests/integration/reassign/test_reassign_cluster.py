"""Live reassignment on a real 4-broker cluster: the tool, kafka-python's admin client, cancel, throttles."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaAdminClient
from kafka.structs import TopicPartition as KTopicPartition

from headwater.admin.cluster import start_cluster, stop_cluster
from headwater.admin.local import free_port, free_port_range
from headwater.cli import main

MESSAGES = 4000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = Path(tmp_path_factory.mktemp("reassign"))
    # Brokers take consecutive ports from the base: all of them must be free, not just the first.
    base = free_port_range(4)
    zookeeper_port = next(p for p in iter(free_port, None) if not base <= p < base + 4)
    state = start_cluster(root, 4, base, zookeeper_port, [], {
        "replica.lag.time.max.ms": "10000", "zookeeper.session.timeout.ms": "6000",
        "log.segment.delete.delay.ms": "0", "file.delete.delay.ms": "0",
    })
    try:
        yield state.bootstrap, root
    finally:
        stop_cluster(root)


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def describe(bootstrap: str, topic: str) -> dict[int, tuple[list[int], list[int], int]]:
    code, out = cli("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", topic)
    if code != 0:  # not in the metadata yet: the brokers learn of a new topic from the controller
        return {}
    parts = {}
    for line in out.splitlines():
        if "\tPartition: " in line:
            f = dict(x.split(": ", 1) for x in line.strip().split("\t"))
            parts[int(f["Partition"])] = ([int(b) for b in f["Replicas"].split(",")], [int(b) for b in f["Isr"].split(",")],
                                          int(f["Leader"]) if f["Leader"] != "none" else -1)
    return parts


def wait_for(predicate: object, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.3)
    raise AssertionError("condition not met in time")


def produce(bootstrap: str, topic: str, start: int, count: int) -> dict[int, list[tuple[int, bytes]]]:
    acked: dict[int, list[tuple[int, bytes]]] = {}

    def cb(err: object, msg: object) -> None:
        assert err is None, err
        acked.setdefault(msg.partition(), []).append((msg.offset(), msg.value()))  # type: ignore[attr-defined]

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(start, start + count):
        p.produce(topic, key=str(i).encode(), value=f"value-{i}".encode() + b"x" * 300, on_delivery=cb)
    assert p.flush(60) == 0
    return acked


def consume_all(bootstrap: str, topic: str, partitions: int) -> dict[int, dict[int, bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False})
    out: dict[int, dict[int, bytes]] = {p: {} for p in range(partitions)}
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    deadline = time.monotonic() + 60
    while any(len(out[p]) < ends[p] for p in out) and time.monotonic() < deadline:
        for m in c.consume(1000, 1.0):
            if m.error() is None:
                out[m.partition()][m.offset()] = m.value()
    c.close()
    return out


def test_tool_moves_a_topic_under_load_and_deletes_old_replicas(cluster: tuple[str, Path]) -> None:
    bootstrap, root = cluster
    assert cli("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "moving",
               "--replica-assignment", "1:2:3,2:3:1", "--config", "min.insync.replicas=2")[0] == 0
    wait_for(lambda: len(describe(bootstrap, "moving")) == 2)
    acked = produce(bootstrap, "moving", 0, MESSAGES)
    # KIP-455's example [1,2,3] -> [4,3,2], and [2,3,1] -> [4,1,2].
    plan = root / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "moving", "partition": 0, "replicas": [4, 3, 2]},
        {"topic": "moving", "partition": 1, "replicas": [4, 1, 2]}]}))
    code, out = cli("reassign", "--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file", str(plan))
    assert code == 0, out
    assert "Save this to use as the --reassignment-json-file option during rollback" in out
    assert '{"topic":"moving","partition":0,"replicas":[1,2,3],"log_dirs":["any","any","any"]}' in out
    assert "Successfully started partition reassignments for moving-0,moving-1" in out
    # Keep producing while it moves.
    more = produce(bootstrap, "moving", MESSAGES, MESSAGES)

    def done() -> bool:
        code, out = cli("reassign", "--bootstrap-server", bootstrap, "--verify", "--reassignment-json-file", str(plan))
        return code == 0 and "still in progress" not in out

    wait_for(done)
    code, out = cli("reassign", "--bootstrap-server", bootstrap, "--verify", "--reassignment-json-file", str(plan))
    assert "Reassignment of partition moving-0 is completed." in out
    assert "Reassignment of partition moving-1 is completed." in out
    wait_for(lambda: all(len(isr) == 3 for _r, isr, _l in describe(bootstrap, "moving").values()))
    state = describe(bootstrap, "moving")
    assert state[0][0] == [4, 3, 2] and state[0][2] == 4  # the leader moved off broker 1 to the first target
    assert state[1][0] == [4, 1, 2]
    # Every acknowledged record, before and during the move, is there at its offset.
    read = consume_all(bootstrap, "moving", 2)
    for batch in (acked, more):
        for p, records in batch.items():
            for offset, value in records:
                assert read[p][offset] == value
    # The removed replicas' directories are gone (renamed for deletion, then removed).
    wait_for(lambda: not list((root / "broker-1-logs").glob("moving-0*")))
    wait_for(lambda: not list((root / "broker-3-logs").glob("moving-1*")))
    assert (root / "broker-4-logs" / "moving-0").is_dir()
    assert cli("reassign", "--bootstrap-server", bootstrap, "--list")[1].strip() == "No partition reassignments found."


def test_kafka_python_alter_list_and_cancel(cluster: tuple[str, Path]) -> None:
    bootstrap, _root = cluster
    assert cli("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "cancelled",
               "--replica-assignment", "1:2:3")[0] == 0
    wait_for(lambda: len(describe(bootstrap, "cancelled")) == 1)
    # Throttle broker 4 to a crawl so the move is still open when it is cancelled.
    produce(bootstrap, "cancelled", 0, MESSAGES)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        assert not admin.list_partition_reassignments()
        cli("configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "brokers", "--entity-name", "4",
            "--add-config", "follower.replication.throttled.rate=1")
        cli("configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "topics", "--entity-name",
            "cancelled", "--add-config", "follower.replication.throttled.replicas=[0:4]")
        tp = KTopicPartition("cancelled", 0)
        admin.alter_partition_reassignments({tp: [3, 4, 2]})
        listed = admin.list_partition_reassignments()
        assert tp in listed
        ongoing = listed[tp]
        assert list(ongoing["replicas"] if isinstance(ongoing, dict) else ongoing.replicas)[:3] == [3, 4, 2]
        # Cancel with None: back to the original set.
        admin.alter_partition_reassignments({tp: None})
        wait_for(lambda: not admin.list_partition_reassignments())
        # The original set comes back (in the order ZooKeeper-mode Kafka leaves it: RS minus AR).
        wait_for(lambda: sorted(describe(bootstrap, "cancelled")[0][0]) == [1, 2, 3])
        assert 4 not in describe(bootstrap, "cancelled")[0][1]
        # Cancelling again: nothing is in progress.
        from kafka.errors import NoReassignmentInProgressError

        # kafka-python returns per-partition errors rather than raising them.
        result = admin.alter_partition_reassignments({tp: None})
        assert result[tp] is NoReassignmentInProgressError or isinstance(result[tp], NoReassignmentInProgressError)
    finally:
        admin.close()


def test_legacy_znode_reassigns_and_is_removed_when_done(cluster: tuple[str, Path]) -> None:
    """Old tools write /admin/reassign_partitions (JSON version 1); the controller moves the
    partitions and removes each from the znode as it completes, deleting the znode at the end."""
    from kazoo.client import KazooClient

    from headwater.admin.cluster import ClusterState

    bootstrap, root = cluster
    assert cli("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "legacy",
               "--replica-assignment", "1:2")[0] == 0
    wait_for(lambda: len(describe(bootstrap, "legacy")) == 1)
    produce(bootstrap, "legacy", 0, 500)
    zk = KazooClient(hosts=f"127.0.0.1:{ClusterState.load(root).zookeeper_port}")
    zk.start(timeout=10)
    try:
        zk.create("/admin/reassign_partitions",
                  b'{"version":1,"partitions":[{"topic":"legacy","partition":0,"replicas":[3,4]}]}', makepath=True)
        wait_for(lambda: describe(bootstrap, "legacy")[0][0] == [3, 4])
        wait_for(lambda: zk.exists("/admin/reassign_partitions") is None)
        data, _stat = zk.get("/brokers/topics/legacy")
        doc = json.loads(data)
        assert doc["partitions"] == {"0": [3, 4]}
        assert not doc.get("adding_replicas") and not doc.get("removing_replicas")
    finally:
        zk.stop()
        zk.close()
