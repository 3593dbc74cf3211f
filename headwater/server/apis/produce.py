"""Produce and InitProducerId: the write path's entry."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from headwater.protocol.apis import ApiKey, Request
from headwater.protocol.errors import ErrorCode, KafkaError, RecordValidationError
from headwater.protocol.produce import PartitionResult, encode_produce_response
from headwater.records.batch import create_time_ms
from headwater.security.acl import AclOperation, ResourceType
from headwater.server.authority import Handler
from headwater.server.context import BrokerContext


class ProduceApis:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def handlers(self) -> dict[int, Handler]:
        return {ApiKey.PRODUCE: self.produce, ApiKey.INIT_PRODUCER_ID: self.init_producer_id}

    async def produce(self, req: Request) -> Any:
        # For the adaptive reassignment throttle: an acks=all produce's time from arrival (its frame
        # read off the socket, so time queued behind other work on the event loop counts) to answer.
        started = req.arrived_s or time.perf_counter()
        body = req.body
        acks = body.acks
        results: list[tuple[str, list[PartitionResult]]] = []
        waits: list[tuple[PartitionResult, asyncio.Future[ErrorCode]]] = []
        # Under reassignment.adaptive.produce.latency.from=CreateTime: the oldest producer stamp, read
        # before the append (which may stamp LogAppendTime over it).
        created_ms: int | None = None
        judge_created = acks == -1 and self.ctx.replicas.judges_create_time
        # Transactional records need WRITE on the request's transactional id (KafkaApis.handleProduceRequest:
        # every partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED otherwise, and nothing is written).
        transactional_refused = _has_transactional_batches(body) and (
            body.transactional_id is None
            or not self.ctx.authz.allowed(req, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id))
        for topic_data in body.topic_data:
            name = topic_data.name
            parts = []
            writable = self.ctx.authz.topic(req, AclOperation.WRITE, name)
            for pd in topic_data.partition_data:
                part = PartitionResult(pd.index)  # log_append_time_ms stays -1 unless the topic uses LogAppendTime
                wait = None
                hosted = None
                try:
                    if acks not in (-1, 0, 1):
                        raise KafkaError(ErrorCode.INVALID_REQUIRED_ACKS)
                    if not writable:
                        raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    if transactional_refused:
                        raise KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                    hosted = self.ctx.leader(name, pd.index)
                    records = pd.records
                    if not records:
                        raise KafkaError(ErrorCode.INVALID_RECORD, "empty records")
                    if judge_created:
                        stamp = create_time_ms(records)
                        if stamp is not None and (created_ms is None or stamp < created_ms):
                            created_ms = stamp
                    # max.message.bytes is checked per batch by the append, after the leader's
                    # NOT_ENOUGH_REPLICAS check, as in Kafka's appendRecordsToLeader. The records
                    # are a view of the request's frame: offsets are assigned in it, and it is written.
                    result, wait = self.ctx.replicas.append(hosted, records, acks, body.timeout_ms)
                    part.base_offset, part.log_append_time_ms = result.base_offset, result.log_append_time
                    part.log_start_offset = hosted.plog.log_start_offset
                except KafkaError as exc:
                    part.error_code, part.error_message = exc.code, exc.message
                    part.record_errors = list(getattr(exc, "record_errors", ()))
                    if isinstance(exc, RecordValidationError) and hosted is not None:
                        # Kafka's ReplicaManager answers a RecordValidationException with the log start offset.
                        part.log_start_offset = hosted.plog.log_start_offset
                except ValueError as exc:  # a malformed batch header
                    part.error_code, part.error_message = ErrorCode.CORRUPT_MESSAGE, str(exc)
                parts.append(part)
                if wait is not None:
                    waits.append((part, wait))
            results.append((name, parts))
        # acks=all: answer once the high watermark covers every batch (or each one failed).
        for part, wait in waits:
            error = await wait
            if error != ErrorCode.NONE:
                part.error_code = error
                part.error_message = None
        if acks == -1 and waits:
            self.ctx.replicas.record_produce_latency(started, created_ms)
        if acks == 0:
            return None
        return [encode_produce_response(req.version, req.correlation_id, results)]

    async def init_producer_id(self, req: Request) -> Any:
        body = req.body
        if body.transactional_id is not None:
            return await self.ctx.transactions.init_producer_id(req)
        # An idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679).
        if not self.ctx.authz.any_topic(req, AclOperation.WRITE) and not self.ctx.authz.cluster(req, AclOperation.IDEMPOTENT_WRITE):
            return req.response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                producer_id=-1, producer_epoch=-1)
        if req.version >= 3 and body.producer_id >= 0:
            # An idempotent producer bumping its epoch after an error keeps its id.
            epoch = body.producer_epoch + 1
            if epoch <= 32767:
                return req.response(throttle_time_ms=0, error_code=0, producer_id=body.producer_id, producer_epoch=epoch)
        return req.response(throttle_time_ms=0, error_code=0, producer_id=await self.ctx.producer_ids.next(),
                            producer_epoch=0)


# The low byte of a RecordBatch v2's attributes (after base offset, length, leader epoch, magic, CRC).
_ATTRIBUTES_LOW_BYTE = 22
_TRANSACTIONAL_BIT = 0x10


def _has_transactional_batches(body: Any) -> bool:
    """Whether any partition's first batch is transactional: a cheap look at one byte, since Produce
    v3+ carries one batch per partition, and this runs on every produce."""
    for topic_data in body.topic_data:
        for pd in topic_data.partition_data:
            records = pd.records
            if records and len(records) > _ATTRIBUTES_LOW_BYTE and records[_ATTRIBUTES_LOW_BYTE] & _TRANSACTIONAL_BIT:
                return True
    return False
