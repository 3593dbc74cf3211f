"""A coordinator under test with every offsets partition loaded, a clock, and a log of its appends."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from headwater.coordinator import events as ev
from headwater.coordinator.coordinator import CoordinatorConfig, GroupCoordinator
from headwater.protocol.errors import ErrorCode

CONFIG = CoordinatorConfig(num_partitions=3, min_session_timeout_ms=10, initial_rebalance_delay_ms=0,
                           offsets_retention_ms=60_000, offsets_retention_check_interval_ms=1000)
RANGE = (("range", b"meta-range"),)


@dataclass
class Harness:
    config: CoordinatorConfig = CONFIG
    now_ms: int = 1_000_000
    coord: GroupCoordinator = field(init=False)
    replies: dict[int, ev.Result] = field(default_factory=dict)
    pending_appends: list[ev.Append] = field(default_factory=list)
    log: list[ev.LoadedRecord] = field(default_factory=list)  # committed records, all partitions
    tokens: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    auto_commit: bool = True

    def __post_init__(self) -> None:
        self.coord = GroupCoordinator(self.config)
        for p in range(self.config.num_partitions):
            self.send(ev.LoadStarted(p, 0))
            self.send(ev.LoadFinished(p, 0, ()))

    def send(self, event: ev.Event) -> ev.Output:
        out = self.coord.handle(event, self.now_ms)
        self.coord.validate_state()
        for r in out.replies:
            assert r.token not in self.replies, f"token {r.token} answered twice"
            self.replies[r.token] = r.result
        self.pending_appends.extend(out.appends)
        if self.auto_commit:
            self.commit_appends()
        return out

    def commit_appends(self, error: ErrorCode = ErrorCode.NONE) -> None:
        while self.pending_appends:
            a = self.pending_appends.pop(0)
            if error == ErrorCode.NONE:
                self.log.extend(ev.LoadedTxnRecord(a.producer_id, k, v) if a.transactional else (k, v)
                                for k, v in a.records)
            self.send(ev.AppendDone(a.write_id, error))

    def advance(self, ms: int) -> None:
        self.now_ms += ms
        self.send(ev.Tick())

    def token(self) -> int:
        return next(self.tokens)

    def reply(self, token: int) -> ev.Result | None:
        return self.replies.get(token)

    # --- requests -------------------------------------------------------------------------------------

    def join(self, group: str, member_id: str = "", *, instance_id: str | None = None, session_ms: int = 1000,
             rebalance_ms: int = 5000, protocols: tuple[tuple[str, bytes], ...] = RANGE, client: str = "c",
             protocol_type: str = "consumer", require_known: bool = True) -> int:
        t = self.token()
        self.send(ev.JoinGroup(t, group, member_id, instance_id, client, "/127.0.0.1", session_ms, rebalance_ms,
                               protocol_type, protocols, require_known))
        return t

    def new_member(self, group: str, **kw: object) -> tuple[str, int]:
        """MEMBER_ID_REQUIRED round trip, then the real join: (member id, the pending join's token)."""
        first = self.reply(self.join(group, **kw))  # type: ignore[arg-type]
        assert isinstance(first, ev.JoinResult) and first.error == ErrorCode.MEMBER_ID_REQUIRED, first
        return first.member_id, self.join(group, first.member_id, **kw)  # type: ignore[arg-type]

    def sync(self, group: str, generation: int, member_id: str, assignments: tuple[tuple[str, bytes], ...] = (),
             instance_id: str | None = None) -> int:
        t = self.token()
        self.send(ev.SyncGroup(t, group, generation, member_id, instance_id, None, None, assignments))
        return t

    def heartbeat(self, group: str, generation: int, member_id: str, instance_id: str | None = None) -> ev.Result | None:
        t = self.token()
        self.send(ev.Heartbeat(t, group, generation, member_id, instance_id))
        return self.reply(t)

    def commit(self, group: str, offsets: dict[tuple[str, int], int], generation: int = -1, member_id: str = "",
               metadata: str = "") -> int:
        t = self.token()
        self.send(ev.OffsetCommit(t, group, generation, member_id, None, tuple(
            ev.CommittedOffset(tp[0], tp[1], o, -1, metadata) for tp, o in offsets.items())))
        return t

    def txn_commit(self, group: str, offsets: dict[tuple[str, int], int], producer_id: int = 7, epoch: int = 0,
                   generation: int = -1, member_id: str = "", instance_id: str | None = None) -> int:
        t = self.token()
        self.send(ev.TxnOffsetCommit(t, group, producer_id, epoch, generation, member_id, instance_id, tuple(
            ev.CommittedOffset(tp[0], tp[1], o, -1, "") for tp, o in offsets.items())))
        return t

    def marker(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker committed in the partition: logged, and reported as the shell does."""
        self.log.append(ev.LoadedTxnMarker(producer_id, commit))
        self.send(ev.TxnCompleted(partition, producer_id, commit))

    def fetch(self, group: str, partitions: tuple[tuple[str, int], ...] | None = None,
              require_stable: bool = False) -> ev.OffsetFetchResult:
        t = self.token()
        self.send(ev.OffsetFetch(t, group, partitions, require_stable))
        r = self.reply(t)
        assert isinstance(r, ev.OffsetFetchResult)
        return r

    def state(self, group: str) -> str:
        g = self.coord.groups.get(group)
        return g.state.value if g is not None else "Dead"
