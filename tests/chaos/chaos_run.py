"""One chaos run: a cluster in namespaces, the workloads, a seeded nemesis schedule, then the checker.

The seed fixes the schedule: which nemesis acts on which role (the leader of a chosen partition, a
chosen broker), for how long, with which gaps, and the reassignment workload's choices. The timing
of the processes themselves is not under the seed's control, so a rerun repeats the same faults but
not necessarily the same interleaving.

Nemeses (``NEMESES``), each applied for a few seconds per round, then healed:

* ``leader-followers``: the leader of a partition cannot reach the other brokers; ZooKeeper and
  clients still reach it;
* ``leader-zk``: the leader of a partition cannot reach ZooKeeper; brokers and clients still reach it
  (its session expires and the controller moves leadership while it keeps running);
* ``one-way``: packets from the leader to the other brokers are dropped (or the reverse); the other
  direction flows;
* ``pause``: the leader is stopped with SIGSTOP and resumed with SIGCONT, sometimes for longer than
  the ZooKeeper session;
* ``loss``: a random share (10-40 %) of every packet in and out of one broker is dropped;
* ``kill``: kill -9 of the leader, restarted after a while;
* ``disk-full``: the leader's first log dir (a small tmpfs each broker has) is filled up: its writes
  there fail with ENOSPC, the broker takes that dir offline and the controller moves those
  partitions' leadership away; healed by freeing the space and restarting the broker (a failed dir
  stays offline until a restart, as in Kafka);
* ``kill-heal`` (``HEAL_NEMESIS``, not one of ``NEMESES``): kill -9 of the leader for longer than the
  self-healing threshold, with a reassignment throttle that keeps the healing copies slow; restarted
  once the controller has started moving its replicas away, so that it returns while (some of) the
  moves still copy and self-healing cancels them;
* ``mixed``: each round one of the seven above, chosen by the seed, and one round (also chosen by
  the seed) ``kill-heal``.

``mixed`` and ``kill-heal`` run with the controller's self-healing on (``HEALING_THRESHOLD_MS``),
four brokers so that a heal has somewhere to go, and check what it did (``chaos_checker``). Its
threshold is short enough that the other faults heal too when they keep a broker unregistered long
enough (a long pause, ZooKeeper cut off, a long kill), with no throttle: those moves complete at once.

With ``controller_share`` (``make chaos`` uses 0.3) that share of the leader-aimed faults hits the
active controller instead.

With ``txn``, a transactional workload writes to a topic of its own (``TXN_TOPIC``) beside the
producer; the faults aim at the chaos topic's leaders, which often lead its partitions or the
transaction coordinator's too.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from chaos_checker import BrokerReturn, ChurnFinal, FinalState, HealingAction, History, Verdict, check
from chaos_hosts import ZK_NODE, ChaosCluster, broker_node, fill_disk, start_chaos_cluster
from chaos_txn_checker import TxnFinal
from chaos_workload import (
    ChurnWorkload,
    LeaderWatcher,
    ProducerWorkload,
    ReassignmentWorkload,
    TransactionalWorkload,
    all_assignments,
    alter_broker_defaults,
    churn_dirs,
    consume_all,
    moves_in_flight,
    read_healing,
    read_isolated,
    read_replica_logs,
    wait_stable,
)
from cluster_support import wait_for

NEMESES = ("leader-followers", "leader-zk", "one-way", "pause", "loss", "kill", "disk-full")
HEAL_NEMESIS = "kill-heal"  # in mixed's rotation, and on its own by name
SMALL_DISK_KIB = 32 * 1024  # each broker's tmpfs log dir, for disk-full (and mixed)
TOPIC = "chaos"
TXN_TOPIC = "chaos-txn"  # the transactional workload's
SESSION_TIMEOUT_MS = 4000
SETTLE_S = 2.0
CHAOS_PROPS = {
    # Short timeouts so that a fault of a few seconds moves leadership and shrinks ISRs.
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "replica.lag.time.max.ms": "3000",
    "min.insync.replicas": "2",
    # __transaction_state (created at the transactional workload's first use): 5 partitions, not
    # 50, for a quick start on a small machine; one of them coordinates the workload's id anyway.
    "transaction.state.log.num.partitions": "5",
}
# Self-healing (mixed, kill-heal): a broker unregistered this long has its replicas moved away. The
# controller notices a kill when the session expires (4 s), so a heal starts ~8 s after a kill.
HEALING_THRESHOLD_MS = 3000
TXNS_TO_CHECK = 10  # commits a transactional run gathers before it stops, so its checks have something to check
# reassignment.throttled.rate during kill-heal, bytes/s per broker and direction. A copy's first fetch
# may take a whole partition (the limiter lets one answer through, then makes its bytes a debt), so
# per broker the first move or two complete at once and the others wait for the debt, tens of KB at
# least (a chaos partition grows ~5 KB/s): seconds longer than a killed broker takes to come back.
HEAL_THROTTLE_BPS = 5_000
HEAL_START_TIMEOUT_S = 40.0  # from the kill: session expiry, a new controller perhaps, the threshold, planning
# How long a returned broker's healing moves may still copy: the self-healer ticks every second
# (and waits for a plan in progress first).
HEAL_CANCEL_S = 5.0


@dataclass(frozen=True)
class Scenario:
    nemesis: str
    seed: int
    rounds: int = 2
    fault_s: tuple[float, float] = (3.0, 9.0)
    gap_s: tuple[float, float] = (1.0, 3.0)
    reassign: bool = False
    # The share of faults aimed at the active controller instead of the chosen partition's leader.
    controller_share: float = 0.0
    partitions: int = 3
    rate_per_s: float = 300.0
    churn: bool = False  # the topic create/delete workload
    txn: bool = False  # the transactional workload

    @property
    def self_healing(self) -> bool:
        return self.nemesis in ("mixed", HEAL_NEMESIS)

    @property
    def brokers(self) -> int:
        # Reassignments and heals need somewhere to move to: 4 brokers for replication factor 3.
        return 4 if self.reassign or self.self_healing else 3


@dataclass
class Outcome:
    verdict: Verdict
    history: History
    final: FinalState
    liveness: list[str]
    fault_windows: list[tuple[int, int, int]]
    faults: list[Fault]

    def unavailability(self) -> list[dict[str, object]]:
        """Per fault: the nemesis, the partitions it hit, and the window in ms (None when no record sent
        after it was acknowledged on one of them, or when it hit no partition of the chaos topic)."""
        return [{"nemesis": f.kind, "partitions": list(f.partitions),
                 "window_ms": unavailability_ms(self.history, f)} for f in self.faults]

    @property
    def ok(self) -> bool:
        return self.verdict.ok and not self.liveness

    def report(self) -> str:
        lines = [str(self.verdict)]
        lines += [f"  - liveness: {x}" for x in self.liveness]
        lines += [f"  nemesis: {e}" for e in self.history.events if not e.startswith(("reassign", "churn", "txn"))]
        reassigns = [e for e in self.history.events if e.startswith("reassign")]
        if reassigns:
            lines.append(f"  reassignment workload: {len(reassigns)} requests, e.g. {reassigns[:3]}")
        churn = [e for e in self.history.events if e.startswith("churn")]
        if churn:
            lines.append(f"  churn workload: {len(churn)} steps, e.g. {churn[:3]}")
        if self.history.healing is not None:
            acted = [a for a in self.history.healing if a.kind in ("heal", "cancel")]
            lines.append("  self-healing: " + ("; ".join(_describe(a) for a in acted) if acted else "never acted"))
            errors = Counter(a.error for a in self.history.healing if a.kind == "failed")
            lines += [f"  self-healing tick failed {n} times: {error}" for error, n in errors.most_common(3)]
        if self.history.txns:
            txn = [e for e in self.history.events if e.startswith("txn")]
            producers = max(t.producer for t in self.history.txns)
            lines.append(f"  transactional workload: {len(self.history.txns)} transactions, {producers} producer(s), "
                         f"{len(txn)} errors and retries" + (f", e.g. {txn[:3]}" if txn else ""))
        return "\n".join(lines)


def _describe(action: HealingAction) -> str:
    when = time.strftime("%H:%M:%S", time.localtime(action.at))
    if action.kind == "heal":
        return f"{when} moved {len(action.moves)} partitions"
    return f"{when} broker {action.broker} back, {len(action.partitions)} moves cancelled"


@dataclass(frozen=True)
class Fault:
    kind: str  # the nemesis that acted (for ``mixed``, the one chosen)
    injected_at: float  # time.monotonic() once the fault was in place
    partitions: tuple[int, ...]  # of the chaos topic, whose availability it aims at


def unavailability_ms(history: History, fault: Fault) -> float | None:
    """From the injection to the first acknowledgement of a record sent after it, on each affected
    partition; the fault's window is the longest of its partitions'."""
    if not fault.partitions:
        return None
    first: dict[int, float] = {}
    for seq, sent in list(history.sent_at.items()):
        p = history.sent.get(seq)
        acked = history.acked_at.get(seq)
        if p in fault.partitions and acked is not None and sent >= fault.injected_at:
            first[p] = min(first.get(p, acked), acked)
    if len(first) < len(fault.partitions):
        return None
    return round((max(first.values()) - fault.injected_at) * 1000, 1)


def percentile(values: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least q of them at or below it."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))]


def summarize_windows(faults: list[dict[str, object]]) -> dict[str, dict[str, float | int | None]]:
    """Per nemesis: p50 and p99 of the measured windows, how many were measured, and how many were
    not: the fault hit no partition of the chaos topic (the controller or the loss victim led none),
    or nothing sent after it was acknowledged."""
    by_kind: dict[str, list[float]] = {}
    no_partition: dict[str, int] = {}
    no_ack: dict[str, int] = {}
    for f in faults:
        kind, ms = str(f["nemesis"]), f["window_ms"]
        by_kind.setdefault(kind, [])
        if isinstance(ms, (int, float)):
            by_kind[kind].append(float(ms))
        elif not f.get("partitions"):
            no_partition[kind] = no_partition.get(kind, 0) + 1
        else:
            no_ack[kind] = no_ack.get(kind, 0) + 1
    return {kind: {"p50_ms": percentile(ms, 0.5) if ms else None, "p99_ms": percentile(ms, 0.99) if ms else None,
                   "faults": len(ms), "no_partition": no_partition.get(kind, 0), "no_ack": no_ack.get(kind, 0)}
            for kind, ms in sorted(by_kind.items())}


class Nemesis:
    def __init__(self, cluster: ChaosCluster, scenario: Scenario, rng: random.Random, history: History) -> None:
        self.cluster = cluster
        self.scenario = scenario
        self.rng = rng
        self.history = history
        self.t0 = time.monotonic()
        self.target_partition = -1
        # (partition the fault aimed at, its acknowledgements SETTLE_S into the fault, when it healed)
        self.windows: list[tuple[int, int, int]] = []
        self.faults: list[Fault] = []
        self.liveness: list[str] = []
        self.rounds_done = 0
        self.heal_round = -1  # mixed: the round that is kill-heal

    def log(self, what: str) -> None:
        self.history.events.append(f"{time.monotonic() - self.t0:5.1f} s {what}")

    def leader_of(self, partition: int) -> int:
        def leader() -> int | None:
            state = self.cluster.partition_states(TOPIC).get(partition)
            return int(state["leader"]) if state and int(state["leader"]) >= 0 else None

        return int(wait_for(leader, 30, f"a leader of partition {partition}"))

    def led_by(self, broker: int) -> tuple[int, ...]:
        states = self.cluster.partition_states(TOPIC)
        return tuple(sorted(p for p, st in states.items() if int(st["leader"]) == broker))

    def record(self, kind: str, at: float, partitions: tuple[int, ...]) -> None:
        self.faults.append(Fault(kind, at, partitions))

    def others(self, broker: int) -> list[str]:
        return [broker_node(b) for b in self.cluster.brokers if b != broker]

    def inject(self) -> Callable[[], None]:
        """Apply one fault chosen by the seed; return what heals it."""
        kind, box = self.scenario.nemesis, self.cluster.sandbox
        if kind == "mixed":
            kind = HEAL_NEMESIS if self.rounds_done == self.heal_round else self.rng.choice(NEMESES)
        partition = self.target_partition = self.rng.randrange(self.scenario.partitions)
        if kind == "loss":
            victim = self.rng.choice(sorted(self.cluster.brokers))
            percent = self.rng.choice([10, 25, 40])
            self.record(kind, time.monotonic(), self.led_by(victim))
            box.loss(broker_node(victim), percent)
            self.log(f"loss {percent}% in and out of broker {victim}")
            return box.heal
        leader = self.leader_of(partition)
        role = f"leader of p{partition}"
        affected: tuple[int, ...] = (partition,)
        if self.scenario.controller_share and self.rng.random() < self.scenario.controller_share:
            # The same fault on the active controller: its own partitions and every other
            # partition's elections and ISR changes depend on it.
            controller = self.cluster.zk_controller()
            if controller is not None:
                leader = controller
                role = "the controller" + (f", leader of p{partition}" if controller == self.leader_of(partition) else "")
                # Its unavailability is measured on the partitions it leads (maybe none).
                affected = self.led_by(controller)
        if kind == "disk-full":
            # The partitions it leads from the small disk lose their leader; the others stay.
            disk = self.cluster.disk_dir(leader)
            affected = tuple(q for q in self.led_by(leader) if (disk / f"{TOPIC}-{q}").is_dir())
        self.record(kind, time.monotonic(), affected)
        if kind == "disk-full":
            filler = fill_disk(self.cluster.disk_dir(leader))
            self.log(f"fill the small log dir of broker {leader} ({role}); it leads p{list(affected)} from there")

            def free_and_restart() -> None:
                filler.unlink()
                self.cluster.brokers[leader].kill9()
                self.cluster.restart(leader)

            return free_and_restart
        if kind == "leader-followers":
            box.isolate(broker_node(leader), self.others(leader))
            self.log(f"isolate broker {leader} ({role}) from the other brokers, not from ZooKeeper")
            return box.heal
        if kind == "leader-zk":
            box.isolate(broker_node(leader), [ZK_NODE])
            self.log(f"isolate broker {leader} ({role}) from ZooKeeper only")
            return box.heal
        if kind == "one-way":
            outbound = self.rng.random() < 0.5
            for other in self.others(leader):
                src, dst = (broker_node(leader), other) if outbound else (other, broker_node(leader))
                box.cut(src, dst)
            self.log(f"drop packets {'from' if outbound else 'to'} broker {leader} ({role}) "
                     f"{'to' if outbound else 'from'} the other brokers, one way")
            return box.heal
        if kind == "pause":
            pid = self.cluster.pid(leader)
            os.kill(pid, signal.SIGSTOP)
            self.log(f"SIGSTOP broker {leader} ({role}, pid {pid})")

            def resume() -> None:
                os.kill(pid, signal.SIGCONT)

            return resume
        if kind == "kill":
            self.cluster.brokers[leader].kill9()
            self.log(f"kill -9 broker {leader} ({role})")

            def restart() -> None:
                self.cluster.restart(leader)

            return restart
        if kind == HEAL_NEMESIS:
            return self.kill_past_threshold(leader, role)
        raise ValueError(f"unknown nemesis {kind!r}; known: {', '.join(NEMESES)}, mixed, {HEAL_NEMESIS}")

    def kill_past_threshold(self, victim: int, role: str) -> Callable[[], None]:
        """kill -9, and the restart once self-healing has started moving the victim's replicas away,
        under a throttle that keeps the big copies going: the broker returns mid-heal."""
        delay_s = self.rng.uniform(0.0, 2.0)  # after the heal starts; drawn here, whatever happens later
        alter_broker_defaults(self.cluster.bootstrap, {"reassignment.throttled.rate": str(HEAL_THROTTLE_BPS)})
        logs = [b.log_path for b in self.cluster.brokers.values()]
        killed_at = time.time()
        self.cluster.brokers[victim].kill9()
        self.log(f"kill -9 broker {victim} ({role}) until self-healing moves its replicas, "
                 f"reassignment.throttled.rate={HEAL_THROTTLE_BPS}")

        def decided() -> list[HealingAction]:
            """Self-healing's plans for the victim since the kill: moves started, or none found."""
            return [a for a in read_healing(logs) if a.kind in ("heal", "nothing") and a.at >= killed_at
                    and victim in a.brokers]

        def restart() -> None:
            try:
                deadline = killed_at + HEAL_START_TIMEOUT_S
                while not decided() and time.time() < deadline:
                    time.sleep(0.5)
                started = [a for a in decided() if a.kind == "heal"]
                if started:
                    self.log(f"self-healing started {sum(len(a.moves) for a in started)} moves "
                             f"{time.time() - killed_at:.1f} s after the kill; restart in {delay_s:.1f} s")
                    time.sleep(delay_s)
                else:
                    self.log(f"no healing move {time.time() - killed_at:.0f} s after the kill")
                zk = self.cluster.kazoo

                def away() -> dict[tuple[str, int], tuple[int, ...]]:
                    return {tp: tuple(r for r in replicas if r not in removing)
                            for tp, (replicas, _adding, removing) in moves_in_flight(zk).items() if victim in removing}

                copying = away()
                self.cluster.restart(victim)
                self.log(f"restart broker {victim}; {len(copying)} moves away from it were copying")
                wait_for(lambda: zk.exists(f"/brokers/ids/{victim}"), 60, f"broker {victim} registered again")
                back_at = time.time()
                time.sleep(HEAL_CANCEL_S)
                self.history.returns.append(BrokerReturn(victim, back_at, copying, away(), HEAL_CANCEL_S))
            finally:
                try:
                    alter_broker_defaults(self.cluster.bootstrap, delete=("reassignment.throttled.rate",))
                except Exception as exc:
                    self.liveness.append(f"could not delete reassignment.throttled.rate: {exc}")

        return restart

    def acked_on(self, partition: int) -> int:
        return sum(1 for a in list(self.history.acks) if a.partition == partition)

    def run(self, producer: ProducerWorkload) -> list[str]:
        liveness = self.liveness
        if self.scenario.nemesis == "mixed" and self.scenario.self_healing:
            self.heal_round = self.rng.randrange(self.scenario.rounds)
        for round_no in range(self.scenario.rounds):
            self.rounds_done = round_no
            heal = self.inject()
            # The window counts from when the fault is in place: nft rules go into several namespaces
            # one after the other (tens of ms), and records sent meanwhile are not held up by it.
            self.faults[-1] = dataclasses.replace(self.faults[-1], injected_at=time.monotonic())
            duration_s = self.rng.uniform(*self.scenario.fault_s)
            # Answers already on their way when the fault began still arrive: count from a moment later.
            settle_s = min(SETTLE_S, duration_s / 2)
            time.sleep(settle_s)
            began = self.acked_on(self.target_partition)
            time.sleep(duration_s - settle_s)
            self.windows.append((self.target_partition, began, self.acked_on(self.target_partition)))
            heal()
            self.log(f"healed (round {round_no + 1}), {producer.acked} acknowledged so far")
            before = producer.acked
            # Writes must flow again once the fault is gone (leadership may have to move first).
            if not producer.wait_acked(before + 50, timeout_s=60):
                liveness.append(f"round {round_no + 1}: no acknowledgement within 60 s of healing")
            time.sleep(self.rng.uniform(*self.scenario.gap_s))
        return liveness


