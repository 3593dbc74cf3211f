"""The broker's replicas: the I/O around the replication core, one ``PartitionReplica`` per partition.

The core (``headwater/replication``) decides; this module carries out what it asks for, in the
order ``docs/replication.md`` gives: LeaderAndIsr and StopReplica from the controller, local
appends and acks=all waits, follower fetches the leader answers, the periodic ISR check, and
AlterPartition to the controller, and AlterReplicaLogDirs. The follower fetch loops are
``replica_fetcher.py``, the moves between log dirs ``log_dir_mover.py``.

A standalone broker uses the same path: it hands itself a LeaderAndIsr for each partition
(leader itself, ISR itself), so produce and fetch never take a different road with or without a
cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.protocol.interbroker import AlterPartitionRequest
from headwater.replication.acks import PendingAcks
from headwater.replication.adaptive_throttle import (
    FROM_CREATE_TIME,
    MODE_ADAPTIVE,
    MODE_STATIC,
    AdaptiveSettings,
    AdaptiveThrottle,
    Observation,
    Reason,
    ThrottleStatus,
    produce_latency_ms,
)
from headwater.replication.copy_pacer import PaceStatus, pressure_share
from headwater.replication.partition import (
    AlterPartitionProposal,
    AlterPartitionResponse,
    FollowerFetch,
    LeaderAndIsrState,
    PartitionReplica,
    Role,
)
from headwater.replication.progress import FOLLOWER, LEADER, MoveProgress, RateTracker, eta_s
from headwater.replication.throttle import (
    NO_THROTTLE,
    ByteRateLimiter,
    ThrottledPartitions,
    any_exceeded,
    delay_ms,
    limiters_for,
    parse_throttled_replicas,
    record_all,
)
from headwater.replication.types import HighWatermarkUpdate
from headwater.server.channel import PLAINTEXT, BrokerChannel, ChannelError, ChannelPool, ChannelSecurity
from headwater.server.clock import now_ms
from headwater.server.cpu_pressure import CpuPressure
from headwater.server.log_dir_mover import LogDirMover
from headwater.server.replica_fetcher import FETCH_PARTITION_MAX_BYTES, ReplicaFetchers
from headwater.storage import AppendResult, LogConfig, LogManager, PartitionLog
from headwater.storage.manager import future_dir_name
from headwater.storage.producers import AppendOrigin, SequenceGapError

log = logging.getLogger(__name__)

ALTER_PARTITION_RETRY_S = 0.2
# The most one fetch answer carries of a partition for a replica being added (not in sync yet):
# it bounds how long serving and appending one answer hold an event loop (issue #26).
ADDING_REPLICA_READ_BYTES = 1024 * 1024
ADAPTIVE_TICK_S = 1.0  # how often the adaptive reassignment throttle judges (docs/replication.md)
# How long after becoming leader a producer's sequence gap may still be its retries in flight from
# the previous leader: about a produce request's timeout (30 s in Kafka's clients and librdkafka).
SEQUENCE_GAP_GRACE_MS = 30_000


@dataclass
class Hosted:
    """One partition this broker holds a replica of."""

    replica: PartitionReplica
    plog: PartitionLog
    topic_id: Any = None
    acks: PendingAcks[asyncio.Future[ErrorCode]] = field(default_factory=PendingAcks)
    max_message_bytes: int = 1048588  # max.message.bytes of the topic, checked on every produce


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        logs: LogManager,
        *,
        replica_lag_time_max_ms: int,
        replica_fetch_backoff_ms: int,
        wake: Callable[[str, int], None],
        wake_readers: Callable[[str, int], None] | None = None,
        wake_replica: Callable[[str, int, int], None] | None = None,
        broker_address: Callable[[int], tuple[str, int] | None],
        controller_id: Callable[[], int],
        broker_epoch: Callable[[], int],
        channel_security: ChannelSecurity = PLAINTEXT,
    ) -> None:
        self.broker_id = broker_id
        self.logs = logs
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.replica_fetch_backoff_ms = replica_fetch_backoff_ms
        self._wake = wake
        # A new high watermark concerns consumers only: a follower's fetch waits for records, as
        # Kafka's DelayedFetch does, so it is not answered (and sent again) once per produce for it.
        self._wake_readers = wake_readers or wake
        # A throttle's debt paid: only the throttled follower's fetch has a different answer.
        self._wake_replica = wake_replica or (lambda topic, partition, _replica: wake(topic, partition))
        self._broker_address = broker_address
        self._controller_id = controller_id
        self._broker_epoch = broker_epoch
        self.partitions: dict[tuple[str, int], Hosted] = {}
        # Partitions where acks=all produces may be waiting: the 100 ms deadline check visits only these.
        self._acks_waiting: dict[tuple[str, int], Hosted] = {}
        # Told (topic, partition) after every LeaderAndIsr applied and every StopReplica: the group
        # coordinator loads and unloads its offsets partitions on these.
        self.leadership_listeners: list[Callable[[str, int], None]] = []
        self.controller_epoch = -1
        self._channels = ChannelPool(channel_security)
        self.fetchers = ReplicaFetchers(
            broker_id, replica_fetch_backoff_ms=replica_fetch_backoff_ms, partitions=self.partitions,
            follower_limiters=self._follower_limiters, channel=self._channel, wake=self._wake_readers,
        )
        self.mover = LogDirMover(logs, self.partitions, self._swapped)
        self._alter_queue: dict[tuple[str, int], AlterPartitionProposal] = {}
        self._alter_event = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        # Replication throttles (reassignment): byte rates from the broker's dynamic configs, and
        # per topic which partitions this broker throttles as leader and as follower. The
        # reassignment limiters (reassignment.throttled.rate) meter replicas in AR instead of listed
        # ones; one bucket per direction, as the listed throttles have.
        self.leader_limiter: ByteRateLimiter | None = None
        self.follower_limiter: ByteRateLimiter | None = None
        self.reassignment_leader_limiter: ByteRateLimiter | None = None
        self.reassignment_follower_limiter: ByteRateLimiter | None = None
        self._throttled: dict[str, tuple[ThrottledPartitions, ThrottledPartitions]] = {}
        # A follower fetch the leader held back waits for data; it is woken when the debt is paid.
        self._throttle_wakeups: dict[tuple[str, int, int], asyncio.TimerHandle] = {}
        self._move_rates = RateTracker()
        # The adaptive reassignment throttle (reassignment.throttle.mode=adaptive), when on: it sets
        # the reassignment limiters' rate every tick from the acks=all produce latencies the produce
        # handler records here (None while off: nothing is recorded) and its in-sync followers' lag.
        self._static_reassignment_rate: int | None = None
        self._adaptive: AdaptiveThrottle | None = None
        self.produce_latencies_ms: list[float] | None = None
        self._charged: tuple[int, int] = (0, 0)  # the reassignment limiters' charged_bytes at the last tick
        # The host's CPU pressure at the last tick (ms, µs waited), read only while the adaptive mode
        # judges by it (reassignment.adaptive.max.cpu.pressure below 1.0).
        self._cpu_pressure = CpuPressure()
        self._pressure_at: tuple[int, int] | None = None

    # --- throttles ------------------------------------------------------------------------------------

    def set_throttle_rates(self, leader_bytes_per_s: int | None, follower_bytes_per_s: int | None) -> None:
        now = now_ms()
        self.leader_limiter = _limiter(self.leader_limiter, leader_bytes_per_s, now)
        self.follower_limiter = _limiter(self.follower_limiter, follower_bytes_per_s, now)

    def set_reassignment_rate(self, bytes_per_s: int | None, adaptive: AdaptiveSettings | None = None) -> None:
        """``reassignment.throttled.rate``, and the adaptive mode's settings when it is on: then the
        static rate is only where the adaptive one starts."""
        self._static_reassignment_rate = bytes_per_s if bytes_per_s is not None and bytes_per_s > 0 else None
        if adaptive is None:
            self._adaptive = None
            self.produce_latencies_ms = None
            self._pressure_at = None
            self._apply_reassignment_rate(self._static_reassignment_rate)
            return
        if self._adaptive is None:
            self._adaptive = AdaptiveThrottle(adaptive, now_ms(), start_rate=self._static_reassignment_rate)
            self.produce_latencies_ms = []
            self._apply_reassignment_rate(self._adaptive.rate)
            # The first tick counts only what the copy charges from now on.
            self._charged = (self._charged_bytes(self.reassignment_leader_limiter),
                             self._charged_bytes(self.reassignment_follower_limiter))
        else:
            self._adaptive.reconfigure(adaptive)
            self._apply_reassignment_rate(self._adaptive.rate)

    def set_copy_max_cpu_pressure(self, max_pressure: float) -> None:
        """``reassignment.copy.max.cpu.pressure``: replicas being added pause their fetches while the
        host's CPU pressure is over it (docs/replication.md, "The copy's pace under CPU pressure")."""
        self.fetchers.copy_pacer.configure(max_pressure)

    def copy_pace(self) -> PaceStatus:
        return self.fetchers.copy_pacer.status()

    def _apply_reassignment_rate(self, bytes_per_s: int | None) -> None:
        now = now_ms()
        self.reassignment_leader_limiter = _limiter(self.reassignment_leader_limiter, bytes_per_s, now)
        self.reassignment_follower_limiter = _limiter(self.reassignment_follower_limiter, bytes_per_s, now)

    def record_produce_latency(self, started_s: float, created_ms: int | None = None) -> None:
        """An acks=all produce answered (``started_s``: ``time.perf_counter()`` at its arrival;
        ``created_ms``: the oldest CreateTime stamp of its batches, if any)."""
        latencies = self.produce_latencies_ms
        if latencies is None:
            return
        since_arrival = (time.perf_counter() - started_s) * 1000.0
        if created_ms is not None and self.judges_create_time:
            latencies.append(produce_latency_ms(since_arrival, time.time() * 1000.0 - created_ms))
        else:
            latencies.append(since_arrival)

    @property
    def judges_create_time(self) -> bool:
        """Whether the adaptive throttle judges produces from their CreateTime stamps (the produce
        handler reads them only then)."""
        adaptive = self._adaptive
        return adaptive is not None and adaptive.settings.latency_from == FROM_CREATE_TIME

    def adaptive_tick(self) -> None:
        """One judgement of the adaptive throttle (every ADAPTIVE_TICK_S while it is on)."""
        throttle = self._adaptive
        if throttle is None:
            return
        now = now_ms()
        latencies, self.produce_latencies_ms = self.produce_latencies_ms or [], []
        lag: int | None = None
        for h in self.partitions.values():
            if h.replica.is_leader:
                partition_lag = h.replica.isr_follower_lag_ms(now)
                if partition_lag is not None:
                    lag = partition_lag if lag is None else max(lag, partition_lag)
        charged = (self._charged_bytes(self.reassignment_leader_limiter),
                   self._charged_bytes(self.reassignment_follower_limiter))
        # Either direction counts: a broker may send one copy and receive another, at the same rate.
        copied = max(charged[0] - self._charged[0], charged[1] - self._charged[1])
        self._charged = charged
        if throttle.settings.max_cpu_pressure < 1.0:
            pressure = self._pressure_share(now)
        else:
            pressure, self._pressure_at = None, None  # judged afresh if it is asked for again
        self._apply_reassignment_rate(throttle.tick(now, Observation(latencies, lag, copied, pressure)).rate)

    def _pressure_share(self, now: int) -> float | None:
        """The share of the time since the last tick in which some task on the host waited for a CPU
        (None on the first tick after it was asked for, or without PSI)."""
        waited = self._cpu_pressure.waited_us()
        last, self._pressure_at = self._pressure_at, None if waited is None else (now, waited)
        if waited is None or last is None:
            return None
        return pressure_share(last, (now, waited))

    @staticmethod
    def _charged_bytes(limiter: ByteRateLimiter | None) -> int:
        return limiter.charged_bytes if limiter is not None else 0

    def reassignment_throttle(self) -> ThrottleStatus:
        """The reassignment throttle in force, for the metrics."""
        throttle = self._adaptive
        if throttle is None:
            return ThrottleStatus(MODE_STATIC, self._static_reassignment_rate or 0, Reason.STATIC)
        d = throttle.last
        return ThrottleStatus(MODE_ADAPTIVE, d.rate, d.reason, d.produce_p99_ms, d.follower_lag_ms, d.cpu_pressure)

    async def _adaptive_loop(self) -> None:
        while not self._stopping:
            await asyncio.sleep(ADAPTIVE_TICK_S)
            try:
                self.adaptive_tick()
            except Exception:  # a bad tick must not end the loop; the rate in force stays
                log.exception("adaptive reassignment throttle tick failed")

    def set_topic_throttles(self, topic: str, leader_value: str, follower_value: str) -> None:
        try:
            self._throttled[topic] = (parse_throttled_replicas(leader_value, self.broker_id),
                                      parse_throttled_replicas(follower_value, self.broker_id))
        except ValueError as exc:
            log.warning("ignoring throttled replicas of %s: %s", topic, exc)
            self._throttled.pop(topic, None)

    def _leader_limiters(self, topic: str, partition: int, in_sync: bool, replica_id: int) -> tuple[ByteRateLimiter, ...]:
        if in_sync:  # never metered; asked several times for every partition of every follower fetch
            return ()
        hosted = self.partitions.get((topic, partition))
        return limiters_for(
            in_sync=in_sync, listed=partition in self._throttled.get(topic, (NO_THROTTLE, NO_THROTTLE))[0],
            adding=hosted is not None and replica_id in hosted.replica.adding_replicas,
            replication=self.leader_limiter, reassignment=self.reassignment_leader_limiter,
        )

    def _follower_limiters(self, h: Hosted, in_sync: bool) -> tuple[ByteRateLimiter, ...]:
        if in_sync:
            return ()
        replica = h.replica
        return limiters_for(
            in_sync=in_sync, listed=replica.partition in self._throttled.get(replica.topic, (NO_THROTTLE, NO_THROTTLE))[1],
            adding=self.broker_id in replica.adding_replicas,
            replication=self.follower_limiter, reassignment=self.reassignment_follower_limiter,
        )

    def leader_throttled(self, topic: str, partition: int, in_sync: bool, replica_id: int = -1) -> bool:
        """Hold back this follower's data for now? If so, its fetch is woken when the debt is paid."""
        limiters = self._leader_limiters(topic, partition, in_sync, replica_id)
        now = now_ms()
        if not any_exceeded(limiters, now):
            return False
        # The follower's fetch now waits for data up to its max wait (500 ms); without this wake-up
        # it would sleep past the moment the budget allows more, and the copy would fall behind.
        self._wake_after(topic, partition, replica_id, delay_ms(limiters, now))
        return True

    def leader_read_limit(self, topic: str, partition: int, in_sync: bool, replica_id: int, limit: int) -> int:
        """A metered follower gets at most 1 MiB per answer, however much it asked for, so the debt
        one answer leaves stays small and the copy flows evenly. So does a replica being added that
        is not in sync yet, metered or not: sending an answer and appending it on the other side
        hold an event loop for about a millisecond per MiB, and 10 MiB answers held the leader's
        loop, which also answers producers, for 3-25 ms at a time (issue #26). The round trips this
        adds did not slow an unthrottled copy (docs/performance.md). In-sync followers keep their
        whole share, so their catch-up is not slowed."""
        if not in_sync and self._adding(topic, partition, replica_id):
            return min(limit, ADDING_REPLICA_READ_BYTES)
        if self._leader_limiters(topic, partition, in_sync, replica_id):
            return min(limit, FETCH_PARTITION_MAX_BYTES)
        return limit

    def _adding(self, topic: str, partition: int, replica_id: int) -> bool:
        hosted = self.partitions.get((topic, partition))
        return hosted is not None and replica_id in hosted.replica.adding_replicas

    def record_leader_bytes(self, topic: str, partition: int, in_sync: bool, size_bytes: int, replica_id: int = -1) -> None:
        record_all(self._leader_limiters(topic, partition, in_sync, replica_id), size_bytes, now_ms())

    def _wake_after(self, topic: str, partition: int, replica_id: int, wait_ms: int) -> None:
        key = (topic, partition, replica_id)
        if key in self._throttle_wakeups:
            return

        def fire() -> None:
            self._throttle_wakeups.pop(key, None)
            self._wake_replica(topic, partition, replica_id)

        self._throttle_wakeups[key] = asyncio.get_running_loop().call_later(max(wait_ms, 1) / 1000, fire)

    # --- reassignment progress ---------------------------------------------------------------------------

    def reassignment_progress(self, now: int) -> list[MoveProgress]:
        """Every replica being added that this broker serves (as leader) or is (as follower).

        Called about once a second (metrics); the leader's figures come from its segment positions,
        a few header reads per move.
        """
        moves: list[MoveProgress] = []
        for (topic, partition), h in self.partitions.items():
            replica, plog = h.replica, h.plog
            adding = replica.adding_replicas
            if not adding:
                continue
            if replica.is_leader:
                total = plog.size_bytes
                for r in adding:
                    progress = replica.progress(r)
                    offset = progress.log_end_offset if progress is not None else -1
                    try:
                        moved = total - _bytes_from(plog, offset)
                    except KafkaError as exc:  # a metric must not break the housekeeping that asked for it
                        log.debug("no progress for %s-%d: %s", topic, partition, exc)
                        continue
                    moves.append(self._move(topic, partition, r, LEADER, total, moved, now))
            elif self.broker_id in adding and replica.fetcher is not None:
                moved = plog.size_bytes
                lag = replica.fetcher.lag
                held = plog.log_end_offset - plog.log_start_offset
                # The leader's end is known only in offsets: scale by our own bytes per offset
                # (-1, unknown, until there is something to scale by).
                total = -1 if lag is None or held <= 0 else moved + round(lag * moved / held)
                moves.append(self._move(topic, partition, self.broker_id, FOLLOWER, total, moved, now))
        self._move_rates.retain((m.topic, m.partition, m.replica, m.role) for m in moves)
        return moves

    def _move(self, topic: str, partition: int, replica: int, role: str, total: int, moved: int, now: int) -> MoveProgress:
        rate = self._move_rates.observe((topic, partition, replica, role), moved, now)
        eta = eta_s(total - moved, rate) if total >= 0 else None
        return MoveProgress(topic, partition, replica, role, total, moved, rate, eta)

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._isr_loop()))
        self._tasks.append(loop.create_task(self._alter_partition_loop()))
        self._tasks.append(loop.create_task(self._adaptive_loop()))

    async def stop(self) -> None:
        self._stopping = True
        for handle in self._throttle_wakeups.values():
            handle.cancel()
        self._throttle_wakeups.clear()
        for task in self._tasks:
            task.cancel()
        await self.fetchers.stop()
        await self.mover.stop()
        self._cpu_pressure.close()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._channels.close()

    # --- controller requests ------------------------------------------------------------------------

    def check_controller_epoch(self, controller_epoch: int) -> ErrorCode:
        if controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        self.controller_epoch = controller_epoch
        return ErrorCode.NONE

    def become(
        self, topic: str, partition: int, state: LeaderAndIsrState, *, topic_id: Any, config: LogConfig,
        min_insync_replicas: int, max_message_bytes: int,
    ) -> ErrorCode:
        """Apply one partition state of a LeaderAndIsr request."""
        key = (topic, partition)
        hosted = self.partitions.get(key)
        if hosted is None:
            try:
                plog = self.logs.get_or_create(topic, partition, config)
            except KafkaError as exc:
                # Its log dir is offline (or fails now): the controller learns it from this
                # answer and moves leadership and the ISR away from this replica.
                return exc.code
            replica = PartitionReplica(
                topic, partition, self.broker_id,
                replica_lag_time_max_ms=self.replica_lag_time_max_ms,
                min_insync_replicas=min_insync_replicas,
                replica_fetch_backoff_ms=self.replica_fetch_backoff_ms,
            )
            hosted = Hosted(replica, plog, topic_id)
            self.partitions[key] = hosted
        hosted.topic_id = topic_id
        hosted.max_message_bytes = max_message_bytes
        replica, plog = hosted.replica, hosted.plog
        now = now_ms()
        replica.set_min_insync_replicas(min_insync_replicas, now)
        old_leader = replica.leader_id if replica.role == Role.FOLLOWER else None
        out = replica.apply_leader_and_isr(
            state, log_end_offset=plog.log_end_offset, latest_epoch=plog.latest_epoch(),
            high_watermark=plog.high_watermark, now_ms=now,
        )
        if out.error != ErrorCode.NONE:
            return out.error
        if out.assign_epoch is not None:
            plog.epochs.assign(out.assign_epoch.epoch, out.assign_epoch.start_offset)
        if out.high_watermark is not None:
            self._apply_hw(hosted, out.high_watermark)
        if out.fail_pending_acks:
            self._complete(hosted.acks.fail_all(ErrorCode.NOT_LEADER_OR_FOLLOWER))
        if out.stop_fetcher and old_leader is not None:
            self.fetchers.poke(old_leader)
        if out.start_fetcher and replica.fetcher is not None:
            fetcher = replica.fetcher
            if fetcher.initial_truncation is not None:
                plog.truncate_to(fetcher.initial_truncation.offset)
                fetcher.on_truncated(plog.log_end_offset, plog.latest_epoch())
        if replica.fetcher is not None:
            self.fetchers.ensure(hosted)  # also when only its lane changed (a reassignment's end)
        if self.logs.get_future(topic, partition) is not None:
            # A move that a restart interrupted resumes (Kafka's maybeAddLogDirFetchers).
            self.mover.add(topic, partition)
        self._tell_leadership(topic, partition)
        return ErrorCode.NONE

    def _tell_leadership(self, topic: str, partition: int) -> None:
        for listener in self.leadership_listeners:
            listener(topic, partition)

    def stop_replica(self, topic: str, partition: int, delete: bool) -> ErrorCode:
        if delete and self.logs.is_offline(topic, partition):
            # Its files sit in a failed dir and cannot be removed now. The controller keeps the
            # deletion pending and asks again when this broker registers after its restart.
            return ErrorCode.KAFKA_STORAGE_ERROR
        hosted = self.partitions.pop((topic, partition), None)
        self.mover.remove(topic, partition)
        if hosted is not None:
            out = hosted.replica.stop()
            if out.fail_pending_acks:
                self._complete(hosted.acks.fail_all(ErrorCode.NOT_LEADER_OR_FOLLOWER))
        if delete:
            self.logs.delete(topic, partition)  # its future log too
        self._wake(topic, partition)
        self._tell_leadership(topic, partition)
        return ErrorCode.NONE

    def drop_offline(self, keys: Iterable[tuple[str, int]]) -> None:
        """Partitions whose log dir went offline: stop leading or following them at once; the files stay
        for recovery after a restart.

        Pending acks=all produces fail with NOT_LEADER_OR_FOLLOWER, as at any leadership change, not
        with KAFKA_STORAGE_ERROR: their batches were written here before the dir failed and may
        already sit on the followers, one of which becomes leader. librdkafka takes a storage
        error as "not persisted" and renumbers the retry under a new producer epoch, which the new
        leader cannot recognise as a duplicate (the chaos disk-full nemesis found exactly that);
        after NOT_LEADER_OR_FOLLOWER it retries the same sequence and the new leader deduplicates.
        Only a write that itself failed answers KAFKA_STORAGE_ERROR: nothing of it was kept."""
        for topic, partition in keys:
            hosted = self.partitions.pop((topic, partition), None)
            self.mover.remove(topic, partition)
            if hosted is None:
                continue
            leader_id = hosted.replica.leader_id if hosted.replica.role == Role.FOLLOWER else None
            out = hosted.replica.stop()
            if out.fail_pending_acks:
                self._complete(hosted.acks.fail_all(ErrorCode.NOT_LEADER_OR_FOLLOWER))
            if leader_id is not None:
                self.fetchers.poke(leader_id)
            self._wake(topic, partition)

    def set_live_brokers(self, broker_ids: Iterable[int] | None) -> None:
        ids = None if broker_ids is None else frozenset(broker_ids)
        now = now_ms()
        for hosted in self.partitions.values():
            if hosted.replica.is_leader:
                update = hosted.replica.set_isr_eligible(ids, now)
                if update is not None:
                    self._apply_hw(hosted, update)

    # --- moves between log dirs ---------------------------------------------------------------------

    def alter_log_dir(self, topic: str, partition: int, path: str) -> ErrorCode:
        """One partition of AlterReplicaLogDirs, Kafka's ``ReplicaManager.alterReplicaLogDirs``."""
        key = (topic, partition)
        try:
            if len(future_dir_name(topic, partition, "0" * 32)) > 255:  # a file name's limit
                raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic name is too long.")
            log_dir = self.logs.find_dir(path)
            if log_dir in self.logs.offline_dirs:
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"Log directory {path} is offline")
            hosted = self.partitions.get(key)
            future = self.logs.get_future(topic, partition)
            if hosted is not None and future is not None and self.logs.future_dir_of(future) != log_dir:
                # Another destination (the current dir included) ends the move under way.
                self.mover.remove(topic, partition)
                self.logs.delete_future(topic, partition)
            elif hosted is None and self.logs.is_offline(topic, partition):
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"Partition {topic}-{partition} is offline")
            # A replica not created here yet will be created in that dir (and the answer is
            # REPLICA_NOT_AVAILABLE, which Kafka keeps for this API; its tools retry on it).
            self.logs.set_preferred_dir(topic, partition, log_dir)
            if hosted is None:
                return ErrorCode.REPLICA_NOT_AVAILABLE
            if self.logs.log_dir_of(hosted.plog) != log_dir:
                self.logs.create_future(topic, partition, log_dir)
                self.mover.add(topic, partition)
            return ErrorCode.NONE
        except KafkaError as exc:
            log.warning("Unable to alter log dirs for %s-%d: %s", topic, partition, exc.message or exc.code.name)
            return exc.code

    def set_alter_log_dirs_rate(self, bytes_per_s: int | None) -> None:
        self.mover.set_rate(bytes_per_s)

    def _swapped(self, hosted: Hosted, plog: PartitionLog) -> None:
        """The mover swapped in the future log: every later read and append goes to it."""
        hosted.plog = plog
        self._wake(hosted.replica.topic, hosted.replica.partition)

    # --- the data path ------------------------------------------------------------------------------

    def leader(self, topic: str, partition: int, current_leader_epoch: int = -1) -> Hosted:
        """The partition if this broker leads it (and the client's epoch, when given, matches)."""
        hosted = self.partitions.get((topic, partition))
        if hosted is None:
            if self.logs.is_offline(topic, partition):
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"the log dir of {topic}-{partition} is offline")
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "This server is not the leader for that topic-partition.")
        error = hosted.replica.check_leader_epoch(current_leader_epoch)
        if error != ErrorCode.NONE:
            raise KafkaError(error)
        return hosted

    def hosted(self, topic: str, partition: int) -> Hosted | None:
        return self.partitions.get((topic, partition))

    def append(self, hosted: Hosted, records: bytearray | memoryview, acks: int, timeout_ms: int,
               origin: AppendOrigin = AppendOrigin.CLIENT) -> tuple[AppendResult, asyncio.Future[ErrorCode] | None]:
        """Append as leader; return what was appended and, when the answer must wait, a future of
        the final error: for acks=all, until the high watermark covers the batch; and, when the
        topic's flush.messages is reached, until the fsync is done (Kafka's UnifiedLog.append
        flushes before it returns; here a worker thread does, and the answer waits for it)."""
        replica, plog = hosted.replica, hosted.plog
        error = replica.check_append(acks)
        if error != ErrorCode.NONE:
            raise KafkaError(error)
        now = now_ms()
        try:
            result = plog.append_as_leader(records, replica.leader_epoch, now, max_batch_bytes=hosted.max_message_bytes,
                                           origin=origin)
        except SequenceGapError as gap:
            raise self._sequence_gap(replica, gap, now) from None
        update = replica.on_local_append(plog.log_end_offset, now)
        if update is not None:
            self._apply_hw(hosted, update)
        flushed: asyncio.Future[ErrorCode] | None = None
        if not result.duplicate:
            self._wake(replica.topic, replica.partition)
            if plog.flush_by_messages_due:
                flushed = asyncio.ensure_future(_flush_through(plog, plog.log_end_offset))
        if acks != -1:
            return result, flushed
        check = replica.ack_check(result.last_offset + 1)
        fut: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        if check.done:
            fut.set_result(check.error)
        else:
            hosted.acks.add(fut, result.last_offset + 1, now + timeout_ms)
            self._acks_waiting[(replica.topic, replica.partition)] = hosted
        if flushed is not None:
            return result, asyncio.ensure_future(_first_error(flushed, fut))
        return result, fut

    def _sequence_gap(self, replica: PartitionReplica, gap: SequenceGapError, now: int) -> KafkaError:
        """The error for a batch that skips sequences of its producer.

        Right after a leader change a gap is usually not one: the producer sent batches to the old
        leader, which answered NOT_LEADER_OR_FOLLOWER (or failed their acks=all wait) without this
        broker having them, and sent its next batch here before retrying those. Kafka answers
        OUT_OF_ORDER_SEQUENCE_NUMBER, and librdkafka then bumps its producer epoch and renumbers
        every queued message of every partition, including ones the old leader had written and
        replicated before answering NOT_LEADER_OR_FOLLOWER: they are written a second time
        (librdkafka issue 4953). So while leadership came here from another broker a short time
        ago and the producer's latest batch here predates this leader epoch, the answer is
        LEADER_NOT_AVAILABLE: retriable and "not written", so the client queues the batch behind
        its retries and sends them in order. A gap at a broker that led all along is
        OUT_OF_ORDER_SEQUENCE_NUMBER, as in Kafka.
        """
        epoch_start, took_over = replica.leader_epoch_start_offset, replica.took_over_ms
        if (epoch_start is not None and took_over is not None and gap.latest_offset < epoch_start
                and now - took_over < SEQUENCE_GAP_GRACE_MS):
            log.info("%s-%d: %s, its latest batch (offset %d) from before this leader epoch (from offset %d): "
                     "LEADER_NOT_AVAILABLE until its earlier batches arrive",
                     replica.topic, replica.partition, gap.message, gap.latest_offset, epoch_start)
            return KafkaError(ErrorCode.LEADER_NOT_AVAILABLE,
                              f"{gap.message}: the earlier batches may still be on their way from the previous leader")
        log.info("%s-%d: %s", replica.topic, replica.partition, gap.message)
        return gap

    def follower_fetch(self, hosted: Hosted, replica_id: int, replica_epoch: int, fetch_offset: int,
                       current_leader_epoch: int, last_fetched_epoch: int, log_start_offset: int,
                       update_state: bool = True) -> Any:
        replica, plog = hosted.replica, hosted.plog
        decision = replica.on_follower_fetch(
            FollowerFetch(replica_id, current_leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset, replica_epoch),
            leader_log_start_offset=plog.log_start_offset, epoch_end_offset=plog.end_offset_for_epoch, now_ms=now_ms(),
            update_state=update_state,
        )
        if decision.high_watermark_update is not None:
            self._apply_hw(hosted, decision.high_watermark_update)
        if decision.alter_partition is not None:
            self._queue_alter(decision.alter_partition)
        return decision

    # --- high watermark and acks ------------------------------------------------------------------

    def _apply_hw(self, hosted: Hosted, update: HighWatermarkUpdate) -> None:
        hosted.plog.high_watermark = update.new
        self._complete(hosted.acks.on_high_watermark(update.new, hosted.replica.ack_error()))
        self._wake_readers(hosted.replica.topic, hosted.replica.partition)

    @staticmethod
    def _complete(completions: Iterable[Any]) -> None:
        for c in completions:
            if not c.key.done():
                c.key.set_result(c.error)

    async def _isr_loop(self) -> None:
        # acks=all deadlines are checked every 100 ms, but only where produces wait (a broker with
        # 10,000 idle partitions visited all of them ten times a second); the ISR check runs every
        # replica.lag.time.max.ms / 2, as Kafka's, since it visits every partition.
        isr_interval_ms = max(50, self.replica_lag_time_max_ms // 2)
        last_isr_check = now_ms()
        while not self._stopping:
            await asyncio.sleep(0.1)
            now = now_ms()
            check_isr = now - last_isr_check >= isr_interval_ms
            if check_isr:
                last_isr_check = now
            for key, hosted in list(self._acks_waiting.items()):
                if len(hosted.acks):
                    self._complete(hosted.acks.expire(now))
                if not len(hosted.acks) or self.partitions.get(key) is not hosted:
                    del self._acks_waiting[key]  # answered, expired or failed: nothing left to time out
            if check_isr:
                for hosted in list(self.partitions.values()):
                    if hosted.replica.is_leader:
                        proposal = hosted.replica.check_isr(now)
                        if proposal is not None:
                            self._queue_alter(proposal)

    # --- AlterPartition -------------------------------------------------------------------------------

    def _queue_alter(self, proposal: AlterPartitionProposal) -> None:
        self._alter_queue[(proposal.topic, proposal.partition)] = proposal
        self._alter_event.set()

    async def _alter_partition_loop(self) -> None:
        while not self._stopping:
            await self._alter_event.wait()
            self._alter_event.clear()
            batch = dict(self._alter_queue)
            self._alter_queue.clear()
            if not batch:
                continue
            try:
                resp = await self._send_alter_partition(list(batch.values()))
            except (ChannelError, KafkaError) as exc:
                # Debug level: with no controller elected this repeats every ALTER_PARTITION_RETRY_S until one is elected.
                log.debug("AlterPartition failed (%s); retrying", exc)
                for key, p in batch.items():
                    self._alter_queue.setdefault(key, p)
                await asyncio.sleep(ALTER_PARTITION_RETRY_S)
                self._alter_event.set()
                continue
            top_error = ErrorCode(resp.error_code)
            results: dict[tuple[str, int], Any] = {}
            for t in resp.topics:
                for item in t.partitions:
                    results[(t.topic_name, item.partition_index)] = item
            for key, proposal in batch.items():
                hosted = self.partitions.get(key)
                if hosted is None:
                    continue
                found = results.get(key)
                if found is None:
                    code = top_error if top_error != ErrorCode.NONE else ErrorCode.UNKNOWN_SERVER_ERROR
                    answer = AlterPartitionResponse(code)
                else:
                    answer = AlterPartitionResponse(ErrorCode(found.error_code), found.leader_id, found.leader_epoch,
                                                    tuple(found.isr), found.partition_epoch)
                out = hosted.replica.on_alter_partition_response(proposal, answer, now_ms())
                if out.high_watermark is not None:
                    self._apply_hw(hosted, out.high_watermark)
                if out.retry is not None:
                    self._alter_queue.setdefault(key, out.retry)
            if self._alter_queue:
                await asyncio.sleep(ALTER_PARTITION_RETRY_S)
                self._alter_event.set()

    async def _send_alter_partition(self, proposals: list[AlterPartitionProposal]) -> Any:
        controller = self._controller_id()
        if controller < 0:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "no controller known")
        by_topic: dict[str, list[AlterPartitionProposal]] = {}
        for p in proposals:
            by_topic.setdefault(p.topic, []).append(p)
        version = 1  # topic names (v2+ addresses topics by id)
        T = AlterPartitionRequest.TopicData
        P = T.PartitionData
        req = AlterPartitionRequest(
            version=version, broker_id=self.broker_id, broker_epoch=self._broker_epoch(),
            topics=[T(topic_name=topic, partitions=[P(partition_index=p.partition, leader_epoch=p.leader_epoch,
                                                      new_isr=list(p.new_isr), leader_recovery_state=p.leader_recovery_state,
                                                      partition_epoch=p.partition_epoch) for p in ps])
                    for topic, ps in by_topic.items()],
        )
        channel = self._channel(controller, "alter-partition")
        return await channel.request(req, version)

    # --- broker-to-broker channels ---------------------------------------------------------------------

    def _channel(self, broker_id: int, purpose: str) -> BrokerChannel:
        address = self._broker_address(broker_id)
        if address is None:
            raise ChannelError(f"broker {broker_id} is not known")
        return self._channels.get((broker_id, purpose), address[0], address[1], f"broker-{self.broker_id}-{purpose}")


