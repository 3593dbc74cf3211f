"""Reading one offset range inside a Spark task, as Arrow record batches.

Runs in a Python worker process, so everything is opened here (the reader object that called us
was pickled). librdkafka does the fetching: it finds the partition's leader, follows it when a
leader changes or a reassignment moves the partition, and retries. What this module adds is the
exactness: it emits each offset in ``[from_offset, until_offset)`` at most once and in order, stops
at ``until_offset`` even if more records arrive, and turns a gap it cannot explain into an error
(or, with ``failOnDataLoss=false``, a logged skip). Offsets that are legitimately absent (a
compacted topic, transaction markers) are simply not there: only records are rows.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError
from confluent_kafka import TopicPartition as ClientTopicPartition

from headwater.spark.cluster import client_logger
from headwater.spark.errors import DataLossError, TopicSourceError
from headwater.spark.options import ReadOptions
from headwater.spark.ranges import OffsetRange
from headwater.spark.schema import arrow_read_schema

log = logging.getLogger("headwater.spark")

# librdkafka insists on a group.id for any consumer. The source never joins the group (it uses
# assign() with explicit offsets) and never commits, so the name is inert; it says who we are.
_INERT_GROUP_ID = "headwater-spark-source"

_POLL_WAIT_S = 0.5
_MAX_BYTES_PER_BATCH = 16 << 20
_HEADER_ARROW_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))


def consumer_config(opts: ReadOptions) -> dict[str, object]:
    config: dict[str, object] = {
        # Throughput defaults a user may override with kafka.* options.
        "max.partition.fetch.bytes": 8 << 20,
        "fetch.max.bytes": 64 << 20,
        "isolation.level": "read_uncommitted",
    }
    config.update(opts.client_config)
    config.update(
        {
            "group.id": _INERT_GROUP_ID,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            # Never jump silently: an offset that is out of range comes back to us as an error.
            "auto.offset.reset": "error",
            # Tells us where the log ends, so a range that ends in markers (no record) still ends.
            "enable.partition.eof": True,
            "logger": client_logger(),
        }
    )
    return config


class _Rows:
    """Column buffers for one record batch."""

    def __init__(self, include_headers: bool) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.timestamps_ms: list[int | None] = []
        self.timestamp_types: list[int] = []
        self.headers: list[list[dict[str, object]] | None] | None = [] if include_headers else None
        self.size_bytes = 0

    def __len__(self) -> int:
        return len(self.offsets)

    def to_batch(self, topic: str, partition: int, include_headers: bool) -> pa.RecordBatch:
        n = len(self.offsets)
        timestamps = pc.multiply(pa.array(self.timestamps_ms, pa.int64()), 1000).cast(
            pa.timestamp("us", tz="UTC")
        )
        arrays = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.repeat(pa.scalar(topic, pa.string()), n),
            pa.repeat(pa.scalar(partition, pa.int32()), n),
            pa.array(self.offsets, pa.int64()),
            timestamps,
            pa.array(self.timestamp_types, pa.int32()),
        ]
        if include_headers:
            arrays.append(pa.array(self.headers, _HEADER_ARROW_TYPE))
        return pa.RecordBatch.from_arrays(arrays, schema=arrow_read_schema(include_headers))


def read_range(rng: OffsetRange, opts: ReadOptions) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``rng`` as record batches in the schema of ``read_schema``."""
    if rng.size <= 0:
        return
    consumer = Consumer(consumer_config(opts))
    try:
        yield from _read(consumer, rng, opts)
    finally:
        consumer.close()


