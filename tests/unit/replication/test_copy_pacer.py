"""CopyPacer: the pause between a reassignment copy's fetches, from CPU pressure samples.

The signal is Linux PSI's cumulative "some" waiting time (Documentation/accounting/psi.rst: the
share of wall time in which at least one runnable task waited for a CPU); a window's pressure is
its growth over the window's length.
"""

from __future__ import annotations

import pytest

from headwater.replication.copy_pacer import (
    MAX_PAUSE_MS,
    MIN_PAUSE_MS,
    STALE_MS,
    WINDOW_MS,
    CopyPacer,
    pressure_share,
)


def feed(pacer: CopyPacer, shares: list[float], start_ms: float = 0.0, start_us: int = 0) -> list[float]:
    """One sample per window, each window with the given share of waiting; the pauses in force."""
    now, waited = start_ms, start_us
    pacer.observe(now, waited)
    out = []
    for share in shares:
        now += WINDOW_MS
        waited += int(share * WINDOW_MS * 1000)
        out.append(pacer.observe(now, waited))
    return out


def test_no_pause_while_pressure_stays_under_the_target() -> None:
    pacer = CopyPacer(0.25)
    assert feed(pacer, [0.0, 0.1, 0.24, 0.25]) == [0.0, 0.0, 0.0, 0.0]
    assert pacer.pressure == pytest.approx(0.25)


def test_pressure_doubles_the_pause_up_to_the_ceiling_then_releases() -> None:
    pacer = CopyPacer(0.25)
    pauses = feed(pacer, [0.5] * 8)
    assert pauses[:3] == [MIN_PAUSE_MS, 2 * MIN_PAUSE_MS, 4 * MIN_PAUSE_MS]
    assert pauses[-1] == MAX_PAUSE_MS
    assert max(pauses) == MAX_PAUSE_MS
    released = feed(pacer, [0.0] * 10, start_ms=10_000, start_us=10**9)
    assert released[0] < MAX_PAUSE_MS
    assert released == sorted(released, reverse=True)
    assert released[-1] == 0.0


def test_samples_inside_a_window_keep_the_pause() -> None:
    pacer = CopyPacer(0.25)
    pacer.observe(0, 0)
    assert pacer.observe(WINDOW_MS / 2, 50_000) == 0.0  # all waiting, but half a window
    assert pacer.observe(WINDOW_MS, 100_000) == MIN_PAUSE_MS


def test_no_reading_or_a_target_of_one_never_pauses() -> None:
    pacer = CopyPacer(0.25)
    feed(pacer, [1.0] * 3)
    assert pacer.pause_ms > 0
    assert pacer.observe(1_000, None) == 0.0
    assert pacer.pressure is None
    off = CopyPacer(1.0)
    assert feed(off, [1.0] * 5) == [0.0] * 5


def test_a_sample_after_an_idle_spell_starts_a_new_window() -> None:
    pacer = CopyPacer(0.25)
    pacer.observe(0, 0)
    # Between two copies the host waited a lot; that says nothing about the next copy.
    assert pacer.observe(STALE_MS + 1, 10**9) == 0.0
    assert pacer.observe(STALE_MS + 1 + WINDOW_MS, 10**9) == 0.0
    # A counter that went backwards (another PSI file, a restarted container) starts over too.
    assert pacer.observe(STALE_MS + 1 + 2 * WINDOW_MS, 5) == 0.0


def test_pressure_share_of_two_readings() -> None:
    assert pressure_share((0, 0), (100, 25_000)) == 0.25  # 25 ms of waiting in 100 ms
    assert pressure_share((0, 0), (100, 250_000)) == 1.0  # at most the whole time
    assert pressure_share((100, 0), (100, 1_000)) is None  # no time passed
    assert pressure_share((0, 5_000), (100, 1_000)) is None  # the total fell: not the same counter
