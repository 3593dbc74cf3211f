"""Exactly-once writes (``exactlyOnce=true``): each Spark task writes its rows in one Kafka transaction.

Kafka (3.9) has no two-phase commit: a transaction cannot be prepared by a task and committed by
the driver. So each task commits its own transaction, and what makes a task idempotent is a
*record* committed in that same transaction:

* Every attempt of Spark partition ``p`` of a write uses ``transactional.id`` ``<prefix>-<p>``,
  in this run and after a restart. ``init_transactions`` fences all earlier attempts: one still
  running can no longer commit, and its open transaction is aborted.
* The transaction also commits an offset (TxnOffsetCommit) for consumer group ``<prefix>-<p>``
  whose metadata names the write: for a stream Spark's query id and micro-batch id, for a batch
  write its job id. The record becomes visible exactly when the rows do.
* After fencing, a task reads the group's offsets (OffsetFetch with ``require_stable``). If its
  write is recorded (an attempt that committed but whose success Spark never learned, a
  micro-batch replayed after a driver restart), it writes nothing.
* A task commits only if Spark delivered its whole input (:func:`spark_input_cut`).

The record's offset is on partition 0 of the first topic the task writes to: Kafka refuses offsets
for partitions that do not exist. It is not a position in that partition; only the metadata counts.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Any, TypeVar

import pyarrow as pa
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as ClientTopicPartition
from confluent_kafka.admin import AdminClient
from pyspark import TaskContext

from headwater.spark.cluster import client_logger
from headwater.spark.errors import TopicSourceError
from headwater.spark.options import ExactlyOnce, WriteOptions
from headwater.spark.producer import (
    DeliveryFailures,
    WriteResult,
    flush_deliveries,
    produce_batches,
    producer_config,
)

log = logging.getLogger("headwater.spark")

_T = TypeVar("_T")

# Local properties Spark's micro-batch execution sets for every task of a batch.
BATCH_ID_PROPERTY = "streaming.sql.batchId"
QUERY_ID_PROPERTY = "sql.streaming.queryId"

_RECORD_VERSION = 1
_ATTEMPTS = 3
_RETRY_PAUSE_S = 0.5
# Producer settings that make a consumer (which only names the group) log a warning.
_PRODUCER_ONLY = frozenset(
    {
        "linger.ms",
        "queue.buffering.max.ms",
        "batch.num.messages",
        "batch.size",
        "compression.type",
        "compression.codec",
        "compression.level",
        "partitioner",
        "message.timeout.ms",
        "delivery.timeout.ms",
        "transaction.timeout.ms",
        "queue.buffering.max.messages",
        "queue.buffering.max.kbytes",
        "message.send.max.retries",
        "retries",
        "request.timeout.ms",
        "request.required.acks",
        "sticky.partitioning.linger.ms",
    }
)


@dataclass(frozen=True)
class TaskWrite:
    """What one task attempt writes: Spark partition ``partition`` of write ``write_id``.

    Streams: ``write_id`` is Spark's query id (kept in the checkpoint, so the same after a restart)
    and ``batch_id`` the micro-batch id. Batch writes: the job id, and ``batch_id`` 0.
    """

    partition: int
    write_id: str
    batch_id: int = 0
    attempt: int = 0


def transactional_id(prefix: str, partition: int) -> str:
    """The ``transactional.id`` of every attempt of Spark partition ``partition``."""
    return f"{prefix}-{partition}"


def record_group(prefix: str, partition: int) -> str:
    """The consumer group whose committed offset records partition ``partition``'s last write."""
    return f"{prefix}-{partition}"


def encode_record(write: TaskWrite) -> str:
    return json.dumps(
        {"v": _RECORD_VERSION, "writeId": write.write_id, "batchId": write.batch_id}, separators=(",", ":")
    )


