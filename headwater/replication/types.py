"""Small frozen values shared by the replication cores (leader side, follower side, acks).

Offsets follow Kafka's conventions: ``-1`` means "unknown" for an offset and "undefined" for an epoch,
the same sentinels the wire uses, so values pass to and from messages unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from headwater.values import value

UNKNOWN_OFFSET = -1
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

# ``end_offset_for_epoch(epoch) -> (epoch, end_offset)`` of a log's leader-epoch cache, with Kafka's
# meaning (``PartitionLog.end_offset_for_epoch`` has it): the largest epoch <= the one asked for, and the
# start offset of the next epoch (or the log end offset for the latest epoch); (-1, -1) when unknown.
EpochLookup = Callable[[int], tuple[int, int]]


@value
class EpochEndOffset:
    """An (epoch, end offset) pair: a Fetch response's DivergingEpoch, an OffsetForLeaderEpoch answer."""

    epoch: int
    end_offset: int


@value
class HighWatermarkUpdate:
    """The high watermark moved: set it on the log, complete acks=all produces, wake fetchers."""

    old: int
    new: int


@dataclass(frozen=True)
class EpochStart:
    """A new leader's epoch starts at this offset: record it in the log's leader-epoch cache."""

    epoch: int
    start_offset: int
