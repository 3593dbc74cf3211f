"""A seeded simulation of a headwater cluster around the sans-IO controller.

Everything runs in one thread from one ``random.Random(seed)``: a fake ZooKeeper (sessions,
ephemeral nodes, versions, czxids, multi with the controller-epoch check), an in-memory network
(per-link FIFO, links picked at random so delivery order across links varies, broker traffic lost
at random), brokers that crash, restart with a new broker epoch, lose their session while still
running ("zombies"), or shut down in a controlled way, controllers that fail over (a new
:class:`Controller` built from the fake ZooKeeper, while the old one may still be running and has
its conditional writes refused), and the real replication core: one
:class:`headwater.replication.partition.PartitionReplica` per broker per partition, driven through its
public API as :class:`headwater.server.replica_manager.ReplicaManager` drives it, with its decisions applied
to a model "disk":

* each replica's log is a list of ``(leader_epoch, record_id)`` entries (the offset is the index) with a
  leader-epoch cache and a high watermark, all durable; the core is volatile (rebuilt after a restart);
* LeaderAndIsr goes through ``apply_leader_and_isr`` (epoch start recorded, acks failed, fetcher started),
  UpdateMetadata sets the ISR-eligible (live) brokers, StopReplica stops the core;
* leaders append and complete acks=all through ``on_local_append``, ``ack_check`` and
  :class:`~headwater.replication.acks.PendingAcks`; followers fetch through the core's
  :class:`~headwater.replication.follower.FollowerFetcher` (``next_request``, ``on_fetch_response``,
  ``on_appended``, ``on_truncated``, ``on_request_failed`` after ``FETCH_RETRY_MS`` without an answer),
  and the leader answers with ``on_follower_fetch`` (divergence, progress, high watermark, ISR expansion);
* ISR shrinks come from the periodic ``check_isr``; proposals go to the controller in one AlterPartition
  at a time per broker (abandoned after ``ALTER_RETRY_MS``) and the answers go to
  ``on_alter_partition_response``;
* the checker requires every acknowledged record on every member of ZooKeeper's ISR, high watermarks
  that never go back and stay within the log, no truncation below a high watermark, and the cores'
  own ``validate_state``;
* reassignments (KIP-455) are started, replaced and cancelled through the API and the legacy
  ``/admin/reassign_partitions`` znode, and :class:`ReassignmentModel` checks ZooKeeper's RS, AR and
  RR after every step against the last accepted request; :meth:`Simulation.settle` ends the
  failures and lets every reassignment finish.

After every step the invariants run (:meth:`Simulation.check` and checks at the point of change);
a violation raises :class:`Violation` naming the seed and the last steps.
"""

from __future__ import annotations

import json
import random
import uuid
from bisect import bisect_right
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from headwater.controller.controller import Controller, not_controller_response
from headwater.controller.effects import (
    AlterPartitionReassignmentsResponse,
    AlterPartitionResponse,
    BrokerRequest,
    ControlledShutdownResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
    ElectLeadersResponse,
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    Response,
    StopReplicaRequest,
    UpdateMetadataRequest,
    ZkOp,
    ZkWrite,
)
from headwater.controller.events import (
    AlterPartitionItem,
    AlterPartitionReassignmentsRequested,
    AlterPartitionReceived,
    AutoRebalanceCheck,
    ControlledShutdownRequested,
    ControllerElected,
    CreateTopicsRequested,
    DeleteTopicsRequested,
    ElectLeadersRequested,
    Event,
    LegacyReassignmentRequested,
    NewTopic,
    Resigned,
    StopReplicaResponseReceived,
)
from headwater.controller.znodes import (
    BROKER_DEFAULTS,
    PATHS,
    LeaderIsr,
    LiveBroker,
    ReplicaAssignment,
    TopicPartition,
    ZkSnapshot,
    Znode,
    decode_live_broker,
    decode_partition_state,
    decode_reassignment_queue,
    decode_topic,
    snapshot_from_znodes,
)
from headwater.metadata import zk
from headwater.metadata.image import BrokerInfo
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
    FollowerFetch,
    LeaderAndIsrState,
    PartitionReplica,
    Role,
)
from headwater.replication.partition import AlterPartitionResponse as IsrAnswer
from headwater.replication.types import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    UNKNOWN_OFFSET,
    EpochEndOffset,
    HighWatermarkUpdate,
)

LAG_MS = 1000            # replica.lag.time.max.ms
FETCH_RETRY_MS = 300     # a fetch with no answer for this long has failed (the fetcher backs off, then retries)
FETCH_BACKOFF_MS = 100   # replica.fetch.backoff.ms
ALTER_RETRY_MS = 600     # an AlterPartition with no answer for this long is sent again
ALTER_BACKOFF_MS = 200   # the replica manager's wait before it resends AlterPartition proposals to retry
SHUTDOWN_ATTEMPTS = 3    # controlled.shutdown.max.retries
FETCH_MAX_ENTRIES = 4
DROP_PROBABILITY = 0.05  # broker-to-broker and broker-to-controller messages; controller requests are reliable
MAX_LIVE_TOPICS = 5


class Violation(AssertionError):
    pass


# --- fake ZooKeeper -----------------------------------------------------------------------------


@dataclass
class _Node:
    data: bytes | None
    version: int
    czxid: int
    owner: int | None = None


