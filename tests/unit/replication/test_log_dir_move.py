"""What a move between log dirs does next (``replication.log_dir_move``), against Kafka's
``ReplicaAlterLogDirsThread``: copy from the current log up to its log end offset, truncate by leader
epochs as a follower would, swap once both logs end at the same offset
(``Partition.maybeReplaceCurrentWithFutureReplica``)."""

from __future__ import annotations

from _replication_model import ModelLog

from headwater.replication.follower import Truncate, TruncateFullyAndStartAt
from headwater.replication.log_dir_move import Copy, LogEnds, MoveAction, Swap, next_action


def ends(log: ModelLog, start: int = 0) -> LogEnds:
    return LogEnds(start, log.log_end_offset, log.latest_epoch())


def decide(future: ModelLog, current: ModelLog, *, future_start: int = 0, current_start: int = 0) -> MoveAction:
    return next_action(ends(future, future_start), ends(current, current_start),
                       current_end_offset_for_epoch=current.end_offset_for_epoch,
                       future_end_offset_for_epoch=future.end_offset_for_epoch)


def model(*epochs: int) -> ModelLog:
    """A log whose offset i was written in leader epoch ``epochs[i]``."""
    return ModelLog(list(epochs))


def test_an_empty_future_copies_from_the_start() -> None:
    assert decide(model(), model(0, 0, 1)) == Copy(0)


def test_a_future_behind_copies_from_its_end() -> None:
    assert decide(model(0, 0), model(0, 0, 1, 1)) == Copy(2)


def test_equal_ends_swap() -> None:
    assert decide(model(0, 0, 1), model(0, 0, 1)) == Swap()
    assert decide(model(), model()) == Swap()  # an empty partition moves at once


def test_a_current_log_start_past_the_copy_restarts_it_there() -> None:
    """Retention or DeleteRecords moved the current log's start beyond what the future holds (or the
    future is new and the current log does not start at 0)."""
    assert decide(model(), model(0, 0, 0, 0), current_start=3) == TruncateFullyAndStartAt(3)


def test_a_current_log_truncated_and_rewritten_in_a_newer_epoch_truncates_the_future() -> None:
    """The current replica (a follower) lost offsets 2-3 to a leader change while they were being
    copied; the future log drops them by epochs, as a follower would (Kafka's comment in
    ReplicaAlterLogDirsThread.truncate)."""
    future = model(0, 0, 1, 1)
    current = model(0, 0, 2)
    assert decide(future, current) == Truncate(2)


def test_a_future_past_a_truncated_current_log_is_cut_to_its_end() -> None:
    assert decide(model(0, 0, 0), model(0, 0)) == Truncate(2)
