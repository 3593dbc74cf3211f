"""Authorization and audit at the request level: the shell around ``headwater.security``.

What lives here:

- :class:`Authz`, one per broker: the authorizer's settings (``authorizer.class.name``,
  ``super.users``, ``allow.everyone.if.no.acl.found``), the broker's cache of every ACL, and the
  audit log. With no authorizer configured, every check allows and the ACL APIs answer
  SECURITY_DISABLED, as Kafka does.
- Where ACLs are kept: in ZooKeeper (``/kafka-acl``, ``/kafka-acl-extended``, compare-and-set
  updates and change notifications every broker watches) in a cluster, in a local JSON file beside
  the quota store on a standalone broker.
- The CreateAcls / DescribeAcls / DeleteAcls handlers.
- The audit log: a JSON line per admin mutation and per denied request, written by a thread behind
  a queue so the event loop only enqueues.

How handlers check (each returns True when allowed and, when refused, notes the refusal on the
request so its audit line names it)::

    authz.topic(req, AclOperation.WRITE, name)        # TOPIC_AUTHORIZATION_FAILED when False
    authz.cluster(req, AclOperation.ALTER)             # CLUSTER_AUTHORIZATION_FAILED when False
    authz.group_error(req, group_id)                   # ErrorCode.NONE or GROUP_AUTHORIZATION_FAILED

Group APIs: :data:`GROUP_OPERATIONS` names the operation Kafka checks on the GROUP resource for
each consumer-group API (and :data:`GROUP_TOPIC_OPERATIONS` the one on each topic it names, for
those that name topics). A group handler calls ``authz.group_error(req, group_id)`` first and
answers with the code it returns (nothing changes when it is not NONE); ListGroups lists every
group with DESCRIBE on CLUSTER, otherwise only the groups ``authz.group(req, DESCRIBE, g)`` allows.
FindCoordinator checks DESCRIBE on the GROUP (key type 0) or the TRANSACTIONAL_ID (key type 1).
:mod:`headwater.server.group_acl` applies these rules for the group handlers.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import logging
import logging.handlers
import queue
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from headwater.protocol.apis import ApiKey, Request
from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.security.acl import (
    CLUSTER_NAME,
    EXTENDED_CHANGES,
    LITERAL_CHANGES,
    ZK_TOP_LEVEL,
    AccessControlEntry,
    AclBinding,
    AclFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    bindings_from_json,
    bindings_to_json,
    change_notification,
    decode_acls,
    decode_change_notification,
    encode_acls,
    validate_binding,
    zk_path,
    zk_type_dirs,
)
from headwater.security.audit import AuditRecord, AuditResource
from headwater.security.authorizer import AclSet, AuthorizerConfig, authorize, authorize_any
from headwater.server.clock import now_ms
from headwater.storage.files import write_atomic

if TYPE_CHECKING:
    from headwater.server.zk import ZooKeeper

log = logging.getLogger(__name__)

ACLS_FILE_NAME = "headwater-acls.json"
AUDIT_FILE_NAME = "audit.log"
DEFAULT_AUDIT_MAX_BYTES = 100 * 1024 * 1024
DEFAULT_AUDIT_BACKUPS = 10
SECURITY_DISABLED_MESSAGE = "No Authorizer is configured on the broker"
# Change notifications older than this are deleted by the broker that writes the next one (Kafka: 15 min).
NOTIFICATION_MAX_AGE_MS = 15 * 60 * 1000

ApiKeyInt = int
# Consumer-group APIs -> the operation on the GROUP resource (Kafka's KafkaApis).
GROUP_OPERATIONS: dict[ApiKeyInt, AclOperation] = {
    8: AclOperation.READ,       # OffsetCommit
    9: AclOperation.DESCRIBE,   # OffsetFetch
    10: AclOperation.DESCRIBE,  # FindCoordinator (key type 0)
    11: AclOperation.READ,      # JoinGroup
    12: AclOperation.READ,      # Heartbeat
    13: AclOperation.READ,      # LeaveGroup
    14: AclOperation.READ,      # SyncGroup
    15: AclOperation.DESCRIBE,  # DescribeGroups
    16: AclOperation.DESCRIBE,  # ListGroups (per group, unless DESCRIBE on CLUSTER)
    28: AclOperation.READ,      # TxnOffsetCommit
    42: AclOperation.DELETE,    # DeleteGroups
    47: AclOperation.DELETE,    # OffsetDelete
    68: AclOperation.READ,      # ConsumerGroupHeartbeat
    69: AclOperation.DESCRIBE,  # ConsumerGroupDescribe
}
# What can be done to each resource type (Kafka's ``ResourceType`` / ``AclEntry.supportedOperations``).
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
}
# ... and on each topic those APIs name (TOPIC_AUTHORIZATION_FAILED per partition when refused).
GROUP_TOPIC_OPERATIONS: dict[ApiKeyInt, AclOperation] = {
    8: AclOperation.READ,       # OffsetCommit
    9: AclOperation.DESCRIBE,   # OffsetFetch (unauthorized topics are left out of an all-topics answer)
    28: AclOperation.READ,      # TxnOffsetCommit
    47: AclOperation.READ,      # OffsetDelete
}

# APIs whose every request is audited (admin mutations), by key number so that APIs served by
# other modules (SCRAM credentials: 51) are covered as soon as they are registered.
AUDITED_MUTATIONS: frozenset[int] = frozenset({
    ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS, ApiKey.DELETE_RECORDS,
    ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.ALTER_CLIENT_QUOTAS,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS, ApiKey.ELECT_LEADERS, ApiKey.DELETE_GROUPS, ApiKey.OFFSET_DELETE,
    30, 31, 51,
})
API_NAMES: dict[int, str] = {30: "CREATE_ACLS", 31: "DELETE_ACLS", 29: "DESCRIBE_ACLS",
                             50: "DESCRIBE_USER_SCRAM_CREDENTIALS", 51: "ALTER_USER_SCRAM_CREDENTIALS"}
CONFIG_RESOURCE_TYPES = {2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER"}


def api_name(key: int) -> str:
    try:
        return ApiKey(key).name
    except ValueError:
        return API_NAMES.get(key, f"API_{key}")


def client_host(address: str) -> str:
    """``10.0.0.1:5555`` -> ``10.0.0.1`` (``[::1]:5555`` -> ``::1``): what ACL host entries match."""
    host = address.rpartition(":")[0] if ":" in address else address
    return host.strip("[]")


class Authz:
    """The broker's authorizer, ACL cache, ACL store and audit log."""

    def __init__(self, props: dict[str, str], local_dir: Path, broker_id: int) -> None:
        self.config: AuthorizerConfig | None = AuthorizerConfig.from_properties(props)
        self.acls = AclSet()
        self._file = local_dir / ACLS_FILE_NAME
        self._zk: ZooKeeper | None = None
        self._seen_changes: dict[str, set[str]] = {LITERAL_CHANGES: set(), EXTENDED_CHANGES: set()}
        self._lock = asyncio.Lock()
        if self.config is not None and self._file.exists():
            self.acls = AclSet(bindings_from_json(self._file.read_text()))
        # One file per broker; by default beside the broker's first log dir, so brokers sharing a data
        # directory still write separate files.
        directory = Path(props["audit.log.dir"]) if "audit.log.dir" in props else local_dir.parent / "audit"
        self.audit = AuditLog(directory / f"broker-{broker_id}-{AUDIT_FILE_NAME}",
                              int(props.get("audit.log.max.bytes", DEFAULT_AUDIT_MAX_BYTES)),
                              int(props.get("audit.log.backups", DEFAULT_AUDIT_BACKUPS)))

    @property
    def enabled(self) -> bool:
        return self.config is not None

    def close(self) -> None:
        self.audit.close()

    # --- checks -------------------------------------------------------------------------------------

    def allowed(self, req: Request, op: AclOperation, resource_type: ResourceType, name: str,
                *, note: bool = True) -> bool:
        if self.config is None:
            return True
        ok = authorize(self.acls, self.config, req.principal, client_host(req.client_address), op, resource_type, name)
        if not ok and note:
            code = {ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
                    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    }.get(resource_type, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            req.denied.append(AuditResource(resource_type.name, name, int(code), op.name))
        return ok

    def topic(self, req: Request, op: AclOperation, name: str, *, note: bool = True) -> bool:
        return self.allowed(req, op, ResourceType.TOPIC, name, note=note)

    def cluster(self, req: Request, op: AclOperation, *, note: bool = True) -> bool:
        return self.allowed(req, op, ResourceType.CLUSTER, CLUSTER_NAME, note=note)

    def group(self, req: Request, op: AclOperation, group_id: str, *, note: bool = True) -> bool:
        return self.allowed(req, op, ResourceType.GROUP, group_id, note=note)

    def group_error(self, req: Request, group_id: str) -> ErrorCode:
        """The check :data:`GROUP_OPERATIONS` names for this request's API, as an error code."""
        op = GROUP_OPERATIONS.get(req.api_key)
        if op is None:
            raise ValueError(f"{api_name(req.api_key)} is not a group API")
        return ErrorCode.NONE if self.group(req, op, group_id) else ErrorCode.GROUP_AUTHORIZATION_FAILED

    def authorized_operations(self, req: Request, resource_type: ResourceType, name: str = CLUSTER_NAME) -> set[int]:
        """The operation codes the principal may perform on the resource, for Metadata and
        DescribeCluster's ``authorized_operations`` (the codec packs the set into Kafka's 32-bit
        field, bit = code); without an authorizer, every operation of the resource type."""
        ops = SUPPORTED_OPERATIONS.get(resource_type, ())
        return {int(op) for op in ops if self.allowed(req, op, resource_type, name, note=False)}

    def any_topic(self, req: Request, op: AclOperation) -> bool:
        """May the principal perform ``op`` on some topic (Kafka's authorizeByResourceType)?"""
        if self.config is None:
            return True
        return authorize_any(self.acls, self.config, req.principal, client_host(req.client_address), op,
                             ResourceType.TOPIC)

    # --- the audit log ------------------------------------------------------------------------------

    def audit_request(self, req: Request, response: Any) -> None:
        """After a handler: one line for an admin mutation or a request refused anywhere."""
        mutation = req.api_key in AUDITED_MUTATIONS
        if not mutation and not req.denied:
            return
        resources: list[AuditResource] = []
        error = 0
        if mutation and response is not None and not isinstance(response, list):
            with contextlib.suppress(Exception):  # an audit extraction bug must not fail the request
                error, resources = _extract(req, response)
        if not resources:
            resources = list(req.denied)
        elif req.denied:
            # A mutation's resources come from its response: name the operation refused on each, then
            # the refusals the response cannot name (a reassignment refused for CLUSTER ALTER answers
            # per partition, but what was refused is the cluster).
            refused_ops = {(d.resource_type, d.name): d.operation for d in req.denied}
            named = {(r.resource_type, r.name) for r in resources}
            resources = [dataclasses.replace(r, operation=refused_ops[(r.resource_type, r.name)])
                         if r.operation is None and (r.resource_type, r.name) in refused_ops else r for r in resources]
            resources += [d for d in req.denied if (d.resource_type, d.name) not in named]
        self.audit.write(AuditRecord(now_ms(), req.principal, req.client_address, req.client_id,
                                     api_name(req.api_key), req.version, tuple(resources), bool(req.denied), error))

    # --- storage ------------------------------------------------------------------------------------

    async def attach_zookeeper(self, zk: ZooKeeper) -> None:
        """In a cluster: ACLs come from ZooKeeper, and every change notification refreshes them."""
        if self.config is None:
            return
        self._zk = zk
        for path in ZK_TOP_LEVEL:
            await zk.ensure(path)
        # Notifications already there are covered by the full load that follows.
        for path in (LITERAL_CHANGES, EXTENDED_CHANGES):
            self._seen_changes[path].update(await zk.children(path))
        await self._load_zk()
        for path in (LITERAL_CHANGES, EXTENDED_CHANGES):
            zk.watch_children(path, self._on_changes(path))

    async def _load_zk(self) -> None:
        assert self._zk is not None
        acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        dirs = zk_type_dirs()
        # Batched reads: a cluster with thousands of ACL'd resources loads in a few round trips.
        patterns = [ResourcePattern(rt, name, pattern_type)
                    for (_d, pattern_type, rt), names in zip(dirs, await self._zk.children_many([d for d, _p, _r in dirs]),
                                                             strict=True)
                    for name in names]
        for pattern, found in zip(patterns, await self._zk.get_many([zk_path(p) for p in patterns]), strict=True):
            if found is not None:
                acls[pattern] = decode_acls(found[0], zk_path(pattern))
        self.acls = AclSet(acls)
        log.info("loaded %d ACLs from ZooKeeper", len(self.acls))

    def _on_changes(self, path: str) -> Callable[[list[str]], None]:
        def on_change(children: list[str]) -> None:
            seen = self._seen_changes[path]
            fresh = [c for c in sorted(children) if c not in seen]
            # Forget purged notifications (the set stays as small as the directory) and claim the new ones.
            seen.intersection_update(children)
            seen.update(fresh)
            if fresh:
                asyncio.get_running_loop().create_task(self._apply_changes(path, fresh))
        return on_change

    async def _apply_changes(self, path: str, names: list[str]) -> None:
        assert self._zk is not None
        for name in names:
            try:
                found = await self._zk.get(f"{path}/{name}")
                if found is None:
                    continue
                pattern = decode_change_notification(found[0], extended=path == EXTENDED_CHANGES)
                await self._reload_pattern(pattern)
            except (ValueError, KeyError) as exc:
                log.warning("ignoring ACL change notification %s/%s: %s", path, name, exc)

    async def _reload_pattern(self, pattern: ResourcePattern) -> None:
        assert self._zk is not None
        found = await self._zk.get(zk_path(pattern))
        entries = decode_acls(found[0], zk_path(pattern)) if found is not None else frozenset()
        self.acls = self.acls.with_entries(pattern, entries)

    async def _update(self, pattern: ResourcePattern,
                      change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]]) -> None:
        """Apply ``change`` to one pattern's entries: compare-and-set in ZooKeeper, else the local file."""
        if self._zk is None:
            new = change(self.acls.entries(pattern))
            if new != self.acls.entries(pattern):
                updated = self.acls.with_entries(pattern, new)
                write_atomic(self._file, bindings_to_json(dict(updated.patterns())).encode())
                self.acls = updated
            return
        zk = self._zk
        path = zk_path(pattern)
        while True:
            found = await zk.get(path)
            current = decode_acls(found[0], path) if found is not None else frozenset()
            new = change(current)
            if new == current:
                self.acls = self.acls.with_entries(pattern, current)
                return
            try:
                if found is None:
                    await zk.create(path, encode_acls(new), make_parents=True)
                elif new:
                    await zk.set(path, encode_acls(new), found[1].version)
                else:
                    await zk.delete(path, found[1].version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # another broker changed it in between: read again and re-apply
            break
        self.acls = self.acls.with_entries(pattern, new)
        prefix, data = change_notification(pattern)
        await zk.create(prefix, data, sequence=True)
        await self._purge_notifications(prefix.rsplit("/", 1)[0])

    async def _purge_notifications(self, path: str) -> None:
        assert self._zk is not None
        cutoff_ms = now_ms() - NOTIFICATION_MAX_AGE_MS
        for child in await self._zk.children(path):
            found = await self._zk.get(f"{path}/{child}")
            if found is not None and found[1].ctime < cutoff_ms:
                with contextlib.suppress(NoNodeError):
                    await self._zk.delete(f"{path}/{child}")

    # --- the ACL APIs ---------------------------------------------------------------------------------

    async def create_acls(self, req: Request) -> Any:
        result_cls = req.spec.response.AclCreationResult
        creations = list(req.body.creations)
        if self.config is None:
            return req.response(throttle_time_ms=0, results=[
                result_cls(error_code=ErrorCode.SECURITY_DISABLED, error_message=SECURITY_DISABLED_MESSAGE)
                for _ in creations])
        if not self.cluster(req, AclOperation.ALTER):
            return req.response(throttle_time_ms=0, results=[
                result_cls(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None) for _ in creations])
        results = []
        async with self._lock:
            for c in creations:
                code, message = ErrorCode.NONE, None
                try:
                    binding = _binding(c, req.version)
                    validate_binding(binding)
                    await self._update(binding.pattern, functools.partial(_with_entry, binding.entry))
                except KafkaError as exc:
                    code, message = exc.code, exc.message
                except Exception as exc:  # the store failed (ZooKeeper, disk): this ACL was not created
                    log.exception("creating an ACL failed")
                    code, message = ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)
                results.append(result_cls(error_code=code, error_message=message))
        return req.response(throttle_time_ms=0, results=results)

    def describe_acls(self, req: Request) -> Any:
        body = req.body
        resource_cls = req.spec.response.DescribeAclsResource
        acl_cls = resource_cls.AclDescription
        if self.config is None:
            return req.response(throttle_time_ms=0, error_code=ErrorCode.SECURITY_DISABLED,
                                error_message=SECURITY_DISABLED_MESSAGE, resources=[])
        if not self.cluster(req, AclOperation.DESCRIBE):
            return req.response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                error_message=None, resources=[])
        try:
            flt = _filter(body.resource_type_filter, body.resource_name_filter,
                          body.pattern_type_filter if req.version >= 1 else PatternType.LITERAL,
                          body.principal_filter, body.host_filter, body.operation, body.permission_type)
        except KafkaError as exc:
            return req.response(throttle_time_ms=0, error_code=exc.code, error_message=exc.message, resources=[])
        by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
        for b in self.acls.matching(flt):
            by_pattern.setdefault(b.pattern, []).append(b.entry)
        resources = [
            resource_cls(resource_type=int(p.resource_type), resource_name=p.name, pattern_type=int(p.pattern_type),
                         acls=[acl_cls(principal=e.principal, host=e.host, operation=int(e.operation),
                                       permission_type=int(e.permission)) for e in entries])
            for p, entries in by_pattern.items()
            if req.version >= 1 or p.pattern_type == PatternType.LITERAL
        ]
        return req.response(throttle_time_ms=0, error_code=0, error_message=None, resources=resources)

    async def delete_acls(self, req: Request) -> Any:
        result_cls = req.spec.response.DeleteAclsFilterResult
        match_cls = result_cls.DeleteAclsMatchingAcl
        filters = list(req.body.filters)
        if self.config is None:
            return req.response(throttle_time_ms=0, filter_results=[
                result_cls(error_code=ErrorCode.SECURITY_DISABLED, error_message=SECURITY_DISABLED_MESSAGE, matching_acls=[])
                for _ in filters])
        if not self.cluster(req, AclOperation.ALTER):
            return req.response(throttle_time_ms=0, filter_results=[
                result_cls(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None, matching_acls=[])
                for _ in filters])
        results = []
        async with self._lock:
            for f in filters:
                try:
                    flt = _filter(f.resource_type_filter, f.resource_name_filter,
                                  f.pattern_type_filter if req.version >= 1 else PatternType.LITERAL,
                                  f.principal_filter, f.host_filter, f.operation, f.permission_type)
                except KafkaError as exc:
                    results.append(result_cls(error_code=exc.code, error_message=exc.message, matching_acls=[]))
                    continue
                matched = self.acls.matching(flt)
                by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
                for b in matched:
                    by_pattern.setdefault(b.pattern, set()).add(b.entry)
                errors: dict[ResourcePattern, KafkaError] = {}
                for pattern, entries in by_pattern.items():
                    try:
                        await self._update(pattern, functools.partial(_without_entries, frozenset(entries)))
                    except Exception as exc:  # ZooKeeper trouble: report it on the ACLs it concerns
                        errors[pattern] = KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc))
                matching = []
                for b in matched:
                    err = errors.get(b.pattern)
                    matching.append(match_cls(
                        error_code=err.code if err else 0, error_message=err.message if err else None,
                        resource_type=int(b.pattern.resource_type), resource_name=b.pattern.name,
                        pattern_type=int(b.pattern.pattern_type), principal=b.entry.principal, host=b.entry.host,
                        operation=int(b.entry.operation), permission_type=int(b.entry.permission)))
                results.append(result_cls(error_code=0, error_message=None, matching_acls=matching))
        return req.response(throttle_time_ms=0, filter_results=results)


