"""Console tests on real processes: a cluster, the console (``python -m headwater console``) and
Debian's chromium driven by selenium. The cluster tests' ``cluster_support`` lives in
``tests/integration/cluster``; pytest puts only this folder on ``sys.path``, so that one is added
here (as the groups and reassignment tests do)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cluster"))
