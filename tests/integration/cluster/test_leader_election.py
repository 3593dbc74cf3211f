"""Leader elections an operator asks for, the automatic rebalance, and unclean elections, on real
ZooKeeper and broker processes with the clients' own admin calls.

Expected answers are Kafka 3.9's ZooKeeper controller's (``KafkaController.processReplicaLeaderElection``,
``onReplicaElection``, ``checkAndTriggerAutoLeaderRebalance``; ``PartitionLeaderElectionAlgorithms``)
and KafkaApis' ``handleElectLeaders`` (ElectLeaders on the controller, every partition when the
request names none, the partitions whose leader was already right left out of that answer).
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable

from cluster_support import LocalCluster, parse_describe, run_cli, wait_for
from confluent_kafka import Consumer, ElectionType, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import ElectLeadersRequest

from headwater.admin.client import AdminClient as HeadwaterAdmin
from headwater.admin.local import free_port
from headwater.protocol.errors import ErrorCode

NO_AUTO = {"auto.leader.rebalance.enable": "false"}


def create(cluster: LocalCluster, topic: str, assignment: list[list[int]], **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    fut = admin.create_topics([NewTopic(topic, len(assignment), replica_assignment=assignment,
                                          config=configs)])[topic]
    fut.result(30)


def leader(cluster: LocalCluster, topic: str, partition: int) -> int:
    return cluster.partition_states(topic)[partition]["leader"]


def seen_leader(cluster: LocalCluster, via: int, topic: str, partition: int) -> int:
    """The leader one broker's Metadata names."""
    out = run_cli("topics", "--bootstrap-server", cluster.brokers[via].bootstrap, "--describe", "--topic", topic)
    return next(line.leader for line in parse_describe(out) if line.partition == partition)


def imbalance(port: int) -> float:
    """``headwater_preferred_replica_imbalance`` from a broker's Prometheus endpoint."""
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    line = next(ln for ln in body.splitlines() if ln.startswith("headwater_preferred_replica_imbalance{"))
    return float(line.rsplit(" ", 1)[1])


def kill(cluster: LocalCluster, broker_id: int) -> None:
    cluster.brokers[broker_id].kill9()
    wait_for(lambda: cluster.broker_epoch(broker_id) is None, 30, f"broker {broker_id}'s registration to expire")


def restart(cluster: LocalCluster, broker_id: int) -> None:
    cluster.restart(broker_id)
    cluster.wait_registered({broker_id})


def python_elect(cluster: LocalCluster, kind: int, partitions: dict[str, list[int]] | None) -> dict[tuple[str, int], int]:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        resp = admin.elect_leaders(kind, partitions, raise_errors=False)
    finally:
        admin.close()
    assert resp.error_code == 0
    return {(r.topic, p.partition_id): p.error_code for r in resp.replica_election_results for p in r.partition_result}


def code(outcome: object) -> int | None:
    """confluent-kafka's per-partition outcome: None, or a KafkaError."""
    if outcome is None:
        return None
    assert isinstance(outcome, KafkaError), outcome
    return int(outcome.code())


