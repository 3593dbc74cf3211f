"""The ACL authorizer: a pure function of (principal, host, operation, resource) and the ACL set.

Kafka's AclAuthorizer rules, in the order they apply:

1. A super user (``super.users``) may do anything.
2. The ACLs that apply to a resource are those on its literal name, on the wildcard name ``*``,
   and on every PREFIXED pattern its name starts with.
3. If no ACL applies to the resource at all (for any principal), the answer is
   ``allow.everyone.if.no.acl.found`` (false by default).
4. A DENY entry that matches the principal (or ``User:*``), the host (or ``*``) and the operation
   (or ALL) refuses: DENY wins over any ALLOW.
5. Otherwise an ALLOW entry that matches allows. An ALLOW of READ, WRITE, DELETE or ALTER also
   allows DESCRIBE, and an ALLOW of ALTER_CONFIGS also allows DESCRIBE_CONFIGS (implication holds for
   ALLOW only, never for DENY).
6. Nothing matched: refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from headwater.security.acl import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AccessControlEntry,
    AclBinding,
    AclFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)

AUTHORIZER_CLASS_NAMES = frozenset({
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
    "headwater.security.authorizer.AclAuthorizer",
})

# ALLOW of any of these also allows the key operation.
_IMPLIED_BY: dict[AclOperation, tuple[AclOperation, ...]] = {
    AclOperation.DESCRIBE: (AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                            AclOperation.ALTER, AclOperation.ALL),
    AclOperation.DESCRIBE_CONFIGS: (AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS, AclOperation.ALL),
}


class ConfigError(ValueError):
    """A broker property of the authorizer that cannot be used."""


@dataclass(frozen=True, slots=True)
class AuthorizerConfig:
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> AuthorizerConfig | None:
        """The authorizer's settings, or None when no authorizer is configured (everything allowed)."""
        name = props.get("authorizer.class.name", "").strip()
        if not name:
            return None
        if name not in AUTHORIZER_CLASS_NAMES:
            raise ConfigError(f"authorizer.class.name={name!r} is not supported; use one of {sorted(AUTHORIZER_CLASS_NAMES)}")
        supers = frozenset(s.strip() for s in props.get("super.users", "").split(";") if s.strip())
        for s in supers:
            if ":" not in s:
                raise ConfigError(f"super.users entry {s!r} is not Type:name (e.g. User:admin)")
        everyone = props.get("allow.everyone.if.no.acl.found", "false").strip().lower()
        if everyone not in ("true", "false"):
            raise ConfigError(f"allow.everyone.if.no.acl.found={everyone!r} is not true or false")
        return cls(supers, everyone == "true")


