"""What the group and transaction coordinators' shells share.

Both cores are sans-IO state machines that own the partitions of an internal topic this broker
leads (``__consumer_offsets``, ``__transaction_state``). :class:`CoordinatorRuntime` runs one:

* a request's event goes in with a token, and the request waits for the reply with that token;
* the records a decision writes are appended to their partition as the leader, with acks=all and
  the coordinator's append origin, in the order decided, and the core hears when each is committed
  or failed;
* a partition is loaded when this broker becomes its leader (read whole, in log order, yielding
  to other work between reads) and unloaded when it stops being leader; a load that leadership
  overtook is dropped;
* a ticker feeds the core its clock.

It also answers FindCoordinator's question for both: the leader of a partition of the internal
topic, at the endpoint of the listener the client came in on.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from headwater.controller import quota
from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.records import CorruptRecordError, iter_batches
from headwater.server.clock import now_ms
from headwater.server.connection import current_connection
from headwater.storage.producers import AppendOrigin

if TYPE_CHECKING:
    from headwater.server.context import BrokerContext
    from headwater.server.replica_manager import Hosted

WRITE_TIMEOUT_MS = 5000
LOAD_READ_BYTES = 4 * 1024 * 1024
NO_NODE = (-1, "", -1)
Found = tuple[ErrorCode, str | None, tuple[int, str, int]]


class CoordinatorRuntime(ABC):
    """Runs a coordinator core over the partitions of ``topic`` this broker leads."""

    topic: str
    tick_interval_s: float

    def __init__(self, broker: BrokerContext, log: logging.Logger) -> None:
        self.broker = broker
        self._log = log
        self._tokens = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._led: dict[int, int] = {}  # partitions this broker leads -> their load generation
        self._load_generation = itertools.count(1)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._ticker: asyncio.Task[None] | None = None
        broker.replicas.leadership_listeners.append(self._on_leadership)

    # --- what a coordinator supplies -------------------------------------------------------------------

    @abstractmethod
    def _handle(self, event: Any) -> Any:
        """The core's output for ``event`` at the current time."""

    @abstractmethod
    def _apply(self, out: Any) -> None:
        """Carry out an output: ``_write`` its appends first, then the rest, then ``_reply``."""

    @abstractmethod
    def _append_done(self, write_id: int, error: ErrorCode) -> Any: ...

    @abstractmethod
    def _tick(self) -> Any: ...

    @abstractmethod
    def _load_started(self, partition: int, generation: int) -> Any: ...

    @abstractmethod
    def _load_finished(self, partition: int, generation: int, hosted: Hosted, records: Sequence[Any]) -> Any: ...

    @abstractmethod
    def _unloaded(self, partition: int) -> Any: ...

    @abstractmethod
    def _decode(self, buf: bytes) -> Iterable[Any]:
        """The records the core loads from the batches in ``buf``."""

    def _loaded(self, partition: int, out: Any, records: int, ms: float) -> None:
        self._log.info("loaded %s-%d (%d records) in %.0f ms", self.topic, partition, records, ms)

    # --- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> None:
        self._ticker = asyncio.get_running_loop().create_task(self._tick_loop())

    async def stop(self) -> None:
        tasks = [t for t in (self._ticker, *self._tasks) if t is not None]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        # Every waiting request gets NOT_COORDINATOR, as on a move.
        for partition in list(self._led):
            del self._led[partition]
            self._apply(self._handle(self._unloaded(partition)))

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(self.tick_interval_s)
            try:
                self._apply(self._handle(self._tick()))
            except Exception:
                self._log.exception("%s coordinator tick failed", self.topic)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- requests, replies and appends ------------------------------------------------------------------

    async def _ask(self, make: Callable[[int], Any]) -> Any:
        token = next(self._tokens)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[token] = fut
        try:
            self._apply(self._handle(make(token)))
            return await fut
        finally:
            self._waiting.pop(token, None)

    def _reply(self, token: int, result: Any) -> None:
        fut = self._waiting.get(token)
        if fut is not None and not fut.done():
            fut.set_result(result)

    def _write(self, partition: int, write_id: int, batch: Callable[[], bytearray]) -> None:
        """Append ``batch()`` to ``partition`` now (before anything here awaits, so the records of one
        decision, and of successive ones, keep their order) and tell the core how it ended."""
        wait: asyncio.Future[ErrorCode] | None = None
        try:
            hosted = self.broker.replicas.leader(self.topic, partition)
            _result, wait = self.broker.replicas.append(hosted, batch(), -1, WRITE_TIMEOUT_MS,
                                                        origin=AppendOrigin.COORDINATOR)
        except KafkaError as exc:
            self._apply(self._handle(self._append_done(write_id, exc.code)))
            return
        assert wait is not None

        async def committed(fut: asyncio.Future[ErrorCode]) -> None:
            error = await fut
            self._apply(self._handle(self._append_done(write_id, error)))

        self._spawn(committed(wait))

    # --- leadership of the topic's partitions -------------------------------------------------------------

    def _on_leadership(self, topic: str, partition: int) -> None:
        if topic != self.topic:
            return
        hosted = self.broker.replicas.hosted(topic, partition)
        leads = hosted is not None and hosted.replica.is_leader
        if leads and partition not in self._led:
            generation = next(self._load_generation)
            self._led[partition] = generation
            self._spawn(self._load(partition, generation))
        elif not leads and partition in self._led:
            del self._led[partition]
            self._log.info("no longer coordinator of %s-%d: unloading it", topic, partition)
            self._apply(self._handle(self._unloaded(partition)))

    async def _load(self, partition: int, generation: int) -> None:
        self._apply(self._handle(self._load_started(partition, generation)))
        started = time.monotonic()
        records: list[Any] = []
        hosted = self.broker.replicas.hosted(self.topic, partition)
        try:
            if hosted is None:
                return
            plog = hosted.plog
            offset, end = plog.log_start_offset, plog.log_end_offset
            while offset < end:
                result = plog.read(offset, LOAD_READ_BYTES, max_offset=end)
                if not result.slices:
                    break
                buf = result.read()
                records.extend(self._decode(buf))
                offset = max(header.last_offset for _pos, header in iter_batches(buf, verify_crc=False)) + 1
                await asyncio.sleep(0)  # a big partition must not stall every client of this broker
                if self._led.get(partition) != generation:
                    return  # leadership moved on while we read
        except (KafkaError, CorruptRecordError) as exc:
            self._log.warning("loading %s-%d failed: %s", self.topic, partition, exc)
            return
        if self._led.get(partition) != generation:
            return
        out = self._handle(self._load_finished(partition, generation, hosted, records))
        self._apply(out)
        self._loaded(partition, out, len(records), (time.monotonic() - started) * 1000)


