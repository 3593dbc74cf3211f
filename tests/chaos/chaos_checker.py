"""The checker: what a chaos run recorded, and the final state, against headwater's promises.

Pure data in, a ``Verdict`` out; no I/O, so ``test_chaos_checker.py`` can feed it broken histories.

History (recorded while the nemesis ran): every message the producer sent (a sequence number, the
partition it was sent to), every acknowledgement (partition, offset), every error, the
reassignments the workload asked for, and every (partition, leader epoch, leader) seen in ZooKeeper.

Final state (after healing, with full ISRs): what a consumer reads from each partition up to the high
watermark, and every replica's batch headers read from its segment files after the brokers stopped.

Checks:
* lost: every acknowledged (partition, offset) holds the acknowledged message;
* duplicate: no message is in the topic twice (the producer is idempotent), none acknowledged twice;
* order: in each partition, messages appear in the order they were sent;
* replicas: every replica of the final assignment holds the same batches (offsets, leader epoch, CRC)
  below the high watermark, and no replica's checkpointed high watermark is past its log end;
* epochs: no two different batches overlap with the same partition leader epoch on any replicas (two
  leaders accepting writes in one epoch), epochs never go back within a replica's log, and ZooKeeper
  never named two leaders for one leader epoch;
* reassignments: each ended at its target or, after a cancel, at its original set, with nothing left
  adding or removing;
* churn (the topic create/delete workload): a topic whose deletion was acknowledged is gone, with no
  znode and no partition directory on any broker; a topic that still exists holds every record
  acknowledged on its current incarnation, where acknowledged, and nothing of an earlier incarnation
  of its name (a recreated topic starts empty); a created topic never vanishes without a delete.
  Records acknowledged on an incarnation that was later deleted are not "lost".
* transactions (the transactional workload, ``chaos_txn_checker``): no aborted value read committed,
  no committed value lost, each transaction all or nothing, no value read twice; and the
  transactional topic's replicas and leader epochs checked as the chaos topic's are.
* self-healing (when the controller's self-healing was on; its actions are read from the brokers'
  logs, ``parse_healing_log``): the reassignment check also accepts where a healing move, or its
  cancel, took a partition after the workload's last request; a partition whose healing move was
  cancelled when its broker came back ends with that broker among its replicas; no healing move
  is still copying away from a broker that has been back for a few seconds; and every partition of
  every topic ends with at least the replication factor's count of replicas.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from chaos_txn_checker import Txn, TxnFinal, check_txns, txn_stats

MAX_LISTED = 8  # per kind of violation: enough to see the pattern, short enough to read


UNKNOWN_OFFSET = -1  # an acknowledgement without an offset (see ``Ack``)


@dataclass(frozen=True)
class Ack:
    """A successful delivery report. Its offset is ``UNKNOWN_OFFSET`` when the idempotent client
    inferred the delivery: a request's answer was lost, but a later batch of the same producer was
    accepted, which the broker only does with every earlier sequence number in the log (librdkafka
    then reports the earlier messages delivered, without an offset)."""

    partition: int
    offset: int
    seq: int


@dataclass(frozen=True)
class Reassignment:
    """The workload's last request for a partition, and the replica sets it may legitimately end at.

    A request whose answer was lost (timeout, connection cut) may or may not have been applied, so the
    workload lists every set the partition may end at.
    """

    partition: int
    request: str  # "start", "replace", "cancel", or "self-healing" (a move the workload found and did not start)
    acceptable: tuple[tuple[int, ...], ...]
    at: float = 0.0  # time.time() when the workload read the state it based the request on


@dataclass
class Incarnation:
    """One life of a churn topic name: created, written to, deleted (records carry ``name/generation/i``)."""

    generation: int
    created: str = "unknown"  # "ok" once the create was acknowledged or the topic was seen in ZooKeeper
    # "none" (never asked), "ok", "error", "unknown" (no answer), or "vanished" (gone, never asked)
    deleted: str = "none"
    acks: list[tuple[int, int, str]] = field(default_factory=list)  # (partition, offset, value)


@dataclass
class ChurnFinal:
    """A churn topic name at the end: its znodes, its records and its partition directories."""

    exists: bool  # /brokers/topics/<name>
    leftover_znodes: list[str]  # /config/topics/<name>, /admin/delete_topics/<name> of a topic that is gone
    assignment: dict[int, tuple[int, ...]]  # partition -> replicas, when it exists
    records: dict[int, list[tuple[int, str]]]  # partition -> [(offset, value)] below the high watermark
    partition_dirs: dict[int, list[str]]  # broker -> live (not "-delete") partition directories of the name


TopicPart = tuple[str, int]  # (topic, partition), of any topic


@dataclass(frozen=True)
class HealingAction:
    """One WARNING line of the controller's self-healing (logger ``headwater.self_healing``)."""

    at: float  # the line's time, on time.time()'s scale
    # "heal" (moves started), "cancel" (a returned broker's moves still copying), "elect", "nothing"
    # (the planner found no move), "failed" (a tick raised: the ERROR line and its traceback)
    kind: str
    broker: int | None = None  # for a cancel: the broker that came back
    brokers: tuple[int, ...] = ()  # heal, nothing: the brokers gone (or with a failed log dir) it is about
    moves: tuple[tuple[TopicPart, tuple[int, ...], tuple[int, ...]], ...] = ()  # heal: (partition, old, new)
    partitions: tuple[TopicPart, ...] = ()  # cancel, elect
    error: str = ""  # failed: the traceback's last line