def decode_record(metadata: str | None) -> tuple[str, int] | None:
    """(write id, batch id) of a record, or None for metadata this module did not write."""
    if not metadata:
        return None
    try:
        parsed = json.loads(metadata)
    except ValueError:
        return None
    if not isinstance(parsed, dict) or parsed.get("v") != _RECORD_VERSION:
        return None
    write_id, batch_id = parsed.get("writeId"), parsed.get("batchId")
    if not isinstance(write_id, str) or not isinstance(batch_id, int) or isinstance(batch_id, bool):
        return None
    return write_id, batch_id


def is_recorded(records: Iterable[str | None], write: TaskWrite) -> bool:
    """Whether ``write`` (or a later micro-batch of the same query) is among the records.

    Micro-batches of a query run in order, so a later batch recorded means this one committed
    too. A record of another write id (an earlier job, a query with a new checkpoint) says nothing.
    """
    for metadata in records:
        decoded = decode_record(metadata)
        if decoded is not None and decoded[0] == write.write_id and decoded[1] >= write.batch_id:
            return True
    return False


def stream_task_write() -> TaskWrite:
    """This stream task's identity, from the local properties Spark gives each task."""
    ctx = _task_context()
    query_id = ctx.getLocalProperty(QUERY_ID_PROPERTY)
    batch_id = ctx.getLocalProperty(BATCH_ID_PROPERTY)
    if not query_id or batch_id is None:
        raise TopicSourceError(
            "exactlyOnce: the task has no streaming query id or micro-batch id "
            f"(local properties {QUERY_ID_PROPERTY}, {BATCH_ID_PROPERTY}); is this a micro-batch query?"
        )
    return TaskWrite(ctx.partitionId(), query_id, int(batch_id), ctx.attemptNumber())


def batch_task_write(write_id: str) -> TaskWrite:
    ctx = _task_context()
    return TaskWrite(ctx.partitionId(), write_id, 0, ctx.attemptNumber())


def _task_context() -> TaskContext:
    ctx = TaskContext.get()
    if ctx is None:
        raise TopicSourceError("exactlyOnce writes run in Spark tasks only")
    return ctx


def transactional_config(opts: WriteOptions, txn_id: str) -> dict[str, object]:
    assert opts.exactly_once is not None
    config = producer_config(opts)
    txn_timeout = opts.exactly_once.transaction_timeout_ms
    config["transactional.id"] = txn_id
    config["transaction.timeout.ms"] = txn_timeout
    # librdkafka refuses a message timeout beyond the transaction's: a record cannot outlive it.
    config["message.timeout.ms"] = min(opts.flush_timeout_ms, txn_timeout)
    return config


def _connection_config(opts: WriteOptions) -> dict[str, Any]:
    config: dict[str, Any] = {k: v for k, v in opts.client_config.items() if k not in _PRODUCER_ONLY}
    config["logger"] = client_logger()
    return config


def _kafka_error(exc: KafkaException) -> KafkaError | None:
    err = exc.args[0] if exc.args else None
    return err if isinstance(err, KafkaError) else None


def _txn_call(what: str, txn_id: str, call: Callable[[], _T], timeout_ms: int) -> _T:
    """A transactional call, repeated on retriable errors (librdkafka allows that for all of them)."""
    for attempt in range(_ATTEMPTS):
        try:
            return call()
        except KafkaException as exc:
            err = _kafka_error(exc)
            if err is not None and err.retriable() and not err.fatal() and attempt + 1 < _ATTEMPTS:
                log.warning("%s of transactional.id %s failed, trying again: %s", what, txn_id, err)
                time.sleep(_RETRY_PAUSE_S)
                continue
            if err is not None and err.fatal():
                raise TopicSourceError(
                    f"{what} of transactional.id {txn_id} failed: {err}. Either another producer with the "
                    "same transactional.id took over (a newer attempt of this Spark task: a retry, a "
                    "speculative copy, a restarted query; or another write with the same "
                    "transactionalIdPrefix running at the same time), or the transaction ran longer "
                    f"than kafka.transaction.timeout.ms ({timeout_ms} ms) and the coordinator aborted it"
                ) from exc
            raise TopicSourceError(f"{what} of transactional.id {txn_id} failed: {err or exc}") from exc
    raise AssertionError("unreachable")


