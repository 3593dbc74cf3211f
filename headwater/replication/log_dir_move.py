"""A replica's move between two log dirs of one broker, sans-IO: what the future log does next.

Kafka's ``ReplicaAlterLogDirsThread`` fetches the future log's data from the broker's own current
log, as a follower fetches from its leader (``LocalLeaderEndPoint``, up to the log end offset, not
the high watermark), and ``Partition.maybeReplaceCurrentWithFutureReplica`` swaps the two once their
log end offsets are equal, holding off appends to the current log meanwhile. The shell
(``headwater/server/log_dir_mover.py``) asks ``next_action`` after every step and carries the answer
out on the future log:

- ``TruncateFullyAndStartAt(offset)``: the future log ends below the current log's start (a new
  future log; or retention or DeleteRecords moved the current log's start past what was copied).
- ``Truncate(offset)``: the future log holds records the current one no longer has. By leader
  epochs, as a follower against its leader (``truncation_offset``): the current log was truncated
  and written again while the copy ran (Kafka truncates a future replica the same way, since one
  that was offline may have missed the truncation); or the future log simply ends past the current.
- ``Copy(offset)``: append the current log's batches from ``offset``, the future log's end.
- ``Swap``: caught up, nothing to truncate: the shell replaces the current log with the future one
  now, in the same step as this answer, so that no append to the current log comes in between.
"""

from __future__ import annotations

from dataclasses import dataclass

from headwater.replication.follower import Truncate, TruncateFullyAndStartAt, truncation_offset
from headwater.replication.types import EpochEndOffset, EpochLookup


@dataclass(frozen=True)
class LogEnds:
    """What the decision needs of a log besides its epoch lookups."""

    log_start_offset: int
    log_end_offset: int
    latest_epoch: int | None


@dataclass(frozen=True)
class Copy:
    offset: int


@dataclass(frozen=True)
class Swap:
    pass


MoveAction = Truncate | TruncateFullyAndStartAt | Copy | Swap


def next_action(future: LogEnds, current: LogEnds, *, current_end_offset_for_epoch: EpochLookup,
                future_end_offset_for_epoch: EpochLookup) -> MoveAction:
    if future.log_end_offset < current.log_start_offset:
        return TruncateFullyAndStartAt(current.log_start_offset)
    if future.latest_epoch is not None:
        epoch, end = current_end_offset_for_epoch(future.latest_epoch)
        cut = truncation_offset(EpochEndOffset(epoch, end), future.log_end_offset, future_end_offset_for_epoch)
        if cut < future.log_end_offset:
            return Truncate(cut)
    if future.log_end_offset > current.log_end_offset:
        return Truncate(current.log_end_offset)
    if future.log_end_offset < current.log_end_offset:
        return Copy(future.log_end_offset)
    return Swap()