@dataclass(frozen=True)
class BrokerReturn:
    """A broker killed past the self-healing threshold and started again: the moves away from it
    (partition -> target replicas) still copying when it was started, and ``after_s`` after it
    registered."""

    broker: int
    at: float  # time.time() when it was seen registered again
    copying: dict[TopicPart, tuple[int, ...]]
    still_copying: dict[TopicPart, tuple[int, ...]]
    after_s: float


_TIMESTAMP = r"^(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) "
_HEALING_LINE = re.compile(_TIMESTAMP + r"WARNING .*?self-healing: (?P<what>.*)$")
_FAILED_TICK = re.compile(_TIMESTAMP + r"ERROR .*self-healing tick failed")
_MOVE = re.compile(r"(\S+)-(\d+) \[([\d, ]*)\] -> \[([\d, ]*)\]")


def _ids_of(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def _partitions_of(text: str) -> tuple[TopicPart, ...]:
    out = []
    for name in text.split(", "):
        topic, _, p = name.strip().rpartition("-")
        if topic and p.isdigit():
            out.append((topic, int(p)))
    return tuple(out)


def parse_healing_log(text: str) -> list[HealingAction]:
    """The self-healing actions in a broker's log (``headwater.server.self_healer``'s lines; the
    timestamps are the broker's local time, as logging's asctime writes it)."""
    out: list[HealingAction] = []
    failed: HealingAction | None = None  # its traceback follows, up to the exception's line
    for line in text.splitlines():
        if failed is not None:
            if line.startswith(("Traceback", " ")) or not line:
                continue
            if not re.match(_TIMESTAMP, line):
                out.append(dataclasses.replace(failed, error=line.strip()))
                failed = None
                continue
            out.append(failed)
            failed = None
        if "self-healing" not in line:
            continue
        if (m := _FAILED_TICK.match(line)) is not None:
            failed = HealingAction(_time_of(m["ts"]), "failed")
            continue
        m = _HEALING_LINE.match(line)
        if m is None:
            continue
        at = _time_of(m["ts"])
        what = m["what"]
        if (back := re.match(r"broker (\d+) is back; cancelled the healing moves still copying: (.*?)"
                              r"(?: \(completed meanwhile: .*\))?$", what)):
            out.append(HealingAction(at, "cancel", int(back[1]), partitions=_partitions_of(back[2])))
        elif (done := re.match(r"moves completed; preferred leaders elected for (.*)", what)):
            out.append(HealingAction(at, "elect", partitions=_partitions_of(done[1])))
        elif re.match(r"broker .*; started \d+ moves", what):
            moves = _MOVE.findall(what.split(" moves", 1)[1])
            out.append(HealingAction(at, "heal", brokers=_about(what), moves=tuple(
                ((t, int(p)), _ids_of(old), _ids_of(new)) for t, p, old, new in moves)))
        elif "the planner found no move" in what:
            out.append(HealingAction(at, "nothing", brokers=_about(what)))
    if failed is not None:
        out.append(failed)
    return out


def _about(what: str) -> tuple[int, ...]:
    """The brokers a heal names: ``broker 3 (gone 4 s), 5 (gone 9 s); ...`` or ``broker 2 (3 replicas
    in a failed log dir for 4 s); ...``."""
    return tuple(int(b) for b in re.findall(r"(\d+) \((?:gone|\d+ replicas in a failed log dir)", what.split(";")[0]))


def _time_of(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def healing_stats(actions: list[HealingAction], returns: list[BrokerReturn]) -> dict[str, int]:
    heals = [a for a in actions if a.kind == "heal"]
    cancels = [a for a in actions if a.kind == "cancel"]
    return dict(heals=len(heals), heal_moves=sum(len(a.moves) for a in heals), cancels=len(cancels),
                cancelled_moves=sum(len(a.partitions) for a in cancels),
                elections=sum(1 for a in actions if a.kind == "elect"),
                failed_ticks=sum(1 for a in actions if a.kind == "failed"),
                returns_mid_heal=sum(1 for r in returns if r.copying))


@dataclass
class History:
    seed: int
    nemesis: str
    partitions: int
    sent: dict[int, int] = field(default_factory=dict)  # seq -> partition it was sent to
    acks: list[Ack] = field(default_factory=list)
    errors: list[tuple[int, str]] = field(default_factory=list)  # (seq, error)
    reassignments: dict[int, Reassignment] = field(default_factory=dict)  # partition -> last request
    leaders_seen: set[tuple[int, int, int]] = field(default_factory=set)  # (partition, leader epoch, leader)
    events: list[str] = field(default_factory=list)  # what the nemesis did, for the verdict
    sent_at: dict[int, float] = field(default_factory=dict)  # seq -> time.monotonic() when handed to the producer
    acked_at: dict[int, float] = field(default_factory=dict)  # seq -> time.monotonic() when its acknowledgement came
    churn: dict[str, list[Incarnation]] = field(default_factory=dict)  # topic name -> its incarnations in order
    txns: list[Txn] = field(default_factory=list)  # the transactional workload's, in the order they ran
    topic: str = "chaos"  # the producer's (and the reassignment workload's) topic
    healing: list[HealingAction] | None = None  # None: self-healing was off
    returns: list[BrokerReturn] = field(default_factory=list)


@dataclass(frozen=True)
class BatchInfo:
    base_offset: int
    last_offset: int
    leader_epoch: int
    crc: int


@dataclass
class ReplicaLog:
    broker: int
    high_watermark: int
    batches: list[BatchInfo]


@dataclass
class FinalState:
    consumed: dict[int, list[tuple[int, int]]]  # partition -> [(offset, seq)] in offset order
    high_watermark: dict[int, int]  # partition -> the leader's high watermark at the end
    assignment: dict[int, tuple[int, ...]]  # partition -> final replicas
    replicas: dict[int, dict[int, ReplicaLog]]  # partition -> broker -> its log
    ongoing: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=dict)  # p -> (adding, removing)
    churn: dict[str, ChurnFinal] = field(default_factory=dict)  # churn topic name -> its final state
    txn: TxnFinal | None = None  # the transactional topic, when the transactional workload ran
    # Every topic's final replicas (read with self-healing on, which moves any topic's partitions)
    topics: dict[str, dict[int, tuple[int, ...]]] = field(default_factory=dict)
    replication_factor: int = 3  # of every topic the run creates (and of the internal ones)


@dataclass
class Verdict:
    seed: int
    nemesis: str
    violations: dict[str, list[str]]
    stats: dict[str, int]

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())

    def __str__(self) -> str:
        s = self.stats
        head = (f"chaos nemesis={self.nemesis} seed={self.seed}: "
                f"{s['sent']} sent, {s['acked']} acknowledged, {s['errors']} failed, "
                f"{s['consumed']} read back, {s['batches_compared']} batches compared over {s['replicas']} replicas, "
                f"{s['reassignments']} reassigned partitions checked"
                + (f", {s['churn_incarnations']} churn topic incarnations" if s.get("churn_incarnations") else "")
                + (f", {s['txns']} transactions ({s['txns_committed']} committed, {s['txns_aborted']} aborted, "
                   f"{s['txns_unknown']} unknown; {s['txn_read_committed']} values read committed)"
                   if s.get("txns") else "")
                + (f", self-healing: {s['heals']} heals ({s['heal_moves']} moves), {s['cancels']} cancels "
                   f"({s['cancelled_moves']} moves), {s['elections']} elections"
                   + (f", {s['returns_mid_heal']} brokers back mid-heal" if s["returns_mid_heal"] else "")
                   + (f", {s['failed_ticks']} failed ticks" if s["failed_ticks"] else "")
                   if "heals" in s else ""))
        if self.ok:
            return f"{head}\n  OK: no violation"
        lines = [head, f"  VIOLATIONS ({sum(len(v) for v in self.violations.values())}):"]
        for kind, items in self.violations.items():
            for item in items[:MAX_LISTED]:
                lines.append(f"  - {kind}: {item}")
            if len(items) > MAX_LISTED:
                lines.append(f"  - {kind}: ... and {len(items) - MAX_LISTED} more")
        lines.append(f"  reproduce: CHAOS_SEED={self.seed} CHAOS_NEMESES={self.nemesis} make chaos")
        return "\n".join(lines)


