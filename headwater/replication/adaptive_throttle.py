"""The adaptive reassignment throttle: the rate of this broker's reassignment limiters, from what the
copy does to its acks=all producers and in-sync followers (beyond Kafka; issue #21, docs/replication.md).

With ``reassignment.throttle.mode=adaptive`` each broker runs one ``AdaptiveThrottle``. About once a
second (``tick``) the shell hands it what it saw since the last tick (``Observation``):
- the latencies of the acks=all produces this broker answered (ms, to the answer from their arrival,
  or under ``latency_from=CreateTime`` from their producer's stamp: ``produce_latency_ms``);
- the largest lag, in ms, of an in-sync follower of a partition this broker leads (``None``: it leads
  no partition with an in-sync follower);
- the bytes its reassignment limiters charged (the copy of replicas being added, either direction);
- the share of the tick in which some task on the host waited for a CPU (Linux PSI; ``None``: not
  known or not asked for).

The rule (AIMD; docs/replication.md says why), first match wins:
0. The limiters charged nothing (no copy through this broker): hold (``NOT_LIMITING``). A latency
   or lag over target then has another cause, and cutting for it would start the next move at the
   floor and end the slow start before any copy tested the rate.
1. The follower lag is over ``max_follower_lag_ms``: cut the rate by ``DECREASE`` (``FOLLOWER_LAG``).
2. The p99 of the produce latencies is over ``max_produce_latency_ms``: cut (``PRODUCE_LATENCY``).
3. The CPU pressure is over ``max_cpu_pressure`` (below 1.0; 1.0 never cuts): cut (``CPU_PRESSURE``).
   The produce latency is measured from the request's arrival, so it misses the time the request
   and the producer waited for a CPU; on a host the copy's CPU contends for, this is the signal
   that sees it.
4. The copy used less than ``LIMITING_SHARE`` of the rate: hold (``NOT_LIMITING``). Raising a rate
   the copy does not reach tests nothing, and the next move would start from an untested rate (as
   TCP does not grow a window the application leaves unused, RFC 7661).
5. Too few produces to judge a p99 (``MIN_SAMPLES``, gathered over at most ``MAX_WINDOW_MS``) on a
   broker that leads in-sync followers: hold (``NO_SAMPLES``): there is something to protect but no
   traffic to judge by.
6. A signal past ``NEAR_TARGET`` of the way to its target: hold (``NEAR_TARGET``), and the slow
   start is over. The knee is near: a step past it would be paid for by the producers before the
   next tick cuts it back (TCP Vegas's band, LEDBAT's target: stop probing once the delay rises,
   rather than probing until loss). The way to the produce target starts at the p99 this broker
   sees without a copy (the median of the last ``BASE_TICKS`` ticks that charged nothing, once
   there are ``MIN_BASE_TICKS``; 0 before): a copy can only add to what the producers pay anyway,
   and a mark inside the copy-free noise would hold the rate on noise. The lag and the CPU
   pressure are measured from 0.
7. Otherwise raise the rate: every signal is under that mark, or the broker has
   nothing to protect at all (no acks=all produce, no in-sync follower: a new, empty broker, the
   usual target of a move, must not hold the copy at the start rate; the brokers at the other end
   of each copy judge it by their own signals). Until the first cut or hold the rate doubles
   (``SLOW_START``, TCP's slow start, RFC 5681: from the floor to the knee in a few ticks, not
   STEPS of them); after it, the rate rises by ``(max_rate - min_rate) / STEPS`` (``INCREASE``).
The rate always stays within ``[min_rate, max_rate]``.

Only replicas being added are metered by these limiters (``throttle.limiters_for``), so an in-sync
follower's catch-up is never slowed, whatever the rate. It reads no clock; every call takes ``now_ms``.
"""

from __future__ import annotations

import enum
import math
import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

MODE_STATIC = "static"
MODE_ADAPTIVE = "adaptive"
MODES = (MODE_STATIC, MODE_ADAPTIVE)
# Where a produce's latency starts (reassignment.adaptive.produce.latency.from).
FROM_ARRIVAL = "ArrivalTime"
FROM_CREATE_TIME = "CreateTime"
LATENCY_FROM = (FROM_ARRIVAL, FROM_CREATE_TIME)

