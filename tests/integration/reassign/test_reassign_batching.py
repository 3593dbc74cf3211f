"""reassignment.max.concurrent.moves.per.broker on real processes: a second move off the same broker
waits in the controller's queue while the first is held open (its target broker is paused), is
listed as queued, and starts when the first is cancelled."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer
from kafka import KafkaAdminClient
from kafka.protocol.admin import IncrementalAlterConfigsRequest

from headwater.admin.client import AdminClient
from headwater.admin.cluster import ClusterState, start_cluster, stop_cluster
from headwater.admin.local import free_port, free_port_range
from headwater.cli import main


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ClusterState, Path]]:
    root = Path(tmp_path_factory.mktemp("batching"))
    base = free_port_range(3)
    zookeeper_port = next(p for p in iter(free_port, None) if not base <= p < base + 3)
    # A long session: the paused broker must stay registered (alive to the controller) meanwhile.
    state = start_cluster(root, 3, base, zookeeper_port, [], {"zookeeper.session.timeout.ms": "30000"})
    try:
        yield state, root
    finally:
        stop_cluster(root)


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def wait_for(predicate: Any, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    raise AssertionError("condition not met in time")


def listed(admin: KafkaAdminClient) -> dict[int, tuple[list[int], list[int], list[int]]]:
    out = {}
    for tp, o in admin.list_partition_reassignments().items():
        def get(key: str, o: Any = o) -> list[int]:
            return list(o[key] if isinstance(o, dict) else getattr(o, key))
        out[tp.partition] = (get("replicas"), get("adding_replicas"), get("removing_replicas"))
    return out


def replicas(bootstrap: str) -> dict[int, str]:
    code, out = cli("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", "batched")
    fields = [dict(x.split(": ", 1) for x in line.strip().split("\t")) for line in out.splitlines()
              if "\tPartition: " in line]
    return {int(f["Partition"]): f["Replicas"] for f in fields} if code == 0 else {}


def set_defaults(bootstrap: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs on the default broker resource (resource name ""): kafka-python's and
    librdkafka's admin APIs refuse a broker resource without an id."""
    a = IncrementalAlterConfigsRequest.AlterConfigsResource
    ops = [a.AlterableConfig(name=k, config_operation=0, value=v) for k, v in configs.items()]
    with AdminClient(bootstrap, client_id="batching-test") as client:
        resp = client.send(IncrementalAlterConfigsRequest, dict(resources=[a(
            resource_type=4, resource_name="", configs=ops)], validate_only=False))
    assert resp.responses[0].error_code == 0, resp


def plan(root: Path, partition: int, target: int) -> str:
    path = root / f"plan-{partition}.json"
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "batched", "partition": partition, "replicas": [target]}]}))
    return str(path)


def test_a_second_move_off_a_busy_broker_is_queued_then_starts(cluster: tuple[ClusterState, Path]) -> None:
    state, root = cluster
    admin = KafkaAdminClient(bootstrap_servers=state.bootstrap)
    try:
        controller = admin.describe_cluster()["controller_id"]
    finally:
        admin.close()
    # held: the target that is paused (never the controller); source: where both partitions live.
    held = next(b.broker_id for b in state.brokers if b.broker_id != controller)
    source, other = (b.broker_id for b in state.brokers if b.broker_id != held)
    # Only the headwater tools from here on, bootstrapped off the paused broker: they talk to the
    # controller and to the bootstrap brokers only.
    bootstrap = ",".join(f"127.0.0.1:{b.port}" for b in state.brokers if b.broker_id != held)
    assert cli("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "batched",
               "--replica-assignment", f"{source},{source}")[0] == 0
    wait_for(lambda: len(replicas(bootstrap)) == 2)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(100):
        p.produce("batched", value=b"x" * 100, partition=i % 2)
    assert p.flush(30) == 0
    set_defaults(bootstrap, {"reassignment.max.concurrent.moves.per.broker": "1"})
    time.sleep(2)                                  # the controller reads the default through a data watch
    pid = int((root / f"broker-{held}.pid").read_text().strip())
    os.kill(pid, signal.SIGSTOP)                # registered but not fetching: the move to it stays open
    try:
        code, out = cli("reassign", "--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file",
                        plan(root, 0, held))
        assert code == 0, out
        code, out = cli("reassign", "--bootstrap-server", bootstrap, "--execute", "--additional",
                        "--reassignment-json-file", plan(root, 1, other))
        assert code == 0, out
        code, out = cli("reassign", "--bootstrap-server", bootstrap, "--list")
        assert code == 0, out
        assert f"batched-0: replicas: {held},{source}. adding: {held}. removing: {source}." in out, out
        assert f"batched-1: replicas: {source}. queued." in out, out      # the source broker is busy
        code, out = cli("reassign", "--bootstrap-server", bootstrap, "--verify", "--reassignment-json-file",
                        plan(root, 1, other))
        assert "Reassignment of partition batched-1 is still in progress (queued)." in out, out
        code, out = cli("reassign", "--bootstrap-server", bootstrap, "--cancel", "--preserve-throttles",
                        "--reassignment-json-file",
                        plan(root, 0, held))
        assert code == 0, out                      # the cancel frees the source broker: partition 1 starts
        os.kill(pid, signal.SIGCONT)
        pid = 0
        wait_for(lambda: cli("reassign", "--bootstrap-server", bootstrap, "--list")[1].strip()
                 == "No partition reassignments found.")
        wait_for(lambda: replicas(bootstrap) == {0: str(source), 1: str(other)})
    finally:
        if pid:
            os.kill(pid, signal.SIGCONT)
