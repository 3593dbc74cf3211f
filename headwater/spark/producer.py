"""Writing rows to topics inside a Spark task: idempotent, acks=all, every delivery checked.

A task returns (and so counts as written) only after librdkafka has reported every record it
produced as acknowledged by all in-sync replicas. Any failed delivery, or any record still in
flight when the flush timeout runs out, fails the task with the reason. The idempotent producer
makes librdkafka's own retries safe (no duplicates, order kept per partition); a Spark task that is
retried as a whole writes its rows again, so across task retries the write is at-least-once
(``exactlyOnce=true`` writes through ``transactional.py`` instead).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from headwater.spark.cluster import client_logger
from headwater.spark.errors import TopicSourceError
from headwater.spark.options import WriteOptions
from headwater.spark.schema import HEADER_TYPE

log = logging.getLogger("headwater.spark")

_BUFFER_FULL_WAIT_S = 0.05
# librdkafka's "use the partitioner" partition number.
_ANY_PARTITION = -1


@dataclass
class WriteResult(WriterCommitMessage):
    """What one task wrote, all of it acknowledged: records per topic.

    ``skipped`` (exactly-once writes): an earlier attempt of the task had committed its output,
    so this one wrote nothing; ``records_by_topic`` is then empty.
    """

    records_by_topic: dict[str, int] = field(default_factory=dict)
    skipped: bool = False

    @property
    def records(self) -> int:
        return sum(self.records_by_topic.values())


def check_write_schema(schema: StructType, topic_option: str | None) -> None:
    """Fail before any task starts if the DataFrame cannot be written as records."""
    types: dict[str, DataType] = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in types:
        raise TopicSourceError("a DataFrame written to topics needs a value column (string or binary)")
    for name in ("key", "value"):
        if name in types and not isinstance(types[name], StringType | BinaryType):
            raise TopicSourceError(
                f"column {name} must be string or binary, not {types[name].simpleString()}"
            )
    if topic_option is None and "topic" not in types:
        raise TopicSourceError("a write needs a topic: set the option topic or give a topic column")
    if "topic" in types and not isinstance(types["topic"], StringType):
        raise TopicSourceError(f"column topic must be a string, not {types['topic'].simpleString()}")
    if "partition" in types and not isinstance(types["partition"], IntegerType):
        raise TopicSourceError(f"column partition must be an int, not {types['partition'].simpleString()}")
    if "headers" in types and not _is_header_array(types["headers"]):
        raise TopicSourceError(
            "column headers must be array<struct<key: string, value: binary>>, not "
            + types["headers"].simpleString()
        )


def _is_header_array(data_type: DataType) -> bool:
    # Nullability does not matter: a null header value is written as a header without value.
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    fields = [(f.name, type(f.dataType)) for f in data_type.elementType.fields]
    return fields == [(f.name, type(f.dataType)) for f in HEADER_TYPE.fields]


def producer_config(opts: WriteOptions) -> dict[str, object]:
    config: dict[str, object] = {
        # Throughput defaults a user may override with kafka.* options.
        "linger.ms": 5,
        "batch.num.messages": 10_000,
        # The Java client's default partitioner, so keyed rows land where a Java producer
        # (and Spark's own Kafka sink) would put them.
        "partitioner": "murmur2_random",
        "message.timeout.ms": opts.flush_timeout_ms,
    }
    config.update(opts.client_config)
    config.update(
        {
            "enable.idempotence": True,
            "acks": "all",
            # Only failed deliveries are reported: a record that leaves librdkafka's queue without
            # a report was acknowledged (flush() counts every record not yet acknowledged or
            # failed). This saves a Python callback per record, which costs as much as producing it.
            "delivery.report.only.error": True,
            "logger": client_logger(),
        }
    )
    return config


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    index = batch.schema.get_field_index(name)
    if index < 0:
        return None
    values: list[Any] = batch.column(index).to_pylist()
    return values


class DeliveryFailures:
    """Failed deliveries, as librdkafka reports them (the first few kept with their reason)."""

    def __init__(self) -> None:
        self.count = 0
        self.shown: list[str] = []

    def on_delivery(self, error: KafkaError | None, message: Message) -> None:
        if error is None:  # not reported with delivery.report.only.error, but harmless
            return
        self.count += 1
        if len(self.shown) < 10:
            self.shown.append(f"{message.topic()}-{message.partition()}: {error}")

    def raise_if_any(self) -> None:
        if self.count:
            raise TopicSourceError(
                f"{self.count} record(s) were not acknowledged: {'; '.join(self.shown)}"
            )


def flush_deliveries(producer: Producer, timeout_s: float) -> int:
    """``producer.flush(timeout_s)`` served with poll(): how many records are still unanswered when
    the time is up.

    A fatal client error (a transactional producer fenced by a newer attempt, an idempotent one whose
    sequence the cluster lost) is raised as KafkaException. confluent-kafka 2.16 on Python 3.11 raises
    such an error out of flush() as the KafkaError object itself, which is not an exception: no except
    clause but a bare one catches it.
    """
    deadline = time.monotonic() + timeout_s
    while len(producer) and (left := deadline - time.monotonic()) > 0:
        producer.poll(min(left, 0.1))
    return len(producer)


def _produce_when_room(producer: Producer, topic: str, *args: Any, **kwargs: Any) -> None:
    """librdkafka's queue is full: serve it until the record fits."""
    while True:
        producer.poll(_BUFFER_FULL_WAIT_S)
        try:
            producer.produce(topic, *args, **kwargs)
            return
        except BufferError:
            continue


