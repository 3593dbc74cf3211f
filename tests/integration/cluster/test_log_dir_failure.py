"""A full disk takes one log dir offline, not the broker (issue #10, disk faults).

Broker 1 has two log dirs; the second is a 512 KiB tmpfs, so "disk full" is the kernel's ENOSPC,
not a simulated error. A topic of two partitions, both led by broker 1 (one in each dir), gets
records; then the tmpfs is filled and a record is produced to the partition living there. Broker 1
answers KAFKA_STORAGE_ERROR, takes the dir offline and tells the controller through
/log_dir_event_notification; the controller moves that partition's leadership to broker 2 and
drops broker 1 from its ISR, and the producer's retry lands there. Broker 1 keeps running and
leading the partition in its healthy dir; DescribeLogDirs reports the failed dir with
KAFKA_STORAGE_ERROR and Metadata lists broker 1 as an offline replica. With the space freed and
broker 1 restarted, its replica recovers and rejoins the ISR, and every acknowledged record reads
back. A broker whose only log dir fills up stops, with exit code 1, as Kafka's halts. Needs root
(it mounts a tmpfs), as the chaos tests do.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cluster_support import LocalCluster, run_cli, wait_for
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.protocol.admin import CreateTopicsRequest, DescribeLogDirsRequest

from headwater.admin.client import AdminClient
from headwater.admin.local import BrokerProcess
from headwater.protocol.errors import ErrorCode

TOPIC = "disk"


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    point = tmp_path / "small-disk"
    point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(point)], check=True)
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


def fill(directory: Path) -> Path:
    """Write into ``directory`` until its file system is full; delete the returned file to free it."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as f:  # unbuffered: nothing left to fail at close
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass
    return filler


def produce(bootstrap: str, partition: int, values: list[bytes]) -> list[int]:
    """acks=all, idempotent; returns the acknowledged offsets (fails if any delivery failed)."""
    acked: list[int] = []
    errors: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked.append(msg.offset())  # type: ignore[attr-defined]

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "message.timeout.ms": 60_000, "retry.backoff.ms": 100, "topic.metadata.refresh.interval.ms": 500})
    for v in values:
        p.produce(TOPIC, value=v, partition=partition, on_delivery=on_delivery)
    assert p.flush(60) == 0
    assert not errors, errors
    return acked


def log_dirs(cluster: LocalCluster, broker_id: int) -> dict[str, tuple[int, set[int]]]:
    """dir -> (error code, partitions of TOPIC in it), from the broker's DescribeLogDirs."""
    with AdminClient(cluster.brokers[broker_id].bootstrap, timeout_s=10) as client:
        resp = client.send(DescribeLogDirsRequest, {"topics": None})
    return {r.log_dir: (r.error_code, {p.partition_index for t in r.topics if t.name == TOPIC for p in t.partitions})
            for r in resp.results}


def two_dirs_for_broker_1(cluster: LocalCluster, tmpfs: Path) -> Path:
    """Restart broker 1 with a second log dir, the tmpfs, and create TOPIC's two partitions on
    brokers 1,2,3 (as the controller places them: one in each of broker 1's dirs); return the
    healthy dir."""
    b1 = cluster.brokers[1]
    b1.stop()
    healthy = b1.data_dir / "broker-1-logs"
    b1.props = {**b1.props, "log.dirs": f"{healthy},{tmpfs}"}
    b1.config_path.unlink()
    cluster.restart(1)
    cluster.wait_registered(set(cluster.brokers))
    T = CreateTopicsRequest.CreatableTopic
    A = T.CreatableReplicaAssignment
    with AdminClient(cluster.bootstrap, timeout_s=30) as client:
        resp = client.send_to_controller(CreateTopicsRequest, dict(
            topics=[T(name=TOPIC, num_partitions=-1, replication_factor=-1, configs=[],
                      assignments=[A(partition_index=p, broker_ids=[1, 2, 3]) for p in (0, 1)])],
            timeout_ms=30_000, validate_only=False), lambda r: [t.error_code for t in r.topics])
    assert [t.error_code for t in resp.topics] == [0]
    cluster.wait_full_isr([TOPIC], 2, timeout_s=30)
    return healthy


