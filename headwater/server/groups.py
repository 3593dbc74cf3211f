"""The shell of the group coordinator: Kafka requests in, coordinator events, and the I/O they ask for.

``headwater/coordinator`` decides; this module

* turns JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, TxnOffsetCommit, OffsetFetch,
  OffsetDelete, ListGroups, DescribeGroups and DeleteGroups requests into events and the
  coordinator's results into responses of the request's version (a request waits for its token's reply);
* answers FindCoordinator: the leader of the group's ``__consumer_offsets`` partition, creating
  the topic on first use through the topic-creation path every CreateTopics takes (the controller
  in a cluster, the local image in a standalone broker);
* appends the coordinator's records as the leader of that partition with acks=all (a
  TxnOffsetCommit's as a transactional batch of its producer), and reports back once they are
  committed (below the high watermark) or failed;
* loads a partition's groups and offsets when this broker becomes its leader (the coordinator
  answers COORDINATOR_LOAD_IN_PROGRESS meanwhile), with each record's transaction and the
  transaction markers, and unloads them when it stops being leader (NOT_COORDINATOR, so clients
  look again);
* tells the coordinator when a transaction marker is committed in one of its partitions
  (:meth:`GroupShell.on_txn_marker`, called by the WriteTxnMarkers handler);
* ticks the coordinator's clock for session and rebalance timeouts and offset retention;
* checks every request against the authorizer first (:mod:`headwater.server.group_acl`): a refused
  request, group or topic never reaches the coordinator, so it changes nothing.
"""

from __future__ import annotations

import functools
import itertools
import logging
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from headwater.coordinator import events as ev
from headwater.coordinator.coordinator import CoordinatorConfig, GroupCoordinator
from headwater.coordinator.records import OFFSETS_TOPIC, partition_for
from headwater.protocol.apis import ApiKey, Request
from headwater.protocol.errors import ErrorCode
from headwater.records import iter_batches
from headwater.records.records import read_control_record
from headwater.server.clock import now_ms
from headwater.server.coordinator_runtime import (
    NO_NODE,
    CoordinatorRuntime,
    Found,
    coordinator_endpoint,
    create_internal_topic,
)
from headwater.server.group_acl import KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION, GroupAcl, merge_results

if TYPE_CHECKING:
    from headwater.server.context import BrokerContext
    from headwater.server.replica_manager import Hosted

log = logging.getLogger(__name__)

TICK_INTERVAL_S = 0.1
# The peer of the request being handled (each request runs in its own task, so its own context):
# members are described with the host they joined from, as Kafka shows it ("/127.0.0.1").
CLIENT_HOST: ContextVar[str] = ContextVar("client_host", default="")


