"""Fixtures' helpers for the reassignment tests on real processes.

The cluster tests' ``cluster_support`` (``LocalCluster``: ZooKeeper and brokers by PID, kazoo,
``ZkGate``) lives in ``tests/integration/cluster``; pytest puts only this folder on ``sys.path``,
so that one is added here. When a test fails, the log tail of every broker of the clusters it
used is added to the report (by the hook in ``tests/integration/conftest.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cluster"))
