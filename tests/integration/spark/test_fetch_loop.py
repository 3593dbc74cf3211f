"""The task's fetch loop on made-up consume() results, without a broker or Spark (fast).

The loop takes a whole consume() result at a time and cuts it to the range with binary searches;
only a result whose offsets do not ascend is walked record by record. Whatever librdkafka hands
over (gaps from compaction, a re-delivery from an earlier offset after a leader change, records
past the end of the range, end-of-partition events in between), each offset of the range that
holds a record must come out exactly once, in order, with its own key, value and timestamp.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, Message
from hypothesis import given
from hypothesis import strategies as st

from headwater.spark.fetcher import _RangeReader
from headwater.spark.options import parse_read_options
from headwater.spark.ranges import OffsetRange
from headwater.spark.schema import arrow_read_schema

OPTIONS = parse_read_options({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"}, streaming=False)


def record(offset: int) -> Message:
    # Every 7th record has no key; every 11th has no timestamp (librdkafka kind 0).
    key = None if offset % 7 == 0 else b"k%d" % offset
    kind = 0 if offset % 11 == 0 else 1
    return Message(
        topic="t",
        partition=0,
        offset=offset,
        key=key,
        value=b"v%d" % offset,
        timestamp=(kind, 1_700_000_000_000 + offset),
    )


def end_of_partition(offset: int) -> Message:
    return Message(topic="t", partition=0, offset=offset, error=KafkaError(KafkaError._PARTITION_EOF))


@st.composite
def deliveries(draw: Any) -> tuple[list[int], OffsetRange, list[list[Message]]]:
    """A log (ascending offsets with gaps), a range of it, and consume() results covering it."""
    gaps = draw(st.lists(st.integers(1, 3), min_size=1, max_size=60))
    log = [sum(gaps[: i + 1]) for i in range(len(gaps))]
    end = log[-1] + 1
    start = draw(st.integers(0, end))
    until = draw(st.integers(start, end + 2))
    # librdkafka delivers the log in order from the range start; a re-fetch after a leader change
    # may start again from an earlier offset (rewinds). Results are cut at arbitrary points, and an
    # end-of-partition event may follow the last record.
    stream: list[Message] = []
    position = start
    rewinds = draw(st.integers(0, 2))
    while True:
        chunk = [o for o in log if o >= position]
        if rewinds and chunk:
            upto = draw(st.integers(1, len(chunk)))
            stream += [record(o) for o in chunk[:upto]]
            position = draw(st.integers(start, chunk[upto - 1]))
            rewinds -= 1
            continue
        stream += [record(o) for o in chunk]
        break
    stream.append(end_of_partition(end))
    cuts = sorted(draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    results = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    return log, OffsetRange("t", 0, start, until), results


@given(deliveries(), st.integers(1, 25))
def test_each_offset_of_the_range_once_in_order(
    case: tuple[list[int], OffsetRange, list[list[Message]]], rows_per_batch: int
) -> None:
    log, rng, results = case
    reader = _RangeReader(None, rng, OPTIONS)  # type: ignore[arg-type]  # the consumer is not used here
    batches: list[pa.RecordBatch] = []
    for messages in results:
        if reader.position >= rng.until_offset:
            break
        reader._take(messages)
        if len(reader.rows) >= rows_per_batch:
            batches.append(reader._flush())
    if len(reader.rows):
        batches.append(reader._flush())
    table = pa.Table.from_batches(batches, schema=arrow_read_schema(False)) if batches else None
    expected = [o for o in log if rng.from_offset <= o < rng.until_offset]
    got = table.column("offset").to_pylist() if table is not None else []
    assert got == expected
    if table is None:
        return
    assert table.column("key").to_pylist() == [None if o % 7 == 0 else b"k%d" % o for o in expected]
    assert table.column("value").to_pylist() == [b"v%d" % o for o in expected]
    assert table.column("timestampType").to_pylist() == [-1 if o % 11 == 0 else 0 for o in expected]
    stamps = table.column("timestamp").cast(pa.int64()).to_pylist()
    assert stamps == [None if o % 11 == 0 else (1_700_000_000_000 + o) * 1000 for o in expected]
    assert set(table.column("partition").to_pylist()) == {0}
