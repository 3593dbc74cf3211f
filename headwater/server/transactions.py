"""The shell of the transaction coordinator: Kafka requests in, coordinator events, and the I/O they ask for.

``headwater/coordinator/transactions.py`` decides; this module

* answers InitProducerId for a transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
  DescribeTransactions and ListTransactions as the coordinator of the ids whose
  ``__transaction_state`` partition this broker leads, after the authorizer (KafkaApis' order);
* finds the coordinator of a transactional id for FindCoordinator, creating ``__transaction_state``
  on first use through the path every internal topic takes;
* appends the coordinator's records to its partition with acks=all and reports back once they are
  committed or failed; loads a partition's transactions when this broker becomes its leader (the
  partition's leader epoch is the coordinator epoch the markers carry) and drops them when it stops;
* delivers the transaction markers (WriteTxnMarkers to each partition's leader, this broker's own
  partitions directly), retrying until each is written or its partition is gone, as Kafka's
  TransactionMarkerChannelManager does;
* as a partition leader, writes the markers it is sent (WriteTxnMarkers) and tells the group
  coordinator when one lands in ``__consumer_offsets``, and describes its partitions' producers
  (DescribeProducers).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from kafka.protocol.producer.transaction import WriteTxnMarkersRequest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from headwater.coordinator import txn_events as tev
from headwater.coordinator.records import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, partition_for
from headwater.coordinator.transactions import TransactionCoordinator
from headwater.protocol.apis import ApiKey, Request
from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.records import iter_batches
from headwater.records.records import build_marker_batch
from headwater.security.acl import AclOperation, ResourceType
from headwater.server.channel import ChannelError, ChannelPool
from headwater.server.clock import now_ms
from headwater.server.coordinator_runtime import (
    NO_NODE,
    CoordinatorRuntime,
    Found,
    coordinator_endpoint,
    create_internal_topic,
)
from headwater.storage.producers import AppendOrigin

if TYPE_CHECKING:
    from headwater.server.context import BrokerContext
    from headwater.server.replica_manager import Hosted

log = logging.getLogger(__name__)

TXN_TOPIC = TRANSACTION_STATE_TOPIC
TICK_INTERVAL_S = 0.5
MARKER_TIMEOUT_MS = 30_000  # request.timeout.ms: how long a marker's acks=all append may take
MARKER_RETRY_S = 0.1
WRITE_TXN_MARKERS_VERSION = 1
# A marker that fails with these is retried (TransactionMarkerRequestCompletionHandler); with
# INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED a newer coordinator or epoch owns the
# transaction and sending stops; anything else is not retried.
_MARKER_RETRIABLE = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
})
_MARKER_FENCED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})


def build_state_batch(records: tuple[tuple[bytes, bytes | None], ...], timestamp_ms: int) -> bytearray:
    """One uncompressed RecordBatch v2 of the coordinator's records (the log assigns the offsets)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1)
    for i, (key, value) in enumerate(records):
        builder.append(i, timestamp=timestamp_ms, key=key, value=value, headers=[])
    return bytearray(builder.build())


def read_state_records(buf: bytes) -> Iterator[tuple[bytes, bytes | None]]:
    """(key, value) of every keyed record of the data batches in ``buf``."""
    for pos, header in iter_batches(buf, verify_crc=False):
        if header.is_control:
            continue
        for record in DefaultRecordBatch(bytes(buf[pos:pos + header.size])):
            if record.key is not None:
                yield bytes(record.key), None if record.value is None else bytes(record.value)


def _fenced_for(version: int, first_with_fenced: int, code: ErrorCode) -> ErrorCode:
    """Clients older than an API's version that knows PRODUCER_FENCED get INVALID_PRODUCER_EPOCH (KafkaApis)."""
    if code == ErrorCode.PRODUCER_FENCED and version < first_with_fenced:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