def check(history: History, final: FinalState) -> Verdict:
    v: dict[str, list[str]] = defaultdict(list)
    where_of: dict[int, list[tuple[int, int]]] = defaultdict(list)  # seq -> [(partition, offset)] in the topic
    at: dict[tuple[int, int], int] = {}  # (partition, offset) -> seq
    for p, records in final.consumed.items():
        for offset, seq in records:
            where_of[seq].append((p, offset))
            at[(p, offset)] = seq

    # lost: an acknowledged record must be exactly where the acknowledgement said.
    acked_where: dict[int, tuple[int, int]] = {}
    for a in history.acks:
        if a.offset == UNKNOWN_OFFSET:
            # Not at a known offset, but it must be in the partition it went to (once: see duplicate).
            if not any(p == a.partition for p, _ in where_of.get(a.seq, ())):
                v["lost"].append(f"message {a.seq} acknowledged on partition {a.partition} (offset not reported) "
                                 "is not in that partition")
            continue
        if a.seq in acked_where and acked_where[a.seq] != (a.partition, a.offset):
            v["duplicate"].append(f"message {a.seq} acknowledged twice, at {_po(*acked_where[a.seq])} and {_po(a.partition, a.offset)}")
        acked_where[a.seq] = (a.partition, a.offset)
        found = at.get((a.partition, a.offset))
        if found is None:
            hw = final.high_watermark.get(a.partition, 0)
            v["lost"].append(f"message {a.seq} acknowledged at {_po(a.partition, a.offset)} is gone "
                             f"(partition high watermark {hw})")
        elif found != a.seq:
            v["lost"].append(f"message {a.seq} acknowledged at {_po(a.partition, a.offset)}, "
                             f"but that offset holds message {found}")

    # duplicate: idempotence means each message is in the topic at most once.
    for seq, places in sorted(where_of.items()):
        if len(places) > 1:
            v["duplicate"].append(f"message {seq} is in the topic {len(places)} times: "
                                  + ", ".join(_po(p, o) for p, o in places))

    # order: per partition, sequence numbers go up with offsets (the producer sends them in order).
    for p, records in sorted(final.consumed.items()):
        last_seq, last_offset = -1, -1
        for offset, seq in records:
            sent_to = history.sent.get(seq)
            if sent_to is None:
                v["order"].append(f"{_po(p, offset)} holds message {seq}, which was never sent")
                continue
            if sent_to != p:
                v["order"].append(f"message {seq} was sent to partition {sent_to} but is at {_po(p, offset)}")
            if seq < last_seq:
                v["order"].append(f"partition {p}: message {seq} at offset {offset} after message {last_seq} "
                                  f"at offset {last_offset}")
            last_seq, last_offset = max(last_seq, seq), offset

    _check_replicas(final, v)
    _check_epochs(history, final, v)
    _check_reassignments(history, final, v)
    _check_churn(history, final, v)
    if history.healing is not None:
        _check_healing(history, final, v)
    if final.txn is not None:
        check_txns(history.txns, final.txn, v)
        _check_txn_replicas(final.txn, v)

    replicas = sum(len(r) for r in final.replicas.values())
    compared = sum(len(log.batches) for logs in final.replicas.values() for log in logs.values())
    stats = dict(sent=len(history.sent), acked=len(history.acks), errors=len(history.errors),
                 consumed=sum(len(r) for r in final.consumed.values()), replicas=replicas, batches_compared=compared,
                 reassignments=len(history.reassignments),
                 churn_incarnations=sum(len(x) for x in history.churn.values()),
                 **txn_stats(history.txns, final.txn),
                 **(healing_stats(history.healing, history.returns) if history.healing is not None else {}))
    return Verdict(history.seed, history.nemesis, {k: list(x) for k, x in v.items() if x}, stats)


