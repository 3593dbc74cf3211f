"""The group coordinator's data: a group's states and the moves between them, its members and
committed offsets, the coordinator's config, and the writes it waits for.

``TRANSITIONS`` lists, for each state, the states a group may enter it from; the state machine in
``coordinator.py`` changes a group's state only through :func:`transition`, which refuses any other
move.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from headwater.protocol.errors import ErrorCode


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


S = GroupState
# state -> the states a group may enter it from
TRANSITIONS: dict[GroupState, frozenset[GroupState]] = {
    S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
    S.DEAD: frozenset({S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD}),
}


class PartitionLoad(Enum):
    LOADING = "loading"
    LOADED = "loaded"


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    num_partitions: int = 50
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_group_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600_000

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> CoordinatorConfig:
        def get(key: str, default: int) -> int:
            raw = props.get(key)
            try:
                return default if raw is None else int(raw)
            except ValueError as exc:
                raise ValueError(f"{key}={raw!r} is not an integer") from exc

        d = cls()
        cfg = cls(
            num_partitions=get("offsets.topic.num.partitions", d.num_partitions),
            min_session_timeout_ms=get("group.min.session.timeout.ms", d.min_session_timeout_ms),
            max_session_timeout_ms=get("group.max.session.timeout.ms", d.max_session_timeout_ms),
            initial_rebalance_delay_ms=get("group.initial.rebalance.delay.ms", d.initial_rebalance_delay_ms),
            max_group_size=get("group.max.size", d.max_group_size),
            offset_metadata_max_bytes=get("offset.metadata.max.bytes", d.offset_metadata_max_bytes),
            offsets_retention_ms=get("offsets.retention.minutes", d.offsets_retention_ms // 60_000) * 60_000,
            offsets_retention_check_interval_ms=get("offsets.retention.check.interval.ms",
                                                    d.offsets_retention_check_interval_ms),
        )
        if cfg.num_partitions < 1:
            raise ValueError("offsets.topic.num.partitions must be at least 1")
        if not 0 < cfg.min_session_timeout_ms <= cfg.max_session_timeout_ms:
            raise ValueError("group.min.session.timeout.ms must be positive and at most group.max.session.timeout.ms")
        return cfg


@dataclass(slots=True)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    join_token: int | None = None
    sync_token: int | None = None
    heartbeat_deadline_ms: int = 0
    is_new: bool = False

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        return self.protocols == protocols


@dataclass(slots=True)
class OffsetEntry:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    # Where its record is in the partition's log, to keep the later of two commits of one partition
    # (Kafka compares the batches' log offsets): the write id of our own write (appends are written
    # in write-id order), or a negative position for a record read by the load (before any write).
    log_order: int = 0


@dataclass(slots=True)
class Group:
    group_id: str
    partition: int
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation: int = 0
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending_members: dict[str, int] = field(default_factory=dict)  # member id -> deadline (MEMBER_ID_REQUIRED)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    offsets: dict[tuple[str, int], OffsetEntry] = field(default_factory=dict)
    # producer id -> its transactional offsets not yet committed or aborted (invisible to OffsetFetch)
    txn_offsets: dict[int, dict[tuple[str, int], OffsetEntry]] = field(default_factory=dict)
    join_not_before_ms: int = 0
    rebalance_deadline_ms: int = 0
    sync_write: int | None = None  # the group record of this generation being written

    def candidate_protocols(self) -> set[str]:
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        if not protocol_type or not protocols:
            return False
        if not self.members:
            return self.protocol_type in (None, "", protocol_type)
        names = {name for name, _ in protocols}
        return self.protocol_type == protocol_type and bool(self.candidate_protocols() & names)

    def all_joined(self) -> bool:
        return not self.pending_members and all(m.join_token is not None for m in self.members.values())

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)


@dataclass(frozen=True, slots=True)
class PendingWrite:
    kind: str  # "commit" | "txn-commit" | "sync" | "delete-offsets" | "delete-groups" | "group" | "expire"
    token: int | None
    group_id: str
    generation: int
    offsets: tuple[tuple[tuple[str, int], OffsetEntry | None], ...] = ()
    group_ids: tuple[str, ...] = ()
    producer_id: int = -1  # "txn-commit": whose transaction the offsets belong to


def transition(group: Group, target: GroupState, now_ms: int) -> None:
    """Move ``group`` to ``target``, or raise AssertionError for a move ``TRANSITIONS`` does not list."""
    if group.state not in TRANSITIONS[target]:
        raise AssertionError(f"group {group.group_id}: illegal transition {group.state.value} -> {target.value}")
    group.state = target
    group.state_timestamp_ms = now_ms


def coordinator_write_error(error: ErrorCode) -> ErrorCode:
    """Kafka's mapping of a failed write to what a group client understands (it then looks again)."""
    if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                 ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_COORDINATOR,
                 ErrorCode.FENCED_LEADER_EPOCH):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error
