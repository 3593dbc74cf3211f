"""The security APIs a client sends once connected: ACLs (the authorizer's), SCRAM credentials,
and SASL frames that come after authentication (or on a listener without SASL)."""

from __future__ import annotations

from typing import Any

from headwater.protocol.apis import ApiKey, Request
from headwater.protocol.errors import ErrorCode
from headwater.server import scram_admin
from headwater.server.authority import Handler
from headwater.server.context import BrokerContext


class SecurityApis:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def handlers(self) -> dict[int, Handler]:
        authz = self.ctx.authz
        return {
            ApiKey.DESCRIBE_ACLS: authz.describe_acls,
            ApiKey.CREATE_ACLS: authz.create_acls,
            ApiKey.DELETE_ACLS: authz.delete_acls,
            ApiKey.SASL_HANDSHAKE: self.sasl_after_authentication,
            ApiKey.SASL_AUTHENTICATE: self.sasl_after_authentication,
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: lambda req: scram_admin.describe(self.ctx, req),
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: lambda req: scram_admin.alter(self.ctx, req),
        }

    def sasl_after_authentication(self, req: Request) -> Any:
        """SaslHandshake/SaslAuthenticate once authenticated, or on a listener without SASL."""
        message = "SASL authentication is not expected on this connection now"
        if req.spec.key == ApiKey.SASL_HANDSHAKE:
            return req.response(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
        fields: dict[str, Any] = dict(error_code=ErrorCode.ILLEGAL_SASL_STATE, error_message=message, auth_bytes=b"")
        if req.version >= 1:
            fields["session_lifetime_ms"] = 0
        return req.response(**fields)
