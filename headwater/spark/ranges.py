"""Offset arithmetic of the source, free of I/O: ranges, splitting, read limits, offset dicts.

A range is half-open, ``[from_offset, until_offset)``, like Spark's Kafka source: the record at
``until_offset`` belongs to the next batch. Everything here is deterministic, because Spark
replays a micro-batch after a failure by planning it again from the same offsets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from headwater.spark.errors import TopicSourceError
from headwater.spark.options import TopicPartition


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One Spark task: the records of one topic partition in ``[from_offset, until_offset)``."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


def split_ranges(ranges: Iterable[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Drop empty ranges; split the rest so there are at least ``min_partitions`` of them.

    Large ranges get more pieces than small ones (pieces in proportion to size), and a range is
    never cut below one offset, so the result may still have fewer pieces when there are fewer
    offsets than ``min_partitions``.
    """
    nonempty = sorted((r for r in ranges if r.size > 0), key=lambda r: (r.topic, r.partition, r.from_offset))
    if min_partitions is None or len(nonempty) >= min_partitions:
        return nonempty
    total = sum(r.size for r in nonempty)
    pieces = [min(r.size, max(1, r.size * min_partitions // total)) for r in nonempty]
    # Rounding down can leave us short: give the extra pieces to the ranges with the most
    # offsets per piece, one at a time, so the pieces stay as even as possible.
    while sum(pieces) < min_partitions:
        candidates = [i for i, r in enumerate(nonempty) if pieces[i] < r.size]
        if not candidates:
            break
        best = max(candidates, key=lambda i: (nonempty[i].size / pieces[i], -i))
        pieces[best] += 1
    result: list[OffsetRange] = []
    for r, count in zip(nonempty, pieces, strict=True):
        step, extra = divmod(r.size, count)
        start = r.from_offset
        for k in range(count):
            end = start + step + (1 if k < extra else 0)
            result.append(OffsetRange(r.topic, r.partition, start, end))
            start = end
    return result


def limit_offsets(
    start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], max_rows: int
) -> dict[TopicPartition, int]:
    """End offsets that admit at most ``max_rows`` offsets in total past ``start``.

    The budget is shared in proportion to each partition's backlog (as Spark's Kafka source does
    with ``maxOffsetsPerTrigger``), rounding handed out largest-remainder first so the total is
    exactly ``max_rows`` whenever the backlog is larger. Partitions absent from ``start`` are not
    allowed: the caller resolves new partitions to their first offset before calling.
    """
    backlog = {tp: max(0, latest[tp] - start[tp]) for tp in latest}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(latest)
    shares: dict[TopicPartition, int] = {}
    remainders: list[tuple[int, TopicPartition]] = []
    for tp in sorted(backlog):
        whole, rest = divmod(backlog[tp] * max_rows, total)
        shares[tp] = whole
        remainders.append((rest, tp))
    leftover = max_rows - sum(shares.values())
    for _, tp in sorted(remainders, key=lambda item: (-item[0], item[1]))[:leftover]:
        shares[tp] += 1
    return {tp: start[tp] + shares[tp] if backlog[tp] else latest[tp] for tp in latest}


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's checkpoint form, ``{"topic": {"0": 42}}`` (string keys: JSON object keys)."""
    result: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        result.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return result


def offsets_from_json(data: Mapping[str, object]) -> dict[TopicPartition, int]:
    """Read back what ``offsets_to_json`` wrote (and Spark checkpointed)."""
    result: dict[TopicPartition, int] = {}
    for topic, partitions in data.items():
        if not isinstance(partitions, Mapping):
            raise TopicSourceError(
                f"checkpointed offsets for topic {topic!r} are not an object: {partitions!r}"
            )
        for partition, offset in partitions.items():
            if not isinstance(offset, int):
                raise TopicSourceError(
                    f"checkpointed offset of {topic}-{partition} is not an integer: {offset!r}"
                )
            result[TopicPartition(topic, int(partition))] = offset
    return result
