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

When a test fails, the log tail of every broker it used (from ``broker_factory`` or any fixture
value that is a ``BrokerProcess``) is printed with the failure report.
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
_BROKERS_KEY = pytest.StashKey[list[BrokerProcess]]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        brokers = list(item.stash.get(_BROKERS_KEY, []))
        for value in getattr(item, "funcargs", {}).values():
            if isinstance(value, BrokerProcess) and value not in brokers:
                brokers.append(value)
        for b in brokers:
            report.sections.append((f"broker {b.broker_id} on {b.bootstrap} (pid {b.proc.pid if b.proc else '-'}) log",
                                    b.log_tail(60)))


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
def broker_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    started: list[BrokerProcess] = []
    request.node.stash[_BROKERS_KEY] = started

    def start(props: dict[str, str] | None = None, data_dir: Path | None = None, broker_id: int = 1) -> BrokerProcess:
        d = data_dir or tmp_path / f"broker-{len(started)}"
        b = BrokerProcess(broker_id, free_port(), d, props=dict(props or {}))
        started.append(b)
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
