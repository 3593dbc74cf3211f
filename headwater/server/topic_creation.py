"""Topics created on someone's behalf, from whichever broker was asked: a client's Metadata request
with auto-creation on, and the internal topics the group and transaction coordinators need.

Kafka in ZooKeeper mode writes such a topic from the broker that received the request
(``AutoTopicCreationManager.createTopicsInZk``). Here only the controller writes topics, so a broker
that is not the controller sends it a CreateTopics as itself, over the inter-broker listener with
that listener's TLS and SASL (``MetadataAuthority.send_to_controller``). Either way the request does not
wait for leaders (Kafka passes timeout 0), and the Metadata answer for a topic being created is
LEADER_NOT_AVAILABLE, which every client retries.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin import CreateTopicsRequest

from headwater.controller import quota
from headwater.controller.topics import validate_topic_name
from headwater.coordinator.records import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.server.channel import ChannelError

if TYPE_CHECKING:
    from headwater.server.context import BrokerContext

log = logging.getLogger(__name__)
# v5 is the last version the mutation quota treats permissively (strict from v6, KIP-599): Kafka's
# auto-creation is never refused by the quota, only recorded.
FORWARD_VERSION = 5
FORWARD_TIMEOUT_S = 10.0
# What Kafka's createTopicsInZk answers in Metadata for each outcome: a topic whose creation was
# accepted, or that exists already, has no leaders yet as far as this broker knows.
_BEING_CREATED = {ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.REQUEST_TIMED_OUT}


class TopicCreator:
    def __init__(self, broker: BrokerContext) -> None:
        self._broker = broker
        # One creation per topic at a time: concurrent Metadata requests for it share the answer.
        self._in_flight: dict[str, asyncio.Future[ErrorCode]] = {}

    async def auto_create(self, names: list[str], rq: quota.RequestQuota) -> dict[str, ErrorCode]:
        """Create the topics a Metadata request named and found missing; the error code each gets in
        the response (LEADER_NOT_AVAILABLE while it is being created, or why it cannot be)."""
        codes = await asyncio.gather(*(self.create(n, *self._spec(n), rq) for n in names))
        return {n: ErrorCode.LEADER_NOT_AVAILABLE if c in _BEING_CREATED else c for n, c in zip(names, codes, strict=True)}

    def _spec(self, name: str) -> tuple[int, int, dict[str, str]]:
        # An internal topic named in Metadata gets its own settings, as Kafka's creatableTopic gives them.
        if name == OFFSETS_TOPIC:
            return self._broker.groups.offsets_topic_spec()
        if name == TRANSACTION_STATE_TOPIC:
            return self._broker.transactions.state_topic_spec()
        return -1, -1, {}

    async def create(self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str],
                     rq: quota.RequestQuota) -> ErrorCode:
        """Ask for ``name`` to be created: NONE when the creation was accepted, else the error code
        (TOPIC_ALREADY_EXISTS, INVALID_REPLICATION_FACTOR, LEADER_NOT_AVAILABLE when no controller
        could be asked...)."""
        pending = self._in_flight.get(name)
        if pending is None:
            pending = asyncio.ensure_future(self._create(name, num_partitions, replication_factor, configs, rq))
            self._in_flight[name] = pending
            pending.add_done_callback(lambda _f: self._in_flight.pop(name, None))
        return await asyncio.shield(pending)

    async def _create(self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str],
                      rq: quota.RequestQuota) -> ErrorCode:
        broker = self._broker
        try:
            validate_topic_name(name)
            if broker.authority.creates_topics_here():
                await broker.authority.create_topic(name, num_partitions, replication_factor, {}, configs, False, rq)
                log.info("created topic %s on behalf of a client or coordinator", name)
                return ErrorCode.NONE
        except KafkaError as exc:
            return exc.code
        # Recorded here, where the client asked; the permissive version forwarded below is not refused.
        rq.try_consume(num_partitions if num_partitions > 0 else broker.config.num_partitions)
        return await self._forward(name, num_partitions, replication_factor, configs)

    async def _forward(self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str]) -> ErrorCode:
        T = CreateTopicsRequest.CreatableTopic
        req = CreateTopicsRequest(version=FORWARD_VERSION, timeout_ms=0, validate_only=False, topics=[
            T(name=name, num_partitions=num_partitions, replication_factor=replication_factor, assignments=[],
              configs=[T.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])])
        try:
            resp: Any = await self._broker.authority.send_to_controller(req, FORWARD_VERSION, FORWARD_TIMEOUT_S)
        except ChannelError as exc:
            log.info("could not ask the controller to create %s yet: %s", name, exc)
            return ErrorCode.LEADER_NOT_AVAILABLE
        code = ErrorCode(resp.topics[0].error_code)
        if code == ErrorCode.REQUEST_TIMED_OUT:
            code = ErrorCode.NONE  # timeout 0: accepted, leaders not awaited (ZkAdminManager.createTopics)
        elif code == ErrorCode.NOT_CONTROLLER:
            code = ErrorCode.LEADER_NOT_AVAILABLE  # the controller moved; the client's retry finds the new one
        if code == ErrorCode.NONE:
            log.info("asked controller %d to create topic %s", self._broker.image.controller_id, name)
        elif code != ErrorCode.TOPIC_ALREADY_EXISTS:
            log.info("controller refused to create %s: %s %s", name, code.name, resp.topics[0].error_message or "")
        return code
