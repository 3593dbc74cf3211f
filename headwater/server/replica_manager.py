"""The broker's replicas: the I/O around the replication core, one ``PartitionReplica`` per partition.

The core (``headwater/replication``) decides; this module carries out what it asks for, in the
order ``docs/replication.md`` gives: LeaderAndIsr and StopReplica from the controller, local
appends and acks=all waits, follower fetches the leader answers, the follower fetch loops, the
periodic ISR check, and AlterPartition to the controller.

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

from headwater.protocol.apis import API_SPECS, ApiKey
from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.protocol.interbroker import AlterPartitionRequest
from headwater.records import scan_valid_prefix
from headwater.replication.acks import PendingAcks
from headwater.replication.fetch_session import INITIAL_EPOCH, PartitionRequest, SessionBuilder
from headwater.replication.follower import (
    AppendRecords,
    FetchRequestFields,
    ListLeaderOffsets,
    PartitionFetchResponse,
    Truncate,
    TruncateFullyAndStartAt,
)
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
from headwater.replication.types import EpochEndOffset, HighWatermarkUpdate
from headwater.server.channel import PLAINTEXT, BrokerChannel, ChannelError, ChannelPool, ChannelSecurity
from headwater.storage import AppendResult, LogConfig, LogManager, PartitionLog
from headwater.storage.producers import SequenceGapError

log = logging.getLogger(__name__)

FETCH_MAX_WAIT_MS = 500
FETCH_MAX_BYTES = 10 * 1024 * 1024
FETCH_PARTITION_MAX_BYTES = 1024 * 1024
ALTER_PARTITION_RETRY_S = 0.2
# How long after becoming leader a producer's sequence gap may still be its retries in flight from
# the previous leader: about a produce request's timeout (30 s in Kafka's clients and librdkafka).
SEQUENCE_GAP_GRACE_MS = 30_000
EARLIEST, LATEST = -2, -1


def now_ms() -> int:
    return int(time.time() * 1000)


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
        self._fetchers: dict[int, asyncio.Task[None]] = {}
        self._fetch_wakeups: dict[int, asyncio.Event] = {}
        self._channels = ChannelPool(channel_security)
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
        self._throttle_wakeups: dict[tuple[str, int], asyncio.TimerHandle] = {}
        self._move_rates = RateTracker()

    # --- throttles ------------------------------------------------------------------------------------

    def set_throttle_rates(self, leader_bytes_per_s: int | None, follower_bytes_per_s: int | None) -> None:
        now = now_ms()
        self.leader_limiter = _limiter(self.leader_limiter, leader_bytes_per_s, now)
        self.follower_limiter = _limiter(self.follower_limiter, follower_bytes_per_s, now)

    def set_reassignment_rate(self, bytes_per_s: int | None) -> None:
        now = now_ms()
        self.reassignment_leader_limiter = _limiter(self.reassignment_leader_limiter, bytes_per_s, now)
        self.reassignment_follower_limiter = _limiter(self.reassignment_follower_limiter, bytes_per_s, now)

    def set_topic_throttles(self, topic: str, leader_value: str, follower_value: str) -> None:
        try:
            self._throttled[topic] = (parse_throttled_replicas(leader_value, self.broker_id),
                                      parse_throttled_replicas(follower_value, self.broker_id))
        except ValueError as exc:
            log.warning("ignoring throttled replicas of %s: %s", topic, exc)
            self._throttled.pop(topic, None)

    def _leader_limiters(self, topic: str, partition: int, in_sync: bool, replica_id: int) -> tuple[ByteRateLimiter, ...]:
        hosted = self.partitions.get((topic, partition))
        return limiters_for(
            in_sync=in_sync, listed=partition in self._throttled.get(topic, (NO_THROTTLE, NO_THROTTLE))[0],
            adding=hosted is not None and replica_id in hosted.replica.adding_replicas,
            replication=self.leader_limiter, reassignment=self.reassignment_leader_limiter,
        )

    def _follower_limiters(self, h: Hosted, in_sync: bool) -> tuple[ByteRateLimiter, ...]:
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
        self._wake_after(topic, partition, delay_ms(limiters, now))
        return True

    def leader_read_limit(self, topic: str, partition: int, in_sync: bool, replica_id: int, limit: int) -> int:
        """A metered follower gets at most 1 MiB per answer, however much it asked for, so the debt
        one answer leaves stays small and the copy flows evenly."""
        if self._leader_limiters(topic, partition, in_sync, replica_id):
            return min(limit, FETCH_PARTITION_MAX_BYTES)
        return limit

    def record_leader_bytes(self, topic: str, partition: int, in_sync: bool, size_bytes: int, replica_id: int = -1) -> None:
        record_all(self._leader_limiters(topic, partition, in_sync, replica_id), size_bytes, now_ms())

    def _wake_after(self, topic: str, partition: int, wait_ms: int) -> None:
        key = (topic, partition)
        if key in self._throttle_wakeups:
            return

        def fire() -> None:
            self._throttle_wakeups.pop(key, None)
            self._wake(topic, partition)

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

    async def stop(self) -> None:
        self._stopping = True
        for handle in self._throttle_wakeups.values():
            handle.cancel()
        self._throttle_wakeups.clear()
        for task in [*self._tasks, *self._fetchers.values()]:
            task.cancel()
        for task in [*self._tasks, *self._fetchers.values()]:
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
            self._poke_fetcher(old_leader)
        if out.start_fetcher and replica.fetcher is not None:
            fetcher = replica.fetcher
            if fetcher.initial_truncation is not None:
                plog.truncate_to(fetcher.initial_truncation.offset)
                fetcher.on_truncated(plog.log_end_offset, plog.latest_epoch())
            self._ensure_fetcher(fetcher.leader_id)
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
        if hosted is not None:
            out = hosted.replica.stop()
            if out.fail_pending_acks:
                self._complete(hosted.acks.fail_all(ErrorCode.NOT_LEADER_OR_FOLLOWER))
        if delete and self.logs.get(topic, partition) is not None:
            self.logs.delete(topic, partition)
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
            if hosted is None:
                continue
            leader_id = hosted.replica.leader_id if hosted.replica.role == Role.FOLLOWER else None
            out = hosted.replica.stop()
            if out.fail_pending_acks:
                self._complete(hosted.acks.fail_all(ErrorCode.NOT_LEADER_OR_FOLLOWER))
            if leader_id is not None:
                self._poke_fetcher(leader_id)
            self._wake(topic, partition)

    def set_live_brokers(self, broker_ids: Iterable[int] | None) -> None:
        ids = None if broker_ids is None else frozenset(broker_ids)
        now = now_ms()
        for hosted in self.partitions.values():
            if hosted.replica.is_leader:
                update = hosted.replica.set_isr_eligible(ids, now)
                if update is not None:
                    self._apply_hw(hosted, update)

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

    def append(self, hosted: Hosted, records: bytearray, acks: int,
               timeout_ms: int) -> tuple[AppendResult, asyncio.Future[ErrorCode] | None]:
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
            result = plog.append_as_leader(records, replica.leader_epoch, now, max_batch_bytes=hosted.max_message_bytes)
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
                       current_leader_epoch: int, last_fetched_epoch: int, log_start_offset: int) -> Any:
        replica, plog = hosted.replica, hosted.plog
        decision = replica.on_follower_fetch(
            FollowerFetch(replica_id, current_leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset, replica_epoch),
            leader_log_start_offset=plog.log_start_offset, epoch_end_offset=plog.end_offset_for_epoch, now_ms=now_ms(),
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
        self._wake(hosted.replica.topic, hosted.replica.partition)

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

    # --- follower fetch loops -------------------------------------------------------------------------

    def _channel(self, broker_id: int, purpose: str) -> BrokerChannel:
        address = self._broker_address(broker_id)
        if address is None:
            raise ChannelError(f"broker {broker_id} is not known")
        return self._channels.get((broker_id, purpose), address[0], address[1], f"broker-{self.broker_id}-{purpose}")

    def _ensure_fetcher(self, leader_id: int) -> None:
        task = self._fetchers.get(leader_id)
        if task is None or task.done():
            self._fetch_wakeups[leader_id] = asyncio.Event()
            self._fetchers[leader_id] = asyncio.get_running_loop().create_task(self._fetch_loop(leader_id))
        else:
            self._poke_fetcher(leader_id)

    def _poke_fetcher(self, leader_id: int) -> None:
        event = self._fetch_wakeups.get(leader_id)
        if event is not None:
            event.set()

    def _following(self, leader_id: int) -> list[Hosted]:
        return [h for h in self.partitions.values()
                if h.replica.role == Role.FOLLOWER and h.replica.fetcher is not None and h.replica.leader_id == leader_id]

    async def _fetch_loop(self, leader_id: int) -> None:
        fetch_cls = API_SPECS[ApiKey.FETCH].request
        version = 12  # topic names, diverging epochs, current leader epoch
        wakeup = self._fetch_wakeups[leader_id]
        session = SessionBuilder()  # KIP-227: after the first fetch, only what changed
        while not self._stopping:
            hosted = self._following(leader_id)
            if not hosted:
                self._fetchers.pop(leader_id, None)
                return
            now = now_ms()
            requests: dict[tuple[str, int], tuple[Hosted, FetchRequestFields]] = {}
            reserved: dict[tuple[str, int], tuple[ByteRateLimiter, ...]] = {}
            throttle_wait_ms: int | None = None  # until the first held-back partition may fetch again
            for h in hosted:
                fetcher = h.replica.fetcher
                assert fetcher is not None
                limiters = self._follower_limiters(h, fetcher.in_sync)
                if any_exceeded(limiters, now):
                    # A lagging throttled replica waits for its byte budget.
                    wait = delay_ms(limiters, now)
                    throttle_wait_ms = wait if throttle_wait_ms is None else min(throttle_wait_ms, wait)
                    continue
                fields = fetcher.next_request(now)
                if fields is None:
                    continue
                key = (h.replica.topic, h.replica.partition)
                requests[key] = (h, fields)
                if limiters:
                    # Reserve the most this partition can bring now and settle on the answer, so the
                    # next partitions, and the fetch loops of other leaders sharing the limiter, see
                    # the budget spent instead of all passing the check and overshooting together.
                    record_all(limiters, FETCH_PARTITION_MAX_BYTES, now)
                    reserved[key] = limiters
            if not requests:
                wakeup.clear()
                wait_ms = self.replica_fetch_backoff_ms
                if throttle_wait_ms is not None:
                    wait_ms = min(wait_ms, max(throttle_wait_ms, 1))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wakeup.wait(), wait_ms / 1000)
                continue
            # A held-back partition must not wait behind a long poll of the in-sync ones: the
            # request returns by the time its budget allows it to fetch again.
            max_wait_ms = FETCH_MAX_WAIT_MS if throttle_wait_ms is None else max(1, min(FETCH_MAX_WAIT_MS, throttle_wait_ms))
            # A partition that is not metered may take a share of the whole response budget: a
            # lone partition catching up (a reassignment's new replica) then moves 10 MiB per round
            # trip instead of 1 MiB, and the copy is no longer bound by round trips.
            share = max(FETCH_PARTITION_MAX_BYTES, FETCH_MAX_BYTES // len(requests))
            wanted = {key: PartitionRequest(f.fetch_offset, f.current_leader_epoch, f.last_fetched_epoch,
                                            h.plog.log_start_offset,
                                            FETCH_PARTITION_MAX_BYTES if key in reserved else share)
                      for key, (h, f) in requests.items()}
            session_id, epoch, send, forgotten = session.next_fetch(wanted)
            by_topic: dict[str, list[tuple[int, PartitionRequest]]] = {}
            for (topic, p), pr in send.items():
                by_topic.setdefault(topic, []).append((p, pr))
            gone: dict[str, list[int]] = {}
            for topic, p in forgotten:
                gone.setdefault(topic, []).append(p)
            T = fetch_cls.FetchTopic
            P = T.FetchPartition
            F = fetch_cls.ForgottenTopic
            req = fetch_cls(
                version=version, replica_id=self.broker_id, max_wait_ms=max_wait_ms, min_bytes=1,
                max_bytes=FETCH_MAX_BYTES, isolation_level=0, session_id=session_id, session_epoch=epoch,
                topics=[T(topic=topic, partitions=[P(partition=p, current_leader_epoch=pr.current_leader_epoch,
                                                     fetch_offset=pr.fetch_offset, last_fetched_epoch=pr.last_fetched_epoch,
                                                     log_start_offset=pr.log_start_offset,
                                                     partition_max_bytes=pr.partition_max_bytes)
                                                   for p, pr in items]) for topic, items in by_topic.items()],
                forgotten_topics_data=[F(topic=topic, partitions=ps) for topic, ps in gone.items()], rack_id="",
            )
            fetched: dict[tuple[str, int], int] = {}
            try:
                resp = await self._channel(leader_id, "fetch").request(req, version)
            except ChannelError as exc:
                log.debug("fetch from broker %d failed: %s", leader_id, exc)
                session.reset()
                now = now_ms()
                for h, fields in requests.values():
                    if h.replica.fetcher is not None:
                        h.replica.fetcher.on_request_failed(fields, now)
                self._settle(reserved, fetched)
                await asyncio.sleep(self.replica_fetch_backoff_ms / 1000)
                continue
            session.on_response(resp.error_code, resp.session_id, epoch, send, forgotten)
            if resp.error_code:
                # FETCH_SESSION_ID_NOT_FOUND or INVALID_FETCH_SESSION_EPOCH (the leader restarted, or
                # evicted the session): nothing was fetched; the next fetch is a full one.
                log.info("fetch session with broker %d ended (error %d); fetching everything again", leader_id,
                         resp.error_code)
                self._settle(reserved, fetched)
                if epoch == INITIAL_EPOCH:  # not a session's error: do not ask again at once
                    await asyncio.sleep(self.replica_fetch_backoff_ms / 1000)
                continue
            try:
                await self._on_fetch_response(leader_id, requests, resp, fetched)
            finally:
                self._settle(reserved, fetched)

    @staticmethod
    def _settle(reserved: dict[tuple[str, int], tuple[ByteRateLimiter, ...]], fetched: dict[tuple[str, int], int]) -> None:
        """Charge what each throttled partition really brought instead of what was reserved."""
        now = now_ms()
        for key, limiters in reserved.items():
            record_all(limiters, fetched.get(key, 0) - FETCH_PARTITION_MAX_BYTES, now)

    async def _on_fetch_response(self, leader_id: int, requests: dict[tuple[str, int], tuple[Hosted, FetchRequestFields]],
                                 resp: Any, fetched: dict[tuple[str, int], int]) -> None:
        """Carry out each partition's answer; ``fetched`` receives the bytes appended per partition."""
        now = now_ms()
        for t in resp.responses:
            for p in t.partitions:
                entry = requests.get((t.topic, p.partition_index))
                if entry is None:
                    continue
                h, fields = entry
                fetcher = h.replica.fetcher
                if fetcher is None or self.partitions.get((t.topic, p.partition_index)) is not h:
                    continue
                records = p.records or b""
                diverging = None
                if p.diverging_epoch is not None and p.diverging_epoch.epoch >= 0:
                    diverging = EpochEndOffset(p.diverging_epoch.epoch, p.diverging_epoch.end_offset)
                action = fetcher.on_fetch_response(
                    fields,
                    PartitionFetchResponse(ErrorCode(p.error_code), p.high_watermark, p.log_start_offset, diverging, len(records)),
                    log_end_offset=h.plog.log_end_offset, end_offset_for_epoch=h.plog.end_offset_for_epoch, now_ms=now,
                )
                try:
                    fetched[(t.topic, p.partition_index)] = await self._carry_out(leader_id, h, action, records)
                except KafkaError as exc:
                    log.warning("replica %s-%d: %s", t.topic, p.partition_index, exc)

    async def _carry_out(self, leader_id: int, h: Hosted, action: Any, records: bytes) -> int:
        """Do what the fetcher asked; return the bytes appended."""
        fetcher = h.replica.fetcher
        plog = h.plog
        appended = 0
        if fetcher is None:
            return 0
        if isinstance(action, AppendRecords):
            if records:
                whole = _whole_batches(records)
                plog.append_as_follower(whole)
                appended = len(whole)
                if plog.flush_by_messages_due:
                    # flush.messages holds on a follower too (the same UnifiedLog.append): the next
                    # fetch waits for the fsync, as Kafka's fetcher thread does.
                    await asyncio.to_thread(plog.flush_through, plog.log_end_offset)
            update = fetcher.on_appended(plog.log_end_offset, plog.latest_epoch())
            if update.high_watermark != plog.high_watermark:
                plog.high_watermark = update.high_watermark
                self._wake(h.replica.topic, h.replica.partition)  # a consumer reading this follower (KIP-392)
            if update.advance_log_start_to is not None and update.advance_log_start_to > plog.log_start_offset:
                plog.delete_records_before(update.advance_log_start_to)
        elif isinstance(action, Truncate):
            plog.truncate_to(action.offset)
            plog.high_watermark = fetcher.on_truncated(plog.log_end_offset, plog.latest_epoch())
        elif isinstance(action, TruncateFullyAndStartAt):
            plog.truncate_fully_and_start_at(action.offset)
            plog.high_watermark = fetcher.on_truncated(plog.log_end_offset, plog.latest_epoch())
        elif isinstance(action, ListLeaderOffsets):
            await self._list_leader_offsets(leader_id, h, action)
        return appended

    async def _list_leader_offsets(self, leader_id: int, h: Hosted, action: ListLeaderOffsets) -> None:
        fetcher = h.replica.fetcher
        assert fetcher is not None
        cls = API_SPECS[ApiKey.LIST_OFFSETS].request
        version = 7
        T = cls.ListOffsetsTopic
        P = T.ListOffsetsPartition
        offsets = {}
        try:
            for ts in (EARLIEST, LATEST):
                req = cls(version=version, replica_id=self.broker_id, isolation_level=0, topics=[T(
                    name=h.replica.topic, partitions=[P(partition_index=h.replica.partition,
                                                        current_leader_epoch=action.current_leader_epoch, timestamp=ts)])])
                resp = await self._channel(leader_id, "fetch").request(req, version)
                part = resp.topics[0].partitions[0]
                if part.error_code:
                    fetcher.on_leader_offsets_error(ErrorCode(part.error_code), now_ms())
                    return
                offsets[ts] = part.offset
        except ChannelError:
            fetcher.on_leader_offsets_error(ErrorCode.NETWORK_EXCEPTION, now_ms())
            return
        action2 = fetcher.on_leader_offsets(leader_log_start_offset=offsets[EARLIEST], leader_log_end_offset=offsets[LATEST],
                                            log_end_offset=h.plog.log_end_offset, now_ms=now_ms())
        await self._carry_out(leader_id, h, action2, b"")


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


def _whole_batches(records: bytes) -> bytes:
    """A fetch may end in a partial batch (the leader's size limit); the follower appends whole ones."""
    _batches, end = scan_valid_prefix(records, verify_crc=False)
    return records[:end]


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