async def _flush_through(plog: PartitionLog, offset: int) -> ErrorCode:
    """fsync ``plog`` through ``offset`` on a worker thread; the error a produce answers if it fails."""
    try:
        await asyncio.to_thread(plog.flush_through, offset)
    except KafkaError as exc:  # its log dir is reported failed by the log itself
        return exc.code
    return ErrorCode.NONE


async def _first_error(*waits: asyncio.Future[ErrorCode]) -> ErrorCode:
    """Wait for every future; the first error among them in order, else NONE."""
    errors = [await w for w in waits]
    return next((e for e in errors if e != ErrorCode.NONE), ErrorCode.NONE)


def _bytes_from(plog: PartitionLog, offset: int) -> int:
    """Bytes of the log from the batch holding ``offset`` to the end (all of it for an unknown offset)."""
    segments = plog.segments
    if offset < 0 or offset <= plog.log_start_offset:
        return sum(seg.size_bytes for seg in segments)
    if offset >= plog.log_end_offset:
        return 0
    total = 0
    for seg in reversed(segments):
        if seg.base_offset > offset:
            total += seg.size_bytes
            continue
        found = seg.locate(offset)
        if found is not None:
            total += seg.size_bytes - found[0]
        break
    return total


def _limiter(current: ByteRateLimiter | None, rate: int | None, now: int) -> ByteRateLimiter | None:
    if rate is None or rate <= 0:
        return None
    if current is None:
        return ByteRateLimiter(rate, now)
    current.set_rate(rate, now)
    return current
