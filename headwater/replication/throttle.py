"""Replication throttles: a byte-rate limiter, the throttled-replicas topic config, and which
limiters meter a replica's traffic.

Kafka throttles replication traffic of chosen partitions (``leader.replication.throttled.replicas``
and ``follower.replication.throttled.replicas`` per topic) to a broker-wide rate
(``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate``, bytes per second).
Rules, from ``ReplicationQuotaManager`` and ``ReplicaManager.shouldLeaderThrottle``:
- Only replicas that are not in sync are throttled: the leader serves an empty answer to a throttled
  partition of a follower outside the ISR while the quota is exceeded; the follower leaves a throttled
  partition out of its fetch while it lags and the quota is exceeded.
- Bytes of throttled partitions are charged when they are read or fetched, so the rate may overshoot
  by one response; the limiter then refuses until it has paid the debt back.
- The config lists ``partition:broker`` pairs or ``*``; a broker throttles the partitions paired with
  its own id (``ConfigHandler.parseThrottledPartitions``). An empty value throttles nothing.

Beyond Kafka (KIP-455's future work): ``reassignment.throttled.rate`` meters only the traffic of
replicas being added (AR, from LeaderAndIsr), with no replica lists to keep up to date. A replica's
traffic is metered by every limiter that applies to it (``limiters_for``): the listed-replicas one,
the reassignment one, both, or none; it is held back while any of them is in debt.

``ByteRateLimiter`` is a token bucket: it refills at ``rate_bytes_per_s`` up to ``burst_bytes``
(one second's worth by default, Kafka's window size), and the quota is exceeded while it is in debt.
Over any stretch during which a replica keeps asking, the bytes let through are the rate times the
time plus at most one burst and one response, so the long-run rate is the setting as long as the
shell never leaves the bucket idle at its cap while a throttled replica waits. The shell keeps that
promise by waking waiters when the debt is paid (``delay_ms``) instead of after a fixed back-off.
A fetcher that shares a limiter with others reserves an estimate before it sends (``record``) and
settles the difference when the answer arrives (a negative ``record``), so concurrent fetchers do
not all pass the check at once and overshoot together.
It reads no clock; every call takes ``now_ms``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PAIR = re.compile(r"([0-9]+):([0-9]+)")


class ByteRateLimiter:
    def __init__(self, rate_bytes_per_s: float, now_ms: int, burst_bytes: float | None = None) -> None:
        if rate_bytes_per_s <= 0:
            raise ValueError(f"rate must be positive, got {rate_bytes_per_s}")
        self.rate_bytes_per_s = float(rate_bytes_per_s)
        self.burst_bytes = float(burst_bytes) if burst_bytes is not None else self.rate_bytes_per_s
        self._tokens = self.burst_bytes
        self._updated_ms = now_ms
        # Net bytes charged since creation (reservations minus refunds): how much the copy used,
        # for the adaptive throttle.
        self.charged_bytes = 0

    def _refill(self, now_ms: int) -> None:
        if now_ms > self._updated_ms:
            gained = (now_ms - self._updated_ms) * self.rate_bytes_per_s / 1000.0
            self._tokens = min(self.burst_bytes, self._tokens + gained)
            self._updated_ms = now_ms

    def set_rate(self, rate_bytes_per_s: float, now_ms: int) -> None:
        """A dynamic config change: refill at the old rate up to now, then use the new one."""
        if rate_bytes_per_s <= 0:
            raise ValueError(f"rate must be positive, got {rate_bytes_per_s}")
        self._refill(now_ms)
        self.rate_bytes_per_s = float(rate_bytes_per_s)
        self.burst_bytes = self.rate_bytes_per_s
        self._tokens = min(self._tokens, self.burst_bytes)

    def record(self, size_bytes: int, now_ms: int) -> None:
        """Charge ``size_bytes`` (a negative size pays back an over-estimate, up to the burst)."""
        self._refill(now_ms)
        self._tokens = min(self.burst_bytes, self._tokens - size_bytes)
        self.charged_bytes += size_bytes

    @property
    def tokens(self) -> float:
        """Tokens as of the last call (negative: debt); for tests and metrics."""
        return self._tokens

    def quota_exceeded(self, now_ms: int) -> bool:
        self._refill(now_ms)
        return self._tokens < 0

    def available_bytes(self, now_ms: int) -> int:
        self._refill(now_ms)
        return max(0, int(self._tokens))

    def throttle_time_ms(self, now_ms: int) -> int:
        """How long until the debt is paid back (0 if not exceeded); never early, at most 1 ms late."""
        self._refill(now_ms)
        if self._tokens >= 0:
            return 0
        return int(-self._tokens * 1000.0 / self.rate_bytes_per_s) + 1


@dataclass(frozen=True)
class ThrottledPartitions:
    """The partitions of one topic a broker throttles: all of them, or those listed."""

    all: bool = False
    partitions: frozenset[int] = frozenset()

    def __contains__(self, partition: object) -> bool:
        return self.all or partition in self.partitions


NO_THROTTLE = ThrottledPartitions()


def parse_throttled_replicas(value: str, broker_id: int) -> ThrottledPartitions:
    """Parse ``"p:b,p:b"`` / ``"*"`` / ``""`` into what ``broker_id`` throttles. Raises ValueError."""
    value = value.strip()
    if value == "":
        return NO_THROTTLE
    if value == "*":
        return ThrottledPartitions(all=True)
    partitions: set[int] = set()
    for raw in value.split(","):
        item = raw.strip()
        if item == "":
            continue  # Kafka's validator accepts empty items ("0:1,,1:2")
        m = _PAIR.fullmatch(item)
        if m is None:
            raise ValueError(
                f"{value!r}: must be '*' or a list of [partitionId]:[brokerId],[partitionId]:[brokerId],..."
            )
        if int(m.group(2)) == broker_id:
            partitions.add(int(m.group(1)))
    return ThrottledPartitions(partitions=frozenset(partitions))


def limiters_for(
    *, in_sync: bool, listed: bool, adding: bool, replication: ByteRateLimiter | None,
    reassignment: ByteRateLimiter | None,
) -> tuple[ByteRateLimiter, ...]:
    """The limiters that meter one replica's traffic of one partition (on either side).

    ``listed``: the partition is in this broker's throttled-replicas list for this side;
    ``adding``: the replica is in AR. An in-sync replica is never metered.
    """
    if in_sync:
        return ()
    out: list[ByteRateLimiter] = []
    if listed and replication is not None:
        out.append(replication)
    if adding and reassignment is not None:
        out.append(reassignment)
    return tuple(out)


def any_exceeded(limiters: tuple[ByteRateLimiter, ...], now_ms: int) -> bool:
    return any(lim.quota_exceeded(now_ms) for lim in limiters)


def delay_ms(limiters: tuple[ByteRateLimiter, ...], now_ms: int) -> int:
    """How long until every limiter is out of debt (0: traffic may flow now)."""
    return max((lim.throttle_time_ms(now_ms) for lim in limiters), default=0)


def record_all(limiters: tuple[ByteRateLimiter, ...], size_bytes: int, now_ms: int) -> None:
    for lim in limiters:
        lim.record(size_bytes, now_ms)