def _po(partition: int, offset: int) -> str:
    return f"{partition}@{offset}"


def _check_replicas(final: FinalState, v: dict[str, list[str]]) -> None:
    """Every replica of the final assignment holds the same batches below the high watermark."""
    for p, logs_of in sorted(final.replicas.items()):
        for broker, log in sorted(logs_of.items()):
            # A replica's own high watermark (its checkpoint) never runs past the data it holds.
            if log.batches and log.high_watermark > log.batches[-1].last_offset + 1:
                v["replicas"].append(f"partition {p}: broker {broker}'s high watermark {log.high_watermark} is past "
                                     f"its log end {log.batches[-1].last_offset + 1}")
    for p, replicas in sorted(final.assignment.items()):
        hw = final.high_watermark.get(p, 0)
        logs = final.replicas.get(p, {})
        below: dict[int, list[BatchInfo]] = {}
        for broker in replicas:
            log = logs.get(broker)
            if log is None:
                if hw > 0:
                    v["replicas"].append(f"partition {p}: replica on broker {broker} has no log, high watermark {hw}")
                continue
            below[broker] = [b for b in log.batches if b.base_offset < hw]
            end = below[broker][-1].last_offset + 1 if below[broker] else 0
            if end < hw:
                v["replicas"].append(f"partition {p}: replica on broker {broker} ends at offset {end}, "
                                     f"below the high watermark {hw}")
        if not below:
            continue
        ref_broker = min(below)
        ref = below[ref_broker]
        for broker, batches in sorted(below.items()):
            if broker == ref_broker or batches == ref:
                continue
            diff = _first_difference(ref, batches)
            v["replicas"].append(f"partition {p}: brokers {ref_broker} and {broker} differ below the high watermark "
                                 f"{hw}: {diff}")


