"""Conformance tests: what a client sees from whichever broker it is pointed at. They reuse the
cluster tests' LocalCluster (tests/integration/cluster/cluster_support.py)."""

from __future__ import annotations

import sys
from pathlib import Path

_CLUSTER_SUPPORT = str(Path(__file__).resolve().parent.parent / "cluster")
if _CLUSTER_SUPPORT not in sys.path:
    sys.path.append(_CLUSTER_SUPPORT)
