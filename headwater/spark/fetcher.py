"""Reading one offset range inside a Spark task, as Arrow record batches.

Runs in a Python worker process, so everything is opened here (the reader object that called us
was pickled). librdkafka does the fetching: it finds the partition's leader, follows it when a
leader changes or a reassignment moves the partition, and retries. What this module adds is the
exactness: it emits each offset in ``[from_offset, until_offset)`` at most once and in order, stops
at ``until_offset`` even if more records arrive, and turns a gap it cannot explain into an error
(or, with ``failOnDataLoss=false``, a logged skip). Offsets that are legitimately absent (a
compacted topic, transaction markers) are simply not there: only records are rows.

Speed: the Python work per record is what limits a read, so records are taken a whole
``consume()`` result at a time. A run of records with ascending offsets (the normal case) is cut to
the range with two binary searches, and each column is filled by ``map`` over the run, which calls
the message's accessor from C without a Python-level loop; columns become Arrow arrays once per
batch. Only a run whose offsets do not ascend (a re-delivery) is walked record by record.
"""

from __future__ import annotations

import logging
import operator
import time
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from itertools import islice, repeat
from typing import cast

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, Message
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
_NULL_MS = pa.scalar(None, pa.int64())

# The accessors as plain functions, for map() over a run of messages.
_error = Message.error
_offset = Message.offset
_key = Message.key
_value = Message.value
_timestamp = Message.timestamp
_first = operator.itemgetter(0)
_second = operator.itemgetter(1)


def consumer_config(opts: ReadOptions) -> dict[str, object]:
    config: dict[str, object] = {
        # Throughput defaults a user may override with kafka.* options.
        "max.partition.fetch.bytes": 8 << 20,
        "fetch.max.bytes": 64 << 20,
        "isolation.level": "read_uncommitted",
        # librdkafka stops fetching once this many records wait in its queue, and then pauses for
        # fetch.queue.backoff.ms (1 s by default) before it looks again: a task that drains the
        # queue in a few milliseconds would sit idle for most of that second. Keep a deeper
        # queue and look again soon.
        "queued.min.messages": 500_000,
        "fetch.queue.backoff.ms": 5,
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


def _ascending(offsets: Sequence[int]) -> bool:
    return all(map(operator.lt, offsets, islice(offsets, 1, None)))


def _payload_bytes(values: Sequence[bytes | None]) -> int:
    try:
        return sum(map(len, values))  # type: ignore[arg-type]
    except TypeError:  # some records have no value
        return sum(len(v) for v in values if v is not None)


class _Rows:
    """Column buffers for one record batch."""

    def __init__(self, include_headers: bool) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        # librdkafka's (kind, milliseconds) pairs, split into columns when the batch is built.
        self.timestamps: list[tuple[int, int]] = []
        self.headers: list[list[dict[str, object]]] | None = [] if include_headers else None
        self.size_bytes = 0

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, messages: Sequence[Message], offsets: Sequence[int]) -> None:
        """Append ``messages`` (whose offsets are ``offsets``) as rows."""
        values = list(map(_value, messages))
        self.keys.extend(map(_key, messages))
        self.values.extend(values)
        self.offsets.extend(offsets)
        self.timestamps.extend(map(_timestamp, messages))
        if self.headers is not None:
            self.headers.extend(map(_header_list, messages))
        self.size_bytes += _payload_bytes(values)

    def to_batch(self, topic: str, partition: int) -> pa.RecordBatch:
        n = len(self.offsets)
        kinds = list(map(_first, self.timestamps))
        millis = list(map(_second, self.timestamps))
        # librdkafka numbers the kinds 0 none, 1 create, 2 log-append; Kafka (and the column)
        # uses -1, 0, 1. A record without a timestamp has a null one.
        kind_array = pa.array(kinds, pa.int32())
        ms_array = pa.array(millis, pa.int64())
        if 0 in kinds:
            ms_array = pc.if_else(pc.equal(kind_array, 0), _NULL_MS, ms_array)
        arrays = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.repeat(pa.scalar(topic, pa.string()), n),
            pa.repeat(pa.scalar(partition, pa.int32()), n),
            pa.array(self.offsets, pa.int64()),
            pc.multiply(ms_array, 1000).cast(pa.timestamp("us", tz="UTC")),
            pc.subtract(kind_array, 1),
        ]
        if self.headers is not None:
            arrays.append(pa.array(self.headers, _HEADER_ARROW_TYPE))
        return pa.RecordBatch.from_arrays(arrays, schema=arrow_read_schema(self.headers is not None))


def _header_list(message: Message) -> list[dict[str, object]]:
    headers = message.headers()
    pairs = headers.items() if isinstance(headers, dict) else (headers or [])
    return [{"key": k, "value": v} for k, v in pairs]


