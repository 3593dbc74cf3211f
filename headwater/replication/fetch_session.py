"""Incremental fetch sessions (KIP-227) between a follower and its leader. Pure logic, no I/O.

A follower of 3,000 partitions on one leader otherwise names all 3,000 in every fetch, and the
leader answers for all 3,000, though most of them have nothing new: at 10,000 partitions that
encoding and decoding was the main steady cost of an idle broker. With a session the leader keeps
what the follower last asked for each partition; the follower sends only the partitions whose
fetch position changed (and those it stops fetching, as "forgotten"), and the leader answers only
the partitions with records, an error, or a high watermark or log start offset the follower has
not been told yet. The leader still treats every partition of the session as fetched at its last
position in each round, so ISR membership and the high watermark follow as with full fetches.

The protocol's rules, from the follower's side (``SessionBuilder``) and the leader's
(``SessionCache``):

* Epoch -1 (FINAL) with session id 0: a sessionless full fetch (consumers, and our followers
  towards a leader that gave them no session). With a session id: close that session.
* Epoch 0 (INITIAL): a full fetch that asks for a new session (closing the one named, if any);
  the response carries the new session's id, or 0 if the leader keeps none.
* Epoch n > 0: an incremental fetch in session ``id``, whose expected epoch must be n, else
  INVALID_FETCH_SESSION_EPOCH; an unknown id gets FETCH_SESSION_ID_NOT_FOUND. Each success moves
  the epoch on (after 2**31-1 comes 1).
* Any error, a lost connection or a timeout sends the follower back to a full fetch (epoch 0).

Sessions are given to followers only. A consumer that asks for one gets session id 0 and keeps
sending full fetches, which the protocol allows; kafka-python and librdkafka both handle it.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from headwater.values import value

FINAL_EPOCH = -1
INITIAL_EPOCH = 0
MAX_SESSIONS = 1000
"""Kafka's ``max.incremental.fetch.session.cache.slots`` default (0 turns sessions off)."""
IDLE_EVICT_MS = 120_000
"""A session unused this long goes: its follower restarted, moved on, or lost the connection."""

Key = tuple[str, int]


def next_epoch(epoch: int) -> int:
    if epoch < 0:
        return epoch
    return 1 if epoch >= 2**31 - 1 else epoch + 1


@dataclass(slots=True)
class SessionPartition:
    """What the leader keeps per partition: the follower's last request for it (the attribute names
    are those of a Fetch request's partition, so the leader reads it like one) and what the
    follower was last told."""

    topic: str
    partition: int
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int
    told_high_watermark: int = -1
    told_log_start_offset: int = -1

    def update(self, p: PartitionRequest) -> None:
        self.fetch_offset = p.fetch_offset
        self.current_leader_epoch = p.current_leader_epoch
        self.last_fetched_epoch = p.last_fetched_epoch
        self.log_start_offset = p.log_start_offset
        self.partition_max_bytes = p.partition_max_bytes

    def must_answer(self, error: int, has_records: bool, diverging: bool, high_watermark: int,
                    log_start_offset: int) -> bool:
        """Kafka's ``maybeUpdateResponseData``: records, an error, a divergence, or news of the
        high watermark or log start offset. What is answered becomes what the follower was told."""
        if (has_records or error or diverging or high_watermark != self.told_high_watermark
                or log_start_offset != self.told_log_start_offset):
            self.told_high_watermark = high_watermark
            self.told_log_start_offset = log_start_offset
            return True
        return False


@value
class PartitionRequest:
    """One partition of a follower's fetch, as the follower sends it."""

    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int


@dataclass(slots=True)
class FetchSession:
    id: int
    replica_id: int
    epoch: int = 1  # the epoch the next incremental fetch must carry
    last_used_ms: int = 0
    partitions: dict[Key, SessionPartition] = field(default_factory=dict)

    def apply(self, changed: Mapping[Key, PartitionRequest], forgotten: Iterable[Key]) -> None:
        """An incremental fetch's changes: new or moved partitions, then the forgotten ones."""
        for key, p in changed.items():
            held = self.partitions.get(key)
            if held is None:
                held = self.partitions[key] = SessionPartition(key[0], key[1], -1, -1, -1, -1, 0)
            held.update(p)
        for key in forgotten:
            self.partitions.pop(key, None)

    def answered_with_records(self, keys: Iterable[Key]) -> None:
        """Move partitions that just got records to the end of the session, so that when a response
        fills up, the partitions after them get their turn next time (Kafka does the same)."""
        for key in keys:
            held = self.partitions.pop(key, None)
            if held is not None:
                self.partitions[key] = held

    def by_topic(self) -> list[tuple[str, list[SessionPartition]]]:
        out: dict[str, list[SessionPartition]] = {}
        for (topic, _), sp in self.partitions.items():
            out.setdefault(topic, []).append(sp)
        return list(out.items())


