"""A seeded simulation of a headwater cluster around the sans-IO controller.

Everything runs in one thread from one ``random.Random(seed)``: a fake ZooKeeper (sessions,
ephemeral nodes, versions, czxids, multi with the controller-epoch check), an in-memory network
(per-link FIFO, links picked at random so delivery order across links varies, broker traffic lost
at random), brokers that crash, restart with a new broker epoch, lose their session while still
running ("zombies"), or shut down in a controlled way, controllers that fail over (a new
:class:`Controller` built from the fake ZooKeeper, while the old one may still be running and has
its conditional writes refused), and a small model of replication:

* each replica's log is a list of ``(leader_epoch, record_id)`` entries (the offset is the index);
* leaders append; followers fetch with their leader epoch and the epoch of their last entry, and
  truncate to the leader's end offset for that epoch when the leader reports a divergence;
* the leader's high watermark is the minimum log end offset over the maximal ISR (the committed
  ISR plus a pending AlterPartition proposal), and it never goes back;
* ISR shrinks after ``LAG_MS`` without catching up and grows when a follower reaches the high
  watermark (and the leader's epoch start), both through AlterPartition to the controller;
* an acks=all produce is acknowledged when the high watermark passes the record;
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
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from headwater.controller.controller import Controller, not_controller_response
from headwater.controller.effects import (
    AlterPartitionReassignmentsResponse,
    AlterPartitionResponse,
    BrokerRequest,
    ControlledShutdownResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
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
    ControlledShutdownRequested,
    ControllerElected,
    CreateTopicsRequested,
    DeleteTopicsRequested,
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

LAG_MS = 1000            # replica.lag.time.max.ms
FETCH_RETRY_MS = 300     # a fetch with no answer for this long is sent again
ALTER_RETRY_MS = 600     # an AlterPartition with no answer for this long is sent again
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


# --- the replication model ----------------------------------------------------------------------


def end_offset_for_epoch(log: list[tuple[int, int]], epoch: int, current_epoch: int | None) -> tuple[int, int]:
    """(largest epoch <= ``epoch`` in the log, the offset where the next epoch starts); (-1, 0) if none.

    A leader answers its own current epoch with its log end offset (it may not have appended yet).
    """
    if current_epoch is not None and epoch == current_epoch:
        return epoch, len(log)
    best = -1
    for offset, (e, _) in enumerate(log):
        if e > epoch:
            return (best, offset) if best >= 0 else (-1, 0)
        best = e
    return (best, len(log)) if best >= 0 else (-1, 0)


@dataclass
class Replica:
    tp: TopicPartition
    # durable: survives a crash
    log: list[tuple[int, int]] = field(default_factory=list)
    hw: int = 0
    # for the checker
    hw_floor: int = 0
    truncations: int = 0
    checked: int = 0
    checked_at_truncation: int = 0
    # volatile: lost in a crash
    role: str | None = None
    leader: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    isr: tuple[int, ...] = ()
    replicas: tuple[int, ...] = ()
    epoch_start: int = 0
    follower_leo: dict[int, int] = field(default_factory=dict)
    caught_up_ms: dict[int, int] = field(default_factory=dict)
    last_fetch: dict[int, tuple[int, int]] = field(default_factory=dict)
    proposal: tuple[int, ...] | None = None
    proposal_id: int = 0
    proposal_retry: bool = True
    pending_acks: list[tuple[int, int]] = field(default_factory=list)
    fetch_sent_ms: int | None = None

    def reset_volatile(self) -> None:
        fresh = Replica(self.tp, self.log, self.hw, self.hw_floor, self.truncations, self.checked,
                        self.checked_at_truncation)
        self.__dict__.update(fresh.__dict__)


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
    # Kafka's AlterPartitionManager: one request in flight; answers to abandoned requests are ignored.
    alter_inflight: tuple[int, int] | None = None
    alter_proposals: dict[TopicPartition, int] = field(default_factory=dict)

    @property
    def info(self) -> BrokerInfo:
        return BrokerInfo(self.broker_id, f"broker{self.broker_id}", 9090 + self.broker_id)


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
    leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int


@dataclass(frozen=True)
class FetchReply:
    tp: TopicPartition
    leader_epoch: int
    fetch_offset: int
    error: ErrorCode = ErrorCode.NONE
    diverging: tuple[int, int] | None = None
    entries: tuple[tuple[int, int], ...] = ()
    hw: int = 0


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
                 max_moves: int | None = None) -> None:
        """``reassignments``: (step, kind, pick, target) to run at those steps instead of random ones;
        kind is "alter", "replace" (an alter of a partition that is reassigning or queued, if any) or
        "cancel". ``max_moves``: ``reassignment.max.concurrent.moves.per.broker`` in the cluster-wide
        broker defaults; no broker may ever be in AR or RR of more ongoing reassignments than that."""
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
        for r in b.replicas.values():
            r.reset_volatile()
        b.shutdown_attempts = None
        b.alter_inflight, b.alter_proposals = None, {}
        self._register(b)

    def _register(self, b: Broker) -> None:
        b.session = self.zk.open_session()
        b.broker_epoch = self.zk.register_broker(b.info, b.session, self.now_ms)
        self.broker_change_pending = True
        self.log(f"broker {b.broker_id} registered with epoch {b.broker_epoch}")

    def _stop_process(self, b: Broker, how: str) -> None:
        b.alive = False
        for r in b.replicas.values():
            r.reset_volatile()
        for key in [k for k in self.links if k[1] == b.broker_id]:
            del self.links[key]
        self.controllers.pop(b.broker_id, None)
        b.shutdown_attempts = None
        b.alter_inflight, b.alter_proposals = None, {}
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
        elif isinstance(req, StopReplicaRequest):
            done = []
            for sp in req.partitions:
                r = b.replicas.get(sp.tp)
                if sp.delete:
                    b.replicas.pop(sp.tp, None)
                    done.append((sp.tp, ErrorCode.NONE))
                elif r is not None and (sp.leader_epoch == -2 or sp.leader_epoch >= r.leader_epoch):
                    r.role = None
                    r.pending_acks = []
            if done:
                self.send(b.broker_id, src, ToController(StopReplicaResponseReceived(b.broker_id, tuple(done))))

    def become(self, b: Broker, p: LeaderAndIsrPartition) -> None:
        r = b.replicas.setdefault(p.tp, Replica(p.tp))
        if p.leader_epoch <= r.leader_epoch:
            return
        was_leader = r.role == "leader"
        r.leader, r.leader_epoch, r.partition_epoch = p.leader, p.leader_epoch, p.partition_epoch
        r.isr, r.replicas = p.isr, p.replicas
        r.proposal = None
        if p.leader == b.broker_id:
            key = (p.tp, p.leader_epoch)
            if self.leader_of_epoch.setdefault(key, b.broker_id) != b.broker_id:
                raise self.fail(f"brokers {self.leader_of_epoch[key]} and {b.broker_id} both lead {p.tp} "
                                f"in leader epoch {p.leader_epoch}")
            if self.zk.leader_of_epoch.get(key) != b.broker_id:
                raise self.fail(f"broker {b.broker_id} leads {p.tp} in epoch {p.leader_epoch}, ZooKeeper never said so")
            r.role = "leader"
            if not was_leader:
                r.pending_acks = []
            r.epoch_start = len(r.log)
            r.follower_leo, r.last_fetch = {}, {}
            r.caught_up_ms = {f: self.now_ms for f in p.replicas}
            self.stats["became_leader"] += 1
            self.advance_hw(b, r)
        else:
            r.role = "follower"
            r.pending_acks = []
            r.fetch_sent_ms = None

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
        proposals, b.alter_inflight, b.alter_proposals = b.alter_proposals, None, {}
        if resp.error != ErrorCode.NONE:
            self.stats[f"alter_{resp.error.name}"] += 1
            self.flush_alters(b)
            return                      # NOT_CONTROLLER / STALE_BROKER_EPOCH: sent again
        for part in resp.partitions:
            self.stats[f"alter_{part.error.name}"] += 1
            tp = TopicPartition(part.topic, part.partition)
            r = b.replicas.get(tp)
            if r is None or r.role != "leader" or r.proposal is None or proposals.get(tp) != r.proposal_id:
                continue                # an answer to an older proposal
            if part.error == ErrorCode.NONE:
                if part.leader_epoch == r.leader_epoch and part.partition_epoch >= r.partition_epoch:
                    r.isr, r.partition_epoch = part.isr, part.partition_epoch
                r.proposal = None
                self.stats["isr_changes"] += 1
            elif part.error in (ErrorCode.INELIGIBLE_REPLICA, ErrorCode.INVALID_REQUEST, ErrorCode.NOT_LEADER_OR_FOLLOWER):
                r.proposal = None       # certainly not applied: back to the committed ISR
            elif part.error in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION,
                                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                r.proposal_retry = False  # maybe applied by someone: keep the maximal ISR until LeaderAndIsr
            self.advance_hw(b, r)
        self.flush_alters(b)

    # --- replication ----------------------------------------------------------------------------

    def produce(self) -> None:
        if not self.topics:
            return
        name = self.rng.choice(sorted(self.topics))
        tp = TopicPartition(name, self.rng.randrange(self.topics[name]))
        leaders = [b for b in self.brokers.values() if b.alive and (r := b.replicas.get(tp)) and r.role == "leader"]
        if not leaders:
            return
        b = self.rng.choice(leaders)
        r = b.replicas[tp]
        self.next_record += 1
        r.pending_acks.append((len(r.log), self.next_record))
        r.log.append((r.leader_epoch, self.next_record))
        self.stats["produced"] += 1
        self.advance_hw(b, r)

    def advance_hw(self, b: Broker, r: Replica) -> None:
        if r.role != "leader":
            return
        members = set(r.isr) | set(r.proposal or ())
        hw = min(len(r.log) if m == b.broker_id else r.follower_leo.get(m, -1) for m in members)
        if hw > r.hw:
            r.hw = hw
        keep = []
        for offset, record in r.pending_acks:
            if offset < r.hw:
                self.ack(r, offset, record)
            else:
                keep.append((offset, record))
        r.pending_acks = keep

    def ack(self, r: Replica, offset: int, record: int) -> None:
        if r.log[offset][1] != record:
            raise self.fail(f"leader acknowledges record {record} at {r.tp}@{offset} but holds {r.log[offset]}")
        at = self.acked_at.setdefault(r.tp, {})
        if at.setdefault(offset, record) != record:
            raise self.fail(f"two acknowledged records at {r.tp}@{offset}: {at[offset]} and {record}")
        self.acked.setdefault(r.tp, []).append((offset, record))
        self.stats["acked"] += 1

    def fetch_tick(self) -> None:
        alive = [b for b in self.brokers.values() if b.alive]
        if not alive:
            return
        b = self.rng.choice(alive)
        for tp, r in sorted(b.replicas.items()):
            if r.role != "follower" or r.leader < 0 or r.leader == b.broker_id:
                continue
            if r.fetch_sent_ms is not None and self.now_ms - r.fetch_sent_ms < FETCH_RETRY_MS:
                continue
            r.fetch_sent_ms = self.now_ms
            last_epoch = r.log[-1][0] if r.log else -1
            self.send(b.broker_id, r.leader, Fetch(tp, r.leader_epoch, len(r.log), last_epoch))

    def on_fetch(self, leader: Broker, follower: int, f: Fetch) -> None:
        r = leader.replicas.get(f.tp)

        def reply(**kw: object) -> None:
            self.send(leader.broker_id, follower,
                      FetchReply(f.tp, f.leader_epoch, f.fetch_offset, **kw))  # type: ignore[arg-type]

        if r is None or r.role != "leader":
            return reply(error=ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if f.leader_epoch < r.leader_epoch:
            return reply(error=ErrorCode.FENCED_LEADER_EPOCH)
        if f.leader_epoch > r.leader_epoch:
            return reply(error=ErrorCode.UNKNOWN_LEADER_EPOCH)
        if f.fetch_offset > 0:
            epoch, end = end_offset_for_epoch(r.log, f.last_fetched_epoch, r.leader_epoch)
            if epoch != f.last_fetched_epoch or end < f.fetch_offset:
                self.stats["divergences"] += 1
                return reply(diverging=(epoch, end))
        previous = r.last_fetch.get(follower)
        if f.fetch_offset >= len(r.log):
            r.caught_up_ms[follower] = self.now_ms
        elif previous is not None and f.fetch_offset >= previous[0]:
            r.caught_up_ms[follower] = max(r.caught_up_ms.get(follower, 0), previous[1])
        r.last_fetch[follower] = (len(r.log), self.now_ms)
        r.follower_leo[follower] = f.fetch_offset
        if (r.proposal is None and follower not in r.isr and follower in r.replicas
                and f.fetch_offset >= r.hw and f.fetch_offset >= r.epoch_start):
            self.propose(leader, r, (*r.isr, follower))
        self.advance_hw(leader, r)
        entries = tuple(r.log[f.fetch_offset:f.fetch_offset + FETCH_MAX_ENTRIES])
        return reply(entries=entries, hw=r.hw)

    def on_fetch_reply(self, b: Broker, src: int, f: FetchReply) -> None:
        r = b.replicas.get(f.tp)
        if r is None or r.role != "follower" or r.leader != src or r.leader_epoch != f.leader_epoch:
            return
        r.fetch_sent_ms = None
        if f.error != ErrorCode.NONE or f.fetch_offset != len(r.log):
            return
        if f.diverging is not None:
            epoch, end = f.diverging
            mine, my_end = end_offset_for_epoch(r.log, epoch, None)
            target = min(end, len(r.log)) if mine == epoch else min(my_end, len(r.log))
            if target < r.hw:
                raise self.fail(f"broker {b.broker_id} truncates {f.tp} to {target} below its high watermark {r.hw}")
            if target < len(r.log):
                del r.log[target:]
                r.truncations += 1
                self.stats["truncations"] += 1
            return
        r.log.extend(f.entries)
        r.hw = max(r.hw, min(f.hw, len(r.log)))

    def propose(self, b: Broker, r: Replica, isr: tuple[int, ...]) -> None:
        r.proposal = isr
        r.proposal_id += 1
        r.proposal_retry = True
        self.stats["isr_proposals"] += 1
        self.flush_alters(b)

    def flush_alters(self, b: Broker) -> None:
        """Send every proposal that still needs an answer, in one request, if none is in flight."""
        if b.alter_inflight is not None:
            return
        items, ids = [], {}
        for tp, r in sorted(b.replicas.items()):
            if r.role == "leader" and r.proposal is not None and r.proposal_retry:
                items.append(AlterPartitionItem(tp.topic, tp.partition, r.leader_epoch, r.proposal, r.partition_epoch))
                ids[tp] = r.proposal_id
        if items:
            rid = self.send_to_controller(b, AlterPartitionReceived(b.broker_id, b.broker_epoch, tuple(items)))
            b.alter_inflight, b.alter_proposals = (rid, self.now_ms), ids

    def leader_tick(self) -> None:
        alive = [b for b in self.brokers.values() if b.alive]
        if not alive:
            return
        b = self.rng.choice(alive)
        if b.alter_inflight is not None and self.now_ms - b.alter_inflight[1] >= ALTER_RETRY_MS:
            b.alter_inflight, b.alter_proposals = None, {}     # timed out: abandon it, send again
        for _, r in sorted(b.replicas.items()):
            if r.role != "leader" or r.proposal is not None:
                continue
            lagging = [f for f in r.isr if f != b.broker_id and self.now_ms - r.caught_up_ms.get(f, 0) > LAG_MS]
            if lagging:
                self.propose(b, r, tuple(m for m in r.isr if m not in lagging))
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
