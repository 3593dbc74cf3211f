"""Fetch: followers replicating (with KIP-227 sessions) and consumers reading, from the leader or,
with KIP-392, from a replica in their rack; a fetch with too little data waits until a partition
it reads is woken (an append, a new high watermark, a leadership change)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from headwater.protocol.apis import ApiKey, Request
from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.protocol.fetch import FetchPartitionData, FetchTopicData, NodeEndpoint, encode_fetch_response
from headwater.replication.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    MAX_SESSIONS,
    PartitionRequest,
    SessionCache,
    SessionPartition,
    next_epoch,
)
from headwater.security.acl import AclOperation
from headwater.server.authority import Handler
from headwater.server.context import BrokerContext
from headwater.server.replica_manager import Hosted


class FetchApis:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        # Fetches waiting for something to change: consumers', and followers', which a new high
        # watermark alone does not answer.
        self._waiters: dict[tuple[str, int], list[asyncio.Future[bool]]] = {}
        self._follower_waiters: dict[tuple[str, int], list[asyncio.Future[bool]]] = {}
        self._waiting_replica: dict[asyncio.Future[bool], int] = {}  # follower waits: whose fetch
        # Followers' waits during which a high watermark moved: read again when they end, so the
        # follower learns it then, as Kafka's expired DelayedFetch reads the log at its end.
        self._hw_moved: set[asyncio.Future[bool]] = set()
        # Followers' incremental fetch sessions (KIP-227).
        self.sessions = SessionCache(int(ctx.config.props.get("max.incremental.fetch.session.cache.slots",
                                                              MAX_SESSIONS)))
        self.consumer_bytes: dict[str, int] = {}  # client id -> record bytes served to consumers

    def handlers(self) -> dict[int, Handler]:
        return {ApiKey.FETCH: self.fetch}

    def wake(self, topic: str, partition: int) -> None:
        """Something changed that a fetch waiting on this partition would answer differently."""
        _resolve(self._waiters.pop((topic, partition), None))
        _resolve(self._follower_waiters.pop((topic, partition), None))

    def wake_replica(self, topic: str, partition: int, replica_id: int) -> None:
        """Only ``replica_id``'s fetch waiting on this partition: a throttle's debt is paid, which
        changes the answer of the throttled follower and no other. Waking the partition's in-sync
        followers too would answer each with nothing and cost a round trip, during which an acks=all
        produce for another partition of their session would wait for their next fetch."""
        for fut in self._follower_waiters.get((topic, partition), ()):
            if self._waiting_replica.get(fut) == replica_id:
                _settle(fut, True)

    def wake_readers(self, topic: str, partition: int) -> None:
        """The high watermark moved: consumers' fetches may read further. A follower's fetch waits
        on for records (Kafka's DelayedFetch counts only bytes for it) and learns the high
        watermark with them or when its wait ends."""
        _resolve(self._waiters.pop((topic, partition), None))
        self._hw_moved.update(self._follower_waiters.get((topic, partition), ()))

    async def fetch(self, req: Request) -> list[Any]:
        body = req.body
        error = ErrorCode.NONE
        session_id = 0
        if SESSION_VERSIONS[0] <= req.version <= SESSION_VERSIONS[1] and body.replica_id >= 0 \
                and (body.session_id != 0 or body.session_epoch != FINAL_EPOCH):
            error, session_id, topics = await self._session_fetch(req)
        elif req.version >= 7 and body.session_id != 0:
            # Consumers get no fetch sessions: session id 0 makes them send full fetches.
            error = ErrorCode.FETCH_SESSION_ID_NOT_FOUND
            topics = []
        else:
            topics = await self._read_fetch_waiting(req, self._fetch_refused(req))
        endpoints: tuple[NodeEndpoint, ...] = ()
        if req.version >= 16 and any(
            p.error_code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH) for t in topics for p in t.partitions
        ):
            endpoints = tuple(NodeEndpoint(b.broker_id, host, port, b.rack) for b, host, port in self.ctx.client_brokers())
        parts, _size = encode_fetch_response(
            req.version, req.correlation_id, topics, error_code=error, session_id=session_id, node_endpoints=endpoints
        )
        return parts

    async def _read_fetch_waiting(self, req: Request, refused: set[str],
                                  wanted: Sequence[Any] | None = None) -> list[FetchTopicData]:
        """``_read_fetch``; with fewer than min_bytes, wait up to max_wait_ms and read again if one of
        the partitions was woken meanwhile (an append, a new high watermark, a leadership change:
        whatever would change its answer). After a quiet wait the first answer still holds: reading
        again cost an idle leader as much as the first read, twice a second per follower."""
        body = req.body
        topics, total = self._read_fetch(req, refused, wanted)
        if total < body.min_bytes and body.max_wait_ms > 0 and not any(
            p.error_code or p.diverging_epoch or p.preferred_read_replica >= 0 for t in topics for p in t.partitions
        ) and await self._wait_for_data(topics, body.max_wait_ms / 1000.0, _replica_id(req)):
            topics, _total = self._read_fetch(req, refused, wanted, after_wait=True)
        return topics

    async def _session_fetch(self, req: Request) -> tuple[ErrorCode, int, list[FetchTopicData]]:
        """A follower's fetch with a session (KIP-227, ``headwater/replication/fetch_session.py``):
        (top-level error, session id to answer, topics to answer)."""
        body = req.body
        now = int(time.monotonic() * 1000)
        authorized = not self.ctx.authz.enabled or self.ctx.authz.cluster(req, AclOperation.CLUSTER_ACTION)
        if body.session_epoch == FINAL_EPOCH or not authorized:
            # Closing a session; or a follower without CLUSTER_ACTION, which gets no session (and
            # TOPIC_AUTHORIZATION_FAILED for each partition it named).
            self.sessions.remove(body.session_id, body.replica_id)
            return ErrorCode.NONE, 0, await self._read_fetch_waiting(req, self._fetch_refused(req))
        refused: set[str] = set()
        if body.session_epoch == INITIAL_EPOCH:
            self.sessions.remove(body.session_id, body.replica_id)
            topics = await self._read_fetch_waiting(req, refused)
            session = self.sessions.create(body.replica_id, now)
            if session is None:
                return ErrorCode.NONE, 0, topics
            session.apply(_session_changes(body.topics), ())
            for t in topics:
                for p in t.partitions:
                    held = session.partitions.get((t.name, p.partition))
                    if held is not None:
                        _tell(held, p)
            return ErrorCode.NONE, session.id, topics
        current = self.sessions.get(body.session_id, body.replica_id, now)
        if current is None:
            return ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, []
        if current.epoch != body.session_epoch:
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, []
        current.apply(_session_changes(body.topics),
                      [(t.topic, p) for t in body.forgotten_topics_data for p in t.partitions])
        current.epoch = next_epoch(current.epoch)
        wanted = [_SessionTopic(topic, parts) for topic, parts in current.by_topic()]
        topics = await self._read_fetch_waiting(req, refused, wanted)
        answered = []
        for t in topics:
            parts = [p for p in t.partitions if _tell(current.partitions[(t.name, p.partition)], p)]
            if parts:
                answered.append(FetchTopicData(t.name, t.topic_id, parts))
        current.answered_with_records((t.name, p.partition) for t in answered for p in t.partitions if p.records)
        return ErrorCode.NONE, current.id, answered

    async def _wait_for_data(self, topics: list[FetchTopicData], timeout_s: float, replica_id: int) -> bool:
        """Until a partition of ``topics`` is woken or ``timeout_s`` passes: whether the fetch must
        be read again (woken, or a follower's partition had a new high watermark meanwhile).
        ``replica_id``: the follower's, or -1 for a consumer."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        keys = [(t.name, p.partition) for t in topics for p in t.partitions]
        follower = replica_id >= 0
        waiters = self._follower_waiters if follower else self._waiters
        for key in keys:
            waiters.setdefault(key, []).append(fut)
        if follower:
            self._waiting_replica[fut] = replica_id
        # A timer on the future itself: asyncio.wait_for would add a task's worth of futures and
        # callbacks to every follower fetch that waits.
        timer = loop.call_later(timeout_s, _settle, fut, False)
        try:
            woken = await fut
        finally:
            timer.cancel()
            for key in keys:
                lst = waiters.get(key)
                if lst and fut in lst:
                    lst.remove(fut)
                    if not lst:
                        del waiters[key]
            moved = fut in self._hw_moved
            self._hw_moved.discard(fut)
            self._waiting_replica.pop(fut, None)
        return woken or moved

    def _fetch_refused(self, req: Request) -> set[str]:
        """Topics this fetch may not read: all of them for a follower without CLUSTER_ACTION, else
        those the consumer may not READ."""
        if not self.ctx.authz.enabled:
            return set()  # the fetch hot path pays nothing without an authorizer
        body = req.body
        replica_id = _replica_id(req)
        names = set()
        for ft in body.topics:
            found = self.ctx.image.topic_by_id(ft.topic_id) if req.version >= 13 else None
            names.add(ft.topic if req.version < 13 else (found.name if found else ""))
        names.discard("")
        if replica_id >= 0:
            return set() if self.ctx.authz.cluster(req, AclOperation.CLUSTER_ACTION) else names
        return {n for n in sorted(names) if not self.ctx.authz.topic(req, AclOperation.READ, n)}

    def _read_fetch(self, req: Request, refused: set[str], wanted: Sequence[Any] | None = None,
                    after_wait: bool = False) -> tuple[list[FetchTopicData], int]:
        """Read every partition of the request (or of ``wanted``: a fetch session's topics, shaped
        like the request's) as a Fetch response of the request's version says it. ``after_wait``:
        the read at the end of a wait, which leaves a follower's progress as its first read set it."""
        body = req.body
        replica_id = _replica_id(req)
        replica_epoch = -1 if req.version < 15 or body.replica_state is None else body.replica_state.replica_epoch
        is_follower = replica_id >= 0
        budget = body.max_bytes if req.version >= 3 else 2**31 - 1
        total = 0
        consumer_bytes = 0
        topics: list[FetchTopicData] = []
        for ft in body.topics if wanted is None else wanted:
            if req.version >= 13:
                image_topic = self.ctx.image.topic_by_id(ft.topic_id)
                name = image_topic.name if image_topic else ""
                topic_id = ft.topic_id
            else:
                name = ft.topic
                image_topic = self.ctx.image.topics.get(name)
                topic_id = image_topic.topic_id if image_topic else uuid.UUID(int=0)
            out = FetchTopicData(name, topic_id)
            for fp in ft.partitions:
                data = FetchPartitionData(fp.partition)
                try:
                    if image_topic is None and req.version >= 13:
                        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID)
                    if name in refused:
                        raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    current_epoch = fp.current_leader_epoch if req.version >= 9 else -1
                    limit = min(fp.partition_max_bytes, max(budget - total, 0))
                    if is_follower:
                        hosted = self.ctx.replicas.hosted(name, fp.partition)
                        if hosted is None:
                            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                        decision = self.ctx.replicas.follower_fetch(
                            hosted, replica_id, replica_epoch, fp.fetch_offset, current_epoch,
                            fp.last_fetched_epoch if req.version >= 12 else -1,
                            fp.log_start_offset if req.version >= 5 else -1, update_state=not after_wait,
                        )
                        data.error_code = decision.error
                        data.high_watermark = decision.high_watermark
                        data.last_stable_offset = hosted.plog.last_stable_offset
                        data.log_start_offset = decision.log_start_offset
                        if decision.diverging_epoch is not None:
                            data.diverging_epoch = (decision.diverging_epoch.epoch, decision.diverging_epoch.end_offset)
                        if decision.read_records and not self.ctx.replicas.leader_throttled(name, fp.partition, decision.in_sync,
                                                                                       replica_id):
                            limit = self.ctx.replicas.leader_read_limit(name, fp.partition, decision.in_sync, replica_id, limit)
                            result = hosted.plog.read(fp.fetch_offset, limit, max_offset=None, min_one_batch=total == 0)
                            data.records = result.slices
                            total += result.size_bytes
                            self.ctx.replicas.record_leader_bytes(name, fp.partition, decision.in_sync, result.size_bytes,
                                                              replica_id)
                    else:
                        hosted = self._consumer_replica(req, name, fp.partition, current_epoch)
                        plog = hosted.plog
                        # A follower's is the high watermark the leader last told it: it serves up to that.
                        hw = plog.high_watermark
                        lso = plog.last_stable_offset
                        data.high_watermark = hw
                        data.last_stable_offset = lso
                        data.log_start_offset = plog.log_start_offset
                        preferred = self._preferred_read_replica(req, hosted, fp.fetch_offset)
                        if preferred is not None:
                            # Read elsewhere: no records here (ReplicaManager.readFromLog skips the read).
                            data.preferred_read_replica = preferred
                        else:
                            # read_committed reads up to the last stable offset, with the aborted
                            # transactions its records hold (UnifiedLog.read with FetchTxnCommitted).
                            committed = body.isolation_level == READ_COMMITTED
                            result = plog.read(fp.fetch_offset, limit, max_offset=lso if committed else hw,
                                               min_one_batch=total == 0)
                            data.records = result.slices
                            if committed:
                                data.aborted_transactions = plog.collect_aborted(fp.fetch_offset, lso) \
                                    if result.slices else ()
                            total += result.size_bytes
                            consumer_bytes += result.size_bytes
                except KafkaError as exc:
                    data.error_code = exc.code
                if data.error_code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH) and image_topic:
                    state = image_topic.partitions.get(fp.partition)
                    if state is not None and req.version >= 12:
                        data.current_leader = (state.leader, state.leader_epoch)
                out.partitions.append(data)
            topics.append(out)
        if consumer_bytes:
            client = req.client_id or ""
            self.consumer_bytes[client] = self.consumer_bytes.get(client, 0) + consumer_bytes
        return topics, total

    def _consumer_replica(self, req: Request, topic: str, partition: int, current_epoch: int) -> Hosted:
        """The replica a consumer's fetch reads: the leader's, or from Fetch v11 on (which carries the
        client's metadata) a follower's too, as Kafka serves it (FetchParams.fetchOnlyLeader is only
        for followers and consumers without client metadata, KIP-392)."""
        if req.version >= 11:
            hosted = self.ctx.replicas.hosted(topic, partition)
            if hosted is not None and not hosted.replica.is_leader:
                error = hosted.replica.check_leader_epoch(current_epoch, require_leader=False)
                if error != ErrorCode.NONE:
                    raise KafkaError(error)
                return hosted
        return self.ctx.leader(topic, partition, current_epoch)

    def _preferred_read_replica(self, req: Request, hosted: Hosted, fetch_offset: int) -> int | None:
        """Where a consumer in another rack than this leader should read (KIP-392,
        RackAwareReplicaSelector): an in-sync replica in the client's rack that holds ``fetch_offset``,
        the most caught up; None to read here (no selector, not the leader, no rack, the leader's
        own rack, or no such replica)."""
        rack = req.body.rack_id if req.version >= 11 else ""
        if not (self.ctx.config.rack_aware_reads and rack and hosted.replica.is_leader):
            return None
        if self.ctx.config.rack == rack:
            return None  # the leader is in the client's rack: it stays the choice
        replica = hosted.replica
        candidates = []
        for broker_id in replica.isr:
            info = self.ctx.image.brokers.get(broker_id)
            progress = replica.progress(broker_id)
            if broker_id == self.ctx.config.broker_id or info is None or info.rack != rack or progress is None:
                continue
            if progress.log_start_offset <= fetch_offset <= progress.log_end_offset:
                caught_up = progress.last_caught_up_time_ms or 0
                candidates.append((progress.log_end_offset, caught_up, broker_id))
        return max(candidates)[2] if candidates else None