class SessionCache:
    """The leader's sessions, at most ``max_sessions``; the least recently used goes first."""

    def __init__(self, max_sessions: int = MAX_SESSIONS, idle_evict_ms: int = IDLE_EVICT_MS,
                 rng: random.Random | None = None) -> None:
        self.max_sessions = max_sessions
        self.idle_evict_ms = idle_evict_ms
        self._sessions: dict[int, FetchSession] = {}  # insertion order = least recently used first
        self._rng = rng or random.Random()

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, replica_id: int, now_ms: int) -> FetchSession | None:
        """A new session; None when sessions are off (``max_sessions`` 0)."""
        if self.max_sessions <= 0:
            return None
        self._evict_idle(now_ms)
        if len(self._sessions) >= self.max_sessions:
            oldest = next(iter(self._sessions))
            del self._sessions[oldest]
        while True:
            sid = self._rng.randint(1, 2**31 - 1)
            if sid not in self._sessions:
                break
        session = FetchSession(sid, replica_id, last_used_ms=now_ms)
        self._sessions[sid] = session
        return session

    def get(self, session_id: int, replica_id: int, now_ms: int) -> FetchSession | None:
        """The session, marked as just used; None if unknown or another replica's."""
        session = self._sessions.get(session_id)
        if session is None or session.replica_id != replica_id:
            return None
        session.last_used_ms = now_ms
        self._sessions[session_id] = self._sessions.pop(session_id)  # now the most recently used
        return session

    def remove(self, session_id: int, replica_id: int) -> None:
        """Close a session of ``replica_id`` (another replica's is left alone)."""
        session = self._sessions.get(session_id)
        if session is not None and session.replica_id == replica_id:
            del self._sessions[session_id]

    def _evict_idle(self, now_ms: int) -> None:
        for sid in [s.id for s in self._sessions.values() if now_ms - s.last_used_ms > self.idle_evict_ms]:
            del self._sessions[sid]


@dataclass(slots=True)
class SessionBuilder:
    """The follower's side, one per fetch loop: which kind of fetch to send next, and what to put in it."""

    session_id: int = 0
    epoch: int = INITIAL_EPOCH
    sent: dict[Key, PartitionRequest] = field(default_factory=dict)
    """What the leader's session holds for each partition, as far as we know."""
    told: dict[Key, int] = field(default_factory=dict)
    """The high watermark the leader last answered for each partition in this session. It answers a
    partition again only when that changes, so a fetcher that missed the answer (made by a new
    leader epoch while the fetch was out) learns it here, or not until the next record."""

    def next_fetch(self, wanted: Mapping[Key, PartitionRequest]) -> tuple[int, int, dict[Key, PartitionRequest], list[Key]]:
        """(session id, epoch, partitions to send, partitions to forget) for a fetch of ``wanted``."""
        if self.session_id == 0:
            return 0, INITIAL_EPOCH, dict(wanted), []
        changed = {k: p for k, p in wanted.items() if self.sent.get(k) != p}
        forgotten = [k for k in self.sent if k not in wanted]
        return self.session_id, self.epoch, changed, forgotten

    def on_response(self, error: int, response_session_id: int, sent_epoch: int,
                    sent: Mapping[Key, PartitionRequest], forgotten: Iterable[Key]) -> None:
        """The leader answered the fetch ``next_fetch`` returned (``error`` is the top-level code)."""
        if error:
            self.reset()
            return
        if sent_epoch == INITIAL_EPOCH:
            self.session_id = response_session_id
            self.epoch = 1
            self.sent = dict(sent) if response_session_id else {}
            self.told = {}
            return
        if response_session_id != self.session_id:
            self.reset()
            return
        self.epoch = next_epoch(self.epoch)
        self.sent.update(sent)
        for key in forgotten:
            self.sent.pop(key, None)
            self.told.pop(key, None)

    def answered(self, key: Key, high_watermark: int) -> None:
        """The response ``on_response`` just accepted carried this partition."""
        if self.session_id:
            self.told[key] = high_watermark

    def last_told(self, key: Key) -> int | None:
        """The leader's high watermark for this partition as this session last heard it, if at all."""
        return self.told.get(key)

    def reset(self) -> None:
        """Back to a full fetch (a lost connection, a timeout, a session error)."""
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self.sent = {}
        self.told = {}