def topic_assignment(cluster: ChaosCluster) -> tuple[dict[int, tuple[int, ...]], dict[int, tuple[tuple[int, ...], tuple[int, ...]]]]:
    found = cluster.zk_json(f"/brokers/topics/{TOPIC}")
    assert found is not None, f"topic {TOPIC} has no znode"
    doc = found[0]
    assignment = {int(p): tuple(r) for p, r in doc["partitions"].items()}
    adding = {int(p): tuple(r) for p, r in (doc.get("adding_replicas") or {}).items()}
    removing = {int(p): tuple(r) for p, r in (doc.get("removing_replicas") or {}).items()}
    ongoing = {p: (adding.get(p, ()), removing.get(p, ())) for p in set(adding) | set(removing)}
    return assignment, ongoing


def run_scenario(scenario: Scenario, data_dir: Path, progress: Callable[[str], None] = lambda _: None) -> Outcome:
    cluster_box: list[ChaosCluster] = []
    try:
        return _run_scenario(scenario, data_dir, progress, cluster_box)
    finally:
        # On every path, a failed one included: a tmpfs left mounted would outlive the run.
        for cluster in cluster_box:
            cluster.release_disks()


def _run_scenario(scenario: Scenario, data_dir: Path, progress: Callable[[str], None],
                  cluster_box: list[ChaosCluster]) -> Outcome:
    rng = random.Random(f"{scenario.nemesis}/{scenario.seed}")
    history = History(scenario.seed, scenario.nemesis, scenario.partitions)
    liveness: list[str] = []
    cluster = start_chaos_cluster(data_dir, scenario.brokers, CHAOS_PROPS,
                                  small_disk_kib=SMALL_DISK_KIB if scenario.nemesis in ("disk-full", "mixed") else 0)
    cluster_box.append(cluster)
    try:
        progress(f"cluster up: {cluster.bootstrap}")
        cluster.create_topic(TOPIC, scenario.partitions, 3)
        topics = [TOPIC]
        if scenario.txn:
            cluster.create_topic(TXN_TOPIC, scenario.partitions, 3)
            topics.append(TXN_TOPIC)
        cluster.wait_full_isr(topics, scenario.partitions, timeout_s=30)
        if scenario.self_healing:
            alter_broker_defaults(cluster.bootstrap, {"self.healing.enable": "true",
                                                      "self.healing.broker.failure.threshold.ms": str(HEALING_THRESHOLD_MS)})
            history.healing = []
        assert cluster.zk is not None
        watcher = LeaderWatcher(cluster.zk.connect, TOPIC, scenario.partitions, history).start()
        bootstrap = cluster.bootstrap
        producer = ProducerWorkload(bootstrap, TOPIC, history, scenario.rate_per_s).start()
        reassigner = None
        churner = None
        churn_final: dict[str, ChurnFinal] = {}
        txn = None
        txn_final = None
        nemesis = Nemesis(cluster, scenario, rng, history)
        try:
            # The workloads' threads end on every path, so nothing keeps talking to a stopped cluster.
            if not producer.wait_acked(100, timeout_s=30):
                liveness.append("no acknowledgement within 30 s of the start, before any fault")
            if scenario.reassign:
                reassigner = ReassignmentWorkload(bootstrap, TOPIC, sorted(cluster.brokers), history,
                                                  random.Random(rng.random()), others_move=scenario.self_healing).start()
            if scenario.churn:
                # Its own generator, so that turning it on leaves the nemesis schedule as it was.
                churner = ChurnWorkload(bootstrap, cluster.zk.connect, history,
                                        random.Random(f"churn/{scenario.nemesis}/{scenario.seed}")).start()
            if scenario.txn:
                # Its own generator too. Its init_transactions creates __transaction_state.
                txn = TransactionalWorkload(bootstrap, TXN_TOPIC, history,
                                            random.Random(f"txn/{scenario.nemesis}/{scenario.seed}"),
                                            scenario.partitions).start()
                if not txn.wait_committed(1, timeout_s=60):
                    liveness.append("no transaction committed within 60 s of the start, before any fault")
            liveness += nemesis.run(producer)
            progress(f"faults done, {producer.acked} acknowledged")
            if reassigner is not None or scenario.self_healing:
                if reassigner is not None:
                    reassigner.stop()
                # Healing moves too, of any topic: the final reads want every partition settled.
                if not _wait_no_reassignment(cluster, 90, every_topic=scenario.self_healing):
                    liveness.append("reassignments still running 90 s after the workload stopped")
            if reassigner is not None:
                error = reassigner.clear_throttles()
                if error:
                    liveness.append(f"could not clear the reassignment throttles: {error}")
                topic_config = cluster.zk_json(f"/config/topics/{TOPIC}")
                left = [k for k in (topic_config[0].get("config", {}) if topic_config else {}) if "throttled" in k]
                if left:
                    liveness.append(f"throttle configs left on topic {TOPIC} after the moves finished: {left}")
            if churner is not None:
                churner.wait_exercised(timeout_s=30)
                churner.stop()
                churn_final, problems = churner.final_state(cluster.kazoo)
                liveness += problems
            if txn is not None:
                # Transactions must commit again once the faults are gone.
                if not txn.wait_committed(txn.committed + 3, timeout_s=60):
                    liveness.append("no 3 transactions committed within 60 s after the last fault")
                # A fault that stalled the transactions for most of the run leaves few to check.
                txn.wait_committed(TXNS_TO_CHECK, timeout_s=60)
                txn.finish()
                if txn.fatal:
                    liveness.append(f"the transactional workload failed: {txn.fatal}")
            remaining = producer.finish(timeout_s=60)
            if producer.fatal:
                liveness.append(f"the producer (librdkafka) stopped on a fatal error: {producer.fatal}")
            if remaining:
                liveness.append(f"{remaining} messages unanswered 60 s after the producer stopped")
            try:
                cluster.wait_full_isr(topics, scenario.partitions, timeout_s=60)
            except AssertionError as exc:
                liveness.append(str(exc))
            consumed, hw = consume_all(cluster.bootstrap, TOPIC, scenario.partitions)
            assignment, ongoing = topic_assignment(cluster)
            every_topic: dict[str, dict[int, tuple[int, ...]]] = {}
            if scenario.self_healing:
                # Off before the brokers stop, so that the stopping ones are not healed.
                try:
                    alter_broker_defaults(cluster.bootstrap, delete=("self.healing.enable",))
                except Exception as exc:
                    liveness.append(f"could not turn self-healing off: {exc}")
                every_topic = all_assignments(cluster.kazoo)
            if txn is not None:
                txn_final = _read_txn_topic(cluster, scenario.partitions, liveness)
        finally:
            if reassigner is not None:
                reassigner.stop()
            if churner is not None:
                churner.stop()
            producer.finish(timeout_s=1)
            if txn is not None:
                txn.finish(timeout_s=5)
            watcher.stop()
    finally:
        cluster.stop()
    replicas = read_replica_logs({b: cluster.log_dirs(b) for b in cluster.brokers}, TOPIC, scenario.partitions)
    churn_dirs({b: cluster.log_dirs(b) for b in cluster.brokers}, churn_final)
    if txn_final is not None:
        txn_final.replicas = read_replica_logs({b: cluster.log_dirs(b) for b in cluster.brokers}, TXN_TOPIC,
                                               scenario.partitions)
    if history.healing is not None:
        history.healing = read_healing([b.log_path for b in cluster.brokers.values()])
    final = FinalState(consumed, hw, assignment, replicas, ongoing, churn_final, txn_final, every_topic)
    return Outcome(check(history, final), history, final, liveness, nemesis.windows, nemesis.faults)


