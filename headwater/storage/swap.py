"""Replacing segments with a cleaned one, and finishing or undoing a replacement a crash interrupted.

The cleaner rewrites a group of old segments (``[base, end)``) into one new segment at ``base``:

1. it writes ``<base>.log.cleaned`` (and ``.index.cleaned``, ``.timeindex.cleaned``) and fsyncs them;
2. it renames the index files, then the log file, to ``*.swap`` and fsyncs the directory. The
   ``.log.swap`` file is the commit point: from then on the new segment replaces the old ones;
3. the log renames the old segments' files to ``*.deleted`` (readers keep their descriptors);
4. it renames the ``.swap`` index files, then the ``.swap`` log file, to their final names.

``complete_interrupted_swaps`` runs before a log loads its segments and applies Kafka's rules:

- ``*.cleaned`` files: the swap had not begun; they are deleted (the old segments are all there).
- an index ``*.swap`` file without a ``.log.swap`` of the same base: a crash during step 2; deleted.
- ``<base>.log.swap``: the swap is committed. Every regular segment whose base offset lies in
  ``[base, next offset of the swap segment)`` is one it replaces and is deleted, then the
  ``.swap`` files get their final names. Old segments that ended up empty lie past that range and
  stay; they only hold records that a later clean removes again, so nothing is lost or duplicated.
  At ``base`` itself only the log file is replaced: an index there is either the old one (overwritten
  by the ``.swap`` one) or already the new one (step 4 renamed it first); a load that finds it
  inconsistent with the log rebuilds it.
- ``*.deleted`` files are removed by the log's load as before.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from headwater.protocol.errors import KafkaError
from headwater.storage.files import fsync_dir
from headwater.storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    OFFSET_NAME_DIGITS,
    TIME_INDEX_SUFFIX,
    LogSegment,
    offset_file_name,
)

log = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
SEGMENT_FILE_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)


def _base_of(name: str, suffix: str) -> int | None:
    stem = name[: -len(suffix)] if name.endswith(suffix) else ""
    if len(stem) == OFFSET_NAME_DIGITS and stem.isdigit():
        return int(stem)
    return None


def segment_files(directory: Path, base: int, suffix: str = "") -> list[Path]:
    """The three files of the segment at ``base``, index files first (they are renamed first)."""
    return [directory / offset_file_name(base, s + suffix) for s in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX)]


def swap_next_offset(directory: Path, base: int) -> int:
    """One past the last offset in ``<base>.log.swap`` (``base`` when it holds no batch)."""
    seg = LogSegment.open_existing(directory, base, SWAP_SUFFIX)
    try:
        end = base
        for _, header in seg.iter_headers():
            end = header.last_offset + 1
        return end
    finally:
        seg.close()


def complete_interrupted_swaps(directory: Path) -> int:
    """Apply the rules above to ``directory``; returns how many swaps were completed."""
    names = [p.name for p in directory.iterdir()]
    changed = False
    for name in names:
        if name.endswith(CLEANED_SUFFIX):
            (directory / name).unlink(missing_ok=True)
            changed = True
    swap_bases = sorted(b for n in names if (b := _base_of(n, LOG_SUFFIX + SWAP_SUFFIX)) is not None)
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        for name in names:
            b = _base_of(name, suffix + SWAP_SUFFIX)
            if b is not None and b not in swap_bases:
                (directory / name).unlink(missing_ok=True)
                changed = True
    regular = sorted(b for n in names if (b := _base_of(n, LOG_SUFFIX)) is not None)
    done = 0
    for base in swap_bases:
        try:
            end = swap_next_offset(directory, base)
        except (OSError, KafkaError) as exc:
            # Written and fsynced before its rename, so this means the disk lost it; the old
            # segments are the better copy of whatever is still there.
            log.error("%s: dropping unreadable swap segment %d: %s", directory, base, exc)
            for path in segment_files(directory, base, SWAP_SUFFIX):
                path.unlink(missing_ok=True)
            changed = True
            continue
        for old in regular:
            if base < old < end:
                for path in segment_files(directory, old):
                    path.unlink(missing_ok=True)
        for path in segment_files(directory, base, SWAP_SUFFIX):
            if path.exists():
                os.replace(path, path.with_name(path.name[: -len(SWAP_SUFFIX)]))
        log.info("%s: completed the interrupted swap of cleaned segment %d (up to offset %d)", directory, base, end)
        done += 1
        changed = True
    if changed:
        fsync_dir(directory)
    return done