SLOW_START_FACTOR = 2.0  # the rate's growth per good tick until the first cut
# A signal past this share of the way to its target holds the rate, and ends the slow start without a cut
# (as HyStart ends TCP's on rising delay): the knee is near, and doubling past it would overshoot
# by up to twice the rate.
NEAR_TARGET = 0.75
DECREASE = 0.7  # multiplicative decrease (CUBIC's beta): halving left a quarter of the rate unused on average
# The produce p99 without a copy: the median of the last BASE_TICKS judged ticks that charged nothing,
# once there are MIN_BASE_TICKS (as LEDBAT keeps a base delay, and HyStart a minimum RTT).
BASE_TICKS = 60
MIN_BASE_TICKS = 5
STEPS = 20  # additive increase: from the floor to the ceiling in this many good ticks
LIMITING_SHARE = 0.5  # the copy used at least this share of the rate since the last tick
MIN_SAMPLES = 20  # produces needed for a p99 (the nearest-rank p99 of 20 is their maximum)
MAX_WINDOW_MS = 5_000  # fewer samples than that in this long: no produce signal, and they are dropped
# A batch stamped more than this before its request arrived was not stamped at send time (an event
# time, a retry): its age says nothing about this produce, which is then judged from its arrival.
MAX_BEFORE_ARRIVAL_MS = 1_000


class Reason(enum.Enum):
    """Why the rate in force is what it is (the ``reason`` label of the metrics)."""

    STATIC = "static"  # mode static: reassignment.throttled.rate, or no limit
    START = "start"  # adaptive, no tick yet: the start value
    SLOW_START = "slow_start"
    INCREASE = "increase"
    PRODUCE_LATENCY = "produce_latency"
    FOLLOWER_LAG = "follower_lag"
    CPU_PRESSURE = "cpu_pressure"
    NEAR_TARGET = "near_target"
    NOT_LIMITING = "not_limiting"
    NO_SAMPLES = "no_samples"


@dataclass(frozen=True)
class AdaptiveSettings:
    """The ``reassignment.adaptive.*`` configs (docs/operations.md)."""

    min_rate: int
    max_rate: int
    max_produce_latency_ms: float
    max_follower_lag_ms: float
    max_cpu_pressure: float = 1.0  # 1.0 or more: never cut for it
    latency_from: str = FROM_ARRIVAL

    def __post_init__(self) -> None:
        if not 0 < self.min_rate <= self.max_rate:
            raise ValueError(f"need 0 < min rate <= max rate, got {self.min_rate} and {self.max_rate}")
        if self.latency_from not in LATENCY_FROM:
            raise ValueError(f"latency from {self.latency_from!r}, not one of {', '.join(LATENCY_FROM)}")

    @property
    def step(self) -> float:
        return max(1.0, (self.max_rate - self.min_rate) / STEPS)

    def clamp(self, rate: float) -> float:
        return min(float(self.max_rate), max(float(self.min_rate), rate))


@dataclass(frozen=True)
class Observation:
    produce_latencies_ms: Sequence[float] = ()
    follower_lag_ms: int | None = None
    copied_bytes: int = 0
    cpu_pressure: float | None = None


@dataclass(frozen=True)
class Decision:
    rate: int
    reason: Reason
    produce_p99_ms: float | None  # what it judged by (None: no p99 this tick)
    follower_lag_ms: int | None
    cpu_pressure: float | None = None


@dataclass(frozen=True)
class ThrottleStatus:
    """The reassignment throttle in force on a broker, for the metrics: the rate (0: none), why, and
    what the adaptive mode last judged by (``None``: nothing)."""

    mode: str
    rate: int
    reason: Reason
    produce_p99_ms: float | None = None
    follower_lag_ms: int | None = None
    cpu_pressure: float | None = None


def produce_latency_ms(since_arrival_ms: float, since_created_ms: float | None) -> float:
    """One acks=all produce's latency under ``CreateTime``: from when the producer stamped its oldest
    batch (``since_created_ms``, on the broker's clock) to the answer, so the time the request spent
    in the producer and waiting to be read counts too. From its arrival when there is no stamp, or the
    stamp is not a send time: after the arrival (the clocks disagree) or more than
    ``MAX_BEFORE_ARRIVAL_MS`` before it."""
    if since_created_ms is not None and since_arrival_ms <= since_created_ms <= since_arrival_ms + MAX_BEFORE_ARRIVAL_MS:
        return since_created_ms
    return since_arrival_ms


def p99(latencies: Sequence[float]) -> float:
    """Nearest-rank 99th percentile (Prometheus-free, exact for the few hundred samples of a tick)."""
    ordered = sorted(latencies)
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


