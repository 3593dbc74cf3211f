"""Reassignment progress: bytes to move, bytes moved, copy rate and ETA of each replica being added.

Two brokers see each move, and each reports what it knows exactly:
- The partition's leader knows every adding replica's fetch offset (its log end) and its own
  segments, so it knows the bytes of its log below that offset (moved) and in all (to move).
  Produces during the copy make "to move" grow, as they should.
- The adding replica knows the bytes it holds (moved). It knows the leader's high watermark only in
  offsets, so its "to move" is an estimate: its own bytes per offset times the offsets it lacks.

``RateTracker`` turns the successive "moved" readings of a move into a rate over a sliding window
(10 s by default), so a throttled copy shows its steady rate rather than one fetch's burst. A reading
below the previous one (the replica truncated, or restarted from scratch) starts the window again.
ETA is what is left over the rate, or None while the rate is zero. Sans-IO: every call takes ``now_ms``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable
from dataclasses import dataclass

LEADER = "leader"
FOLLOWER = "follower"
DEFAULT_WINDOW_MS = 10_000


@dataclass(frozen=True)
class MoveProgress:
    """One replica being added to one partition, as one broker (``role``) sees it."""

    topic: str
    partition: int
    replica: int  # the broker id of the replica being added
    role: str  # LEADER: seen from the partition's leader; FOLLOWER: the adding replica itself
    bytes_to_move: int  # -1: unknown (a follower that has nothing to scale by yet)
    bytes_moved: int
    rate_bytes_per_s: float
    eta_s: float | None

    @property
    def bytes_remaining(self) -> int:
        return max(0, self.bytes_to_move - self.bytes_moved)


@dataclass(frozen=True)
class BrokerProgress:
    """The moves one broker takes part in, summed per role (leader: data out; follower: data in)."""

    role: str
    moves: int
    bytes_to_move: int
    bytes_moved: int
    rate_bytes_per_s: float
    eta_s: float | None


def eta_s(remaining_bytes: int, rate_bytes_per_s: float) -> float | None:
    if remaining_bytes <= 0:
        return 0.0
    if rate_bytes_per_s <= 0:
        return None
    return remaining_bytes / rate_bytes_per_s


def summarize(moves: Iterable[MoveProgress]) -> list[BrokerProgress]:
    by_role: dict[str, list[MoveProgress]] = {}
    for m in moves:
        by_role.setdefault(m.role, []).append(m)
    out = []
    for role, ms in sorted(by_role.items()):
        moved = sum(m.bytes_moved for m in ms)
        rate = sum(m.rate_bytes_per_s for m in ms)
        if any(m.bytes_to_move < 0 for m in ms):  # one unknown size makes the sum unknown
            out.append(BrokerProgress(role, len(ms), -1, moved, rate, None))
            continue
        to_move = sum(m.bytes_to_move for m in ms)
        out.append(BrokerProgress(role, len(ms), to_move, moved, rate, eta_s(sum(m.bytes_remaining for m in ms), rate)))
    return out


class RateTracker:
    """Bytes-moved readings per move over a sliding window; see the module rules."""

    def __init__(self, window_ms: int = DEFAULT_WINDOW_MS) -> None:
        if window_ms <= 0:
            raise ValueError(f"window must be positive, got {window_ms}")
        self.window_ms = window_ms
        self._samples: dict[Hashable, deque[tuple[int, int]]] = {}

    def observe(self, key: Hashable, moved_bytes: int, now_ms: int) -> float:
        """Record a reading and return the rate (bytes/s) over the window; 0 until two readings."""
        samples = self._samples.setdefault(key, deque())
        if samples and (moved_bytes < samples[-1][1] or now_ms < samples[-1][0]):
            samples.clear()
        samples.append((now_ms, moved_bytes))
        # Keep one reading at or before the window's start, so the rate spans the whole window.
        while len(samples) > 2 and samples[1][0] <= now_ms - self.window_ms:
            samples.popleft()
        first_ms, first_bytes = samples[0]
        if now_ms <= first_ms:
            return 0.0
        return (moved_bytes - first_bytes) * 1000.0 / (now_ms - first_ms)

    def retain(self, keys: Iterable[Hashable]) -> None:
        """Forget moves that are over (or no longer ours)."""
        keep = set(keys)
        for key in [k for k in self._samples if k not in keep]:
            del self._samples[key]

    def __len__(self) -> int:
        return len(self._samples)
