"""Kafka's ACL model: resource patterns, access control entries, bindings, filters, and their codecs.

Enum values are Kafka's wire values (``org.apache.kafka.common.acl`` / ``common.resource``), so a
CreateAcls creation decodes straight into an :class:`AclBinding`. The ZooKeeper documents are the
ones Kafka's AclAuthorizer writes (``/kafka-acl/<ResourceType>/<name>`` for LITERAL patterns,
``/kafka-acl-extended/prefixed/<ResourceType>/<name>`` for PREFIXED ones), so a headwater cluster and
Kafka tooling read each other's ACLs.

Rules:
- A binding (something stored) has concrete values only: no ANY, no MATCH, no UNKNOWN; a CLUSTER
  resource is named ``kafka-cluster``; names are not empty; principals are ``Type:name``.
- A filter may use ANY (match everything) and, for pattern types, MATCH (every pattern that would
  apply to the literal name given, Kafka's semantics); a ``None`` string matches anything.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from headwater.protocol.errors import ErrorCode, KafkaError

CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
ACL_VERSION = 1


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class PermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CONCRETE_RESOURCE_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID,
                           ResourceType.DELEGATION_TOKEN, ResourceType.USER)
CONCRETE_PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)

# ZooKeeper / CLI names: Kafka writes PascalCase and reads either case.
_RESOURCE_ZK_NAMES = {
    ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group", ResourceType.CLUSTER: "Cluster",
    ResourceType.TRANSACTIONAL_ID: "TransactionalId", ResourceType.DELEGATION_TOKEN: "DelegationToken",
    ResourceType.USER: "User",
}
_OPERATION_ZK_NAMES = {
    AclOperation.ALL: "All", AclOperation.READ: "Read", AclOperation.WRITE: "Write", AclOperation.CREATE: "Create",
    AclOperation.DELETE: "Delete", AclOperation.ALTER: "Alter", AclOperation.DESCRIBE: "Describe",
    AclOperation.CLUSTER_ACTION: "ClusterAction", AclOperation.DESCRIBE_CONFIGS: "DescribeConfigs",
    AclOperation.ALTER_CONFIGS: "AlterConfigs", AclOperation.IDEMPOTENT_WRITE: "IdempotentWrite",
    AclOperation.CREATE_TOKENS: "CreateTokens", AclOperation.DESCRIBE_TOKENS: "DescribeTokens",
}
_PERMISSION_ZK_NAMES = {PermissionType.ALLOW: "Allow", PermissionType.DENY: "Deny"}


def _lookup(table: dict[str, int], text: str, what: str) -> int:
    key = text.replace("_", "").replace("-", "").lower()
    found = table.get(key)
    if found is None:
        raise ValueError(f"unknown {what} {text!r}")
    return found


def _table(names: Mapping[Any, str], enum: type[IntEnum]) -> dict[str, int]:
    out = {name.lower(): int(value) for value, name in names.items()}
    out.update({member.name.replace("_", "").lower(): int(member) for member in enum})
    return out


_RESOURCE_BY_NAME = _table(_RESOURCE_ZK_NAMES, ResourceType)
_OPERATION_BY_NAME = _table(_OPERATION_ZK_NAMES, AclOperation)
_PERMISSION_BY_NAME = _table(_PERMISSION_ZK_NAMES, PermissionType)
_PATTERN_BY_NAME = {m.name.lower(): int(m) for m in PatternType}


def resource_type_named(text: str) -> ResourceType:
    """``Topic``, ``TOPIC``, ``transactional-id`` ... -> the enum (either case, as Kafka reads it)."""
    return ResourceType(_lookup(_RESOURCE_BY_NAME, text, "resource type"))


def operation_named(text: str) -> AclOperation:
    return AclOperation(_lookup(_OPERATION_BY_NAME, text, "operation"))


def permission_named(text: str) -> PermissionType:
    return PermissionType(_lookup(_PERMISSION_BY_NAME, text, "permission type"))


def pattern_type_named(text: str) -> PatternType:
    return PatternType(_lookup(_PATTERN_BY_NAME, text, "pattern type"))


def zk_resource_name(rt: ResourceType) -> str:
    return _RESOURCE_ZK_NAMES[rt]


def zk_operation_name(op: AclOperation) -> str:
    return _OPERATION_ZK_NAMES[op]


def parse_principal(principal: str) -> tuple[str, str]:
    """``User:alice`` -> (``User``, ``alice``); Kafka's rule: a type, a colon, a name (which may hold colons)."""
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        raise ValueError(f"expected a string in format principalType:principalName but got {principal!r}")
    return kind, name


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
                f"patternType={self.pattern_type.name})")


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission: PermissionType

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission.name})")


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


