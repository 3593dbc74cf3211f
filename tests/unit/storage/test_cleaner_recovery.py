"""A crash at every step of a clean leaves a log that reopens whole, with every latest value."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _cleaner_support import keyed_batch, latest_per_key, read_all

from headwater.storage import LogConfig, PartitionLog
from headwater.storage.cleaner import clean_log, cleanable_range
from headwater.storage.segment import offset_file_name
from headwater.storage.swap import complete_interrupted_swaps

CONFIG = LogConfig(segment_bytes=1_200, cleanup_policy="compact", file_delete_delay_ms=0)


class Crash(BaseException):
    """Stands for the process dying: not an Exception, so nothing tidies up after it."""


def append(plog: PartitionLog, start: int, count: int) -> None:
    for i in range(start, start + count):
        key = b"k%02d" % (i % 12)
        plog.append_as_leader(keyed_batch([(key, b"v%03d" % i)], timestamp_ms=1_000 + i), 0, 1_000 + i)
    plog.high_watermark = plog.log_end_offset


def build(directory: Path, precleaned: bool = False) -> tuple[PartitionLog, list[tuple[int, int, bytes | None, bytes | None]]]:
    """Three full segments and the active one. ``precleaned``: cleaned once and then written to
    again, so the next clean merges several small cleaned segments into one group."""
    plog = PartitionLog("t", 0, directory, CONFIG, clock_ms=lambda: 0)
    append(plog, 0, 60)
    if precleaned:
        assert clean_log(plog, cleanable_range(plog, None, 0)) is not None
        append(plog, 60, 40)
    return plog, read_all(plog)


def record_steps(tmp_path: Path, precleaned: bool = False) -> list[str]:
    plog, _ = build(tmp_path / "probe", precleaned)
    steps: list[str] = []
    try:
        assert clean_log(plog, cleanable_range(plog, None, 0), on_step=steps.append) is not None
    finally:
        plog.close()
    return steps


def reopen_and_check(directory: Path, before: list[tuple[int, int, bytes | None, bytes | None]]) -> None:
    plog = PartitionLog("t", 0, directory, CONFIG, clock_ms=lambda: 0, recovery_point=0)
    try:
        plog.validate_state()
        after = read_all(plog)
        assert latest_per_key(after) == latest_per_key(before)
        assert set(after) <= set(before)  # nothing invented, offsets and timestamps as written
        assert [r[0] for r in after] == sorted(r[0] for r in after)
        names = os.listdir(directory)
        assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))], names
        # The log still cleans to the end after recovery.
        plog.high_watermark = plog.log_end_offset
        assert clean_log(plog, cleanable_range(plog, None, 0)) is not None
        assert latest_per_key(read_all(plog)) == latest_per_key(before)
        plog.validate_state()
    finally:
        plog.close()


def test_steps_cover_the_whole_protocol(tmp_path: Path) -> None:
    plog, _ = build(tmp_path / "merged", precleaned=True)
    try:
        c = cleanable_range(plog, None, 0)
        first_group_end = next(s.base_offset for s in plog.segments if s.size_bytes > 600)
        assert sum(1 for s in plog.segments if s.base_offset < first_group_end) >= 2  # a group of several
        assert c.end_offset > first_group_end
    finally:
        plog.close()
    steps = record_steps(tmp_path)
    for expected in ("cleaned-written", "cleaned-synced", "swap-synced", "old-renamed-deleted"):
        assert expected in steps
    assert any(s.startswith("renamed-") and s.endswith(".log.cleaned") for s in steps)
    assert any(s.startswith("renamed-") and s.endswith(".log.swap") for s in steps)


@pytest.mark.parametrize("precleaned", [False, True])
def test_crash_at_every_step(tmp_path: Path, precleaned: bool) -> None:
    steps = record_steps(tmp_path, precleaned)
    assert steps.count("cleaned-written") >= 2  # several groups, each with all its steps
    if precleaned:
        # Its first group merges several cleaned segments; the later groups repeat the same steps.
        steps = steps[: next(i for i, s in enumerate(steps) if s.endswith(".log.swap")) + 1]
    for k in range(len(steps)):
        directory = tmp_path / f"crash-{k}" / "t-0"
        plog, before = build(directory, precleaned)
        seen = 0

        def stop(_name: str, k: int = k) -> None:
            nonlocal seen
            if seen == k:
                raise Crash
            seen += 1

        with pytest.raises(Crash):
            clean_log(plog, cleanable_range(plog, None, 0), on_step=stop)
        plog.close_without_flush()  # the process is gone: no flush, no snapshot, no clean-shutdown
        reopen_and_check(directory, before)


def test_recovery_rules_on_hand_made_files(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    plog, before = build(directory)
    bases = [s.base_offset for s in plog.segments]
    plog.close()
    # A stray .cleaned segment and an index .swap without its log: both are thrown away.
    (directory / offset_file_name(bases[0], ".log.cleaned")).write_bytes(b"garbage")
    (directory / offset_file_name(bases[1], ".index.swap")).write_bytes(b"")
    assert complete_interrupted_swaps(directory) == 0
    assert not [n for n in os.listdir(directory) if n.endswith((".cleaned", ".swap"))]
    reopen_and_check(directory, before)