async def coordinator_endpoint(ctx: BrokerContext, topic_name: str, partition: int,
                               create: Callable[[], Awaitable[None]]) -> Found:
    """The leader of ``topic_name``-``partition``, creating the topic (``create``) on first use."""
    topic = ctx.image.topics.get(topic_name)
    if topic is None:
        await create()
        topic = ctx.image.topics.get(topic_name)
    if topic is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{topic_name} is being created", NO_NODE
    state = topic.partitions.get(partition)
    leader = ctx.image.brokers.get(state.leader) if state is not None else None
    if leader is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{topic_name}-{partition} has no leader", NO_NODE
    # As Metadata answers: a SASL_SSL client sent to the PLAINTEXT port could never reach it.
    conn = current_connection.get()
    address = leader.address(conn.listener if conn is not None else None)
    if address is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "the coordinator has no endpoint on this listener", NO_NODE
    return ErrorCode.NONE, None, (leader.broker_id, *address)


async def create_internal_topic(ctx: BrokerContext, name: str, spec: tuple[int, int, dict[str, str]],
                                log: logging.Logger) -> None:
    """Create an internal topic as the broker, through the path every CreateTopics takes."""
    if name in ctx.image.topics:
        return
    partitions, rf, configs = spec
    rq = quota.RequestQuota(ctx.quotas, "", "", False, now_ms())
    code = await ctx.topic_creator.create(name, partitions, rf, configs, rq)
    if code == ErrorCode.NONE:
        log.info("created %s with %d partitions, replication factor %d", name, partitions, rf)
    elif code != ErrorCode.TOPIC_ALREADY_EXISTS:
        log.info("could not create %s yet: %s", name, code.name)