def test_elections_asked_for_through_both_clients_and_the_legacy_znode(
        cluster_factory: Callable[..., LocalCluster]) -> None:
    metrics_ports = {b: free_port() for b in (1, 2, 3)}
    cluster = cluster_factory(3, NO_AUTO, lambda b, _port: {"metrics.port": str(metrics_ports[b])})
    create(cluster, "el", [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    create(cluster, "solo", [[2]])
    cluster.wait_full_isr(["el"], 3)

    # Broker 1 fails and comes back: with the rebalance off, el-0 stays led by another broker.
    kill(cluster, 1)
    wait_for(lambda: leader(cluster, "el", 0) != 1, 30, "el-0 to move away from broker 1")
    restart(cluster, 1)
    cluster.wait_full_isr(["el"], 3)
    time.sleep(1)
    assert leader(cluster, "el", 0) != 1
    wait_for(lambda: imbalance(metrics_ports[1]) == 1, 10, "broker 1's imbalance metric to count el-0")

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    outcome = admin.elect_leaders(ElectionType.PREFERRED, [
        TopicPartition("el", 0), TopicPartition("el", 1), TopicPartition("missing", 0)]).result(30)
    assert code(outcome[TopicPartition("el", 0)]) is None
    assert code(outcome[TopicPartition("el", 1)]) == ErrorCode.ELECTION_NOT_NEEDED
    assert code(outcome[TopicPartition("missing", 0)]) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # The answer waited for the controller's own metadata; every broker gets it by UpdateMetadata.
    assert leader(cluster, "el", 0) == 1
    for b in (1, 2, 3):
        wait_for(lambda b=b: seen_leader(cluster, b, "el", 0) == 1, 10, f"broker {b} to name broker 1 as el-0's leader")
    wait_for(lambda: imbalance(metrics_ports[1]) == 0, 10, "broker 1's imbalance metric to drop to zero")

    # kafka-python names every partition it knows for None; each is already led by its preferred replica.
    assert python_elect(cluster, 0, None) == {("el", 0): 84, ("el", 1): 84, ("el", 2): 84, ("solo", 0): 84}
    # A null list (what the Java admin client sends): those already right are left out of the answer.
    with HeadwaterAdmin(cluster.bootstrap) as client:
        resp = client.send_to_controller(ElectLeadersRequest, dict(election_type=0, topic_partitions=None,
                                                                   timeout_ms=30000), lambda r: [r.error_code])
    assert (resp.error_code, resp.replica_election_results) == (0, [])

    # The preferred replica is down: PREFERRED_LEADER_NOT_AVAILABLE; UNCLEAN is not needed while a
    # live broker leads; a partition whose only replica is down has no eligible leader at all.
    kill(cluster, 2)
    wait_for(lambda: leader(cluster, "el", 1) != 2, 30, "el-1 to move away from broker 2")
    assert python_elect(cluster, 0, {"el": [1]}) == {("el", 1): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}
    assert python_elect(cluster, 1, {"el": [1]}) == {("el", 1): ErrorCode.ELECTION_NOT_NEEDED}
    assert leader(cluster, "solo", 0) == -1
    assert python_elect(cluster, 1, {"solo": [0]}) == {("solo", 0): ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE}
    restart(cluster, 2)
    cluster.wait_full_isr(["el"], 3)
    wait_for(lambda: leader(cluster, "solo", 0) == 2, 30, "solo-0 to be led by its only replica again")
    assert leader(cluster, "el", 1) != 2

    # An old tool's /admin/preferred_replica_election: elected, then the znode is deleted.
    zk = cluster.kazoo
    zk.create("/admin/preferred_replica_election",
              json.dumps({"version": 1, "partitions": [{"topic": "el", "partition": 1}]}).encode(), makepath=True)
    wait_for(lambda: leader(cluster, "el", 1) == 2, 30, "the znode's preferred election")
    wait_for(lambda: zk.exists("/admin/preferred_replica_election") is None, 30, "the znode to be deleted")


def test_the_automatic_rebalance_hands_leadership_back(cluster_factory: Callable[..., LocalCluster]) -> None:
    cluster = cluster_factory(3, {"leader.imbalance.check.interval.seconds": "2"})
    create(cluster, "auto", [[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 3, 2]])
    cluster.wait_full_isr(["auto"], 4)
    kill(cluster, 1)
    wait_for(lambda: leader(cluster, "auto", 0) != 1 and leader(cluster, "auto", 3) != 1, 30,
             "broker 1's leaderships to move")
    restart(cluster, 1)
    # Broker 1 leads neither of its two preferred partitions (100% > 10%): both come back, once it
    # is in their ISRs again (the preferred replica must be in the ISR).
    wait_for(lambda: leader(cluster, "auto", 0) == 1 and leader(cluster, "auto", 3) == 1, 40,
             "the rebalance to hand broker 1's leaderships back")
    states = cluster.partition_states("auto")
    assert all(1 in states[p]["isr"] for p in (0, 3))


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    failed: list[str] = []
    for v in values:
        p.produce(topic, v, partition=0, on_delivery=lambda err, _m: failed.append(str(err)) if err else None)
    assert p.flush(30) == 0 and not failed, failed


def consume(bootstrap: str, topic: str, count_at_least: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}-{time.monotonic_ns()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                out.append(msg.value())
            elif msg is None and len(out) >= count_at_least:
                break
    finally:
        c.close()
    return out


def test_unclean_election_on_and_off(cluster_factory: Callable[..., LocalCluster]) -> None:
    cluster = cluster_factory(2, NO_AUTO)
    create(cluster, "clean", [[1, 2]])
    create(cluster, "unclean", [[1, 2]], **{"unclean.leader.election.enable": "true"})
    cluster.wait_full_isr(["clean", "unclean"], 1)
    first = [b"a%d" % i for i in range(20)]
    for topic in ("clean", "unclean"):
        produce(cluster.bootstrap, topic, first)

    # The follower fails: the ISR is the leader alone, which acknowledges the second batch by itself.
    kill(cluster, 2)
    wait_for(lambda: all(cluster.partition_states(t)[0]["isr"] == [1] for t in ("clean", "unclean")), 30,
             "the ISRs to shrink to broker 1")
    second = [b"b%d" % i for i in range(20)]
    for topic in ("clean", "unclean"):
        produce(cluster.bootstrap, topic, second)

    # The leader fails too, and the out-of-sync replica comes back first.
    kill(cluster, 1)
    restart(cluster, 2)
    wait_for(lambda: leader(cluster, "unclean", 0) == 2, 30, "the unclean election")
    time.sleep(2)
    assert leader(cluster, "clean", 0) == -1      # off: offline until an ISR member returns
    assert cluster.partition_states("clean")[0]["isr"] == [1]
    warned = any("Unclean leader election for partition unclean-0" in b.log_path.read_text(errors="replace")
                 for b in cluster.brokers.values() if b.log_path.exists())
    assert warned

    restart(cluster, 1)
    wait_for(lambda: leader(cluster, "clean", 0) == 1, 30, "the clean partition's ISR member to lead again")
    # Off: nothing acknowledged is lost. On: what only broker 1 held is gone (broker 1 truncates to 2).
    assert consume(cluster.bootstrap, "clean", 40) == first + second
    cluster.wait_full_isr(["unclean"], 1)
    assert consume(cluster.bootstrap, "unclean", 20) == first
