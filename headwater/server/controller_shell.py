"""The active controller's I/O: ZooKeeper reads, watches and fenced writes, and the channels to brokers.

The decisions are ``headwater.controller.Controller``'s. This shell feeds it one event at a time
from a queue, applies its writes to ZooKeeper in order (each fenced on the controller epoch
znode's version; only an accepted write is applied to the core's cache), then answers the request
that caused the event and sends its requests to brokers on one FIFO queue per broker. A write
that fails means another controller exists or our view is stale: the controller resigns, and the
broker goes back to watching ``/controller``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import NoNodeError

from headwater.controller import effects as fx
from headwater.controller import events as ev
from headwater.controller.controller import Controller, ControllerConfig, not_controller_response
from headwater.controller.znodes import (
    BROKER_DEFAULTS,
    TopicPartition,
    Znode,
    decode_live_broker,
    decode_preferred_election,
    decode_reassign_partitions,
    decode_topic,
    snapshot_from_znodes,
)
from headwater.metadata import zk as znodes
from headwater.metadata.zk import decode_log_dir_event
from headwater.protocol import control_wire
from headwater.protocol.errors import ErrorCode
from headwater.protocol.interbroker import LeaderAndIsrResponse, StopReplicaRequest, UpdateMetadataResponse
from headwater.security.audit import AuditRecord
from headwater.server.channel import PLAINTEXT, BrokerChannel, ChannelError, ChannelPool, ChannelSecurity
from headwater.server.self_healer import SelfHealer
from headwater.server.zk import ControllerMovedError, ZooKeeper

log = logging.getLogger(__name__)
PATHS = znodes.PATHS
LEADER_AND_ISR_VERSION = 5  # grouped by topic, with topic ids (what a 3.x ZooKeeper controller sends is 7)
UPDATE_METADATA_VERSION = 7
STOP_REPLICA_VERSION = 3
SEND_RETRY_S = 0.3
CONFIG_TOPICS = "/config/topics"
SLOW_EVENT_S = 0.2  # events that take longer are logged with their parts' times
ANSWER_TURNS = 2
"""Loop turns given to a requester between its answer and the requests' build: its handler, its writer."""
BUILD_IN_THREAD_PARTITIONS = 1000
MULTI_MAX_OPS = 1000
MULTI_MAX_BYTES = 256 << 10
"""A multi stays far below ZooKeeper's 1 MiB request limit (jute.maxbuffer), response included."""


@dataclass
class _Pending:
    event: ev.Event | None  # None: re-read /brokers/ids and turn the difference into events
    reply: asyncio.Future[Any] | None