def build_batch(records: tuple[tuple[bytes, bytes | None], ...], now_ms: int, *, producer_id: int = -1,
                producer_epoch: int = -1, transactional: bool = False) -> bytearray:
    """One uncompressed RecordBatch v2 of the records (offsets from 0; the log assigns the real ones).

    A transactional one carries its producer's id and epoch and no sequence, as Kafka's coordinator
    writes a TxnOffsetCommit (it is no idempotent produce: nothing to deduplicate)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional,
                                        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1,
                                        batch_size=2**31 - 1)
    for i, (key, value) in enumerate(records):
        builder.append(i, timestamp=now_ms, key=key, value=value, headers=[])
    return bytearray(builder.build())


def read_records(buf: bytes) -> Iterator[ev.LoadedRecord]:
    """The keyed records of the batches in ``buf``, in log order: (key, value) from a plain batch,
    LoadedTxnRecord from a transactional one, and LoadedTxnMarker for a control batch."""
    for pos, header in iter_batches(buf, verify_crc=False):
        batch = bytes(buf[pos:pos + header.size])
        if header.is_control:
            # Kafka's load: COMMIT makes the producer's pending offsets the group's, any other type
            # drops them; an emptied control batch says nothing.
            marker = read_control_record(batch, header)
            if marker is not None:
                yield ev.LoadedTxnMarker(header.producer_id, marker.commit)
            continue
        for record in DefaultRecordBatch(batch):
            if record.key is None:
                continue
            key, value = bytes(record.key), None if record.value is None else bytes(record.value)
            yield ev.LoadedTxnRecord(header.producer_id, key, value) if header.is_transactional else (key, value)


class GroupShell(CoordinatorRuntime):
    topic = OFFSETS_TOPIC
    tick_interval_s = TICK_INTERVAL_S

    def __init__(self, broker: BrokerContext) -> None:
        super().__init__(broker, log)
        self.config = CoordinatorConfig.from_properties(broker.config.props)
        self.replication_factor = int(broker.config.props.get("offsets.topic.replication.factor", 3))
        self.core = GroupCoordinator(self.config, (uuid.uuid4().hex for _ in itertools.count()))

    def handlers(self) -> dict[ApiKey, Callable[[Request], Any]]:
        return {
            ApiKey.FIND_COORDINATOR: self.find_coordinator,
            ApiKey.JOIN_GROUP: self.join_group,
            ApiKey.SYNC_GROUP: self.sync_group,
            ApiKey.HEARTBEAT: self.heartbeat,
            ApiKey.LEAVE_GROUP: self.leave_group,
            ApiKey.OFFSET_COMMIT: self.offset_commit,
            ApiKey.TXN_OFFSET_COMMIT: self.txn_offset_commit,
            ApiKey.OFFSET_FETCH: self.offset_fetch,
            ApiKey.OFFSET_DELETE: self.offset_delete,
            ApiKey.LIST_GROUPS: self.list_groups,
            ApiKey.DESCRIBE_GROUPS: self.describe_groups,
            ApiKey.DELETE_GROUPS: self.delete_groups,
        }

    def _acl(self, req: Request) -> GroupAcl:
        return GroupAcl(self.broker.authz, req)

    # --- the core (CoordinatorRuntime) -------------------------------------------------------------------

    def _handle(self, event: ev.Event) -> ev.Output:
        return self.core.handle(event, now_ms())

    def _apply(self, out: ev.Output) -> None:
        for append in out.appends:
            self._write(append.partition, append.write_id, functools.partial(
                build_batch, append.records, now_ms(), producer_id=append.producer_id,
                producer_epoch=append.producer_epoch, transactional=append.transactional))
        for reply in out.replies:
            self._reply(reply.token, reply.result)

    def _append_done(self, write_id: int, error: ErrorCode) -> ev.Event:
        return ev.AppendDone(write_id, error)

    def _tick(self) -> ev.Event:
        return ev.Tick()

    def _load_started(self, partition: int, generation: int) -> ev.Event:
        return ev.LoadStarted(partition, generation)

    def _load_finished(self, partition: int, generation: int, hosted: Hosted,
                       records: Sequence[ev.LoadedRecord]) -> ev.Event:
        return ev.LoadFinished(partition, generation, tuple(records))

    def _unloaded(self, partition: int) -> ev.Event:
        return ev.Unloaded(partition)

    def _decode(self, buf: bytes) -> Iterator[ev.LoadedRecord]:
        return read_records(buf)

    def _loaded(self, partition: int, out: ev.Output, records: int, ms: float) -> None:
        log.info("loaded %d groups from %s-%d (%d records) in %.0f ms", out.loaded_groups, OFFSETS_TOPIC, partition,
                 records, ms)

    def on_txn_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        """A COMMIT (``commit``) or ABORT marker of ``producer_id`` was appended to
        ``__consumer_offsets-<partition>`` and is committed: that producer's pending transactional
        offsets in the partition's groups become visible, or are dropped (Kafka's
        onTransactionCompleted). A partition this broker does not lead ignores it; one still
        loading applies it once loaded."""
        self._apply(self.core.handle(ev.TxnCompleted(partition, producer_id, commit), now_ms()))

    # --- FindCoordinator ------------------------------------------------------------------------------------

    async def find_coordinator(self, req: Request) -> Any:
        body = req.body
        key_type = body.key_type if req.version >= 1 else KEY_TYPE_GROUP
        keys = list(body.coordinator_keys) if req.version >= 4 else [body.key]
        acl = self._acl(req)
        found = []
        for k in keys:
            # Checked first: a refused principal does not get the offsets topic created either.
            refused = acl.coordinator_error(key_type, k)
            found.append((refused, None, (-1, "", -1)) if refused != ErrorCode.NONE
                         else await self._coordinator_for(k, key_type))
        if req.version < 4:
            code, message, node = found[0]
            fields: dict[str, Any] = dict(error_code=code, node_id=node[0], host=node[1], port=node[2])
            if req.version >= 1:
                fields.update(throttle_time_ms=0, error_message=message)
            return req.response(**fields)
        C = req.spec.response.Coordinator
        return req.response(throttle_time_ms=0, coordinators=[
            C(key=k, node_id=n[0], host=n[1], port=n[2], error_code=c, error_message=m) for k, (c, m, n) in zip(keys, found,
                                                                                                            strict=True)])

    async def _coordinator_for(self, key: str, key_type: int) -> Found:
        if key_type == KEY_TYPE_TRANSACTION:
            return await self.broker.transactions.coordinator_for(key)
        if key_type != KEY_TYPE_GROUP:
            return ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}", NO_NODE
        if not key:
            return ErrorCode.INVALID_GROUP_ID, "the group id is empty", NO_NODE
        return await coordinator_endpoint(self.broker, OFFSETS_TOPIC, partition_for(key, self.config.num_partitions),
                                          self._create_offsets_topic)

    def offsets_topic_spec(self) -> tuple[int, int, dict[str, str]]:
        """(partitions, replication factor, configs) of ``__consumer_offsets``: offsets.topic.* with the
        replication factor capped to the live brokers, compacted, however its creation was asked for."""
        rf = max(1, min(self.replication_factor, len(self.broker.image.brokers)))
        return self.config.num_partitions, rf, {"cleanup.policy": "compact"}

    async def _create_offsets_topic(self) -> None:
        await create_internal_topic(self.broker, OFFSETS_TOPIC, self.offsets_topic_spec(), log)

    # --- group membership ---------------------------------------------------------------------------------------

    async def join_group(self, req: Request) -> Any:
        b = req.body
        v = req.version
        refused = self._acl(req).group_error(b.group_id)
        result: ev.JoinResult = ev.JoinResult(refused) if refused != ErrorCode.NONE else await self._ask(
            lambda t: ev.JoinGroup(
                t, b.group_id, b.member_id, b.group_instance_id if v >= 5 else None, req.client_id or "", CLIENT_HOST.get(),
                b.session_timeout_ms, b.rebalance_timeout_ms if v >= 1 else b.session_timeout_ms, b.protocol_type,
                tuple((p.name, bytes(p.metadata)) for p in b.protocols), v >= 4))
        M = req.spec.response.JoinGroupResponseMember
        fields: dict[str, Any] = dict(
            throttle_time_ms=0, error_code=result.error, generation_id=result.generation,
            protocol_name=result.protocol_name if v >= 7 else (result.protocol_name or ""),
            leader=result.leader, member_id=result.member_id,
            members=[M(member_id=m, group_instance_id=i, metadata=meta) for m, i, meta in result.members])
        if v >= 7:
            fields["protocol_type"] = result.protocol_type
        if v >= 9:
            fields["skip_assignment"] = False
        return req.response(**fields)

    async def sync_group(self, req: Request) -> Any:
        b = req.body
        v = req.version
        refused = self._acl(req).group_error(b.group_id)
        result: ev.SyncResult = ev.SyncResult(refused) if refused != ErrorCode.NONE else await self._ask(
            lambda t: ev.SyncGroup(
                t, b.group_id, b.generation_id, b.member_id, b.group_instance_id if v >= 3 else None,
                b.protocol_type if v >= 5 else None, b.protocol_name if v >= 5 else None,
                tuple((a.member_id, bytes(a.assignment)) for a in b.assignments)))
        fields: dict[str, Any] = dict(throttle_time_ms=0, error_code=result.error, assignment=result.assignment)
        if v >= 5:
            fields.update(protocol_type=result.protocol_type, protocol_name=result.protocol_name)
        return req.response(**fields)

    async def heartbeat(self, req: Request) -> Any:
        b = req.body
        refused = self._acl(req).group_error(b.group_id)
        code: ErrorCode = refused if refused != ErrorCode.NONE else await self._ask(
            lambda t: ev.Heartbeat(t, b.group_id, b.generation_id, b.member_id,
                                   b.group_instance_id if req.version >= 3 else None))
        return req.response(throttle_time_ms=0, error_code=code)

    async def leave_group(self, req: Request) -> Any:
        b = req.body
        if req.version >= 3:
            members = tuple((m.member_id, m.group_instance_id) for m in b.members)
        else:
            members = ((b.member_id, None),)
        refused = self._acl(req).group_error(b.group_id)
        result: ev.LeaveResult = ev.LeaveResult(refused) if refused != ErrorCode.NONE else await self._ask(
            lambda t: ev.LeaveGroup(t, b.group_id, members))
        if req.version < 3:
            return req.response(throttle_time_ms=0, error_code=result.error)
        M = req.spec.response.MemberResponse
        top = result.error if result.error in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                               ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.INVALID_GROUP_ID,
                                               ErrorCode.GROUP_AUTHORIZATION_FAILED) \
            else ErrorCode.NONE
        return req.response(throttle_time_ms=0, error_code=top, members=[
            M(member_id=m, group_instance_id=i, error_code=c) for m, i, c in result.members])

    # --- offsets -------------------------------------------------------------------------------------------------

    async def offset_commit(self, req: Request) -> Any:
        b = req.body
        v = req.version
        offsets = tuple(
            ev.CommittedOffset(t.name, p.partition_index, p.committed_offset,
                               p.committed_leader_epoch if v >= 6 else -1, p.committed_metadata)
            for t in b.topics for p in t.partitions)
        result = await self._commit(req, offsets, lambda tok, kept: ev.OffsetCommit(
            tok, b.group_id, b.generation_id_or_member_epoch, b.member_id, b.group_instance_id if v >= 7 else None, kept))
        T = req.spec.response.OffsetCommitResponseTopic
        P = T.OffsetCommitResponsePartition
        by_topic: dict[str, list[Any]] = {}
        for topic, partition, code in result.partitions:
            by_topic.setdefault(topic, []).append(P(partition_index=partition, error_code=code))
        return req.response(throttle_time_ms=0, topics=[T(name=n, partitions=ps) for n, ps in by_topic.items()])

    async def txn_offset_commit(self, req: Request) -> Any:
        b = req.body
        v = req.version
        offsets = tuple(
            ev.CommittedOffset(t.name, p.partition_index, p.committed_offset,
                               p.committed_leader_epoch if v >= 2 else -1, p.committed_metadata)
            for t in b.topics for p in t.partitions)
        # TRANSACTIONAL_ID WRITE first, then the group and the topics (KafkaApis.handleTxnOffsetCommitRequest).
        refused = self._acl(req).transactional_id_error(b.transactional_id)
        if refused != ErrorCode.NONE:
            result = ev.PartitionResults(refused, tuple((o.topic, o.partition, refused) for o in offsets))
        else:
            result = await self._commit(req, offsets, lambda tok, kept: ev.TxnOffsetCommit(
                tok, b.group_id, b.producer_id, b.producer_epoch, b.generation_id if v >= 3 else -1,
                b.member_id if v >= 3 else "", b.group_instance_id if v >= 3 else None, kept))
        T = req.spec.response.TxnOffsetCommitResponseTopic
        P = T.TxnOffsetCommitResponsePartition
        by_topic: dict[str, list[Any]] = {}
        for topic, partition, code in result.partitions:
            if v < 2 and code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                # Producers before 2.0 fail on a loading coordinator (KAFKA-7296) but retry this one.
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            by_topic.setdefault(topic, []).append(P(partition_index=partition, error_code=code))
        return req.response(throttle_time_ms=0, topics=[T(name=n, partitions=ps) for n, ps in by_topic.items()])

    async def _commit(self, req: Request, offsets: tuple[ev.CommittedOffset, ...],
                      make: Callable[[int, tuple[ev.CommittedOffset, ...]], ev.Event]) -> ev.PartitionResults:
        """OffsetCommit's and TxnOffsetCommit's checks before the coordinator: the group, the topics,
        the partitions this broker knows; ``make`` builds the event of what is left."""
        b = req.body
        acl = self._acl(req)
        requested = [(o.topic, o.partition) for o in offsets]
        refused_group = acl.group_error(b.group_id)
        if refused_group != ErrorCode.NONE:
            return ev.PartitionResults(refused_group, tuple((t, p, refused_group) for t, p in requested))
        allowed, refused = acl.split_partitions(requested)
        # A partition this broker does not know is UNKNOWN_TOPIC_OR_PARTITION, checked after the ACLs and
        # before the coordinator (KafkaApis.handleOffsetCommitRequest): no offset is stored for it.
        topics = self.broker.image.topics
        unknown = [(t, p) for t, p in allowed if t not in topics or p not in topics[t].partitions]
        kept = set(allowed) - set(unknown)
        unknown_results = tuple((t, p, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for t, p in dict.fromkeys(unknown))
        if not kept:  # nothing left to commit: the coordinator (and the group) is not touched
            return ev.PartitionResults(ErrorCode.NONE, merge_results(requested, refused,
                                                                     ErrorCode.TOPIC_AUTHORIZATION_FAILED, unknown_results))
        result: ev.PartitionResults = await self._ask(lambda tok: make(
            tok, tuple(o for o in offsets if (o.topic, o.partition) in kept)))
        return ev.PartitionResults(result.error, merge_results(requested, refused, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                                               result.partitions + unknown_results))

    async def _fetch(self, acl: GroupAcl, group_id: str, partitions: tuple[tuple[str, int], ...] | None,
                     require_stable: bool) -> ev.OffsetFetchResult:
        refused_group = acl.group_error(group_id)
        if refused_group != ErrorCode.NONE:
            return ev.OffsetFetchResult(refused_group)
        if partitions is None:
            result: ev.OffsetFetchResult = await self._ask(_offset_fetch(group_id, None, require_stable))
            visible = acl.describable_topics(o.topic for o in result.offsets)
            return ev.OffsetFetchResult(result.error, tuple(o for o in result.offsets if o.topic in visible))
        allowed, refused = acl.split_partitions(partitions)
        result = await self._ask(_offset_fetch(group_id, allowed, require_stable))
        if result.error != ErrorCode.NONE:
            return result
        # Refused topics' partitions answer TOPIC_AUTHORIZATION_FAILED; all in the request's order.
        answered = {(o.topic, o.partition): o for o in result.offsets}
        denied = set(refused)
        out = []
        for t, p in dict.fromkeys(partitions):
            if (t, p) in denied:
                out.append(ev.FetchedOffset(t, p, -1, -1, "", ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            elif (t, p) in answered:
                out.append(answered[(t, p)])
        return ev.OffsetFetchResult(ErrorCode.NONE, tuple(out))

    async def offset_fetch(self, req: Request) -> Any:
        b = req.body
        v = req.version
        if v >= 8:
            wanted = [(g.group_id, None if g.topics is None else tuple((t.name, p) for t in g.topics
                                                                        for p in t.partition_indexes)) for g in b.groups]
        else:
            wanted = [(b.group_id, None if b.topics is None else tuple((t.name, p) for t in b.topics
                                                                        for p in t.partition_indexes))]
        acl = self._acl(req)
        require_stable = v >= 7 and bool(b.require_stable)
        results: list[ev.OffsetFetchResult] = []
        for group_id, partitions in wanted:
            results.append(await self._fetch(acl, group_id, partitions, require_stable))
        if v >= 8:
            G = req.spec.response.OffsetFetchResponseGroup
            T = G.OffsetFetchResponseTopics
            P = T.OffsetFetchResponsePartitions
            groups = []
            for (group_id, _), r in zip(wanted, results, strict=True):
                by_topic: dict[str, list[Any]] = {}
                for o in r.offsets:
                    by_topic.setdefault(o.topic, []).append(P(
                        partition_index=o.partition, committed_offset=o.offset, committed_leader_epoch=o.leader_epoch,
                        metadata=o.metadata, error_code=o.error))
                groups.append(G(group_id=group_id, error_code=r.error,
                                topics=[T(name=n, partitions=ps) for n, ps in by_topic.items()]))
            return req.response(throttle_time_ms=0, groups=groups)
        r = results[0]
        requested = wanted[0][1]
        if v < 2 and r.error != ErrorCode.NONE and requested:
            # v0/v1 have no group-level error field: each requested partition carries it.
            r = ev.OffsetFetchResult(r.error, tuple(ev.FetchedOffset(t, p, -1, -1, "", r.error) for t, p in requested))
        T = req.spec.response.OffsetFetchResponseTopic
        P = T.OffsetFetchResponsePartition
        by_topic = {}
        for o in r.offsets:
            part: dict[str, Any] = dict(partition_index=o.partition, committed_offset=o.offset, metadata=o.metadata,
                                        error_code=o.error if v >= 2 or r.error == ErrorCode.NONE else r.error)
            if v >= 5:
                part["committed_leader_epoch"] = o.leader_epoch
            by_topic.setdefault(o.topic, []).append(P(**part))
        fields: dict[str, Any] = dict(topics=[T(name=n, partitions=ps) for n, ps in by_topic.items()])
        if v >= 2:
            fields["error_code"] = r.error
        if v >= 3:
            fields["throttle_time_ms"] = 0
        return req.response(**fields)

    async def offset_delete(self, req: Request) -> Any:
        b = req.body
        partitions = tuple((t.name, p.partition_index) for t in b.topics for p in t.partitions)
        acl = self._acl(req)
        result: ev.PartitionResults
        refused_group = acl.group_error(b.group_id)
        if refused_group != ErrorCode.NONE:
            result = ev.PartitionResults(refused_group)
        else:
            allowed, refused = acl.split_partitions(partitions)
            answer: ev.PartitionResults = await self._ask(lambda tok: ev.OffsetDelete(tok, b.group_id, allowed))
            result = ev.PartitionResults(answer.error, merge_results(partitions, refused,
                                                                     ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                                                     answer.partitions))
        T = req.spec.response.OffsetDeleteResponseTopic
        P = T.OffsetDeleteResponsePartition
        by_topic: dict[str, list[Any]] = {}
        for topic, partition, code in result.partitions:
            by_topic.setdefault(topic, []).append(P(partition_index=partition, error_code=code))
        return req.response(error_code=result.error, throttle_time_ms=0,
                            topics=[T(name=n, partitions=ps) for n, ps in by_topic.items()])

    # --- ListGroups, DescribeGroups, DeleteGroups ----------------------------------------------------------------

    async def list_groups(self, req: Request) -> Any:
        b = req.body
        states = frozenset(b.states_filter) if req.version >= 4 else frozenset()
        types = {t.lower() for t in b.types_filter} if req.version >= 5 else set()
        result: ev.ListGroupsResult = await self._ask(lambda t: ev.ListGroups(t, states))
        G = req.spec.response.ListedGroup
        groups = []
        visible = self._acl(req).listable_groups(g.group_id for g in result.groups)
        if not types or "classic" in types:
            for g in (g for g in result.groups if g.group_id in visible):
                fields: dict[str, Any] = dict(group_id=g.group_id, protocol_type=g.protocol_type)
                if req.version >= 4:
                    fields["group_state"] = g.state
                if req.version >= 5:
                    fields["group_type"] = "classic"
                groups.append(G(**fields))
        return req.response(throttle_time_ms=0, error_code=result.error, groups=groups)

    async def describe_groups(self, req: Request) -> Any:
        b = req.body
        acl = self._acl(req)
        allowed, refused = acl.split_groups(tuple(b.groups))
        described: dict[str, ev.DescribedGroup] = {g: ev.DescribedGroup(g, ErrorCode.GROUP_AUTHORIZATION_FAILED, state="")
                                                   for g in refused}
        if allowed:
            result: ev.DescribeGroupsResult = await self._ask(lambda t: ev.DescribeGroups(t, allowed))
            described.update((g.group_id, g) for g in result.groups)
        with_operations = req.version >= 3 and b.include_authorized_operations
        G = req.spec.response.DescribedGroup
        M = G.DescribedGroupMember
        groups = []
        for g in (described[name] for name in b.groups):  # a repeated id is answered each time, as before
            members = []
            for m in g.members:
                mf: dict[str, Any] = dict(member_id=m.member_id, client_id=m.client_id, client_host=m.client_host,
                                          member_metadata=m.metadata, member_assignment=m.assignment)
                if req.version >= 4:
                    mf["group_instance_id"] = m.instance_id
                members.append(M(**mf))
            gf: dict[str, Any] = dict(error_code=g.error, group_id=g.group_id, group_state=g.state,
                                      protocol_type=g.protocol_type, protocol_data=g.protocol_name, members=members)
            if req.version >= 3:
                # Not asked for (or the group not described): Kafka's INT32_MIN, which None encodes.
                gf["authorized_operations"] = acl.group_operations(g.group_id) \
                    if with_operations and g.error == ErrorCode.NONE else None
            groups.append(G(**gf))
        return req.response(throttle_time_ms=0, groups=groups)

    async def delete_groups(self, req: Request) -> Any:
        names = tuple(req.body.groups_names)
        allowed, refused = self._acl(req).split_groups(names)
        results = [(g, ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in dict.fromkeys(refused)]
        if allowed:
            result: ev.DeleteGroupsResult = await self._ask(lambda t: ev.DeleteGroups(t, allowed))
            results += result.results
        order = {g: i for i, g in reversed(list(enumerate(names)))}
        R = req.spec.response.DeletableGroupResult
        return req.response(throttle_time_ms=0, results=[R(group_id=g, error_code=c) for g, c in
                                                         sorted(results, key=lambda r: order.get(r[0], len(order)))])


def _offset_fetch(group_id: str, partitions: tuple[tuple[str, int], ...] | None,
                  require_stable: bool) -> Callable[[int], ev.Event]:
    return lambda token: ev.OffsetFetch(token, group_id, partitions, require_stable)
