"""The broker's collector thresholds and the clock of its pauses."""

from __future__ import annotations

import gc

from headwater.server import gc_policy
from headwater.server.gc_policy import GcClock


def test_the_clock_counts_and_times_each_generation() -> None:
    clock = GcClock().install()
    try:
        gc.collect(2)
        gc.collect(0)
        assert clock.collections[2] >= 1 and clock.collections[0] >= 1
        assert clock.seconds[2] > 0 and 0 < clock.longest_s[2] <= clock.seconds[2]
        clock.install()  # a second install does not count each collection twice
        before = clock.collections[2]
        gc.collect(2)
        assert clock.collections[2] == before + 1
    finally:
        gc.callbacks.remove(clock._on_gc)


def test_tune_sets_the_thresholds_and_starts_the_process_clock() -> None:
    saved = gc.get_threshold()
    try:
        gc_policy.tune()
        assert gc.get_threshold() == gc_policy.THRESHOLDS
        before = gc_policy.CLOCK.collections[1]
        gc.collect(1)
        assert gc_policy.CLOCK.collections[1] == before + 1
    finally:
        gc.set_threshold(*saved)
        if gc_policy.CLOCK._on_gc in gc.callbacks:
            gc.callbacks.remove(gc_policy.CLOCK._on_gc)