class ControllerShell:
    def __init__(self, broker_id: int, zk: ZooKeeper, config: ControllerConfig, *,
                 on_resigned: Callable[[], None], listener_name: str = "PLAINTEXT",
                 channel_security: ChannelSecurity = PLAINTEXT,
                 audit: Callable[[AuditRecord], None] | None = None) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.core = Controller(broker_id, config)
        self._on_resigned = on_resigned
        self._listener = listener_name
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._senders: dict[int, asyncio.Task[None]] = {}
        self._outboxes: dict[int, asyncio.Queue[fx.BrokerRequest]] = {}
        self._channels = ChannelPool(channel_security)
        self._rng = random.Random()
        self.active = False
        self._broker_change_queued = False
        self._watched_brokers: set[str] = set()  # /brokers/ids/<id> with a data watch (registration changes)
        self._log_dir_task: asyncio.Task[None] | None = None
        self._legacy_seen = -1  # czxid of the legacy reassignment znode already handed to the core
        self._preferred_seen = -1  # likewise for /admin/preferred_replica_election
        self._rebalance_task: asyncio.Task[None] | None = None
        self._epoch_zk_version = -1  # the /controller_epoch version this controller won with: its writes check it
        self.healer = SelfHealer(broker_id, self.core.state, self.request, load=self._load_healing,
                                 save=self._save_healing, audit=audit)
        self._healer_task: asyncio.Task[None] | None = None
        self._current: _Pending | None = None  # the event being processed
        # The last UpdateMetadata topic states written, with the tuple they were written from (kept
        # alive, so that an identity match cannot be a reused id).
        self._um_built: tuple[tuple[fx.UpdateMetadataPartition, ...], bytes] | None = None
        self._um_lock = threading.Lock()

    # --- lifecycle ----------------------------------------------------------------------------------

    async def start(self, epoch: int, epoch_zk_version: int) -> None:
        started = time.monotonic()
        self._epoch_zk_version = epoch_zk_version
        tree = await self._read_tree()
        legacy = tree.get(PATHS.REASSIGN_PARTITIONS)
        if legacy is not None:
            self._legacy_seen = legacy.czxid  # the snapshot carries it; the watch must not repeat it
        preferred = tree.get(PATHS.PREFERRED_REPLICA_ELECTION)
        if preferred is not None:
            self._preferred_seen = preferred.czxid
        read = time.monotonic()
        snapshot = snapshot_from_znodes(tree)
        log.info("controller %d read %d znodes in %.0f ms, decoded them in %.0f ms", self.broker_id, len(tree),
                 (read - started) * 1000, (time.monotonic() - read) * 1000)
        self.active = True
        self._task = asyncio.get_running_loop().create_task(self._run())
        self.submit(ev.ControllerElected(epoch, epoch_zk_version, snapshot))
        self.zk.watch_children(PATHS.BROKER_IDS, self._on_broker_children)
        self.zk.watch_data(PATHS.REASSIGN_PARTITIONS, self._on_legacy_reassignment)
        self.zk.watch_data(PATHS.PREFERRED_REPLICA_ELECTION, self._on_preferred_election)
        self.zk.watch_data(BROKER_DEFAULTS, self._on_broker_defaults)
        self.zk.watch_children(PATHS.LOG_DIR_EVENT_NOTIFICATION, self._on_log_dir_events)
        self._rebalance_task = asyncio.get_running_loop().create_task(self._auto_rebalance())
        self._healer_task = asyncio.get_running_loop().create_task(self.healer.run(lambda: self.active))
        log.info("broker %d is the controller (epoch %d)", self.broker_id, epoch)

    async def _load_healing(self) -> bytes | None:
        found = await self.zk.get(PATHS.SELF_HEALING)
        return found[0] if found is not None else None

    async def _save_healing(self, data: bytes) -> None:
        """Fenced by the controller epoch, as every write of a controller: a controller that lost
        its election must not overwrite its successor's record (ControllerMovedError)."""
        try:
            await self.zk.fenced(self._epoch_zk_version, [("set", PATHS.SELF_HEALING, data, -1)])
        except NoNodeError:
            await self.zk.fenced(self._epoch_zk_version, [("create", PATHS.SELF_HEALING, data, -1)])

    async def _read_tree(self) -> dict[str, Znode]:
        """The znodes the failover snapshot needs (``snapshot_from_znodes``), with their stat numbers.

        Read as Kafka's ``initializeControllerContext`` does, by path and pipelined: the children of
        the four parents, then every broker, topic and topic config at once, then every partition
        state the topic znodes name at once. Three round trips for any number of partitions; walking
        the tree node by node took one round trip per znode level and a loop wake-up per znode.
        """
        zk = self.zk
        ids, topics, configs, deleting = await zk.children_many(
            [PATHS.BROKER_IDS, PATHS.BROKER_TOPICS, CONFIG_TOPICS, PATHS.DELETE_TOPICS])
        paths = [*(PATHS.broker(int(b)) for b in ids), *(PATHS.topic(t) for t in topics),
                 *(PATHS.config("topics", c) for c in configs), PATHS.REASSIGN_PARTITIONS,
                 PATHS.REASSIGNMENT_QUEUE, BROKER_DEFAULTS, PATHS.PREFERRED_REPLICA_ELECTION]
        out: dict[str, Znode] = {PATHS.delete_topic(t): Znode(None) for t in deleting}
        for path, found in zip(paths, await zk.get_many(paths), strict=True):
            if found is not None:
                out[path] = Znode(found[0], found[1].version, found[1].czxid)
        state_paths: list[str] = []
        for t in topics:
            node = out.get(PATHS.topic(t))
            if node is not None and node.data:
                state_paths.extend(PATHS.partition_state(t, p) for p in sorted(decode_topic(t, node.data).partitions))
        for path, found in zip(state_paths, await zk.get_many(state_paths), strict=True):
            if found is not None:
                out[path] = Znode(found[0], found[1].version, found[1].czxid)
        return out

    async def stop(self) -> None:
        self.active = False
        # Whoever is waiting for an answer (a client's CreateTopics, a broker's AlterPartition)
        # gets NOT_CONTROLLER now and looks for the new controller; nothing is left hanging.
        waiting = [self._current] if self._current is not None else []
        while not self._queue.empty():
            waiting.append(self._queue.get_nowait())
        for pending in waiting:
            if pending.reply is not None and not pending.reply.done():
                event = pending.event
                pending.reply.set_result(not_controller_response(event) if event is not None and _is_request(event) else None)
        tasks = [*(t for t in (self._task, self._rebalance_task, self._healer_task) if t is not None),
                 *self._senders.values()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._channels.close()
        self._senders.clear()

    # --- events in ------------------------------------------------------------------------------------

    def submit(self, event: ev.Event) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Pending(event, fut))
        return fut

    async def request(self, event: ev.Event) -> Any:
        """Submit a request event and wait for the controller's response."""
        if not self.active:
            return not_controller_response(event)
        return await self.submit(event)

    def new_topic_randomness(self, brokers: int) -> tuple[int, int, uuid.UUID]:
        n = max(brokers, 1)
        return self._rng.randrange(n), self._rng.randrange(n), uuid.uuid4()

    def _on_legacy_reassignment(self, data: bytes | None, stat: Any) -> None:
        """``/admin/reassign_partitions`` written by an old tool: reassign what it names.

        The znode's state at election is already in the snapshot; only a later creation is new.
        The controller itself rewrites the node as partitions complete (with version > 0), which
        is not a new request either.
        """
        if not self.active or data is None or stat is None or stat.version != 0 or self._legacy_seen == stat.czxid:
            return
        self._legacy_seen = stat.czxid
        self.submit(ev.LegacyReassignmentRequested(decode_reassign_partitions(data)))

    def _on_preferred_election(self, data: bytes | None, stat: Any) -> None:
        """``/admin/preferred_replica_election`` written by an old tool (Kafka's PreferredReplicaElectionHandler);
        the controller deletes it once the elections were tried. One already in the snapshot is not new."""
        if not self.active or data is None or stat is None or self._preferred_seen == stat.czxid:
            return
        self._preferred_seen = stat.czxid
        self.submit(ev.PreferredElectionRequested(decode_preferred_election(data)))

    async def _auto_rebalance(self) -> None:
        """Kafka's scheduleAutoLeaderRebalanceTask: every ``leader.imbalance.check.interval.seconds``
        (read again each time: it is a cluster-wide dynamic config here) while this is the controller."""
        while self.active:
            await asyncio.sleep(self.core.rebalance_interval_s)
            if self.active and self.core.auto_rebalance:
                log.info("controller %d: processing automatic preferred replica leader election", self.broker_id)
                self.submit(ev.AutoRebalanceCheck())

    def _on_broker_defaults(self, data: bytes | None, _stat: Any) -> None:
        """``/config/brokers/<default>`` changed (or the watch's first call): the controller takes its
        reassignment limit from there. Handing over the same configs again changes nothing."""
        if not self.active:
            return
        try:
            configs = znodes.decode_config("brokers", znodes.DEFAULT_ENTITY, data) if data else {}
        except ValueError:
            log.warning("controller %d: %s does not decode; keeping the previous broker defaults",
                        self.broker_id, BROKER_DEFAULTS)
            return
        self.submit(ev.BrokerDefaultConfigsChanged(configs))

    def _on_broker_children(self, children: list[str]) -> None:
        # A broker rewrites its registration in place when its cordoned log dirs change (KIP-1066):
        # watch each one's data too, as Kafka's controller watches broker modifications.
        for child in children:
            if self.active and child not in self._watched_brokers and child.isdigit():
                self._watched_brokers.add(child)
                self.zk.watch_data(PATHS.broker(int(child)), self._on_broker_data)
        self._queue_broker_change()

    def _on_broker_data(self, _data: bytes | None, _stat: Any) -> None:
        self._queue_broker_change()

    def _queue_broker_change(self) -> None:
        # The read and the diff against the controller's view happen in the event loop, in turn
        # with every other event: two reads racing each other could otherwise apply an older
        # view after a newer one (a broker that expired and re-registered would stay "expired").
        if self.active and not self._broker_change_queued:
            self._broker_change_queued = True
            self._queue.put_nowait(_Pending(None, None))

    async def _broker_change(self) -> None:
        self._broker_change_queued = False
        current = {}
        for child in await self.zk.children(PATHS.BROKER_IDS):
            found = await self.zk.get(PATHS.broker(int(child)))
            if found is not None:
                current[int(child)] = decode_live_broker(int(child), found[0], int(found[1].czxid))
        for event in self.core.broker_change_events(current):
            if not self.active:
                return
            log.info("controller %d: %s", self.broker_id, event)
            await self._process(event)

    # --- the loop ---------------------------------------------------------------------------------------

    async def _run(self) -> None:
        while self.active:
            pending = await self._queue.get()
            response = None
            self._current = pending
            try:
                if pending.event is None:
                    await self._broker_change()
                else:
                    response = await self._process(pending.event, pending.reply)
            except Exception:
                log.exception("controller failed on %s", type(pending.event).__name__)
                if pending.event is not None and _is_request(pending.event):
                    response = not_controller_response(pending.event)
                await self._resign()
            if pending.reply is not None and not pending.reply.done():
                pending.reply.set_result(response)

    async def _process(self, event: ev.Event, reply: asyncio.Future[Any] | None = None) -> Any:
        """Handle one event: decide, write, answer ``reply`` (if given), then queue the requests to brokers.

        The requests are built after the answer has had its turn on the loop: the requester
        builds and writes its answer in the next two turns (its handler, then its connection's
        writer), and at 10,000 partitions the requests take longer to build than that."""
        started = time.monotonic()
        result = self.core.handle(event)
        handled = time.monotonic()
        try:
            await self._write_all(result.writes)
        except ControllerMovedError:
            log.warning("controller %d was fenced: another controller has been elected", self.broker_id)
            await self._resign()
            return not_controller_response(event) if _is_request(event) else None
        written = time.monotonic()
        for warning in result.warnings:
            log.warning("controller %d: %s", self.broker_id, warning)
        if reply is not None and not reply.done() and result.response is not None:
            reply.set_result(result.response)
            for _ in range(ANSWER_TURNS):
                await asyncio.sleep(0)
            if not self.active:
                return result.response  # resigned meanwhile: the requests would be refused anyway
        requests = result.requests
        for req in requests:
            self._outbox(req.broker_id).put_nowait(req)
        done = time.monotonic()
        if done - started > SLOW_EVENT_S:
            log.info("controller %d: %s took %.0f ms (decide %.0f ms; %d writes %.0f ms; %d requests, %d partition "
                     "entries; answer and requests %.0f ms)", self.broker_id, type(event).__name__, (done - started) * 1000,
                     (handled - started) * 1000, len(result.writes), (written - handled) * 1000, len(requests),
                     sum(len(r.partitions) for r in requests), (done - written) * 1000)
        return result.response

    async def _write_all(self, writes: Sequence[fx.ZkWrite]) -> None:
        """Apply ``writes`` in order, as few fenced multis as possible, each applied to the core once
        ZooKeeper accepted it.

        A multi is atomic and ZooKeeper runs one session's requests in order, so consecutive writes
        may share a multi (one round trip and one log append for up to MULTI_MAX_OPS writes) without
        changing what ZooKeeper can be left holding: some prefix of ``writes``. Multis go out one
        after the other, so that nothing runs after a failed one, except within a run of standalone
        writes that all name different znodes (a failover's ISR changes, a new topic's states, a
        reassignment's topic znodes and leader-epoch bumps; see ``ZkWrite.standalone``): each of
        those stands on its own, so their multis are sent at once and a failure only means the
        controller resigns with some of them applied, as after a crash. A recursive
        delete lists its subtree first, so it goes in a multi of its own.
        """
        i = 0
        while i < len(writes):
            if writes[i].op == fx.ZkOp.DELETE and writes[i].recursive:
                await self._write(writes[i])
                self.core.apply(writes[i])
                i += 1
                continue
            run_end = _independent_run_end(writes, i)
            if run_end == i:  # not a run of independent state writes: one multi
                run_end = _chunk_end(writes, i)
            chunks: list[list[fx.ZkWrite]] = []
            while i < run_end:
                end = min(_chunk_end(writes, i), run_end)
                chunks.append(list(writes[i:end]))
                i = end
            parents = list(dict.fromkeys(p for chunk in chunks for w in chunk for p in w.parents))
            missing = {p for p, there in zip(parents, await self.zk.exists_many(parents), strict=True) if not there}
            multis = [self._multi_ops(chunk, missing) for chunk in chunks]
            epoch_version = chunks[0][0].controller_epoch_version
            if len(multis) == 1:
                await self.zk.fenced(epoch_version, multis[0])
                outcomes: list[BaseException | list[Any]] = [[]]
            else:
                outcomes = await asyncio.gather(*(self.zk.fenced(epoch_version, ops) for ops in multis),
                                                return_exceptions=True)
            for chunk, outcome in zip(chunks, outcomes, strict=True):
                if isinstance(outcome, BaseException):
                    raise outcome
                for write in chunk:
                    self.core.apply(write)

    @staticmethod
    def _multi_ops(chunk: list[fx.ZkWrite], missing: set[str]) -> list[tuple[str, str, bytes | None, int]]:
        ops: list[tuple[str, str, bytes | None, int]] = []
        for write in chunk:
            for parent in write.parents:
                if parent in missing:
                    ops.append(("create", parent, b"", -1))
                    missing.discard(parent)  # an earlier write (of this or an earlier multi) creates it
            ops.append((write.op.value, write.path, write.data, write.expected_version))
        return ops

    async def _write(self, write: fx.ZkWrite) -> None:
        ops: list[tuple[str, str, bytes | None, int]] = []
        for parent in write.parents:
            if await self.zk.get(parent) is None:
                ops.append(("create", parent, b"", -1))
        if write.op == fx.ZkOp.DELETE and write.recursive:
            for child in await _descendants(self.zk, write.path):
                ops.append(("delete", child, None, -1))
        ops.append((write.op.value, write.path, write.data, write.expected_version))
        await self.zk.fenced(write.controller_epoch_version, ops)

    async def _resign(self) -> None:
        if not self.active:
            return
        self.active = False
        self.core.handle(ev.Resigned())
        # Everything queued gets NOT_CONTROLLER, so its sender finds the new controller.
        while not self._queue.empty():
            pending = self._queue.get_nowait()
            if pending.reply is not None and not pending.reply.done():
                event = pending.event
                pending.reply.set_result(not_controller_response(event) if event is not None and _is_request(event) else None)
        self._on_resigned()

    # --- requests to brokers ------------------------------------------------------------------------

    def _outbox(self, broker_id: int) -> asyncio.Queue[fx.BrokerRequest]:
        box = self._outboxes.get(broker_id)
        if box is None:
            box = self._outboxes[broker_id] = asyncio.Queue()
        task = self._senders.get(broker_id)
        if task is None or task.done():
            self._senders[broker_id] = asyncio.get_running_loop().create_task(self._send_loop(broker_id, box))
        return box

    async def _send_loop(self, broker_id: int, box: asyncio.Queue[fx.BrokerRequest]) -> None:
        while self.active:
            req = await box.get()
            while self.active:
                live = self.core.live_brokers.get(broker_id)
                if live is None:
                    break  # the broker is gone; what it missed it gets again when it registers
                try:
                    sent = time.monotonic()
                    await self._send(broker_id, req)
                    if time.monotonic() - sent > SLOW_EVENT_S:
                        log.info("controller %d: %s of %d partitions to broker %d answered in %.0f ms", self.broker_id,
                                 type(req).__name__, len(req.partitions), broker_id, (time.monotonic() - sent) * 1000)
                    break
                except ChannelError as exc:
                    log.debug("request to broker %d failed: %s; retrying", broker_id, exc)
                    await asyncio.sleep(SEND_RETRY_S)

    def _channel(self, broker_id: int) -> BrokerChannel:
        info = self.core.live_brokers[broker_id].info
        host, port = info.address(self._listener) or (info.host, info.port)
        return self._channels.get(broker_id, host, port, f"controller-{self.broker_id}")

    async def _send(self, broker_id: int, req: fx.BrokerRequest) -> None:
        channel = self._channel(broker_id)
        if isinstance(req, fx.LeaderAndIsrRequest):
            msg = await self._build(self._leader_and_isr, req)
            resp = await channel.request(msg, LEADER_AND_ISR_VERSION)
            offline = self._storage_errors(req, resp)
            if offline:
                # Those replicas sit in a failed log dir of that broker (Kafka's OfflineReplica).
                log.warning("controller %d: broker %d has %d partitions in a failed log dir", self.broker_id,
                            broker_id, len(offline))
                self.submit(ev.ReplicasOffline(broker_id, offline))
        elif isinstance(req, fx.UpdateMetadataRequest):
            await channel.request(await self._build(self._update_metadata, req), UPDATE_METADATA_VERSION)
        elif isinstance(req, fx.StopReplicaRequest):
            T = StopReplicaRequest.StopReplicaTopicState
            P = T.StopReplicaPartitionState
            by_topic: dict[str, list[fx.StopReplicaPartition]] = {}
            for p in req.partitions:
                by_topic.setdefault(p.topic, []).append(p)
            msg = StopReplicaRequest(
                version=STOP_REPLICA_VERSION, controller_id=req.controller_id, controller_epoch=req.controller_epoch,
                broker_epoch=req.broker_epoch,
                topic_states=[T(topic_name=t, partition_states=[P(partition_index=p.partition, leader_epoch=p.leader_epoch,
                                                                  delete_partition=p.delete) for p in ps])
                              for t, ps in by_topic.items()],
            )
            resp = await channel.request(msg, STOP_REPLICA_VERSION)
            errors = tuple((TopicPartition(e.topic_name, e.partition_index), ErrorCode(e.error_code))
                           for e in resp.partition_errors)
            self.submit(ev.StopReplicaResponseReceived(broker_id, errors))

    @staticmethod
    def _storage_errors(req: fx.LeaderAndIsrRequest, resp: Any) -> tuple[TopicPartition, ...]:
        """The partitions a LeaderAndIsr response (v5+: grouped by topic id) answers with KAFKA_STORAGE_ERROR."""
        names = {p.topic_id: p.topic for p in req.partitions}
        return tuple(TopicPartition(names[t.topic_id], e.partition_index)
                     for t in resp.topics if t.topic_id in names
                     for e in t.partition_errors if e.error_code == ErrorCode.KAFKA_STORAGE_ERROR)

    def _on_log_dir_events(self, children: list[str]) -> None:
        if self.active and children and (self._log_dir_task is None or self._log_dir_task.done()):
            self._log_dir_task = asyncio.get_running_loop().create_task(self._log_dir_events())

    async def _log_dir_events(self) -> None:
        """Each notification names a broker with a failed log dir; it is consumed (deleted) once read,
        as Kafka's controller does, and the controller then asks that broker what it lost."""
        for child in sorted(await self.zk.children(PATHS.LOG_DIR_EVENT_NOTIFICATION)):
            path = f"{PATHS.LOG_DIR_EVENT_NOTIFICATION}/{child}"
            found = await self.zk.get(path)
            with contextlib.suppress(NoNodeError):
                await self.zk.delete(path)
            broker_id = decode_log_dir_event(found[0]) if found is not None else None
            if broker_id is None or not self.active:
                continue
            log.warning("controller %d: broker %d reports a failed log dir", self.broker_id, broker_id)
            self.submit(ev.LogDirFailed(broker_id))

    @staticmethod
    async def _build(build: Callable[[Any], Any], req: fx.LeaderAndIsrRequest | fx.UpdateMetadataRequest) -> Any:
        """Write the request; one of 10,000 partitions takes tens of ms of CPU (more on a busy machine),
        so it is written in a thread, letting the loop serve clients and the controller's next event in
        between (the interpreter lock still runs one at a time, but switches every few ms)."""
        if len(req.partitions) < BUILD_IN_THREAD_PARTITIONS:
            return build(req)
        return await asyncio.to_thread(build, req)

    def _topic_states(self, partitions: tuple[fx.UpdateMetadataPartition, ...]) -> bytes:
        """The TopicStates of an UpdateMetadata; the requests of one result share their partitions
        tuple, so they are written once for every broker."""
        with self._um_lock:  # builds run in threads, one per broker's sender: the second waits for the first
            cached = self._um_built
            if cached is not None and cached[0] is partitions:
                return cached[1]
            states = control_wire.update_metadata_topics(UPDATE_METADATA_VERSION, partitions)
            self._um_built = (partitions, states)
            return states

    def _leader_and_isr(self, req: fx.LeaderAndIsrRequest) -> control_wire.EncodedRequest:
        body = control_wire.leader_and_isr_body(
            LEADER_AND_ISR_VERSION, controller_id=req.controller_id, controller_epoch=req.controller_epoch,
            broker_epoch=req.broker_epoch, partitions=req.partitions,
            # Kafka sends each leader's inter-broker endpoint here.
            live_leaders=[(b.broker_id, *(b.address(self._listener) or (b.host, b.port))) for b in req.live_leaders],
        )
        return control_wire.EncodedRequest(control_wire.LEADER_AND_ISR_KEY, LEADER_AND_ISR_VERSION, body,
                                           LeaderAndIsrResponse)

    def _update_metadata(self, req: fx.UpdateMetadataRequest) -> control_wire.EncodedRequest:
        body = control_wire.update_metadata_body(
            UPDATE_METADATA_VERSION, controller_id=req.controller_id, controller_epoch=req.controller_epoch,
            broker_epoch=req.broker_epoch, topics=self._topic_states(req.partitions),
            live_brokers=[control_wire.LiveBroker(b.broker_id, b.rack, [
                (e.port, e.host, e.listener, znodes.SECURITY_PROTOCOL_IDS[e.security_protocol]) for e in b.endpoints]
                or [(b.port, b.host, self._listener, znodes.SECURITY_PROTOCOL_IDS["PLAINTEXT"])])
                for b in req.live_brokers],
        )
        return control_wire.EncodedRequest(control_wire.UPDATE_METADATA_KEY, UPDATE_METADATA_VERSION, body,
                                           UpdateMetadataResponse)