class FakeZk:
    """Flat path -> node map with sessions, ephemeral owners, versions and zxids.

    ``apply_fenced`` is the multi ``[check(/controller_epoch, v), op]`` the shell issues for every
    controller write. It also checks, at the moment of each partition-state write, the invariants
    that live in ZooKeeper: leader in ISR, ISR within replicas, one leader per leader epoch.
    """

    def __init__(self) -> None:
        self.nodes: dict[str, _Node] = {}
        self.zxid = 0
        self.next_session = 1
        self.states: dict[TopicPartition, LeaderIsr] = {}
        self.leader_of_epoch: dict[tuple[TopicPartition, int], int] = {}
        self._decoded: dict[str, tuple[bytes, dict[TopicPartition, ReplicaAssignment]]] = {}

    def _zxid(self) -> int:
        self.zxid += 1
        return self.zxid

    def open_session(self) -> int:
        self.next_session += 1
        return self.next_session

    def close_session(self, session: int) -> list[str]:
        gone = [p for p, n in self.nodes.items() if n.owner == session]
        for p in gone:
            del self.nodes[p]
        return gone

    def register_broker(self, info: BrokerInfo, session: int, now_ms: int) -> int:
        path = PATHS.broker(info.broker_id)
        assert path not in self.nodes, path
        czxid = self._zxid()
        reg = zk.BrokerRegistration(info.broker_id, (zk.Endpoint("PLAINTEXT", info.host, info.port),), now_ms, info.rack)
        self.nodes[path] = _Node(zk.encode_broker(reg), 1, czxid, session)
        return czxid

    def registrations(self) -> dict[int, LiveBroker]:
        out = {}
        for path, node in self.nodes.items():
            if path.startswith(PATHS.BROKER_IDS + "/") and node.data:
                b = int(path.rsplit("/", 1)[1])
                out[b] = decode_live_broker(b, node.data, node.czxid)
        return out

    def controller_id(self) -> int | None:
        node = self.nodes.get(PATHS.CONTROLLER)
        return None if node is None or node.data is None else int(json.loads(node.data)["brokerid"])

    def elect(self, broker_id: int, session: int) -> tuple[int, int] | None:
        """``registerControllerAndIncrementControllerEpoch``: create /controller and bump the epoch in one multi."""
        if PATHS.CONTROLLER in self.nodes:
            return None
        epoch_node = self.nodes.get(PATHS.CONTROLLER_EPOCH)
        if epoch_node is None:
            epoch_node = self.nodes[PATHS.CONTROLLER_EPOCH] = _Node(b"0", 0, self._zxid())
        old = int(epoch_node.data or b"0")
        doc = {"version": 2, "brokerid": broker_id, "timestamp": "0", "kraftControllerEpoch": -1}
        self.nodes[PATHS.CONTROLLER] = _Node(json.dumps(doc).encode(), 0, self._zxid(), session)
        epoch_node.data = str(old + 1).encode()
        epoch_node.version += 1
        return old + 1, epoch_node.version

    def snapshot(self) -> ZkSnapshot:
        prefixes = ("/brokers/", "/config/topics/", "/admin/delete_topics/")
        singles = (PATHS.REASSIGN_PARTITIONS, PATHS.REASSIGNMENT_QUEUE, BROKER_DEFAULTS)
        return snapshot_from_znodes({p: Znode(n.data, n.version, n.czxid) for p, n in self.nodes.items()
                                     if p.startswith(prefixes) or p in singles})

    def assignments(self) -> dict[TopicPartition, ReplicaAssignment]:
        """Every partition's assignment in the topic znodes (decoded once per znode content)."""
        out = {}
        for path, node in self.nodes.items():
            if node.data and path.startswith(PATHS.BROKER_TOPICS + "/") and path.count("/") == 3:
                cached = self._decoded.get(path)
                if cached is None or cached[0] is not node.data:
                    name = path.rsplit("/", 1)[1]
                    cached = self._decoded[path] = (node.data, {
                        TopicPartition(name, p): a for p, a in decode_topic(name, node.data).partitions.items()})
                out.update(cached[1])
        return out

    def queue(self) -> dict[TopicPartition, tuple[int, ...]]:
        node = self.nodes.get(PATHS.REASSIGNMENT_QUEUE)
        return {} if node is None else dict(decode_reassignment_queue(node.data))

    def legacy(self) -> dict[tuple[str, int], tuple[int, ...]] | None:
        node = self.nodes.get(PATHS.REASSIGN_PARTITIONS)
        return None if node is None else zk.decode_reassign_partitions(node.data or b"")

    def apply_fenced(self, w: ZkWrite) -> str | None:
        """None if applied; otherwise why the multi failed ("epoch" for the fence)."""
        epoch_node = self.nodes.get(PATHS.CONTROLLER_EPOCH)
        if epoch_node is None or epoch_node.version != w.controller_epoch_version:
            return "epoch"
        node = self.nodes.get(w.path)
        if w.op is ZkOp.CREATE:
            if node is not None:
                return "exists"
            self.nodes[w.path] = _Node(w.data, 0, self._zxid())
        elif w.op is ZkOp.SET:
            if node is None:
                return "missing"
            if w.expected_version >= 0 and node.version != w.expected_version:
                return "version"
            node.data = w.data
            node.version += 1
        else:
            if node is None:
                return "missing"
            children = [p for p in self.nodes if p.startswith(w.path + "/")]
            if children and not w.recursive:
                return "not empty"
            for p in [*children, w.path]:
                del self.nodes[p]
            if w.path.startswith("/brokers/topics/"):
                topic = w.path.split("/")[3]
                self.states = {tp: s for tp, s in self.states.items() if tp.topic != topic}
        if w.op is not ZkOp.DELETE and w.path.endswith("/state"):
            self._check_state_write(w.path)
        return None

    def _check_state_write(self, path: str) -> None:
        parts = path.split("/")
        tp = TopicPartition(parts[3], int(parts[5]))
        node = self.nodes[path]
        assert node.data is not None
        state = decode_partition_state(tp, node.data, node.version)
        topic_node = self.nodes.get(f"/brokers/topics/{tp.topic}")
        if topic_node is None or topic_node.data is None:
            raise Violation(f"state written for {tp} without a topic znode")
        replicas = decode_topic(tp.topic, topic_node.data).partitions[tp.partition].replicas
        if not state.isr or len(set(state.isr)) != len(state.isr) or not set(state.isr) <= set(replicas):
            raise Violation(f"bad ISR in ZooKeeper for {tp}: {state} replicas {replicas}")
        if state.leader != -1 and state.leader not in state.isr:
            raise Violation(f"leader outside the ISR in ZooKeeper for {tp}: {state}")
        old = self.states.get(tp)
        if old is not None and state.leader_epoch < old.leader_epoch:
            raise Violation(f"leader epoch went back in ZooKeeper for {tp}: {old} -> {state}")
        key = (tp, state.leader_epoch)
        if self.leader_of_epoch.setdefault(key, state.leader) != state.leader:
            raise Violation(f"two leaders for {tp} in leader epoch {state.leader_epoch}: "
                            f"{self.leader_of_epoch[key]} and {state.leader}")
        self.states[tp] = state


# --- reassignments -------------------------------------------------------------------------------


@dataclass
class Expected:
    """What the last accepted request says a partition must become: ``target``, or ``original`` after a cancel."""

    original: frozenset[int]
    target: tuple[int, ...] | None


class ReassignmentModel:
    """The reassignment rules, checked on ZooKeeper's topic znodes after every step.

    While a partition reassigns: RS - AR is its original set (kept across replacements), RS - RR its
    last accepted target, and RS = TRS + (ORS - TRS), AR = TRS - ORS, RR = ORS - TRS. Once done: RS is
    the last target, or the original set after a cancel.
    """

    def __init__(self) -> None:
        self.expected: dict[TopicPartition, Expected] = {}
        self.requests: Counter[str] = Counter()
        self.reassigning: set[TopicPartition] = set()

    def accepted(self, tp: TopicPartition, before: ReplicaAssignment, target: tuple[int, ...] | None) -> None:
        known = self.expected.get(tp)
        original = frozenset(before.origin_replicas) if known is None or before.is_being_reassigned else None
        if original is None or not before.is_being_reassigned:
            original = frozenset(before.replicas)
        self.expected[tp] = Expected(original, target)

    def check(self, assignments: dict[TopicPartition, ReplicaAssignment], gone: set[str],
              queue: dict[TopicPartition, tuple[int, ...]] | None = None) -> None:
        """``queue``: ZooKeeper's reassignment queue. A queued partition is not reassigning, still has its
        original set and waits with the last accepted target."""
        queue = queue or {}
        for tp in [tp for tp in self.expected if tp.topic in gone]:
            del self.expected[tp]
        now = {tp for tp, a in assignments.items() if a.is_being_reassigned}
        self.requests["completed"] += len(self.reassigning - now)
        self.reassigning = now
        for tp, exp in self.expected.items():
            a = assignments.get(tp)
            if a is None:
                continue
            if a.is_being_reassigned:
                ors, trs = a.origin_replicas, a.target_replicas
                if frozenset(ors) != exp.original:
                    raise Violation(f"{tp}: original set {sorted(exp.original)} became {ors} in {a}")
                if exp.target is None or trs != exp.target:
                    raise Violation(f"{tp}: reassigning to {trs}, the last request said {exp.target}: {a}")
                if ReplicaAssignment(ors).reassign_to(trs) != a:
                    raise Violation(f"{tp}: RS/AR/RR break RS = TRS + (ORS - TRS): {a}")
            elif tp in queue:
                if frozenset(a.replicas) != exp.original:
                    raise Violation(f"{tp}: queued, but {a.replicas} is not the original set {sorted(exp.original)}")
                if queue[tp] != exp.target:
                    raise Violation(f"{tp}: queued with target {queue[tp]}, the last request said {exp.target}")
            elif exp.target is None and frozenset(a.replicas) != exp.original:
                raise Violation(f"{tp}: cancelled, but {a.replicas} is not the original set {sorted(exp.original)}")
            elif exp.target is not None and a.replicas != exp.target:
                raise Violation(f"{tp}: reassignment to {exp.target} ended at {a.replicas}")


