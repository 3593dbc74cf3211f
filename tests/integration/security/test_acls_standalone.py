"""ACLs on a standalone broker: `headwater acls` round trip, enforcement for real clients, the audit log.

Until connections authenticate, every client is User:ANONYMOUS, so the rules are written for it:
with ``allow.everyone.if.no.acl.found=true`` the admin first grants itself the cluster, then the
topic gets an ALLOW READ and a DENY WRITE.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import TopicAuthorizationFailedError
from kafka.protocol.admin import CreateAclsRequest, DescribeAclsRequest
from kafka.protocol.metadata import MetadataRequest

from headwater.admin.client import AdminClient
from headwater.admin.local import BrokerProcess
from headwater.cli import main

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
              "allow.everyone.if.no.acl.found": "true"}


def acls(bootstrap: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["acls", "--bootstrap-server", bootstrap, *args])
    return result.exit_code, result.output


def topics(bootstrap: str, *args: str) -> None:
    result = CliRunner().invoke(main, ["topics", "--bootstrap-server", bootstrap, *args])
    assert result.exit_code == 0, result.output


def audit_lines(broker: BrokerProcess) -> list[dict[str, object]]:
    path = broker.data_dir / "audit" / f"broker-{broker.broker_id}-audit.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, group_id=None, consumer_timeout_ms=10000)
    try:
        out = []
        for msg in consumer:
            out.append(msg.value)
            if len(out) == count:
                break
        return out
    finally:
        consumer.close()


def test_acl_round_trip_enforcement_and_audit(broker_factory: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    broker = broker_factory(AUTHORIZER)
    bootstrap = broker.bootstrap
    topics(bootstrap, "--create", "--topic", "orders", "--partitions", "1")
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(3):
        producer.send("orders", f"m{i}".encode()).get(timeout=10)

    code, out = acls(bootstrap, "--add", "--allow-principal", "User:ANONYMOUS", "--operation", "All", "--cluster")
    assert code == 0, out
    assert "Adding ACLs for resource `ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)`:" in out
    code, out = acls(bootstrap, "--add", "--allow-principal", "User:ANONYMOUS", "--operation", "Read", "--topic", "orders")
    assert code == 0, out
    code, out = acls(bootstrap, "--add", "--deny-principal", "User:ANONYMOUS", "--operation", "Write", "--topic", "orders")
    assert code == 0, out
    assert ("Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`: \n"
            " \t(principal=User:ANONYMOUS, host=*, operation=READ, permissionType=ALLOW) \n"
            " \t(principal=User:ANONYMOUS, host=*, operation=WRITE, permissionType=DENY) \n") in out

    # READ but not WRITE: consumes, cannot produce.
    assert consume(bootstrap, "orders", 3) == [b"m0", b"m1", b"m2"]
    with pytest.raises(TopicAuthorizationFailedError):
        producer.send("orders", b"refused").get(timeout=10)
    producer.close()

    # Metadata's authorized operations: READ and DESCRIBE on the topic, everything on the cluster.
    with AdminClient(bootstrap) as client:
        meta = client.send(MetadataRequest, dict(topics=[MetadataRequest.MetadataRequestTopic(name="orders")],
                                                 allow_auto_topic_creation=False, include_cluster_authorized_operations=True,
                                                 include_topic_authorized_operations=True), max_version=10)
    assert meta.topics[0].authorized_operations == {3, 8}  # decoded from Kafka's 32-bit field
    assert meta.authorized_operations == {5, 7, 8, 9, 10, 11, 12}

    code, out = acls(bootstrap, "--list", "--topic", "orders")
    assert code == 0 and out.count("permissionType=") == 2, out
    code, out = acls(bootstrap, "--list")
    assert code == 0 and "resourceType=CLUSTER" in out and "resourceType=TOPIC" in out

    # The ACLs outlive a restart (the broker's local file), and removing the DENY lets writes in.
    broker.stop()
    broker.start()
    code, out = acls(bootstrap, "--list", "--topic", "orders")
    assert out.count("permissionType=") == 2, out
    code, out = acls(bootstrap, "--remove", "--force", "--deny-principal", "User:ANONYMOUS", "--operation", "Write",
                     "--topic", "orders")
    assert code == 0, out
    assert "operation=WRITE" not in out and "operation=READ, permissionType=ALLOW" in out, out
    # Without WRITE (only READ is allowed now), producing is still refused; granting it lets it in.
    code, out = acls(bootstrap, "--add", "--producer", "--allow-principal", "User:ANONYMOUS", "--topic", "orders")
    assert code == 0 and "operation=WRITE, permissionType=ALLOW" in out, out
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    producer.send("orders", b"accepted").get(timeout=10)
    producer.close()

    lines = audit_lines(broker)
    created = [ln for ln in lines if ln["api"] == "CREATE_ACLS"]
    assert len(created) >= 4 and all(ln["principal"] == "User:ANONYMOUS" and ln["outcome"] == "allowed" for ln in created)
    denied_produce = [ln for ln in lines if ln["api"] == "PRODUCE"]
    assert denied_produce and denied_produce[0]["outcome"] == "denied" and denied_produce[0]["error_code"] == 29
    assert denied_produce[0]["resources"] == [{"type": "TOPIC", "name": "orders", "error_code": 29,
                                               "error": "TOPIC_AUTHORIZATION_FAILED", "operation": "WRITE"}]
    assert str(denied_produce[0]["client_address"]).startswith("127.0.0.1:")
    assert any(ln["api"] == "DELETE_ACLS" for ln in lines)
    assert any(ln["api"] == "CREATE_TOPICS" and ln["resources"][0]["name"] == "orders" for ln in lines)  # type: ignore[index]


def test_bad_acls_and_filters_get_invalid_request(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(AUTHORIZER)
    C = CreateAclsRequest.AclCreation
    with AdminClient(broker.bootstrap) as client:
        resp = client.send(CreateAclsRequest, dict(creations=[
            C(resource_type=4, resource_name="other", resource_pattern_type=3, principal="User:a", host="*",
              operation=7, permission_type=3),
            C(resource_type=2, resource_name="t", resource_pattern_type=2, principal="User:a", host="*",
              operation=3, permission_type=3),
            C(resource_type=2, resource_name="t", resource_pattern_type=3, principal="nobody", host="*",
              operation=3, permission_type=3),
            C(resource_type=2, resource_name="t", resource_pattern_type=4, principal="User:a", host="*",
              operation=3, permission_type=3),
        ]))
        assert [r.error_code for r in resp.results] == [42, 42, 42, 0]
        assert resp.results[0].error_message == "The only valid name for the CLUSTER resource is kafka-cluster"
        resp = client.send(DescribeAclsRequest, dict(
            resource_type_filter=0, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
            host_filter=None, operation=1, permission_type=1))
        assert resp.error_code == 42
        resp = client.send(DescribeAclsRequest, dict(
            resource_type_filter=2, resource_name_filter="tx", pattern_type_filter=2, principal_filter=None,
            host_filter=None, operation=1, permission_type=1))
        assert resp.error_code == 0
        assert [(r.resource_name, r.pattern_type) for r in resp.resources] == [("t", 4)]  # MATCH finds the prefix


def test_without_an_authorizer_acl_apis_say_security_disabled(broker: BrokerProcess) -> None:
    code, out = acls(broker.bootstrap, "--list")
    assert code == 1 and "No Authorizer is configured on the broker" in out


def test_real_admin_clients_manage_acls(broker_factory: Callable[..., BrokerProcess]) -> None:
    """confluent-kafka (librdkafka) and kafka-python's admin clients create, describe and delete ACLs."""
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )
    from confluent_kafka.admin import AdminClient as CAdmin
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KResourceType

    broker = broker_factory(AUTHORIZER)
    admin = CAdmin({"bootstrap.servers": broker.bootstrap})
    binding = AclBinding(ResourceType.TOPIC, "lib-", ResourcePatternType.PREFIXED, "User:lib", "*",
                         AclOperation.WRITE, AclPermissionType.ALLOW)
    for fut in admin.create_acls([binding]).values():
        fut.result(timeout=15)
    any_filter = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    found = admin.describe_acls(any_filter).result(timeout=15)
    assert [(b.name, b.resource_pattern_type, b.principal, b.operation) for b in found] == [
        ("lib-", ResourcePatternType.PREFIXED, "User:lib", AclOperation.WRITE)]

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        acl = ACL("User:kp", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                  ResourcePattern(KResourceType.GROUP, "g1", ACLResourcePatternType.LITERAL))
        result = kp.create_acls([acl])
        assert not result["failed"], result
        acls, _error = kp.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                                 ResourcePatternFilter(KResourceType.GROUP, None, ACLResourcePatternType.ANY)))
        assert [(a.principal, a.resource_pattern.resource_name) for a in acls] == [("User:kp", "g1")]
    finally:
        kp.close()

    for fut in admin.delete_acls([any_filter]).values():
        deleted = fut.result(timeout=15)
    assert sorted(b.principal for b in deleted) == ["User:kp", "User:lib"]
    assert admin.describe_acls(any_filter).result(timeout=15) == []
