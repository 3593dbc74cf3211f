"""Audit records: one JSON object per line for every admin mutation and every denied request.

This module only decides what a record says; the server shell writes the lines (to a rotating file,
off the event loop). Fields, in this order:

``time`` (UTC, ISO 8601 with milliseconds), ``principal``, ``client_address`` (``host:port``),
``client_id``, ``api`` (Kafka's API name), ``api_version``, ``resources`` (each ``{"type", "name",
"error_code", "error"}``, and ``"operation"`` where an authorization check refused it),
``outcome`` (``allowed``, ``denied`` or ``failed``) and ``error_code`` (0, or the first non-zero one);
then ``detail`` on the controller's own actions (self-healing), which no client sent: their
principal is ``Controller:self-healing``, their address empty and their ``api_version`` -1.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

from headwater.protocol.errors import ErrorCode

AUTHORIZATION_ERRORS = frozenset({
    ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
})


@dataclass(frozen=True, slots=True)
class AuditResource:
    resource_type: str  # TOPIC, CLUSTER, GROUP, USER, ACL, ...
    name: str
    error_code: int = 0
    operation: str | None = None  # the operation an authorization check refused

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.resource_type, "name": self.name, "error_code": self.error_code}
        if self.error_code:
            try:
                out["error"] = ErrorCode(self.error_code).name
            except ValueError:
                out["error"] = "UNKNOWN"
        if self.operation is not None:
            out["operation"] = self.operation
        return out


@dataclass(frozen=True, slots=True)
class AuditRecord:
    time_ms: int
    principal: str
    client_address: str
    client_id: str | None
    api: str
    api_version: int
    resources: tuple[AuditResource, ...] = field(default_factory=tuple)
    denied: bool = False
    error_code: int = 0
    detail: str | None = None  # why the controller acted, on its own actions

    @property
    def outcome(self) -> str:
        if self.denied:
            return "denied"
        if self.error_code or any(r.error_code for r in self.resources):
            return "failed"
        return "allowed"

    def to_line(self) -> str:
        stamp = dt.datetime.fromtimestamp(self.time_ms / 1000, tz=dt.UTC).isoformat(timespec="milliseconds")
        code = self.error_code or next((r.error_code for r in self.resources if r.error_code), 0)
        doc = {
            "time": stamp.replace("+00:00", "Z"),
            "principal": self.principal,
            "client_address": self.client_address,
            "client_id": self.client_id,
            "api": self.api,
            "api_version": self.api_version,
            "resources": [r.to_json() for r in self.resources],
            "outcome": self.outcome,
            "error_code": code,
        }
        if self.detail is not None:
            doc["detail"] = self.detail
        return json.dumps(doc, separators=(",", ":"))
