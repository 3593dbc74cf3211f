"""The broker process: listeners, request dispatch, and the handlers of every API it speaks.

In this single-broker form the broker is its own controller for topic metadata, kept by a
``LocalMetadataStore``; the ZooKeeper-backed controller replaces that store and the topic-admin
handlers' apply step, nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import re
import shutil
import signal
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from headwater.controller import events as ev
from headwater.controller import quota
from headwater.controller.topics import plan_create_partitions, plan_create_topic, validate_topic_name
from headwater.coordinator.records import OFFSETS_TOPIC
from headwater.metadata.configs import (
    DYNAMIC_BROKER_CONFIGS,
    TOPIC_CONFIGS,
    ConfigSource,
    effective_topic_config,
    validate_broker_config,
    validate_topic_config,
    validate_topic_configs,
)
from headwater.metadata.image import BrokerEndpoint, BrokerInfo, ClusterImage, PartitionState, TopicImage
from headwater.protocol.apis import (
    ApiKey,
    Request,
    advertised_versions,
    api_versions_unsupported,
    decode_request,
    encode_response,
)
from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.protocol.fetch import FetchPartitionData, FetchTopicData, NodeEndpoint, encode_fetch_response
from headwater.protocol.frame import MalformedFrameError, peek_api
from headwater.records import iter_batches
from headwater.replication.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    MAX_SESSIONS,
    PartitionRequest,
    SessionCache,
    SessionPartition,
    next_epoch,
)
from headwater.replication.partition import LeaderAndIsrState
from headwater.security.acl import AclOperation, ResourceType
from headwater.server import gc_policy, metrics, scram_admin
from headwater.server.authn import Authenticator
from headwater.server.authz import Authz
from headwater.server.cleaner import LogCleanerService
from headwater.server.cluster import ClusterMember
from headwater.server.config import BrokerConfig
from headwater.server.connection import Connection, Reply, current_connection, serve_connection_factory
from headwater.server.controller_shell import ControllerShell
from headwater.server.describe_topics import describe_page
from headwater.server.groups import CLIENT_HOST, GroupShell
from headwater.server.metadata_store import LocalMetadataStore, LocalQuotaStore
from headwater.server.replica_manager import Hosted, ReplicaManager
from headwater.server.topic_creation import TopicCreator
from headwater.storage import LogConfig, LogManager

log = logging.getLogger(__name__)

# ListOffsets special timestamps
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
CONSUMER_REPLICA_ID, DEBUGGING_REPLICA_ID = -1, -2  # ListOffsets replica ids that are not brokers
SOFTWARE_NAME = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")  # ApiVersions v3+ (KIP-511)
ENDPOINT_TYPE_BROKER, ENDPOINT_TYPE_CONTROLLER = 1, 2  # DescribeCluster v1+ (KIP-919)
EARLIEST_LOCAL_TIMESTAMP = -4  # KIP-405
LATEST_TIERED_TIMESTAMP = -5  # KIP-1005
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6  # KIP-1023
# The first ListOffsets version that may carry each special timestamp (Kafka's
# ListOffsetsRequest.timestampMinSupportedVersion); any other negative timestamp is unsupported.
TIMESTAMP_MIN_VERSION = {LATEST_TIMESTAMP: 0, EARLIEST_TIMESTAMP: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL_TIMESTAMP: 8,
                         LATEST_TIERED_TIMESTAMP: 9, EARLIEST_PENDING_UPLOAD_TIMESTAMP: 11}
# DescribeConfigs / AlterConfigs resource types
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
# IncrementalAlterConfigs operations
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
PRODUCER_ID_BLOCK = 1000
# Without authentication every client is Kafka's anonymous principal, which user quotas (and the
# <default> user) apply to.
ANONYMOUS_USER = "ANONYMOUS"
THROTTLED_MESSAGE = "The throttling quota has been exceeded."
# First version of each mutation API that is checked strictly (KIP-599); older ones are throttled.
STRICT_QUOTA_SINCE = {ApiKey.CREATE_TOPICS: 6, ApiKey.CREATE_PARTITIONS: 3, ApiKey.DELETE_TOPICS: 5}
TICK_INTERVAL_S = 1.0
CHECKPOINT_INTERVAL_S = 5.0


def _now_ms() -> int:
    return int(time.time() * 1000)


class Broker:
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
        self.cluster = ClusterMember(self, connect, int(config.props.get("zookeeper.session.timeout.ms", 18000))) \
            if connect else None
        self.store = LocalMetadataStore(config.log_dirs[0], self.info)
        self._image_waiters: list[asyncio.Future[None]] = []
        self._image: ClusterImage = self.store.load() if self.cluster is None else ClusterImage("", -1, {}, {})
        self.logs = LogManager(list(config.log_dirs), self._default_log_config(), clock_ms=_now_ms)
        self.cleaner = LogCleanerService(self.logs, config.props, _now_ms)
        # Client quotas: in ZooKeeper (/config/users, /config/clients) in a cluster, else a local file.
        self.quota_store = LocalQuotaStore(config.log_dirs[0])
        self.quota_configs: dict[str, dict[str, str]] = self.quota_store.load() if self.cluster is None else {}
        self.quotas = quota.MutationQuotas(
            windows=int(config.props.get("controller.quota.window.num", quota.DEFAULT_WINDOWS)),
            window_seconds=float(config.props.get("controller.quota.window.size.seconds", quota.DEFAULT_WINDOW_SECONDS)),
        )
        self._configure_quotas()
        # ACLs (when an authorizer is configured) and the audit log; ACLs come from ZooKeeper in a cluster.
        self.authz = Authz(config.props, config.log_dirs[0], config.broker_id)
        # Dynamic broker configs (throttle rates...): this broker's own, over the cluster default.
        self.dynamic_configs: dict[str, str] = {}
        self.broker_epoch = -1
        self.replicas = ReplicaManager(
            config.broker_id, self.logs,
            replica_lag_time_max_ms=int(config.props.get("replica.lag.time.max.ms", 30000)),
            replica_fetch_backoff_ms=int(config.props.get("replica.fetch.backoff.ms", 1000)),
            wake=self._wake,
            broker_address=self._broker_address,
            controller_id=lambda: self.image.controller_id,
            broker_epoch=lambda: self.broker_epoch,
            channel_security=self.authn.channel_security,
        )
        self._rng = random.Random()
        self._servers: list[asyncio.base_events.Server] = []
        self._connections: set[Connection] = set()
        self._waiters: dict[tuple[str, int], list[asyncio.Future[None]]] = {}
        # Followers' incremental fetch sessions (KIP-227).
        self.fetch_sessions = SessionCache(int(config.props.get("max.incremental.fetch.session.cache.slots",
                                                                MAX_SESSIONS)))
        self._producer_ids = (0, 0)  # [next, end) of the block this broker owns
        self.consumer_fetch_bytes: dict[str, int] = {}  # client id -> record bytes served to consumers
        self._stopping = asyncio.Event()
        self._halt = asyncio.Event()  # set when the broker cannot go on (every log dir offline)
        self._dir_failures: asyncio.Task[None] | None = None
        self._handlers: dict[ApiKey, Callable[[Request], Any]] = {
            ApiKey.API_VERSIONS: self.api_versions,
            ApiKey.METADATA: self.metadata,
            ApiKey.PRODUCE: self.produce,
            ApiKey.FETCH: self.fetch,
            ApiKey.LIST_OFFSETS: self.list_offsets,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self.offset_for_leader_epoch,
            ApiKey.INIT_PRODUCER_ID: self.init_producer_id,
            ApiKey.CREATE_TOPICS: self.create_topics,
            ApiKey.DELETE_TOPICS: self.delete_topics,
            ApiKey.CREATE_PARTITIONS: self.create_partitions,
            ApiKey.DESCRIBE_CONFIGS: self.describe_configs,
            ApiKey.ALTER_CONFIGS: self.alter_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self.incremental_alter_configs,
            ApiKey.DESCRIBE_CLUSTER: self.describe_cluster,
            ApiKey.DESCRIBE_TOPIC_PARTITIONS: self.describe_topic_partitions,
            ApiKey.DESCRIBE_LOG_DIRS: self.describe_log_dirs,
            ApiKey.DELETE_RECORDS: self.delete_records,
            ApiKey.DESCRIBE_CLIENT_QUOTAS: self.describe_client_quotas,
            ApiKey.ALTER_CLIENT_QUOTAS: self.alter_client_quotas,
            ApiKey.DESCRIBE_ACLS: self.authz.describe_acls,
            ApiKey.CREATE_ACLS: self.authz.create_acls,
            ApiKey.DELETE_ACLS: self.authz.delete_acls,
            ApiKey.SASL_HANDSHAKE: self.sasl_after_authentication,
            ApiKey.SASL_AUTHENTICATE: self.sasl_after_authentication,
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: lambda req: scram_admin.describe(self, req),
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: lambda req: scram_admin.alter(self, req),
        }
        self.topic_creator = TopicCreator(self)
        self.groups = GroupShell(self)
        self._handlers.update(self.groups.handlers())
        if self.cluster is not None:
            self._handlers.update({
                ApiKey.LEADER_AND_ISR: self.cluster.leader_and_isr,
                ApiKey.UPDATE_METADATA: self.cluster.update_metadata,
                ApiKey.STOP_REPLICA: self.cluster.stop_replica,
                ApiKey.ALTER_PARTITION: self.cluster.alter_partition,
                ApiKey.CONTROLLED_SHUTDOWN: self.cluster.controlled_shutdown,
                ApiKey.ALTER_PARTITION_REASSIGNMENTS: self.cluster.alter_partition_reassignments,
                ApiKey.LIST_PARTITION_REASSIGNMENTS: self.cluster.list_partition_reassignments,
            })

    @property
    def image(self) -> ClusterImage:
        """This broker's view of the cluster: the controller's UpdateMetadata, or the local store."""
        return self._image

    @image.setter
    def image(self, image: ClusterImage) -> None:
        self._image = image
        waiters, self._image_waiters = self._image_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    async def _await_leaders(self, partitions: dict[str, set[int]], timeout_s: float) -> set[str]:
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

    def _log_config(self, topic: TopicImage) -> LogConfig:
        effective = effective_topic_config(topic.configs, self.config.props)
        return LogConfig.from_properties({k: v for k, (v, _src) in effective.items()})

    async def start(self) -> None:
        loop = asyncio.get_running_loop()

        def dir_failed(_log_dir: Path) -> None:
            # Logs report I/O errors from whichever thread met them; the dir goes offline on the loop.
            loop.call_soon_threadsafe(self._schedule_dir_failures)

        self.logs.on_dir_failure = dir_failed
        self.logs.load()
        if self.cluster is None:
            # Open (or create) a log for every partition and drop logs of topics that no longer
            # exist, so the disk matches the image before the first client arrives.
            wanted = set()
            for topic in self.image.topics.values():
                for p in topic.partitions:
                    wanted.add((topic.name, p))
                self._lead_standalone(topic, topic.partitions)
            for plog in self.logs.all_logs():
                if (plog.topic, plog.partition) not in wanted:
                    self.logs.delete(plog.topic, plog.partition)
        self.replicas.start()
        self.groups.start()
        for listener in self.config.listeners:
            server = await loop.create_server(
                serve_connection_factory(self._handle_frame, self.config.socket_request_max_bytes, self._connections,
                                         listener.name, self.authn.on_open),
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
        if self.cluster is not None:
            # Registration comes last, once the broker can answer the controller's requests.
            await self.cluster.start()

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
                self.logs.tick(_now_ms(), enforce_retention=retention_due)
                # fsyncs run on a worker thread: on a busy disk one can take seconds.
                rolled = self.logs.rolled_logs()
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
            if self.cluster is not None:
                try:
                    await self.cluster.report_log_dir_failure()
                except Exception:
                    log.exception("could not notify the controller of the failed log dir %s", log_dir)
        if not self.logs.online_dirs and not self._stopping.is_set():
            log.error("broker %d: every log dir is offline; shutting down", self.config.broker_id)
            self._halt.set()

    def _publish_metrics(self) -> None:
        hosted = list(self.replicas.partitions.values())
        led = [h for h in hosted if h.replica.is_leader]
        tokens = {(u if isinstance(u, str) else "<default>", c if isinstance(c, str) else "<default>"): v
                  for (u, c), v in self.quotas.remaining_tokens(_now_ms()).items()}
        self._metrics.snapshot = metrics.Snapshot(
            broker_id=self.config.broker_id,
            remaining_tokens=tokens,
            partitions_led=len(led),
            under_replicated=sum(1 for h in led if len(h.replica.isr) < len(h.replica.replicas)),
            log_end_offsets={(h.replica.topic, h.replica.partition): h.plog.log_end_offset for h in hosted},
            reassignment_moves=tuple(self.replicas.reassignment_progress(_now_ms())),
            cleaner=self.cleaner.figures(),
            gc=metrics.GcFigures(tuple(gc_policy.CLOCK.collections), tuple(gc_policy.CLOCK.seconds),
                                 tuple(gc_policy.CLOCK.longest_s)),
            fetch_sessions=len(self.fetch_sessions),
            consumer_fetch_bytes=dict(self.consumer_fetch_bytes),
        )

    async def stop(self) -> None:
        if self.cluster is not None:
            await self.cluster.stop()  # leadership moves away while we still serve followers
        self._stopping.set()
        await self._housekeeping_task
        await self.cleaner.stop()
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

    async def _handle_frame(self, conn: Connection, frame: bytearray) -> Reply | None:
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
        if handler is None:  # an API we decode but do not serve yet (the inter-broker ones)
            conn.abort(f"no handler for {request.spec.key.name} v{request.version} (correlation id {request.correlation_id})")
            return None
        request.principal, request.client_address = conn.principal, conn.peer
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

    # --- helpers --------------------------------------------------------------------------------

    def _leader(self, topic: str, partition: int, current_leader_epoch: int = -1) -> Hosted:
        """The partition, if this broker leads it; else the error a client expects."""
        t = self.image.topics.get(topic)
        if t is None or partition not in t.partitions:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        return self.replicas.leader(topic, partition, current_leader_epoch)

    def _broker_address(self, broker_id: int) -> tuple[str, int] | None:
        b = self.image.brokers.get(broker_id)
        return (b.address(self.config.inter_broker_listener) or (b.host, b.port)) if b is not None else None

    def _client_brokers(self) -> list[tuple[BrokerInfo, str, int]]:
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

    def sasl_after_authentication(self, req: Request) -> Any:
        """SaslHandshake/SaslAuthenticate once authenticated, or on a listener without SASL."""
        message = "SASL authentication is not expected on this connection now"
        if req.spec.key == ApiKey.SASL_HANDSHAKE:
            return req.response(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
        fields: dict[str, Any] = dict(error_code=ErrorCode.ILLEGAL_SASL_STATE, error_message=message, auth_bytes=b"")
        if req.version >= 1:
            fields["session_lifetime_ms"] = 0
        return req.response(**fields)

    def _lead_standalone(self, topic: TopicImage, partitions: Iterable[int]) -> None:
        """Without a controller this broker leads every partition with itself as the whole ISR."""
        cfg = self._log_config(topic)
        max_bytes = int(effective_topic_config(topic.configs, self.config.props)["max.message.bytes"][0])
        me = self.config.broker_id
        for p in partitions:
            state = topic.partitions[p]
            self.replicas.become(topic.name, p, LeaderAndIsrState(me, state.leader_epoch, (me,), 0, (me,)),
                                 topic_id=topic.topic_id, config=cfg, min_insync_replicas=1, max_message_bytes=max_bytes)

    def _wake(self, topic: str, partition: int) -> None:
        waiters = self._waiters.pop((topic, partition), None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    def _set_image(self, image: ClusterImage) -> None:
        self.store.save(image)
        self.image = image

    # --- ApiVersions, Metadata, DescribeCluster ---------------------------------------------------

    def api_versions(self, req: Request) -> Any:
        body = req.body
        if req.version >= 3 and not (SOFTWARE_NAME.fullmatch(body.client_software_name or "")
                                     and SOFTWARE_NAME.fullmatch(body.client_software_version or "")):
            # ApiVersionsRequest.isValid: KIP-511's names are refused, with no versions listed.
            return req.response(error_code=ErrorCode.INVALID_REQUEST, api_keys=[], throttle_time_ms=0)
        return req.response(
            error_code=0,
            api_keys=advertised_versions(req.spec.response),
            throttle_time_ms=0,
        )

    def _request_quota(self, req: Request, strict: bool) -> quota.RequestQuota:
        conn = current_connection.get()
        principal = conn.principal if conn is not None else "User:" + ANONYMOUS_USER
        user = principal[5:] if principal.startswith("User:") else principal
        return quota.RequestQuota(self.quotas, user, req.client_id or "", strict, _now_ms())

    async def metadata(self, req: Request) -> Any:
        body = req.body
        resp_cls = req.spec.response
        topic_cls = resp_cls.MetadataResponseTopic
        part_cls = topic_cls.MetadataResponsePartition
        unauthorized: set[str] = set()
        creating: dict[str, ErrorCode] = {}
        if body.topics is None or (req.version == 0 and not body.topics):
            # All topics: those the principal may not describe are left out, not refused.
            names = sorted(self.image.topics)
            if self.authz.enabled:
                names = [n for n in names if self.authz.topic(req, AclOperation.DESCRIBE, n, note=False)]
        else:
            names = []
            for t in body.topics:
                name = t.name
                if name is None and req.version >= 10 and t.topic_id is not None:
                    found = self.image.topic_by_id(t.topic_id)
                    name = found.name if found else None
                if name is not None:
                    names.append(name)
            allow = (body.allow_auto_topic_creation if req.version >= 4 else True) and self.config.auto_create_topics
            unauthorized = {n for n in names if not self.authz.topic(req, AclOperation.DESCRIBE, n)}
            if allow and not self.authz.cluster(req, AclOperation.CREATE, note=False):
                # Auto-creation needs CREATE on the cluster or on the topic (Kafka's rule).
                unauthorized |= {n for n in names if n not in unauthorized and n not in self.image.topics
                                 and not self.authz.topic(req, AclOperation.CREATE, n)}
            missing = [n for n in dict.fromkeys(names) if n not in unauthorized and n not in self.image.topics]
            if allow and missing:
                # Auto-creation is never refused by the mutation quota, only recorded (Kafka's permissive quota).
                creating = await self.topic_creator.auto_create(missing, self._request_quota(req, strict=False))
        topics = []
        for name in names:
            topic = self.image.topics.get(name)
            if name in unauthorized:
                topics.append(topic_cls(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name,
                                        topic_id=uuid.UUID(int=0), is_internal=False, partitions=[]))
                continue
            if name in creating:
                # Created (or being created) by this request: no leaders yet as far as clients should
                # know, even where this broker made them at once (KafkaApis answers the same).
                topics.append(topic_cls(error_code=creating[name], name=name, topic_id=uuid.UUID(int=0),
                                        is_internal=name == OFFSETS_TOPIC, partitions=[]))
                continue
            if topic is None:
                try:
                    validate_topic_name(name)
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                except KafkaError:
                    code = ErrorCode.INVALID_TOPIC_EXCEPTION
                topics.append(topic_cls(error_code=code, name=name, topic_id=uuid.UUID(int=0), is_internal=False, partitions=[]))
                continue
            partitions = [
                part_cls(
                    error_code=0,
                    partition_index=p,
                    leader_id=s.leader,
                    leader_epoch=s.leader_epoch,
                    replica_nodes=list(s.replicas),
                    isr_nodes=list(s.isr),
                    offline_replicas=[r for r in s.replicas if r not in self.image.brokers or r in s.offline_replicas],
                )
                for p, s in sorted(topic.partitions.items())
            ]
            extra: dict[str, Any] = {}
            if req.version >= 8 and body.include_topic_authorized_operations:
                extra["authorized_operations"] = self.authz.authorized_operations(req, ResourceType.TOPIC, name)
            topics.append(topic_cls(error_code=0, name=name, topic_id=topic.topic_id, is_internal=name == OFFSETS_TOPIC,
                                    partitions=partitions, **extra))
        brokers = [
            resp_cls.MetadataResponseBroker(node_id=b.broker_id, host=host, port=port, rack=b.rack)
            for b, host, port in self._client_brokers()
        ]
        cluster_ops: dict[str, Any] = {}
        if 8 <= req.version <= 10 and body.include_cluster_authorized_operations:
            cluster_ops["authorized_operations"] = self.authz.authorized_operations(req, ResourceType.CLUSTER)
        return req.response(
            throttle_time_ms=0,
            brokers=brokers,
            cluster_id=self.image.cluster_id,
            controller_id=self.image.controller_id,
            topics=topics,
            **cluster_ops,
        )

    def describe_cluster(self, req: Request) -> Any:
        if req.version >= 1 and req.body.endpoint_type != ENDPOINT_TYPE_BROKER:
            # A broker answers only for brokers (KIP-919; Kafka's AuthHelper.computeDescribeClusterResponse).
            known = req.body.endpoint_type == ENDPOINT_TYPE_CONTROLLER
            return req.response(
                throttle_time_ms=0, cluster_id=self.image.cluster_id, controller_id=-1, brokers=[],
                error_code=ErrorCode.MISMATCHED_ENDPOINT_TYPE if known else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                error_message=("The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
                               "type CONTROLLER" if known else f"Unsupported endpoint type {req.body.endpoint_type}"))
        brokers = [
            req.spec.response.DescribeClusterBroker(broker_id=b.broker_id, host=host, port=port, rack=b.rack)
            for b, host, port in self._client_brokers()
        ]
        cluster_ops: dict[str, Any] = {}
        if req.body.include_cluster_authorized_operations:
            cluster_ops["authorized_operations"] = self.authz.authorized_operations(req, ResourceType.CLUSTER)
        return req.response(
            throttle_time_ms=0,
            error_code=0,
            error_message=None,
            cluster_id=self.image.cluster_id,
            controller_id=self.image.controller_id,
            brokers=brokers,
            **cluster_ops,
        )

    def describe_topic_partitions(self, req: Request) -> Any:
        """DescribeTopicPartitions (what the Java admin client's describeTopics uses since Kafka 3.8),
        as Kafka's DescribeTopicPartitionsRequestHandler answers it; the paging is describe_page's."""
        body = req.body
        T = req.spec.response.DescribeTopicPartitionsResponseTopic
        P = T.DescribeTopicPartitionsResponsePartition
        all_topics = not body.topics
        cursor = (body.cursor.topic_name, body.cursor.partition_index) if body.cursor is not None else None
        start = cursor[0] if cursor is not None else ""
        names = [n for n in dict.fromkeys(sorted(self.image.topics) if all_topics else [t.name for t in body.topics])
                 if n >= start]
        if cursor is not None and ((not all_topics and cursor[0] not in names) or cursor[1] < 0):
            # The cursor must name a requested topic and a real partition: the whole request is invalid.
            return req.response(throttle_time_ms=0, next_cursor=None, topics=[
                T(error_code=ErrorCode.INVALID_REQUEST, name=t.name, topic_id=uuid.UUID(int=0), is_internal=False,
                  partitions=[]) for t in body.topics])
        # Topics the principal may not describe: refused by name when named, silently left out otherwise.
        allowed = [n for n in names if self.authz.topic(req, AclOperation.DESCRIBE, n, note=not all_topics)]
        permitted = set(allowed)
        refused = [] if all_topics else [n for n in names if n not in permitted]
        limit = max(min(self.config.max_request_partition_size_limit, body.response_partition_limit), 1)
        page = describe_page(self.image, allowed, cursor, limit, all_topics)
        topics = []
        for t in page.topics:
            found = self.image.topics.get(t.name)
            topics.append(T(
                error_code=t.error, name=t.name, topic_id=found.topic_id if found is not None else uuid.UUID(int=0),
                is_internal=t.name == OFFSETS_TOPIC,
                # Kafka's 32-bit field of operation codes (Utils.to32BitField); the schema types it int32 here.
                topic_authorized_operations=sum(1 << op for op in self.authz.authorized_operations(
                    req, ResourceType.TOPIC, t.name)),
                partitions=[P(error_code=0, partition_index=p, leader_id=s.leader if s.leader in self.image.brokers else -1,
                              leader_epoch=s.leader_epoch, replica_nodes=list(s.replicas), isr_nodes=list(s.isr),
                              eligible_leader_replicas=None, last_known_elr=None,
                              offline_replicas=[r for r in s.replicas
                                                if r not in self.image.brokers or r in s.offline_replicas])
                            for p, s in t.partitions]))
        topics += [T(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=n, topic_id=uuid.UUID(int=0), is_internal=False,
                     partitions=[]) for n in refused]
        next_cursor = None
        if page.next_cursor is not None:
            next_cursor = req.spec.response.Cursor(topic_name=page.next_cursor[0], partition_index=page.next_cursor[1])
        return req.response(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)

    # --- Produce ----------------------------------------------------------------------------------

    async def produce(self, req: Request) -> Any:
        body = req.body
        acks = body.acks
        resp_cls = req.spec.response
        topic_resp_cls = resp_cls.TopicProduceResponse
        part_resp_cls = topic_resp_cls.PartitionProduceResponse
        results = []
        waits: list[tuple[Any, asyncio.Future[ErrorCode]]] = []
        for topic_data in body.topic_data:
            name = topic_data.name
            parts = []
            writable = self.authz.topic(req, AclOperation.WRITE, name)
            for pd in topic_data.partition_data:
                base_offset, log_start, code, message = -1, -1, ErrorCode.NONE, None
                record_errors: list[Any] = []
                wait = None
                try:
                    if acks not in (-1, 0, 1):
                        raise KafkaError(ErrorCode.INVALID_REQUIRED_ACKS)
                    if not writable:
                        raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    if body.transactional_id is not None:
                        raise KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "transactions are not supported")
                    hosted = self._leader(name, pd.index)
                    records = pd.records
                    if not records:
                        raise KafkaError(ErrorCode.INVALID_RECORD, "empty records")
                    max_bytes = hosted.max_message_bytes
                    for _pos, header in iter_batches(records, verify_crc=False):
                        if header.size > max_bytes:
                            raise KafkaError(
                                ErrorCode.MESSAGE_TOO_LARGE,
                                f"The batch of {header.size} bytes is larger than max.message.bytes={max_bytes}",
                            )
                    base_offset, wait = self.replicas.append(hosted, bytearray(records), acks, body.timeout_ms)
                    log_start = hosted.plog.log_start_offset
                except KafkaError as exc:
                    code, message = exc.code, exc.message
                    record_errors = [part_resp_cls.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                                     for i, m in getattr(exc, "record_errors", ())]
                except ValueError as exc:  # a malformed batch header
                    code, message = ErrorCode.CORRUPT_MESSAGE, str(exc)
                part = part_resp_cls(index=pd.index, error_code=code, base_offset=base_offset,
                                     log_append_time_ms=-1, log_start_offset=log_start, record_errors=record_errors,
                                     error_message=message)
                parts.append(part)
                if wait is not None:
                    waits.append((part, wait))
            results.append(topic_resp_cls(name=name, partition_responses=parts))
        # acks=all: answer once the high watermark covers every batch (or each one failed).
        for part, wait in waits:
            error = await wait
            if error != ErrorCode.NONE:
                part.error_code = error
                part.error_message = None
        if acks == 0:
            return None
        return req.response(responses=results, throttle_time_ms=0)

    # --- Fetch ------------------------------------------------------------------------------------

    def _fetch_refused(self, req: Request) -> set[str]:
        """Topics this fetch may not read: all of them for a follower without CLUSTER_ACTION, else
        those the consumer may not READ."""
        if not self.authz.enabled:
            return set()  # the fetch hot path pays nothing without an authorizer
        body = req.body
        replica_id = body.replica_id if req.version < 15 else (body.replica_state.replica_id if body.replica_state else -1)
        names = set()
        for ft in body.topics:
            found = self.image.topic_by_id(ft.topic_id) if req.version >= 13 else None
            names.add(ft.topic if req.version < 13 else (found.name if found else ""))
        names.discard("")
        if replica_id >= 0:
            return set() if self.authz.cluster(req, AclOperation.CLUSTER_ACTION) else names
        return {n for n in sorted(names) if not self.authz.topic(req, AclOperation.READ, n)}

    def _read_fetch(self, req: Request, refused: set[str],
                    wanted: Sequence[Any] | None = None) -> tuple[list[FetchTopicData], int]:
        """Read every partition of the request (or of ``wanted``: a fetch session's topics, shaped
        like the request's) as a Fetch response of the request's version says it."""
        body = req.body
        replica_id = body.replica_id if req.version < 15 else (body.replica_state.replica_id if body.replica_state else -1)
        replica_epoch = -1 if req.version < 15 or body.replica_state is None else body.replica_state.replica_epoch
        is_follower = replica_id >= 0
        budget = body.max_bytes if req.version >= 3 else 2**31 - 1
        total = 0
        consumer_bytes = 0
        topics: list[FetchTopicData] = []
        for ft in body.topics if wanted is None else wanted:
            if req.version >= 13:
                image_topic = self.image.topic_by_id(ft.topic_id)
                name = image_topic.name if image_topic else ""
                topic_id = ft.topic_id
            else:
                name = ft.topic
                image_topic = self.image.topics.get(name)
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
                        hosted = self.replicas.hosted(name, fp.partition)
                        if hosted is None:
                            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                        decision = self.replicas.follower_fetch(
                            hosted, replica_id, replica_epoch, fp.fetch_offset, current_epoch,
                            fp.last_fetched_epoch if req.version >= 12 else -1,
                            fp.log_start_offset if req.version >= 5 else -1,
                        )
                        data.error_code = decision.error
                        data.high_watermark = decision.high_watermark
                        data.last_stable_offset = decision.high_watermark
                        data.log_start_offset = decision.log_start_offset
                        if decision.diverging_epoch is not None:
                            data.diverging_epoch = (decision.diverging_epoch.epoch, decision.diverging_epoch.end_offset)
                        if decision.read_records and not self.replicas.leader_throttled(name, fp.partition, decision.in_sync,
                                                                                       replica_id):
                            limit = self.replicas.leader_read_limit(name, fp.partition, decision.in_sync, replica_id, limit)
                            result = hosted.plog.read(fp.fetch_offset, limit, max_offset=None, min_one_batch=total == 0)
                            data.records = result.slices
                            total += result.size_bytes
                            self.replicas.record_leader_bytes(name, fp.partition, decision.in_sync, result.size_bytes,
                                                              replica_id)
                    else:
                        hosted = self._consumer_replica(req, name, fp.partition, current_epoch)
                        plog = hosted.plog
                        # A follower's is the high watermark the leader last told it: it serves up to that.
                        hw = plog.high_watermark
                        data.high_watermark = hw
                        data.last_stable_offset = hw
                        data.log_start_offset = plog.log_start_offset
                        preferred = self._preferred_read_replica(req, hosted, fp.fetch_offset)
                        if preferred is not None:
                            # Read elsewhere: no records here (ReplicaManager.readFromLog skips the read).
                            data.preferred_read_replica = preferred
                        else:
                            result = plog.read(fp.fetch_offset, limit, max_offset=hw, min_one_batch=total == 0)
                            data.records = result.slices
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
            self.consumer_fetch_bytes[client] = self.consumer_fetch_bytes.get(client, 0) + consumer_bytes
        return topics, total

    def _consumer_replica(self, req: Request, topic: str, partition: int, current_epoch: int) -> Hosted:
        """The replica a consumer's fetch reads: the leader's, or from Fetch v11 on (which carries the
        client's metadata) a follower's too, as Kafka serves it (FetchParams.fetchOnlyLeader is only
        for followers and consumers without client metadata, KIP-392)."""
        if req.version >= 11:
            hosted = self.replicas.hosted(topic, partition)
            if hosted is not None and not hosted.replica.is_leader:
                error = hosted.replica.check_leader_epoch(current_epoch, require_leader=False)
                if error != ErrorCode.NONE:
                    raise KafkaError(error)
                return hosted
        return self._leader(topic, partition, current_epoch)

    def _preferred_read_replica(self, req: Request, hosted: Hosted, fetch_offset: int) -> int | None:
        """Where a consumer in another rack than this leader should read (KIP-392,
        RackAwareReplicaSelector): an in-sync replica in the client's rack that holds ``fetch_offset``,
        the most caught up; None to read here (no selector, not the leader, no rack, the leader's
        own rack, or no such replica)."""
        rack = req.body.rack_id if req.version >= 11 else ""
        if not (self.config.rack_aware_reads and rack and hosted.replica.is_leader):
            return None
        if self.config.rack == rack:
            return None  # the leader is in the client's rack: it stays the choice
        replica = hosted.replica
        candidates = []
        for broker_id in replica.isr:
            info = self.image.brokers.get(broker_id)
            progress = replica.progress(broker_id)
            if broker_id == self.config.broker_id or info is None or info.rack != rack or progress is None:
                continue
            if progress.log_start_offset <= fetch_offset <= progress.log_end_offset:
                caught_up = progress.last_caught_up_time_ms or 0
                candidates.append((progress.log_end_offset, caught_up, broker_id))
        return max(candidates)[2] if candidates else None

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
            endpoints = tuple(NodeEndpoint(b.broker_id, host, port, b.rack) for b, host, port in self._client_brokers())
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
        ) and await self._wait_for_data(topics, body.max_wait_ms / 1000.0):
            topics, _total = self._read_fetch(req, refused, wanted)
        return topics

    async def _session_fetch(self, req: Request) -> tuple[ErrorCode, int, list[FetchTopicData]]:
        """A follower's fetch with a session (KIP-227, ``headwater/replication/fetch_session.py``):
        (top-level error, session id to answer, topics to answer)."""
        body = req.body
        now = int(time.monotonic() * 1000)
        authorized = not self.authz.enabled or self.authz.cluster(req, AclOperation.CLUSTER_ACTION)
        if body.session_epoch == FINAL_EPOCH or not authorized:
            # Closing a session; or a follower without CLUSTER_ACTION, which gets no session (and
            # TOPIC_AUTHORIZATION_FAILED for each partition it named).
            self.fetch_sessions.remove(body.session_id, body.replica_id)
            return ErrorCode.NONE, 0, await self._read_fetch_waiting(req, self._fetch_refused(req))
        refused: set[str] = set()
        if body.session_epoch == INITIAL_EPOCH:
            self.fetch_sessions.remove(body.session_id, body.replica_id)
            topics = await self._read_fetch_waiting(req, refused)
            session = self.fetch_sessions.create(body.replica_id, now)
            if session is None:
                return ErrorCode.NONE, 0, topics
            session.apply(_session_changes(body.topics), ())
            for t in topics:
                for p in t.partitions:
                    held = session.partitions.get((t.name, p.partition))
                    if held is not None:
                        _tell(held, p)
            return ErrorCode.NONE, session.id, topics
        current = self.fetch_sessions.get(body.session_id, body.replica_id, now)
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

    async def _wait_for_data(self, topics: list[FetchTopicData], timeout_s: float) -> bool:
        """Until a partition of ``topics`` is woken (True) or ``timeout_s`` passes (False)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        keys = [(t.name, p.partition) for t in topics for p in t.partitions]
        for key in keys:
            self._waiters.setdefault(key, []).append(fut)
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            for key in keys:
                lst = self._waiters.get(key)
                if lst and fut in lst:
                    lst.remove(fut)
                    if not lst:
                        del self._waiters[key]

    # --- ListOffsets, OffsetForLeaderEpoch ------------------------------------------------------

    def list_offsets(self, req: Request) -> Any:
        resp_cls = req.spec.response
        topic_cls = resp_cls.ListOffsetsTopicResponse
        part_cls = topic_cls.ListOffsetsPartitionResponse
        if req.version == 0:
            return self._list_offsets_v0(req, topic_cls, part_cls)
        topics = []
        for t in req.body.topics:
            parts = []
            describable = self.authz.topic(req, AclOperation.DESCRIBE, t.name)
            for p in t.partitions:
                code, ts, offset, epoch = ErrorCode.NONE, -1, -1, -1
                try:
                    if not describable:
                        raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    if p.timestamp < 0 and req.version < TIMESTAMP_MIN_VERSION.get(p.timestamp, 1 << 15):
                        # ReplicaManager.isListOffsetsTimestampUnsupported: checked before the leader.
                        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION)
                    hosted = self._leader(t.name, p.partition_index, p.current_leader_epoch if req.version >= 4 else -1)
                    plog = hosted.plog
                    epoch = hosted.replica.leader_epoch
                    if p.timestamp == LATEST_TIMESTAMP:
                        # A follower resetting its fetch position needs the log end, a consumer the high watermark.
                        offset = plog.log_end_offset if req.body.replica_id >= 0 else plog.high_watermark
                    elif p.timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
                        offset = plog.log_start_offset  # without tiered storage the local log is the whole log
                    elif p.timestamp in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
                        epoch = -1  # nothing tiered: Kafka's UnifiedLog answers offset -1, epoch -1
                    elif p.timestamp == MAX_TIMESTAMP:
                        offset, ts = plog.max_timestamp_offset()
                    else:
                        found = plog.offset_for_timestamp(p.timestamp)
                        if found is not None and found[0] < plog.high_watermark:
                            offset, ts = found
                except KafkaError as exc:
                    code = exc.code
                parts.append(part_cls(partition_index=p.partition_index, error_code=code, old_style_offsets=[],
                                      timestamp=ts, offset=offset, leader_epoch=epoch))
            topics.append(topic_cls(name=t.name, partitions=parts))
        return req.response(throttle_time_ms=0, topics=topics)

    def _list_offsets_v0(self, req: Request, topic_cls: Any, part_cls: Any) -> Any:
        """Kafka 3.9's ``handleListOffsetRequestV0``: up to ``max_num_offsets`` segment start offsets
        (``UnifiedLog.legacyFetchOffsetsBefore``), capped at the high watermark for a consumer
        (``Partition.legacyFetchOffsetsForTimestamp``); the debugging replica id may ask a follower."""
        replica_id = req.body.replica_id
        topics = []
        for t in req.body.topics:
            parts = []
            describable = self.authz.topic(req, AclOperation.DESCRIBE, t.name)
            for p in t.partitions:
                code, offsets = ErrorCode.NONE, []
                try:
                    if not describable:
                        raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    if p.timestamp < EARLIEST_TIMESTAMP:
                        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION)
                    hosted = self.replicas.hosted(t.name, p.partition_index) if replica_id == DEBUGGING_REPLICA_ID else None
                    if hosted is None:
                        hosted = self._leader(t.name, p.partition_index)
                    plog = hosted.plog
                    offsets = plog.legacy_offsets_before(p.timestamp, p.max_num_offsets, _now_ms())
                    if replica_id == CONSUMER_REPLICA_ID and any(o > plog.high_watermark for o in offsets):
                        offsets = [plog.high_watermark, *(o for o in offsets if o <= plog.high_watermark)]
                except KafkaError as exc:
                    code = exc.code
                parts.append(part_cls(partition_index=p.partition_index, error_code=code, old_style_offsets=offsets))
            topics.append(topic_cls(name=t.name, partitions=parts))
        return req.response(topics=topics)

    def offset_for_leader_epoch(self, req: Request) -> Any:
        resp_cls = req.spec.response
        topic_cls = resp_cls.OffsetForLeaderTopicResult
        part_cls = topic_cls.EpochEndOffset
        topics = []
        # A follower (replica id >= 0, v3+) needs CLUSTER_ACTION; a consumer DESCRIBE on each topic.
        follower = req.version >= 3 and req.body.replica_id >= 0
        cluster_ok = not follower or self.authz.cluster(req, AclOperation.CLUSTER_ACTION)
        for t in req.body.topics:
            parts = []
            refused = ErrorCode.NONE
            if not cluster_ok:
                refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            elif not follower and not self.authz.topic(req, AclOperation.DESCRIBE, t.topic):
                refused = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            for p in t.partitions:
                code, epoch, end = ErrorCode.NONE, -1, -1
                try:
                    if refused:
                        raise KafkaError(refused)
                    hosted = self._leader(t.topic, p.partition, p.current_leader_epoch)
                    epoch, end = hosted.plog.end_offset_for_epoch(p.leader_epoch)
                except KafkaError as exc:
                    code = exc.code
                parts.append(part_cls(error_code=code, partition=p.partition, leader_epoch=epoch, end_offset=end))
            topics.append(topic_cls(topic=t.topic, partitions=parts))
        return req.response(throttle_time_ms=0, topics=topics)

    # --- InitProducerId -------------------------------------------------------------------------

    async def init_producer_id(self, req: Request) -> Any:
        body = req.body
        if body.transactional_id is not None:
            # Sent to the transaction coordinator, which this cluster does not run (see FindCoordinator).
            return req.response(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                producer_id=-1, producer_epoch=-1)
        # An idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679).
        if not self.authz.any_topic(req, AclOperation.WRITE) and not self.authz.cluster(req, AclOperation.IDEMPOTENT_WRITE):
            return req.response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                producer_id=-1, producer_epoch=-1)
        if req.version >= 3 and body.producer_id >= 0:
            # An idempotent producer bumping its epoch after an error keeps its id.
            epoch = body.producer_epoch + 1
            if epoch <= 32767:
                return req.response(throttle_time_ms=0, error_code=0, producer_id=body.producer_id, producer_epoch=epoch)
        return req.response(throttle_time_ms=0, error_code=0, producer_id=await self._next_producer_id(), producer_epoch=0)

    async def _next_producer_id(self) -> int:
        nxt, end = self._producer_ids
        if nxt >= end:
            # Claim a whole block durably before handing out ids from it, so a restart never reuses
            # an id: in ZooKeeper in a cluster (unique across brokers), else in the local image.
            if self.cluster is not None:
                nxt, end = await self.cluster.producer_id_block()
            else:
                start = self.image.next_producer_id
                self._set_image(replace(self.image, next_producer_id=start + PRODUCER_ID_BLOCK))
                nxt, end = start, start + PRODUCER_ID_BLOCK
        self._producer_ids = (nxt + 1, end)
        return nxt

    # --- topic admin ------------------------------------------------------------------------------

    async def _create_topic(
        self, name: str, num_partitions: int, replication_factor: int,
        assignments: dict[int, list[int]], configs: dict[str, str], validate_only: bool = False,
        *, rq: quota.RequestQuota,
    ) -> TopicImage:
        if self.cluster is not None:
            return await self._create_topic_in_cluster(name, num_partitions, replication_factor, assignments, configs,
                                                       validate_only, rq)
        n = len(self.image.brokers)
        topic = plan_create_topic(
            self.image, name, num_partitions, replication_factor, assignments, configs,
            default_partitions=self.config.num_partitions,
            default_replication_factor=self.config.default_replication_factor,
            start_index=self._rng.randrange(n), shift=self._rng.randrange(n),
        )
        # Validation errors come first; a valid request then pays for its partitions (validate_only
        # requests pay nothing, as in Kafka's ZooKeeper mode).
        if validate_only:
            return topic
        if not rq.try_consume(len(topic.partitions)):
            raise KafkaError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE)
        self._set_image(self.image.with_topic(topic))
        self._lead_standalone(topic, topic.partitions)
        log.info("created topic %s with %d partitions", name, len(topic.partitions))
        return topic

    def _controller_shell(self) -> ControllerShell:
        """The controller of this cluster, if this broker is it; clients re-send elsewhere on NOT_CONTROLLER."""
        if self.cluster is None or not self.cluster.is_controller() or self.cluster.shell is None:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "This is not the correct controller for this cluster.")
        return self.cluster.shell

    async def _create_topic_in_cluster(
        self, name: str, num_partitions: int, replication_factor: int, assignments: dict[int, list[int]],
        configs: dict[str, str], validate_only: bool, rq: quota.RequestQuota,
    ) -> TopicImage:
        shell = self._controller_shell()
        if not validate_only:
            # The controller decides the partition count; the quota is charged for what was asked.
            count = len(assignments) or (self.config.num_partitions if num_partitions == -1 else num_partitions)
            if not rq.try_consume(count):
                raise KafkaError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE)
        assert self.cluster is not None
        start, shift, topic_id = self.cluster.randomness()
        event = ev.CreateTopicsRequested(
            (ev.NewTopic(name, topic_id, num_partitions, replication_factor,
                         {p: tuple(r) for p, r in assignments.items()}, dict(configs)),),
            validate_only, start, shift)
        resp = await shell.request(event)
        result = resp.topics[0]
        if result.error != ErrorCode.NONE:
            raise KafkaError(result.error, result.message)
        rf = max(result.replication_factor, 0)
        placeholder = PartitionState(tuple(range(rf)), -1, 0, ())
        return TopicImage(name, result.topic_id or topic_id, dict.fromkeys(range(result.num_partitions), placeholder),
                          dict(configs))

    async def _create_partitions_in_cluster(self, name: str, count: int, assignments: list[list[int]] | None,
                                            validate_only: bool, rq: quota.RequestQuota) -> None:
        shell = self._controller_shell()
        known = self.image.topics.get(name)
        grows = not validate_only and known is not None and count > len(known.partitions)
        if grows and known is not None and not rq.try_consume(count - len(known.partitions)):
            raise KafkaError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE)
        assert self.cluster is not None
        start, shift, _tid = self.cluster.randomness()
        event = ev.CreatePartitionsRequested(
            (ev.NewPartitions(name, count, None if assignments is None else tuple(tuple(r) for r in assignments)),),
            validate_only, start, shift)
        resp = await shell.request(event)
        result = resp.topics[0]
        if result.error != ErrorCode.NONE:
            raise KafkaError(result.error, result.message)

    async def create_topics(self, req: Request) -> Any:
        body = req.body
        result_cls = req.spec.response.CreatableTopicResult
        config_cls = result_cls.CreatableTopicConfigs
        rq = self._request_quota(req, strict=req.version >= STRICT_QUOTA_SINCE[ApiKey.CREATE_TOPICS])
        seen: dict[str, int] = {}
        for t in body.topics:
            seen[t.name] = seen.get(t.name, 0) + 1
        cluster_create = self.authz.cluster(req, AclOperation.CREATE, note=False)
        answers: list[dict[str, Any]] = []
        created: dict[str, set[int]] = {}
        for t in body.topics:
            code, message, topic = ErrorCode.NONE, None, None
            try:
                if seen[t.name] > 1:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
                if not cluster_create and not self.authz.topic(req, AclOperation.CREATE, t.name):
                    raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
                assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments}
                configs = {c.name: c.value for c in t.configs}
                topic = await self._create_topic(t.name, t.num_partitions, t.replication_factor, assignments, configs,
                                                 validate_only=body.validate_only, rq=rq)
            except KafkaError as exc:
                code, message = exc.code, exc.message
            fields: dict[str, Any] = dict(name=t.name, error_code=code, error_message=message,
                                          topic_id=topic.topic_id if topic and not body.validate_only else uuid.UUID(int=0))
            if req.version >= 5:
                if topic is not None:
                    effective = effective_topic_config(topic.configs, self.config.props)
                    fields.update(
                        num_partitions=len(topic.partitions),
                        replication_factor=topic.replication_factor,
                        configs=[config_cls(name=k, value=v, read_only=False, config_source=src, is_sensitive=False)
                                 for k, (v, src) in sorted(effective.items())],
                    )
                    if not self.authz.topic(req, AclOperation.DESCRIBE_CONFIGS, t.name, note=False):
                        # Created, but its configs are not this principal's to see (Kafka's rule).
                        fields.update(configs=[], topic_config_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                else:
                    fields.update(num_partitions=-1, replication_factor=-1, configs=[])
            if topic is not None and not body.validate_only:
                created[t.name] = set(topic.partitions)
            answers.append(fields)
        for name in await self._created_late(created, body.timeout_ms):
            fields = next(f for f in answers if f["name"] == name)
            fields.update(error_code=ErrorCode.REQUEST_TIMED_OUT, error_message=None)
            if req.version >= 5:  # a failed creation reports no partitions or configs (KafkaApis)
                fields.update(num_partitions=-1, replication_factor=-1, configs=[], topic_config_error_code=0)
        return req.response(throttle_time_ms=rq.throttle_ms, topics=[result_cls(**f) for f in answers])

    async def _created_late(self, created: dict[str, set[int]], timeout_ms: int) -> set[str]:
        """The topics whose new partitions have no leader in this broker's metadata within the
        request's timeout: REQUEST_TIMED_OUT, as ZkAdminManager answers (at once for a timeout <= 0),
        so that a client can use a topic on this broker as soon as it is told it was created."""
        if not created:
            return set()
        if timeout_ms <= 0:
            return set(created)
        return await self._await_leaders(created, timeout_ms / 1000)

    async def _delete_topic(self, name: str, rq: quota.RequestQuota) -> TopicImage:
        if self.cluster is not None:
            shell = self._controller_shell()
            known = self.image.topics.get(name)
            if known is not None and not rq.try_consume(len(known.partitions)):
                raise KafkaError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE)
            resp = await shell.request(ev.DeleteTopicsRequested((name,)))
            result = resp.topics[0]
            if result.error != ErrorCode.NONE:
                raise KafkaError(result.error, result.message)
            return known or TopicImage(name, result.topic_id or uuid.UUID(int=0), {})
        topic = self.image.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        if not self.config.delete_topic_enable:
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        if not rq.try_consume(len(topic.partitions)):
            raise KafkaError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE)
        self._set_image(self.image.without_topic(name))
        for p in topic.partitions:
            self.replicas.stop_replica(name, p, delete=True)
        log.info("deleted topic %s", name)
        return topic

    async def delete_topics(self, req: Request) -> Any:
        body = req.body
        result_cls = req.spec.response.DeletableTopicResult
        results = []
        rq = self._request_quota(req, strict=req.version >= STRICT_QUOTA_SINCE[ApiKey.DELETE_TOPICS])
        if req.version >= 6:
            targets = [(t.name, t.topic_id) for t in body.topics]
        else:
            targets = [(n, uuid.UUID(int=0)) for n in body.topic_names]
        for name, topic_id in targets:
            code, message = ErrorCode.NONE, None
            try:
                if name is None:
                    found = self.image.topic_by_id(topic_id)
                    if found is None:
                        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
                    name = found.name
                if not self.authz.topic(req, AclOperation.DELETE, name):
                    raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
                topic = await self._delete_topic(name, rq)
                topic_id = topic.topic_id
            except KafkaError as exc:
                code, message = exc.code, exc.message
            results.append(result_cls(name=name, topic_id=topic_id, error_code=code, error_message=message))
        return req.response(throttle_time_ms=rq.throttle_ms, responses=results)

    async def create_partitions(self, req: Request) -> Any:
        body = req.body
        result_cls = req.spec.response.CreatePartitionsTopicResult
        results = []
        rq = self._request_quota(req, strict=req.version >= STRICT_QUOTA_SINCE[ApiKey.CREATE_PARTITIONS])
        created: dict[str, set[int]] = {}
        for t in body.topics:
            code, message = ErrorCode.NONE, None
            try:
                if not self.authz.topic(req, AclOperation.ALTER, t.name):
                    raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
                assignments = [list(a.broker_ids) for a in t.assignments] if t.assignments is not None else None
                if self.cluster is not None:
                    await self._create_partitions_in_cluster(t.name, t.count, assignments, body.validate_only, rq)
                    results.append(result_cls(name=t.name, error_code=0, error_message=None))
                    if not body.validate_only:
                        created[t.name] = set(range(t.count))
                    continue
                n = len(self.image.brokers)
                topic = plan_create_partitions(self.image, t.name, t.count, assignments,
                                               start_index=self._rng.randrange(n), shift=self._rng.randrange(n))
                if not body.validate_only:
                    old = set(self.image.topics[t.name].partitions)
                    if not rq.try_consume(len(topic.partitions) - len(old)):
                        raise KafkaError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE)
                    self._set_image(self.image.with_topic(topic))
                    self._lead_standalone(topic, [p for p in topic.partitions if p not in old])
            except KafkaError as exc:
                code, message = exc.code, exc.message
            results.append(result_cls(name=t.name, error_code=code, error_message=message))
            if code == ErrorCode.NONE and not body.validate_only:
                created[t.name] = set(range(t.count))
        late = await self._created_late(created, body.timeout_ms)
        for r in results:
            if r.name in late:
                r.error_code, r.error_message = ErrorCode.REQUEST_TIMED_OUT, None
        return req.response(throttle_time_ms=rq.throttle_ms, results=results)

    def delete_records(self, req: Request) -> Any:
        topic_cls = req.spec.response.DeleteRecordsTopicResult
        part_cls = topic_cls.DeleteRecordsPartitionResult
        topics = []
        for t in req.body.topics:
            parts = []
            deletable = self.authz.topic(req, AclOperation.DELETE, t.name)
            for p in t.partitions:
                code, low = ErrorCode.NONE, -1
                try:
                    if not deletable:
                        raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    plog = self._leader(t.name, p.partition_index).plog
                    if not plog.config.delete:  # Kafka: a compact-only topic keeps every latest value
                        raise KafkaError(ErrorCode.POLICY_VIOLATION)
                    target = plog.high_watermark if p.offset == -1 else p.offset
                    if target < 0 or target > plog.high_watermark:
                        raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE)
                    plog.delete_records_before(target)
                    low = plog.log_start_offset
                except KafkaError as exc:
                    code = exc.code
                parts.append(part_cls(partition_index=p.partition_index, low_watermark=low, error_code=code))
            topics.append(topic_cls(name=t.name, partitions=parts))
        return req.response(throttle_time_ms=0, topics=topics)

    # --- configs ------------------------------------------------------------------------------------

    async def _topic_configs(self, topic: TopicImage) -> dict[str, str]:
        if self.cluster is not None:
            return await self.cluster.topic_configs(topic.name)
        return dict(topic.configs)

    async def refresh_log_configs(self) -> None:
        """After a topic config change: hosted logs take the new segment, retention and throttle settings."""
        for name in {topic for topic, _p in self.replicas.partitions}:
            topic = self.image.topics.get(name)
            if topic is not None:
                configs = await self._topic_configs(topic)
                self.logs.update_config(name, self._log_config(replace(topic, configs=configs)))
                max_bytes = int(effective_topic_config(configs, self.config.props)["max.message.bytes"][0])
                for (t, _p), hosted in self.replicas.partitions.items():
                    if t == name:
                        hosted.max_message_bytes = max_bytes
                self.replicas.set_topic_throttles(name, configs.get("leader.replication.throttled.replicas", ""),
                                                  configs.get("follower.replication.throttled.replicas", ""))

    async def refresh_broker_configs(self) -> None:
        if self.cluster is not None:
            merged = await self.cluster.entity_configs("brokers", "<default>")
            merged.update(await self.cluster.entity_configs("brokers", str(self.config.broker_id)))
            self.dynamic_configs = merged
            rates = [merged.get(k) for k in ("leader.replication.throttled.rate", "follower.replication.throttled.rate")]
            self.replicas.set_throttle_rates(*(int(r) if r is not None else None for r in rates))
            reassignment_rate = merged.get("reassignment.throttled.rate")
            self.replicas.set_reassignment_rate(int(reassignment_rate) if reassignment_rate is not None else None)

    async def _alter_broker_configs(self, name: str, ops: list[Any], validate_only: bool) -> None:
        if name not in ("", str(self.config.broker_id)):
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Unexpected broker id, expected {self.config.broker_id} or empty string, but received {name}")
        if self.cluster is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Dynamic broker configs need a cluster (zookeeper.connect)")
        entity = name or "<default>"
        configs = await self.cluster.entity_configs("brokers", entity)
        for c in ops:
            if c.config_operation == OP_SET:
                validate_broker_config(c.name, c.value)
                configs[c.name] = c.value
            elif c.config_operation == OP_DELETE:
                validate_broker_config(c.name, None)
                configs.pop(c.name, None)
            else:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Config value append is not allowed for config key: {c.name}")
        if not validate_only:
            await self.cluster.write_entity_configs("brokers", entity, configs)
            await self.refresh_broker_configs()

    def _authorize_config(self, req: Request, resource_type: int, name: str, op: AclOperation) -> None:
        """DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, or on the cluster for broker configs."""
        if resource_type == RESOURCE_TOPIC:
            if not self.authz.topic(req, op, name):
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
        elif not self.authz.cluster(req, op):
            raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Authorization failed.")

    async def describe_configs(self, req: Request) -> Any:
        result_cls = req.spec.response.DescribeConfigsResult
        entry_cls = result_cls.DescribeConfigsResourceResult
        results = []
        for res in req.body.resources:
            code, message, entries = ErrorCode.NONE, None, []
            try:
                self._authorize_config(req, res.resource_type, res.resource_name, AclOperation.DESCRIBE_CONFIGS)
                if res.resource_type == RESOURCE_TOPIC:
                    topic = self.image.topics.get(res.resource_name)
                    if topic is None:
                        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {res.resource_name} does not exist")
                    values = effective_topic_config(await self._topic_configs(topic), self.config.props)
                    types = {k: int(TOPIC_CONFIGS[k].type) for k in values}
                elif res.resource_type == RESOURCE_BROKER:
                    if res.resource_name not in ("", str(self.config.broker_id)):
                        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {self.config.broker_id} but received {res.resource_name}")
                    values = {k: (v, ConfigSource.STATIC_BROKER_CONFIG) for k, v in self.config.props.items()}
                    values.update({k: (v, ConfigSource.DYNAMIC_BROKER_CONFIG) for k, v in self.dynamic_configs.items()})
                    types = {k: int(key.type) for k, key in DYNAMIC_BROKER_CONFIGS.items()}
                else:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}")
                keys = res.configuration_keys
                for name, (value, source) in sorted(values.items()):
                    if keys is not None and name not in keys:
                        continue
                    entry: dict[str, Any] = dict(name=name, value=value, read_only=res.resource_type == RESOURCE_BROKER,
                                                 is_sensitive=False, synonyms=[])
                    if req.version == 0:
                        entry["is_default"] = source == ConfigSource.DEFAULT_CONFIG
                    else:
                        entry["config_source"] = int(source)
                    if req.version >= 3:
                        entry.update(config_type=types.get(name, 0), documentation=None)
                    entries.append(entry_cls(**entry))
            except KafkaError as exc:
                code, message = exc.code, exc.message
            results.append(result_cls(error_code=code, error_message=message, resource_type=res.resource_type,
                                      resource_name=res.resource_name, configs=entries))
        return req.response(throttle_time_ms=0, results=results)

    async def _apply_topic_configs(self, name: str, configs: dict[str, str], validate_only: bool) -> None:
        topic = self.image.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
        validate_topic_configs(configs)
        if validate_only:
            return
        if self.cluster is not None:
            await self.cluster.write_topic_configs(name, configs)
        else:
            self._set_image(self.image.with_topic(replace(topic, configs=configs)))
        await self.refresh_log_configs()

    async def alter_configs(self, req: Request) -> Any:
        resp_cls = req.spec.response.AlterConfigsResourceResponse
        out = []
        for res in req.body.resources:
            code, message = ErrorCode.NONE, None
            try:
                self._authorize_config(req, res.resource_type, res.resource_name, AclOperation.ALTER_CONFIGS)
                if res.resource_type != RESOURCE_TOPIC:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, "Only topic configs can be altered on this broker")
                # AlterConfigs replaces the whole set.
                await self._apply_topic_configs(res.resource_name, {c.name: c.value for c in res.configs},
                                                req.body.validate_only)
            except KafkaError as exc:
                code, message = exc.code, exc.message
            out.append(resp_cls(error_code=code, error_message=message, resource_type=res.resource_type,
                                resource_name=res.resource_name))
        return req.response(throttle_time_ms=0, responses=out)

    async def incremental_alter_configs(self, req: Request) -> Any:
        resp_cls = req.spec.response.AlterConfigsResourceResponse
        out = []
        for res in req.body.resources:
            code, message = ErrorCode.NONE, None
            try:
                self._authorize_config(req, res.resource_type, res.resource_name, AclOperation.ALTER_CONFIGS)
                if res.resource_type == RESOURCE_BROKER:
                    await self._alter_broker_configs(res.resource_name, list(res.configs), req.body.validate_only)
                    out.append(resp_cls(error_code=0, error_message=None, resource_type=res.resource_type,
                                        resource_name=res.resource_name))
                    continue
                if res.resource_type != RESOURCE_TOPIC:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}")
                topic = self.image.topics.get(res.resource_name)
                if topic is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {res.resource_name} does not exist")
                configs = await self._topic_configs(topic)
                for c in res.configs:
                    if c.config_operation == OP_SET:
                        configs[c.name] = c.value
                    elif c.config_operation == OP_DELETE:
                        validate_topic_config(c.name, None)
                        configs.pop(c.name, None)
                    elif c.config_operation in (OP_APPEND, OP_SUBTRACT):
                        key = TOPIC_CONFIGS.get(c.name)
                        if key is None or key.type.name != "LIST":
                            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Config value append is not allowed for config key: {c.name}")
                        items = [v for v in configs.get(c.name, "").split(",") if v]
                        for v in (c.value or "").split(","):
                            if c.config_operation == OP_APPEND and v and v not in items:
                                items.append(v)
                            elif c.config_operation == OP_SUBTRACT and v in items:
                                items.remove(v)
                        configs[c.name] = ",".join(items)
                    else:
                        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {c.config_operation}")
                await self._apply_topic_configs(res.resource_name, configs, req.body.validate_only)
            except KafkaError as exc:
                code, message = exc.code, exc.message
            out.append(resp_cls(error_code=code, error_message=message, resource_type=res.resource_type,
                                resource_name=res.resource_name))
        return req.response(throttle_time_ms=0, responses=out)

    # --- client quotas -----------------------------------------------------------------------------

    def _configure_quotas(self) -> None:
        rates = {}
        for path, values in self.quota_configs.items():
            if quota.QUOTA_KEY in values:
                rates[quota.parse_entity_path(path)] = float(values[quota.QUOTA_KEY])
        self.quotas.configure(rates)

    def describe_client_quotas(self, req: Request) -> Any:
        entry_cls = req.spec.response.EntryData
        entity_cls = entry_cls.EntityData
        value_cls = entry_cls.ValueData
        if not self.authz.cluster(req, AclOperation.DESCRIBE_CONFIGS):
            return req.response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                error_message="Authorization failed.", entries=None)
        filters = [(c.entity_type, c.match_type, c.match) for c in req.body.components]
        entries = []
        try:
            quota.check_filter(filters)
        except KafkaError as exc:
            return req.response(throttle_time_ms=0, error_code=exc.code, error_message=exc.message, entries=None)
        by_ip = any(f[0] == quota.IP for f in filters)
        try:
            for path, values in sorted(self.quota_configs.items()) if not by_ip else ():
                entity = quota.parse_entity_path(path)
                if not values or not quota.entity_matches(entity, filters, req.body.strict):
                    continue
                quota_values = {k: v for k, v in values.items() if not scram_admin.is_credential_key(k)}
                if not quota_values:
                    continue
                entries.append(entry_cls(
                    entity=[entity_cls(entity_type=t, entity_name=n) for t, n in quota.entity_components(entity)],
                    values=[value_cls(key=k, value=float(v)) for k, v in sorted(quota_values.items())],
                ))
        except ValueError as exc:
            return req.response(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST, error_message=str(exc), entries=None)
        return req.response(throttle_time_ms=0, error_code=0, error_message=None, entries=entries)

    async def refresh_quota_configs(self) -> None:
        if self.cluster is not None:
            self.quota_configs = await self.cluster.load_quota_configs()
            self._configure_quotas()

    async def alter_client_quotas(self, req: Request) -> Any:
        entry_cls = req.spec.response.EntryData
        entity_cls = entry_cls.EntityData
        if not self.authz.cluster(req, AclOperation.ALTER_CONFIGS):
            return req.response(throttle_time_ms=0, entries=[entry_cls(
                error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message="Authorization failed.",
                entity=[entity_cls(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
                for entry in req.body.entries])
        updated = dict(self.quota_configs)
        out = []
        for entry in req.body.entries:
            code, message = ErrorCode.NONE, None
            try:
                entity = quota.parse_entity([(e.entity_type, e.entity_name) for e in entry.entity])
                path = quota.entity_path(entity)
                existing = updated.get(path, {})
                # The user's SCRAM credentials share the map: carried over untouched.
                kept = {k: v for k, v in existing.items() if scram_admin.is_credential_key(k)}
                current = {k: float(v) for k, v in existing.items() if k not in kept}
                new = quota.apply_ops(current, [(o.key, o.value, o.remove) for o in entry.ops])
                if new or kept:
                    updated[path] = {**kept, **{k: repr(v) for k, v in new.items()}}
                else:
                    updated.pop(path, None)
            except ValueError as exc:
                code, message = ErrorCode.INVALID_REQUEST, str(exc)
            out.append(entry_cls(error_code=code, error_message=message, entity=[
                entity_cls(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity]))
        # Entries are independent, but a failed one changes nothing: only valid entries were folded in.
        if not req.body.validate_only and updated != self.quota_configs:
            await self.save_user_configs(updated)
        return req.response(throttle_time_ms=0, entries=out)

    async def save_user_configs(self, updated: dict[str, dict[str, str]]) -> None:
        """Write the user/client config maps that changed (quotas, SCRAM credentials) and use them."""
        if self.cluster is not None:
            for path in sorted(set(updated) | set(self.quota_configs)):
                if updated.get(path) != self.quota_configs.get(path):
                    await self.cluster.write_quota_configs(path, updated.get(path, {}))
        else:
            self.quota_store.save(updated)
        self.quota_configs = updated
        self._configure_quotas()

    # --- DescribeLogDirs --------------------------------------------------------------------------

    def describe_log_dirs(self, req: Request) -> Any:
        result_cls = req.spec.response.DescribeLogDirsResult
        topic_cls = result_cls.DescribeLogDirsTopic
        part_cls = topic_cls.DescribeLogDirsPartition
        if not self.authz.cluster(req, AclOperation.DESCRIBE):
            refused: dict[str, Any] = {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED} if req.version >= 3 else {}
            return req.response(throttle_time_ms=0, results=[], **refused)
        wanted = None
        if req.body.topics is not None:
            wanted = {(t.topic, p) for t in req.body.topics for p in t.partitions}
        by_dir: dict[Path, dict[str, list[Any]]] = {d: {} for d in self.config.log_dirs}
        for plog in self.logs.all_logs():
            if wanted is not None and (plog.topic, plog.partition) not in wanted:
                continue
            entry = part_cls(partition_index=plog.partition, partition_size=plog.size_bytes,
                             offset_lag=0, is_future_key=False)
            by_dir.setdefault(self.logs.log_dir_of(plog), {}).setdefault(plog.topic, []).append(entry)
        results = []
        for d, topics in by_dir.items():
            if d in self.logs.offline_dirs:
                # Kafka lists an offline dir with KAFKA_STORAGE_ERROR and nothing in it.
                offline: dict[str, Any] = dict(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=str(d), topics=[])
                if req.version >= 4:
                    offline.update(total_bytes=-1, usable_bytes=-1)
                results.append(result_cls(**offline))
                continue
            fields: dict[str, Any] = dict(error_code=0, log_dir=str(d), topics=[
                topic_cls(name=name, partitions=sorted(parts, key=lambda x: x.partition_index))
                for name, parts in sorted(topics.items())
            ])
            if req.version >= 4:
                usage = shutil.disk_usage(d)
                fields.update(total_bytes=usage.total, usable_bytes=usage.free)
            results.append(result_cls(**fields))
        extra: dict[str, Any] = {"error_code": 0} if req.version >= 3 else {}
        return req.response(throttle_time_ms=0, results=results, **extra)


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


def run_broker(config: BrokerConfig) -> None:
    logging.basicConfig(
        level=os.environ.get("HEADWATER_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s [broker %(process)d] %(name)s: %(message)s",
    )
    gc_policy.tune()
    broker = Broker(config)
    asyncio.run(broker.run_until_signalled())