def _read_txn_topic(cluster: ChaosCluster, partitions: int, liveness: list[str]) -> TxnFinal:
    """The transactional topic read_committed and read_uncommitted, once no transaction is open on it
    (the workload closed its last one; a transaction left open would hold read_committed back)."""
    still_open = wait_stable(cluster.bootstrap, TXN_TOPIC, partitions, timeout_s=60)
    if still_open:
        liveness.append(f"a transaction still open on {TXN_TOPIC} 60 s after the workload stopped: "
                        + ", ".join(f"partition {p} last stable offset {lso}, high watermark {hw}"
                                    for p, (lso, hw) in sorted(still_open.items())))
    committed, _lso = read_isolated(cluster.bootstrap, TXN_TOPIC, partitions, "read_committed")
    uncommitted, hw = read_isolated(cluster.bootstrap, TXN_TOPIC, partitions, "read_uncommitted")
    found = cluster.zk_json(f"/brokers/topics/{TXN_TOPIC}")
    assert found is not None, f"topic {TXN_TOPIC} has no znode"
    assignment = {int(p): tuple(r) for p, r in found[0]["partitions"].items()}
    return TxnFinal(committed, uncommitted, hw, assignment)


def _wait_no_reassignment(cluster: ChaosCluster, timeout_s: float, every_topic: bool = False) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if not (moves_in_flight(cluster.kazoo) if every_topic else topic_assignment(cluster)[1]):
                return True
        except Exception:  # the znode is read through kazoo; a hiccup is retried
            pass
        time.sleep(0.5)
    return False
