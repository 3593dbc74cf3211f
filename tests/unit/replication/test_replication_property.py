"""A leader and two followers driven through random steps against a model controller.

Brokers 1, 2, 3 replicate one partition. Each broker has a PartitionReplica and a ModelLog (one entry
per offset holding its epoch). The controller follows the ZooKeeper-mode rules: it elects leaders
from the live ISR, bumps the leader epoch with every LeaderAndIsr, removes a crashed broker from the
ISR at once, and checks AlterPartition requests (leader epoch, partition epoch, live members). Fetches
and AlterPartition requests travel with delays: a fetch is sent, reaches the leader, and its answer
reaches the follower in separate steps, with anything in between. A crash loses the part of the
broker's log above its high watermark (unflushed data).

Checked after every step:
- every core's ``validate_state``; the ISR of a leader holds the leader;
- a leader's high watermark never goes down during its epoch;
- the high watermark is at most the log end offset of every ISR member, and every ISR member's log
  agrees with the leader's below it;
- what was ever committed (below some leader's high watermark) stays a prefix of the current leader's
  log, so every record acknowledged to an acks=all producer is kept; and each broker's log agrees with
  it below the broker's own high watermark.
"""

from __future__ import annotations

from dataclasses import dataclass

from _replication_model import ModelLog
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.protocol.errors import ErrorCode
from headwater.replication.acks import PendingAcks
from headwater.replication.follower import (
    AppendRecords,
    FetchRequestFields,
    ListLeaderOffsets,
    PartitionFetchResponse,
    Truncate,
    TruncateFullyAndStartAt,
)
from headwater.replication.partition import (
    AlterPartitionProposal,
    AlterPartitionResponse,
    FollowerFetch,
    LeaderAndIsrState,
    PartitionReplica,
    Role,
)
from headwater.replication.types import HighWatermarkUpdate

BROKERS = (1, 2, 3)
LAG_MS = 1_000
BACKOFF_MS = 50
ACK_TIMEOUT_MS = 5_000


@dataclass
class InFlightFetch:
    request: FetchRequestFields
    response: PartitionFetchResponse | None = None
    entries: tuple[int, ...] = ()


