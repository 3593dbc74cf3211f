"""Writing rows to topics inside a Spark task: idempotent, acks=all, every delivery checked.

A task returns (and so counts as written) only after librdkafka has reported every record it
produced as acknowledged by all in-sync replicas. Any failed delivery, or any record still in
flight when the flush timeout runs out, fails the task with the reason. The idempotent producer
makes librdkafka's own retries safe (no duplicates, order kept per partition); a Spark task that is
retried as a whole writes its rows again, so across task retries the write is at-least-once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
from confluent_kafka import KafkaError, Message, Producer
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
_SERVE_CALLBACKS_EVERY_ROWS = 10_000
# librdkafka's "use the partitioner" partition number.
_ANY_PARTITION = -1


@dataclass
class WriteResult(WriterCommitMessage):  # type: ignore[misc]
    """What one task wrote, all of it acknowledged: records per topic."""

    records_by_topic: dict[str, int] = field(default_factory=dict)

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
    config.update({"enable.idempotence": True, "acks": "all", "logger": client_logger()})
    return config


def _column(batch: pa.RecordBatch, name: str) -> list[object] | None:
    index = batch.schema.get_field_index(name)
    if index < 0:
        return None
    values: list[object] = batch.column(index).to_pylist()
    return values


def write_batches(batches: Iterator[pa.RecordBatch], opts: WriteOptions) -> WriteResult:
    """Produce every row of ``batches``; return only when all are acknowledged."""
    producer = Producer(producer_config(opts))
    failures: list[str] = []
    acked = 0
    produced_by_topic: dict[str, int] = {}

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        nonlocal acked
        if error is None:
            acked += 1
        elif len(failures) < 10:
            failures.append(f"{message.topic()}-{message.partition()}: {error}")
        else:
            failures.append("")

    existing: set[str] | None = None
    checked: set[str] = set()
    produced = 0
    for batch in batches:
        n = batch.num_rows
        values = _column(batch, "value")
        assert values is not None  # checked on the driver
        keys = _column(batch, "key") or [None] * n
        topics = [opts.topic] * n if opts.topic is not None else _column(batch, "topic")
        assert topics is not None  # checked on the driver
        partitions = _column(batch, "partition") or [None] * n
        headers = _column(batch, "headers") or [None] * n
        for topic in set(topics) - checked:
            if not isinstance(topic, str):
                raise TopicSourceError("a row has a null topic and the option topic is not set")
            if existing is None:
                existing = set(producer.list_topics(timeout=opts.metadata_timeout_ms / 1000).topics)
            if topic not in existing:
                raise TopicSourceError(
                    f"topic {topic!r} does not exist on kafka.bootstrap.servers={opts.client_config['bootstrap.servers']}"
                )
            checked.add(topic)
        produce = producer.produce
        for i in range(n):
            topic = topics[i]
            assert isinstance(topic, str)
            partition = partitions[i]
            row_headers = headers[i]
            header_list = (
                [(h["key"], h["value"]) for h in row_headers]  # type: ignore[index]
                if isinstance(row_headers, list)
                else None
            )
            while True:
                try:
                    produce(
                        topic,
                        value=values[i],  # type: ignore[arg-type]
                        key=keys[i],  # type: ignore[arg-type]
                        partition=partition if isinstance(partition, int) else _ANY_PARTITION,
                        headers=header_list,
                        on_delivery=on_delivery,
                    )
                    break
                except BufferError:
                    # librdkafka's queue is full: serve delivery reports until there is room.
                    producer.poll(_BUFFER_FULL_WAIT_S)
            produced += 1
            produced_by_topic[topic] = produced_by_topic.get(topic, 0) + 1
            if produced % _SERVE_CALLBACKS_EVERY_ROWS == 0:
                producer.poll(0)
                if failures:
                    break
        if failures:
            break
    started = time.monotonic()
    remaining = producer.flush(opts.flush_timeout_ms / 1000)
    if failures:
        shown = "; ".join(f for f in failures if f)
        raise TopicSourceError(f"{len(failures)} record(s) were not acknowledged: {shown}")
    if remaining:
        raise TopicSourceError(
            f"{remaining} record(s) were still unacknowledged after {time.monotonic() - started:.1f} s "
            "(flushTimeoutMs); is the cluster reachable?"
        )
    if acked != produced:
        raise TopicSourceError(f"produced {produced} record(s) but {acked} were acknowledged")
    return WriteResult(produced_by_topic)
