"""The metadata authority of a broker in a ZooKeeper-backed cluster: topic changes go to the
controller (through this broker's ``ControllerShell`` when it is the controller, else the client is
told NOT_CONTROLLER, as Kafka's ZooKeeper-mode admin APIs do), configs and quotas to ZooKeeper.
The broker's life in the cluster (registration, elections, the controller's requests) is
``ClusterMember``'s."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from headwater.controller import effects as fx
from headwater.controller import events as ev
from headwater.controller import quota
from headwater.controller.self_healing import HealingStatus
from headwater.metadata.image import ClusterImage, PartitionState, TopicImage
from headwater.protocol.apis import ApiKey
from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.server.authority import Handler, charge
from headwater.server.cluster import ClusterMember
from headwater.server.controller_shell import ControllerShell

if TYPE_CHECKING:
    from headwater.server.context import BrokerContext


class ZkAuthority:
    def __init__(self, ctx: BrokerContext, connect: str, session_timeout_ms: int) -> None:
        self._ctx = ctx
        self.member = ClusterMember(ctx, connect, session_timeout_ms)

    def initial_image(self) -> ClusterImage:
        return ClusterImage("", -1, {}, {})  # the controller's first UpdateMetadata fills it

    def initial_user_configs(self) -> dict[str, dict[str, str]]:
        return {}  # read from ZooKeeper when the session is up

    @property
    def broker_epoch(self) -> int:
        return self.member.broker_epoch

    def handlers(self) -> dict[int, Handler]:
        m = self.member
        return {
            ApiKey.LEADER_AND_ISR: m.leader_and_isr,
            ApiKey.UPDATE_METADATA: m.update_metadata,
            ApiKey.STOP_REPLICA: m.stop_replica,
            ApiKey.ALTER_PARTITION: m.alter_partition,
            ApiKey.CONTROLLED_SHUTDOWN: m.controlled_shutdown,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: m.alter_partition_reassignments,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: m.list_partition_reassignments,
            ApiKey.ELECT_LEADERS: m.elect_leaders,
        }

    async def open_logs(self) -> None:
        pass  # the controller's LeaderAndIsr says which partitions this broker hosts

    async def start(self) -> None:
        await self.member.start()

    async def stop(self) -> None:
        await self.member.stop()

    async def report_log_dir_failure(self) -> None:
        await self.member.report_log_dir_failure()

    def self_healing(self) -> HealingStatus | None:
        shell = self.member.shell
        return shell.healer.status() if shell is not None and shell.active and self.member.is_controller() else None

    def creates_topics_here(self) -> bool:
        return self.member.is_controller()

    async def send_to_controller(self, request: Any, version: int, timeout_s: float) -> Any:
        return await self.member.send_to_controller(request, version, timeout_s)

    async def producer_id_block(self) -> tuple[int, int]:
        return await self.member.producer_id_block()

    def _shell(self) -> ControllerShell:
        """The controller of this cluster, if this broker is it; clients re-send elsewhere on NOT_CONTROLLER."""
        shell = self.member.shell
        if not self.member.is_controller() or shell is None:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "This is not the correct controller for this cluster.")
        return shell

    async def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           assignments: dict[int, list[int]], configs: dict[str, str], validate_only: bool,
                           rq: quota.RequestQuota) -> TopicImage:
        shell = self._shell()
        start, shift, topic_id = self.member.randomness()

        def event(validate: bool) -> ev.CreateTopicsRequested:
            return ev.CreateTopicsRequested(
                (ev.NewTopic(name, topic_id, num_partitions, replication_factor,
                             {p: tuple(r) for p, r in assignments.items()}, dict(configs)),),
                validate, start, shift)

        # Kafka's ZkAdminManager validates a topic before it records its partitions against the
        # quota: an invalid or existing topic gets its own error and costs nothing.
        result = await self._topic_result(shell, event(True))
        if not validate_only:
            charge(rq, result.num_partitions)
            result = await self._topic_result(shell, event(False))
        rf = max(result.replication_factor, 0)
        placeholder = PartitionState(tuple(range(rf)), -1, 0, ())
        return TopicImage(name, result.topic_id or topic_id, dict.fromkeys(range(result.num_partitions), placeholder),
                          dict(configs))

    async def delete_topic(self, name: str, rq: quota.RequestQuota) -> TopicImage:
        shell = self._shell()
        known = self._ctx.image.topics.get(name)
        if known is not None and self._ctx.config.delete_topic_enable:
            charge(rq, len(known.partitions))
        result = await self._topic_result(shell, ev.DeleteTopicsRequested((name,)))
        return known or TopicImage(name, result.topic_id or uuid.UUID(int=0), {})

    async def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                                validate_only: bool, rq: quota.RequestQuota) -> None:
        shell = self._shell()
        start, shift, _tid = self.member.randomness()

        def event(validate: bool) -> ev.CreatePartitionsRequested:
            return ev.CreatePartitionsRequested(
                (ev.NewPartitions(name, count, None if assignments is None else tuple(tuple(r) for r in assignments)),),
                validate, start, shift)

        await self._topic_result(shell, event(True))       # validated first, as for CreateTopics
        if validate_only:
            return
        known = self._ctx.image.topics.get(name)
        if known is not None and count > len(known.partitions):
            charge(rq, count - len(known.partitions))
        await self._topic_result(shell, event(False))

    @staticmethod
    async def _topic_result(shell: ControllerShell, event: ev.Event) -> fx.TopicResult:
        """The controller's answer for the one topic of ``event``; its error raised as a KafkaError."""
        resp = await shell.request(event)
        result: fx.TopicResult = resp.topics[0]
        if result.error != ErrorCode.NONE:
            raise KafkaError(result.error, result.message)
        return result

    async def topic_configs(self, topic: TopicImage, *, fresh: bool = False) -> dict[str, str]:
        return await self.member.topic_configs(topic.name, fresh=fresh)

    async def write_topic_configs(self, topic: TopicImage, configs: dict[str, str]) -> None:
        await self.member.write_topic_configs(topic.name, configs)

    async def dynamic_broker_configs(self) -> tuple[dict[str, str], dict[str, str]]:
        return (await self.member.entity_configs("brokers", str(self._ctx.config.broker_id)),
                await self.member.entity_configs("brokers", "<default>"))

    async def broker_entity_configs(self, entity: str) -> dict[str, str]:
        return await self.member.entity_configs("brokers", entity)

    async def write_broker_entity_configs(self, entity: str, configs: dict[str, str]) -> None:
        await self.member.write_entity_configs("brokers", entity, configs)

    async def load_user_configs(self) -> dict[str, dict[str, str]] | None:
        return await self.member.load_quota_configs()

    async def publish_cordoned_log_dirs(self, log_dirs: tuple[str, ...], cordoned: tuple[str, ...]) -> None:
        await self.member.publish_cordoned_log_dirs(log_dirs, cordoned)

    async def write_user_configs(self, old: dict[str, dict[str, str]], new: dict[str, dict[str, str]]) -> None:
        for path in sorted(set(new) | set(old)):
            if new.get(path) != old.get(path):
                await self.member.write_quota_configs(path, new.get(path, {}))
