"""Transaction tests on real processes. The cluster tests' ``cluster_support`` lives in
``tests/integration/cluster``; pytest puts only this folder on ``sys.path``, so that one is added here."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cluster"))
from cluster_support import LocalCluster, start_cluster
from txn_support import TXN_PROPS


@pytest.fixture(scope="module")
def txn_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = start_cluster(tmp_path_factory.mktemp("txn-cluster"), 3, TXN_PROPS)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def cluster(txn_cluster: LocalCluster, report_logs: Callable[[object], None]) -> LocalCluster:
    report_logs(txn_cluster)
    return txn_cluster
