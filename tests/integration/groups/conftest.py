"""Consumer-group tests on real processes. The cluster tests' ``cluster_support`` lives in
``tests/integration/cluster``; pytest puts only this folder on ``sys.path``, so that one is added
here (as the reassignment tests do)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cluster"))