def _chunk_end(writes: Sequence[fx.ZkWrite], start: int) -> int:
    """End of the multi that starts at ``start``: MULTI_MAX_OPS writes or MULTI_MAX_BYTES, one controller
    epoch version, no recursive delete."""
    i, size = start, 0
    while (i < len(writes) and i - start < MULTI_MAX_OPS and size < MULTI_MAX_BYTES
           and not (writes[i].op == fx.ZkOp.DELETE and writes[i].recursive)
           and writes[i].controller_epoch_version == writes[start].controller_epoch_version):
        size += len(writes[i].path) + len(writes[i].data or b"") + 32
        i += 1
    return i


def _independent_run_end(writes: Sequence[fx.ZkWrite], start: int) -> int:
    """End of the run of standalone writes from ``start`` (partition states, and topic znode writes
    the core marks ``standalone``) that name distinct znodes (``start`` itself when there is no such
    run of more than one multi)."""
    seen: set[str] = set()
    i = start
    while (i < len(writes) and (isinstance(writes[i].change, fx.PartitionStateWritten) or writes[i].standalone)
           and writes[i].op != fx.ZkOp.DELETE and writes[i].path not in seen
           and writes[i].controller_epoch_version == writes[start].controller_epoch_version):
        seen.add(writes[i].path)
        i += 1
    return i if i - start > MULTI_MAX_OPS else start


def _is_request(event: ev.Event) -> bool:
    """Events someone waits an answer for: a resigning controller answers them NOT_CONTROLLER."""
    return isinstance(event, ev.ControlledShutdownRequested | ev.AlterPartitionReceived | ev.CreateTopicsRequested
                      | ev.DeleteTopicsRequested | ev.CreatePartitionsRequested
                      | ev.AlterPartitionReassignmentsRequested | ev.ListPartitionReassignmentsRequested
                      | ev.ElectLeadersRequested)


async def _descendants(zk: ZooKeeper, path: str) -> list[str]:
    """Children before parents, so a multi can delete a subtree."""
    out: list[str] = []
    for child in await zk.children(path):
        sub = f"{path}/{child}"
        out += await _descendants(zk, sub)
        out.append(sub)
    return out