# --- replicas: the real replication core on a model "disk" ---------------------------------------


@dataclass
class Replica:
    """One partition on one broker: a :class:`PartitionReplica` (volatile, rebuilt after a restart) and the
    log it decides on, as :class:`headwater.server.replica_manager.ReplicaManager` applies its decisions to
    a ``PartitionLog``.

    The log is a list of ``(leader_epoch, record_id)`` entries (the offset is the index) with a leader-epoch
    cache that follows ``headwater.storage.epochs.LeaderEpochCache``; log, cache and high watermark are
    durable (they survive a crash).
    """

    tp: TopicPartition
    # durable: survives a crash
    log: list[tuple[int, int]] = field(default_factory=list)
    epochs: list[tuple[int, int]] = field(default_factory=list)   # (epoch, start offset), both increasing
    hw: int = 0
    # for the checker
    hw_floor: int = 0
    truncations: int = 0
    checked: int = 0
    checked_at_truncation: int = 0
    # volatile: lost in a crash
    core: PartitionReplica | None = None
    acks: PendingAcks[tuple[int, int]] = field(default_factory=PendingAcks)   # keys (offset, record id)
    fetch_inflight: FetchRequestFields | None = None
    fetch_sent_ms: int = 0

    def reset_volatile(self) -> None:
        self.core = None
        self.acks = PendingAcks()
        self.fetch_inflight = None

    @property
    def is_leader(self) -> bool:
        return self.core is not None and self.core.is_leader

    @property
    def leader_epoch(self) -> int:
        return -1 if self.core is None else self.core.leader_epoch

    # the log's leader-epoch cache (``LeaderEpochCache`` rules, in memory)

    def latest_epoch(self) -> int | None:
        return self.epochs[-1][0] if self.epochs else None

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        if epoch < 0 or (self.epochs and self.epochs[-1][0] == epoch and start_offset >= self.epochs[-1][1]):
            return
        self.epochs = [(e, s) for e, s in self.epochs if e < epoch and s < start_offset]
        self.epochs.append((epoch, start_offset))

    def append(self, entries: Iterable[tuple[int, int]]) -> None:
        for entry in entries:
            self.assign_epoch(entry[0], len(self.log))
            self.log.append(entry)

    def truncate_to(self, offset: int) -> None:
        if offset >= len(self.log):
            # As PartitionLog.truncate_to (and Kafka's UnifiedLog.truncateTo): nothing to cut, but an
            # epoch begun at the log end by a leader that never wrote goes, or its fetches would name
            # it and meet the same divergence forever (seeds 5, 79 and 84 never settled without this).
            self.epochs = [(e, s) for e, s in self.epochs if s < len(self.log)]
            return
        del self.log[offset:]
        self.epochs = [(e, s) for e, s in self.epochs if s < offset]
        self.hw = min(self.hw, offset)
        self.truncations += 1

    def end_offset_for_epoch(self, requested: int) -> tuple[int, int]:
        """``LeaderEpochCache.end_offset_for``: (largest epoch <= requested, where the next one starts)."""
        if requested == UNDEFINED_EPOCH or not self.epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested == self.epochs[-1][0]:
            return requested, len(self.log)
        epochs = [e for e, _ in self.epochs]
        higher = bisect_right(epochs, requested)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested, self.epochs[0][1]
        return epochs[higher - 1], self.epochs[higher][1]


@dataclass
class Broker:
    broker_id: int
    alive: bool = False
    session: int | None = None
    broker_epoch: int = -1
    controller_epoch_seen: int = 0
    replicas: dict[TopicPartition, Replica] = field(default_factory=dict)
    shutdown_attempts: int | None = None
    shutdown_waiting: bool = False
    # Kafka's AlterPartitionManager (the replica manager's AlterPartition loop): proposals queue per
    # partition, one request is in flight; answers to abandoned requests are ignored.
    alter_queue: dict[TopicPartition, AlterPartitionProposal] = field(default_factory=dict)
    alter_inflight: tuple[int, int] | None = None
    alter_proposals: dict[TopicPartition, AlterPartitionProposal] = field(default_factory=dict)
    alter_retry_ms: int = 0     # after a batch with retries, the next request waits until then

    @property
    def info(self) -> BrokerInfo:
        return BrokerInfo(self.broker_id, f"broker{self.broker_id}", 9090 + self.broker_id)

    def reset_volatile(self) -> None:
        for r in self.replicas.values():
            r.reset_volatile()
        self.alter_queue, self.alter_inflight, self.alter_proposals, self.alter_retry_ms = {}, None, {}, 0


# --- messages -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToController:
    """A request on the broker-to-controller channel, which is bound to one controller (``controller_epoch``)."""

    event: Event
    request_id: int = 0
    controller_epoch: int = -1


@dataclass(frozen=True)
class FromController:
    response: Response
    request_id: int = 0


@dataclass(frozen=True)
class Fetch:
    tp: TopicPartition
    request: FetchRequestFields
    broker_epoch: int


@dataclass(frozen=True)
class FetchReply:
    tp: TopicPartition
    request: FetchRequestFields
    error: ErrorCode = ErrorCode.NONE
    diverging: EpochEndOffset | None = None
    entries: tuple[tuple[int, int], ...] = ()
    hw: int = UNKNOWN_OFFSET


Payload = BrokerRequest | ToController | FromController | Fetch | FetchReply


@dataclass(frozen=True)
class Envelope:
    src: int
    dst: int
    payload: Payload


# --- the simulation -----------------------------------------------------------------------------


