"""What a principal may do through the consumer-group APIs: Kafka's checks, decided before the coordinator.

Every decision goes through :class:`~headwater.server.authz.Authz`, so a refusal is noted on the
request and its audit line names the resource and the operation. The rules (Kafka's ``KafkaApis``):

- FindCoordinator: DESCRIBE on the GROUP (key type 0) or the TRANSACTIONAL_ID (key type 1), per key.
- TxnOffsetCommit: WRITE on the TRANSACTIONAL_ID first (TRANSACTIONAL_ID_AUTHORIZATION_FAILED on
  every partition), then READ on the GROUP and on each topic, as OffsetCommit.
- JoinGroup, SyncGroup, Heartbeat, LeaveGroup: READ on the GROUP; OffsetCommit READ, OffsetFetch
  DESCRIBE, OffsetDelete DELETE on the GROUP; DescribeGroups DESCRIBE and DeleteGroups DELETE on
  each group named (:data:`~headwater.server.authz.GROUP_OPERATIONS`).
- Then, for the APIs that name topics (:data:`~headwater.server.authz.GROUP_TOPIC_OPERATIONS`):
  OffsetCommit, TxnOffsetCommit and OffsetDelete READ, OffsetFetch DESCRIBE on each topic; the partitions of a
  refused topic are answered with TOPIC_AUTHORIZATION_FAILED and only the others reach the
  coordinator. An OffsetFetch of "all topics" leaves the topics the principal may not DESCRIBE
  out of the answer, silently (no refusal is noted: nothing was asked for by name).
- ListGroups: every group with DESCRIBE on CLUSTER, otherwise the groups with DESCRIBE on the
  group; a filtered list is not a refusal either.

With no authorizer configured every check allows, so the handlers behave as without ACLs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from headwater.protocol.apis import Request
from headwater.protocol.errors import ErrorCode
from headwater.security.acl import AclOperation, ResourceType
from headwater.server.authz import GROUP_TOPIC_OPERATIONS, Authz, api_name

KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION = 0, 1

TopicPartition = tuple[str, int]
PartitionResult = tuple[str, int, ErrorCode]


class GroupAcl:
    """One request's view of the authorizer, for the group handlers."""

    __slots__ = ("authz", "req")

    def __init__(self, authz: Authz, req: Request) -> None:
        self.authz = authz
        self.req = req

    def group_error(self, group_id: str) -> ErrorCode:
        """NONE, or GROUP_AUTHORIZATION_FAILED when the API's operation on the group is refused."""
        return self.authz.group_error(self.req, group_id)

    def coordinator_error(self, key_type: int, key: str) -> ErrorCode:
        """FindCoordinator's check for one key; other key types are left to the handler to refuse."""
        if key_type == KEY_TYPE_GROUP:
            return self.group_error(key)
        if key_type == KEY_TYPE_TRANSACTION:
            allowed = self.authz.allowed(self.req, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key)
            return ErrorCode.NONE if allowed else ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return ErrorCode.NONE

    def transactional_id_error(self, transactional_id: str) -> ErrorCode:
        """TxnOffsetCommit's first check: WRITE on the TRANSACTIONAL_ID (it implies the producer id's)."""
        allowed = self.authz.allowed(self.req, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)
        return ErrorCode.NONE if allowed else ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    def split_groups(self, group_ids: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(allowed, refused) group ids, each in request order (DescribeGroups, DeleteGroups)."""
        verdict = {g: self.group_error(g) == ErrorCode.NONE for g in dict.fromkeys(group_ids)}
        return (tuple(g for g in group_ids if verdict[g]), tuple(g for g in group_ids if not verdict[g]))

    def split_partitions(self, partitions: Sequence[TopicPartition]) -> tuple[tuple[TopicPartition, ...],
                                                                             tuple[TopicPartition, ...]]:
        """(allowed, refused) partitions by the API's operation on their topic, each topic checked once."""
        op = GROUP_TOPIC_OPERATIONS.get(self.req.api_key)
        if op is None:
            raise ValueError(f"{api_name(self.req.api_key)} names no topics")
        verdict = {t: self.authz.topic(self.req, op, t) for t in dict.fromkeys(t for t, _p in partitions)}
        return (tuple(tp for tp in partitions if verdict[tp[0]]), tuple(tp for tp in partitions if not verdict[tp[0]]))

    def describable_topics(self, topics: Iterable[str]) -> frozenset[str]:
        """The topics an all-topics OffsetFetch may show (DESCRIBE; the others are left out unnoted)."""
        return frozenset(t for t in set(topics) if self.authz.topic(self.req, AclOperation.DESCRIBE, t, note=False))

    def listable_groups(self, group_ids: Iterable[str]) -> frozenset[str]:
        """The groups ListGroups shows: all with DESCRIBE on CLUSTER, else those with DESCRIBE on the group."""
        ids = set(group_ids)
        if self.authz.cluster(self.req, AclOperation.DESCRIBE, note=False):
            return frozenset(ids)
        return frozenset(g for g in ids if self.authz.group(self.req, AclOperation.DESCRIBE, g, note=False))

    def group_operations(self, group_id: str) -> set[int]:
        """DescribeGroups' ``authorized_operations`` of a group (codes of the operations allowed on it)."""
        return self.authz.authorized_operations(self.req, ResourceType.GROUP, group_id)


def merge_results(requested: Sequence[TopicPartition], refused: Iterable[TopicPartition], code: ErrorCode,
                  answered: Iterable[PartitionResult]) -> tuple[PartitionResult, ...]:
    """The refused partitions (with ``code``) and the coordinator's answers, in the request's order."""
    order: dict[TopicPartition, int] = {}
    for i, tp in enumerate(requested):
        order.setdefault(tp, i)
    merged = [(t, p, code) for t, p in dict.fromkeys(refused)] + list(answered)
    return tuple(sorted(merged, key=lambda r: order.get((r[0], r[1]), len(order))))