def validate_binding(binding: AclBinding) -> None:
    """Kafka's checks on an ACL to create; raises KafkaError(INVALID_REQUEST) with Kafka's wording."""
    p, e = binding.pattern, binding.entry
    if p.resource_type not in CONCRETE_RESOURCE_TYPES or p.pattern_type not in CONCRETE_PATTERN_TYPES \
            or e.operation in (AclOperation.ANY, AclOperation.UNKNOWN) \
            or e.permission not in (PermissionType.ALLOW, PermissionType.DENY):
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid ACL creation: {p} {e}")
    if not p.name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid empty resource name specified")
    if p.resource_type == ResourceType.CLUSTER and p.name != CLUSTER_NAME:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    try:
        parse_principal(e.principal)
    except ValueError as exc:
        raise KafkaError(ErrorCode.INVALID_REQUEST, str(exc)) from None
    if not e.host:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid empty host specified")


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls / DeleteAcls filter. ``None`` strings match anything; ANY enums match anything."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: PermissionType = PermissionType.ANY

    def validate(self) -> None:
        """UNKNOWN anywhere is a bad filter (Kafka answers INVALID_REQUEST)."""
        if PatternType.UNKNOWN in (self.pattern_type,) or ResourceType.UNKNOWN in (self.resource_type,) \
                or AclOperation.UNKNOWN in (self.operation,) or PermissionType.UNKNOWN in (self.permission,):
            raise KafkaError(ErrorCode.INVALID_REQUEST, "The filter contains UNKNOWN elements")

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type == PatternType.MATCH:
            # Every stored pattern that would apply to the literal name given (or any, without a name).
            if self.name is None:
                return True
            if pattern.pattern_type == PatternType.LITERAL:
                return pattern.name in (self.name, WILDCARD)
            return pattern.pattern_type == PatternType.PREFIXED and self.name.startswith(pattern.name)
        if self.pattern_type != PatternType.ANY and self.pattern_type != pattern.pattern_type:
            return False
        return self.name is None or self.name == pattern.name

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and (self.operation == AclOperation.ANY or self.operation == entry.operation)
                and (self.permission == PermissionType.ANY or self.permission == entry.permission))

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)


# --- ZooKeeper documents and paths -----------------------------------------------------------------

LITERAL_ROOT = "/kafka-acl"
EXTENDED_ROOT = "/kafka-acl-extended"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
ZK_TOP_LEVEL = (LITERAL_ROOT, f"{EXTENDED_ROOT}/prefixed", LITERAL_CHANGES, EXTENDED_CHANGES)


def zk_path(pattern: ResourcePattern) -> str:
    rt = zk_resource_name(pattern.resource_type)
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{LITERAL_ROOT}/{rt}/{pattern.name}"
    return f"{EXTENDED_ROOT}/{pattern.pattern_type.name.lower()}/{rt}/{pattern.name}"


def zk_type_dirs() -> list[tuple[str, PatternType, ResourceType]]:
    """Every ``.../<ResourceType>`` directory under which ACL znodes live."""
    out = []
    for rt, name in _RESOURCE_ZK_NAMES.items():
        out.append((f"{LITERAL_ROOT}/{name}", PatternType.LITERAL, rt))
        out.append((f"{EXTENDED_ROOT}/prefixed/{name}", PatternType.PREFIXED, rt))
    return out


def change_notification(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(sequential path prefix, data) of the change notification Kafka writes for this pattern."""
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{LITERAL_CHANGES}/{CHANGE_PREFIX}", f"{pattern.resource_type.name}:{pattern.name}".encode()
    doc = {"version": 1, "resourceType": pattern.resource_type.name, "name": pattern.name,
           "patternType": pattern.pattern_type.name}
    return f"{EXTENDED_CHANGES}/{CHANGE_PREFIX}", json.dumps(doc, separators=(",", ":")).encode()


def decode_change_notification(data: bytes, extended: bool) -> ResourcePattern:
    text = data.decode()
    if not extended:
        kind, sep, name = text.partition(":")
        if not sep:
            raise ValueError(f"bad ACL change notification {text!r}")
        return ResourcePattern(resource_type_named(kind), name, PatternType.LITERAL)
    doc = json.loads(text)
    return ResourcePattern(resource_type_named(str(doc["resourceType"])), str(doc["name"]),
                           pattern_type_named(str(doc["patternType"])))


def encode_acls(entries: frozenset[AccessControlEntry] | set[AccessControlEntry]) -> bytes:
    acls = [{"principal": e.principal, "permissionType": _PERMISSION_ZK_NAMES[e.permission],
             "operation": zk_operation_name(e.operation), "host": e.host} for e in sorted(entries)]
    return json.dumps({"version": ACL_VERSION, "acls": acls}, separators=(",", ":")).encode()


def decode_acls(data: bytes | str, path: str = "") -> frozenset[AccessControlEntry]:
    """An ACL znode's entries; empty data (a node being deleted) has none."""
    if not data:
        return frozenset()
    doc = json.loads(data)
    if not isinstance(doc, dict) or doc.get("version") != ACL_VERSION:
        raise ValueError(f"ACL znode {path}: unsupported version in {doc!r}")
    out = set()
    for item in doc.get("acls", []):
        out.add(AccessControlEntry(str(item["principal"]), str(item["host"]), operation_named(str(item["operation"])),
                                   permission_named(str(item["permissionType"]))))
    return frozenset(out)


def bindings_to_json(acls: dict[ResourcePattern, frozenset[AccessControlEntry]]) -> str:
    """The local (standalone) store's document: one object per pattern, keyed like its znode path."""
    doc = {zk_path(p): json.loads(encode_acls(entries)) for p, entries in sorted(acls.items()) if entries}
    return json.dumps(doc, indent=1, sort_keys=True)


def bindings_from_json(text: str) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
    doc = json.loads(text)
    out: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
    for path, acl_doc in doc.items():
        out[pattern_from_zk_path(path)] = decode_acls(json.dumps(acl_doc), path)
    return out


def pattern_from_zk_path(path: str) -> ResourcePattern:
    parts = path.strip("/").split("/", 3)
    if path.startswith(LITERAL_ROOT + "/") and len(parts) >= 3:
        rt_name, name = path[len(LITERAL_ROOT) + 1:].split("/", 1)
        return ResourcePattern(resource_type_named(rt_name), name, PatternType.LITERAL)
    if path.startswith(EXTENDED_ROOT + "/") and len(parts) == 4:
        return ResourcePattern(resource_type_named(parts[2]), parts[3], pattern_type_named(parts[1]))
    raise ValueError(f"not an ACL znode path: {path!r}")
