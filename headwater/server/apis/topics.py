"""CreateTopics, DeleteTopics and CreatePartitions, decided by the metadata authority; a creation
is answered once the new partitions have leaders in this broker's metadata (up to the request's
timeout), so that the topic is usable here as soon as the client is told it exists."""

from __future__ import annotations

import uuid
from typing import Any

from headwater.metadata.configs import check_tiered_storage
from headwater.protocol.apis import ApiKey, Request
from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.security.acl import AclOperation
from headwater.server.authority import Handler
from headwater.server.context import BrokerContext

# The first version of each API whose requests the mutation quota refuses rather than records (KIP-599).
STRICT_QUOTA_SINCE = {ApiKey.CREATE_TOPICS: 6, ApiKey.CREATE_PARTITIONS: 3, ApiKey.DELETE_TOPICS: 5}


class TopicApis:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def handlers(self) -> dict[int, Handler]:
        return {
            ApiKey.CREATE_TOPICS: self.create_topics,
            ApiKey.DELETE_TOPICS: self.delete_topics,
            ApiKey.CREATE_PARTITIONS: self.create_partitions,
        }

    async def create_topics(self, req: Request) -> Any:
        body = req.body
        result_cls = req.spec.response.CreatableTopicResult
        config_cls = result_cls.CreatableTopicConfigs
        rq = self.ctx.request_quota(req, strict=req.version >= STRICT_QUOTA_SINCE[ApiKey.CREATE_TOPICS])
        seen: dict[str, int] = {}
        for t in body.topics:
            seen[t.name] = seen.get(t.name, 0) + 1
        cluster_create = self.ctx.authz.cluster(req, AclOperation.CREATE, note=False)
        answers: list[dict[str, Any]] = []
        created: dict[str, set[int]] = {}
        for t in body.topics:
            code, message, topic = ErrorCode.NONE, None, None
            try:
                if seen[t.name] > 1:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
                if not cluster_create and not self.ctx.authz.topic(req, AclOperation.CREATE, t.name):
                    raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
                assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments}
                configs = {c.name: c.value for c in t.configs}
                check_tiered_storage(configs, self.ctx.config.props)  # on the receiving broker, as ZkAdminManager
                topic = await self.ctx.authority.create_topic(t.name, t.num_partitions, t.replication_factor, assignments,
                                                          configs, body.validate_only, rq)
            except KafkaError as exc:
                code, message = exc.code, exc.message
            fields: dict[str, Any] = dict(name=t.name, error_code=code, error_message=message,
                                          topic_id=topic.topic_id if topic and not body.validate_only else uuid.UUID(int=0))
            if req.version >= 5:
                if topic is not None:
                    effective = self.ctx.effective_topic_config(topic.configs)
                    fields.update(
                        num_partitions=len(topic.partitions),
                        replication_factor=topic.replication_factor,
                        configs=[config_cls(name=k, value=v, read_only=False, config_source=src, is_sensitive=False)
                                 for k, (v, src) in sorted(effective.items())],
                    )
                    if not self.ctx.authz.topic(req, AclOperation.DESCRIBE_CONFIGS, t.name, note=False):
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
        return await self.ctx.await_leaders(created, timeout_ms / 1000)

    async def delete_topics(self, req: Request) -> Any:
        body = req.body
        result_cls = req.spec.response.DeletableTopicResult
        results = []
        rq = self.ctx.request_quota(req, strict=req.version >= STRICT_QUOTA_SINCE[ApiKey.DELETE_TOPICS])
        if req.version >= 6:
            targets = [(t.name, t.topic_id) for t in body.topics]
        else:
            targets = [(n, uuid.UUID(int=0)) for n in body.topic_names]
        for name, topic_id in targets:
            code, message = ErrorCode.NONE, None
            try:
                if name is None:
                    found = self.ctx.image.topic_by_id(topic_id)
                    if found is None:
                        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
                    name = found.name
                if not self.ctx.authz.topic(req, AclOperation.DELETE, name):
                    raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
                topic = await self.ctx.authority.delete_topic(name, rq)
                topic_id = topic.topic_id
            except KafkaError as exc:
                code, message = exc.code, exc.message
            results.append(result_cls(name=name, topic_id=topic_id, error_code=code, error_message=message))
        return req.response(throttle_time_ms=rq.throttle_ms, responses=results)

    async def create_partitions(self, req: Request) -> Any:
        body = req.body
        result_cls = req.spec.response.CreatePartitionsTopicResult
        results = []
        rq = self.ctx.request_quota(req, strict=req.version >= STRICT_QUOTA_SINCE[ApiKey.CREATE_PARTITIONS])
        created: dict[str, set[int]] = {}
        for t in body.topics:
            code, message = ErrorCode.NONE, None
            try:
                if not self.ctx.authz.topic(req, AclOperation.ALTER, t.name):
                    raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
                assignments = [list(a.broker_ids) for a in t.assignments] if t.assignments is not None else None
                await self.ctx.authority.create_partitions(t.name, t.count, assignments, body.validate_only, rq)
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
