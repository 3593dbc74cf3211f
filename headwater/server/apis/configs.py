"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and this broker; where the
configs live is the metadata authority's business, what they mean ``headwater/metadata/configs.py``'s."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from headwater.metadata import config_catalog as catalog
from headwater.metadata.configs import (
    CORDONED_LOG_DIRS,
    HEADWATER_BROKER_CONFIGS,
    ConfigSource,
    adaptive_throttle_settings,
    apply_incremental,
    check_broker_configs,
    check_reconfiguration,
    check_tiered_storage,
    connection_limits,
    copy_max_cpu_pressure,
    cordoned_log_dirs,
    validate_broker_update,
    validate_topic_configs,
)
from headwater.protocol.apis import ApiKey, Request
from headwater.protocol.config_resources import RESOURCE_BROKER, RESOURCE_TOPIC
from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.replication.adaptive_throttle import AdaptiveSettings
from headwater.security.acl import AclOperation
from headwater.server.authority import Handler
from headwater.server.context import BrokerContext

log = logging.getLogger(__name__)


class ConfigApis:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.dynamic_broker: dict[str, str] = {}  # /config/brokers/<this id> (a local file when standalone)
        self.dynamic_default: dict[str, str] = {}  # /config/brokers/<default>

    def handlers(self) -> dict[int, Handler]:
        return {
            ApiKey.DESCRIBE_CONFIGS: self.describe_configs,
            ApiKey.ALTER_CONFIGS: self.alter_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self.incremental_alter_configs,
        }

    def dynamic_maps(self) -> tuple[dict[str, str], dict[str, str]]:
        """This broker's dynamic configs and the cluster-wide dynamic default, as stored."""
        return self.dynamic_broker, self.dynamic_default

    async def describe_configs(self, req: Request) -> Any:
        body = req.body
        result_cls = req.spec.response.DescribeConfigsResult
        entry_cls = result_cls.DescribeConfigsResourceResult
        synonyms = req.version >= 1 and body.include_synonyms
        documentation = req.version >= 3 and body.include_documentation
        results = []
        for res in body.resources:
            code, message, entries = ErrorCode.NONE, None, []
            try:
                self._authorize_config(req, res.resource_type, res.resource_name, AclOperation.DESCRIBE_CONFIGS)
                keys = None if res.configuration_keys is None else set(res.configuration_keys)
                for e in await self._describe(res.resource_type, res.resource_name):
                    if keys is not None and e.name not in keys:
                        continue
                    entry: dict[str, Any] = dict(name=e.name, value=e.value, read_only=e.read_only,
                                                 is_sensitive=e.is_sensitive)
                    if req.version == 0:
                        entry["is_default"] = e.source == ConfigSource.DEFAULT_CONFIG
                    else:
                        entry["config_source"] = int(e.source)
                        entry["synonyms"] = [entry_cls.DescribeConfigsSynonym(name=s.name, value=s.value, source=int(s.source))
                                             for s in e.synonyms] if synonyms else []
                    if req.version >= 3:
                        entry.update(config_type=int(e.type), documentation=e.documentation if documentation else None)
                    entries.append(entry_cls(**entry))
            except KafkaError as exc:
                code, message = exc.code, exc.message
            results.append(result_cls(error_code=code, error_message=message, resource_type=res.resource_type,
                                      resource_name=res.resource_name, configs=entries))
        return req.response(throttle_time_ms=0, results=results)

    async def _describe(self, resource_type: int, name: str) -> list[catalog.Entry]:
        """Every config of the resource as Kafka's ConfigHelper.describeConfigs reports it."""
        props = self.ctx.config.props
        if resource_type == RESOURCE_TOPIC:
            overrides = await self.ctx.authority.topic_configs(self._topic(name), fresh=True)
            return catalog.describe_topic(overrides, self.dynamic_broker, self.dynamic_default, props)
        if resource_type == RESOURCE_BROKER:
            broker_id = self.ctx.config.broker_id
            if name not in ("", str(broker_id)):
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {broker_id} but received {name}")
            entries = catalog.describe_broker(None if name == "" else broker_id, self.dynamic_broker,
                                              self.dynamic_default, props)
            # headwater's own dynamic keys are described like Kafka's, with their values.
            own = self.dynamic_default if name == "" else {**self.dynamic_default, **self.dynamic_broker}
            extra = [catalog.Entry(k, own[k], ConfigSource.DYNAMIC_BROKER_CONFIG if k in self.dynamic_broker and name
                                   else ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, False, False, (), t, None)
                     for k, (t, _low, _d) in HEADWATER_BROKER_CONFIGS.items() if k in own]
            return [e for e in entries if e.name not in HEADWATER_BROKER_CONFIGS] + extra
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}")

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
                max_bytes = int(self.ctx.effective_topic_config(configs)["max.message.bytes"][0])
                for (t, _p), hosted in self.ctx.replicas.partitions.items():
                    if t == name:
                        hosted.max_message_bytes = max_bytes
                self.ctx.replicas.set_topic_throttles(name, configs.get("leader.replication.throttled.replicas", ""),
                                                  configs.get("follower.replication.throttled.replicas", ""))

    async def refresh_broker_configs(self) -> None:
        """Read the dynamic broker configs again and apply them (throttles, log defaults)."""
        self.dynamic_broker, self.dynamic_default = await self.ctx.authority.dynamic_broker_configs()
        merged = {**self.dynamic_default, **self.dynamic_broker}
        rates = [merged.get(k) for k in ("leader.replication.throttled.rate", "follower.replication.throttled.rate")]
        self.ctx.replicas.set_throttle_rates(*(int(r) if r is not None else None for r in rates))
        reassignment_rate = merged.get("reassignment.throttled.rate")
        adaptive = adaptive_throttle_settings(merged)
        self.ctx.replicas.set_reassignment_rate(int(reassignment_rate) if reassignment_rate is not None else None,
                                                AdaptiveSettings(*adaptive) if adaptive is not None else None)
        self.ctx.replicas.set_copy_max_cpu_pressure(copy_max_cpu_pressure(merged))
        alter_log_dirs_rate = merged.get("replica.alter.log.dirs.io.max.bytes.per.second")
        self.ctx.replicas.set_alter_log_dirs_rate(int(alter_log_dirs_rate) if alter_log_dirs_rate is not None else None)
        props = self.ctx.config.props
        self.ctx.connection_quotas.configure(connection_limits(
            props, self.dynamic_broker, self.dynamic_default, [lst.name for lst in self.ctx.config.listeners]))
        await self._apply_cordoned_log_dirs()
        await self.refresh_log_configs()  # a topic without an override follows the broker's log.* defaults

    async def _apply_cordoned_log_dirs(self) -> None:
        """KIP-1066: new replicas go to uncordoned dirs, and the controller learns which dirs are cordoned
        (a per-broker config: the dynamic value replaces the static one, as DynamicLogConfig.reconfigure)."""
        value = self.dynamic_broker.get(CORDONED_LOG_DIRS, self.ctx.config.props.get(CORDONED_LOG_DIRS, ""))
        log_dirs = [str(d) for d in self.ctx.config.log_dirs]
        try:
            cordoned = cordoned_log_dirs(value, log_dirs)
        except KafkaError as exc:  # only a hand-written znode gets here: keep what was in force
            log.error("%s=%s ignored: %s", CORDONED_LOG_DIRS, value, exc.message)
            return
        self.ctx.logs.cordon([d for d in self.ctx.config.log_dirs if str(d) in cordoned])
        await self.ctx.authority.publish_cordoned_log_dirs(tuple(log_dirs), tuple(cordoned))

    async def alter_configs(self, req: Request) -> Any:
        async def replace_all(res: Any) -> None:
            # AlterConfigs replaces the whole set (of the topic, or of the broker's dynamic configs).
            configs = {c.name: c.value for c in res.configs}
            if res.resource_type == RESOURCE_BROKER:
                nulls = [k for k, v in configs.items() if v is None]
                if nulls:  # ConfigAdminManager.preprocess, for the legacy API
                    raise KafkaError(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
                await self._write_broker_configs(res.resource_name, configs, req.body.validate_only)
            elif res.resource_type == RESOURCE_TOPIC:
                await self._apply_topic_configs(res.resource_name, configs, req.body.validate_only)
            else:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}")

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
            configs = apply_incremental(await self.ctx.authority.topic_configs(topic, fresh=True), ops)
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
        defaults = {k: v for k, (v, _src) in self.ctx.effective_topic_config({}).items()}
        validate_topic_configs(configs, defaults)
        check_tiered_storage(configs, self.ctx.config.props)
        if validate_only:
            return
        await self.ctx.authority.write_topic_configs(topic, configs)
        await self.refresh_log_configs()

    def _broker_entity(self, name: str) -> str:
        broker_id = self.ctx.config.broker_id
        if name not in ("", str(broker_id)):
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Unexpected broker id, expected {broker_id} or empty string, but received {name}")
        return name or "<default>"

    async def _alter_broker_configs(self, name: str, ops: list[tuple[str, int, str | None]], validate_only: bool) -> None:
        entity = self._broker_entity(name)
        current = await self.ctx.authority.broker_entity_configs(entity)
        await self._write_broker_configs(name, apply_incremental(current, ops, broker=True), validate_only)

    async def _write_broker_configs(self, name: str, configs: dict[str, str], validate_only: bool) -> None:
        entity = self._broker_entity(name)
        try:
            validate_broker_update(configs, per_broker=bool(name))
            # The whole broker config with the change, as DynamicBrokerConfig.validate builds it.
            mine, default = (configs, self.dynamic_default) if name else (self.dynamic_broker, configs)
            check_broker_configs(self.ctx.config.props, mine, default, [str(d) for d in self.ctx.config.log_dirs])
            check_reconfiguration(self.ctx.config.props, self.dynamic_broker, self.dynamic_default, mine, default)
        except KafkaError as exc:
            # ZkAdminManager names the resource in the message of a refused broker config.
            raise KafkaError(exc.code, catalog.alter_error_message("BROKER", name, exc.message or "")) from None
        if not validate_only:
            await self.ctx.authority.write_broker_entity_configs(entity, configs)
            await self.refresh_broker_configs()
