"""How `make test` shares the tests among its pytest-xdist workers.

Each test module runs whole on one worker, so a module-scoped cluster starts once. Some folders
run whole on one worker: the Spark and planner tests together, since they share one SparkSession
and broker per worker (session fixtures, a JVM start of about 15 s each), and the chaos tests,
since they create network namespaces and bridges, which are machine-wide. With ``-n``, this
scheduler replaces the one ``--dist`` names.
"""

from __future__ import annotations

from typing import Any

WHOLE_FOLDERS = {
    "tests/integration/spark/": "spark",
    "tests/integration/planner/": "spark",
    "tests/chaos/": "chaos",
}


def worker_group(nodeid: str) -> str:
    """The unit of work a test belongs to: its folder's name for the folders above, else its module."""
    module = nodeid.split("::", 1)[0]
    for folder, group in WHOLE_FOLDERS.items():
        if module.startswith(folder):
            return group
    return module


def pytest_xdist_make_scheduler(config: Any, log: Any) -> Any:
    """Only called with ``-n``: xdist's scope scheduler, with the scopes above."""
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

    return ByGroup(config, log)
