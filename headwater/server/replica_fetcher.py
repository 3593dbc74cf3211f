"""The follower fetch loops: per leader broker, one task fetching the partitions this broker follows
there, and one for those a reassignment is adding it to.

The replica manager decides which partitions follow which leader (``PartitionReplica.fetcher``);
this module sends the fetches, meters them against the follower throttles, and carries out what
each partition's fetcher asks for on its answer (append, truncate, ask the leader's offsets).
Split from ``replica_manager.py`` along the seam Kafka draws between ``ReplicaManager`` and
``ReplicaFetcherManager`` / ``ReplicaFetcherThread``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from headwater.protocol.apis import API_SPECS, ApiKey
from headwater.protocol.control_wire import EncodedRequest
from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.protocol.fetch import (
    FOLLOWER_VERSION,
    FetchedResponse,
    decode_follower_fetch_response,
    encode_follower_fetch_request,
)
from headwater.records import scan_valid_prefix
from headwater.replication.copy_pacer import CopyPacer
from headwater.replication.fetch_session import INITIAL_EPOCH, PartitionRequest, SessionBuilder
from headwater.replication.follower import (
    AppendRecords,
    FetchRequestFields,
    ListLeaderOffsets,
    PartitionFetchResponse,
    Truncate,
    TruncateFullyAndStartAt,
)
from headwater.replication.partition import Role
from headwater.replication.throttle import ByteRateLimiter, any_exceeded, delay_ms, record_all
from headwater.replication.types import EpochEndOffset
from headwater.server.channel import BrokerChannel, ChannelError
from headwater.server.clock import now_ms
from headwater.server.cpu_pressure import CpuPressure

if TYPE_CHECKING:
    from headwater.server.replica_manager import Hosted

log = logging.getLogger(__name__)

FETCH_MAX_WAIT_MS = 500
FETCH_MAX_BYTES = 10 * 1024 * 1024
FETCH_PARTITION_MAX_BYTES = 1024 * 1024
EARLIEST, LATEST = -2, -1
YIELD_AFTER_BYTES = 256 * 1024
# A probe's partition_max_bytes: the leader sends nothing, or one batch if the partition comes first
# in its answer (KIP-74).
PROBE_BYTES = 1
# Lanes, named by the inter-broker channel each fetches on. A replica a reassignment adds fetches
# on a loop and connection of its own: its copy's megabyte answers then never hold back the
# fetches that move a high watermark, which acks=all produces wait for. On one shared fetch a
# produce's replication waited for the copy's answer in flight, and for its append, every time.
# (Kafka spreads partitions over num.replica.fetchers by hash instead, so a copy and the in-sync
# partitions of one leader share a fetch whenever they share a fetcher thread.)
FOLLOW_LANE = "fetch"
ADDING_LANE = "fetch-adding"
LANES = (FOLLOW_LANE, ADDING_LANE)


class ReplicaFetchers:
    """The fetch loops of one broker: per leader it follows partitions of, one per lane in use."""

    def __init__(
        self,
        broker_id: int,
        *,
        replica_fetch_backoff_ms: int,
        partitions: Mapping[tuple[str, int], Hosted],
        follower_limiters: Callable[[Hosted, bool], tuple[ByteRateLimiter, ...]],
        channel: Callable[[int, str], BrokerChannel],
        wake: Callable[[str, int], None],
        cpu_pressure: CpuPressure | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.replica_fetch_backoff_ms = replica_fetch_backoff_ms
        # The replica manager's own map, read only here: it alone adds and removes partitions.
        self.partitions = partitions
        self._follower_limiters = follower_limiters
        self._channel = channel
        self._wake = wake
        self._fetchers: dict[tuple[int, str], asyncio.Task[None]] = {}
        self._fetch_wakeups: dict[tuple[int, str], asyncio.Event] = {}
        self._stopping = False
        # reassignment.copy.max.cpu.pressure: the pause between the copy's fetches (1.0: none).
        self.copy_pacer = CopyPacer(1.0)
        self._cpu_pressure = cpu_pressure if cpu_pressure is not None else CpuPressure()

    async def stop(self) -> None:
        self._stopping = True
        tasks = list(self._fetchers.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._cpu_pressure.close()  # after the loops, which could otherwise open it again

    def ensure(self, h: Hosted) -> None:
        """The fetch loop of this followed partition's leader and lane, started if there is none,
        woken if there is. Called for every LeaderAndIsr a follower applies, since the end of a
        reassignment moves the partition to the other lane (the loop it leaves ends once empty)."""
        assert h.replica.fetcher is not None
        leader_id, lane = h.replica.fetcher.leader_id, self._lane(h)
        key = (leader_id, lane)
        task = self._fetchers.get(key)
        if task is not None and not task.done():
            self._fetch_wakeups[key].set()
        else:
            self._fetch_wakeups[key] = asyncio.Event()
            self._fetchers[key] = asyncio.get_running_loop().create_task(self._fetch_loop(leader_id, lane))

    def poke(self, leader_id: int) -> None:
        """Wake this leader's loops: the partitions they follow there changed."""
        for lane in LANES:
            event = self._fetch_wakeups.get((leader_id, lane))
            if event is not None:
                event.set()

    def _lane(self, h: Hosted) -> str:
        return ADDING_LANE if self.broker_id in h.replica.adding_replicas else FOLLOW_LANE

    def _following(self, leader_id: int, lane: str | None = None) -> list[Hosted]:
        return [h for h in self.partitions.values()
                if h.replica.role == Role.FOLLOWER and h.replica.fetcher is not None and h.replica.leader_id == leader_id
                and (lane is None or self._lane(h) == lane)]

    async def _fetch_loop(self, leader_id: int, lane: str) -> None:
        fetch_response_cls = API_SPECS[ApiKey.FETCH].response
        version = FOLLOWER_VERSION  # topic names, diverging epochs, current leader epoch
        wakeup = self._fetch_wakeups[(leader_id, lane)]
        session = SessionBuilder()  # KIP-227: after the first fetch, only what changed
        while not self._stopping:
            hosted = self._following(leader_id, lane)
            if not hosted:
                self._fetchers.pop((leader_id, lane), None)
                return
            now = now_ms()
            requests: dict[tuple[str, int], tuple[Hosted, FetchRequestFields]] = {}
            reserved: dict[tuple[str, int], tuple[tuple[ByteRateLimiter, ...], int]] = {}  # limiters, bytes
            probes: set[tuple[str, int]] = set()
            throttle_wait_ms: int | None = None  # until the first held-back partition may fetch again
            for h in hosted:
                fetcher = h.replica.fetcher
                assert fetcher is not None
                key = (h.replica.topic, h.replica.partition)
                if fetcher.lag is None and (told := session.last_told(key)) is not None:
                    fetcher.learn_leader_high_watermark(told)
                limiters = self._follower_limiters(h, fetcher.in_sync)
                probe = False
                if any_exceeded(limiters, now):
                    if fetcher.lag is not None or self.broker_id in h.replica.adding_replicas:
                        # A lagging throttled replica, or a copy, waits for its byte budget.
                        wait = delay_ms(limiters, now)
                        throttle_wait_ms = wait if throttle_wait_ms is None else min(throttle_wait_ms, wait)
                        continue
                    # A replica with no answer yet (a restarted broker, a new leader) does not know
                    # whether it lags. It asks for next to nothing, which tells the leader its
                    # position (so it may rejoin the ISR) and tells it the leader's high watermark,
                    # rather than waiting out a debt that can outlast replica.lag.time.max.ms. (The
                    # leader may still send one batch, if this comes first in its answer.)
                    probe = True
                fields = fetcher.next_request(now)
                if fields is None:
                    continue
                requests[key] = (h, fields)
                if probe:
                    probes.add(key)
                    reserved[key] = (limiters, 0)  # charged for what it brings
                elif limiters:
                    # Reserve the most this partition can bring now and settle on the answer, so the
                    # next partitions, and the fetch loops of other leaders sharing the limiter, see
                    # the budget spent instead of all passing the check and overshooting together.
                    record_all(limiters, FETCH_PARTITION_MAX_BYTES, now)
                    reserved[key] = (limiters, FETCH_PARTITION_MAX_BYTES)
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
                                            PROBE_BYTES if key in probes
                                            else FETCH_PARTITION_MAX_BYTES if key in reserved else share)
                      for key, (h, f) in requests.items()}
            session_id, epoch, send, forgotten = session.next_fetch(wanted)
            by_topic: dict[str, list[tuple[int, int, int, int, int, int]]] = {}
            for (topic, p), pr in send.items():
                by_topic.setdefault(topic, []).append((p, pr.current_leader_epoch, pr.fetch_offset, pr.last_fetched_epoch,
                                                       pr.log_start_offset, pr.partition_max_bytes))
            gone: dict[str, list[int]] = {}
            for topic, p in forgotten:
                gone.setdefault(topic, []).append(p)
            req = EncodedRequest(ApiKey.FETCH, version, encode_follower_fetch_request(
                self.broker_id, max_wait_ms, 1, FETCH_MAX_BYTES, session_id, epoch,
                list(by_topic.items()), list(gone.items())), fetch_response_cls)
            fetched: dict[tuple[str, int], int] = {}
            try:
                resp = await self._channel(leader_id, lane).request(req, version, decode=decode_follower_fetch_response)
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
            for t in resp.responses:
                for p in t.partitions:
                    session.answered((t.topic, p.partition_index), p.high_watermark)
            try:
                await self._on_fetch_response(leader_id, lane, requests, resp, fetched)
            finally:
                self._settle(reserved, fetched)
            if lane == ADDING_LANE and self.copy_pacer.active and any(fetched.values()):
                pause_ms = self.copy_pacer.observe(now_ms(), self._cpu_pressure.waited_us())
                if pause_ms > 0:
                    await asyncio.sleep(pause_ms / 1000)

    @staticmethod
    def _settle(reserved: dict[tuple[str, int], tuple[tuple[ByteRateLimiter, ...], int]],
                fetched: dict[tuple[str, int], int]) -> None:
        """Charge what each throttled partition really brought instead of what was reserved."""
        now = now_ms()
        for key, (limiters, amount) in reserved.items():
            record_all(limiters, fetched.get(key, 0) - amount, now)

    async def _on_fetch_response(self, leader_id: int, lane: str,
                                 requests: dict[tuple[str, int], tuple[Hosted, FetchRequestFields]],
                                 resp: FetchedResponse, fetched: dict[tuple[str, int], int]) -> None:
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
                records = p.records if p.records is not None else memoryview(b"")
                diverging = None
                if p.diverging_epoch is not None and p.diverging_epoch.epoch >= 0:
                    diverging = EpochEndOffset(p.diverging_epoch.epoch, p.diverging_epoch.end_offset)
                action = fetcher.on_fetch_response(
                    fields,
                    PartitionFetchResponse(ErrorCode(p.error_code), p.high_watermark, p.log_start_offset, diverging, len(records)),
                    log_end_offset=h.plog.log_end_offset, end_offset_for_epoch=h.plog.end_offset_for_epoch, now_ms=now,
                )
                try:
                    appended = fetched[(t.topic, p.partition_index)] = await self._carry_out(leader_id, lane, h, action,
                                                                                             records)
                except KafkaError as exc:
                    log.warning("replica %s-%d: %s", t.topic, p.partition_index, exc)
                    continue
                if appended >= YIELD_AFTER_BYTES:
                    # An append costs about a millisecond per MiB: let the loop serve what waits
                    # (produces, other fetches) before the next partition's, so an answer of many
                    # partitions does not hold it for all of them at once.
                    await asyncio.sleep(0)
                    now = now_ms()

    async def _carry_out(self, leader_id: int, lane: str, h: Hosted, action: Any, records: memoryview) -> int:
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
                    plog = h.plog  # a move between log dirs may have swapped in its copy meanwhile
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
            await self._list_leader_offsets(leader_id, lane, h, action)
        return appended

    async def _list_leader_offsets(self, leader_id: int, lane: str, h: Hosted, action: ListLeaderOffsets) -> None:
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
                resp = await self._channel(leader_id, lane).request(req, version)
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
        await self._carry_out(leader_id, lane, h, action2, memoryview(b""))



def _whole_batches(records: memoryview) -> memoryview:
    """A fetch may end in a partial batch (the leader's size limit); the follower appends whole ones."""
    _batches, end = scan_valid_prefix(records, verify_crc=False)
    return records[:end]