def _replica_id(req: Request) -> int:
    """The fetching follower's broker id; -1 for a consumer."""
    body = req.body
    if req.version < 15:
        return int(body.replica_id)
    return int(body.replica_state.replica_id) if body.replica_state else -1


def _resolve(waiters: list[asyncio.Future[bool]] | None) -> None:
    for fut in waiters or ():
        _settle(fut, True)


def _settle(fut: asyncio.Future[bool], woken: bool) -> None:
    if not fut.done():
        fut.set_result(woken)


READ_COMMITTED = 1  # a Fetch's isolation level

SESSION_VERSIONS = (7, 12)
"""Fetch versions whose followers get sessions: with topic names (v13+ names topics by id)."""


@dataclass(frozen=True, slots=True)
class _SessionTopic:
    """A fetch session's partitions of one topic, shaped like a Fetch request's topic (v7-12)."""

    topic: str
    partitions: list[SessionPartition]


def _tell(held: SessionPartition, p: FetchPartitionData) -> bool:
    """Whether the session's follower must be sent this partition's answer (and note what it was told)."""
    return held.must_answer(p.error_code, bool(p.records), p.diverging_epoch is not None, p.high_watermark,
                            p.log_start_offset)


def _session_changes(topics: Sequence[Any]) -> dict[tuple[str, int], PartitionRequest]:
    return {(t.topic, p.partition): PartitionRequest(p.fetch_offset, p.current_leader_epoch, p.last_fetched_epoch,
                                                     p.log_start_offset, p.partition_max_bytes)
            for t in topics for p in t.partitions}