class Simulation:
    def __init__(self, seed: int, n_brokers: int = 4,
                 reassignments: list[tuple[int, str, int, tuple[int, ...]]] | None = None,
                 max_moves: int | None = None, operator_elections: bool = True) -> None:
        """``reassignments``: (step, kind, pick, target) to run at those steps instead of random ones;
        kind is "alter", "replace" (an alter of a partition that is reassigning or queued, if any) or
        "cancel". ``max_moves``: ``reassignment.max.concurrent.moves.per.broker`` in the cluster-wide
        broker defaults; no broker may ever be in AR or RR of more ongoing reassignments than that.
        ``operator_elections``: ElectLeaders PREFERRED and the automatic rebalance's checks among the
        random actions (the pinned seeds replay the action sequence they were found with, without them)."""
        self.seed = seed
        self.rng = random.Random(seed)
        self.zk = FakeZk()
        self.max_moves = max_moves
        if max_moves is not None:
            config = zk.encode_config({"reassignment.max.concurrent.moves.per.broker": str(max_moves)})
            self.zk.nodes[BROKER_DEFAULTS] = _Node(config, 0, self.zk._zxid())
        self.now_ms = 0
        self.brokers = {b: Broker(b) for b in range(1, n_brokers + 1)}
        self.controllers: dict[int, Controller] = {}
        self.links: dict[tuple[int, int], deque[Envelope]] = {}
        self.broker_change_pending = False
        self.topics: dict[str, int] = {}          # live topics -> partition count
        self.deleted: set[str] = set()
        self.acked: dict[TopicPartition, list[tuple[int, int]]] = {}
        self.acked_at: dict[TopicPartition, dict[int, int]] = {}
        self.leader_of_epoch: dict[tuple[TopicPartition, int], int] = {}
        self.next_record = 0
        self.next_request = 0
        self.next_topic = 0
        self.trace: deque[str] = deque(maxlen=50)
        self.stats: Counter[str] = Counter()
        self.step_no = -1
        self.model = ReassignmentModel()
        self.scripted = {step: (kind, pick, target) for step, kind, pick, target in reassignments or ()}
        self.actions: list[tuple[Callable[[], None], float]] = [
            (self.deliver, 40), (self.produce, 12), (self.fetch_tick, 14), (self.leader_tick, 6),
            (self.advance_time, 12), (self.controller_watch, 6), (self.elect, 4), (self.crash, 1.2),
            (self.expire_session, 1.5), (self.restart, 2.5), (self.zombie_reconnect, 2.5),
            (self.begin_controlled_shutdown, 1), (self.shutdown_tick, 3), (self.create_topic, 1.5),
            (self.delete_topic, 0.3), (self.late_controller_event, 1),
        ]
        if reassignments is None:
            self.actions += [(self.reassign, 2), (self.legacy_reassign, 0.3)]
        if operator_elections:
            self.actions.append((self.elect_preferred, 1))

    # --- driver ---------------------------------------------------------------------------------

    def log(self, text: str) -> None:
        self.trace.append(f"[{self.step_no}] t={self.now_ms} {text}")

    def fail(self, text: str) -> Violation:
        trace = "\n  ".join(self.trace)
        return Violation(f"seed {self.seed}, step {self.step_no}: {text}\n  last steps:\n  {trace}")

    def run(self, steps: int) -> Simulation:
        try:
            for b in self.brokers.values():
                self._start(b)
            self.elect()
            for _ in range(2):
                self.create_topic()
            self.check()
            funcs = [f for f, _ in self.actions]
            weights = [w for _, w in self.actions]
            for self.step_no in range(steps):
                if self.step_no in self.scripted:
                    self.reassign(*self.scripted[self.step_no])
                self.rng.choices(funcs, weights)[0]()
                self.check()
        except Violation as err:
            if "last steps" in str(err):
                raise
            raise self.fail(str(err)) from None
        except AssertionError as err:
            raise self.fail(f"assertion: {err}") from err
        return self

    # --- plumbing -------------------------------------------------------------------------------

    def send(self, src: int, dst: int, payload: Payload) -> None:
        self.links.setdefault((src, dst), deque()).append(Envelope(src, dst, payload))

    def send_to_controller(self, b: Broker, event: Event) -> int:
        self.next_request += 1
        ctl = self.zk.controller_id()
        if ctl is not None:
            epoch = int(self.zk.nodes[PATHS.CONTROLLER_EPOCH].data or b"0")
            self.send(b.broker_id, ctl, ToController(event, self.next_request, epoch))
        return self.next_request

    def active_controller(self) -> tuple[int, Controller] | None:
        holder = self.zk.controller_id()
        ctl = self.controllers.get(holder) if holder is not None else None
        return (holder, ctl) if holder is not None and ctl is not None and ctl.active else None

    def run_controller(self, broker_id: int, event: Event) -> Response | None:
        """The shell's loop: handle, apply each write fenced (then to the cache), then send."""
        ctl = self.controllers.get(broker_id)
        if ctl is None:
            return not_controller_response(event)
        adopt = isinstance(event, ControllerElected | LegacyReassignmentRequested)
        before_legacy = self.zk.legacy() if adopt else None
        before = self.zk.assignments() if adopt else {}
        result = ctl.handle(event)
        for w in result.writes:
            why = self.zk.apply_fenced(w)
            if why == "epoch":
                self.stats["fenced_writes"] += 1
                self.log(f"controller {broker_id} fenced on {w.path}; resigns")
                ctl.handle(Resigned())
                return not_controller_response(event)
            if why is not None:
                raise self.fail(f"controller {broker_id} holds the epoch but its write failed ({why}): {w}")
            ctl.apply(w)
        ctl.validate_state()
        for req in result.requests:
            self.send(broker_id, req.broker_id, req)
        if result.writes and self.zk.controller_id() == broker_id:
            self.check_cache(ctl)
        if adopt:
            self._adopt_legacy(before_legacy, before)
        return result.response

    def check_cache(self, ctl: Controller) -> None:
        """The active controller's cache says what ZooKeeper says."""
        snap = self.zk.snapshot()
        if dict(ctl.states) != dict(snap.states):
            diff = {tp: (ctl.states.get(tp), snap.states.get(tp)) for tp in set(ctl.states) | set(snap.states)
                    if ctl.states.get(tp) != snap.states.get(tp)}
            raise self.fail(f"controller cache differs from ZooKeeper: {diff}")
        if dict(ctl.topics) != dict(snap.topics):
            raise self.fail("controller topics differ from ZooKeeper")
        if ctl.legacy_reassignment != snap.reassign_partitions:
            raise self.fail(f"controller's {PATHS.REASSIGN_PARTITIONS} differs: {ctl.legacy_reassignment}")
        if list(ctl.queued.items()) != list(snap.reassignment_queue or ()):
            raise self.fail(f"controller's {PATHS.REASSIGNMENT_QUEUE} differs: {ctl.queued}")

    # --- broker lifecycle -----------------------------------------------------------------------

    def _start(self, b: Broker) -> None:
        """brokerStartup: recover logs (they are durable here), start replicas, register the id last."""
        b.alive = True
        b.controller_epoch_seen = 0
        b.reset_volatile()
        b.shutdown_attempts = None
        self._register(b)

    def _register(self, b: Broker) -> None:
        b.session = self.zk.open_session()
        b.broker_epoch = self.zk.register_broker(b.info, b.session, self.now_ms)
        self.broker_change_pending = True
        self.log(f"broker {b.broker_id} registered with epoch {b.broker_epoch}")

    def _stop_process(self, b: Broker, how: str) -> None:
        b.alive = False
        b.reset_volatile()
        for key in [k for k in self.links if k[1] == b.broker_id]:
            del self.links[key]
        self.controllers.pop(b.broker_id, None)
        b.shutdown_attempts = None
        self.stats[how] += 1
        self.log(f"broker {b.broker_id} {how}")

    def _close_session(self, b: Broker) -> None:
        if b.session is None:
            return
        gone = self.zk.close_session(b.session)
        b.session = None
        if any(p.startswith(PATHS.BROKER_IDS) for p in gone):
            self.broker_change_pending = True
        self.log(f"session of broker {b.broker_id} closed: {sorted(gone)}")

    def crash(self) -> None:
        alive = [b for b in self.brokers.values() if b.alive]
        if alive:
            self._stop_process(self.rng.choice(alive), "crashed")

    def expire_session(self) -> None:
        """A crashed broker's session times out, or a running broker loses its session (a zombie)."""
        candidates = [b for b in self.brokers.values() if b.session is not None]
        if candidates:
            b = self.rng.choice(candidates)
            if b.alive:
                self.stats["zombies"] += 1
            self._close_session(b)

    def restart(self) -> None:
        dead = [b for b in self.brokers.values() if not b.alive]
        if dead:
            b = self.rng.choice(dead)
            self._close_session(b)
            self.stats["restarts"] += 1
            self._start(b)

    def zombie_reconnect(self) -> None:
        """A running broker notices its session expired: its controller resigns; it registers again."""
        zombies = [b for b in self.brokers.values() if b.alive and b.session is None]
        if zombies:
            b = self.rng.choice(zombies)
            ctl = self.controllers.pop(b.broker_id, None)
            if ctl is not None:
                ctl.handle(Resigned())
            self._register(b)

    def begin_controlled_shutdown(self) -> None:
        candidates = [b for b in self.brokers.values() if b.alive and b.session is not None and b.shutdown_attempts is None]
        if candidates:
            b = self.rng.choice(candidates)
            b.shutdown_attempts = 0
            self.log(f"broker {b.broker_id} begins controlled shutdown")
            self._send_shutdown(b)

    def _send_shutdown(self, b: Broker) -> None:
        b.shutdown_waiting = True
        self.send_to_controller(b, ControlledShutdownRequested(b.broker_id, b.broker_epoch))

    def shutdown_tick(self) -> None:
        for b in self.brokers.values():
            if b.alive and b.shutdown_attempts is not None and (not b.shutdown_waiting or self.rng.random() < 0.2):
                b.shutdown_attempts += 1
                if b.shutdown_attempts >= SHUTDOWN_ATTEMPTS:
                    self._exit_cleanly(b)
                else:
                    self._send_shutdown(b)

    def _exit_cleanly(self, b: Broker) -> None:
        self._stop_process(b, "shut down")
        self._close_session(b)

    # --- controller -----------------------------------------------------------------------------

    def elect(self) -> None:
        if self.zk.controller_id() is not None:
            return
        candidates = [b for b in self.brokers.values() if b.alive and b.session is not None]
        if not candidates:
            return
        b = self.rng.choice(candidates)
        assert b.session is not None
        won = self.zk.elect(b.broker_id, b.session)
        assert won is not None
        self.controllers[b.broker_id] = Controller(b.broker_id)
        self.broker_change_pending = False
        self.stats["elections"] += 1
        if self.zk.queue():
            self.stats["elections_with_queue"] += 1
        self.log(f"broker {b.broker_id} elected controller, epoch {won[0]}")
        self.run_controller(b.broker_id, ControllerElected(won[0], won[1], self.zk.snapshot()))

    def controller_watch(self) -> None:
        active = self.active_controller()
        if active is None or not self.broker_change_pending:
            return
        holder, ctl = active
        self.broker_change_pending = False
        for event in ctl.broker_change_events(self.zk.registrations()):
            self.log(f"controller {holder} <- {event}")
            self.run_controller(holder, event)

    def late_controller_event(self) -> None:
        """A controller that lost its session still works through a queued broker-change event.

        Its view is stale and its epoch version old: whatever it decides must be refused by ZooKeeper.
        """
        holder = self.zk.controller_id()
        stale = [b for b, ctl in sorted(self.controllers.items()) if ctl.active and b != holder]
        if not stale:
            return
        b = self.rng.choice(stale)
        ctl = self.controllers[b]
        for event in ctl.broker_change_events(self.zk.registrations()):
            self.log(f"stale controller {b} <- {event}")
            self.run_controller(b, event)
            if not ctl.active:
                break

    def create_topic(self) -> None:
        active = self.active_controller()
        if active is None or len(self.topics) >= MAX_LIVE_TOPICS:
            return
        holder, _ = active
        name = f"t{self.next_topic}"
        self.next_topic += 1
        partitions, rf = self.rng.randint(1, 3), self.rng.randint(1, 3)
        event = CreateTopicsRequested((NewTopic(name, uuid.UUID(int=self.rng.getrandbits(128)), partitions, rf),),
                                      start_index=self.rng.randrange(16), shift=self.rng.randrange(16))
        resp = self.run_controller(holder, event)
        assert isinstance(resp, CreateTopicsResponse)
        self.log(f"create {name} p={partitions} rf={rf}: {resp.topics[0].error.name}")
        if resp.topics[0].error == ErrorCode.NONE:
            self.topics[name] = partitions

    # --- reassignments --------------------------------------------------------------------------

    def _live_partitions(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t in sorted(self.topics) for p in range(self.topics[t])]

    def reassign(self, kind: str | None = None, pick: int | None = None, target: tuple[int, ...] | None = None) -> None:
        """An AlterPartitionReassignments request: a new target, a replacement of an ongoing one, or a cancel."""
        active = self.active_controller()
        parts = self._live_partitions()
        if active is None or not parts:
            return
        holder, ctl = active
        ongoing = sorted(set(ctl.reassignments()) | set(ctl.queued))
        if kind is None:
            kind = self.rng.choice(["alter", "alter", "replace", "replace", "cancel"])
            pick = self.rng.randrange(1 << 16)
            size = self.rng.randint(1, min(3, len(self.brokers)))
            target = tuple(self.rng.sample(sorted(self.brokers), size))
        assert pick is not None and target is not None
        pool = ongoing if kind in ("replace", "cancel") and ongoing else parts
        tp = pool[pick % len(pool)]
        replicas = None if kind == "cancel" else target
        before = self.zk.assignments().get(tp)
        resp = self.run_controller(holder, AlterPartitionReassignmentsRequested(((tp.topic, tp.partition, replicas),)))
        assert isinstance(resp, AlterPartitionReassignmentsResponse)
        code = resp.partitions[0].error if resp.partitions else resp.error
        self.model.requests[f"{kind}_{code.name}"] += 1
        self.log(f"reassign {tp} -> {replicas}: {code.name}")
        if code == ErrorCode.NONE:
            assert before is not None
            self.model.accepted(tp, before, replicas)

    def legacy_reassign(self) -> None:
        """A tool writes /admin/reassign_partitions (only when absent, as the old tool did); the controller reacts."""
        parts = self._live_partitions()
        if self.zk.legacy() is not None or not parts:
            return
        chosen = self.rng.sample(parts, min(len(parts), self.rng.randint(1, 2)))
        content = {(tp.topic, tp.partition): tuple(self.rng.sample(sorted(self.brokers), self.rng.randint(1, 3)))
                   for tp in chosen}
        self.zk.nodes[PATHS.REASSIGN_PARTITIONS] = _Node(zk.encode_reassign_partitions(content), 0, self.zk._zxid())
        self.model.requests["legacy"] += 1
        self.log(f"legacy reassignment {content}")
        active = self.active_controller()
        if active is not None:
            self.run_controller(active[0], LegacyReassignmentRequested(content))

    def elect_preferred(self) -> None:
        """The automatic rebalance's check, or an operator's ElectLeaders PREFERRED for some partitions or
        all. (UNCLEAN is left out: it may lose acknowledged records, which the invariants forbid.)"""
        active = self.active_controller()
        if active is None:
            return
        holder, _ = active
        if self.rng.random() < 0.5:
            self.run_controller(holder, AutoRebalanceCheck())
            self.stats["rebalance_checks"] += 1
            return
        parts = self._live_partitions()
        chosen = (None if not parts or self.rng.random() < 0.3 else
                  tuple((tp.topic, tp.partition) for tp in self.rng.sample(parts, min(len(parts), 2))))
        resp = self.run_controller(holder, ElectLeadersRequested(chosen))
        assert isinstance(resp, ElectLeadersResponse)
        for r in resp.partitions:
            self.stats[f"elect_{r.error.name}"] += 1
        self.log(f"elect leaders {chosen}: {[(r.topic, r.partition, r.error.name) for r in resp.partitions]}")

    def _adopt_legacy(self, content: dict[tuple[str, int], tuple[int, ...]] | None,
                      before: dict[TopicPartition, ReplicaAssignment]) -> None:
        """Entries of the legacy znode the controller acted on become the partitions' expected targets."""
        now = self.zk.assignments()
        for (topic, partition), target in sorted((content or {}).items()):
            tp = TopicPartition(topic, partition)
            started = tp in now and now[tp].target_replicas == target
            if tp in before and (started or self.zk.queue().get(tp) == target) and topic in self.topics:
                self.model.accepted(tp, before[tp], target)

    def reassigning(self) -> list[TopicPartition]:
        return sorted(tp for tp, a in self.zk.assignments().items() if a.is_being_reassigned and tp.topic in self.topics)

    def settle(self, max_rounds: int = 400) -> Simulation:
        """No more failures: every broker comes back and every reassignment finishes; then the final check.

        Each round brings dead brokers back, lets the controller see them, drains the network (still lossy),
        lets every broker fetch and every leader tick, and advances the clock, so that retries no longer
        outrun the queues."""
        try:
            for _ in range(max_rounds):
                self.step_no += 1
                for b in sorted(self.brokers.values(), key=lambda b: b.broker_id):
                    if not b.alive:
                        self._close_session(b)
                        self._start(b)
                    elif b.session is None:
                        self._register(b)
                self.elect()
                self.controller_watch()
                for _ in range(2000):
                    if not any(self.links.values()):
                        break
                    self.deliver()
                for _ in range(2 * len(self.brokers)):
                    self.fetch_tick()
                    self.leader_tick()
                self.shutdown_tick()
                self.advance_time()
                self.check()
                if (not self.reassigning() and self.zk.legacy() is None and not self.zk.queue()
                        and self.active_controller() is not None):
                    break
            else:
                raise self.fail(f"reassignments never finished: {self.reassigning()} queued {self.zk.queue()}")
            self.model.check(self.zk.assignments(), self.deleted)
        except Violation as err:
            if "last steps" in str(err):
                raise
            raise self.fail(str(err)) from None
        return self

    def delete_topic(self) -> None:
        active = self.active_controller()
        if active is None or not self.topics:
            return
        name = self.rng.choice(sorted(self.topics))
        resp = self.run_controller(active[0], DeleteTopicsRequested((name,)))
        assert isinstance(resp, DeleteTopicsResponse)
        self.log(f"delete {name}: {resp.topics[0].error.name}")
        if resp.topics[0].error == ErrorCode.NONE:
            del self.topics[name]
            self.deleted.add(name)

    # --- network delivery -----------------------------------------------------------------------

    def deliver(self) -> None:
        busy = sorted(k for k, q in self.links.items() if q)
        if not busy:
            return
        env = self.links[self.rng.choice(busy)].popleft()
        dst = self.brokers[env.dst]
        reliable = isinstance(env.payload, LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest) or (
            isinstance(env.payload, ToController) and isinstance(env.payload.event, StopReplicaResponseReceived))
        if not dst.alive or (not reliable and self.rng.random() < DROP_PROBABILITY):
            self.stats["dropped"] += 1
            return
        p = env.payload
        if isinstance(p, LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest):
            self.on_control_request(dst, env.src, p)
        elif isinstance(p, ToController):
            ctl = self.controllers.get(dst.broker_id)
            if isinstance(p.event, StopReplicaResponseReceived) or (ctl is not None and ctl.epoch == p.controller_epoch):
                resp = self.run_controller(dst.broker_id, p.event)
            else:
                resp = not_controller_response(p.event)
            if resp is not None:
                self.send(dst.broker_id, env.src, FromController(resp, p.request_id))
        elif isinstance(p, FromController):
            self.on_controller_response(dst, p)
        elif isinstance(p, Fetch):
            self.on_fetch(dst, env.src, p)
        else:
            self.on_fetch_reply(dst, env.src, p)

    def on_control_request(self, b: Broker, src: int, req: BrokerRequest) -> None:
        if req.controller_epoch < b.controller_epoch_seen:
            self.stats["stale_controller_epoch"] += 1
            return
        if req.broker_epoch < b.broker_epoch:
            self.stats["stale_broker_epoch"] += 1
            return
        b.controller_epoch_seen = req.controller_epoch
        if isinstance(req, LeaderAndIsrRequest):
            for part in req.partitions:
                self.become(b, part)
        elif isinstance(req, UpdateMetadataRequest):
            # ReplicaManager.set_live_brokers: in ZooKeeper mode the live brokers may join an ISR.
            live = [info.broker_id for info in req.live_brokers]
            for r in b.replicas.values():
                if r.core is not None and r.core.is_leader:
                    self.apply_hw(r, r.core.set_isr_eligible(live, self.now_ms))
        elif isinstance(req, StopReplicaRequest):
            done = []
            for sp in req.partitions:
                r = b.replicas.get(sp.tp)
                if sp.delete:
                    if r is not None and r.core is not None:
                        r.core.stop()
                    b.replicas.pop(sp.tp, None)
                    done.append((sp.tp, ErrorCode.NONE))
                elif r is not None and r.core is not None and (sp.leader_epoch == -2 or sp.leader_epoch >= r.leader_epoch):
                    out = r.core.stop()
                    if out.fail_pending_acks:
                        r.acks.fail_all(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                    r.fetch_inflight = None
            if done:
                self.send(b.broker_id, src, ToController(StopReplicaResponseReceived(b.broker_id, tuple(done))))

    def become(self, b: Broker, p: LeaderAndIsrPartition) -> None:
        """``ReplicaManager.become``: the core decides; its effects are applied to the log."""
        r = b.replicas.setdefault(p.tp, Replica(p.tp))
        if r.core is None:
            r.core = PartitionReplica(p.tp.topic, p.tp.partition, b.broker_id, replica_lag_time_max_ms=LAG_MS,
                                      replica_fetch_backoff_ms=FETCH_BACKOFF_MS)
        state = LeaderAndIsrState(p.leader, p.leader_epoch, p.isr, p.partition_epoch, p.replicas,
                                  p.adding_replicas, p.removing_replicas, p.is_new)
        out = r.core.apply_leader_and_isr(state, log_end_offset=len(r.log), latest_epoch=r.latest_epoch(),
                                          high_watermark=r.hw, now_ms=self.now_ms)
        if out.error != ErrorCode.NONE:
            self.stats[f"become_{out.error.name}"] += 1
            return
        if out.role is Role.LEADER:
            key = (p.tp, p.leader_epoch)
            if self.leader_of_epoch.setdefault(key, b.broker_id) != b.broker_id:
                raise self.fail(f"brokers {self.leader_of_epoch[key]} and {b.broker_id} both lead {p.tp} "
                                f"in leader epoch {p.leader_epoch}")
            if self.zk.leader_of_epoch.get(key) != b.broker_id:
                raise self.fail(f"broker {b.broker_id} leads {p.tp} in epoch {p.leader_epoch}, ZooKeeper never said so")
            self.stats["became_leader"] += 1
        if out.assign_epoch is not None:
            r.assign_epoch(out.assign_epoch.epoch, out.assign_epoch.start_offset)
        self.apply_hw(r, out.high_watermark)
        if out.fail_pending_acks:
            r.acks.fail_all(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if out.start_fetcher or out.stop_fetcher:
            r.fetch_inflight = None
        fetcher = r.core.fetcher
        if out.start_fetcher and fetcher is not None and fetcher.initial_truncation is not None:
            self.truncate(b, r, fetcher.initial_truncation.offset)
            r.hw = fetcher.on_truncated(len(r.log), r.latest_epoch())

    def on_controller_response(self, b: Broker, msg: FromController) -> None:
        resp = msg.response
        if isinstance(resp, ControlledShutdownResponse):
            if b.shutdown_attempts is None:
                return
            b.shutdown_waiting = False
            if resp.error == ErrorCode.NONE and not resp.remaining:
                self._exit_cleanly(b)
            return
        assert isinstance(resp, AlterPartitionResponse)
        if b.alter_inflight is None or b.alter_inflight[0] != msg.request_id:
            return                      # the answer to a request this broker gave up on
        batch, b.alter_inflight, b.alter_proposals = b.alter_proposals, None, {}
        if resp.error != ErrorCode.NONE:
            self.stats[f"alter_{resp.error.name}"] += 1     # NOT_CONTROLLER / STALE_BROKER_EPOCH
        results = {TopicPartition(part.topic, part.partition): part for part in resp.partitions}
        for tp, proposal in batch.items():
            r = b.replicas.get(tp)
            if r is None or r.core is None:
                continue
            part = results.get(tp)
            if part is None:
                answer = IsrAnswer(resp.error if resp.error != ErrorCode.NONE else ErrorCode.UNKNOWN_SERVER_ERROR)
            else:
                self.stats[f"alter_{part.error.name}"] += 1
                answer = IsrAnswer(part.error, part.leader, part.leader_epoch, part.isr, part.partition_epoch)
            out = r.core.on_alter_partition_response(proposal, answer, self.now_ms)
            if out.committed:
                self.stats["isr_changes"] += 1
            self.apply_hw(r, out.high_watermark)
            if out.retry is not None:
                b.alter_queue.setdefault(tp, out.retry)
                b.alter_retry_ms = self.now_ms + ALTER_BACKOFF_MS
        self.flush_alters(b)

    # --- replication: the shell around PartitionReplica ----------------------------------------

    def produce(self) -> None:
        """An acks=all produce to a leader (``ReplicaManager.append``)."""
        if not self.topics:
            return
        name = self.rng.choice(sorted(self.topics))
        tp = TopicPartition(name, self.rng.randrange(self.topics[name]))
        leaders = [b for b in self.brokers.values() if b.alive and (r := b.replicas.get(tp)) and r.is_leader]
        if not leaders:
            return
        b = self.rng.choice(leaders)
        r = b.replicas[tp]
        core = r.core
        assert core is not None
        if core.check_append(-1) != ErrorCode.NONE:
            self.stats["produce_refused"] += 1
            return
        self.next_record += 1
        offset = len(r.log)
        r.append([(core.leader_epoch, self.next_record)])
        self.stats["produced"] += 1
        self.apply_hw(r, core.on_local_append(len(r.log), self.now_ms))
        check = core.ack_check(offset + 1)
        if not check.done:
            r.acks.add((offset, self.next_record), offset + 1, 1 << 62)    # no produce timeout here
        elif check.error == ErrorCode.NONE:
            self.ack(r, offset, self.next_record)

    def apply_hw(self, r: Replica, update: HighWatermarkUpdate | None) -> None:
        """``ReplicaManager._apply_hw``: set the log's high watermark, complete the acks=all it reached."""
        if update is None:
            return
        assert r.core is not None
        r.hw = update.new
        for done in r.acks.on_high_watermark(update.new, r.core.ack_error()):
            if done.error == ErrorCode.NONE:
                self.ack(r, *done.key)
            else:
                self.stats[f"ack_{done.error.name}"] += 1

    def ack(self, r: Replica, offset: int, record: int) -> None:
        if r.log[offset][1] != record:
            raise self.fail(f"leader acknowledges record {record} at {r.tp}@{offset} but holds {r.log[offset]}")
        at = self.acked_at.setdefault(r.tp, {})
        if at.setdefault(offset, record) != record:
            raise self.fail(f"two acknowledged records at {r.tp}@{offset}: {at[offset]} and {record}")
        self.acked.setdefault(r.tp, []).append((offset, record))
        self.stats["acked"] += 1

    def truncate(self, b: Broker, r: Replica, offset: int) -> None:
        if offset < r.hw:
            raise self.fail(f"broker {b.broker_id} truncates {r.tp} to {offset} below its high watermark {r.hw}")
        if offset < len(r.log):
            self.stats["truncations"] += 1
        r.truncate_to(offset)

    def fetch_tick(self) -> None:
        """One broker's fetchers each send the next Fetch their core asks for; a fetch without an answer
        for ``FETCH_RETRY_MS`` failed (``on_request_failed``)."""
        alive = [b for b in self.brokers.values() if b.alive]
        if not alive:
            return
        b = self.rng.choice(alive)
        for tp, r in sorted(b.replicas.items()):
            fetcher = r.core.fetcher if r.core is not None else None
            if fetcher is None:
                continue
            if r.fetch_inflight is not None:
                if self.now_ms - r.fetch_sent_ms < FETCH_RETRY_MS:
                    continue
                fetcher.on_request_failed(r.fetch_inflight, self.now_ms)
                r.fetch_inflight = None
            request = fetcher.next_request(self.now_ms)
            if request is None:
                continue
            r.fetch_inflight, r.fetch_sent_ms = request, self.now_ms
            self.send(b.broker_id, request.leader_id, Fetch(tp, request, b.broker_epoch))

    def on_fetch(self, leader: Broker, follower: int, f: Fetch) -> None:
        """``ReplicaManager.follower_fetch``: the leader's core decides, the log is read if it says so."""
        r = leader.replicas.get(f.tp)
        req = f.request
        if r is None or r.core is None:
            self.send(leader.broker_id, follower, FetchReply(f.tp, req, ErrorCode.NOT_LEADER_OR_FOLLOWER))
            return
        d = r.core.on_follower_fetch(
            FollowerFetch(follower, req.current_leader_epoch, req.fetch_offset, req.last_fetched_epoch, 0, f.broker_epoch),
            leader_log_start_offset=0, epoch_end_offset=r.end_offset_for_epoch, now_ms=self.now_ms)
        if d.diverging_epoch is not None:
            self.stats["divergences"] += 1
        self.apply_hw(r, d.high_watermark_update)
        if d.alter_partition is not None:
            self.queue_alter(leader, d.alter_partition)
        entries = tuple(r.log[req.fetch_offset:req.fetch_offset + FETCH_MAX_ENTRIES]) if d.read_records else ()
        self.send(leader.broker_id, follower, FetchReply(f.tp, req, d.error, d.diverging_epoch, entries, d.high_watermark))

    def on_fetch_reply(self, b: Broker, src: int, f: FetchReply) -> None:
        """``ReplicaFetchers._on_fetch_response`` and ``_carry_out``: the fetcher decides, the log follows."""
        r = b.replicas.get(f.tp)
        fetcher = r.core.fetcher if r is not None and r.core is not None else None
        if r is None or fetcher is None:
            return
        if r.fetch_inflight == f.request:
            r.fetch_inflight = None
        response = PartitionFetchResponse(f.error, f.hw, 0, f.diverging, len(f.entries))
        action = fetcher.on_fetch_response(f.request, response, log_end_offset=len(r.log),
                                           end_offset_for_epoch=r.end_offset_for_epoch, now_ms=self.now_ms)
        if isinstance(action, ListLeaderOffsets):
            # ListOffsets (EARLIEST, LATEST) to the leader, answered at once here.
            self.stats["list_leader_offsets"] += 1
            leader = self.brokers[action.leader_id]
            lr = leader.replicas.get(f.tp) if leader.alive else None
            error = ErrorCode.NOT_LEADER_OR_FOLLOWER
            if lr is not None and lr.core is not None:
                error = lr.core.check_leader_epoch(action.current_leader_epoch)
            if lr is None or error != ErrorCode.NONE:
                fetcher.on_leader_offsets_error(error, self.now_ms)
                return
            step = fetcher.on_leader_offsets(leader_log_start_offset=0, leader_log_end_offset=len(lr.log),
                                             log_end_offset=len(r.log), now_ms=self.now_ms)
            if step is None:
                return
            action = step
        if isinstance(action, AppendRecords):
            r.append(f.entries)
            r.hw = fetcher.on_appended(len(r.log), r.latest_epoch()).high_watermark
        elif isinstance(action, Truncate):
            self.truncate(b, r, action.offset)
            r.hw = fetcher.on_truncated(len(r.log), r.latest_epoch())
        elif isinstance(action, TruncateFullyAndStartAt):
            raise self.fail(f"broker {b.broker_id} told to empty {f.tp} and start at {action.offset}: "
                            "no log here starts above 0")

    def queue_alter(self, b: Broker, proposal: AlterPartitionProposal) -> None:
        b.alter_queue[TopicPartition(proposal.topic, proposal.partition)] = proposal
        self.stats["isr_proposals"] += 1
        self.flush_alters(b)

    def flush_alters(self, b: Broker) -> None:
        """Send every queued proposal in one request, if none is in flight (the replica manager's loop)."""
        if b.alter_inflight is not None or not b.alter_queue or self.now_ms < b.alter_retry_ms:
            return
        batch = dict(sorted(b.alter_queue.items()))
        b.alter_queue = {}
        items = tuple(AlterPartitionItem(p.topic, p.partition, p.leader_epoch, p.new_isr, p.partition_epoch)
                      for p in batch.values())
        rid = self.send_to_controller(b, AlterPartitionReceived(b.broker_id, b.broker_epoch, items))
        b.alter_inflight, b.alter_proposals = (rid, self.now_ms), batch

    def leader_tick(self) -> None:
        """One broker: an AlterPartition without an answer is given up and queued again; every leader
        runs its ISR shrink check (``check_isr``)."""
        alive = [b for b in self.brokers.values() if b.alive]
        if not alive:
            return
        b = self.rng.choice(alive)
        if b.alter_inflight is not None and self.now_ms - b.alter_inflight[1] >= ALTER_RETRY_MS:
            for tp, p in b.alter_proposals.items():       # timed out: abandon it, send again
                b.alter_queue.setdefault(tp, p)
            b.alter_inflight, b.alter_proposals = None, {}
        for _, r in sorted(b.replicas.items()):
            if r.core is not None and r.core.is_leader:
                proposal = r.core.check_isr(self.now_ms)
                if proposal is not None:
                    b.alter_queue[TopicPartition(proposal.topic, proposal.partition)] = proposal
                    self.stats["isr_proposals"] += 1
        self.flush_alters(b)

    def advance_time(self) -> None:
        self.now_ms += self.rng.randint(20, 300)

    # --- invariants -----------------------------------------------------------------------------

    def check(self) -> None:
        for ctl in self.controllers.values():
            ctl.validate_state()
        assignments = self.zk.assignments()
        self.model.check(assignments, self.deleted, self.zk.queue())
        if self.max_moves is not None:
            moves: Counter[int] = Counter()
            for tp, a in assignments.items():
                if tp.topic not in self.deleted:
                    moves.update((*a.adding_replicas, *a.removing_replicas))
            over = {b: n for b, n in moves.items() if n > self.max_moves}
            if over:
                raise self.fail(f"more than {self.max_moves} concurrent moves on brokers {over}")
            self.stats["max_moves_seen"] = max(self.stats["max_moves_seen"], max(moves.values(), default=0))
            self.stats["max_queued"] = max(self.stats["max_queued"], len(self.zk.queue()))
        for b in self.brokers.values():
            for r in b.replicas.values():
                if r.core is not None and b.alive:
                    r.core.validate_state()
                    if (r.core.is_leader or r.core.fetcher is not None) and r.core.high_watermark != r.hw:
                        raise self.fail(f"high watermark of {r.tp} on broker {b.broker_id}: the log has {r.hw}, "
                                        f"the replica {r.core.high_watermark}")
                if r.hw < r.hw_floor:
                    raise self.fail(f"high watermark of {r.tp} on broker {b.broker_id} went back: {r.hw_floor} -> {r.hw}")
                if r.hw > len(r.log):
                    raise self.fail(f"high watermark of {r.tp} on broker {b.broker_id} beyond its log: {r.hw} > {len(r.log)}")
                r.hw_floor = r.hw
        for tp, acked in self.acked.items():
            if tp.topic in self.deleted:
                continue
            state = self.zk.states.get(tp)
            if state is None:
                raise self.fail(f"acknowledged records on {tp} but no state znode")
            for m in state.isr:
                r = self.brokers[m].replicas.get(tp)
                if r is None:
                    raise self.fail(f"ISR member {m} of {tp} has no replica but {len(acked)} records were acknowledged")
                if r.checked_at_truncation != r.truncations:
                    r.checked, r.checked_at_truncation = 0, r.truncations
                for offset, record in acked[r.checked:]:
                    if offset >= len(r.log) or r.log[offset][1] != record:
                        have = r.log[offset] if offset < len(r.log) else None
                        raise self.fail(f"acknowledged record {record} at {tp}@{offset} missing on ISR member {m} "
                                        f"(has {have}, log end {len(r.log)}, ISR {state.isr})")
                r.checked = len(acked)
