"""Background priority for a reassignment's copy: the pause between the copy's fetches, from the
host's CPU pressure (beyond Kafka; docs/replication.md, "The copy's pace under CPU pressure").

A copy that no throttle limits is bound by CPU: the destination reads, checks and writes every
byte as fast as it can, and on a host whose cores are shared (other brokers, producers) that CPU
is taken from the work whose latency clients see. Linux reports how much of the time some
runnable task waited for a CPU (``/proc/pressure/cpu``, "some"); the shell hands the cumulative
waiting time in here, and ``CopyPacer`` turns it into a pause before each of the copy's fetches:

- once per ``WINDOW_MS`` it judges the share of that window in which some task waited;
- over ``max_pressure``, the pause doubles (from ``MIN_PAUSE_MS``), up to ``MAX_PAUSE_MS``;
- at or under it, the pause falls by ``RELEASE`` and is gone below ``MIN_PAUSE_MS``.

So on a host with idle cores the copy runs as fast as it can, and under contention it backs off
within a few windows, by as much as it takes to bring the waiting down, but never below one fetch
per ``MAX_PAUSE_MS`` (it always finishes). With no reading (no PSI: another OS, or a kernel built
without it) it never pauses. It reads no clock or file; every call takes ``now_ms``.
"""

from __future__ import annotations

from dataclasses import dataclass

WINDOW_MS = 100  # shorter windows judge a handful of scheduler ticks: noise
MIN_PAUSE_MS = 1.0
MAX_PAUSE_MS = 50.0  # with the 1 MiB a leader answers an adding replica with, a floor of ~20 MB/s
RELEASE = 0.5
STALE_MS = 10 * WINDOW_MS


def pressure_share(start: tuple[float, int], end: tuple[float, int]) -> float | None:
    """The share of the time between two PSI readings ((ms, cumulative µs some task waited)) in which
    some task waited for a CPU, at most 1. None when they bound no interval: no time passed, or the
    total fell (it only grows, so the readings are of different counters)."""
    elapsed_ms, waited_us = end[0] - start[0], end[1] - start[1]
    if elapsed_ms <= 0 or waited_us < 0:
        return None
    return min(1.0, waited_us / 1000 / elapsed_ms)


@dataclass(frozen=True)
class PaceStatus:
    """What the metrics show: the target, the pause in force, the pressure last judged (None: none)."""

    max_pressure: float
    pause_ms: float
    pressure: float | None


class CopyPacer:
    """The pause before an adding replica's next fetch, from CPU pressure samples."""

    def __init__(self, max_pressure: float) -> None:
        self.max_pressure = max_pressure
        self.pause_ms = 0.0
        self.pressure: float | None = None  # the share of the last judged window, for the metrics
        self._start: tuple[float, int] | None = None  # (now_ms, waited µs) where the window began

    @property
    def active(self) -> bool:
        return self.max_pressure < 1.0

    def configure(self, max_pressure: float) -> None:
        """A new target starts from no pause: the old one's judgement no longer holds."""
        if max_pressure != self.max_pressure:
            self.max_pressure = max_pressure
            self.pause_ms, self.pressure, self._start = 0.0, None, None

    def status(self) -> PaceStatus:
        return PaceStatus(self.max_pressure, self.pause_ms, self.pressure)

    def observe(self, now_ms: float, waited_us: int | None) -> float:
        """Take a sample of the cumulative CPU waiting time (µs); return the pause in force (ms)."""
        if waited_us is None or not self.active:
            self.pause_ms, self.pressure, self._start = 0.0, None, None
            return 0.0
        start, end = self._start, (now_ms, waited_us)
        if start is not None and 0 <= now_ms - start[0] < WINDOW_MS and waited_us >= start[1]:
            return self.pause_ms
        pressure = pressure_share(start, end) if start is not None and now_ms - start[0] <= STALE_MS else None
        self._start = end
        if pressure is None:
            # No window yet, or the last sample is from before an idle spell (no copy) whose
            # pressure says nothing about the copy now.
            return self.pause_ms
        self.pressure = pressure
        if pressure > self.max_pressure:
            self.pause_ms = min(MAX_PAUSE_MS, max(MIN_PAUSE_MS, self.pause_ms * 2))
        else:
            self.pause_ms *= RELEASE
            if self.pause_ms < MIN_PAUSE_MS:
                self.pause_ms = 0.0
        return self.pause_ms