def _with_entry(entry: AccessControlEntry, current: frozenset[AccessControlEntry]) -> frozenset[AccessControlEntry]:
    return current | {entry}


def _without_entries(gone: frozenset[AccessControlEntry],
                     current: frozenset[AccessControlEntry]) -> frozenset[AccessControlEntry]:
    return current - gone


def _enum(enum: type[Any], value: int, what: str) -> Any:
    try:
        return enum(value)
    except ValueError:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown {what} {value}") from None


def _binding(c: Any, version: int) -> AclBinding:
    pattern_type = c.resource_pattern_type if version >= 1 else PatternType.LITERAL
    return AclBinding(
        ResourcePattern(_enum(ResourceType, c.resource_type, "resource type"), c.resource_name,
                        _enum(PatternType, pattern_type, "pattern type")),
        AccessControlEntry(c.principal, c.host, _enum(AclOperation, c.operation, "operation"),
                           _enum(PermissionType, c.permission_type, "permission type")),
    )


def _filter(resource_type: int, name: str | None, pattern_type: int, principal: str | None, host: str | None,
            operation: int, permission: int) -> AclFilter:
    flt = AclFilter(_enum(ResourceType, resource_type, "resource type"), name,
                    _enum(PatternType, pattern_type, "pattern type"), principal, host,
                    _enum(AclOperation, operation, "operation"), _enum(PermissionType, permission, "permission type"))
    flt.validate()
    return flt


