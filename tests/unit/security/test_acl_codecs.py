"""ZooKeeper documents, paths and change notifications of ACLs, as Kafka's AclAuthorizer writes them."""

from __future__ import annotations

import json

from headwater.security.acl import (
    AccessControlEntry,
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
    pattern_from_zk_path,
    zk_path,
)
from headwater.security.audit import AuditRecord, AuditResource


def test_paths() -> None:
    lit = ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", PatternType.LITERAL)
    pre = ResourcePattern(ResourceType.TOPIC, "orders-", PatternType.PREFIXED)
    assert zk_path(lit) == "/kafka-acl/TransactionalId/tx"
    assert zk_path(pre) == "/kafka-acl-extended/prefixed/Topic/orders-"
    assert pattern_from_zk_path(zk_path(lit)) == lit
    assert pattern_from_zk_path(zk_path(pre)) == pre


def test_acl_document_round_trip_and_kafka_spelling() -> None:
    entries = frozenset({AccessControlEntry("User:alice", "*", AclOperation.READ, PermissionType.ALLOW),
                         AccessControlEntry("User:bob", "10.0.0.1", AclOperation.CLUSTER_ACTION, PermissionType.DENY)})
    data = encode_acls(entries)
    doc = json.loads(data)
    assert doc["version"] == 1
    assert {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"} in doc["acls"]
    assert {"principal": "User:bob", "permissionType": "Deny", "operation": "ClusterAction", "host": "10.0.0.1"} in doc["acls"]
    assert decode_acls(data) == entries
    # Readers also accept upper-case names.
    upper = b'{"version":1,"acls":[{"principal":"User:a","permissionType":"ALLOW","operation":"IDEMPOTENT_WRITE","host":"*"}]}'
    assert decode_acls(upper) == {AccessControlEntry("User:a", "*", AclOperation.IDEMPOTENT_WRITE, PermissionType.ALLOW)}


def test_change_notifications() -> None:
    lit = ResourcePattern(ResourceType.TOPIC, "foo", PatternType.LITERAL)
    pre = ResourcePattern(ResourceType.GROUP, "g-", PatternType.PREFIXED)
    path, data = change_notification(lit)
    assert path == "/kafka-acl-changes/acl_changes_" and data == b"TOPIC:foo"
    assert decode_change_notification(data, extended=False) == lit
    assert decode_change_notification(b"Topic:foo", extended=False) == lit
    path, data = change_notification(pre)
    assert path == "/kafka-acl-extended-changes/acl_changes_"
    assert json.loads(data) == {"version": 1, "resourceType": "GROUP", "name": "g-", "patternType": "PREFIXED"}
    assert decode_change_notification(data, extended=True) == pre


def test_local_store_document_round_trip() -> None:
    acls = {ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL):
            frozenset({AccessControlEntry("User:ops", "*", AclOperation.ALTER, PermissionType.ALLOW)})}
    assert bindings_from_json(bindings_to_json(acls)) == acls


def test_audit_line() -> None:
    rec = AuditRecord(0, "User:ops", "127.0.0.1:5000", "cli", "ALTER_PARTITION_REASSIGNMENTS", 0,
                      (AuditResource("CLUSTER", "kafka-cluster", 31, "ALTER"),), denied=True)
    doc = json.loads(rec.to_line())
    assert doc["time"] == "1970-01-01T00:00:00.000Z"
    assert doc["principal"] == "User:ops" and doc["outcome"] == "denied" and doc["error_code"] == 31
    assert doc["resources"] == [{"type": "CLUSTER", "name": "kafka-cluster", "error_code": 31,
                                 "error": "CLUSTER_AUTHORIZATION_FAILED", "operation": "ALTER"}]
    ok = AuditRecord(0, "User:a", "h:1", None, "CREATE_TOPICS", 7, (AuditResource("TOPIC", "t"),))
    assert json.loads(ok.to_line())["outcome"] == "allowed"
