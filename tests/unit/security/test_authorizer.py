"""The authorizer's rules: implication, DENY wins, prefixed and wildcard patterns, super users, allow.everyone."""

from __future__ import annotations

import pytest

from headwater.protocol.errors import KafkaError
from headwater.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    validate_binding,
)
from headwater.security.authorizer import AclSet, AuthorizerConfig, ConfigError, authorize, authorize_any

Op = AclOperation
T = ResourceType
ALLOW, DENY = PermissionType.ALLOW, PermissionType.DENY
STRICT = AuthorizerConfig()


def lit(name: str, rt: ResourceType = T.TOPIC) -> ResourcePattern:
    return ResourcePattern(rt, name, PatternType.LITERAL)


def pre(name: str, rt: ResourceType = T.TOPIC) -> ResourcePattern:
    return ResourcePattern(rt, name, PatternType.PREFIXED)


def ace(principal: str, op: AclOperation, perm: PermissionType = ALLOW, host: str = "*") -> AccessControlEntry:
    return AccessControlEntry(principal, host, op, perm)


def can(acls: AclSet, principal: str, op: AclOperation, name: str, rt: ResourceType = T.TOPIC,
        host: str = "10.0.0.1", config: AuthorizerConfig = STRICT) -> bool:
    return authorize(acls, config, principal, host, op, rt, name)


def test_no_acls_denies_by_default_and_allow_everyone_allows() -> None:
    empty = AclSet()
    assert not can(empty, "User:alice", Op.READ, "t")
    assert can(empty, "User:alice", Op.READ, "t", config=AuthorizerConfig(allow_everyone_if_no_acl_found=True))


def test_allow_everyone_applies_only_to_resources_without_any_acl() -> None:
    acls = AclSet({lit("t"): {ace("User:bob", Op.READ)}})
    everyone = AuthorizerConfig(allow_everyone_if_no_acl_found=True)
    assert not can(acls, "User:alice", Op.READ, "t", config=everyone)  # t has ACLs, none for alice
    assert can(acls, "User:alice", Op.READ, "other", config=everyone)


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.ALL])
def test_describe_is_implied(granted: AclOperation) -> None:
    acls = AclSet({lit("t"): {ace("User:alice", granted)}})
    assert can(acls, "User:alice", Op.DESCRIBE, "t")


@pytest.mark.parametrize("granted", [Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.IDEMPOTENT_WRITE])
def test_describe_is_not_implied_by_others(granted: AclOperation) -> None:
    acls = AclSet({lit("t"): {ace("User:alice", granted)}})
    assert not can(acls, "User:alice", Op.DESCRIBE, "t")


def test_describe_configs_implied_by_alter_configs_only() -> None:
    acls = AclSet({lit("t"): {ace("User:alice", Op.ALTER_CONFIGS)}, lit("u"): {ace("User:alice", Op.ALTER)}})
    assert can(acls, "User:alice", Op.DESCRIBE_CONFIGS, "t")
    assert not can(acls, "User:alice", Op.DESCRIBE_CONFIGS, "u")
    assert not can(acls, "User:alice", Op.ALTER_CONFIGS, "u")


def test_read_does_not_imply_write() -> None:
    acls = AclSet({lit("t"): {ace("User:alice", Op.READ)}})
    assert can(acls, "User:alice", Op.READ, "t")
    assert not can(acls, "User:alice", Op.WRITE, "t")


def test_deny_wins_over_allow_on_any_pattern() -> None:
    acls = AclSet({
        lit("t"): {ace("User:alice", Op.ALL)},
        pre("t"): {ace("User:alice", Op.WRITE, DENY)},
    })
    assert can(acls, "User:alice", Op.READ, "t")
    assert not can(acls, "User:alice", Op.WRITE, "t")


def test_deny_all_refuses_everything_and_deny_is_not_implied() -> None:
    acls = AclSet({lit("t"): {ace("User:alice", Op.ALL), ace("User:alice", Op.ALL, DENY, host="10.0.0.9")}})
    assert can(acls, "User:alice", Op.WRITE, "t", host="10.0.0.1")
    assert not can(acls, "User:alice", Op.WRITE, "t", host="10.0.0.9")
    # DENY READ does not deny DESCRIBE (Kafka's implication is for ALLOW only).
    acls = AclSet({lit("t"): {ace("User:alice", Op.ALL), ace("User:alice", Op.READ, DENY)}})
    assert can(acls, "User:alice", Op.DESCRIBE, "t")
    assert not can(acls, "User:alice", Op.READ, "t")


def test_prefixed_patterns_match_names_that_start_with_them() -> None:
    acls = AclSet({pre("orders-"): {ace("User:alice", Op.READ)}, pre("o"): {ace("User:bob", Op.READ)}})
    assert can(acls, "User:alice", Op.READ, "orders-eu")
    assert can(acls, "User:alice", Op.READ, "orders-")
    assert not can(acls, "User:alice", Op.READ, "orders")
    assert can(acls, "User:bob", Op.READ, "orders")
    assert not can(acls, "User:alice", Op.READ, "orders-eu", rt=T.GROUP)


