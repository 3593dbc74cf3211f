"""A follower's fetch loop for one partition, sans-IO (Kafka's ``AbstractFetcherThread`` and
``ReplicaFetcherThread``, with truncation on fetch, IBP 2.7+).

The shell asks ``next_request(now_ms)`` for the fields of the partition's next Fetch entry, sends it,
and hands the answer to ``on_fetch_response`` together with the request it answers. The fetcher
returns one action; the shell carries it out on the local log and reports back:

- ``AppendRecords``: append the response's records (if any) with ``append_as_follower``, then call
  ``on_appended(log_end_offset, latest_epoch)``, which returns the follower's new high watermark
  (min of the leader's and the local log end offset) and how far the log start may advance.
- ``Truncate(offset)``: ``truncate_to(offset)``, then ``on_truncated(...)``.
- ``TruncateFullyAndStartAt(offset)``: ``truncate_fully_and_start_at(offset)``, then ``on_truncated(...)``.
- ``ListLeaderOffsets``: send ListOffsets (replica id = this broker, EARLIEST and LATEST; the leader
  answers LATEST with its log end offset for a replica) and call ``on_leader_offsets`` (or
  ``on_leader_offsets_error``).
- ``Backoff(until_ms)``: nothing to do; ``next_request`` returns None until then.
- ``AwaitLeaderAndIsr``: the leader has a newer epoch than ours; stop until a LeaderAndIsr arrives.
- ``Ignore``: a stale answer (the request no longer matches the fetch state).

Rules:
- Start: fetch from the log end offset with the log's latest epoch as ``last_fetched_epoch``; a log
  without epochs first truncates to its high watermark (``initialFetchOffset``, Truncating state).
- A diverging epoch (epoch E, end offset X) in a response truncates (``getOffsetTruncationState``): if
  the local cache knows E, to min(local end of E, X, LEO); if the local largest epoch <= E is another
  one, to min(its end, LEO) and the next fetch sends that epoch, so the leader answers again;
  if nothing is known, to min(X, LEO). The response's records are not appended.
- OFFSET_OUT_OF_RANGE (``fetchOffsetAndTruncate``): if the leader's log end offset is below ours,
  truncate to it; else if the leader's log start is above our log end, empty the log and start at the
  leader's log start; else keep the log and fetch from our log end offset again.
- FENCED_LEADER_EPOCH for a request at our current epoch: wait for LeaderAndIsr. Other errors
  (NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION, ...) back off
  ``replica.fetch.backoff.ms`` and retry.
- The follower's high watermark is min(leader high watermark, local log end offset); it may go down
  (a new leader's high watermark can lag the old one's), as in Kafka.
"""

from __future__ import annotations

from enum import Enum

from headwater.protocol.errors import ErrorCode
from headwater.replication.types import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    UNKNOWN_OFFSET,
    EpochEndOffset,
    EpochLookup,
)
from headwater.values import value


class FetchState(Enum):
    FETCHING = "fetching"
    TRUNCATING = "truncating"  # waiting for the shell's ``on_truncated``
    APPENDING = "appending"  # waiting for the shell's ``on_appended``
    AWAITING_LEADER_OFFSETS = "awaiting_leader_offsets"
    DELAYED = "delayed"
    FENCED = "fenced"


@value
class FetchRequestFields:
    """One Fetch partition entry to send to ``leader_id`` (the shell adds the log start offset)."""

    leader_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int


@value
class PartitionFetchResponse:
    """The fields of a Fetch response partition the fetcher decides on."""

    error: ErrorCode
    high_watermark: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    diverging_epoch: EpochEndOffset | None = None
    records_size_bytes: int = 0


@value
class AppendRecords:
    fetch_offset: int
    records_size_bytes: int


@value
class Truncate:
    offset: int


@value
class TruncateFullyAndStartAt:
    offset: int


@value
class ListLeaderOffsets:
    leader_id: int
    current_leader_epoch: int


@value
class Backoff:
    until_ms: int


@value
class AwaitLeaderAndIsr:
    pass


@value
class Ignore:
    pass


FollowerAction = (
    AppendRecords | Truncate | TruncateFullyAndStartAt | ListLeaderOffsets | Backoff | AwaitLeaderAndIsr | Ignore
)


@value
class FollowerLogUpdate:
    """After an append: the follower's high watermark, and a log start to advance to (or None)."""

    high_watermark: int
    advance_log_start_to: int | None = None