# --- what an audit line says about each mutation ----------------------------------------------------

def _extract(req: Request, resp: Any) -> tuple[int, list[AuditResource]]:
    """(request-level error code, resources with their error codes) of a mutation's response."""
    key = req.api_key
    body = req.body
    if key == ApiKey.CREATE_TOPICS:
        return 0, [AuditResource("TOPIC", t.name, t.error_code) for t in resp.topics]
    if key == ApiKey.DELETE_TOPICS:
        return 0, [AuditResource("TOPIC", t.name or str(getattr(t, "topic_id", "")), t.error_code) for t in resp.responses]
    if key == ApiKey.CREATE_PARTITIONS:
        return 0, [AuditResource("TOPIC", t.name, t.error_code) for t in resp.results]
    if key == ApiKey.DELETE_RECORDS:
        return 0, [AuditResource("PARTITION", f"{t.name}-{p.partition_index}", p.error_code)
                   for t in resp.topics for p in t.partitions]
    if key in (ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS):
        return 0, [AuditResource(CONFIG_RESOURCE_TYPES.get(r.resource_type, str(r.resource_type)), r.resource_name,
                                 r.error_code) for r in resp.responses]
    if key == ApiKey.ALTER_CLIENT_QUOTAS:
        return 0, [AuditResource("CLIENT_QUOTA", ",".join(f"{e.entity_type}={e.entity_name}" for e in r.entity),
                                 r.error_code) for r in resp.entries]
    if key == ApiKey.ALTER_PARTITION_REASSIGNMENTS:
        if resp.error_code:
            return resp.error_code, [AuditResource("PARTITION", f"{t.name}-{p.partition_index}", resp.error_code)
                                     for t in body.topics for p in t.partitions]
        wanted = {(t.name, p.partition_index): p.replicas for t in body.topics for p in t.partitions}
        return 0, [AuditResource("PARTITION", f"{t.name}-{p.partition_index}"
                                 + (" cancel" if wanted.get((t.name, p.partition_index)) is None else
                                    f" -> {wanted[(t.name, p.partition_index)]}"), p.error_code)
                   for t in resp.responses for p in t.partitions]
    if key == ApiKey.ELECT_LEADERS:
        top = getattr(resp, "error_code", 0)   # v0 has no top-level error
        kind = "UNCLEAN" if getattr(body, "election_type", 0) == 1 else "PREFERRED"
        return top, [AuditResource("PARTITION", f"{r.topic}-{p.partition_id} {kind}", p.error_code)
                     for r in resp.replica_election_results for p in r.partition_result]
    if key == ApiKey.DELETE_GROUPS:
        return 0, [AuditResource("GROUP", r.group_id, r.error_code) for r in resp.results]
    if key == ApiKey.OFFSET_DELETE:
        # The group (with the request-level error), then each partition whose offset was to go.
        return resp.error_code, [AuditResource("GROUP", body.group_id, resp.error_code)] + [
            AuditResource("GROUP_OFFSET", f"{body.group_id}/{t.name}-{p.partition_index}", p.error_code)
            for t in resp.topics for p in t.partitions]
    if key == 30:
        return 0, [AuditResource("ACL", _describe_creation(c), r.error_code)
                   for c, r in zip(body.creations, resp.results, strict=False)]
    if key == 31:
        out = []
        for f, r in zip(body.filters, resp.filter_results, strict=False):
            if r.error_code or not r.matching_acls:
                out.append(AuditResource("ACL_FILTER", json.dumps(f.to_dict()), r.error_code))
            out += [AuditResource("ACL", _describe_match(m), m.error_code) for m in r.matching_acls]
        return 0, out
    if key == 51:
        return 0, [AuditResource("USER", r.user, r.error_code) for r in resp.results]
    return 0, []


