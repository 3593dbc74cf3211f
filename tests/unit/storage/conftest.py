from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from headwater.storage import LogConfig, PartitionLog


class FakeClock:
    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def open_log(tmp_path: Path, clock: FakeClock) -> Iterator[Callable[..., PartitionLog]]:
    """Open (or reopen) the log of topic t, partition 0 under tmp_path; closes what it opened."""
    opened: list[PartitionLog] = []

    def _open(config: LogConfig | None = None, **kwargs: object) -> PartitionLog:
        plog = PartitionLog("t", 0, tmp_path / "t-0", config or LogConfig(), clock_ms=clock, **kwargs)  # type: ignore[arg-type]
        opened.append(plog)
        return plog

    yield _open
    for plog in opened:
        if not plog.closed:
            plog.close()