class TxnShell(CoordinatorRuntime):
    topic = TXN_TOPIC
    tick_interval_s = TICK_INTERVAL_S

    def __init__(self, broker: BrokerContext) -> None:
        super().__init__(broker, log)
        props = broker.config.props
        self.config = tev.TxnConfig.from_properties(props)
        self.replication_factor = int(props.get("transaction.state.log.replication.factor", 3))
        self.min_isr = int(props.get("transaction.state.log.min.isr", 2))
        self.segment_bytes = props.get("transaction.state.log.segment.bytes", "104857600")
        self.core = TransactionCoordinator(self.config)
        self._channels = ChannelPool(broker.authn.channel_security)

    def handlers(self) -> dict[ApiKey, Callable[[Request], Any]]:
        return {
            ApiKey.ADD_PARTITIONS_TO_TXN: self.add_partitions_to_txn,
            ApiKey.ADD_OFFSETS_TO_TXN: self.add_offsets_to_txn,
            ApiKey.END_TXN: self.end_txn,
            ApiKey.WRITE_TXN_MARKERS: self.write_txn_markers,
            ApiKey.DESCRIBE_TRANSACTIONS: self.describe_transactions,
            ApiKey.LIST_TRANSACTIONS: self.list_transactions,
            ApiKey.DESCRIBE_PRODUCERS: self.describe_producers,
        }

    async def stop(self) -> None:
        await super().stop()
        self._channels.close()

    # --- the core (CoordinatorRuntime) -------------------------------------------------------------------

    def _handle(self, event: Any) -> tev.TxnOutput:
        return self.core.handle(event, now_ms())

    def _apply(self, out: tev.TxnOutput) -> None:
        for append in out.appends:
            self._write(append.partition, append.write_id, functools.partial(build_state_batch, append.records, now_ms()))
        for markers in out.markers:
            self._spawn(self._deliver(markers))
        for reply in out.replies:
            self._reply(reply.token, reply.result)

    def _append_done(self, write_id: int, error: ErrorCode) -> Any:
        return tev.AppendDone(write_id, error)

    def _tick(self) -> Any:
        return tev.Tick()

    def _load_started(self, partition: int, generation: int) -> Any:
        return tev.LoadStarted(partition)

    def _load_finished(self, partition: int, generation: int, hosted: Hosted, records: Sequence[Any]) -> Any:
        # The partition's leader epoch is the coordinator epoch its markers carry (Kafka's coordinatorEpoch).
        return tev.LoadFinished(partition, hosted.replica.leader_epoch, tuple(records))

    def _unloaded(self, partition: int) -> Any:
        return tev.Unloaded(partition)

    def _decode(self, buf: bytes) -> Iterator[tuple[bytes, bytes | None]]:
        return read_state_records(buf)

    # --- FindCoordinator ------------------------------------------------------------------------------------

    def state_topic_spec(self) -> tuple[int, int, dict[str, str]]:
        """(partitions, replication factor, configs) of ``__transaction_state``, as Kafka creates it
        (TransactionStateManager.transactionTopicConfigs): compacted, uncompressed, no unclean
        election; the replication factor and min.insync.replicas capped to the live brokers."""
        rf = max(1, min(self.replication_factor, len(self.broker.image.brokers)))
        return self.config.num_partitions, rf, {
            "cleanup.policy": "compact", "compression.type": "uncompressed", "unclean.leader.election.enable": "false",
            "min.insync.replicas": str(max(1, min(self.min_isr, rf))), "segment.bytes": self.segment_bytes,
        }

    async def coordinator_for(self, transactional_id: str) -> Found:
        """FindCoordinator for a transactional id: the leader of its state partition."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, "the transactional id is empty", NO_NODE
        return await coordinator_endpoint(self.broker, TXN_TOPIC, self.core.partition_for(transactional_id),
                                          self._create_state_topic)

    async def _create_state_topic(self) -> None:
        await create_internal_topic(self.broker, TXN_TOPIC, self.state_topic_spec(), log)

    # --- the producer's requests ----------------------------------------------------------------------------

    def _may_write(self, req: Request, transactional_id: str) -> bool:
        return self.broker.authz.allowed(req, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)

    async def init_producer_id(self, req: Request) -> Any:
        """InitProducerId with a transactional id (KafkaApis.handleInitProducerIdRequest, then the coordinator)."""
        b = req.body
        pid, epoch = (b.producer_id, b.producer_epoch) if req.version >= 3 else (-1, -1)

        def answer(code: ErrorCode, producer_id: int = -1, producer_epoch: int = -1) -> Any:
            return req.response(throttle_time_ms=0, error_code=_fenced_for(req.version, 4, code),
                                producer_id=producer_id, producer_epoch=producer_epoch)

        if not self._may_write(req, b.transactional_id):
            return answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if (pid == -1) != (epoch == -1):
            return answer(ErrorCode.INVALID_REQUEST)
        if not b.transactional_id:
            return answer(ErrorCode.INVALID_REQUEST)
        new_id = await self.broker.producer_ids.next()
        result: tev.InitProducerIdResult = await self._ask(lambda t: tev.InitProducerId(
            t, b.transactional_id, b.transaction_timeout_ms, pid, epoch, new_id))
        return answer(result.error, result.producer_id, result.producer_epoch)

    async def add_partitions_to_txn(self, req: Request) -> Any:
        b = req.body
        if req.version >= 4:
            return await self._verify_partitions(req)
        txn_id = b.v3_and_below_transactional_id
        wanted = [(t.name, p) for t in b.v3_and_below_topics for p in t.partitions]
        results = await self._add_partitions(req, txn_id, b.v3_and_below_producer_id, b.v3_and_below_producer_epoch,
                                             wanted, verify_only=False)
        return req.response(throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(req, results))

    async def _add_partitions(self, req: Request, txn_id: str, producer_id: int, producer_epoch: int,
                              wanted: list[tuple[str, int]], *, verify_only: bool) -> list[tuple[str, int, ErrorCode]]:
        """KafkaApis.handleAddPartitionsToTxnRequest: the transactional id's WRITE first; then topics
        the principal may not WRITE and partitions that do not exist, which leave the others
        OPERATION_NOT_ATTEMPTED; then the coordinator."""
        wanted = list(dict.fromkeys(wanted))
        if not verify_only and not self._may_write(req, txn_id):
            return [(t, p, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED) for t, p in wanted]
        topics = self.broker.image.topics
        failed: dict[tuple[str, int], ErrorCode] = {}
        for t, p in wanted:
            if not verify_only and not self.broker.authz.topic(req, AclOperation.WRITE, t):
                failed[(t, p)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif t not in topics or p not in topics[t].partitions:
                failed[(t, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if failed:
            return [(t, p, failed.get((t, p), ErrorCode.OPERATION_NOT_ATTEMPTED)) for t, p in wanted]
        result: tev.AddPartitionsResult = await self._ask(lambda tok: tev.AddPartitions(
            tok, txn_id, producer_id, producer_epoch, tuple(wanted), verify_only))
        fenced = 2 if not verify_only else 0
        return [(t, p, _fenced_for(req.version, fenced, code)) for t, p, code in result.partitions]

    async def _verify_partitions(self, req: Request) -> Any:
        """AddPartitionsToTxn v4+: brokers batching transactions, optionally verify-only (KIP-890);
        brokers only, so CLUSTER_ACTION (KafkaApis answers CLUSTER_AUTHORIZATION_FAILED at the top)."""
        if not self.broker.authz.cluster(req, AclOperation.CLUSTER_ACTION):
            return req.response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                results_by_transaction=[])
        R = req.spec.response.AddPartitionsToTxnResult
        out = []
        for txn in req.body.transactions:
            wanted = [(t.name, p) for t in txn.topics for p in t.partitions]
            results = await self._add_partitions(req, txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted,
                                                 verify_only=txn.verify_only)
            out.append(R(transactional_id=txn.transactional_id, topic_results=_topic_results(req, results)))
        return req.response(throttle_time_ms=0, error_code=ErrorCode.NONE, results_by_transaction=out)

    async def add_offsets_to_txn(self, req: Request) -> Any:
        """The group's ``__consumer_offsets`` partition joins the transaction (KafkaApis: the
        transactional id's WRITE, then the group's READ)."""
        b = req.body

        def answer(code: ErrorCode) -> Any:
            return req.response(throttle_time_ms=0, error_code=_fenced_for(req.version, 2, code))

        if not self._may_write(req, b.transactional_id):
            return answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if not self.broker.authz.group(req, AclOperation.READ, b.group_id):
            return answer(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        partition = partition_for(b.group_id, self.broker.groups.config.num_partitions)
        result: tev.AddPartitionsResult = await self._ask(lambda tok: tev.AddPartitions(
            tok, b.transactional_id, b.producer_id, b.producer_epoch, ((OFFSETS_TOPIC, partition),)))
        return answer(result.error)

    async def end_txn(self, req: Request) -> Any:
        b = req.body
        if not self._may_write(req, b.transactional_id):
            code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        else:
            result: tev.EndTxnResult = await self._ask(lambda tok: tev.EndTxn(
                tok, b.transactional_id, b.producer_id, b.producer_epoch, bool(b.committed)))
            code = result.error
        return req.response(throttle_time_ms=0, error_code=_fenced_for(req.version, 2, code))

    # --- describing ---------------------------------------------------------------------------------------------

    async def describe_transactions(self, req: Request) -> Any:
        ids = tuple(req.body.transactional_ids)
        allowed = tuple(i for i in dict.fromkeys(ids)
                        if self.broker.authz.allowed(req, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, i))
        described: dict[str, tev.DescribedTransaction] = {}
        if allowed:
            result: tev.DescribeTransactionsResult = await self._ask(lambda t: tev.DescribeTransactions(t, allowed))
            described = {d.transactional_id: d for d in result.transactions}
        S = req.spec.response.TransactionState
        T = S.TopicData
        out = []
        for txn_id in ids:
            d = described.get(txn_id)
            if d is None:
                out.append(S(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, transactional_id=txn_id,
                             transaction_state="", transaction_timeout_ms=0, transaction_start_time_ms=-1,
                             producer_id=-1, producer_epoch=-1, topics=[]))
                continue
            by_topic: dict[str, list[int]] = {}
            for topic, partition in d.partitions:
                # Topics the principal may not describe are left out (KafkaApis.handleDescribeTransactionsRequest).
                if self.broker.authz.topic(req, AclOperation.DESCRIBE, topic, note=False):
                    by_topic.setdefault(topic, []).append(partition)
            out.append(S(error_code=d.error, transactional_id=txn_id, transaction_state=d.state,
                         transaction_timeout_ms=d.timeout_ms, transaction_start_time_ms=d.start_time_ms,
                         producer_id=d.producer_id, producer_epoch=d.producer_epoch,
                         topics=[T(topic=t, partitions=ps) for t, ps in by_topic.items()]))
        return req.response(throttle_time_ms=0, transaction_states=out)

    async def list_transactions(self, req: Request) -> Any:
        b = req.body
        duration = b.duration_filter if req.version >= 1 else -1
        result: tev.ListTransactionsResult = await self._ask(lambda t: tev.ListTransactions(
            t, frozenset(b.state_filters), frozenset(b.producer_id_filters), duration))
        S = req.spec.response.TransactionState
        visible = [S(transactional_id=i, producer_id=p, transaction_state=s) for i, p, s in result.transactions
                   if self.broker.authz.allowed(req, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, i, note=False)]
        return req.response(throttle_time_ms=0, error_code=result.error,
                            unknown_state_filters=list(result.unknown_state_filters), transaction_states=visible)

    async def describe_producers(self, req: Request) -> Any:
        """Active producers of the partitions this broker holds a replica of
        (KafkaApis.handleDescribeProducersRequest: READ on the topic, then the replica's producer state)."""
        T = req.spec.response.TopicResponse
        P = T.PartitionResponse
        S = P.ProducerState
        topics = []
        for t in req.body.topics:
            readable = self.broker.authz.topic(req, AclOperation.READ, t.name)
            parts = []
            for index in t.partition_indexes:
                code, message, producers = ErrorCode.NONE, None, []
                try:
                    if not readable:
                        raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    # ReplicaManager.getPartitionOrError: any replica answers from its own log; a
                    # broker without one answers by whether the metadata knows the partition.
                    hosted = self.broker.replicas.hosted(t.name, index)
                    if hosted is None:
                        known = self.broker.image.topics.get(t.name)
                        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if known is None
                                         or index not in known.partitions else ErrorCode.NOT_LEADER_OR_FOLLOWER)
                    producers = [S(producer_id=a.producer_id, producer_epoch=a.producer_epoch,
                                   last_sequence=a.last_sequence, last_timestamp=a.last_timestamp,
                                   coordinator_epoch=a.coordinator_epoch,
                                   current_txn_start_offset=a.current_txn_start_offset)
                                 for a in hosted.plog.producer_state.active()]
                except KafkaError as exc:
                    code, message = exc.code, exc.message
                parts.append(P(partition_index=index, error_code=code, error_message=message,
                               active_producers=producers))
            topics.append(T(name=t.name, partitions=parts))
        return req.response(throttle_time_ms=0, topics=topics)

    # --- markers: sending them as coordinator -------------------------------------------------------------------

    async def _deliver(self, m: tev.SendMarkers) -> None:
        """Write ``m``'s marker to each of its partitions' leaders until every one is written or gone."""
        pending = set(m.partitions)
        state_partition = self.core.partition_for(m.transactional_id)
        generation = self._led.get(state_partition)
        while pending:
            if self._led.get(state_partition) != generation:
                return  # no longer the coordinator, or loaded again: whoever loads it sends them again
            by_leader: dict[int, list[tuple[str, int]]] = {}
            for tp in sorted(pending):
                topic = self.broker.image.topics.get(tp[0])
                state = topic.partitions.get(tp[1]) if topic is not None else None
                if state is None:
                    pending.discard(tp)  # deleted: nothing left to mark
                elif state.leader >= 0:
                    by_leader.setdefault(state.leader, []).append(tp)
            sends = [self._markers_to(leader, m, tps) for leader, tps in by_leader.items()]
            for results in await asyncio.gather(*sends):
                for tp, code in results:
                    if code in _MARKER_FENCED:
                        log.warning("marker for producer %d on %s-%d refused with %s: a newer coordinator or producer "
                                    "epoch owns the transaction", m.producer_id, tp[0], tp[1], code.name)
                        return
                    if code not in _MARKER_RETRIABLE:
                        if code != ErrorCode.NONE:
                            log.warning("marker for producer %d on %s-%d failed with %s; not retried",
                                        m.producer_id, tp[0], tp[1], code.name)
                        pending.discard(tp)
            if pending:
                await asyncio.sleep(MARKER_RETRY_S)
        self._apply(self.core.handle(tev.MarkersWritten(m.marker_id), now_ms()))

    async def _markers_to(self, leader: int, m: tev.SendMarkers,
                          tps: list[tuple[str, int]]) -> list[tuple[tuple[str, int], ErrorCode]]:
        if leader == self.broker.config.broker_id:
            written = await asyncio.gather(*(self._write_marker(t, p, m.producer_id, m.producer_epoch, m.commit,
                                                                m.coordinator_epoch) for t, p in tps))
            return list(zip(tps, written, strict=True))
        address = self.broker.broker_address(leader)
        if address is None:
            return [(tp, ErrorCode.NOT_LEADER_OR_FOLLOWER) for tp in tps]
        by_topic: dict[str, list[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        cls = WriteTxnMarkersRequest
        M = cls.WritableTxnMarker
        T = M.WritableTxnMarkerTopic
        request = cls(version=WRITE_TXN_MARKERS_VERSION, markers=[M(
            producer_id=m.producer_id, producer_epoch=m.producer_epoch, transaction_result=m.commit,
            topics=[T(name=t, partition_indexes=ps) for t, ps in by_topic.items()],
            coordinator_epoch=m.coordinator_epoch)])
        channel = self._channels.get(leader, address[0], address[1], f"broker-{self.broker.config.broker_id}-txn-markers")
        try:
            resp = await channel.request(request, WRITE_TXN_MARKERS_VERSION, timeout_s=MARKER_TIMEOUT_MS / 1000 + 5)
        except (ChannelError, OSError, TimeoutError) as exc:
            log.info("WriteTxnMarkers to broker %d failed: %s; retrying", leader, exc)
            return [(tp, ErrorCode.NETWORK_EXCEPTION) for tp in tps]
        codes = {(t.name, p.partition_index): ErrorCode(p.error_code) for r in resp.markers for t in r.topics
                 for p in t.partitions}
        return [(tp, codes.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)) for tp in tps]

    # --- markers: writing them as partition leader --------------------------------------------------------------

    async def write_txn_markers(self, req: Request) -> Any:
        """KafkaApis.handleWriteTxnMarkersRequest: brokers only (CLUSTER_ACTION); each marker appended
        with acks=all, and the group coordinator told of those in ``__consumer_offsets``."""
        allowed = self.broker.authz.cluster(req, AclOperation.CLUSTER_ACTION)
        R = req.spec.response.WritableTxnMarkerResult
        T = R.WritableTxnMarkerTopicResult
        P = T.WritableTxnMarkerPartitionResult
        out = []
        for m in req.body.markers:
            tps = [(t.name, p) for t in m.topics for p in t.partition_indexes]
            if allowed:
                codes = await asyncio.gather(*(self._write_marker(t, p, m.producer_id, m.producer_epoch,
                                                                  bool(m.transaction_result), m.coordinator_epoch)
                                               for t, p in tps))
            else:
                codes = [ErrorCode.CLUSTER_AUTHORIZATION_FAILED] * len(tps)
            by_topic: dict[str, list[Any]] = {}
            for (t, p), code in zip(tps, codes, strict=True):
                by_topic.setdefault(t, []).append(P(partition_index=p, error_code=code))
            out.append(R(producer_id=m.producer_id, topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()]))
        return req.response(markers=out)

    async def _write_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int, commit: bool,
                            coordinator_epoch: int) -> ErrorCode:
        try:
            hosted = self.broker.leader(topic, partition)
            batch = build_marker_batch(producer_id, producer_epoch, commit, coordinator_epoch, now_ms())
            _result, wait = self.broker.replicas.append(hosted, batch, -1, MARKER_TIMEOUT_MS,
                                                        origin=AppendOrigin.COORDINATOR)
        except KafkaError as exc:
            return exc.code
        code = await wait if wait is not None else ErrorCode.NONE
        if code == ErrorCode.NONE and topic == OFFSETS_TOPIC:
            self.broker.groups.on_txn_marker(partition, producer_id, commit)
        return code


def _topic_results(req: Request, results: list[tuple[str, int, ErrorCode]]) -> list[Any]:
    R = req.spec.response.AddPartitionsToTxnTopicResult
    P = R.AddPartitionsToTxnPartitionResult
    by_topic: dict[str, list[Any]] = {}
    for t, p, code in results:
        by_topic.setdefault(t, []).append(P(partition_index=p, partition_error_code=code))
    return [R(name=t, results_by_partition=ps) for t, ps in by_topic.items()]