def truncation_offset(diverging: EpochEndOffset, log_end_offset: int, local_end_offset_for_epoch: EpochLookup) -> int:
    """Where to truncate after the leader answered ``diverging`` (Kafka's ``getOffsetTruncationState``)."""
    if diverging.end_offset == UNDEFINED_EPOCH_OFFSET:
        return log_end_offset
    if diverging.epoch == UNDEFINED_EPOCH:
        return min(diverging.end_offset, log_end_offset)
    local_epoch, local_end = local_end_offset_for_epoch(diverging.epoch)
    if local_epoch == UNDEFINED_EPOCH or local_end == UNDEFINED_EPOCH_OFFSET:
        return min(diverging.end_offset, log_end_offset)
    if local_epoch != diverging.epoch:
        # We never saw the leader's epoch: cut where our older epoch ends and ask again.
        return min(local_end, log_end_offset)
    return min(local_end, diverging.end_offset, log_end_offset)


class FollowerFetcher:
    """Fetch state of one partition on a follower. See the module rules."""

    def __init__(
        self,
        *,
        leader_id: int,
        leader_epoch: int,
        log_end_offset: int,
        latest_epoch: int | None,
        high_watermark: int,
        fetch_backoff_ms: int,
    ) -> None:
        self.leader_id = leader_id
        self.current_leader_epoch = leader_epoch
        self.fetch_backoff_ms = fetch_backoff_ms
        self._high_watermark = min(high_watermark, log_end_offset)
        self._leader_high_watermark = UNKNOWN_OFFSET
        self._delay_until_ms = 0
        self._pending_log_start = UNKNOWN_OFFSET
        if latest_epoch is None and log_end_offset > high_watermark:
            # Without epochs there is no way to find a divergence: keep only what is committed.
            self._state = FetchState.TRUNCATING
            self._fetch_offset = high_watermark
            self._last_fetched_epoch = UNDEFINED_EPOCH
            self.initial_truncation: Truncate | None = Truncate(high_watermark)
        else:
            self._state = FetchState.FETCHING
            self._fetch_offset = log_end_offset
            self._last_fetched_epoch = UNDEFINED_EPOCH if latest_epoch is None else latest_epoch
            self.initial_truncation = None

    # ---- view --------------------------------------------------------------------------------------

    @property
    def state(self) -> FetchState:
        return self._state

    @property
    def fetch_offset(self) -> int:
        return self._fetch_offset

    @property
    def last_fetched_epoch(self) -> int:
        return self._last_fetched_epoch

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def lag(self) -> int | None:
        """Leader high watermark minus our next fetch offset, once a response told us the former."""
        if self._leader_high_watermark < 0:
            return None
        return max(0, self._leader_high_watermark - self._fetch_offset)

    @property
    def in_sync(self) -> bool:
        """Kafka's ``isReplicaInSync`` for follower-side throttling: no lag behind the leader's HW."""
        lag = self.lag
        return lag is not None and lag <= 0

    @property
    def leader_high_watermark(self) -> int:
        """The leader's high watermark as its last answer told it (negative: no answer yet)."""
        return self._leader_high_watermark

    def learn_leader_high_watermark(self, high_watermark: int) -> None:
        """The leader's high watermark from before this fetcher's first answer: what the fetcher of
        the previous leader epoch knew, or what the fetch session was last told. A new epoch does not
        move this replica's log, but a fetcher that knows nothing counts as lagging, and a lagging
        replica waits for the follower throttle's budget: after a copy's answer that can be a
        minute, longer than ``replica.lag.time.max.ms``, so the replica would drop out of the ISR
        or never rejoin it. (Kafka's windowed quota forgets a burst within about eleven seconds; the
        token bucket here pays it back in full.) Nor may the leader answer soon: its fetch session
        answers a partition only when its high watermark changes."""
        if self._leader_high_watermark < 0:
            self._leader_high_watermark = high_watermark

    # ---- requests ----------------------------------------------------------------------------------

    def next_request(self, now_ms: int) -> FetchRequestFields | None:
        if self._state is FetchState.DELAYED and now_ms >= self._delay_until_ms:
            self._state = FetchState.FETCHING
        if self._state is not FetchState.FETCHING:
            return None
        return FetchRequestFields(self.leader_id, self.current_leader_epoch, self._fetch_offset,
                                  self._last_fetched_epoch)

    def _matches(self, request: FetchRequestFields) -> bool:
        return (
            self._state is FetchState.FETCHING
            and request.leader_id == self.leader_id
            and request.current_leader_epoch == self.current_leader_epoch
            and request.fetch_offset == self._fetch_offset
        )

    def _backoff(self, now_ms: int) -> Backoff:
        self._state = FetchState.DELAYED
        self._delay_until_ms = now_ms + self.fetch_backoff_ms
        return Backoff(self._delay_until_ms)

    def on_fetch_response(
        self,
        request: FetchRequestFields,
        response: PartitionFetchResponse,
        *,
        log_end_offset: int,
        end_offset_for_epoch: EpochLookup,
        now_ms: int,
    ) -> FollowerAction:
        """Decide on the answer to ``request``; ``log_end_offset`` and the lookup describe the local log."""
        if not self._matches(request):
            return Ignore()
        error = response.error
        if error == ErrorCode.NONE:
            if response.diverging_epoch is not None:
                offset = truncation_offset(response.diverging_epoch, log_end_offset, end_offset_for_epoch)
                self._state = FetchState.TRUNCATING
                return Truncate(offset)
            if log_end_offset != self._fetch_offset:
                raise ValueError(f"fetched at {self._fetch_offset} but the log ends at {log_end_offset}")
            self._leader_high_watermark = response.high_watermark
            self._pending_log_start = response.log_start_offset
            self._state = FetchState.APPENDING
            return AppendRecords(self._fetch_offset, response.records_size_bytes)
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._state = FetchState.AWAITING_LEADER_OFFSETS
            return ListLeaderOffsets(self.leader_id, self.current_leader_epoch)
        if error == ErrorCode.FENCED_LEADER_EPOCH:
            self._state = FetchState.FENCED
            return AwaitLeaderAndIsr()
        return self._backoff(now_ms)

    def on_appended(self, log_end_offset: int, latest_epoch: int | None) -> FollowerLogUpdate:
        """The response's records (possibly none) are in the log, which now ends at ``log_end_offset``."""
        if self._state is not FetchState.APPENDING:
            raise ValueError(f"on_appended in state {self._state}")
        if log_end_offset < self._fetch_offset:
            raise ValueError(f"an append cannot shorten the log: {log_end_offset} < {self._fetch_offset}")
        self._state = FetchState.FETCHING
        self._fetch_offset = log_end_offset
        if latest_epoch is not None:
            self._last_fetched_epoch = latest_epoch
        if self._leader_high_watermark >= 0:
            self._high_watermark = min(self._leader_high_watermark, log_end_offset)
        start = self._pending_log_start
        advance = min(start, self._high_watermark) if start >= 0 else None
        return FollowerLogUpdate(self._high_watermark, advance)

    def on_truncated(self, log_end_offset: int, latest_epoch: int | None) -> int:
        """A ``Truncate`` / ``TruncateFullyAndStartAt`` was done; returns the follower's high watermark."""
        if self._state is not FetchState.TRUNCATING:
            raise ValueError(f"on_truncated in state {self._state}")
        self._state = FetchState.FETCHING
        self.initial_truncation = None
        self._fetch_offset = log_end_offset
        self._last_fetched_epoch = UNDEFINED_EPOCH if latest_epoch is None else latest_epoch
        self._high_watermark = min(self._high_watermark, log_end_offset)
        return self._high_watermark

    def on_leader_offsets(
        self, *, leader_log_start_offset: int, leader_log_end_offset: int, log_end_offset: int, now_ms: int
    ) -> Truncate | TruncateFullyAndStartAt | None:
        """The leader's log range after OFFSET_OUT_OF_RANGE; None means fetch again from our log end."""
        if self._state is not FetchState.AWAITING_LEADER_OFFSETS:
            raise ValueError(f"on_leader_offsets in state {self._state}")
        if leader_log_end_offset < log_end_offset:
            # Unclean election: the leader has less than we do. Follow it.
            self._state = FetchState.TRUNCATING
            return Truncate(leader_log_end_offset)
        if leader_log_start_offset > log_end_offset:
            # We were away while the leader deleted everything we have and more.
            self._state = FetchState.TRUNCATING
            return TruncateFullyAndStartAt(leader_log_start_offset)
        self._state = FetchState.FETCHING
        self._fetch_offset = log_end_offset
        return None

    def on_leader_offsets_error(self, error: ErrorCode, now_ms: int) -> Backoff | AwaitLeaderAndIsr:
        if self._state is not FetchState.AWAITING_LEADER_OFFSETS:
            raise ValueError(f"on_leader_offsets_error in state {self._state}")
        if error == ErrorCode.FENCED_LEADER_EPOCH:
            self._state = FetchState.FENCED
            return AwaitLeaderAndIsr()
        return self._backoff(now_ms)

    def on_request_failed(self, request: FetchRequestFields, now_ms: int) -> Backoff | Ignore:
        """The whole Fetch failed (connection lost, timeout): back off and retry."""
        if not self._matches(request):
            return Ignore()
        return self._backoff(now_ms)

    def validate_state(self) -> None:
        assert self._fetch_offset >= 0
        assert self._high_watermark <= self._fetch_offset, "a follower's high watermark stays within its log"
        assert (self.initial_truncation is None) or self._state is FetchState.TRUNCATING
