"""ListOffsets, OffsetForLeaderEpoch and DeleteRecords: positions in a partition's log."""

from __future__ import annotations

from typing import Any

from headwater.protocol.apis import ApiKey, Request
from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.security.acl import AclOperation
from headwater.server.authority import Handler
from headwater.server.clock import now_ms
from headwater.server.context import BrokerContext

# ListOffsets special timestamps
LATEST_TIMESTAMP = -1
READ_COMMITTED = 1  # a ListOffsets' isolation level (v2+)
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4  # KIP-405
LATEST_TIERED_TIMESTAMP = -5  # KIP-1005
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6  # KIP-1023
# The first ListOffsets version that may carry each special timestamp (Kafka's
# ListOffsetsRequest.timestampMinSupportedVersion); any other negative timestamp is unsupported.
TIMESTAMP_MIN_VERSION = {LATEST_TIMESTAMP: 0, EARLIEST_TIMESTAMP: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL_TIMESTAMP: 8,
                         LATEST_TIERED_TIMESTAMP: 9, EARLIEST_PENDING_UPLOAD_TIMESTAMP: 11}
CONSUMER_REPLICA_ID, DEBUGGING_REPLICA_ID = -1, -2  # ListOffsets replica ids that are not brokers


class OffsetApis:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def handlers(self) -> dict[int, Handler]:
        return {
            ApiKey.LIST_OFFSETS: self.list_offsets,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self.offset_for_leader_epoch,
            ApiKey.DELETE_RECORDS: self.delete_records,
        }

    def list_offsets(self, req: Request) -> Any:
        resp_cls = req.spec.response
        topic_cls = resp_cls.ListOffsetsTopicResponse
        part_cls = topic_cls.ListOffsetsPartitionResponse
        if req.version == 0:
            return self._list_offsets_v0(req, topic_cls, part_cls)
        topics = []
        for t in req.body.topics:
            parts = []
            describable = self.ctx.authz.topic(req, AclOperation.DESCRIBE, t.name)
            for p in t.partitions:
                code, ts, offset, epoch = ErrorCode.NONE, -1, -1, -1
                try:
                    if not describable:
                        raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    if p.timestamp < 0 and req.version < TIMESTAMP_MIN_VERSION.get(p.timestamp, 1 << 15):
                        # ReplicaManager.isListOffsetsTimestampUnsupported: checked before the leader.
                        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION)
                    hosted = self.ctx.leader(t.name, p.partition_index, p.current_leader_epoch if req.version >= 4 else -1)
                    plog = hosted.plog
                    epoch = hosted.replica.leader_epoch
                    # Partition.fetchOffsetForTimestamp: a follower resetting its fetch position may read to
                    # the log end, a read_committed consumer to the last stable offset, others to the high watermark.
                    client = req.body.replica_id == CONSUMER_REPLICA_ID
                    if not client:
                        fetchable = plog.log_end_offset
                    elif req.version >= 2 and req.body.isolation_level == READ_COMMITTED:
                        fetchable = plog.last_stable_offset
                    else:
                        fetchable = plog.high_watermark
                    # A leader elected moments ago whose high watermark is still below the start of its
                    # epoch would answer an end that later moves back: the client is told to ask again.
                    epoch_start = hosted.replica.leader_epoch_start_offset
                    lagging = client and epoch_start is not None and epoch_start > plog.high_watermark
                    if p.timestamp == LATEST_TIMESTAMP:
                        if lagging:
                            raise KafkaError(ErrorCode.OFFSET_NOT_AVAILABLE)
                        offset = fetchable
                    elif p.timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
                        offset = plog.log_start_offset  # without tiered storage the local log is the whole log
                    elif p.timestamp in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
                        epoch = -1  # nothing tiered: Kafka's UnifiedLog answers offset -1, epoch -1
                    else:
                        # ReplicaManager.fetchOffset: a record found at or past what may be read is not
                        # answered (offset -1), or is OFFSET_NOT_AVAILABLE while the high watermark lags.
                        found: tuple[int, int] | None
                        if p.timestamp == MAX_TIMESTAMP:
                            found = plog.max_timestamp_offset()  # (-1, -1) in an empty log
                        else:
                            found = plog.offset_for_timestamp(p.timestamp)
                        if found is not None and 0 <= found[0] < fetchable:
                            offset, ts = found
                        elif lagging:
                            raise KafkaError(ErrorCode.OFFSET_NOT_AVAILABLE)
                except KafkaError as exc:
                    code = exc.code
                parts.append(part_cls(partition_index=p.partition_index, error_code=code, old_style_offsets=[],
                                      timestamp=ts, offset=offset, leader_epoch=epoch))
            topics.append(topic_cls(name=t.name, partitions=parts))
        return req.response(throttle_time_ms=0, topics=topics)

    def _list_offsets_v0(self, req: Request, topic_cls: Any, part_cls: Any) -> Any:
        """Kafka 3.9's ``handleListOffsetRequestV0``: up to ``max_num_offsets`` segment start offsets
        (``UnifiedLog.legacyFetchOffsetsBefore``), capped at the high watermark for a consumer
        (``Partition.legacyFetchOffsetsForTimestamp``); the debugging replica id may ask a follower."""
        replica_id = req.body.replica_id
        topics = []
        for t in req.body.topics:
            parts = []
            describable = self.ctx.authz.topic(req, AclOperation.DESCRIBE, t.name)
            for p in t.partitions:
                code, offsets = ErrorCode.NONE, []
                try:
                    if not describable:
                        raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    if p.timestamp < EARLIEST_TIMESTAMP:
                        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION)
                    hosted = self.ctx.replicas.hosted(t.name, p.partition_index) if replica_id == DEBUGGING_REPLICA_ID else None
                    if hosted is None:
                        hosted = self.ctx.leader(t.name, p.partition_index)
                    plog = hosted.plog
                    offsets = plog.legacy_offsets_before(p.timestamp, p.max_num_offsets, now_ms())
                    if replica_id == CONSUMER_REPLICA_ID and any(o > plog.high_watermark for o in offsets):
                        offsets = [plog.high_watermark, *(o for o in offsets if o <= plog.high_watermark)]
                except KafkaError as exc:
                    code = exc.code
                parts.append(part_cls(partition_index=p.partition_index, error_code=code, old_style_offsets=offsets))
            topics.append(topic_cls(name=t.name, partitions=parts))
        return req.response(topics=topics)

    def offset_for_leader_epoch(self, req: Request) -> Any:
        resp_cls = req.spec.response
        topic_cls = resp_cls.OffsetForLeaderTopicResult
        part_cls = topic_cls.EpochEndOffset
        topics = []
        # A follower (replica id >= 0, v3+) needs CLUSTER_ACTION; a consumer DESCRIBE on each topic.
        follower = req.version >= 3 and req.body.replica_id >= 0
        cluster_ok = not follower or self.ctx.authz.cluster(req, AclOperation.CLUSTER_ACTION)
        for t in req.body.topics:
            parts = []
            refused = ErrorCode.NONE
            if not cluster_ok:
                refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            elif not follower and not self.ctx.authz.topic(req, AclOperation.DESCRIBE, t.topic):
                refused = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            for p in t.partitions:
                code, epoch, end = ErrorCode.NONE, -1, -1
                try:
                    if refused:
                        raise KafkaError(refused)
                    hosted = self.ctx.leader(t.topic, p.partition, p.current_leader_epoch)
                    epoch, end = hosted.plog.end_offset_for_epoch(p.leader_epoch)
                except KafkaError as exc:
                    code = exc.code
                parts.append(part_cls(error_code=code, partition=p.partition, leader_epoch=epoch, end_offset=end))
            topics.append(topic_cls(topic=t.topic, partitions=parts))
        return req.response(throttle_time_ms=0, topics=topics)

    def delete_records(self, req: Request) -> Any:
        topic_cls = req.spec.response.DeleteRecordsTopicResult
        part_cls = topic_cls.DeleteRecordsPartitionResult
        topics = []
        for t in req.body.topics:
            parts = []
            deletable = self.ctx.authz.topic(req, AclOperation.DELETE, t.name)
            for p in t.partitions:
                code, low = ErrorCode.NONE, -1
                try:
                    if not deletable:
                        raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    plog = self.ctx.leader(t.name, p.partition_index).plog
                    if not plog.config.delete:  # Kafka: a compact-only topic keeps every latest value
                        raise KafkaError(ErrorCode.POLICY_VIOLATION)
                    target = plog.high_watermark if p.offset == -1 else p.offset
                    if target < 0 or target > plog.high_watermark:
                        raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE)
                    plog.delete_records_before(target)
                    low = plog.log_start_offset
                except KafkaError as exc:
                    code = exc.code
                parts.append(part_cls(partition_index=p.partition_index, low_watermark=low, error_code=code))
            topics.append(topic_cls(name=t.name, partitions=parts))
        return req.response(throttle_time_ms=0, topics=topics)
