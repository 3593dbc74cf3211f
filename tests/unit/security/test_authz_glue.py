"""The broker's ACL handlers and audit log in one process: the local store, refusals that change
nothing, SECURITY_DISABLED, and the rotating audit file."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from kafka.protocol.admin import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest

from headwater.protocol.apis import API_SPECS, ApiKey, Request
from headwater.security.acl import AclOperation, ResourceType
from headwater.server.authz import Authz

AUTHORIZER = {"authorizer.class.name": "headwater.security.authorizer.AclAuthorizer", "super.users": "User:admin"}
C = CreateAclsRequest.AclCreation
F = DeleteAclsRequest.DeleteAclsFilter


def request(key: ApiKey, body: Any, principal: str = "User:admin", version: int = 3) -> Request:
    return Request(API_SPECS[key], version, 1, "unit", body, principal=principal, client_address="10.1.2.3:4567")


def create(authz: Authz, principal: str, *creations: Any) -> list[int]:
    req = request(ApiKey.CREATE_ACLS, CreateAclsRequest(creations=list(creations)), principal)
    resp = asyncio.run(authz.create_acls(req))
    authz.audit_request(req, resp)  # as the broker does after every handler
    return [r.error_code for r in resp.results]


def describe_all(authz: Authz, principal: str = "User:admin") -> Any:
    return authz.describe_acls(request(ApiKey.DESCRIBE_ACLS, DescribeAclsRequest(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
        host_filter=None, operation=1, permission_type=1), principal))


def read_topic(principal: str) -> Any:
    return C(resource_type=2, resource_name="t", resource_pattern_type=3, principal=principal, host="*",
             operation=3, permission_type=3)


def test_create_describe_delete_and_persistence(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    authz = Authz(AUTHORIZER, tmp_path / "logs", 7)
    assert create(authz, "User:admin", read_topic("User:a"), read_topic("User:b")) == [0, 0]
    resp = describe_all(authz)
    assert resp.error_code == 0
    assert [(r.resource_name, sorted(a.principal for a in r.acls)) for r in resp.resources] == [("t", ["User:a", "User:b"])]
    req = request(ApiKey.PRODUCE, None, "User:a")
    assert authz.topic(req, AclOperation.READ, "t") and not authz.topic(req, AclOperation.WRITE, "t")
    assert [(d.resource_type, d.name, d.operation) for d in req.denied] == [("TOPIC", "t", "WRITE")]
    # A second broker process over the same directory finds them.
    assert len(Authz(AUTHORIZER, tmp_path / "logs", 7).acls) == 2
    resp = asyncio.run(authz.delete_acls(request(ApiKey.DELETE_ACLS, DeleteAclsRequest(filters=[
        F(resource_type_filter=2, resource_name_filter="t", pattern_type_filter=3, principal_filter="User:a",
          host_filter=None, operation=1, permission_type=1)]))))
    assert [m.principal for m in resp.filter_results[0].matching_acls] == ["User:a"]
    assert len(Authz(AUTHORIZER, tmp_path / "logs", 7).acls) == 1
    authz.close()


def test_refused_and_disabled_change_nothing(tmp_path: Path) -> None:
    authz = Authz(AUTHORIZER, tmp_path / "logs", 1)
    assert create(authz, "User:mallory", read_topic("User:mallory")) == [31]
    assert len(authz.acls) == 0 and not (tmp_path / "logs" / "headwater-acls.json").exists()
    assert describe_all(authz, "User:mallory").error_code == 31
    off = Authz({}, tmp_path / "other", 1)
    assert create(off, "User:admin", read_topic("User:a")) == [54]
    assert describe_all(off).error_code == 54
    authz.close()
    off.close()
    lines = [json.loads(x) for x in (tmp_path / "audit" / "broker-1-audit.log").read_text().splitlines()]
    assert lines[0]["principal"] == "User:mallory" and lines[0]["outcome"] == "denied"
    assert lines[0]["client_address"] == "10.1.2.3:4567" and lines[0]["client_id"] == "unit"
    assert lines[0]["resources"][0]["error"] == "CLUSTER_AUTHORIZATION_FAILED"
    assert lines[1]["outcome"] == "failed" and lines[1]["error_code"] == 54  # the disabled broker's mutation


def test_audit_file_rotates(tmp_path: Path) -> None:
    authz = Authz({**AUTHORIZER, "audit.log.dir": str(tmp_path / "a"), "audit.log.max.bytes": "2000",
                   "audit.log.backups": "2"}, tmp_path / "logs", 3)
    for i in range(60):
        create(authz, "User:admin", read_topic(f"User:u{i}"))
    authz.close()
    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert files == ["broker-3-audit.log", "broker-3-audit.log.1", "broker-3-audit.log.2"]
    for name in files:
        for line in (tmp_path / "a" / name).read_text().splitlines():
            assert json.loads(line)["api"] == "CREATE_ACLS"
    assert all((tmp_path / "a" / n).stat().st_size <= 2000 for n in files)


def test_authorized_operations_bit_fields(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    authz = Authz(AUTHORIZER, tmp_path / "logs", 1)
    assert create(authz, "User:admin", read_topic("User:a")) == [0]
    req = request(ApiKey.METADATA, None, "User:a")
    assert authz.authorized_operations(req, ResourceType.TOPIC, "t") == {3, 8}  # READ, DESCRIBE
    assert authz.authorized_operations(req, ResourceType.CLUSTER) == set()
    assert req.denied == []  # asking what is allowed is not a refusal
    assert authz.authorized_operations(request(ApiKey.METADATA, None, "User:admin"), ResourceType.TOPIC, "t") == {3, 4, 5, 6, 7, 8, 10, 11}
    off = Authz({}, tmp_path / "off", 1)
    assert off.authorized_operations(req, ResourceType.CLUSTER) == {5, 7, 8, 9, 10, 11, 12}
    authz.close()
    off.close()


def test_reassignment_audit_names_moves_and_cancellations(tmp_path: Path) -> None:
    from kafka.protocol.admin import AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse

    T = AlterPartitionReassignmentsRequest.ReassignableTopic
    body = AlterPartitionReassignmentsRequest(timeout_ms=1000, topics=[T(name="t", partitions=[
        T.ReassignablePartition(partition_index=0, replicas=[2, 3]),
        T.ReassignablePartition(partition_index=1, replicas=None)])])
    R = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
    resp = AlterPartitionReassignmentsResponse(version=0, throttle_time_ms=0, error_code=0, error_message=None, responses=[
        R(name="t", partitions=[R.ReassignablePartitionResponse(partition_index=0, error_code=0, error_message=None),
                                R.ReassignablePartitionResponse(partition_index=1, error_code=85, error_message=None)])])
    authz = Authz({"audit.log.dir": str(tmp_path)}, tmp_path / "logs", 1)
    authz.audit_request(request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, body, version=0), resp)
    # Reads that nobody refused are not audited.
    authz.audit_request(request(ApiKey.LIST_PARTITION_REASSIGNMENTS, None, version=0), None)
    authz.close()
    (line,) = [json.loads(x) for x in (tmp_path / "broker-1-audit.log").read_text().splitlines()]
    assert line["api"] == "ALTER_PARTITION_REASSIGNMENTS" and line["outcome"] == "failed" and line["error_code"] == 85
    assert [(r["name"], r["error_code"]) for r in line["resources"]] == [("t-0 -> [2, 3]", 0), ("t-1 cancel", 85)]


def test_refused_reassignment_audit_names_cluster_alter(tmp_path: Path) -> None:
    """A reassignment refused for ALTER on the cluster answers per partition, but what was refused is
    the cluster: Kafka's AclAuthorizer.logAuditMessage names the denied operation and resource
    ("Denied Operation = Alter ... on resource = Cluster:LITERAL:kafka-cluster"), and so must the line."""
    from kafka.protocol.admin import AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse

    T = AlterPartitionReassignmentsRequest.ReassignableTopic
    body = AlterPartitionReassignmentsRequest(timeout_ms=1000, topics=[T(name="r", partitions=[
        T.ReassignablePartition(partition_index=0, replicas=[2])])])
    R = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
    resp = AlterPartitionReassignmentsResponse(version=0, throttle_time_ms=0, error_code=31, error_message=None, responses=[
        R(name="r", partitions=[R.ReassignablePartitionResponse(partition_index=0, error_code=31, error_message=None)])])
    authz = Authz({**AUTHORIZER, "audit.log.dir": str(tmp_path)}, tmp_path / "logs", 1)
    req = request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, body, principal="User:ops", version=0)
    assert not authz.cluster(req, AclOperation.ALTER)
    authz.audit_request(req, resp)
    authz.close()
    (line,) = [json.loads(x) for x in (tmp_path / "broker-1-audit.log").read_text().splitlines()]
    assert line["outcome"] == "denied" and line["error_code"] == 31
    assert [r["name"] for r in line["resources"]] == ["r-0", "kafka-cluster"]
    refused = line["resources"][-1]
    assert (refused["type"], refused["operation"], refused["error_code"]) == ("CLUSTER", "ALTER", 31)