class AdaptiveThrottle:
    def __init__(self, settings: AdaptiveSettings, now_ms: int, start_rate: int | None = None) -> None:
        """``start_rate``: ``reassignment.throttled.rate`` if set (clamped), else the floor."""
        self.settings = settings
        self._rate = settings.clamp(start_rate if start_rate is not None else settings.min_rate)
        self._last_tick_ms = now_ms
        self._pending: list[float] = []
        self._pending_since_ms = now_ms
        self._slow_start = True  # until the first cut or hold
        self._base: deque[float] = deque(maxlen=BASE_TICKS)  # produce p99s of ticks that charged nothing
        self.last = Decision(int(self._rate), Reason.START, None, None)

    @property
    def rate(self) -> int:
        return int(self._rate)

    def reconfigure(self, settings: AdaptiveSettings) -> None:
        """New targets or bounds: the rate in force carries on, clamped to the new bounds."""
        self.settings = settings
        self._rate = settings.clamp(self._rate)
        self.last = Decision(int(self._rate), self.last.reason, self.last.produce_p99_ms, self.last.follower_lag_ms,
                             self.last.cpu_pressure)

    def _produce_p99(self, latencies: Sequence[float], now_ms: int) -> float | None:
        if not self._pending:
            self._pending_since_ms = self._last_tick_ms
        self._pending.extend(latencies)
        if len(self._pending) >= MIN_SAMPLES:
            value = p99(self._pending)
        elif now_ms - self._pending_since_ms >= MAX_WINDOW_MS:
            value = None  # a trickle of produces: too few for a p99, and too old to wait for more
        else:
            return None  # keep gathering
        self._pending = []
        return value

    def base_latency_ms(self) -> float:
        """The produce p99 this broker sees without a copy (0: not known yet), capped at the target."""
        if len(self._base) < MIN_BASE_TICKS:
            return 0.0
        return min(statistics.median(self._base), self.settings.max_produce_latency_ms)

    def _near_target(self, latency: float | None, lag: int | None, pressure: float | None) -> bool:
        s = self.settings
        base = self.base_latency_ms()
        return ((latency is not None and latency > base + NEAR_TARGET * (s.max_produce_latency_ms - base))
                or (lag is not None and lag > NEAR_TARGET * s.max_follower_lag_ms)
                or (pressure is not None and pressure > NEAR_TARGET * s.max_cpu_pressure))

    def tick(self, now_ms: int, obs: Observation) -> Decision:
        s = self.settings
        elapsed_ms = max(1, now_ms - self._last_tick_ms)
        latency = self._produce_p99(obs.produce_latencies_ms, now_ms)
        self._last_tick_ms = now_ms
        lag = obs.follower_lag_ms
        pressure = obs.cpu_pressure if s.max_cpu_pressure < 1.0 else None
        if obs.copied_bytes == 0:
            reason = Reason.NOT_LIMITING
            if latency is not None:
                self._base.append(latency)
        elif lag is not None and lag > s.max_follower_lag_ms:
            reason = Reason.FOLLOWER_LAG
        elif latency is not None and latency > s.max_produce_latency_ms:
            reason = Reason.PRODUCE_LATENCY
        elif pressure is not None and pressure > s.max_cpu_pressure:
            reason = Reason.CPU_PRESSURE
        elif obs.copied_bytes < LIMITING_SHARE * self._rate * elapsed_ms / 1000:
            reason = Reason.NOT_LIMITING
        elif latency is None and lag is not None:
            reason = Reason.NO_SAMPLES
        elif self._near_target(latency, lag, pressure):
            reason = Reason.NEAR_TARGET
        elif self._slow_start:
            reason = Reason.SLOW_START
        else:
            reason = Reason.INCREASE
        if reason in (Reason.FOLLOWER_LAG, Reason.PRODUCE_LATENCY, Reason.CPU_PRESSURE):
            self._rate = s.clamp(self._rate * DECREASE)
            self._slow_start = False
        elif reason is Reason.SLOW_START:
            self._rate = s.clamp(max(self._rate * SLOW_START_FACTOR, self._rate + s.step))
        elif reason is Reason.INCREASE:
            self._rate = s.clamp(self._rate + s.step)
        elif reason is Reason.NEAR_TARGET:
            self._slow_start = False
        self.last = Decision(int(self._rate), reason, latency, lag, pressure)
        return self.last
