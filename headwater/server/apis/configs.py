"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and this broker; where the
configs live is the metadata authority's business, what they mean ``headwater/metadata/configs.py``'s."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from headwater.metadata.configs import (
    DYNAMIC_BROKER_CONFIGS,
    TOPIC_CONFIGS,
    ConfigSource,
    apply_incremental,
    effective_topic_config,
    validate_topic_configs,
)
from headwater.protocol.apis import ApiKey, Request
from headwater.protocol.config_resources import RESOURCE_BROKER, RESOURCE_TOPIC
from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.security.acl import AclOperation
from headwater.server.authority import Handler
from headwater.server.context import BrokerContext


class ConfigApis:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def handlers(self) -> dict[int, Handler]:
        return {
            ApiKey.DESCRIBE_CONFIGS: self.describe_configs,
            ApiKey.ALTER_CONFIGS: self.alter_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self.incremental_alter_configs,
        }

    async def describe_configs(self, req: Request) -> Any:
        result_cls = req.spec.response.DescribeConfigsResult
        entry_cls = result_cls.DescribeConfigsResourceResult
        results = []
        for res in req.body.resources:
            code, message, entries = ErrorCode.NONE, None, []
            try:
                self._authorize_config(req, res.resource_type, res.resource_name, AclOperation.DESCRIBE_CONFIGS)
                if res.resource_type == RESOURCE_TOPIC:
                    topic = self.ctx.image.topics.get(res.resource_name)
                    if topic is None:
                        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {res.resource_name} does not exist")
                    values = effective_topic_config(await self.ctx.authority.topic_configs(topic), self.ctx.config.props)
                    types = {k: int(TOPIC_CONFIGS[k].type) for k in values}
                elif res.resource_type == RESOURCE_BROKER:
                    if res.resource_name not in ("", str(self.ctx.config.broker_id)):
                        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {self.ctx.config.broker_id} but received {res.resource_name}")
                    values = {k: (v, ConfigSource.STATIC_BROKER_CONFIG) for k, v in self.ctx.config.props.items()}
                    values.update({k: (v, ConfigSource.DYNAMIC_BROKER_CONFIG) for k, v in self.ctx.dynamic_configs.items()})
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

    def _authorize_config(self, req: Request, resource_type: int, name: str, op: AclOperation) -> None:
        """DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, or on the cluster for broker configs."""
        if resource_type == RESOURCE_TOPIC:
            if not self.ctx.authz.topic(req, op, name):
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
        elif not self.ctx.authz.cluster(req, op):
            raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Authorization failed.")

    async def refresh_log_configs(self) -> None:
        """After a topic config change: hosted logs take the new segment, retention and throttle settings."""
        for name in {topic for topic, _p in self.ctx.replicas.partitions}:
            topic = self.ctx.image.topics.get(name)
            if topic is not None:
                configs = await self.ctx.authority.topic_configs(topic)
                self.ctx.logs.update_config(name, self.ctx.log_config(replace(topic, configs=configs)))
                max_bytes = int(effective_topic_config(configs, self.ctx.config.props)["max.message.bytes"][0])
                for (t, _p), hosted in self.ctx.replicas.partitions.items():
                    if t == name:
                        hosted.max_message_bytes = max_bytes
                self.ctx.replicas.set_topic_throttles(name, configs.get("leader.replication.throttled.replicas", ""),
                                                  configs.get("follower.replication.throttled.replicas", ""))

    async def refresh_broker_configs(self) -> None:
        merged = await self.ctx.authority.dynamic_broker_configs()
        if merged is None:
            return
        self.ctx.dynamic_configs = merged
        rates = [merged.get(k) for k in ("leader.replication.throttled.rate", "follower.replication.throttled.rate")]
        self.ctx.replicas.set_throttle_rates(*(int(r) if r is not None else None for r in rates))
        reassignment_rate = merged.get("reassignment.throttled.rate")
        self.ctx.replicas.set_reassignment_rate(int(reassignment_rate) if reassignment_rate is not None else None)

    async def alter_configs(self, req: Request) -> Any:
        async def replace_all(res: Any) -> None:
            if res.resource_type != RESOURCE_TOPIC:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Only topic configs can be altered on this broker")
            # AlterConfigs replaces the whole set.
            await self._apply_topic_configs(res.resource_name, {c.name: c.value for c in res.configs},
                                            req.body.validate_only)

        return await self._alter(req, replace_all)

    async def incremental_alter_configs(self, req: Request) -> Any:
        async def apply_ops(res: Any) -> None:
            ops = [(c.name, c.config_operation, c.value) for c in res.configs]
            if res.resource_type == RESOURCE_BROKER:
                await self._alter_broker_configs(res.resource_name, ops, req.body.validate_only)
                return
            if res.resource_type != RESOURCE_TOPIC:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}")
            topic = self._topic(res.resource_name)
            configs = apply_incremental(await self.ctx.authority.topic_configs(topic), ops)
            await self._apply_topic_configs(res.resource_name, configs, req.body.validate_only)

        return await self._alter(req, apply_ops)

    async def _alter(self, req: Request, change: Callable[[Any], Awaitable[None]]) -> Any:
        """Each resource authorized and changed on its own; one that fails changes nothing."""
        resp_cls = req.spec.response.AlterConfigsResourceResponse
        out = []
        for res in req.body.resources:
            code, message = ErrorCode.NONE, None
            try:
                self._authorize_config(req, res.resource_type, res.resource_name, AclOperation.ALTER_CONFIGS)
                await change(res)
            except KafkaError as exc:
                code, message = exc.code, exc.message
            out.append(resp_cls(error_code=code, error_message=message, resource_type=res.resource_type,
                                resource_name=res.resource_name))
        return req.response(throttle_time_ms=0, responses=out)

    def _topic(self, name: str) -> Any:
        topic = self.ctx.image.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
        return topic

    async def _apply_topic_configs(self, name: str, configs: dict[str, str], validate_only: bool) -> None:
        topic = self._topic(name)
        validate_topic_configs(configs)
        if validate_only:
            return
        await self.ctx.authority.write_topic_configs(topic, configs)
        await self.refresh_log_configs()

    async def _alter_broker_configs(self, name: str, ops: list[tuple[str, int, str | None]], validate_only: bool) -> None:
        broker_id = self.ctx.config.broker_id
        if name not in ("", str(broker_id)):
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Unexpected broker id, expected {broker_id} or empty string, but received {name}")
        entity = name or "<default>"
        configs = apply_incremental(await self.ctx.authority.broker_entity_configs(entity), ops, broker=True)
        if not validate_only:
            await self.ctx.authority.write_broker_entity_configs(entity, configs)
            await self.refresh_broker_configs()
