"""Fixtures for integration tests that run real ``python -m headwater broker`` processes.

Fixtures (every broker they start is stopped by its PID at teardown, also when the test fails):

``broker`` (session)
    One shared broker with the default test configuration (``auto.create.topics.enable=false``,
    ``num.partitions=1``). Tests that share it must use their own topics (see ``topic_name``) and
    must not stop, kill or reconfigure it.
``broker_factory`` (function)
    ``broker_factory(props=None, data_dir=None) -> BrokerProcess``: start a broker of your own on a
    free port, with extra broker properties. Call ``.kill9()`` / ``.stop()`` and ``.start()`` on it
    to restart it on the same port and data dir. Everything it started is stopped at teardown.
``fresh_broker`` (function)
    ``broker_factory()`` with the defaults: a broker nobody else uses, for kill/restart tests.
``topic_name`` (function)
    ``topic_name(prefix="t") -> str``: a topic name unique in the test session.
``report_logs`` (function)
    ``report_logs(process_or_cluster)``: add its logs to this test's report if the test fails. The
    factory fixtures here and in the subfolders call it for everything they start.

When a test anywhere under ``tests/integration`` fails, the report gets the logs of every broker
and cluster it used: those given to ``report_logs``, and any fixture value that is a
``BrokerProcess`` (its log tail) or has a ``log_tails()`` method (``LocalCluster``: each broker's
tail and its warnings and errors). The subfolders' conftests have no report hook of their own.
Subfolders (spark/, planner/) have their own conftest.py; fixture names defined there win there.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from headwater.admin.local import BrokerProcess, free_port

_topic_counter = itertools.count()
_REPORTED_KEY = pytest.StashKey[list[object]]()


def _log_sections(used: object) -> list[tuple[str, str]]:
    """What a failure report shows of one broker or cluster a test used."""
    if isinstance(used, BrokerProcess):
        pid = used.proc.pid if used.proc else "-"
        return [(f"broker {used.broker_id} on {used.bootstrap} (pid {pid}) log", used.log_tail(60))]
    # Duck-typed: LocalCluster lives in tests/integration/cluster, which is not on sys.path here.
    log_tails = getattr(used, "log_tails", None)
    return list(log_tails()) if callable(log_tails) else []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        used = list(item.stash.get(_REPORTED_KEY, []))
        used += [v for v in getattr(item, "funcargs", {}).values() if not any(v is u for u in used)]
        for value in used:
            report.sections.extend(_log_sections(value))


@pytest.fixture
def report_logs(request: pytest.FixtureRequest) -> Callable[[object], None]:
    return request.node.stash.setdefault(_REPORTED_KEY, []).append


def _stop(broker: BrokerProcess) -> None:
    """Stop by PID: SIGTERM, then SIGKILL (BrokerProcess.stop does both)."""
    with contextlib.suppress(Exception):
        broker.stop()
    if broker.alive:
        broker.kill9()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(1, free_port(), tmp_path_factory.mktemp("shared-broker"))
    try:
        b.start()
        yield b
    finally:
        _stop(b)


@pytest.fixture
def broker_factory(report_logs: Callable[[object], None], tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    started: list[BrokerProcess] = []

    def start(props: dict[str, str] | None = None, data_dir: Path | None = None, broker_id: int = 1) -> BrokerProcess:
        d = data_dir or tmp_path / f"broker-{len(started)}"
        b = BrokerProcess(broker_id, free_port(), d, props=dict(props or {}))
        started.append(b)
        report_logs(b)
        b.start()
        return b

    try:
        yield start
    finally:
        for b in started:
            _stop(b)


@pytest.fixture
def fresh_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> Callable[..., str]:
    base = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name).strip("-")[:80]

    def make(prefix: str = "t") -> str:
        return f"{prefix}-{base}-{os.getpid()}-{next(_topic_counter)}"

    return make
