"""Fixtures' helpers for the reassignment tests on real processes.

The cluster tests' ``cluster_support`` (``LocalCluster``: ZooKeeper and brokers by PID, kazoo,
``ZkGate``) lives in ``tests/integration/cluster``; pytest puts only this folder on ``sys.path``,
so that one is added here. When a test fails, the log tail of every broker of the clusters it
used is added to the report.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cluster"))

from cluster_support import LocalCluster


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for value in getattr(item, "funcargs", {}).values():
            if isinstance(value, LocalCluster):
                report.sections.extend(value.log_tails())
