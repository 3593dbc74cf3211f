"""Console tests on real processes: a cluster, the console (``python -m headwater console``) and
Debian's chromium driven by selenium. The cluster tests' ``cluster_support`` lives in
``tests/integration/cluster``; pytest puts only this folder on ``sys.path``, so that one is added
here (as the groups and reassignment tests do). The console and browser fixtures serve each test
module with that module's ``cluster`` and ``workdir``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cluster"))
from cluster_support import LocalCluster
from console_support import ConsoleProcess, chromium


@pytest.fixture(scope="module")
def console_bootstrap(cluster: LocalCluster) -> str:
    """The console's --bootstrap-server (a module may order it otherwise)."""
    return cluster.bootstrap


@pytest.fixture(scope="module")
def console(cluster: LocalCluster, workdir: Path, console_bootstrap: str) -> Iterator[ConsoleProcess]:
    metrics = [arg for b in cluster.brokers.values()
               for arg in ("--metrics", f"http://127.0.0.1:{b.props['metrics.port']}/metrics")]
    proc = ConsoleProcess(console_bootstrap, workdir / "console.log", *metrics)
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def browser(workdir: Path) -> Iterator[Any]:
    driver = chromium(workdir / "chromium-profile")
    try:
        yield driver
    finally:
        driver.quit()
