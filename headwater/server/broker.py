"""The broker process: its parts, their start and stop, and the dispatch of each request to the
handler of its API (``headwater/server/apis/``, the group coordinator's shell, and the metadata
authority's own APIs)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from headwater.controller import quota
from headwater.metadata.configs import ConfigSource, effective_topic_config
from headwater.metadata.image import BrokerEndpoint, BrokerInfo, ClusterImage, TopicImage
from headwater.protocol.apis import ApiKey, Request, api_versions_unsupported, decode_request, encode_response
from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.protocol.frame import MalformedFrameError, peek_api
from headwater.server import gc_policy, metrics, scram_admin
from headwater.server.apis.configs import ConfigApis
from headwater.server.apis.fetch import FetchApis
from headwater.server.apis.log_dirs import LogDirApis
from headwater.server.apis.metadata import MetadataApis
from headwater.server.apis.offsets import OffsetApis
from headwater.server.apis.produce import ProduceApis
from headwater.server.apis.quotas import QuotaApis
from headwater.server.apis.security import SecurityApis
from headwater.server.apis.topics import TopicApis
from headwater.server.authn import Authenticator
from headwater.server.authority import LocalAuthority, MetadataAuthority
from headwater.server.authz import Authz
from headwater.server.cleaner import LogCleanerService
from headwater.server.clock import now_ms
from headwater.server.config import BrokerConfig
from headwater.server.connection import (
    Connection,
    ConnectionQuotas,
    Reply,
    current_connection,
    serve_connection_factory,
)
from headwater.server.context import ANONYMOUS_USER
from headwater.server.groups import CLIENT_HOST, GroupShell
from headwater.server.producer_ids import ProducerIds
from headwater.server.replica_manager import Hosted, ReplicaManager
from headwater.server.topic_creation import TopicCreator
from headwater.server.transactions import TxnShell
from headwater.server.user_configs import UserConfigs
from headwater.server.zk_authority import ZkAuthority
from headwater.storage import LogConfig, LogManager
from headwater.storage.manager import remove_files

log = logging.getLogger(__name__)
TICK_INTERVAL_S = 1.0
CHECKPOINT_INTERVAL_S = 5.0


class Broker:
    """Implements ``BrokerContext`` for the handlers it holds."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        listener = config.advertised_listener
        self.info = BrokerInfo(config.broker_id, listener.host, listener.port, config.rack, tuple(
            BrokerEndpoint(a.name, a.host, a.port, a.security_protocol) for a in config.advertised))
        self.authn = Authenticator(config, lambda mechanism, user: scram_admin.lookup(self, mechanism, user))
        for d in config.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        connect = config.props.get("zookeeper.connect")
        # With zookeeper.connect the broker is a cluster member and its image comes from the
        # controller; without it, it is its own controller and keeps the image in a local file.
        self.authority: MetadataAuthority = ZkAuthority(
            self, connect, int(config.props.get("zookeeper.session.timeout.ms", 18000))) if connect else LocalAuthority(self)
        self._configs = ConfigApis(self)  # first: it holds the dynamic configs every log config reads
        self._image_waiters: list[asyncio.Future[None]] = []
        self._image: ClusterImage = self.authority.initial_image()
        self.logs = LogManager(list(config.log_dirs), self._default_log_config(), clock_ms=now_ms)
        self.cleaner = LogCleanerService(self.logs, config.props, now_ms)
        self.quotas = quota.MutationQuotas(
            windows=int(config.props.get("controller.quota.window.num", quota.DEFAULT_WINDOWS)),
            window_seconds=float(config.props.get("controller.quota.window.size.seconds", quota.DEFAULT_WINDOW_SECONDS)),
        )
        # Client quotas and SCRAM credentials: in ZooKeeper (/config/users, /config/clients) in a cluster, else a local file.
        self.user_configs = UserConfigs(self.authority, self.quotas)
        # ACLs (when an authorizer is configured) and the audit log; ACLs come from ZooKeeper in a cluster.
        self.authz = Authz(config.props, config.log_dirs[0], config.broker_id)
        self._fetch = FetchApis(self)
        self.replicas = ReplicaManager(
            config.broker_id, self.logs,
            replica_lag_time_max_ms=int(config.props.get("replica.lag.time.max.ms", 30000)),
            replica_fetch_backoff_ms=int(config.props.get("replica.fetch.backoff.ms", 1000)),
            wake=self._fetch.wake,
            wake_readers=self._fetch.wake_readers,
            wake_replica=self._fetch.wake_replica,
            broker_address=self.broker_address,
            controller_id=lambda: self.image.controller_id,
            broker_epoch=lambda: self.authority.broker_epoch,
            channel_security=self.authn.channel_security,
        )
        self._servers: list[asyncio.base_events.Server] = []
        self._connections: set[Connection] = set()
        self.connection_quotas = ConnectionQuotas(config.inter_broker_listener, len(config.listeners))
        self._stopping = asyncio.Event()
        self._halt = asyncio.Event()  # set when the broker cannot go on (every log dir offline)
        self._dir_failures: asyncio.Task[None] | None = None
        self.topic_creator = TopicCreator(self)
        self.groups = GroupShell(self)
        self.producer_ids = ProducerIds(self.authority.producer_id_block)
        self.transactions = TxnShell(self)
        self._handlers: dict[int, Callable[[Request], Any]] = {}
        for family in (MetadataApis(self), ProduceApis(self), self._fetch, OffsetApis(self), TopicApis(self),
                       self._configs, QuotaApis(self), LogDirApis(self), SecurityApis(self), self.groups,
                       self.transactions,
                       self.authority):
            for key, handler in family.handlers().items():
                if key in self._handlers:
                    raise AssertionError(f"two handlers for {ApiKey(key).name}")
                self._handlers[key] = handler

    @property
    def handled_apis(self) -> frozenset[int]:
        return frozenset(self._handlers)

    def handler(self, key: int) -> Callable[[Request], Any]:
        """The handler of an API (KeyError if this broker does not serve it)."""
        return self._handlers[key]

    @property
    def image(self) -> ClusterImage:
        """This broker's view of the cluster: the controller's UpdateMetadata, or the local store."""
        return self._image

    def publish_image(self, image: ClusterImage) -> None:
        self._image = image
        waiters, self._image_waiters = self._image_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    async def await_leaders(self, partitions: dict[str, set[int]], timeout_s: float) -> set[str]:
        """Wait until every named partition has a leader in this broker's image (Kafka's
        DelayedCreatePartitions); the topics still without one when ``timeout_s`` runs out."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            missing = {name for name, wanted in partitions.items()
                       if (topic := self.image.topics.get(name)) is None
                       or any(p not in topic.partitions or topic.partitions[p].leader < 0 for p in wanted)}
            left = deadline - loop.time()
            if not missing or left <= 0:
                return missing
            fut: asyncio.Future[None] = loop.create_future()
            self._image_waiters.append(fut)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(fut, left)

    # --- lifecycle ------------------------------------------------------------------------------

    def _default_log_config(self) -> LogConfig:
        return LogConfig.from_properties({k: v for k, (v, _src) in effective_topic_config({}, self.config.props).items()})

    def log_config(self, topic: TopicImage) -> LogConfig:
        return LogConfig.from_properties({k: v for k, (v, _src) in self.effective_topic_config(topic.configs).items()})

    def effective_topic_config(self, overrides: Mapping[str, str]) -> dict[str, tuple[str, ConfigSource]]:
        return effective_topic_config(overrides, self.config.props, *self._configs.dynamic_maps())

    async def start(self) -> None:
        loop = asyncio.get_running_loop()

        def dir_failed(_log_dir: Path) -> None:
            # Logs report I/O errors from whichever thread met them; the dir goes offline on the loop.
            loop.call_soon_threadsafe(self._schedule_dir_failures)

        self.logs.on_dir_failure = dir_failed
        self.logs.load()
        await self.authority.open_logs()
        self.replicas.start()
        self.groups.start()
        self.transactions.start()
        for listener in self.config.listeners:
            server = await loop.create_server(
                serve_connection_factory(self._handle_frame, self.config.socket_request_max_bytes, self._connections,
                                         listener.name, self.authn.on_open, self.connection_quotas),
                host=listener.host,
                port=listener.port,
                reuse_address=True,
                backlog=512,
                ssl=self.authn.ssl_context(listener.name),
            )
            self._servers.append(server)
            log.info("broker %d listening on %s:%d (%s, %s)", self.config.broker_id, listener.host, listener.port,
                     listener.name, listener.security_protocol)
        self._metrics = metrics.BrokerCollector()
        metrics_port = int(self.config.props.get("metrics.port", 0))
        # The snapshot copies every partition's log end offset: built only when someone can read it.
        self._metrics_served = metrics_port > 0
        if metrics_port:
            metrics.serve(metrics_port, self.config.listeners[0].host, self._metrics)
            log.info("metrics on http://%s:%d/metrics", self.config.listeners[0].host, metrics_port)
            self._publish_metrics()
        self._housekeeping_task = loop.create_task(self._housekeeping())
        self.cleaner.start()
        # In a cluster, registration comes last, once the broker can answer the controller's requests.
        await self.authority.start()

    async def _housekeeping(self) -> None:
        last_checkpoint = last_retention = time.monotonic()
        retention_check_s = int(self.config.props.get("log.retention.check.interval.ms", 300_000)) / 1000
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), TICK_INTERVAL_S)
            if self._stopping.is_set():
                return  # the logs are about to close; no retention on closed logs
            try:
                if self._metrics_served:
                    self._publish_metrics()
                retention_due = time.monotonic() - last_retention >= retention_check_s
                if retention_due:
                    last_retention = time.monotonic()
                removals = self.logs.housekeep(now_ms(), enforce_retention=retention_due)
                if removals:
                    await asyncio.to_thread(remove_files, removals)
                # fsyncs run on a worker thread: on a busy disk one can take seconds. Rolled logs,
                # and logs whose flush.ms is due.
                rolled = self.logs.logs_to_flush(now_ms())
                if rolled:
                    await asyncio.to_thread(self.logs.flush_logs, rolled)
                if time.monotonic() - last_checkpoint >= CHECKPOINT_INTERVAL_S:
                    await asyncio.to_thread(self.logs.write_checkpoints, self.logs.checkpoint_contents())
                    last_checkpoint = time.monotonic()
            except Exception:
                log.exception("housekeeping failed")

    def _schedule_dir_failures(self) -> None:
        if self._dir_failures is None or self._dir_failures.done():
            self._dir_failures = asyncio.get_running_loop().create_task(self._take_failed_dirs_offline())

    async def _take_failed_dirs_offline(self) -> None:
        """Kafka's log dir failure handling: the dir's partitions stop being served (clients get
        KAFKA_STORAGE_ERROR), the controller is told through /log_dir_event_notification and moves
        leadership and ISR membership away; with no dir left the broker stops."""
        for log_dir in self.logs.failed_dirs():
            keys = self.logs.take_offline(log_dir)
            self.replicas.drop_offline(keys)
            log.error("broker %d: log dir %s is offline; %d partitions stopped", self.config.broker_id, log_dir, len(keys))
            try:
                await self.authority.report_log_dir_failure()
            except Exception:
                log.exception("could not notify the controller of the failed log dir %s", log_dir)
        if not self.logs.online_dirs and not self._stopping.is_set():
            log.error("broker %d: every log dir is offline; shutting down", self.config.broker_id)
            self._halt.set()

    def _publish_metrics(self) -> None:
        hosted = list(self.replicas.partitions.values())
        led = [h for h in hosted if h.replica.is_leader]
        tokens = {(u if isinstance(u, str) else "<default>", c if isinstance(c, str) else "<default>"): v
                  for (u, c), v in self.quotas.remaining_tokens(now_ms()).items()}
        self._metrics.snapshot = metrics.Snapshot(
            broker_id=self.config.broker_id,
            remaining_tokens=tokens,
            partitions_led=len(led),
            under_replicated=sum(1 for h in led if len(h.replica.isr) < len(h.replica.replicas)),
            preferred_imbalance=self.image.preferred_imbalance(self.config.broker_id),
            log_end_offsets={(h.replica.topic, h.replica.partition): h.plog.log_end_offset for h in hosted},
            reassignment_moves=tuple(self.replicas.reassignment_progress(now_ms())),
            cleaner=self.cleaner.figures(),
            gc=metrics.GcFigures(tuple(gc_policy.CLOCK.collections), tuple(gc_policy.CLOCK.seconds),
                                 tuple(gc_policy.CLOCK.longest_s)),
            fetch_sessions=len(self._fetch.sessions),
            consumer_fetch_bytes=dict(self._fetch.consumer_bytes),
            reassignment_throttle=self.replicas.reassignment_throttle(),
            copy_pace=self.replicas.copy_pace(),
            self_healing=self.authority.self_healing(),
        )

    async def stop(self) -> None:
        await self.authority.stop()  # in a cluster, leadership moves away while we still serve followers
        self._stopping.set()
        await self._housekeeping_task
        await self.cleaner.stop()
        await self.transactions.stop()
        await self.groups.stop()
        await self.replicas.stop()
        for server in self._servers:
            server.close()
        for conn in list(self._connections):
            if conn.transport is not None:
                conn.transport.close()
        for server in self._servers:
            await server.wait_closed()
        self.logs.close()
        self.authz.close()
        log.info("broker %d stopped cleanly", self.config.broker_id)

    async def run_until_signalled(self) -> None:
        await self.start()
        loop = asyncio.get_running_loop()
        done = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, done.set)
        print(f"headwater broker {self.config.broker_id} ready on {self.info.host}:{self.info.port}", flush=True)
        halted = loop.create_task(self._halt.wait())
        signalled = loop.create_task(done.wait())
        await asyncio.wait([halted, signalled], return_when=asyncio.FIRST_COMPLETED)
        halted.cancel()
        signalled.cancel()
        await self.stop()
        if self._halt.is_set():
            raise SystemExit(1)

    # --- dispatch -------------------------------------------------------------------------------

    async def _handle_frame(self, conn: Connection, frame: bytearray, arrived_s: float) -> Reply | None:
        current_connection.set(conn)
        if self.authn.needs_gate(conn):
            gated = self.authn.gate(conn, frame)
            if gated is not True:
                return gated
        try:
            request = decode_request(frame)
        except KafkaError as exc:
            try:
                key, _version, correlation_id = peek_api(frame)
            except MalformedFrameError:
                conn.abort("frame too short for a request header")
                return None
            if key == ApiKey.API_VERSIONS:
                # Kafka answers an ApiVersions it cannot parse with v0 and its ranges, so a newer
                # client can retry with a version both sides know.
                return Reply([api_versions_unsupported(correlation_id)])
            conn.abort(f"{exc.message} (correlation id {correlation_id})")
            return None
        except (ValueError, MalformedFrameError) as exc:
            conn.abort(str(exc))
            return None
        if request.spec.key == ApiKey.JOIN_GROUP:
            CLIENT_HOST.set("/" + conn.peer.rpartition(":")[0])
        handler = self._handlers.get(request.spec.key)
        if handler is None:  # a cluster's API (inter-broker, reassignment) sent to a standalone broker
            conn.abort(f"no handler for {request.spec.key.name} v{request.version} (correlation id {request.correlation_id})")
            return None
        request.principal, request.client_address = conn.principal, conn.peer
        request.arrived_s = arrived_s
        result = handler(request)
        if asyncio.iscoroutine(result):
            result = await result
        self.authz.audit_request(request, result)
        if result is None:
            return None
        if isinstance(result, list):
            return Reply(result)  # already framed parts (fetch)
        # A throttled client is muted for as long as its response says, so one that ignores
        # throttle_time_ms still cannot send faster (KIP-599, KIP-219).
        return Reply([encode_response(request, result)], mute_ms=getattr(result, "throttle_time_ms", 0) or 0)

    # --- what handlers use (BrokerContext) -------------------------------------------------------

    def leader(self, topic: str, partition: int, current_leader_epoch: int = -1) -> Hosted:
        """The partition, if this broker leads it; else the error a client expects."""
        t = self.image.topics.get(topic)
        if t is None or partition not in t.partitions:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        return self.replicas.leader(topic, partition, current_leader_epoch)

    def broker_address(self, broker_id: int) -> tuple[str, int] | None:
        b = self.image.brokers.get(broker_id)
        return (b.address(self.config.inter_broker_listener) or (b.host, b.port)) if b is not None else None

    def client_brokers(self) -> list[tuple[BrokerInfo, str, int]]:
        """The brokers as the current client sees them: at the endpoints of the listener it came in
        on (Kafka's way), leaving out brokers that lack that listener."""
        conn = current_connection.get()
        listener = conn.listener if conn is not None else None
        out = []
        for b in sorted(self.image.brokers.values(), key=lambda b: b.broker_id):
            address = b.address(listener)
            if address is not None:
                out.append((b, *address))
        return out

    def request_quota(self, req: Request, strict: bool) -> quota.RequestQuota:
        conn = current_connection.get()
        principal = conn.principal if conn is not None else "User:" + ANONYMOUS_USER
        user = principal[5:] if principal.startswith("User:") else principal
        return quota.RequestQuota(self.quotas, user, req.client_id or "", strict, now_ms())

    async def refresh_log_configs(self) -> None:
        await self._configs.refresh_log_configs()

    async def refresh_broker_configs(self) -> None:
        await self._configs.refresh_broker_configs()


def run_broker(config: BrokerConfig) -> None:
    logging.basicConfig(
        level=os.environ.get("HEADWATER_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s [broker %(process)d] %(name)s: %(message)s",
    )
    gc_policy.tune()
    broker = Broker(config)
    asyncio.run(broker.run_until_signalled())