def _first_difference(a: list[BatchInfo], b: list[BatchInfo]) -> str:
    def show(x: BatchInfo | None) -> str:
        if x is None:
            return "nothing"
        return f"offsets {x.base_offset}-{x.last_offset} epoch {x.leader_epoch} crc {x.crc:08x}"

    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else None
        y = b[i] if i < len(b) else None
        if x != y:
            return f"batch {i}: {show(x)} vs {show(y)}"
    return "same batches"


def _check_txn_replicas(txn: TxnFinal, v: dict[str, list[str]]) -> None:
    """The transactional topic's replicas, as the chaos topic's: same batches (markers included) below
    the high watermark, one leader per epoch. Reported under the same kinds, naming the topic."""
    sub: dict[str, list[str]] = defaultdict(list)
    _check_replicas(FinalState({}, txn.high_watermark, txn.assignment, txn.replicas), sub)
    _check_log_epochs(txn.replicas, sub)
    for kind, items in sub.items():
        v[kind] += [f"transactional topic: {x}" for x in items]


def _check_epochs(history: History, final: FinalState, v: dict[str, list[str]]) -> None:
    _check_log_epochs(final.replicas, v)
    leader_of: dict[tuple[int, int], set[int]] = defaultdict(set)
    for p, epoch, leader in history.leaders_seen:
        if leader >= 0:
            leader_of[(p, epoch)].add(leader)
    for (p, epoch), leaders in sorted(leader_of.items()):
        if len(leaders) > 1:
            v["epochs"].append(f"partition {p}: ZooKeeper named leaders {sorted(leaders)} for leader epoch {epoch}")


