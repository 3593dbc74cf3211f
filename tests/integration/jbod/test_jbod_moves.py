"""Moves of replicas between the log dirs of one broker (issue #17 part 6, Kafka's KIP-113), on real
processes with real clients.

Expectations from Kafka 3.9: ``ReplicaManager.alterReplicaLogDirs`` (error codes; REPLICA_NOT_AVAILABLE
for a replica not on the broker, kept "for compatibility"), ``ReplicaAlterLogDirsThread`` (the future
log copies from the current one while it takes appends, then replaces it), ``LogManager`` (the
``<topic>-<partition>.<id>-future`` dir; future logs load at start-up and their move resumes,
``ReplicaManager.maybeAddLogDirFetchers``), ``ReplicaManager.describeLogDirs`` (future replicas with
isFuture and their lag), the ``replica.alter.log.dirs.io.max.bytes.per.second`` quota, and
``ReassignPartitionsCommand`` (``log_dirs`` in a plan, the ``--verify`` lines). kafka-python's
``KafkaAdminClient.alter_replica_log_dirs`` is used unchanged (confluent-kafka has no such call).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cluster_support import LocalCluster, run_cli, wait_for
from kafka import KafkaAdminClient, TopicPartitionReplica
from kafka import errors as kerrors
from kafka.protocol.admin import CreateTopicsRequest, DescribeLogDirsRequest, IncrementalAlterConfigsRequest
from reassign_support import LiveProducer, check_acked, produce_bulk, read_topic

from headwater.admin.client import AdminClient
from headwater.protocol.config_resources import OP_DELETE, OP_SET, RESOURCE_BROKER

THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"
FUTURE_DIR = re.compile(r"^(?P<tp>.+-\d+)\.[0-9a-f]{32}-future$")


def log_dirs_of(root: Path, broker: int) -> tuple[Path, Path]:
    """The two log dirs ``conftest.jbod_cluster`` gives each broker."""
    return root / f"broker-{broker}-a", root / f"broker-{broker}-b"


@dataclass
class Dirs:
    """Where one partition lives on one broker, from its DescribeLogDirs."""

    current: str | None = None
    size: int = 0
    future: str | None = None
    future_size: int = 0
    future_lag: int = -1


def dirs(cluster: LocalCluster, broker: int, topic: str, partition: int = 0) -> Dirs:
    with AdminClient(cluster.brokers[broker].bootstrap, timeout_s=10) as client:
        resp = client.send(DescribeLogDirsRequest, {"topics": [
            DescribeLogDirsRequest.DescribableLogDirTopic(topic=topic, partitions=[partition])]})
    out = Dirs()
    for r in resp.results:
        for t in r.topics:
            for p in t.partitions:
                if t.name != topic or p.partition_index != partition:
                    continue
                if p.is_future_key:
                    out.future, out.future_size, out.future_lag = r.log_dir, p.partition_size, p.offset_lag
                else:
                    out.current, out.size = r.log_dir, p.partition_size
    return out


def create(cluster: LocalCluster, topic: str, replicas: list[int]) -> None:
    T = CreateTopicsRequest.CreatableTopic
    A = T.CreatableReplicaAssignment
    with AdminClient(cluster.bootstrap, timeout_s=30) as client:
        resp = client.send_to_controller(CreateTopicsRequest, dict(
            topics=[T(name=topic, num_partitions=-1, replication_factor=-1, configs=[],
                      assignments=[A(partition_index=0, broker_ids=replicas)])],
            timeout_ms=30_000, validate_only=False), lambda r: [t.error_code for t in r.topics])
    assert [t.error_code for t in resp.topics] == [0], resp
    cluster.wait_full_isr([topic], 1, timeout_s=60)


def set_throttle(cluster: LocalCluster, broker: int, rate: int | None) -> None:
    """Broker ``broker``'s dynamic ``replica.alter.log.dirs.io.max.bytes.per.second`` (None: removed),
    sent to that broker, which applies it before it answers."""
    A = IncrementalAlterConfigsRequest.AlterConfigsResource
    C = A.AlterableConfig
    op = C(name=THROTTLE, config_operation=OP_SET, value=str(rate)) if rate is not None else \
        C(name=THROTTLE, config_operation=OP_DELETE, value=None)
    with AdminClient(cluster.bootstrap, timeout_s=30) as client:
        resp = client.send(IncrementalAlterConfigsRequest, dict(
            resources=[A(resource_type=RESOURCE_BROKER, resource_name=str(broker), configs=[op])],
            validate_only=False), node_id=broker)
    assert resp.responses[0].error_code == 0, resp


@pytest.fixture
def kp_admin(jbod_cluster: LocalCluster) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=jbod_cluster.bootstrap, request_timeout_ms=30_000)
    try:
        yield admin
    finally:
        admin.close()


def other_dir(cluster: LocalCluster, broker: int, current: str | None) -> str:
    a, b = (str(d) for d in log_dirs_of(cluster.data_dir, broker))
    assert current in (a, b), current
    return b if current == a else a


def test_a_leader_replica_moves_under_an_acks_all_producer_and_loses_nothing(
        jbod_cluster: LocalCluster, kp_admin: KafkaAdminClient) -> None:
    cluster, topic = jbod_cluster, "jbod-leader"
    create(cluster, topic, [1, 2, 3])  # broker 1 leads
    produce_bulk(cluster.bootstrap, topic, 4 * 1024 * 1024)
    source = dirs(cluster, 1, topic).current
    target = other_dir(cluster, 1, source)
    set_throttle(cluster, 1, 1024 * 1024)  # about 4 s of copying: long enough to see the future log
    producer = LiveProducer(cluster.bootstrap, topic, rate_per_s=300, value_bytes=1000)
    producer.start()
    try:
        wait_for(lambda: producer.count() > 100, 30, "the live producer's first acknowledgements")
        result = kp_admin.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 1): target})
        assert result == {TopicPartitionReplica(topic, 0, 1): kerrors.NoError}, result
        during = wait_for(lambda: (d := dirs(cluster, 1, topic)).future is not None and d, 10, "the future log")
        assert during.future == target and during.current == source and during.future_lag > 0, during
        future_dirs = [p.name for p in Path(target).iterdir() if FUTURE_DIR.match(p.name)]
        assert [FUTURE_DIR.match(n)["tp"] for n in future_dirs] == [f"{topic}-0"], future_dirs  # type: ignore[index]
        done = wait_for(lambda: (d := dirs(cluster, 1, topic)).future is None and d.current == target and d,
                        60, "the swap into the target dir")
        assert done.size > 4 * 1024 * 1024
        swapped_at = producer.count()
        wait_for(lambda: producer.count() > swapped_at + 100, 30, "acknowledgements after the swap")
    finally:
        producer.stop()
    set_throttle(cluster, 1, None)
    assert not producer.errors, producer.errors[:5]
    assert (Path(target) / f"{topic}-0").is_dir() and not (Path(source) / f"{topic}-0").exists()
    assert cluster.leaders(topic) == {0: 1}, "broker 1 led throughout: the read below comes from the moved log"
    check_acked(read_topic(cluster.bootstrap, topic, 1), producer.acked)


def test_kill_9_mid_copy_then_the_move_resumes_and_completes(
        jbod_cluster: LocalCluster, kp_admin: KafkaAdminClient) -> None:
    cluster, topic = jbod_cluster, "jbod-kill"
    create(cluster, topic, [2, 1, 3])  # broker 1 follows
    produce_bulk(cluster.bootstrap, topic, 6 * 1024 * 1024)
    source = dirs(cluster, 1, topic).current
    target = other_dir(cluster, 1, source)
    set_throttle(cluster, 1, 300 * 1024)  # 20 s for the whole copy: the kill lands in the middle
    producer = LiveProducer(cluster.bootstrap, topic, rate_per_s=200, value_bytes=1000)
    producer.start()
    try:
        assert kp_admin.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 1): target}) == \
            {TopicPartitionReplica(topic, 0, 1): kerrors.NoError}
        copied = wait_for(lambda: (s := dirs(cluster, 1, topic).future_size) > 1024 * 1024 and s, 30,
                          "a part of the copy")
        cluster.brokers[1].kill9()
        assert [p for p in Path(target).iterdir() if FUTURE_DIR.match(p.name)], "the future log is on disk"
        cluster.restart(1)
        cluster.wait_registered({1, 2, 3})
        resumed = wait_for(lambda: (d := dirs(cluster, 1, topic)).current is not None and d, 30, "broker 1's logs")
        # Still moving, from where the disk says: the future log loaded as one, with what was copied.
        assert resumed.current == source and resumed.future == target and resumed.future_size >= copied, resumed
        wait_for(lambda: dirs(cluster, 1, topic).future_size > resumed.future_size, 30,
                 "the copy going on after the restart, throttled still (a dynamic config, read before registering)")
        assert dirs(cluster, 1, topic).future is not None
        set_throttle(cluster, 1, None)
        wait_for(lambda: (d := dirs(cluster, 1, topic)).future is None and d.current == target, 60,
                 "the resumed move's swap")
    finally:
        producer.stop()
    assert not producer.errors, producer.errors[:5]
    cluster.wait_full_isr([topic], 1, timeout_s=60)
    check_acked(read_topic(cluster.bootstrap, topic, 1), producer.acked)
    # Broker 1's moved copy is the leader's, byte for byte: followers store the leader's batches.
    wait_for(lambda: dirs(cluster, 1, topic).size == dirs(cluster, 2, topic).size, 30,
             "broker 1's copy as large as the leader's")


def test_error_codes(jbod_cluster: LocalCluster, kp_admin: KafkaAdminClient) -> None:
    cluster = jbod_cluster
    create(cluster, "jbod-errors", [1, 2, 3])
    create(cluster, "jbod-not-on-1", [2, 3])
    here, elsewhere = TopicPartitionReplica("jbod-errors", 0, 1), TopicPartitionReplica("jbod-not-on-1", 0, 1)
    current = dirs(cluster, 1, "jbod-errors").current
    assert current is not None
    result = kp_admin.alter_replica_log_dirs({here: "/no/such/dir", elsewhere: current})
    assert result == {here: kerrors.LogDirNotFoundError, elsewhere: kerrors.ReplicaNotAvailableError}, result
    # Its own dir: nothing to move, NONE.
    assert kp_admin.alter_replica_log_dirs({here: current}) == {here: kerrors.NoError}
    assert dirs(cluster, 1, "jbod-errors").future is None


def test_reassign_tool_places_a_new_replica_in_the_plans_log_dir(jbod_cluster: LocalCluster, tmp_path: Path) -> None:
    """The tool retries AlterReplicaLogDirs while the replica is not on broker 1 yet; broker 1 keeps
    the dir it was asked for and creates the replica there (Kafka's preferred log dir)."""
    cluster, topic = jbod_cluster, "jbod-tool"
    create(cluster, topic, [2, 3])
    produce_bulk(cluster.bootstrap, topic, 256 * 1024)
    target = str(log_dirs_of(cluster.data_dir, 1)[1])
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [2, 3, 1], "log_dirs": ["any", "any", target]}]}))
    out = run_cli("reassign", "--bootstrap-server", cluster.bootstrap, "--execute",
                  "--reassignment-json-file", str(plan), "--replica-alter-log-dirs-throttle", "10000000")
    assert "The replica-alter-dir throttle limit was set to 10000000 B/s" in out, out
    assert f"Successfully started moving log directory to {target} for replica {topic}-0 with broker 1 " in out, out
    # RPC.verifyAssignment: the partitions' lines, then one line per replica with a log dir.
    expected = (f"Status of partition reassignment:\nReassignment of partition {topic}-0 is completed.\n"
                f"Reassignment of replica {topic}-0-1 completed successfully.\n")
    verified = wait_for(lambda: (o := run_cli("reassign", "--bootstrap-server", cluster.bootstrap, "--verify",
                                              "--reassignment-json-file", str(plan))).startswith(expected) and o,
                        60, "--verify to report the move and the replica in its log dir")
    assert "Clearing broker-level throttles" in verified, verified  # nothing moving: the throttles go
    assert dirs(cluster, 1, topic).current == target
