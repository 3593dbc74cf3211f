"""DescribeClientQuotas and AlterClientQuotas over the user and client config maps (KIP-546)."""

from __future__ import annotations

from typing import Any

from headwater.controller import quota
from headwater.protocol.apis import ApiKey, Request
from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.security.acl import AclOperation
from headwater.server import scram_admin
from headwater.server.authority import Handler
from headwater.server.context import BrokerContext


class QuotaApis:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def handlers(self) -> dict[int, Handler]:
        return {
            ApiKey.DESCRIBE_CLIENT_QUOTAS: self.describe_client_quotas,
            ApiKey.ALTER_CLIENT_QUOTAS: self.alter_client_quotas,
        }

    def describe_client_quotas(self, req: Request) -> Any:
        entry_cls = req.spec.response.EntryData
        entity_cls = entry_cls.EntityData
        value_cls = entry_cls.ValueData
        if not self.ctx.authz.cluster(req, AclOperation.DESCRIBE_CONFIGS):
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
            for path, values in sorted(self.ctx.user_configs.configs.items()) if not by_ip else ():
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

    async def alter_client_quotas(self, req: Request) -> Any:
        entry_cls = req.spec.response.EntryData
        entity_cls = entry_cls.EntityData
        if not self.ctx.authz.cluster(req, AclOperation.ALTER_CONFIGS):
            return req.response(throttle_time_ms=0, entries=[entry_cls(
                error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message="Authorization failed.",
                entity=[entity_cls(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
                for entry in req.body.entries])
        updated = dict(self.ctx.user_configs.configs)
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
        if not req.body.validate_only and updated != self.ctx.user_configs.configs:
            await self.ctx.user_configs.save(updated)
        return req.response(throttle_time_ms=0, entries=out)