def test_a_full_log_dir_goes_offline_and_leadership_moves(cluster_factory: Callable[..., LocalCluster],
                                                          tmpfs: Path) -> None:
    cluster = cluster_factory(props={"min.insync.replicas": "2"})
    healthy = two_dirs_for_broker_1(cluster, tmpfs)
    b1 = cluster.brokers[1]
    assert cluster.leaders(TOPIC) == {0: 1, 1: 1}
    dirs = log_dirs(cluster, 1)
    assert dirs[str(healthy)] == (0, {0}) and dirs[str(tmpfs)] == (0, {1}), dirs  # one partition per dir

    before = {p: produce(cluster.bootstrap, p, [b"before-%d-%d" % (p, i) for i in range(20)]) for p in (0, 1)}
    cluster.wait_full_isr([TOPIC], 2, timeout_s=30)

    filler = fill(tmpfs)
    # Bigger than the slack in the segment file's last page, so the write needs space the disk has not.
    after_values = [(b"after-1-%d:" % i).ljust(16_384, b"x") for i in range(5)]
    after = produce(cluster.bootstrap, 1, after_values)  # retried onto the new leader

    states = cluster.partition_states(TOPIC)
    assert states[1]["leader"] != 1 and 1 not in states[1]["isr"], states[1]
    assert states[0]["leader"] == 1 and 1 in states[0]["isr"], "the healthy dir's partition stays with broker 1"
    assert b1.alive, "a failed log dir must not take the broker down"
    dirs = log_dirs(cluster, 1)
    assert dirs[str(tmpfs)][0] == ErrorCode.KAFKA_STORAGE_ERROR and dirs[str(healthy)] == (0, {0}), dirs
    wait_for(lambda: next((line.offline for line in cluster.describe(TOPIC) if line.partition == 1), ()) == (1,),
             15, "broker 1 listed as an offline replica of partition 1")
    # The healthy dir still takes writes from broker 1 as leader.
    more = produce(cluster.bootstrap, 0, [b"more-0-%d" % i for i in range(5)])
    assert "is offline" in b1.log_path.read_text()

    filler.unlink()
    b1.kill9()
    cluster.restart(1)
    cluster.wait_full_isr([TOPIC], 2, timeout_s=60)

    expected = {0: [b"before-0-%d" % i for i in range(20)] + [b"more-0-%d" % i for i in range(5)],
                1: [b"before-1-%d" % i for i in range(20)] + after_values}
    assert sorted(before[0] + more) == list(range(25)) and sorted(before[1] + after) == list(range(25))
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "disk-readback",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in (0, 1)])
        got: dict[int, list[bytes]] = {0: [], 1: []}

        def read() -> bool:
            for msg in consumer.consume(100, timeout=0.5):
                assert msg.error() is None, msg.error()
                got[msg.partition()].append(msg.value())
            return all(len(got[p]) >= 25 for p in (0, 1))

        wait_for(read, 30, "every acknowledged record read back")
        assert got == expected
    finally:
        consumer.close()


def test_a_broker_whose_only_log_dir_fails_stops(broker_factory: Callable[..., BrokerProcess], tmpfs: Path) -> None:
    """As Kafka halts when no log dir is left: the broker answers, then shuts down with exit code 1."""
    broker = broker_factory({"log.dirs": str(tmpfs)})
    with AdminClient(broker.bootstrap, timeout_s=10) as client:
        T = CreateTopicsRequest.CreatableTopic
        resp = client.send(CreateTopicsRequest, dict(
            topics=[T(name=TOPIC, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=10_000, validate_only=False))
        assert [t.error_code for t in resp.topics] == [0]
    produce(broker.bootstrap, 0, [b"first"])
    fill(tmpfs)
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "message.timeout.ms": 2_000})
    p.produce(TOPIC, value=b"x" * 16_384, partition=0)
    p.flush(5)
    assert broker.proc is not None
    assert broker.proc.wait(timeout=30) == 1
    log = broker.log_path.read_text()
    assert "every log dir is offline; shutting down" in log and "Traceback" not in log


def test_self_healing_moves_a_failed_dirs_replicas_to_another_broker(cluster_factory: Callable[..., LocalCluster],
                                                                     tmpfs: Path) -> None:
    """Issue #21's offline-log-dir trigger: past ``self.healing.broker.failure.threshold.ms`` the
    replica in broker 1's failed dir moves to the spare broker 4 (a KIP-455 move, ended by the
    preferred election), while broker 1 keeps its replica in the healthy dir. The controller's audit
    log names what it did."""
    cluster = cluster_factory(4, props={"min.insync.replicas": "2"})
    two_dirs_for_broker_1(cluster, tmpfs)
    b1 = cluster.brokers[1]
    assert log_dirs(cluster, 1)[str(tmpfs)] == (0, {1})  # partition 1 in the dir that will fail
    run_cli("configs", "--bootstrap-server", cluster.bootstrap, "--alter", "--entity-type", "brokers",
            "--entity-default", "--add-config",
            "self.healing.enable=true,self.healing.broker.failure.threshold.ms=2000")
    before = produce(cluster.bootstrap, 1, [b"before-%d" % i for i in range(20)])
    fill(tmpfs)
    after = produce(cluster.bootstrap, 1, [(b"after-%d:" % i).ljust(16_384, b"x") for i in range(5)])

    def healed() -> bool:
        lines = {line.partition: line for line in cluster.describe(TOPIC)}
        return sorted(lines[1].replicas) == [2, 3, 4] and lines[1].full and sorted(lines[0].replicas) == [1, 2, 3]
    wait_for(healed, 60, "partition 1 moved off broker 1's failed dir onto broker 4, partition 0 left alone")
    assert b1.alive
    controller = cluster.controller_id()
    [audit] = list(cluster.data_dir.rglob(f"broker-{controller}-audit.log"))

    def audited() -> list[dict[str, object]]:
        return [json.loads(line) for line in audit.read_text().splitlines()
                if '"Controller:self-healing"' in line]
    wait_for(lambda: {r["api"] for r in audited()} >= {"AlterPartitionReassignments", "ElectLeaders"}, 30,
             "the move and the election in the controller's audit log")
    [move] = [r for r in audited() if r["api"] == "AlterPartitionReassignments"]
    assert move["outcome"] == "allowed" and "failed log dir" in str(move["detail"])
    [name] = [res["name"] for res in move["resources"]]  # type: ignore[attr-defined]
    head, _, target = str(name).partition(" -> ")
    assert head == f"{TOPIC}-1" and sorted(json.loads(target)) == [2, 3, 4], name
    # Every acknowledged record of the moved partition is on its new replicas.
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "healed-readback",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    try:
        consumer.assign([TopicPartition(TOPIC, 1, 0)])
        got: list[int] = []

        def read() -> bool:
            got.extend(msg.offset() for msg in consumer.consume(100, timeout=0.5) if msg.error() is None)
            return len(got) >= 25
        wait_for(read, 30, "every acknowledged record read back")
        assert sorted(got) == sorted(before + after)
    finally:
        consumer.close()
