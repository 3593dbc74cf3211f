"""The ``headwater`` format: PySpark data source, batch and stream readers, batch and stream writers.

Division of work, which follows from where Spark runs each method:
- the driver plans (``partitions``, ``initialOffset``, ``latestOffset``): it asks the cluster for
  partitions and offsets through one admin client and turns them into offset ranges;
- tasks run ``read`` / ``write`` in Python workers, each with its own client (readers and writers
  are pickled, so they carry options and ranges, never a client).
The offsets Spark checkpoints for a stream are ``{"topic": {"partition": next_offset}}``, the
same JSON Spark's Kafka source uses, so they are readable by people and by ``startingOffsets``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from headwater.spark.cluster import Cluster, resolve_bound
from headwater.spark.errors import DataLossError, TopicSourceError
from headwater.spark.fetcher import read_range
from headwater.spark.options import (
    ReadOptions,
    TopicPartition,
    WriteOptions,
    parse_read_options,
    parse_write_options,
    wants_headers,
)
from headwater.spark.producer import WriteResult, check_write_schema, write_batches
from headwater.spark.ranges import (
    OffsetRange,
    limit_offsets,
    offsets_from_json,
    offsets_to_json,
    split_ranges,
)
from headwater.spark.schema import read_schema
from headwater.spark.transactional import batch_task_write, stream_task_write, write_transactional

log = logging.getLogger("headwater.spark")

FORMAT = "headwater"


def _cluster(opts: ReadOptions) -> Cluster:
    return Cluster(
        opts.client_config,
        timeout_ms=opts.metadata_timeout_ms,
        retries=opts.metadata_retries,
        retry_interval_ms=opts.retry_interval_ms,
    )


def _name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def _loss(opts: ReadOptions, message: str) -> None:
    """Data the query asked for is gone: fail, or (failOnDataLoss=false) say so and go on."""
    if opts.fail_on_data_loss:
        raise DataLossError(message + " (set failOnDataLoss=false to skip it)")
    log.warning("%s; skipping it (failOnDataLoss=false)", message)


class TopicBatchReader(DataSourceReader):
    """``spark.read.format("headwater")``: one task per partition range, fixed at planning."""

    def __init__(self, opts: ReadOptions) -> None:
        self._opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        opts = self._opts
        cluster = _cluster(opts)
        sub = opts.subscription
        tps = cluster.resolve(topics=sub.topics, pattern=sub.pattern, assigned=sub.assigned)
        if not tps:
            log.warning("%s matches no partition; the read is empty", sub.describe())
            return []
        start = resolve_bound(
            cluster,
            opts.starting,
            tps,
            name="startingOffsets",
            missing_timestamp_means_latest=opts.timestamp_strategy_latest,
        )
        end = resolve_bound(
            cluster, opts.ending, tps, name="endingOffsets", missing_timestamp_means_latest=True
        )
        earliest = cluster.earliest(tps)
        latest = cluster.latest(tps)
        ranges: list[OffsetRange] = []
        for tp in tps:
            s, e = start[tp], end[tp]
            if s < earliest[tp]:
                _loss(
                    opts,
                    f"offsets [{s}, {earliest[tp]}) of {_name(tp)} are no longer in the log, which starts at {earliest[tp]}",
                )
                s = earliest[tp]
            if s > latest[tp]:
                _loss(opts, f"starting offset {s} of {_name(tp)} is beyond the end of the log ({latest[tp]})")
                s = latest[tp]
            if e > latest[tp]:
                _loss(opts, f"ending offset {e} of {_name(tp)} is beyond the end of the log ({latest[tp]})")
                e = latest[tp]
            if s > e:
                raise TopicSourceError(
                    f"the starting offset {s} of {_name(tp)} is after its ending offset {e} "
                    f"(startingOffsets: {opts.starting.describe()}, endingOffsets: {opts.ending.describe()})"
                )
            ranges.append(OffsetRange(tp.topic, tp.partition, s, e))
        planned = split_ranges(ranges, opts.min_partitions)
        log.info(
            "batch read of %s: %d offsets in %d tasks",
            sub.describe(),
            sum(r.size for r in planned),
            len(planned),
        )
        return planned

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read_planned(partition, self._opts)


def _read_planned(partition: InputPartition, opts: ReadOptions) -> Iterator[pa.RecordBatch]:
    """Read one planned piece: an ``OffsetRange``, or PySpark's stand-in for an empty plan.

    When ``partitions()`` returns no ranges (every selected partition is empty, or the range
    asked for holds no records), PySpark still runs one task, with ``InputPartition(None)``.
    """
    if isinstance(partition, OffsetRange):
        return read_range(partition, opts)
    if partition.value is None:
        return iter(())
    raise TypeError(f"headwater cannot read the planned partition {partition!r}: not an offset range")


class TopicStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("headwater")``: micro-batches between checkpointed offsets.

    Offsets only ever come from the cluster (``initialOffset``, ``latestOffset``) or back from
    Spark's checkpoint (``start``/``end``), never from state kept here, so a restarted query reads
    exactly from where its checkpoint says, and a replayed batch reads the same records.
    """

    def __init__(self, opts: ReadOptions) -> None:
        self._opts = opts
        self._client: Cluster | None = None
        # Trigger.AvailableNow: the offsets the query must stop at, frozen at its start.
        self._target: dict[TopicPartition, int] | None = None
        self._last_latest: dict[TopicPartition, int] | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Tasks get a pickled copy of the reader; the admin client stays on the driver.
        state = dict(self.__dict__)
        state["_client"] = None
        return state

    def _cluster(self) -> Cluster:
        if self._client is None:
            self._client = _cluster(self._opts)
        return self._client

    def _partitions_now(self, *, missing_ok: bool) -> list[TopicPartition]:
        sub = self._opts.subscription
        return self._cluster().resolve(
            topics=sub.topics, pattern=sub.pattern, assigned=sub.assigned, missing_ok=missing_ok
        )

    def initialOffset(self) -> dict[str, dict[str, int]]:
        opts = self._opts
        tps = self._partitions_now(missing_ok=False)
        start = resolve_bound(
            self._cluster(),
            opts.starting,
            tps,
            name="startingOffsets",
            missing_timestamp_means_latest=opts.timestamp_strategy_latest,
        )
        log.info("stream of %s starts at %s", opts.subscription.describe(), start)
        return offsets_to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self._opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self._opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._cluster().latest(self._partitions_now(missing_ok=True))
        log.info("Trigger.AvailableNow: reading up to %s", self._target)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, dict[str, int]]:
        cluster = self._cluster()
        begun = offsets_from_json(start)
        current = self._partitions_now(missing_ok=True)
        latest = cluster.latest(current)
        self._last_latest = dict(latest)
        if self._target is not None:
            # Partitions that appeared after the target was frozen wait for the next run.
            latest = {
                tp: min(offset, self._target[tp]) for tp, offset in latest.items() if tp in self._target
            }
        gone = sorted(set(begun) - set(latest))
        if gone and self._target is None:
            _loss(self._opts, "partitions " + ", ".join(_name(tp) for tp in gone) + " no longer exist")
        new = sorted(set(latest) - set(begun))
        if new:
            log.info("new partitions in the stream: %s", ", ".join(_name(tp) for tp in new))
        if isinstance(limit, ReadMaxRows):
            base = {tp: offset for tp, offset in begun.items() if tp in latest}
            base.update(cluster.earliest(new))
            end = limit_offsets(base, latest, limit.max_rows)
        else:
            end = dict(latest)
        for tp in gone:
            end[tp] = begun[tp]  # nothing more to read there; keep its position in the checkpoint
        return offsets_to_json(end)

    def reportLatestOffset(self) -> dict[str, dict[str, int]] | None:
        return None if self._last_latest is None else offsets_to_json(self._last_latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begun = offsets_from_json(start)
        until = offsets_from_json(end)
        new = [tp for tp in until if tp not in begun]
        # A partition new in this batch is read from its first record, as Spark's source does.
        first = self._cluster().earliest(new) if new else {}
        ranges: list[OffsetRange] = []
        for tp, e in until.items():
            s = begun.get(tp, first.get(tp, 0))
            if e < s:
                _loss(
                    self._opts,
                    f"{_name(tp)} went back from offset {s} to {e} (log truncated or topic recreated)",
                )
                continue
            ranges.append(OffsetRange(tp.topic, tp.partition, s, e))
        return split_ranges(ranges, self._opts.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read_planned(partition, self._opts)

    def commit(self, end: dict[str, Any]) -> None:
        # Spark's checkpoint is the only record of progress: nothing is committed to the
        # cluster (a consumer group's offsets would lag or lead the checkpoint, so not be exact).
        log.debug("Spark committed offsets %s", end)

    def stop(self) -> None:
        self._client = None


def _summary(messages: list[WriterCommitMessage | None]) -> tuple[int, int]:
    """(records written, tasks that found their output already committed)."""
    results = [m for m in messages if isinstance(m, WriteResult)]
    return sum(m.records for m in results), sum(m.skipped for m in results)


class TopicWriter(DataSourceArrowWriter):
    """``df.write.format("headwater")``: each task produces its rows and waits for every ack.

    With ``exactlyOnce`` each task writes in one transaction and commits it itself (see
    ``transactional.py``); ``write_id`` names this write in the tasks' records: the ``jobId``
    option, or a new id for every write, fixed here on the driver so all attempts share it.
    """

    def __init__(self, opts: WriteOptions) -> None:
        self._opts = opts
        eo = opts.exactly_once
        self._write_id = None if eo is None else (eo.job_id or uuid.uuid4().hex)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        if self._write_id is None:
            return write_batches(iterator, self._opts)
        return write_transactional(iterator, self._opts, batch_task_write(self._write_id))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        written, skipped = _summary(messages)
        log.info(
            "write committed: %d records acknowledged by the cluster%s",
            written,
            f"; {skipped} task(s) had committed before" if skipped else "",
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        written, _ = _summary(messages)
        # Topics are append-only: what finished tasks wrote stays written.
        if self._write_id is None:
            log.error("write failed; %d records from tasks that finished are already in the topics", written)
        else:
            log.error(
                "write %s failed; tasks that finished committed their transactions (%d records); "
                "running it again with the same jobId writes only the other tasks' rows",
                self._write_id,
                written,
            )


class TopicStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("headwater")``: as the batch writer, once per micro-batch.

    With ``exactlyOnce`` a task's record names the query id and micro-batch id, which Spark gives
    the task; a micro-batch replayed after a restart skips the tasks that had committed.
    """

    def __init__(self, opts: WriteOptions) -> None:
        self._opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        if self._opts.exactly_once is None:
            return write_batches(iterator, self._opts)
        return write_transactional(iterator, self._opts, stream_task_write())

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        written, skipped = _summary(messages)
        log.info(
            "micro-batch %d committed: %d records acknowledged by the cluster%s",
            batchId,
            written,
            f"; {skipped} task(s) had committed before" if skipped else "",
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        written, _ = _summary(messages)
        log.error(
            "micro-batch %d failed; %d records from tasks that finished are already written%s",
            batchId,
            written,
            " (committed: the batch's replay skips those tasks)" if self._opts.exactly_once else "",
        )


class TopicDataSource(DataSource):
    """Kafka-protocol topics as a Spark table: columns and options as Spark's Kafka source."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return read_schema(wants_headers(self.options))

    def reader(self, schema: StructType) -> TopicBatchReader:
        return TopicBatchReader(parse_read_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> TopicStreamReader:
        return TopicStreamReader(parse_read_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> TopicWriter:
        if overwrite:
            raise TopicSourceError(
                "mode overwrite is not supported: topics are append-only (use mode append)"
            )
        opts = parse_write_options(self.options)
        check_write_schema(schema, opts.topic)
        return TopicWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> TopicStreamWriter:
        opts = parse_write_options(self.options, streaming=True)
        check_write_schema(schema, opts.topic)
        return TopicStreamWriter(opts)
