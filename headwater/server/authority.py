"""Who decides the cluster's metadata: the broker itself, or the ZooKeeper-backed controller.

A standalone broker (no ``zookeeper.connect``) is its own controller: ``LocalAuthority`` plans and
applies topic changes at once and keeps the image and the user/client config maps in local files.
In a cluster, ``ZkAuthority`` (``headwater/server/zk_authority.py``) hands them to the controller
and to ZooKeeper. Handlers see only ``MetadataAuthority``, so neither has a mode check.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from headwater.controller import quota
from headwater.controller.self_healing import HealingStatus
from headwater.controller.topics import plan_create_partitions, plan_create_topic
from headwater.metadata.image import ClusterImage, TopicImage
from headwater.protocol.apis import ApiKey
from headwater.protocol.elections import elect_leaders_response, requested_partitions
from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.replication.partition import LeaderAndIsrState
from headwater.security.acl import AclOperation
from headwater.server.channel import ChannelError
from headwater.server.metadata_store import BROKER_CONFIGS_FILE_NAME, LocalMetadataStore, LocalQuotaStore

if TYPE_CHECKING:
    from headwater.server.context import BrokerContext

log = logging.getLogger(__name__)
THROTTLED_MESSAGE = "The throttling quota has been exceeded."
PRODUCER_ID_BLOCK = 1000
Handler = Callable[[Any], Any]


def charge(rq: quota.RequestQuota, partitions: int) -> None:
    """Pay for ``partitions`` partition mutations, or refuse the request (KIP-599)."""
    if not rq.try_consume(partitions):
        raise KafkaError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE)


class MetadataAuthority(Protocol):
    def initial_image(self) -> ClusterImage: ...

    def initial_user_configs(self) -> dict[str, dict[str, str]]: ...

    @property
    def broker_epoch(self) -> int:
        """This broker's epoch in the cluster (-1 without one), which the controller fences on."""
        ...

    def handlers(self) -> dict[int, Handler]:
        """The APIs only this kind of broker serves (inter-broker, reassignment)."""
        ...

    async def open_logs(self) -> None:
        """At start-up, before the replica manager runs: the logs the broker hosts from the outset."""

    async def start(self) -> None:
        """Last step of start-up, once the broker can serve."""

    async def stop(self) -> None:
        """First step of shutdown, while the broker still serves followers."""

    async def report_log_dir_failure(self) -> None: ...

    def self_healing(self) -> HealingStatus | None:
        """What self-healing is doing, on the active controller (None elsewhere)."""
        ...

    def creates_topics_here(self) -> bool:
        """Whether a topic can be created by this broker (else it asks the controller)."""
        ...

    async def send_to_controller(self, request: Any, version: int, timeout_s: float) -> Any: ...

    async def producer_id_block(self) -> tuple[int, int]:
        """A durable block ``[start, end)`` of producer ids no other broker or restart hands out."""
        ...

    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           assignments: dict[int, list[int]], configs: dict[str, str], validate_only: bool,
                           rq: quota.RequestQuota) -> TopicImage: ...

    async def delete_topic(self, name: str, rq: quota.RequestQuota) -> TopicImage: ...

    async def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                                validate_only: bool, rq: quota.RequestQuota) -> None: ...

    async def topic_configs(self, topic: TopicImage, *, fresh: bool = False) -> dict[str, str]:
        """The topic's overrides (a copy). ``fresh``: as stored now, not as this broker last heard, for the
        admin APIs (Kafka's ZooKeeper-mode DescribeConfigs and AlterConfigs read the znode)."""
        ...

    async def write_topic_configs(self, topic: TopicImage, configs: dict[str, str]) -> None: ...

    async def dynamic_broker_configs(self) -> tuple[dict[str, str], dict[str, str]]:
        """This broker's dynamic configs and the cluster-wide default, as stored."""
        ...

    async def broker_entity_configs(self, entity: str) -> dict[str, str]: ...

    async def write_broker_entity_configs(self, entity: str, configs: dict[str, str]) -> None: ...

    async def load_user_configs(self) -> dict[str, dict[str, str]] | None:
        """The user/client config maps as stored now; None where only this broker writes them."""
        ...

    async def write_user_configs(self, old: dict[str, dict[str, str]], new: dict[str, dict[str, str]]) -> None: ...

    async def publish_cordoned_log_dirs(self, log_dirs: tuple[str, ...], cordoned: tuple[str, ...]) -> None:
        """KIP-1066: this broker's cordoned log dirs, for whoever places new replicas (a broker whose every
        dir is cordoned gets none)."""