def _check_log_epochs(replicas: dict[int, dict[int, ReplicaLog]], v: dict[str, list[str]]) -> None:
    for p, logs in sorted(replicas.items()):
        by_epoch: dict[int, set[BatchInfo]] = defaultdict(set)
        for broker, log in sorted(logs.items()):
            prev = -1
            for b in log.batches:
                by_epoch[b.leader_epoch].add(b)
                if b.leader_epoch < prev:
                    v["epochs"].append(f"partition {p}: broker {broker}'s log goes back from leader epoch {prev} "
                                       f"to {b.leader_epoch} at offset {b.base_offset}")
                prev = max(prev, b.leader_epoch)
        # One leader per epoch appends one sequence of batches: the batches of one epoch, over all
        # replicas, never overlap unless they are the same batch.
        for epoch, batches in sorted(by_epoch.items()):
            ordered = sorted(batches, key=lambda b: (b.base_offset, b.last_offset, b.crc))
            for x, y in itertools.pairwise(ordered):
                if y.base_offset <= x.last_offset:
                    v["epochs"].append(f"partition {p}: two different batches in leader epoch {epoch}: offsets "
                                       f"{x.base_offset}-{x.last_offset} crc {x.crc:08x} and "
                                       f"{y.base_offset}-{y.last_offset} crc {y.crc:08x} (two leaders in one epoch)")


# A healing action logged this long before the workload read the state may still be missing from
# what it read (the controller answers, then the line is written; the clocks are the same machine's).
HEALING_SLACK_S = 0.5


def _healing_sets(actions: list[HealingAction], tp: TopicPart, since: float) -> list[tuple[int, ...]]:
    """The replica sets the self-healing actions on ``tp`` logged after ``since`` may have left it at:
    a heal's target or (not yet copied, then cancelled) its original set; a cancel's original set."""
    out: list[tuple[int, ...]] = []
    original: tuple[int, ...] | None = None
    for a in sorted(actions, key=lambda a: a.at):
        for moved, old, new in a.moves:
            if moved == tp:
                original = old
                if a.at >= since:
                    out += [new, old]
        if a.kind == "cancel" and tp in a.partitions and original is not None and a.at >= since:
            out.append(original)
    return out


def _check_reassignments(history: History, final: FinalState, v: dict[str, list[str]]) -> None:
    for p, r in sorted(history.reassignments.items()):
        got = final.assignment.get(p)
        acceptable = list(r.acceptable)
        if history.healing:
            acceptable += _healing_sets(history.healing, (history.topic, p), r.at - HEALING_SLACK_S)
        acceptable = list(dict.fromkeys(acceptable))
        ok_sets = {frozenset(s) for s in acceptable}
        if got is None or frozenset(got) not in ok_sets:
            v["reassignment"].append(f"partition {p}: after {r.request}, replicas are {list(got or ())}, expected one of "
                                     + " or ".join(str(list(s)) for s in acceptable))
    for p, (adding, removing) in sorted(final.ongoing.items()):
        if adding or removing:
            v["reassignment"].append(f"partition {p}: still reassigning at the end (adding {list(adding)}, "
                                     f"removing {list(removing)})")


