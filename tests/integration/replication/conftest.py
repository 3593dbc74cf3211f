"""A 4-broker cluster for the replication-throttle tests, each broker with a Prometheus endpoint.

The cluster tests' ``cluster_support`` (``LocalCluster``: ZooKeeper and brokers by PID, kazoo)
lives in ``tests/integration/cluster``; pytest puts only this folder on ``sys.path``, so that one
is added here. ``LocalCluster`` gives every broker the same properties, and each broker here needs
its own ``metrics.port``, so the processes are started here and handed to a ``LocalCluster``, which
reads the cluster and stops everything by PID as usual. When a test fails, the log tail of every
broker is added to the report (by the hook in ``tests/integration/conftest.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cluster"))

from cluster_support import DEFAULT_PROPS, LocalCluster

from headwater.admin.local import READY_TIMEOUT_S, BrokerProcess, ZooKeeperProcess, free_port, wait_for_port

BROKERS = 4


@pytest.fixture(scope="module")
def metered_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Four brokers; broker N serves metrics on ``cluster.brokers[N].props["metrics.port"]``."""
    root = Path(tmp_path_factory.mktemp("replication-cluster"))
    cluster = LocalCluster(root, BROKERS)
    try:
        cluster.zk = ZooKeeperProcess(free_port(), root).start()
        props = {**DEFAULT_PROPS, "zookeeper.connect": cluster.zk.connect, "default.replication.factor": "2",
                 "log.segment.bytes": str(8 * 1024 * 1024), "file.delete.delay.ms": "0"}
        for broker_id in range(1, BROKERS + 1):
            cluster.brokers[broker_id] = BrokerProcess(broker_id, free_port(), root,
                                                       {**props, "metrics.port": str(free_port())})
        for b in cluster.brokers.values():  # all at once: each spends its first seconds importing
            b.start(wait=False)
        for b in cluster.brokers.values():
            assert b.proc is not None
            wait_for_port(b.host, b.port, READY_TIMEOUT_S, b.proc)
        cluster.wait_registered(set(cluster.brokers))
        yield cluster
    finally:
        cluster.stop()