def read_records(opts: WriteOptions, group: str) -> list[str | None]:
    """The metadata of every offset group ``group`` has committed, once no commit is in flight."""
    admin = AdminClient(_connection_config(opts))
    timeout_s = opts.metadata_timeout_ms / 1000
    # A transaction that commits offsets for the group makes them "unstable" until its markers
    # are written; fencing has ended every earlier attempt's transaction, so this is brief.
    deadline = time.monotonic() + opts.flush_timeout_ms / 1000
    while True:
        try:
            futures = admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)], require_stable=True, request_timeout=timeout_s
            )
            result = futures[group].result()
        except KafkaException as exc:
            err = _kafka_error(exc)
            if err is not None and err.code() == KafkaError.GROUP_ID_NOT_FOUND:
                return []
            if err is None or not (err.retriable() or err.code() == KafkaError.UNSTABLE_OFFSET_COMMIT):
                raise TopicSourceError(f"reading the committed offsets of group {group} failed: {exc}") from exc
            if time.monotonic() > deadline:
                raise TopicSourceError(
                    f"reading the committed offsets of group {group} still failed after "
                    f"{opts.flush_timeout_ms} ms (flushTimeoutMs): {exc}"
                ) from exc
            time.sleep(_RETRY_PAUSE_S)
            continue
        partitions = list(result.topic_partitions or [])
        unstable = [
            tp for tp in partitions if tp.error is not None and tp.error.code() == KafkaError.UNSTABLE_OFFSET_COMMIT
        ]
        if unstable and time.monotonic() < deadline:
            time.sleep(_RETRY_PAUSE_S)
            continue
        failed = [tp for tp in partitions if tp.error is not None]
        if failed:
            raise TopicSourceError(
                f"reading the committed offsets of group {group} failed: "
                + "; ".join(f"{tp.topic}-{tp.partition}: {tp.error}" for tp in failed)
            )
        return [tp.metadata for tp in partitions]


def _first_rows(batches: Iterator[pa.RecordBatch]) -> pa.RecordBatch | None:
    for batch in batches:
        if batch.num_rows:
            return batch
    return None


def _first_topic(batch: pa.RecordBatch, opts: WriteOptions) -> str:
    if opts.topic is not None:
        return opts.topic
    topic = batch.column(batch.schema.get_field_index("topic"))[0].as_py()
    if not isinstance(topic, str):
        raise TopicSourceError("a row has a null topic and the option topic is not set")
    return topic


