"""A 3-broker cluster whose brokers each have two log dirs, for the moves between them (KIP-113).

``cluster_support`` (``LocalCluster``) lives in ``tests/integration/cluster`` and the live clients
(``LiveProducer``, ``read_topic``, ``check_acked``) in ``tests/integration/reassign``; pytest puts
only this folder on ``sys.path``, so those are added here. When a test fails, the log tail of every
broker is added to the report (by the hook in ``tests/integration/conftest.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cluster"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "reassign"))

from cluster_support import LocalCluster, start_cluster


@pytest.fixture(scope="module")
def jbod_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    root = Path(tmp_path_factory.mktemp("jbod"))
    props = {"min.insync.replicas": "2", "log.segment.bytes": str(1024 * 1024), "file.delete.delay.ms": "1000"}
    cluster = start_cluster(root, 3, props, broker_props=lambda broker_id, _port: {
        "log.dirs": f"{root}/broker-{broker_id}-a,{root}/broker-{broker_id}-b"})
    try:
        yield cluster
    finally:
        cluster.stop()