def _produce_plain(producer: Producer, topic: str, keys: list[Any] | None, values: list[Any]) -> None:
    """One topic, no partition or headers column: the common case, with nothing else per row."""
    produce = producer.produce
    if keys is None:
        for value in values:
            try:
                produce(topic, value)
            except BufferError:
                _produce_when_room(producer, topic, value)
        return
    for key, value in zip(keys, values, strict=True):
        try:
            produce(topic, value, key)
        except BufferError:
            _produce_when_room(producer, topic, value, key)


def _produce_rows(
    producer: Producer,
    topics: list[Any],
    keys: list[Any] | None,
    values: list[Any],
    partitions: list[Any] | None,
    headers: list[Any] | None,
) -> None:
    n = len(values)
    keys = keys if keys is not None else [None] * n
    partitions = partitions if partitions is not None else [None] * n
    headers = headers if headers is not None else [None] * n
    produce = producer.produce
    for topic, key, value, partition, row_headers in zip(
        topics, keys, values, partitions, headers, strict=True
    ):
        header_list = [(h["key"], h["value"]) for h in row_headers] if isinstance(row_headers, list) else None
        part = partition if isinstance(partition, int) else _ANY_PARTITION
        try:
            produce(topic, value, key, part, headers=header_list)
        except BufferError:
            _produce_when_room(producer, topic, value, key, part, headers=header_list)


def produce_batches(
    producer: Producer, batches: Iterable[pa.RecordBatch], opts: WriteOptions, failures: DeliveryFailures
) -> Counter[str]:
    """Hand every row of ``batches`` to ``producer``; return the records per topic.

    Nothing is flushed here. Stops early, after the batch in which the first failed delivery is
    reported (``failures.count``), since the task fails anyway.
    """
    existing: set[str] | None = None
    checked: set[str] = set()
    produced_by_topic: Counter[str] = Counter()
    for batch in batches:
        n = batch.num_rows
        values = _column(batch, "value")
        assert values is not None  # checked on the driver
        keys = _column(batch, "key")
        topics = None if opts.topic is not None else _column(batch, "topic")
        partitions = _column(batch, "partition")
        headers = _column(batch, "headers")
        for topic in ({opts.topic} if topics is None else set(topics)) - checked:
            if not isinstance(topic, str):
                raise TopicSourceError("a row has a null topic and the option topic is not set")
            if existing is None:
                existing = set(producer.list_topics(timeout=opts.metadata_timeout_ms / 1000).topics)
            if topic not in existing:
                raise TopicSourceError(
                    f"topic {topic!r} does not exist on kafka.bootstrap.servers={opts.client_config['bootstrap.servers']}"
                )
            checked.add(topic)
        if topics is None and partitions is None and headers is None:
            assert opts.topic is not None
            _produce_plain(producer, opts.topic, keys, values)
            produced_by_topic[opts.topic] += n
        else:
            row_topics: list[Any] = topics if topics is not None else [opts.topic] * n
            _produce_rows(producer, row_topics, keys, values, partitions, headers)
            produced_by_topic.update(cast(list[str], row_topics))
        # Serve failure reports (and the queue) between batches; stop early on the first failure.
        producer.poll(0)
        if failures.count:
            break
    return produced_by_topic


def write_batches(batches: Iterator[pa.RecordBatch], opts: WriteOptions) -> WriteResult:
    """Produce every row of ``batches``; return only when all are acknowledged."""
    failures = DeliveryFailures()
    producer = Producer({**producer_config(opts), "on_delivery": failures.on_delivery})
    try:
        produced_by_topic = produce_batches(producer, batches, opts, failures)
        started = time.monotonic()
        remaining = flush_deliveries(producer, opts.flush_timeout_ms / 1000)
    except KafkaException as exc:  # a fatal client error, from any poll()
        raise TopicSourceError(f"the producer failed: {exc.args[0]}") from exc
    failures.raise_if_any()
    if remaining:
        raise TopicSourceError(
            f"{remaining} record(s) were still unacknowledged after {time.monotonic() - started:.1f} s "
            "(flushTimeoutMs); is the cluster reachable?"
        )
    return WriteResult(dict(produced_by_topic))
