"""The broker process's garbage-collector thresholds, and a clock of its pauses.

CPython's default thresholds (700, 10, 10) suit short scripts. A broker with 10,000 partitions
holds millions of long-lived objects (partition state, log indexes, the controller's cache), and
a single large request (a LeaderAndIsr or an alter of 10,000 partitions) allocates hundreds of
thousands of short-lived ones. With the defaults those batches survive enough young collections
to count as long-lived, and each time they reach a quarter of the heap a full collection walks all
of it: measured on the controller of a 10,000-partition cluster, 45 full collections of up to
0.5 s each in 90 s (8.2 s in all), each one a stall of the event loop. With a young generation of
50,000 objects, short-lived batches mostly die young; the same run made no full collection and
spent 1.2 s in the collector. Objects the collector frees are only those in reference cycles, so
collecting less often only delays their reuse.

The pauses are on the metrics endpoint (``headwater_gc_*``) so an operator can see them.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field
from typing import Any

THRESHOLDS = (50_000, 20, 10)


@dataclass
class GcClock:
    """Collections and time spent per generation since :meth:`install` (read by the metrics thread;
    plain numbers, each updated by one assignment)."""

    collections: list[int] = field(default_factory=lambda: [0, 0, 0])
    seconds: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    longest_s: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    _started: float = 0.0

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        took = time.perf_counter() - self._started
        g = info["generation"]
        self.collections[g] += 1
        self.seconds[g] += took
        if took > self.longest_s[g]:
            self.longest_s[g] = took

    def install(self) -> GcClock:
        if self._on_gc not in gc.callbacks:
            gc.callbacks.append(self._on_gc)
        return self


CLOCK = GcClock()


def tune() -> None:
    """Set the broker's thresholds and start timing collections (once per process)."""
    gc.set_threshold(*THRESHOLDS)
    CLOCK.install()