def test_wildcard_resource_principal_and_host() -> None:
    acls = AclSet({lit("*"): {ace("User:*", Op.READ)}, lit("t"): {ace("User:alice", Op.WRITE, host="10.0.0.1")}})
    assert can(acls, "User:anyone", Op.READ, "whatever")
    assert can(acls, "User:alice", Op.WRITE, "t", host="10.0.0.1")
    assert not can(acls, "User:alice", Op.WRITE, "t", host="10.0.0.2")
    # A literal '*' name in a request is not a pattern: it only matches ACLs on '*' itself.
    assert not can(acls, "User:alice", Op.WRITE, "*")


def test_super_users_bypass_acls_including_deny() -> None:
    acls = AclSet({lit("t"): {ace("User:*", Op.ALL, DENY)}})
    config = AuthorizerConfig(super_users=frozenset({"User:admin"}))
    assert can(acls, "User:admin", Op.WRITE, "t", config=config)
    assert not can(acls, "User:alice", Op.WRITE, "t", config=config)


def test_cluster_resource() -> None:
    acls = AclSet({lit("kafka-cluster", T.CLUSTER): {ace("User:ops", Op.ALTER)}})
    assert can(acls, "User:ops", Op.ALTER, "kafka-cluster", rt=T.CLUSTER)
    assert can(acls, "User:ops", Op.DESCRIBE, "kafka-cluster", rt=T.CLUSTER)
    assert not can(acls, "User:ops", Op.CLUSTER_ACTION, "kafka-cluster", rt=T.CLUSTER)
    assert not can(acls, "User:dev", Op.ALTER, "kafka-cluster", rt=T.CLUSTER)


def test_authorize_any_for_idempotent_producers() -> None:
    acls = AclSet({lit("t"): {ace("User:alice", Op.WRITE)}, pre("x"): {ace("User:bob", Op.WRITE)},
                   lit("*"): {ace("User:bob", Op.WRITE, DENY)}})
    assert authorize_any(acls, STRICT, "User:alice", "h", Op.WRITE, T.TOPIC)
    assert not authorize_any(acls, STRICT, "User:bob", "h", Op.WRITE, T.TOPIC)  # wildcard DENY covers it
    assert not authorize_any(acls, STRICT, "User:carol", "h", Op.WRITE, T.TOPIC)
    assert authorize_any(AclSet(), AuthorizerConfig(allow_everyone_if_no_acl_found=True), "User:c", "h", Op.WRITE, T.TOPIC)


def test_with_entries_replaces_and_removes() -> None:
    acls = AclSet().with_entries(lit("t"), {ace("User:a", Op.READ)})
    assert len(acls) == 1 and can(acls, "User:a", Op.READ, "t")
    acls = acls.with_entries(lit("t"), set())
    assert len(acls) == 0 and not can(acls, "User:a", Op.READ, "t")


def test_filters() -> None:
    acls = AclSet({lit("orders"): {ace("User:a", Op.READ)}, pre("ord"): {ace("User:b", Op.WRITE)},
                   lit("*"): {ace("User:c", Op.READ)}, lit("other"): {ace("User:a", Op.READ)}})
    match = AclFilter(T.TOPIC, "orders", PatternType.MATCH)
    assert {b.entry.principal for b in acls.matching(match)} == {"User:a", "User:b", "User:c"}
    assert len(acls.matching(AclFilter(T.TOPIC, "orders", PatternType.LITERAL))) == 1
    assert len(acls.matching(AclFilter(principal="User:a"))) == 2
    assert len(acls.matching(AclFilter(operation=Op.WRITE))) == 1
    assert acls.matching(AclFilter(T.GROUP)) == []
    with pytest.raises(KafkaError):
        AclFilter(resource_type=T.UNKNOWN).validate()


@pytest.mark.parametrize("binding", [
    AclBinding(ResourcePattern(T.CLUSTER, "other", PatternType.LITERAL), ace("User:a", Op.ALTER)),
    AclBinding(ResourcePattern(T.TOPIC, "", PatternType.LITERAL), ace("User:a", Op.READ)),
    AclBinding(ResourcePattern(T.TOPIC, "t", PatternType.MATCH), ace("User:a", Op.READ)),
    AclBinding(ResourcePattern(T.ANY, "t", PatternType.LITERAL), ace("User:a", Op.READ)),
    AclBinding(ResourcePattern(T.TOPIC, "t", PatternType.LITERAL), ace("alice", Op.READ)),
    AclBinding(ResourcePattern(T.TOPIC, "t", PatternType.LITERAL), ace("User:a", Op.ANY)),
    AclBinding(ResourcePattern(T.TOPIC, "t", PatternType.LITERAL), ace("User:a", Op.READ, PermissionType.ANY)),
])
def test_invalid_bindings_are_refused(binding: AclBinding) -> None:
    with pytest.raises(KafkaError):
        validate_binding(binding)


def test_config_from_properties() -> None:
    assert AuthorizerConfig.from_properties({}) is None
    cfg = AuthorizerConfig.from_properties({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                                            "super.users": "User:a; User:b", "allow.everyone.if.no.acl.found": "true"})
    assert cfg == AuthorizerConfig(frozenset({"User:a", "User:b"}), True)
    with pytest.raises(ConfigError):
        AuthorizerConfig.from_properties({"authorizer.class.name": "com.example.Other"})
    with pytest.raises(ConfigError):
        AuthorizerConfig.from_properties({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                                          "super.users": "admin"})