class AclSet:
    """An immutable index of every ACL: literal entries by (type, name), prefixed ones by (type, prefix).

    A lookup costs one dict probe per literal candidate and one per prefix length of the name, so it
    does not grow with the number of ACLs.
    """

    __slots__ = ("_by_pattern", "_literal", "_prefix_lengths", "_prefixed", "_types")

    def __init__(self, acls: Mapping[ResourcePattern, Iterable[AccessControlEntry]] | None = None) -> None:
        self._by_pattern: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._literal: dict[tuple[ResourceType, str], frozenset[AccessControlEntry]] = {}
        self._prefixed: dict[tuple[ResourceType, str], frozenset[AccessControlEntry]] = {}
        self._prefix_lengths: dict[ResourceType, frozenset[int]] = {}
        self._types: set[ResourceType] = set()
        lengths: dict[ResourceType, set[int]] = {}
        for pattern, entries in (acls or {}).items():
            frozen = frozenset(entries)
            if not frozen:
                continue
            self._by_pattern[pattern] = frozen
            self._types.add(pattern.resource_type)
            key = (pattern.resource_type, pattern.name)
            if pattern.pattern_type == PatternType.LITERAL:
                self._literal[key] = frozen
            elif pattern.pattern_type == PatternType.PREFIXED:
                self._prefixed[key] = frozen
                lengths.setdefault(pattern.resource_type, set()).add(len(pattern.name))
        self._prefix_lengths = {rt: frozenset(ls) for rt, ls in lengths.items()}

    def __len__(self) -> int:
        return sum(len(e) for e in self._by_pattern.values())

    def patterns(self) -> Mapping[ResourcePattern, frozenset[AccessControlEntry]]:
        return self._by_pattern

    def entries(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        return self._by_pattern.get(pattern, frozenset())

    def with_entries(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> AclSet:
        """A copy with this pattern's entries replaced (an empty set removes the pattern)."""
        updated = dict(self._by_pattern)
        frozen = frozenset(entries)
        if frozen:
            updated[pattern] = frozen
        else:
            updated.pop(pattern, None)
        return AclSet(updated)

    def bindings(self) -> Iterator[AclBinding]:
        for pattern, entries in sorted(self._by_pattern.items()):
            for e in sorted(entries):
                yield AclBinding(pattern, e)

    def matching(self, flt: AclFilter) -> list[AclBinding]:
        return [b for b in self.bindings() if flt.matches(b)]

    def applicable(self, resource_type: ResourceType, name: str) -> list[frozenset[AccessControlEntry]]:
        """The entry sets of every pattern that applies to this literal resource (rule 2)."""
        out = []
        found = self._literal.get((resource_type, name))
        if found is not None:
            out.append(found)
        if name != WILDCARD:
            found = self._literal.get((resource_type, WILDCARD))
            if found is not None:
                out.append(found)
        for length in self._prefix_lengths.get(resource_type, ()):
            if length <= len(name):
                found = self._prefixed.get((resource_type, name[:length]))
                if found is not None:
                    out.append(found)
        return out

    def has_type(self, resource_type: ResourceType) -> bool:
        return resource_type in self._types


def _entry_matches(e: AccessControlEntry, principal: str, host: str) -> bool:
    return (e.principal == principal or e.principal == WILDCARD_PRINCIPAL) and (e.host == host or e.host == WILDCARD)


def authorize(acls: AclSet, config: AuthorizerConfig, principal: str, host: str, operation: AclOperation,
              resource_type: ResourceType, name: str) -> bool:
    """May ``principal`` connecting from ``host`` perform ``operation`` on the named resource?"""
    if principal in config.super_users:
        return True
    sets = acls.applicable(resource_type, name)
    if not sets:
        return config.allow_everyone_if_no_acl_found
    for entries in sets:
        for e in entries:
            if e.permission == PermissionType.DENY and (e.operation == operation or e.operation == AclOperation.ALL) \
                    and _entry_matches(e, principal, host):
                return False
    allowing = _IMPLIED_BY.get(operation, (operation, AclOperation.ALL))
    for entries in sets:
        for e in entries:
            if e.permission == PermissionType.ALLOW and e.operation in allowing and _entry_matches(e, principal, host):
                return True
    return False


def authorize_any(acls: AclSet, config: AuthorizerConfig, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType) -> bool:
    """Kafka's ``authorizeByResourceType``: may the principal perform the operation on SOME resource of the type?

    True when some ALLOW (of the operation or ALL) for the principal and host is not cancelled by a
    DENY for them whose pattern covers it (the wildcard, the same literal name, or a prefix of it).
    With ``allow.everyone.if.no.acl.found`` and no ACL of the type at all, true as well.
    """
    if principal in config.super_users:
        return True
    if not acls.has_type(resource_type):
        return config.allow_everyone_if_no_acl_found
    denies: list[ResourcePattern] = []
    allows: list[ResourcePattern] = []
    for pattern, entries in acls.patterns().items():
        if pattern.resource_type != resource_type:
            continue
        for e in entries:
            if e.operation not in (operation, AclOperation.ALL) or not _entry_matches(e, principal, host):
                continue
            (denies if e.permission == PermissionType.DENY else allows).append(pattern)
    return any(not any(_covers(d, a) for d in denies) for a in allows)


def _covers(deny: ResourcePattern, allow: ResourcePattern) -> bool:
    if deny.pattern_type == PatternType.LITERAL:
        if deny.name == WILDCARD:
            return True
        return allow.pattern_type == PatternType.LITERAL and allow.name == deny.name
    return allow.name.startswith(deny.name)