def _check_healing(history: History, final: FinalState, v: dict[str, list[str]]) -> None:
    actions = sorted(history.healing or [], key=lambda a: a.at)
    assignments = {**final.topics, history.topic: final.assignment}

    def touched_after(tp: TopicPart, at: float) -> bool:
        """Something else may have moved ``tp`` after ``at``: a later heal, or the workload."""
        if any(a.at > at and any(moved == tp for moved, _old, _new in a.moves) for a in actions):
            return True
        r = history.reassignments.get(tp[1]) if tp[0] == history.topic else None
        return r is not None and r.at >= at - HEALING_SLACK_S

    def name(tp: TopicPart) -> str:
        return f"{tp[0]}-{tp[1]}"

    # The churn workload deletes and recreates its topics: a name's final replicas may be a later
    # incarnation's.
    for cancel in (a for a in actions if a.kind == "cancel"):
        for tp in cancel.partitions:
            got = assignments.get(tp[0], {}).get(tp[1])
            if got is None or tp[0] in history.churn or touched_after(tp, cancel.at):
                continue
            if cancel.broker not in got:
                v["self-healing"].append(f"{name(tp)}: its healing move was cancelled when broker {cancel.broker} came "
                                         f"back, yet it ended at {list(got)}, without that broker's replica")
    for back in history.returns:
        for tp, target in sorted(back.still_copying.items()):
            healing = any(moved == tp and set(new) == set(target) for a in actions if a.at <= back.at
                          for moved, _old, new in a.moves)
            if healing and not touched_after(tp, back.at):
                v["self-healing"].append(f"{name(tp)}: still moving away from broker {back.broker} to {list(target)} "
                                         f"{back.after_s:.0f} s after it came back (a healing move not cancelled)")
    for topic, partitions in sorted(final.topics.items()):
        for p, replicas in sorted(partitions.items()):
            if len(set(replicas)) < final.replication_factor:
                v["replication"].append(f"{topic}-{p} ends with {len(set(replicas))} replicas {list(replicas)}, "
                                        f"fewer than {final.replication_factor}")


def _check_churn(history: History, final: FinalState, v: dict[str, list[str]]) -> None:
    for name, lives in sorted(history.churn.items()):
        end = final.churn.get(name)
        if end is None or not lives:
            continue
        last = lives[-1]
        for life in lives:
            if life.deleted == "vanished":
                v["churn"].append(f"topic {name} (incarnation {life.generation}) vanished without a delete")
        if not end.exists:
            for path in end.leftover_znodes:
                v["churn"].append(f"topic {name} is gone but znode {path} is left")
            for broker, dirs in sorted(end.partition_dirs.items()):
                if dirs:
                    v["churn"].append(f"topic {name} is gone but broker {broker} still has {sorted(dirs)}")
            if last.created == "ok" and last.deleted == "none":
                v["churn"].append(f"topic {name} (incarnation {last.generation}) vanished without a delete")
            continue
        if last.deleted == "ok":
            v["churn"].append(f"topic {name} (incarnation {last.generation}) still exists after its delete was "
                              "acknowledged")
            continue
        # It exists, so it is the last incarnation: the workload creates a name only when it is gone.
        for p, records in sorted(end.records.items()):
            for offset, value in records:
                gen = value.split("/")[1] if value.count("/") == 2 else "?"
                if value.split("/")[0] != name or gen != str(last.generation):
                    v["churn"].append(f"topic {name} (incarnation {last.generation}) holds {value!r} at "
                                      f"{_po(p, offset)}: not written to this incarnation")
        at = {(p, o): val for p, records in end.records.items() for o, val in records}
        for p, offset, value in last.acks:
            if offset == UNKNOWN_OFFSET:
                if value not in {val for o, val in end.records.get(p, [])}:
                    v["lost"].append(f"topic {name}: {value!r} acknowledged on partition {p} (offset not reported) "
                                     "is not in that partition")
                continue
            found = at.get((p, offset))
            if found != value:
                v["lost"].append(f"topic {name}: {value!r} acknowledged at {_po(p, offset)} is "
                                 + ("gone" if found is None else f"replaced by {found!r}"))
        replicas = {b for r in end.assignment.values() for b in r}
        for broker, dirs in sorted(end.partition_dirs.items()):
            stray = [d for d in dirs if broker not in end.assignment.get(_dir_partition(d), ())]
            if stray:
                v["churn"].append(f"topic {name}: broker {broker} holds {sorted(stray)}, not a replica "
                                  f"(replicas {sorted(replicas)}): left from an earlier incarnation")


def _dir_partition(dirname: str) -> int:
    return int(dirname.rsplit("-", 1)[1])
