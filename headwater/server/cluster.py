"""A broker's life in a ZooKeeper-backed cluster.

Start-up follows Kafka's ``KafkaServer.startup``: logs are recovered first (the broker did that
already), then the ZooKeeper session, the top-level paths and the cluster id, then the replica
manager, and the ephemeral ``/brokers/ids/<id>`` registration last, so the controller only sees
a broker that is ready. Every broker is a controller candidate: it watches ``/controller`` and
runs for election whenever the node is gone.

The broker's view of the cluster (Metadata answers, leaders to fetch from) comes from the
controller's UpdateMetadata requests; its replicas from LeaderAndIsr and StopReplica. Requests
that carry an older controller epoch, or an epoch of this broker's previous life, are refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)

from headwater.controller import effects as fx
from headwater.controller import events as ev
from headwater.controller.controller import ControllerConfig, not_controller_response
from headwater.metadata import zk as znodes
from headwater.metadata.image import BrokerEndpoint, BrokerInfo, ClusterImage, PartitionState, TopicImage
from headwater.protocol import control_wire
from headwater.protocol.elections import elect_leaders_response, requested_partitions
from headwater.protocol.errors import ErrorCode
from headwater.protocol.interbroker import ControlledShutdownRequest, iter_leader_and_isr
from headwater.protocol.reassignments import encode_list_reassignments_response
from headwater.replication.partition import LeaderAndIsrState
from headwater.security.acl import AclOperation
from headwater.server.channel import ChannelError, ChannelPool
from headwater.server.clock import now_ms
from headwater.server.controller_shell import ControllerShell
from headwater.server.zk import DuplicateRegistrationError, ZooKeeper, zookeeper_security

if TYPE_CHECKING:
    from headwater.server.config import BrokerConfig
    from headwater.server.context import BrokerContext

log = logging.getLogger(__name__)
PATHS = znodes.PATHS
LEADER_DURING_DELETE = -2
LEADER_AND_ISR_YIELD_EVERY = 200
ELECTION_RETRY_S = 0.5  # after a controller election failed on a lost ZooKeeper connection


def controller_config(cfg: BrokerConfig) -> ControllerConfig:
    """The controller's settings from this broker's properties (the cluster-wide dynamic broker
    configs override the election ones once the controller reads them)."""
    props = cfg.props

    def flag(key: str, default: str) -> bool:
        return props.get(key, default).strip().lower() == "true"

    def number(key: str, default: int) -> int:
        try:
            return int(props.get(key, default))
        except ValueError:
            return default

    return ControllerConfig(
        cfg.num_partitions, cfg.default_replication_factor, cfg.delete_topic_enable,
        unclean_leader_election_enable=flag("unclean.leader.election.enable", "false"),
        auto_leader_rebalance_enable=flag("auto.leader.rebalance.enable", "true"),
        leader_imbalance_per_broker_percentage=number("leader.imbalance.per.broker.percentage", 10),
        leader_imbalance_check_interval_seconds=number("leader.imbalance.check.interval.seconds", 300),
    )


class ClusterMember:
    def __init__(self, broker: BrokerContext, connect: str, session_timeout_ms: int) -> None:
        self.broker = broker
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self.zk: ZooKeeper | None = None
        self.shell: ControllerShell | None = None
        self.cluster_id = ""
        self._topic_configs: dict[str, dict[str, str]] = {}
        # The controller's requests take effect one at a time, in the order they came (Kafka mutes a
        # connection until its request is answered). LeaderAndIsr waits on ZooKeeper for topic
        # configs and yields to clients on large requests; without this, the UpdateMetadata sent
        # after it would take effect first, and this broker would name itself leader in Metadata
        # while still answering its produce requests NOT_LEADER_OR_FOLLOWER.
        self._control = asyncio.Lock()
        # Requests this broker sends the controller as itself (controlled shutdown, topic creation on
        # behalf of clients and of the group coordinator): over the inter-broker listener, with its
        # TLS and SASL, as every broker-to-broker connection.
        self._to_controller: ChannelPool | None = None
        self._electing = False
        self._stopping = False
        self.broker_epoch = -1  # this broker's life in ZooKeeper: its registration's czxid
        # KIP-1066: this broker's log dirs and the cordoned ones, in its registration for the controller.
        self._log_dirs: tuple[str, ...] = ()
        self._cordoned: tuple[str, ...] = ()
        self._registration: znodes.BrokerRegistration | None = None
        self._registration_lock = asyncio.Lock()  # rewrites land in order, the latest last
        self._metadata_updated = asyncio.Event()  # set (and replaced) by each applied UpdateMetadata

    @property
    def broker_id(self) -> int:
        return self.broker.config.broker_id

    # --- start and stop --------------------------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        digest, secure_acls = zookeeper_security(self.broker.config.props)
        self.zk = ZooKeeper(self.connect, self.session_timeout_ms, loop, digest=digest, secure_acls=secure_acls)
        await self.zk.start()
        self.zk.on_session_lost(self._session_lost)
        await self.zk.create_top_level_paths()
        self.cluster_id = await self._cluster_id()
        self.broker.publish_image(ClusterImage(self.cluster_id, -1, {}, {}))
        await self.broker.refresh_broker_configs()
        await self.broker.user_configs.refresh()
        await self.broker.authz.attach_zookeeper(self.zk)
        await self._register()
        self.watch_config_changes()
        self.zk.watch_data(PATHS.CONTROLLER, self._on_controller_change)

    async def _cluster_id(self) -> str:
        assert self.zk is not None
        found = await self.zk.get(PATHS.CLUSTER_ID)
        if found is None:
            with contextlib.suppress(Exception):
                await self.zk.create(PATHS.CLUSTER_ID, znodes.encode_cluster_id(znodes.kafka_uuid(uuid.uuid4())),
                                     make_parents=True)
            found = await self.zk.get(PATHS.CLUSTER_ID)
        assert found is not None
        return znodes.decode_cluster_id(found[0])

    async def _register(self) -> None:
        assert self.zk is not None
        cfg = self.broker.config
        endpoints = tuple(znodes.Endpoint(listener.name, listener.host, listener.port, listener.security_protocol)
                          for listener in cfg.advertised)
        reg = znodes.BrokerRegistration(cfg.broker_id, endpoints, now_ms(), cfg.rack,
                                        log_dirs=self._log_dirs, cordoned_log_dirs=self._cordoned)
        self._registration = reg
        # A broker restarted within the session timeout finds its previous life's ephemeral node
        # still there. Kafka gives up at once; waiting for that session to expire (it will, the
        # process is gone) lets a quick restart just work, and a real duplicate id still fails.
        deadline = time.monotonic() + 2 * self.session_timeout_ms / 1000 + 5
        while True:
            try:
                self.broker_epoch = await self.zk.register_broker(cfg.broker_id, znodes.encode_broker(reg))
                break
            except DuplicateRegistrationError:
                if time.monotonic() > deadline:
                    raise
                log.info("broker id %d is still registered by a previous session; waiting for it to expire", cfg.broker_id)
                await asyncio.sleep(0.5)
        log.info("broker %d registered in ZooKeeper (broker epoch %d)", cfg.broker_id, self.broker_epoch)

    async def publish_cordoned_log_dirs(self, log_dirs: tuple[str, ...], cordoned: tuple[str, ...]) -> None:
        """KIP-1066 in ZooKeeper mode: the cordoned dirs go into this broker's registration (rewritten in
        place: the broker epoch, its czxid, stays), which the controller watches. KRaft brokers send them
        in BrokerRegistration and BrokerHeartbeat; a ZooKeeper-mode registration has no such field."""
        if (log_dirs, cordoned) == (self._log_dirs, self._cordoned):
            return
        self._log_dirs, self._cordoned = log_dirs, cordoned
        log.info("broker %d: cordoned log dirs %s", self.broker_id, list(cordoned) or "none")
        async with self._registration_lock:
            reg = self._registration
            if reg is None or self.zk is None or self.broker_epoch < 0:
                return  # not registered yet: _register writes them
            if (reg.log_dirs, reg.cordoned_log_dirs) == (self._log_dirs, self._cordoned):
                return  # a later call wrote them already
            self._registration = replace(reg, log_dirs=self._log_dirs, cordoned_log_dirs=self._cordoned)
            try:
                await self.zk.set(PATHS.broker(self.broker_id), znodes.encode_broker(self._registration))
            except Exception as exc:  # a lost session registers again, with the new fields
                log.warning("broker %d could not update its registration: %s", self.broker_id, exc)

    def _session_lost(self) -> None:
        """The session expired: our ephemeral nodes are gone. Re-register in a new session, as Kafka does."""
        if self._stopping:
            return
        log.warning("ZooKeeper session of broker %d expired; registering again", self.broker_id)
        asyncio.get_running_loop().create_task(self._after_session_loss())

    async def _after_session_loss(self) -> None:
        if self.shell is not None:
            await self.shell.stop()
            self.shell = None
        for _ in range(100):
            try:
                await self._register()
                self.zk.watch_data(PATHS.CONTROLLER, self._on_controller_change)  # type: ignore[union-attr]
                return
            except Exception as exc:
                log.info("re-registration failed: %s", exc)
                await asyncio.sleep(1.0)

    async def stop(self) -> None:
        """Controlled shutdown: ask the controller to move leadership away, then leave."""
        self._stopping = True
        if self.zk is None:
            return
        await self._controlled_shutdown()
        if self._to_controller is not None:
            self._to_controller.close()
        if self.shell is not None:
            await self.shell.stop()
            self.shell = None
        await self.zk.stop()

    async def _controlled_shutdown(self) -> None:
        """Kafka's ZK-mode controlled shutdown (KafkaServer.controlledShutdown): up to
        ``controlled.shutdown.max.retries`` attempts, ``controlled.shutdown.retry.backoff.ms`` apart
        (no wait after the last), each asking the controller this broker knows of then. An attempt
        when no controller, or no address for it, is known fails like any other and is retried."""
        config = self.broker.config
        if not config.controlled_shutdown_enable:
            return
        attempts = config.controlled_shutdown_max_retries
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(config.controlled_shutdown_retry_backoff_ms / 1000)
            controller = self.broker.image.controller_id
            if controller < 0:
                log.info("controlled shutdown attempt %d failed: no controller known", attempt + 1)
                continue
            try:
                if controller == self.broker_id and self.shell is not None:
                    resp = await self.shell.request(ev.ControlledShutdownRequested(self.broker_id, self.broker_epoch))
                    remaining = resp.remaining if resp is not None else ()
                    error = resp.error if resp is not None else ErrorCode.NOT_CONTROLLER
                else:
                    if self.broker.broker_address(controller) is None:
                        log.info("controlled shutdown attempt %d failed: controller %d has no known address", attempt + 1,
                                 controller)
                        continue
                    req = ControlledShutdownRequest(version=3, broker_id=self.broker_id,
                                                    broker_epoch=self.broker_epoch)
                    raw = await self.send_to_controller(req, 3, timeout_s=30)
                    error, remaining = ErrorCode(raw.error_code), raw.remaining_partitions
                if error == ErrorCode.NONE and not remaining:
                    log.info("controlled shutdown of broker %d: leadership moved", self.broker_id)
                    return
                log.info("controlled shutdown attempt %d: %s, %d partitions remain", attempt + 1, error.name, len(remaining))
            except (ChannelError, Exception) as exc:
                log.info("controlled shutdown attempt %d failed: %s", attempt + 1, exc)
        log.warning("controlled shutdown of broker %d failed after %d attempts: stopping anyway", self.broker_id,
                    attempts)

    # --- election ------------------------------------------------------------------------------------

    def _on_controller_change(self, data: bytes | None, _stat: Any) -> None:
        if data is None and not self._stopping:
            asyncio.get_running_loop().create_task(self._elect())

    async def _elect(self) -> None:
        if self._electing or self.shell is not None or self.zk is None:
            return
        self._electing = True
        try:
            won = await self._elect_once()
            if won is None:
                return
            cfg = self.broker.config
            shell = ControllerShell(
                self.broker_id, self.zk,
                controller_config(cfg),
                on_resigned=self._resigned, listener_name=cfg.inter_broker_listener,
                channel_security=self.broker.authn.channel_security,
                audit=self.broker.authz.audit.write,
            )
            self.shell = shell
            await shell.start(*won)
        finally:
            self._electing = False

    async def _elect_once(self) -> tuple[int, int] | None:
        """Try to win /controller, until it is won or held by another session.

        A controller that resigns because a ZooKeeper request failed on a lost connection (not an
        expired session) still holds /controller through its live session: no other broker's watch
        fires, and its own attempt to win finds the node taken. Kafka deletes /controller when it
        resigns so that an election follows; here the resigned broker deletes it when it finds it
        held by its own session with no controller running, and stands again. Requests that fail
        while kazoo reconnects are retried; after an expired session, re-registration comes back here.
        """
        assert self.zk is not None
        while not self._stopping and self.shell is None:
            try:
                won = await self.zk.elect_controller(self.broker_id, now_ms())
                if won is not None:
                    return won
                holder = await self.zk.get(PATHS.CONTROLLER)
                if holder is None or holder[1].ephemeralOwner != self.zk.session_id:
                    return None
                log.warning("broker %d: /controller is held by this broker's session with no controller "
                            "running (it resigned on a lost connection); releasing it", self.broker_id)
                with contextlib.suppress(NoNodeError, BadVersionError):
                    await self.zk.delete(PATHS.CONTROLLER, holder[1].version)
            except SessionExpiredError:
                return None  # re-registration watches /controller again, which brings us back here
            except ConnectionLoss:
                log.info("broker %d: controller election interrupted by a lost connection; trying again",
                         self.broker_id)
                await asyncio.sleep(ELECTION_RETRY_S)
        return None

    def _resigned(self) -> None:
        log.info("broker %d is no longer the controller", self.broker_id)
        shell, self.shell = self.shell, None
        if shell is not None:
            asyncio.get_running_loop().create_task(shell.stop())
        asyncio.get_running_loop().create_task(self._elect())

    # --- requests from the controller --------------------------------------------------------------------

    def _refused(self, req: Any, op: AclOperation = AclOperation.CLUSTER_ACTION) -> ErrorCode:
        """CLUSTER_AUTHORIZATION_FAILED unless the sender may perform ``op`` on the cluster."""
        return ErrorCode.NONE if self.broker.authz.cluster(req, op) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED

    def _check_epochs(self, controller_epoch: int, broker_epoch: int) -> ErrorCode:
        # Only an older epoch is stale (Kafka's rule): the controller may see this broker's new
        # registration, and send it requests, before the broker has read its own epoch back.
        if 0 <= broker_epoch < self.broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        return self.broker.replicas.check_controller_epoch(controller_epoch)

    async def topic_configs(self, topic: str, *, fresh: bool = False) -> dict[str, str]:
        """A copy: a caller that changes it (and is then refused) must not change the cache. ``fresh``
        reads the znode even when cached: a change made through another broker may not have been
        notified here yet."""
        cached = self._topic_configs.get(topic)
        if cached is not None and not fresh:
            return dict(cached)
        configs: dict[str, str] = {}
        if self.zk is not None:
            found = await self.zk.get(PATHS.config("topics", topic))
            if found is not None and found[0]:
                configs = znodes.decode_config("topics", topic, found[0])
        self._topic_configs[topic] = configs
        return dict(configs)

    async def leader_and_isr(self, req: Any) -> Any:
        async with self._control:
            return await self._leader_and_isr(req)

    async def update_metadata(self, req: Any) -> Any:
        async with self._control:
            return self._update_metadata(req)

    async def stop_replica(self, req: Any) -> Any:
        async with self._control:
            return self._stop_replica(req)

    async def _leader_and_isr(self, req: Any) -> Any:
        body = req.body
        error = self._refused(req) or self._check_epochs(body.controller_epoch, body.broker_epoch if req.version >= 2 else -1)
        topic_errors: dict[str, list[tuple[int, ErrorCode]]] = {}
        topic_ids: dict[str, uuid.UUID] = {}
        if error == ErrorCode.NONE:
            per_topic: dict[str, tuple[Any, int, int]] = {}  # topic -> (log config, min ISR, max message bytes)
            for done, (topic, topic_id, s) in enumerate(iter_leader_and_isr(body)):
                if done % LEADER_AND_ISR_YIELD_EVERY == LEADER_AND_ISR_YIELD_EVERY - 1:
                    # A request may carry 10,000 partitions (controller failover): let the loop serve
                    # clients and the controller in between.
                    await asyncio.sleep(0)
                resolved = per_topic.get(topic)
                if resolved is None:
                    configs = await self.topic_configs(topic)
                    self.broker.replicas.set_topic_throttles(
                        topic, configs.get("leader.replication.throttled.replicas", ""),
                        configs.get("follower.replication.throttled.replicas", ""))
                    effective = self.broker.effective_topic_config(configs)
                    image_topic = TopicImage(topic, topic_id or uuid.UUID(int=0), {}, configs)
                    resolved = per_topic[topic] = (self.broker.log_config(image_topic),
                                                   int(effective["min.insync.replicas"][0]),
                                                   int(effective["max.message.bytes"][0]))
                log_config, min_isr, max_message_bytes = resolved
                code = self.broker.replicas.become(
                    topic, s.partition_index,
                    LeaderAndIsrState(s.leader, s.leader_epoch, tuple(s.isr), s.partition_epoch, tuple(s.replicas),
                                      tuple(getattr(s, "adding_replicas", ()) or ()),
                                      tuple(getattr(s, "removing_replicas", ()) or ()), bool(getattr(s, "is_new", False))),
                    topic_id=topic_id, config=log_config, min_insync_replicas=min_isr,
                    max_message_bytes=max_message_bytes,
                )
                topic_errors.setdefault(topic, []).append((s.partition_index, code))
                if topic_id is not None:
                    topic_ids[topic] = topic_id
        resp_cls = req.spec.response
        if control_wire.reads(req.api_key, req.version):
            # Written directly: 10,000 partitions' answer objects cost more than the bytes.
            return [control_wire.leader_and_isr_response(
                req.version, req.correlation_id, error,
                [(topic_ids.get(t), errs) for t, errs in topic_errors.items()])]
        if req.version >= 5:
            T = resp_cls.LeaderAndIsrTopicError
            P = T.LeaderAndIsrPartitionError
            return req.response(error_code=error, topics=[
                T(topic_id=topic_ids.get(t, uuid.UUID(int=0)), partition_errors=[P(partition_index=p, error_code=c) for p, c in errs])
                for t, errs in topic_errors.items()])
        P = resp_cls.LeaderAndIsrPartitionError
        return req.response(error_code=error, partition_errors=[
            P(topic_name=t, partition_index=p, error_code=c) for t, errs in topic_errors.items() for p, c in errs])

    def _update_metadata(self, req: Any) -> Any:
        body = req.body
        error = self._refused(req) or self._check_epochs(body.controller_epoch, body.broker_epoch if req.version >= 5 else -1)
        if error != ErrorCode.NONE:
            return req.response(error_code=error)
        brokers = {}
        inter_broker = self.broker.config.inter_broker_listener
        for b in body.live_brokers:
            endpoints: tuple[BrokerEndpoint, ...] = ()
            if req.version >= 1 and b.endpoints:
                # v1-2 endpoints carry no listener name: the security protocol's name is the listener's.
                endpoints = tuple(BrokerEndpoint(getattr(e, "listener", None) or znodes.SECURITY_PROTOCOLS[e.security_protocol],
                                                 e.host, e.port, znodes.SECURITY_PROTOCOLS[e.security_protocol])
                                  for e in b.endpoints)
                ep = next((e for e in endpoints if e.listener == inter_broker), endpoints[0])
                host, port = ep.host, ep.port
            else:
                host, port = b.v0_host, b.v0_port
            brokers[b.id] = BrokerInfo(b.id, host, port, getattr(b, "rack", None), endpoints)
        image = self.broker.image
        topics: dict[str, TopicImage] = dict(image.topics)
        groups = ([(t.topic_name, getattr(t, "topic_id", None), t.partition_states) for t in body.topic_states]
                  if req.version >= 5 else [(p.topic_name, None, (p,)) for p in body.ungrouped_partition_states])
        # Each touched topic's partition map is copied once and rebuilt once: a full UpdateMetadata of
        # 10,000 partitions copying the map per partition cost seconds of the event loop.
        partitions: dict[str, dict[int, PartitionState]] = {}
        ids: dict[str, uuid.UUID] = {}
        outside: list[tuple[str, int]] = []  # partitions this broker is not a replica of
        me = self.broker_id
        for topic, topic_id, states in groups:
            parts = partitions.get(topic)
            if parts is None:
                current = topics.get(topic)
                parts = partitions[topic] = dict(current.partitions) if current is not None else {}
            for p in states:
                if p.leader == LEADER_DURING_DELETE:
                    parts.pop(p.partition_index, None)
                    continue
                if topic_id:
                    ids[topic] = topic_id
                parts[p.partition_index] = PartitionState(
                    tuple(p.replicas), p.leader, p.leader_epoch, tuple(p.isr),
                    offline_replicas=tuple(getattr(p, "offline_replicas", None) or ()))
                if me not in p.replicas:
                    outside.append((topic, p.partition_index))
        for topic, parts in partitions.items():
            current = topics.get(topic)
            if not parts:
                if current is not None:
                    topics.pop(topic, None)
                    self._topic_configs.pop(topic, None)
                continue
            if current is None:
                current = TopicImage(topic, uuid.UUID(int=0), {}, {})
            topics[topic] = replace(current, topic_id=ids.get(topic) or current.topic_id, partitions=parts)
        self.broker.publish_image(ClusterImage(self.cluster_id, body.controller_id, brokers, topics))
        self._metadata_updated.set()  # wakes ElectLeaders waiting for its leaders; the next waiters get a new one
        self._metadata_updated = asyncio.Event()
        self.broker.replicas.set_live_brokers(brokers)
        self._delete_strays(outside, body.controller_id)
        return req.response(error_code=0)

    def _delete_strays(self, partitions: list[tuple[str, int]], controller_id: int) -> None:
        """Delete the replicas this broker holds of partitions whose replicas (RS) no longer name it.

        The controller tells a removed replica with StopReplica, sent only after the assignment is
        written to ZooKeeper; a controller that dies between the two (or a broker that is down when
        the StopReplica is sent) leaves a replica nobody will stop: a stray, as Kafka's KRaft brokers
        call it. The UpdateMetadata that every broker gets from each new controller, and on
        registering, carries each partition's full RS (adding and removing replicas included), and a
        controller's requests reach a broker in order, so a broker missing from RS there is not a
        replica (a later addition comes with its own LeaderAndIsr). It is outside the ISR (the ISR is
        within RS), so no acknowledged record depends on it.
        """
        for topic, partition in partitions:
            if self.broker.replicas.hosted(topic, partition) is None and self.broker.logs.get(topic, partition) is None:
                continue
            log.info("broker %d is not a replica of %s-%d any more (UpdateMetadata from controller %d): deleting it",
                     self.broker_id, topic, partition, controller_id)
            self.broker.replicas.stop_replica(topic, partition, True)

    def _stop_replica(self, req: Any) -> Any:
        body = req.body
        error = self._refused(req) or self._check_epochs(body.controller_epoch, body.broker_epoch if req.version >= 1 else -1)
        resp_cls = req.spec.response
        P = resp_cls.StopReplicaPartitionError
        errors = []
        if error == ErrorCode.NONE:
            if req.version >= 3:
                items = [(t.topic_name, p.partition_index, p.delete_partition) for t in body.topic_states for p in t.partition_states]
            elif req.version >= 1:
                items = [(t.name, p, body.delete_partitions) for t in body.topics for p in t.partition_indexes]
            else:
                items = [(p.topic_name, p.partition_index, body.delete_partitions) for p in body.ungrouped_partitions]
            for topic, partition, delete in items:
                code = self.broker.replicas.stop_replica(topic, partition, delete)
                errors.append(P(topic_name=topic, partition_index=partition, error_code=code))
        return req.response(error_code=error, partition_errors=errors)

    # --- requests only the controller answers ----------------------------------------------------------

    async def alter_partition(self, req: Any) -> Any:
        body = req.body
        if self._refused(req):
            return req.response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, topics=[])
        items = tuple(
            ev.AlterPartitionItem(t.topic_name, p.partition_index, p.leader_epoch, tuple(p.new_isr), p.partition_epoch,
                                  getattr(p, "leader_recovery_state", 0))
            for t in body.topics for p in t.partitions
        )
        event = ev.AlterPartitionReceived(body.broker_id, body.broker_epoch, items)
        result = await self._controller_request(event)
        resp_cls = req.spec.response
        T = resp_cls.TopicData
        P = T.PartitionData
        by_topic: dict[str, list[Any]] = {}
        for r in result.partitions:
            by_topic.setdefault(r.topic, []).append(P(partition_index=r.partition, error_code=r.error, leader_id=r.leader,
                                                      leader_epoch=r.leader_epoch, isr=list(r.isr),
                                                      leader_recovery_state=0, partition_epoch=r.partition_epoch))
        return req.response(throttle_time_ms=0, error_code=result.error,
                            topics=[T(topic_name=t, partitions=ps) for t, ps in by_topic.items()])

    async def controlled_shutdown(self, req: Any) -> Any:
        body = req.body
        if self._refused(req):
            return req.response(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, remaining_partitions=[])
        result = await self._controller_request(ev.ControlledShutdownRequested(body.broker_id, body.broker_epoch))
        P = req.spec.response.RemainingPartition
        return req.response(error_code=result.error, remaining_partitions=[
            P(topic_name=tp.topic, partition_index=tp.partition) for tp in result.remaining])

    async def _controller_request(self, event: ev.Event) -> Any:
        if self.shell is None:
            return not_controller_response(event)
        result = await self.shell.request(event)
        # A controller that resigns (fenced, or its session expired) with the event still queued
        # answers None for events its shell does not count as requests (the reassignment ones among
        # them); the client must still get NOT_CONTROLLER, so that it asks the new controller.
        return result if result is not None else not_controller_response(event)

    async def send_to_controller(self, request: Any, version: int, timeout_s: float = 30.0) -> Any:
        """Send a request to the active controller as this broker; ChannelError when none is known
        or it cannot be reached (the caller retries: a new controller is announced by UpdateMetadata)."""
        controller = self.broker.image.controller_id
        address = self.broker.broker_address(controller) if controller >= 0 else None
        if address is None:
            raise ChannelError("no controller known yet")
        if self._to_controller is None:
            self._to_controller = ChannelPool(self.broker.authn.channel_security)
        ch = self._to_controller.get("controller", address[0], address[1], f"broker-{self.broker_id}-to-controller")
        return await ch.request(request, version, timeout_s)

    def is_controller(self) -> bool:
        return self.shell is not None and self.shell.active

    def randomness(self) -> tuple[int, int, uuid.UUID]:
        assert self.shell is not None
        return self.shell.new_topic_randomness(len(self.broker.image.brokers))

    async def producer_id_block(self) -> tuple[int, int]:
        """Claim the next block of producer ids in ``/latest_producer_id_block``: [start, end)."""
        assert self.zk is not None
        while True:
            found = await self.zk.get(PATHS.LATEST_PRODUCER_ID_BLOCK)
            previous = znodes.decode_producer_id_block(found[0]) if found is not None and found[0] else None
            block = znodes.next_producer_id_block(previous, self.broker_id)
            data = znodes.encode_producer_id_block(block)
            try:
                if found is None:
                    await self.zk.create(PATHS.LATEST_PRODUCER_ID_BLOCK, data)
                else:
                    await self.zk.set(PATHS.LATEST_PRODUCER_ID_BLOCK, data, found[1].version)
            except (BadVersionError, NodeExistsError):
                continue  # another broker took this block first
            return block.block_start, block.block_end + 1

    async def write_topic_configs(self, topic: str, configs: dict[str, str]) -> None:
        await self.write_entity_configs("topics", topic, configs)
        self._topic_configs[topic] = dict(configs)
        if self.shell is not None and self.shell.active:
            self.shell.submit(ev.TopicConfigChanged(topic, dict(configs)))

    def watch_config_changes(self) -> None:
        assert self.zk is not None
        self.zk.watch_children(PATHS.CONFIG_CHANGES, self._on_config_changes)

    def _on_config_changes(self, _children: list[str]) -> None:
        # Re-read lazily: the next request that needs a topic's configs fetches them again.
        self._topic_configs.clear()
        # Re-reading the broker configs also re-applies every hosted topic's log config (a dynamic
        # log.* default may have changed): one pass over the topics, not two.
        asyncio.get_running_loop().create_task(self.broker.refresh_broker_configs())
        asyncio.get_running_loop().create_task(self.broker.user_configs.refresh())

    # --- reassignment (KIP-455) ---------------------------------------------------------------------

    async def alter_partition_reassignments(self, req: Any) -> Any:
        body = req.body
        allow_rf_change = body.allow_replication_factor_change if req.version >= 1 else True
        partitions = tuple(
            (t.name, p.partition_index, None if p.replicas is None else tuple(p.replicas))
            for t in body.topics for p in t.partitions
        )
        if self._refused(req, AclOperation.ALTER):
            # Refused before the controller sees it: no reassignment starts or is cancelled.
            denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            result = fx.AlterPartitionReassignmentsResponse(
                denied, tuple(fx.ReassignmentResult(t, p, denied, "Authorization failed.") for t, p, _r in partitions),
                "Authorization failed.")
        else:
            result = await self._controller_request(ev.AlterPartitionReassignmentsRequested(partitions, allow_rf_change))
        T = req.spec.response.ReassignableTopicResponse
        P = T.ReassignablePartitionResponse
        by_topic: dict[str, list[Any]] = {}
        for r in result.partitions:
            by_topic.setdefault(r.topic, []).append(P(partition_index=r.partition, error_code=r.error, error_message=r.message))
        fields: dict[str, Any] = dict(throttle_time_ms=0, error_code=result.error, error_message=result.message,
                                      responses=[T(name=t, partitions=ps) for t, ps in by_topic.items()])
        if req.version >= 1:
            fields["allow_replication_factor_change"] = allow_rf_change
        return req.response(**fields)

    async def list_partition_reassignments(self, req: Any) -> Any:
        body = req.body
        wanted = None if body.topics is None else tuple((t.name, p) for t in body.topics for p in t.partition_indexes)
        if self._refused(req, AclOperation.DESCRIBE):
            return req.response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                error_message="Authorization failed.", topics=[])
        result = await self._controller_request(ev.ListPartitionReassignmentsRequested(wanted))
        # Written directly, not through the codec's objects: at 10,000 moves in flight those cost
        # more than the controller's answer (headwater/protocol/reassignments.py).
        return [encode_list_reassignments_response(req.version, req.correlation_id, result.partitions,
                                                   error_code=result.error)]

    # --- leader elections (KIP-183, KIP-460) ------------------------------------------------------------

    async def elect_leaders(self, req: Any) -> Any:
        """ElectLeaders as Kafka's KafkaApis and ReplicaManager.electLeaders serve it in ZooKeeper mode:
        ALTER on the cluster, the election by the controller (NOT_CONTROLLER per partition on any other
        broker), then a wait until this broker's metadata shows each elected leader (REQUEST_TIMED_OUT
        for those it does not show by the request's timeout)."""
        body = req.body
        kind = ev.ElectionType(body.election_type) if req.version >= 1 else ev.ElectionType.PREFERRED
        wanted = requested_partitions(req)
        error = ErrorCode.NONE
        results: list[tuple[str, int, int, str | None]]
        if self._refused(req, AclOperation.ALTER):
            error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            results = [(t, p, error, None) for t, p in wanted or ()]
        else:
            if wanted is None and not self.is_controller():
                # Kafka names every partition of its metadata cache, each answered NOT_CONTROLLER.
                wanted = tuple((t.name, p) for t in self.broker.image.topics.values() for p in sorted(t.partitions))
            resp = await self._controller_request(ev.ElectLeadersRequested(wanted, kind))
            assert isinstance(resp, fx.ElectLeadersResponse)
            elected = {(r.topic, r.partition): r.leader for r in resp.partitions if r.error == ErrorCode.NONE}
            late = await self._await_leaders(elected, body.timeout_ms)
            results = [(r.topic, r.partition, ErrorCode.REQUEST_TIMED_OUT, "Timed out waiting for leader election")
                       if (r.topic, r.partition) in late else (r.topic, r.partition, r.error, r.message)
                       for r in resp.partitions
                       if body.topic_partitions is not None or r.error != ErrorCode.ELECTION_NOT_NEEDED]
        return elect_leaders_response(req, error, results)

    async def _await_leaders(self, expected: dict[tuple[str, int], int], timeout_ms: int) -> set[tuple[str, int]]:
        """The partitions whose elected leader this broker's metadata does not show within ``timeout_ms``;
        looked at again each time an UpdateMetadata changes it (Kafka's DelayedElectLeader)."""
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        missing = set(expected)
        while True:
            updated = self._metadata_updated  # before the look: an update after it wakes us
            topics = self.broker.image.topics
            for t, p in list(missing):
                topic = topics.get(t)
                state = topic.partitions.get(p) if topic is not None else None
                if state is not None and state.leader == expected[(t, p)]:
                    missing.discard((t, p))
            left = deadline - time.monotonic()
            if not missing or left <= 0:
                return missing
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(updated.wait(), left)

    async def report_log_dir_failure(self) -> None:
        """Tell the controller a log dir failed (Kafka's /log_dir_event_notification); it then asks this
        broker, with a LeaderAndIsr, which replicas are gone, and moves leadership away from them."""
        if self.zk is None:
            return
        await self.zk.create(PATHS.LOG_DIR_EVENT_PREFIX, znodes.encode_log_dir_event(self.broker.config.broker_id),
                             sequence=True)

    async def entity_configs(self, entity_type: str, name: str) -> dict[str, str]:
        assert self.zk is not None
        found = await self.zk.get(PATHS.config(entity_type, name))
        if found is None or not found[0]:
            return {}
        return znodes.decode_config(entity_type, name, found[0])

    async def write_entity_configs(self, entity_type: str, name: str, configs: dict[str, str]) -> None:
        """An entity's config znode, then a change notification every broker watches (Kafka's way)."""
        assert self.zk is not None
        path = PATHS.config(entity_type, name)
        data = znodes.encode_config(configs)
        if await self.zk.get(path) is None:
            try:
                await self.zk.create(path, data, make_parents=True)
            except NodeExistsError:
                await self.zk.set(path, data)
        else:
            await self.zk.set(path, data)
        await self.zk.create(PATHS.CONFIG_CHANGE_PREFIX, znodes.encode_config_change(f"{entity_type}/{name}"), sequence=True)

    # --- client quotas in /config/users and /config/clients ------------------------------------------

    async def load_quota_configs(self) -> dict[str, dict[str, str]]:
        """Every user, user+client and client quota entity: ``{"users/<u>/clients/<c>": {...}}``."""
        assert self.zk is not None
        out: dict[str, dict[str, str]] = {}

        async def read(entity_path: str) -> None:
            found = await self.zk.get(f"/config/{entity_path}")  # type: ignore[union-attr]
            if found is not None and found[0]:
                entity_type, _, name = entity_path.partition("/")
                configs = znodes.decode_config(entity_type, name, found[0])
                if configs:
                    out[entity_path] = configs

        for user in await self.zk.children("/config/users"):
            await read(f"users/{user}")
            for client in await self.zk.children(f"/config/users/{user}/clients"):
                await read(f"users/{user}/clients/{client}")
        for client in await self.zk.children("/config/clients"):
            await read(f"clients/{client}")
        return out

    async def write_quota_configs(self, entity_path: str, configs: dict[str, str]) -> None:
        entity_type, _, name = entity_path.partition("/")
        await self.write_entity_configs(entity_type, name, configs)
