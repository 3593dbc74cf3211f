"""Fixtures for the ZooKeeper-mode cluster tests: real ZooKeeper and broker processes.

``shared_cluster`` (module)
    Three brokers (RF 3 by default, ``zookeeper.session.timeout.ms=6000``) shared by the tests of
    one module. Tests that use it create their own topics and leave every broker running.
``cluster_factory`` (function)
    ``cluster_factory(size=3, props=None, broker_props=None) -> LocalCluster``: a fresh cluster for a test that kills,
    pauses or restarts brokers. Everything it started is stopped by PID at teardown.

When a test fails, the log tail of every broker of the clusters it used is added to the report
(by the hook in ``tests/integration/conftest.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from cluster_support import LocalCluster, start_cluster


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = start_cluster(tmp_path_factory.mktemp("shared-cluster"))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def cluster_factory(report_logs: Callable[[object], None], tmp_path: Path) -> Iterator[Callable[..., LocalCluster]]:
    started: list[LocalCluster] = []

    def make(size: int = 3, props: dict[str, str] | None = None,
             broker_props: Callable[[int, int], Mapping[str, str]] | None = None) -> LocalCluster:
        cluster = start_cluster(tmp_path / f"cluster-{len(started)}", size, props, broker_props=broker_props)
        started.append(cluster)
        report_logs(cluster)
        return cluster

    try:
        yield make
    finally:
        for cluster in started:
            cluster.stop()