def _read(consumer: Consumer, rng: OffsetRange, opts: ReadOptions) -> Iterator[pa.RecordBatch]:
    topic, partition, until = rng.topic, rng.partition, rng.until_offset
    name = f"{topic}-{partition}"
    include_headers = opts.include_headers
    position = rng.from_offset  # the next offset we may emit
    consumer.assign([ClientTopicPartition(topic, partition, position)])
    patience_s = opts.poll_timeout_ms / 1000
    deadline = time.monotonic() + patience_s
    log_end: int | None = None  # where the broker last said the log ends
    rows = _Rows(include_headers)
    batch_rows = opts.rows_per_batch

    while position < until:
        messages = consumer.consume(num_messages=batch_rows, timeout=_POLL_WAIT_S)
        progressed = False
        # Bound once per poll: this loop runs for every record, and attribute lookups add up.
        add_key, add_value, add_offset = rows.keys.append, rows.values.append, rows.offsets.append
        add_timestamp, add_kind = rows.timestamps_ms.append, rows.timestamp_types.append
        size_bytes = rows.size_bytes
        for message in messages:
            error = message.error()
            if error is not None:
                code = error.code()
                if code == KafkaError._PARTITION_EOF:
                    log_end = message.offset()
                    if log_end is not None and log_end >= until:
                        # Everything up to until_offset has been delivered; what is left of the
                        # range holds no records (transaction markers, compaction).
                        position = until
                        break
                    continue
                if code in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET):
                    resumed = _out_of_range(consumer, rng, position, opts)
                    progressed = resumed != position
                    position = resumed
                    if position < until:
                        consumer.assign([ClientTopicPartition(topic, partition, position)])
                    break
                if error.fatal() or not (error.retriable() or code < 0):
                    raise TopicSourceError(f"reading {name} at offset {position} failed: {error}")
                # Local (negative) codes are librdkafka telling us about a connection it is
                # already retrying; the deadline below bounds how long we let it.
                log.info("reading %s at offset %d: %s (retrying)", name, position, error)
                continue
            offset = message.offset()
            assert offset is not None  # every record has one
            if offset < position:
                continue  # already emitted (a re-fetch after a leader change)
            if offset >= until:
                position = until
                break
            kind, timestamp_ms = message.timestamp()
            add_key(message.key())
            value = message.value()
            add_value(value)
            add_offset(offset)
            add_timestamp(timestamp_ms if kind else None)
            # librdkafka numbers the kinds 0 none, 1 create, 2 log-append; Kafka (and the
            # column) uses -1, 0, 1.
            add_kind(kind - 1)
            if rows.headers is not None:
                headers = message.headers()
                pairs = headers.items() if isinstance(headers, dict) else (headers or [])
                rows.headers.append([{"key": k, "value": v} for k, v in pairs])
            if value is not None:
                size_bytes += len(value)
            position = offset + 1
            progressed = True
        rows.size_bytes = size_bytes
        if progressed:
            deadline = time.monotonic() + patience_s
        if len(rows) >= batch_rows or rows.size_bytes >= _MAX_BYTES_PER_BATCH:
            yield rows.to_batch(topic, partition, include_headers)
            rows = _Rows(include_headers)
        if position < until and time.monotonic() > deadline:
            if log_end is not None and log_end < until:
                # The broker says the log ends before offsets the plan saw: they were lost
                # (an unclean leader election truncated the log, or the topic was recreated).
                lost = f"offsets [{max(position, log_end)}, {until}) of {name}"
                if opts.fail_on_data_loss:
                    raise DataLossError(
                        f"{lost} are no longer in the log (it now ends at {log_end}); the data was lost "
                        "(set failOnDataLoss=false to skip such gaps)"
                    )
                log.warning("skipping %s: the log now ends at %d (failOnDataLoss=false)", lost, log_end)
                break
            raise TopicSourceError(
                f"no progress reading {name} at offset {position} (range ends at {until}) for "
                f"{opts.poll_timeout_ms} ms: is the partition's leader reachable? "
                f"(kafka.bootstrap.servers={opts.client_config['bootstrap.servers']}, kafkaConsumer.pollTimeoutMs)"
            )
    if len(rows):
        yield rows.to_batch(topic, partition, include_headers)


def _out_of_range(consumer: Consumer, rng: OffsetRange, position: int, opts: ReadOptions) -> int:
    """Where to continue after the broker said ``position`` is out of range, or raise."""
    name = f"{rng.topic}-{rng.partition}"
    low, high = consumer.get_watermark_offsets(
        ClientTopicPartition(rng.topic, rng.partition), timeout=opts.metadata_timeout_ms / 1000
    )
    if position < low:
        lost = f"offsets [{position}, {min(low, rng.until_offset)}) of {name}"
        if opts.fail_on_data_loss:
            raise DataLossError(
                f"{lost} are no longer in the log (it now starts at {low}, e.g. retention deleted them); "
                "set failOnDataLoss=false to skip them"
            )
        log.warning("skipping %s: the log now starts at %d (failOnDataLoss=false)", lost, low)
        return min(low, rng.until_offset)
    if position < high:
        # Inside the log after all: a broker that had not caught up yet (a new leader).
        log.info(
            "reading %s: offset %d was out of range, the log is now [%d, %d); retrying",
            name,
            position,
            low,
            high,
        )
        return position
    lost = f"offsets [{position}, {rng.until_offset}) of {name}"
    if opts.fail_on_data_loss:
        raise DataLossError(
            f"{lost} are beyond the end of the log ({high}); the log was truncated or the topic recreated "
            "(set failOnDataLoss=false to skip them)"
        )
    log.warning("skipping %s: the log ends at %d (failOnDataLoss=false)", lost, high)
    return rng.until_offset