class Cluster:
    def __init__(self, min_isr: int) -> None:
        self.now = 0
        self.min_isr = min_isr
        self.alive = set(BROKERS)
        self.logs = {b: ModelLog() for b in BROKERS}
        self.cores = {b: self._new_core(b) for b in BROKERS}
        self.fetches: dict[int, InFlightFetch] = {}
        self.alters: list[tuple[int, AlterPartitionProposal]] = []
        self.acks: dict[int, PendingAcks[int]] = {b: PendingAcks() for b in BROKERS}
        self.produced: dict[int, tuple[int, int]] = {}  # ack key -> (first offset, epoch)
        self.acked: list[tuple[int, int]] = []  # (offset, epoch) acknowledged to acks=all producers
        self.committed: list[int] = []
        self.hw_seen: dict[tuple[int, int], int] = {}
        self.next_key = 0
        # Controller state (the partition's state znode).
        self.leader = 1
        self.leader_epoch = 0
        self.partition_epoch = 0
        self.isr: list[int] = list(BROKERS)
        self._send_all()

    def _new_core(self, broker: int) -> PartitionReplica:
        return PartitionReplica("t", 0, broker, replica_lag_time_max_ms=LAG_MS, min_insync_replicas=self.min_isr,
                                replica_fetch_backoff_ms=BACKOFF_MS)

    # ---- controller -----------------------------------------------------------------------------

    def _state(self) -> LeaderAndIsrState:
        return LeaderAndIsrState(self.leader, self.leader_epoch, tuple(self.isr), self.partition_epoch, BROKERS)

    def _send(self, broker: int) -> None:
        core, log = self.cores[broker], self.logs[broker]
        out = core.apply_leader_and_isr(self._state(), log_end_offset=log.log_end_offset,
                                        latest_epoch=log.latest_epoch(), high_watermark=log.high_watermark,
                                        now_ms=self.now)
        assert out.error == ErrorCode.NONE, out
        if out.fail_pending_acks:
            self.acks[broker].fail_all(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if out.assign_epoch is not None:
            log.assign_epoch(out.assign_epoch.epoch, out.assign_epoch.start_offset)
        self._apply_hw(broker, out.high_watermark)
        fetcher = core.fetcher
        if out.start_fetcher and fetcher is not None and fetcher.initial_truncation is not None:
            log.truncate_to(fetcher.initial_truncation.offset)
            log.high_watermark = fetcher.on_truncated(log.log_end_offset, log.latest_epoch())

    def _new_leader_epoch(self) -> None:
        self.leader_epoch += 1
        self.partition_epoch += 1
        self._send_all()

    def _send_all(self) -> None:
        for b in sorted(self.alive):
            self._send(b)

    def crash(self, broker: int, keep: int) -> None:
        self.alive.discard(broker)
        self.fetches.pop(broker, None)
        self.acks[broker].fail_all(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        log = self.logs[broker]
        # Unflushed data above the local high watermark may be lost.
        log.truncate_to(log.high_watermark + keep)
        self.cores[broker] = self._new_core(broker)
        if broker == self.leader:
            candidates = [b for b in self.isr if b != broker and b in self.alive]
            if candidates:
                self.leader = candidates[0]
                self.isr.remove(broker)
            else:
                self.leader = -1  # offline: the ISR keeps its last member, unclean election is off
        elif broker in self.isr:
            self.isr.remove(broker)
        self._new_leader_epoch()

    def restart(self, broker: int) -> None:
        self.alive.add(broker)
        if self.leader == -1 and broker in self.isr:
            self.leader = broker
            self._new_leader_epoch()
        else:
            self._send(broker)

    def elect(self, broker: int) -> None:
        """A preferred or controlled leader change to another live ISR member."""
        self.leader = broker
        self._new_leader_epoch()

    def deliver_alter(self, index: int) -> None:
        broker, proposal = self.alters.pop(index)
        if proposal.leader_epoch != self.leader_epoch or broker != self.leader:
            response = AlterPartitionResponse(ErrorCode.FENCED_LEADER_EPOCH)
        elif proposal.partition_epoch != self.partition_epoch:
            response = AlterPartitionResponse(ErrorCode.INVALID_UPDATE_VERSION)
        elif any(b not in self.alive for b in proposal.new_isr):
            response = AlterPartitionResponse(ErrorCode.INELIGIBLE_REPLICA)
        else:
            self.isr = list(proposal.new_isr)
            self.partition_epoch += 1
            response = AlterPartitionResponse(ErrorCode.NONE, self.leader, self.leader_epoch, tuple(self.isr),
                                              self.partition_epoch)
        if broker not in self.alive:
            return
        out = self.cores[broker].on_alter_partition_response(proposal, response, self.now)
        if out.retry is not None:
            self.alters.append((broker, out.retry))
        self._apply_hw(broker, out.high_watermark)

    # ---- leader ---------------------------------------------------------------------------------

    def _apply_hw(self, broker: int, update: HighWatermarkUpdate | None) -> None:
        if update is None:
            return
        self.logs[broker].high_watermark = update.new
        core = self.cores[broker]
        for done in self.acks[broker].on_high_watermark(update.new, core.ack_error()):
            if done.error == ErrorCode.NONE:
                first, epoch = self.produced[done.key]
                self.acked.extend((o, epoch) for o in range(first, done.required_offset))

    def produce(self, count: int) -> None:
        b = self.leader
        if b not in self.alive:
            return
        core, log = self.cores[b], self.logs[b]
        if core.check_append(-1) != ErrorCode.NONE:
            return
        first = log.log_end_offset
        log.append_entries([core.leader_epoch] * count)
        self._apply_hw(b, core.on_local_append(log.log_end_offset, self.now))
        check = core.ack_check(log.log_end_offset)
        key = self.next_key
        self.next_key += 1
        self.produced[key] = (first, core.leader_epoch)
        if check.done:
            if check.error == ErrorCode.NONE:
                self.acked.extend((o, core.leader_epoch) for o in range(first, log.log_end_offset))
        else:
            self.acks[b].add(key, log.log_end_offset, self.now + ACK_TIMEOUT_MS)

    def tick(self, dt_ms: int) -> None:
        self.now += dt_ms
        for b in sorted(self.alive):
            core = self.cores[b]
            self.acks[b].expire(self.now)
            proposal = core.check_isr(self.now)
            if proposal is not None:
                self.alters.append((b, proposal))

    # ---- fetches --------------------------------------------------------------------------------

    def send_fetch(self, follower: int) -> None:
        fetcher = self.cores[follower].fetcher
        if follower not in self.alive or follower in self.fetches or fetcher is None:
            return
        request = fetcher.next_request(self.now)
        if request is not None:
            self.fetches[follower] = InFlightFetch(request)

    def arrive(self, follower: int, max_records: int) -> None:
        flight = self.fetches.get(follower)
        if flight is None or flight.response is not None:
            return
        req = flight.request
        target = req.leader_id
        if target not in self.alive:
            fetcher = self.cores[follower].fetcher
            del self.fetches[follower]
            if fetcher is not None:
                fetcher.on_request_failed(req, self.now)
            return
        core, log = self.cores[target], self.logs[target]
        d = core.on_follower_fetch(
            FollowerFetch(follower, req.current_leader_epoch, req.fetch_offset, req.last_fetched_epoch,
                          log_start_offset=0),
            leader_log_start_offset=log.log_start_offset,
            epoch_end_offset=log.end_offset_for_epoch,
            now_ms=self.now,
        )
        if d.read_records:
            flight.entries = tuple(log.records[req.fetch_offset:req.fetch_offset + max_records])
        flight.response = PartitionFetchResponse(d.error, d.high_watermark, d.log_start_offset, d.diverging_epoch,
                                                 len(flight.entries))
        self._apply_hw(target, d.high_watermark_update)
        if d.alter_partition is not None:
            self.alters.append((target, d.alter_partition))

    def deliver(self, follower: int) -> None:
        flight = self.fetches.get(follower)
        if flight is None or flight.response is None:
            return
        del self.fetches[follower]
        fetcher, log = self.cores[follower].fetcher, self.logs[follower]
        if fetcher is None:
            return
        action = fetcher.on_fetch_response(flight.request, flight.response, log_end_offset=log.log_end_offset,
                                           end_offset_for_epoch=log.end_offset_for_epoch, now_ms=self.now)
        if isinstance(action, AppendRecords):
            log.append_entries(list(flight.entries))
            update = fetcher.on_appended(log.log_end_offset, log.latest_epoch())
            log.high_watermark = min(update.high_watermark, log.log_end_offset)
        elif isinstance(action, Truncate):
            log.truncate_to(action.offset)
            log.high_watermark = fetcher.on_truncated(log.log_end_offset, log.latest_epoch())
        elif isinstance(action, ListLeaderOffsets):
            target = action.leader_id
            error = ErrorCode.NOT_LEADER_OR_FOLLOWER
            if target in self.alive:
                error = self.cores[target].check_leader_epoch(action.current_leader_epoch)
            if error != ErrorCode.NONE:
                fetcher.on_leader_offsets_error(error, self.now)
                return
            leader_log = self.logs[target]
            step = fetcher.on_leader_offsets(leader_log_start_offset=leader_log.log_start_offset,
                                             leader_log_end_offset=leader_log.log_end_offset,
                                             log_end_offset=log.log_end_offset, now_ms=self.now)
            if isinstance(step, Truncate):
                log.truncate_to(step.offset)
                log.high_watermark = fetcher.on_truncated(log.log_end_offset, log.latest_epoch())
            assert not isinstance(step, TruncateFullyAndStartAt), "no retention in this model"

    # ---- invariants -----------------------------------------------------------------------------

    def check(self) -> None:
        for b in self.alive:
            self.cores[b].validate_state()
            log = self.logs[b]
            assert 0 <= log.high_watermark <= log.log_end_offset
        for acks in self.acks.values():
            acks.validate_state()
        leader = self.leader
        if leader not in self.alive:
            return
        core, log = self.cores[leader], self.logs[leader]
        assert core.role is Role.LEADER and core.leader_epoch == self.leader_epoch
        hw = core.high_watermark
        assert log.high_watermark == hw
        key = (leader, core.leader_epoch)
        assert hw >= self.hw_seen.get(key, 0), "a leader's high watermark never goes back"
        self.hw_seen[key] = hw
        assert leader in core.isr
        for member in core.isr:
            member_log = self.logs[member]
            assert member in self.alive
            assert hw <= member_log.log_end_offset, f"HW {hw} above ISR member {member}'s log end"
            assert member_log.records[:hw] == log.records[:hw], f"ISR member {member} diverges below the HW"
        # What any leader ever committed stays at the front of the current leader's log.
        n = len(self.committed)
        assert log.records[:n] == self.committed, "a committed record was lost or changed"
        if hw > n:
            self.committed.extend(log.records[n:hw])
        for offset, epoch in self.acked:
            assert offset < len(self.committed) and self.committed[offset] == epoch, "an acknowledged record was lost"
        for b in self.alive:
            blog = self.logs[b]
            upto = min(blog.high_watermark, len(self.committed))
            assert blog.records[:upto] == self.committed[:upto], f"broker {b} diverges below its high watermark"


follower = st.sampled_from(BROKERS)
_round = st.tuples(st.just("round"), follower, st.integers(1, 6))
_produce = st.tuples(st.just("produce"), st.integers(1, 4))
_alter = st.tuples(st.just("alter"), st.integers(0, 3))
_tick = st.tuples(st.just("tick"), st.integers(1, 700))
# Branches are picked about evenly, so the common steps are listed more than once: most schedules
# then commit data, change the ISR and elect leaders instead of mostly crashing.
steps = st.one_of(
    _round, _round, _round, _round, _round, _round,
    _produce, _produce, _produce,
    _alter, _alter, _alter,
    _tick, _tick,
    st.tuples(st.just("send"), follower),
    st.tuples(st.just("arrive"), follower, st.integers(1, 6)),
    st.tuples(st.just("deliver"), follower),
    st.tuples(st.just("crash"), follower, st.integers(0, 3)),
    st.tuples(st.just("restart"), follower),
    st.tuples(st.just("elect"), follower),
)


def run(cluster: Cluster, plan: list[tuple[object, ...]]) -> None:
    cluster.check()
    for step in plan:
        kind = step[0]
        if kind == "produce":
            cluster.produce(int(step[1]))  # type: ignore[call-overload]
        elif kind == "round":
            f = int(step[1])  # type: ignore[call-overload]
            cluster.send_fetch(f)
            cluster.arrive(f, int(step[2]))  # type: ignore[call-overload]
            cluster.deliver(f)
        elif kind == "send":
            cluster.send_fetch(int(step[1]))  # type: ignore[call-overload]
        elif kind == "arrive":
            cluster.arrive(int(step[1]), int(step[2]))  # type: ignore[call-overload]
        elif kind == "deliver":
            cluster.deliver(int(step[1]))  # type: ignore[call-overload]
        elif kind == "tick":
            cluster.tick(int(step[1]))  # type: ignore[call-overload]
        elif kind == "alter":
            if cluster.alters:
                cluster.deliver_alter(int(step[1]) % len(cluster.alters))  # type: ignore[call-overload]
        elif kind == "crash":
            b = int(step[1])  # type: ignore[call-overload]
            # Keep one broker up so the model does not have to restart everything.
            if b in cluster.alive and len(cluster.alive) > 1:
                cluster.crash(b, int(step[2]))  # type: ignore[call-overload]
        elif kind == "restart":
            b = int(step[1])  # type: ignore[call-overload]
            if b not in cluster.alive:
                cluster.restart(b)
        elif kind == "elect":
            b = int(step[1])  # type: ignore[call-overload]
            if b != cluster.leader and b in cluster.isr and b in cluster.alive and cluster.leader != -1:
                cluster.elect(b)
        cluster.check()


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(steps, min_size=30, max_size=150), st.sampled_from((1, 2)))
def test_replication_keeps_committed_data_under_random_schedules(plan: list[tuple[object, ...]], min_isr: int) -> None:
    run(Cluster(min_isr), plan)


def test_steady_state_replicates_everything() -> None:
    """Without faults, fetching in rounds brings every replica to the leader's log and the HW to its end."""
    cluster = Cluster(min_isr=2)
    for _ in range(5):
        cluster.produce(3)
        for _ in range(3):
            for f in (2, 3):
                cluster.send_fetch(f)
                cluster.arrive(f, 10)
                cluster.deliver(f)
            cluster.check()
    leader_log = cluster.logs[1]
    assert leader_log.log_end_offset == 15 and cluster.cores[1].high_watermark == 15
    assert cluster.logs[2].records == cluster.logs[3].records == leader_log.records
    assert len(cluster.acked) == 15 and sorted(cluster.acked) == [(o, 0) for o in range(15)]