def write_transactional(batches: Iterator[pa.RecordBatch], opts: WriteOptions, write: TaskWrite) -> WriteResult:
    """Write every row of ``batches`` in one transaction, unless ``write`` is already recorded."""
    eo: ExactlyOnce | None = opts.exactly_once
    assert eo is not None
    first = _first_rows(batches)
    if first is None:
        # No rows: nothing to write and nothing to record (a retry has no rows either).
        return WriteResult()
    txn_id = transactional_id(eo.prefix, write.partition)
    group = record_group(eo.prefix, write.partition)
    timeout_s = opts.flush_timeout_ms / 1000
    failures = DeliveryFailures()
    producer = Producer({**transactional_config(opts, txn_id), "on_delivery": failures.on_delivery})
    # Fence first, read the record after: once init_transactions returns, no earlier attempt can
    # still commit, so the record read next is final for all of them.
    txn_timeout_ms = eo.transaction_timeout_ms
    _txn_call("init_transactions", txn_id, lambda: producer.init_transactions(timeout_s), txn_timeout_ms)
    if is_recorded(read_records(opts, group), write):
        for _ in batches:  # Spark expects the input consumed
            pass
        log.info(
            "transactional.id %s: write %s batch %d is already committed; this attempt (%d) writes nothing",
            txn_id,
            write.write_id,
            write.batch_id,
            write.attempt,
        )
        return WriteResult(skipped=True)
    marker = ClientTopicPartition(_first_topic(first, opts), 0, write.batch_id, metadata=encode_record(write))
    # Only to name the group in the offset commit: it never subscribes, so never joins the group.
    consumer = Consumer({**_connection_config(opts), "group.id": group, "enable.auto.commit": False})
    try:
        _txn_call("begin_transaction", txn_id, producer.begin_transaction, txn_timeout_ms)
        try:
            produced = produce_batches(producer, chain([first], batches), opts, failures)
            remaining = _txn_call("flush", txn_id, lambda: flush_deliveries(producer, timeout_s), txn_timeout_ms)
            failures.raise_if_any()
            if remaining:
                raise TopicSourceError(
                    f"{remaining} record(s) of transactional.id {txn_id} were still unacknowledged "
                    "after flushTimeoutMs (or transaction.timeout.ms); is the cluster reachable?"
                )
            if spark_input_cut():
                raise TopicSourceError(
                    f"Spark ended the input of task {write.partition} (attempt {write.attempt}) early: the "
                    "task failed before the writer had all its rows; transactional.id "
                    f"{txn_id} aborts what it wrote"
                )
            metadata = consumer.consumer_group_metadata()
            _txn_call(
                "send_offsets_to_transaction",
                txn_id,
                lambda: producer.send_offsets_to_transaction([marker], metadata, timeout_s),
                txn_timeout_ms,
            )
            _txn_call(
                "commit_transaction", txn_id, lambda: producer.commit_transaction(timeout_s), txn_timeout_ms
            )
        except BaseException:
            _abort(producer, txn_id, timeout_s)
            raise
    finally:
        consumer.close()
    log.info(
        "transactional.id %s committed %d records (write %s batch %d, attempt %d)",
        txn_id,
        sum(produced.values()),
        write.write_id,
        write.batch_id,
        write.attempt,
    )
    return WriteResult(dict(produced))


def _abort(producer: Producer, txn_id: str, timeout_s: float) -> None:
    try:
        producer.abort_transaction(timeout_s)
    except KafkaException as exc:
        # The next attempt's init_transactions aborts it, or the coordinator after
        # transaction.timeout.ms; read_committed readers wait until then.
        log.warning("abort of transactional.id %s failed (the next attempt aborts it): %s", txn_id, exc)


def spark_input_cut() -> bool:
    """Whether Spark closed this task's input before its end: the task failed upstream of the writer.

    When a task fails while the writer still waits for rows (an exception in an earlier operator,
    a killed task), Spark closes the Python worker's connection, and PySpark's Arrow reader takes
    the end of the connection for the end of the input: ``write()`` sees a normal, shorter input.
    Committing it would commit part of the task's rows, and the retry would then skip the task.
    After the real end of the input the connection stays open, since Spark waits for the task's
    result on it. Outside a Spark task (the write called directly) there is no connection: False.
    """
    if TaskContext.get() is None:
        return False
    infile = _worker_input()
    if infile is None:
        raise TopicSourceError(
            "exactlyOnce cannot tell whether Spark delivered the task's whole input with this PySpark "
            "version (no worker connection found); refusing to commit"
        )
    sock = socket.socket(fileno=os.dup(infile.fileno()))
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False  # open, nothing unread: Spark is waiting for our result
    except OSError:
        return True  # reset by Spark
    finally:
        sock.close()


def _worker_input() -> Any:
    """The PySpark worker's connection to Spark: ``infile`` of pyspark.worker's ``main``."""
    frame = sys._getframe(1)
    while frame is not None:
        if "pyspark" in frame.f_code.co_filename:
            infile = frame.f_locals.get("infile")
            if infile is not None and callable(getattr(infile, "fileno", None)):
                return infile
        frame = frame.f_back  # type: ignore[assignment]
    return None
