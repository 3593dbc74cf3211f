"""ACLs in a ZooKeeper cluster: Kafka's znodes, concurrent CreateAcls, change notifications reaching
every broker, and AlterPartitionReassignments and ElectLeaders refused (nothing starts) until the
ACLs allow them.

Connections are unauthenticated here, so the principal is User:ANONYMOUS for clients and brokers
alike: it is granted ALL on the cluster (inter-broker requests need CLUSTER_ACTION) and then
denied ALTER, which only ZooKeeper access (as Kafka's ZooKeeper-based kafka-acls.sh has) can lift.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
)
from kazoo.client import KazooClient

from headwater.admin.client import AdminClient
from headwater.admin.cluster import ClusterState, start_cluster, stop_cluster
from headwater.admin.local import free_port, free_port_range
from headwater.cli import main

PROPS = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "allow.everyone.if.no.acl.found": "true",
         "zookeeper.session.timeout.ms": "6000"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = Path(tmp_path_factory.mktemp("acl-cluster"))
    base = free_port_range(3)  # the third port for the broker added later
    zookeeper_port = next(p for p in iter(free_port, None) if not base <= p < base + 3)
    state = start_cluster(root, 2, base, zookeeper_port, [], PROPS)
    try:
        yield state.bootstrap, root
    finally:
        stop_cluster(root)


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def wait_for(cond: Callable[[], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = cond()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def kazoo(root: Path) -> KazooClient:
    zk = KazooClient(hosts=f"127.0.0.1:{ClusterState.load(root).zookeeper_port}")
    zk.start(timeout=10)
    return zk


def reassign(bootstrap: str, topic: str, replicas: list[int]) -> int:
    T = AlterPartitionReassignmentsRequest.ReassignableTopic
    P = T.ReassignablePartition
    with AdminClient(bootstrap) as client:
        resp = client.send_to_controller(AlterPartitionReassignmentsRequest, dict(
            timeout_ms=30000, allow_replication_factor_change=True,
            topics=[T(name=topic, partitions=[P(partition_index=0, replicas=replicas)])]),
            lambda r: [r.error_code], max_version=0)
        return int(resp.error_code)


def elect(bootstrap: str, topic: str) -> tuple[int, list[int]]:
    """ElectLeaders PREFERRED for partition 0: (top-level error, per-partition errors)."""
    with AdminClient(bootstrap) as client:
        resp = client.send_to_controller(ElectLeadersRequest, dict(
            election_type=0, topic_partitions=[(topic, [0])], timeout_ms=30000), lambda r: [r.error_code])
        return int(resp.error_code), [p.error_code for r in resp.replica_election_results for p in r.partition_result]


def ongoing(bootstrap: str) -> tuple[int, list[str]]:
    with AdminClient(bootstrap) as client:
        resp = client.send_to_controller(ListPartitionReassignmentsRequest, dict(timeout_ms=30000, topics=None),
                                         lambda r: [r.error_code])
        return int(resp.error_code), [t.name for t in resp.topics]


def replicas(root: Path, topic: str) -> list[int]:
    zk = kazoo(root)
    try:
        data, _ = zk.get(f"/brokers/topics/{topic}")
        return list(json.loads(data)["partitions"]["0"])
    finally:
        zk.stop()
        zk.close()


def test_concurrent_creates_lose_nothing_and_every_broker_sees_them(cluster: tuple[str, Path]) -> None:
    bootstrap, root = cluster
    first, second = bootstrap.split(",")
    results: list[tuple[int, str]] = []

    def add(server: str, principal: str) -> None:
        results.append(cli("acls", "--bootstrap-server", server, "--add", "--allow-principal", principal,
                           "--operation", "Read", "--topic", "shared"))

    threads = [threading.Thread(target=add, args=(first if i % 2 else second, f"User:u{i}")) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(code == 0 for code, _ in results), results
    zk = kazoo(root)
    try:
        data, _ = zk.get("/kafka-acl/Topic/shared")
        doc = json.loads(data)
        assert doc["version"] == 1
        assert sorted(a["principal"] for a in doc["acls"]) == [f"User:u{i}" for i in range(6)]
        assert {"principal": "User:u0", "permissionType": "Allow", "operation": "Read", "host": "*"} in doc["acls"]
        changes = [zk.get(f"/kafka-acl-changes/{c}")[0] for c in zk.get_children("/kafka-acl-changes")]
        assert b"TOPIC:shared" in changes
    finally:
        zk.stop()
        zk.close()
    for server in (first, second):
        wait_for(lambda s=server: cli("acls", "--bootstrap-server", s, "--list", "--topic", "shared")[1]
                 .count("operation=READ") == 6, 20, f"all six ACLs on {server}")
    # A broker that joins later loads them from ZooKeeper before it serves anyone.
    code, out = cli("cluster", "add-broker", "--data-dir", str(root))
    assert code == 0, out
    third = f"127.0.0.1:{ClusterState.load(root).brokers[2].port}"
    assert cli("acls", "--bootstrap-server", third, "--list", "--topic", "shared")[1].count("operation=READ") == 6
    code, out = cli("acls", "--bootstrap-server", second, "--remove", "--force", "--topic", "shared",
                    "--resource-pattern-type", "prefixed")
    assert code == 0, out  # nothing prefixed: removes nothing
    code, out = cli("acls", "--bootstrap-server", first, "--remove", "--force", "--topic", "shared")
    assert code == 0 and "operation=READ" not in out, out
    wait_for(lambda: "operation=READ" not in cli("acls", "--bootstrap-server", second, "--list", "--topic", "shared")[1],
             20, "the removal to reach broker 2")


def test_reassignment_refused_without_alter_on_cluster(cluster: tuple[str, Path]) -> None:
    bootstrap, root = cluster
    first, second = bootstrap.split(",")
    code, out = cli("topics", "--bootstrap-server", first, "--create", "--topic", "moves", "--partitions", "1",
                    "--replica-assignment", "1")
    assert code == 0, out
    wait_for(lambda: cli("topics", "--bootstrap-server", second, "--describe", "--topic", "moves")[0] == 0, 20, "topic")
    assert cli("acls", "--bootstrap-server", second, "--add", "--allow-principal", "User:ANONYMOUS",
               "--operation", "All", "--cluster")[0] == 0
    code, out = cli("acls", "--bootstrap-server", second, "--add", "--deny-principal", "User:ANONYMOUS",
                    "--operation", "Alter", "--cluster")
    assert code == 0, out
    # The controller may be either broker: wait until both hold the DENY.
    for server in (first, second):
        wait_for(lambda s=server: "operation=ALTER, permissionType=DENY" in
                 cli("acls", "--bootstrap-server", s, "--list", "--cluster")[1], 20, f"the DENY on {server}")

    assert reassign(bootstrap, "moves", [2]) == 31  # CLUSTER_AUTHORIZATION_FAILED
    # KafkaApis.handleElectLeaders: ALTER on the cluster, else 31 at the top and for every partition.
    assert elect(bootstrap, "moves") == (31, [31])
    time.sleep(1.0)
    assert ongoing(bootstrap) == (0, [])
    assert replicas(root, "moves") == [1]
    # ACL changes need ALTER on the cluster too.
    code, out = cli("acls", "--bootstrap-server", first, "--remove", "--force", "--deny-principal", "User:ANONYMOUS",
                    "--operation", "Alter", "--cluster")
    assert code == 1 and "CLUSTER_AUTHORIZATION_FAILED" in out

    # Lift the DENY in ZooKeeper, as an operator with ZooKeeper access would: every broker reloads it
    # from the change notification.
    zk = kazoo(root)
    try:
        zk.set("/kafka-acl/Cluster/kafka-cluster",
               b'{"version":1,"acls":[{"principal":"User:ANONYMOUS","permissionType":"Allow","operation":"All","host":"*"}]}')
        zk.create("/kafka-acl-changes/acl_changes_", b"Cluster:kafka-cluster", sequence=True)
    finally:
        zk.stop()
        zk.close()
    wait_for(lambda: reassign(bootstrap, "moves", [2]) == 0, 20, "the reassignment to be accepted")
    wait_for(lambda: replicas(root, "moves") == [2], 30, "the reassignment to complete")

    lines = [json.loads(line) for path in sorted((root / "audit").glob("broker-*-audit.log"))
             for line in path.read_text().splitlines()]
    moves = [ln for ln in lines if ln["api"] == "ALTER_PARTITION_REASSIGNMENTS"]
    assert any(ln["outcome"] == "denied" and ln["error_code"] == 31 and ln["principal"] == "User:ANONYMOUS" for ln in moves)
    assert any(ln["outcome"] == "allowed" and ln["resources"][0]["name"] == "moves-0 -> [2]" for ln in moves)
    assert any(ln["api"] == "DELETE_ACLS" and ln["outcome"] == "denied" for ln in lines)
    assert any(ln["api"] == "ELECT_LEADERS" and ln["outcome"] == "denied" and ln["error_code"] == 31
               and ln["resources"][0]["name"] == "moves-0 PREFERRED" for ln in lines)
    # Allowed again: the topic's one replica already leads it.
    assert elect(bootstrap, "moves") == (0, [84])