def read_range(rng: OffsetRange, opts: ReadOptions) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``rng`` as record batches in the schema of ``read_schema``."""
    if rng.size <= 0:
        return
    consumer = Consumer(consumer_config(opts))
    try:
        yield from _RangeReader(consumer, rng, opts).batches()
    finally:
        consumer.close()


class _RangeReader:
    def __init__(self, consumer: Consumer, rng: OffsetRange, opts: ReadOptions) -> None:
        self.consumer = consumer
        self.rng = rng
        self.opts = opts
        self.name = f"{rng.topic}-{rng.partition}"
        self.until = rng.until_offset
        self.position = rng.from_offset  # the next offset we may emit
        self.log_end: int | None = None  # where the broker last said the log ends
        self.rows = _Rows(opts.include_headers)

    def batches(self) -> Iterator[pa.RecordBatch]:
        rng, opts, consumer = self.rng, self.opts, self.consumer
        consumer.assign([ClientTopicPartition(rng.topic, rng.partition, self.position)])
        patience_s = opts.poll_timeout_ms / 1000
        deadline = time.monotonic() + patience_s
        batch_rows = opts.rows_per_batch
        while self.position < self.until:
            room = batch_rows - len(self.rows)
            messages = consumer.consume(num_messages=room, timeout=_POLL_WAIT_S)
            if self._take(messages):
                deadline = time.monotonic() + patience_s
            if len(self.rows) >= batch_rows or self.rows.size_bytes >= _MAX_BYTES_PER_BATCH:
                yield self._flush()
            if self.position < self.until and time.monotonic() > deadline and not self._stalled():
                break
        if len(self.rows):
            yield self._flush()

    def _flush(self) -> pa.RecordBatch:
        batch = self.rows.to_batch(self.rng.topic, self.rng.partition)
        self.rows = _Rows(self.opts.include_headers)
        return batch

    def _take(self, messages: list[Message]) -> bool:
        """Turn one consume() result into rows; True if the read moved forward."""
        if not messages:
            return False
        start = self.position
        errors = list(map(_error, messages))
        # Compared by identity: KafkaError's == against None leaves a TypeError pending in C.
        if not any(map(operator.is_not, errors, repeat(None))):
            self._take_records(messages)
            return self.position != start
        run_start = 0
        for i, error in enumerate(errors):
            if error is None:
                continue
            if i > run_start:
                self._take_records(messages[run_start:i])
            run_start = i + 1
            if self.position >= self.until or not self._on_error(messages[i], error):
                return self.position != start
        if run_start < len(messages) and self.position < self.until:
            self._take_records(messages[run_start:])
        return self.position != start

    def _take_records(self, run: list[Message]) -> None:
        """Rows for the records of ``run`` inside ``[position, until)``, each offset once."""
        if self.position >= self.until:
            return
        # Every record has an offset (only events lack one, and they are not in a run).
        offsets = cast(list[int], list(map(_offset, run)))
        if not _ascending(offsets):
            # A re-delivery overlapping what we had (after a leader change): one at a time.
            for message, offset in zip(run, offsets, strict=True):
                if offset >= self.until:
                    self.position = self.until
                    return
                if offset >= self.position:
                    self.rows.add([message], [offset])
                    self.position = offset + 1
            return
        low = bisect_left(offsets, self.position)
        high = bisect_left(offsets, self.until)
        if high > low:
            self.rows.add(run[low:high], offsets[low:high])
            self.position = offsets[high - 1] + 1
        if high < len(offsets):
            # A record at or past the end: everything up to until_offset has been delivered;
            # what is left of the range holds no records (transaction markers, compaction).
            self.position = self.until

    def _on_error(self, message: Message, error: KafkaError) -> bool:
        """Handle an event from the consumer; False to stop looking at this consume() result."""
        rng = self.rng
        code = error.code()
        if code == KafkaError._PARTITION_EOF:
            self.log_end = message.offset()
            if self.log_end is not None and self.log_end >= self.until:
                # Everything up to until_offset has been delivered; what is left of the
                # range holds no records (transaction markers, compaction).
                self.position = self.until
                return False
            return True
        if code in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET):
            self.position = _out_of_range(self.consumer, rng, self.position, self.opts)
            if self.position < self.until:
                self.consumer.assign([ClientTopicPartition(rng.topic, rng.partition, self.position)])
            return False
        if error.fatal() or not (error.retriable() or code < 0):
            raise TopicSourceError(f"reading {self.name} at offset {self.position} failed: {error}")
        # Local (negative) codes are librdkafka telling us about a connection it is already
        # retrying; the no-progress deadline bounds how long we let it.
        log.info("reading %s at offset %d: %s (retrying)", self.name, self.position, error)
        return True

    def _stalled(self) -> bool:
        """No progress for kafkaConsumer.pollTimeoutMs: raise, or (data loss allowed) False to stop."""
        opts, until, log_end = self.opts, self.until, self.log_end
        if log_end is not None and log_end < until:
            # The broker says the log ends before offsets the plan saw: they were lost (an
            # unclean leader election truncated the log, or the topic was recreated).
            lost = f"offsets [{max(self.position, log_end)}, {until}) of {self.name}"
            if opts.fail_on_data_loss:
                raise DataLossError(
                    f"{lost} are no longer in the log (it now ends at {log_end}); the data was lost "
                    "(set failOnDataLoss=false to skip such gaps)"
                )
            log.warning("skipping %s: the log now ends at %d (failOnDataLoss=false)", lost, log_end)
            return False
        raise TopicSourceError(
            f"no progress reading {self.name} at offset {self.position} (range ends at {until}) for "
            f"{opts.poll_timeout_ms} ms: is the partition's leader reachable? "
            f"(kafka.bootstrap.servers={opts.client_config['bootstrap.servers']}, kafkaConsumer.pollTimeoutMs)"
        )


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