def _describe_creation(c: Any) -> str:
    try:
        return f"{_binding(c, 1).pattern} {_binding(c, 1).entry}"
    except KafkaError:
        return json.dumps(c.to_dict())


def _describe_match(m: Any) -> str:
    try:
        pattern = ResourcePattern(ResourceType(m.resource_type), m.resource_name, PatternType(m.pattern_type))
        entry = AccessControlEntry(m.principal, m.host, AclOperation(m.operation), PermissionType(m.permission_type))
        return f"{pattern} {entry}"
    except ValueError:
        return json.dumps(m.to_dict())


class AuditLog:
    """A rotating JSON-lines file, written by a logging thread: the event loop only enqueues a line."""

    def __init__(self, path: Path, max_bytes: int, backups: int) -> None:
        self.path = path
        self._max_bytes = max_bytes
        self._backups = backups
        self._logger: logging.Logger | None = None
        self._listener: logging.handlers.QueueListener | None = None
        self._file_handler: logging.Handler | None = None

    def _open(self) -> logging.Logger:
        # Opened on first use, so brokers that never audit anything leave no empty file behind.
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.handlers.RotatingFileHandler(self.path, maxBytes=self._max_bytes, backupCount=self._backups,
                                                       encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(message)s"))
        q: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
        self._listener = logging.handlers.QueueListener(q, handler)
        self._listener.start()
        self._file_handler = handler
        logger = logging.getLogger(f"headwater.audit.{id(self)}")
        logger.propagate = False
        logger.setLevel(logging.INFO)
        logger.addHandler(logging.handlers.QueueHandler(q))
        self._logger = logger
        return logger

    def write(self, record: AuditRecord) -> None:
        logger = self._logger or self._open()
        logger.info(record.to_line())

    def close(self) -> None:
        if self._listener is not None:
            self._listener.stop()  # drains the queue first
            self._listener = None
        if self._file_handler is not None:
            self._file_handler.close()
            self._file_handler = None
        if self._logger is not None:
            for h in list(self._logger.handlers):
                self._logger.removeHandler(h)
            self._logger = None