class LocalAuthority:
    """A standalone broker: every partition led by itself, with itself as the whole ISR."""

    def __init__(self, ctx: BrokerContext) -> None:
        self._ctx = ctx
        self._store = LocalMetadataStore(ctx.config.log_dirs[0], ctx.info)
        self._quota_store = LocalQuotaStore(ctx.config.log_dirs[0])
        # Dynamic broker configs, by entity ("<default>" and this broker's id), as /config/brokers has them.
        self._broker_store = LocalQuotaStore(ctx.config.log_dirs[0], BROKER_CONFIGS_FILE_NAME)
        self._rng = random.Random()
        self._cordoned = False  # every log dir cordoned (KIP-1066)

    def initial_image(self) -> ClusterImage:
        return self._store.load()

    def initial_user_configs(self) -> dict[str, dict[str, str]]:
        return self._quota_store.load()

    @property
    def broker_epoch(self) -> int:
        return -1

    def handlers(self) -> dict[int, Handler]:
        return {ApiKey.ELECT_LEADERS: self.elect_leaders}

    async def elect_leaders(self, req: Any) -> Any:
        """Every partition here has one replica, this broker, which leads it: nothing is ever to be
        elected (ELECTION_NOT_NEEDED), as Kafka answers for a partition already led as asked."""
        wanted = requested_partitions(req)
        if not self._ctx.authz.cluster(req, AclOperation.ALTER):
            denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return elect_leaders_response(req, denied, [(t, p, denied, None) for t, p in wanted or ()])
        topics = self._ctx.image.topics
        results: list[tuple[str, int, int, str | None]] = []
        for t, p in wanted or ():
            topic = topics.get(t)
            if topic is None or p not in topic.partitions:
                results.append((t, p, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."))
            else:
                results.append((t, p, ErrorCode.ELECTION_NOT_NEEDED, None))
        return elect_leaders_response(req, ErrorCode.NONE, results)

    def _set_image(self, image: ClusterImage) -> None:
        self._store.save(image)
        self._ctx.publish_image(image)

    def _lead(self, topic: TopicImage, partitions: Iterable[int]) -> None:
        ctx = self._ctx
        cfg = ctx.log_config(topic)
        max_bytes = int(ctx.effective_topic_config(topic.configs)["max.message.bytes"][0])
        me = ctx.config.broker_id
        for p in partitions:
            state = topic.partitions[p]
            ctx.replicas.become(topic.name, p, LeaderAndIsrState(me, state.leader_epoch, (me,), 0, (me,)),
                                topic_id=topic.topic_id, config=cfg, min_insync_replicas=1, max_message_bytes=max_bytes)

    async def open_logs(self) -> None:
        # Open (or create) a log for every partition and drop logs of topics that no longer exist,
        # so the disk matches the image before the first client arrives.
        ctx = self._ctx
        await ctx.refresh_broker_configs()  # the dynamic log defaults, before any log opens
        wanted: set[tuple[str, int]] = set()
        for topic in ctx.image.topics.values():
            wanted.update((topic.name, p) for p in topic.partitions)
            self._lead(topic, topic.partitions)
        for plog in ctx.logs.all_logs():
            if (plog.topic, plog.partition) not in wanted:
                ctx.logs.delete(plog.topic, plog.partition)

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def report_log_dir_failure(self) -> None:
        pass  # no controller to tell: the partitions are simply offline

    def self_healing(self) -> HealingStatus | None:
        return None

    def creates_topics_here(self) -> bool:
        return True

    async def send_to_controller(self, request: Any, version: int, timeout_s: float) -> Any:
        raise ChannelError("a standalone broker is its own controller")

    async def producer_id_block(self) -> tuple[int, int]:
        start = self._ctx.image.next_producer_id
        self._set_image(replace(self._ctx.image, next_producer_id=start + PRODUCER_ID_BLOCK))
        return start, start + PRODUCER_ID_BLOCK

    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           assignments: dict[int, list[int]], configs: dict[str, str], validate_only: bool,
                           rq: quota.RequestQuota) -> TopicImage:
        ctx = self._ctx
        n = len(ctx.image.brokers)
        topic = plan_create_topic(
            self._placement_image(), name, num_partitions, replication_factor, assignments, configs,
            default_partitions=ctx.config.num_partitions,
            default_replication_factor=ctx.config.default_replication_factor,
            start_index=self._rng.randrange(n), shift=self._rng.randrange(n),
        )
        # Validation errors come first; a valid request then pays for its partitions (validate_only
        # requests pay nothing, as in Kafka's ZooKeeper mode).
        if validate_only:
            return topic
        charge(rq, len(topic.partitions))
        self._set_image(ctx.image.with_topic(topic))
        self._lead(topic, topic.partitions)
        log.info("created topic %s with %d partitions", name, len(topic.partitions))
        return topic

    async def delete_topic(self, name: str, rq: quota.RequestQuota) -> TopicImage:
        ctx = self._ctx
        topic = ctx.image.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        if not ctx.config.delete_topic_enable:
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        charge(rq, len(topic.partitions))
        self._set_image(ctx.image.without_topic(name))
        for p in topic.partitions:
            ctx.replicas.stop_replica(name, p, delete=True)
        log.info("deleted topic %s", name)
        return topic

    async def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                                validate_only: bool, rq: quota.RequestQuota) -> None:
        ctx = self._ctx
        n = len(ctx.image.brokers)
        topic = plan_create_partitions(self._placement_image(), name, count, assignments,
                                       start_index=self._rng.randrange(n), shift=self._rng.randrange(n))
        if validate_only:
            return
        old = set(ctx.image.topics[name].partitions)
        charge(rq, len(topic.partitions) - len(old))
        self._set_image(ctx.image.with_topic(topic))
        self._lead(topic, [p for p in topic.partitions if p not in old])

    async def topic_configs(self, topic: TopicImage, *, fresh: bool = False) -> dict[str, str]:
        return dict(topic.configs)

    async def publish_cordoned_log_dirs(self, log_dirs: tuple[str, ...], cordoned: tuple[str, ...]) -> None:
        self._cordoned = bool(log_dirs) and set(log_dirs) <= set(cordoned)

    def _placement_image(self) -> ClusterImage:
        """The image topic placement sees: this broker marked cordoned when every log dir is."""
        image, me = self._ctx.image, self._ctx.config.broker_id
        if not self._cordoned or me not in image.brokers:
            return image
        return replace(image, brokers={**image.brokers, me: replace(image.brokers[me], cordoned=True)})

    async def write_topic_configs(self, topic: TopicImage, configs: dict[str, str]) -> None:
        self._set_image(self._ctx.image.with_topic(replace(topic, configs=configs)))

    async def dynamic_broker_configs(self) -> tuple[dict[str, str], dict[str, str]]:
        stored = self._broker_store.load()
        return stored.get(str(self._ctx.config.broker_id), {}), stored.get("<default>", {})

    async def broker_entity_configs(self, entity: str) -> dict[str, str]:
        return self._broker_store.load().get(entity, {})

    async def write_broker_entity_configs(self, entity: str, configs: dict[str, str]) -> None:
        stored = self._broker_store.load()
        if configs:
            stored[entity] = configs
        else:
            stored.pop(entity, None)
        self._broker_store.save(stored)

    async def load_user_configs(self) -> dict[str, dict[str, str]] | None:
        return None

    async def write_user_configs(self, old: dict[str, dict[str, str]], new: dict[str, dict[str, str]]) -> None:
        self._quota_store.save(new)
