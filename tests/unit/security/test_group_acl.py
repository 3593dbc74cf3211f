"""ACL checks of the consumer-group APIs: the decisions (``GroupAcl``), and the group handlers of a
real (unstarted) broker whose coordinator has loaded a group from ``__consumer_offsets`` records.

A refused request must answer Kafka's error code and change nothing in the coordinator."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from headwater.coordinator import events as ev
from headwater.coordinator.records import (
    OFFSETS_TOPIC,
    OffsetKey,
    OffsetValue,
    encode_offset_key,
    encode_offset_value,
)
from headwater.protocol.apis import API_SPECS, ApiKey, Request
from headwater.protocol.errors import ErrorCode
from headwater.security.acl import (
    AccessControlEntry,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from headwater.security.authorizer import AclSet
from headwater.server.authz import Authz
from headwater.server.broker import Broker
from headwater.server.config import broker_config
from headwater.server.group_acl import GroupAcl, merge_results

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin"}
GAF, TAF = ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.TOPIC_AUTHORIZATION_FAILED
NOW_MS = 1_700_000_000_000


def acl(principal: str, resource_type: ResourceType, name: str, *ops: AclOperation,
        pattern: PatternType = PatternType.LITERAL) -> dict[ResourcePattern, list[AccessControlEntry]]:
    return {ResourcePattern(resource_type, name, pattern): [AccessControlEntry(principal, "*", op, PermissionType.ALLOW)
                                                            for op in ops]}


def acls(*parts: dict[ResourcePattern, list[AccessControlEntry]]) -> AclSet:
    merged: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for part in parts:
        for pattern, entries in part.items():
            merged.setdefault(pattern, []).extend(entries)
    return AclSet(merged)


# User:c consumes: READ on group g and topic t. User:l may only DESCRIBE g. User:d may delete groups
# named team-* and read topic t.
RULES = acls(acl("User:c", ResourceType.GROUP, "g", AclOperation.READ),
             acl("User:c", ResourceType.TOPIC, "t", AclOperation.READ),
             acl("User:l", ResourceType.GROUP, "g", AclOperation.DESCRIBE),
             acl("User:d", ResourceType.GROUP, "team-", AclOperation.DELETE, pattern=PatternType.PREFIXED),
             acl("User:d", ResourceType.GROUP, "g", AclOperation.DELETE),
             acl("User:d", ResourceType.TOPIC, "t", AclOperation.READ))


def request(api: ApiKey, version: int, principal: str, **fields: Any) -> Request:
    spec = API_SPECS[api]
    return Request(spec, version, 1, "unit", spec.request(version=version, **fields), principal=principal,
                   client_address="10.0.0.9:5000")


def bare(key: ApiKey, principal: str) -> Request:
    return Request(API_SPECS[key], API_SPECS[key].min_version, 1, "unit", None, principal=principal,
                   client_address="10.0.0.9:5000")


@pytest.fixture
def authz(tmp_path: Path) -> Iterator[Authz]:
    a = Authz(AUTHORIZER, tmp_path / "logs", 1)
    a.acls = RULES
    yield a
    a.close()


# --- the decisions ---------------------------------------------------------------------------------------


def test_group_operation_per_api(authz: Authz) -> None:
    join = bare(ApiKey.JOIN_GROUP, "User:c")
    acl_c = GroupAcl(authz, join)
    assert acl_c.group_error("g") == ErrorCode.NONE
    assert acl_c.group_error("h") == GAF
    assert [(d.resource_type, d.name, d.operation, d.error_code) for d in join.denied] == [("GROUP", "h", "READ", 30)]
    # OffsetFetch needs DESCRIBE, which READ implies; DeleteGroups needs DELETE, which it does not.
    assert GroupAcl(authz, bare(ApiKey.OFFSET_FETCH, "User:c")).group_error("g") == ErrorCode.NONE
    assert GroupAcl(authz, bare(ApiKey.DELETE_GROUPS, "User:c")).group_error("g") == GAF
    # User:l may DESCRIBE but not READ.
    assert GroupAcl(authz, bare(ApiKey.DESCRIBE_GROUPS, "User:l")).group_error("g") == ErrorCode.NONE
    assert GroupAcl(authz, bare(ApiKey.HEARTBEAT, "User:l")).group_error("g") == GAF
    assert GroupAcl(authz, bare(ApiKey.JOIN_GROUP, "User:admin")).group_error("anything") == ErrorCode.NONE


def test_find_coordinator_checks_the_key_type(authz: Authz) -> None:
    req = bare(ApiKey.FIND_COORDINATOR, "User:c")
    a = GroupAcl(authz, req)
    assert a.coordinator_error(0, "g") == ErrorCode.NONE
    assert a.coordinator_error(0, "h") == GAF
    assert a.coordinator_error(1, "tx") == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert a.coordinator_error(7, "g") == ErrorCode.NONE  # unknown key types are the handler's to refuse
    assert [(d.resource_type, d.name, d.operation) for d in req.denied] == [
        ("GROUP", "h", "DESCRIBE"), ("TRANSACTIONAL_ID", "tx", "DESCRIBE")]


def test_split_groups_and_partitions(authz: Authz) -> None:
    delete = bare(ApiKey.DELETE_GROUPS, "User:d")
    assert GroupAcl(authz, delete).split_groups(("team-a", "h", "g", "team-b", "h")) == (
        ("team-a", "g", "team-b"), ("h", "h"))
    assert [d.name for d in delete.denied] == ["h"]  # each group checked (and noted) once
    commit = bare(ApiKey.OFFSET_COMMIT, "User:c")
    allowed, refused = GroupAcl(authz, commit).split_partitions((("t", 0), ("secret", 0), ("t", 1), ("secret", 1)))
    assert allowed == (("t", 0), ("t", 1)) and refused == (("secret", 0), ("secret", 1))
    assert [(d.resource_type, d.name, d.operation, d.error_code) for d in commit.denied] == [
        ("TOPIC", "secret", "READ", 29)]
    with pytest.raises(ValueError, match="names no topics"):
        GroupAcl(authz, bare(ApiKey.JOIN_GROUP, "User:c")).split_partitions((("t", 0),))


def test_filters_note_no_refusal(authz: Authz) -> None:
    fetch = bare(ApiKey.OFFSET_FETCH, "User:c")
    assert GroupAcl(authz, fetch).describable_topics(["t", "secret", "t"]) == {"t"}
    listing = bare(ApiKey.LIST_GROUPS, "User:l")
    assert GroupAcl(authz, listing).listable_groups(["g", "h", "team-a"]) == {"g"}
    assert fetch.denied == [] and listing.denied == []
    authz.acls = acls(acl("User:ops", ResourceType.CLUSTER, "kafka-cluster", AclOperation.DESCRIBE))
    assert GroupAcl(authz, bare(ApiKey.LIST_GROUPS, "User:ops")).listable_groups(["g", "h"]) == {"g", "h"}


def test_group_operations(authz: Authz) -> None:
    describe = bare(ApiKey.DESCRIBE_GROUPS, "User:c")
    assert GroupAcl(authz, describe).group_operations("g") == {int(AclOperation.READ), int(AclOperation.DESCRIBE)}
    assert GroupAcl(authz, describe).group_operations("h") == set()
    assert describe.denied == []


def test_without_an_authorizer_everything_is_allowed(tmp_path: Path) -> None:
    off = Authz({}, tmp_path / "logs", 1)
    for key in (ApiKey.JOIN_GROUP, ApiKey.DELETE_GROUPS, ApiKey.OFFSET_FETCH):
        assert GroupAcl(off, bare(key, "User:anyone")).group_error("g") == ErrorCode.NONE
    a = GroupAcl(off, bare(ApiKey.OFFSET_COMMIT, "User:anyone"))
    assert a.split_partitions((("t", 0), ("u", 1))) == ((("t", 0), ("u", 1)), ())
    assert a.coordinator_error(1, "tx") == ErrorCode.NONE
    assert a.listable_groups(["g", "h"]) == {"g", "h"}
    assert a.group_operations("g") == {int(AclOperation.READ), int(AclOperation.DESCRIBE), int(AclOperation.DELETE)}
    off.close()


def test_merge_results_keeps_the_request_order() -> None:
    requested = [("a", 0), ("b", 0), ("a", 1), ("c", 2)]
    merged = merge_results(requested, [("b", 0), ("c", 2)], TAF, [("a", 0, ErrorCode.NONE), ("a", 1, ErrorCode.NONE)])
    assert merged == (("a", 0, ErrorCode.NONE), ("b", 0, TAF), ("a", 1, ErrorCode.NONE), ("c", 2, TAF))


# --- the handlers of a broker ----------------------------------------------------------------------------


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(broker_config({"broker.id": "1", "log.dirs": str(tmp_path / "logs"), "listeners": "PLAINTEXT://127.0.0.1:1",
                              "offsets.topic.num.partitions": "1", **AUTHORIZER}))
    b.authz.acls = RULES
    # Group g has committed offsets for t-0 and secret-0 (as if read from its __consumer_offsets partition).
    records = tuple((encode_offset_key(OffsetKey("g", topic, 0)), encode_offset_value(OffsetValue(offset, -1, "", NOW_MS)))
                    for topic, offset in (("t", 5), ("secret", 7)))
    core = b.groups.core
    core.handle(ev.LoadStarted(0, 1), NOW_MS)
    core.handle(ev.LoadFinished(0, 1, records), NOW_MS)
    yield b
    b.authz.close()
    b.logs.close()


def call(b: Broker, handler: Any, req: Request) -> Any:
    async def run() -> Any:
        return await handler(req)
    resp = asyncio.run(run())
    b.authz.audit_request(req, resp)  # as the broker does after every handler
    return resp


def offsets_of(b: Broker, group: str) -> dict[tuple[str, int], int]:
    g = b.groups.core.groups.get(group)
    return {} if g is None else {tp: e.offset for tp, e in g.offsets.items()}


def audit_lines(b: Broker) -> list[dict[str, Any]]:
    b.authz.audit.close()  # drains the writer thread
    return [json.loads(line) for line in b.authz.audit.path.read_text().splitlines()]


def test_offset_fetch(broker: Broker) -> None:
    spec = API_SPECS[ApiKey.OFFSET_FETCH].request
    G, T = spec.OffsetFetchRequestGroup, spec.OffsetFetchRequestGroup.OffsetFetchRequestTopics
    resp = call(broker, broker.groups.offset_fetch, request(ApiKey.OFFSET_FETCH, 8, "User:c", require_stable=False, groups=[
        G(group_id="g", topics=[T(name="t", partition_indexes=[0]), T(name="secret", partition_indexes=[0])]),
        G(group_id="g", topics=None),
        G(group_id="h", topics=None)]))
    named, every, other = resp.groups
    assert [(t.name, p.committed_offset, p.error_code) for t in named.topics for p in t.partitions] == [
        ("t", 5, 0), ("secret", -1, TAF)]
    assert named.error_code == 0
    # All topics: the ones User:c may not DESCRIBE are simply not there.
    assert [(t.name, p.committed_offset) for t in every.topics for p in t.partitions] == [("t", 5)]
    assert (other.error_code, other.topics) == (GAF, [])
    # v1 has no group-level error: each requested partition carries it.
    T1 = spec.OffsetFetchRequestTopic
    resp = call(broker, broker.groups.offset_fetch, request(ApiKey.OFFSET_FETCH, 1, "User:l", group_id="g",
                                                            topics=[T1(name="t", partition_indexes=[0, 1])]))
    assert [(p.partition_index, p.committed_offset, p.error_code) for t in resp.topics for p in t.partitions] == [
        (0, -1, TAF), (1, -1, TAF)]  # User:l may DESCRIBE the group, not the topic
    resp = call(broker, broker.groups.offset_fetch, request(ApiKey.OFFSET_FETCH, 1, "User:nobody", group_id="g",
                                                            topics=[T1(name="t", partition_indexes=[0, 1])]))
    assert [(p.partition_index, p.committed_offset, p.error_code) for t in resp.topics for p in t.partitions] == [
        (0, -1, GAF), (1, -1, GAF)]


def test_refused_commits_change_nothing(broker: Broker) -> None:
    T = API_SPECS[ApiKey.OFFSET_COMMIT].request.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition

    def commit(principal: str, group: str, *topics: str) -> list[tuple[str, int, int]]:
        resp = call(broker, broker.groups.offset_commit, request(
            ApiKey.OFFSET_COMMIT, 8, principal, group_id=group, generation_id_or_member_epoch=-1, member_id="",
            group_instance_id=None, topics=[T(name=t, partitions=[P(partition_index=0, committed_offset=99,
                                                                     committed_leader_epoch=-1, committed_metadata="")])
                                            for t in topics]))
        return [(t.name, p.partition_index, p.error_code) for t in resp.topics for p in t.partitions]

    assert commit("User:c", "h", "t") == [("t", 0, GAF)]
    assert commit("User:c", "g", "secret") == [("secret", 0, TAF)]
    assert commit("User:l", "g", "t") == [("t", 0, GAF)]  # DESCRIBE is not READ
    assert "h" not in broker.groups.core.groups
    assert offsets_of(broker, "g") == {("t", 0): 5, ("secret", 0): 7}
    lines = audit_lines(broker)
    assert [(ln["principal"], ln["outcome"], ln["resources"][0]["type"], ln["resources"][0]["name"]) for ln in lines] == [
        ("User:c", "denied", "GROUP", "h"), ("User:c", "denied", "TOPIC", "secret"), ("User:l", "denied", "GROUP", "g")]


def test_membership_and_find_coordinator_refused(broker: Broker) -> None:
    Proto = API_SPECS[ApiKey.JOIN_GROUP].request.JoinGroupRequestProtocol
    resp = call(broker, broker.groups.join_group, request(
        ApiKey.JOIN_GROUP, 5, "User:l", group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=10000,
        member_id="", group_instance_id=None, protocol_type="consumer", protocols=[Proto(name="range", metadata=b"")]))
    assert (resp.error_code, resp.member_id, resp.generation_id) == (GAF, "", -1)
    assert not broker.groups.core.groups["g"].members
    resp = call(broker, broker.groups.heartbeat, request(ApiKey.HEARTBEAT, 3, "User:nobody", group_id="g",
                                                         generation_id=1, member_id="m", group_instance_id=None))
    assert resp.error_code == GAF
    resp = call(broker, broker.groups.leave_group, request(ApiKey.LEAVE_GROUP, 3, "User:nobody", group_id="g",
                                                           members=[]))
    assert (resp.error_code, resp.members) == (GAF, [])
    resp = call(broker, broker.groups.find_coordinator, request(ApiKey.FIND_COORDINATOR, 4, "User:c", key_type=0,
                                                                coordinator_keys=["h"]))
    assert [(c.key, c.error_code, c.node_id) for c in resp.coordinators] == [("h", GAF, -1)]
    resp = call(broker, broker.groups.find_coordinator, request(ApiKey.FIND_COORDINATOR, 3, "User:c", key_type=1,
                                                                key="tx"))
    assert resp.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert OFFSETS_TOPIC not in broker.image.topics  # a refused lookup does not create the offsets topic


def test_transactional_lookups_allowed_reach_the_transaction_coordinator(broker: Broker) -> None:
    """A permitted FindCoordinator (key type 1) finds the leader of the id's __transaction_state
    partition, created on first use (KafkaApis.handleFindCoordinatorRequest), and a permitted
    InitProducerId with a transactional id gets its producer id from the coordinator at epoch 0
    (TransactionCoordinator.handleInitProducerId for a new id)."""
    resp = call(broker, broker.groups.find_coordinator, request(ApiKey.FIND_COORDINATOR, 3, "User:admin", key_type=1,
                                                                key="tx"))
    assert (resp.error_code, resp.node_id) == (ErrorCode.NONE, broker.config.broker_id)
    resp = call(broker, broker.handler(ApiKey.INIT_PRODUCER_ID), request(ApiKey.INIT_PRODUCER_ID, 4, "User:admin", transactional_id="tx",
                                                         transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
    assert (resp.error_code, resp.producer_epoch) == (ErrorCode.NONE, 0) and resp.producer_id >= 0


def test_describe_list_and_delete_groups(broker: Broker) -> None:
    resp = call(broker, broker.groups.describe_groups, request(ApiKey.DESCRIBE_GROUPS, 5, "User:c", groups=["g", "h"],
                                                               include_authorized_operations=True))
    g, h = resp.groups
    assert (g.group_id, g.error_code, g.group_state, g.authorized_operations) == (
        "g", 0, "Empty", {int(AclOperation.READ), int(AclOperation.DESCRIBE)})
    assert (h.group_id, h.error_code, h.group_state, h.authorized_operations) == ("h", GAF, "", None)

    resp = call(broker, broker.groups.list_groups, request(ApiKey.LIST_GROUPS, 4, "User:l", states_filter=[]))
    assert [x.group_id for x in resp.groups] == ["g"]
    resp = call(broker, broker.groups.list_groups, request(ApiKey.LIST_GROUPS, 4, "User:nobody", states_filter=[]))
    assert resp.groups == [] and resp.error_code == 0

    resp = call(broker, broker.groups.delete_groups, request(ApiKey.DELETE_GROUPS, 2, "User:c", groups_names=["g"]))
    assert [(r.group_id, r.error_code) for r in resp.results] == [("g", GAF)]
    assert offsets_of(broker, "g") == {("t", 0): 5, ("secret", 0): 7}
    # User:d may delete g and team-*: the unknown team group reaches the coordinator, "x" does not.
    resp = call(broker, broker.groups.delete_groups, request(ApiKey.DELETE_GROUPS, 2, "User:d",
                                                             groups_names=["x", "team-a"]))
    assert [(r.group_id, r.error_code) for r in resp.results] == [("x", GAF), ("team-a", ErrorCode.GROUP_ID_NOT_FOUND)]

    T = API_SPECS[ApiKey.OFFSET_DELETE].request.OffsetDeleteRequestTopic
    P = T.OffsetDeleteRequestPartition
    topics = [T(name=n, partitions=[P(partition_index=0)]) for n in ("secret", "t")]
    resp = call(broker, broker.groups.offset_delete, request(ApiKey.OFFSET_DELETE, 0, "User:c", group_id="g",
                                                             topics=topics))
    assert (resp.error_code, resp.topics) == (GAF, [])
    resp = call(broker, broker.groups.offset_delete, request(ApiKey.OFFSET_DELETE, 0, "User:d", group_id="g",
                                                             topics=topics))
    by_topic = {t.name: t.partitions[0].error_code for t in resp.topics}
    assert by_topic["secret"] == TAF and by_topic["t"] != TAF
    assert ("secret", 0) in offsets_of(broker, "g")

    lines = audit_lines(broker)
    deletes = [(ln["principal"], ln["api"], ln["outcome"], [(r["type"], r["name"], r["error_code"], r.get("operation"))
                                                           for r in ln["resources"]])
               for ln in lines if ln["api"] in ("DELETE_GROUPS", "OFFSET_DELETE")]
    assert deletes[0] == ("User:c", "DELETE_GROUPS", "denied", [("GROUP", "g", 30, "DELETE")])
    assert deletes[1] == ("User:d", "DELETE_GROUPS", "denied", [("GROUP", "x", 30, "DELETE"), ("GROUP", "team-a", 69, None)])
    assert deletes[2] == ("User:c", "OFFSET_DELETE", "denied", [("GROUP", "g", 30, "DELETE")])
    assert deletes[3][:3] == ("User:d", "OFFSET_DELETE", "denied")
    # (the offsets partition is not hosted here, so the allowed part fails to be written: NOT_COORDINATOR)
    assert deletes[3][3][:2] == [("GROUP", "g", ErrorCode.NOT_COORDINATOR, None), ("GROUP_OFFSET", "g/secret-0", 29, None)]
    # Describe and list refusals were noted too; the filtered lists were not.
    assert any(ln["api"] == "DESCRIBE_GROUPS" and ln["principal"] == "User:c" and ln["outcome"] == "denied" for ln in lines)
    assert not any(ln["api"] == "LIST_GROUPS" for ln in lines)
