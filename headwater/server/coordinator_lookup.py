"""Where a coordinator is: the leader of a partition of its internal topic, at the endpoint of the
listener the asking client came in on (FindCoordinator for groups and for transactional ids)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from headwater.controller import quota
from headwater.protocol.errors import ErrorCode
from headwater.server.clock import now_ms
from headwater.server.connection import current_connection

if TYPE_CHECKING:
    from headwater.server.context import BrokerContext

NO_NODE = (-1, "", -1)
Found = tuple[ErrorCode, str | None, tuple[int, str, int]]


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
                                log_info: Callable[..., None]) -> None:
    """Create an internal topic as the broker, through the path every CreateTopics takes."""
    if name in ctx.image.topics:
        return
    partitions, rf, configs = spec
    rq = quota.RequestQuota(ctx.quotas, "", "", False, now_ms())
    code = await ctx.topic_creator.create(name, partitions, rf, configs, rq)
    if code == ErrorCode.NONE:
        log_info("created %s with %d partitions, replication factor %d", name, partitions, rf)
    elif code != ErrorCode.TOPIC_ALREADY_EXISTS:
        log_info("could not create %s yet: %s", name, code.name)
