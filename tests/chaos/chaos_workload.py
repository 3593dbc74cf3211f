"""Workloads that run while the nemesis acts, each recording into a ``History``.

* ``ProducerWorkload``: an idempotent acks=all confluent-kafka producer sending sequence numbers
  (message ``i`` to partition ``i % partitions``) at a steady rate, recording every acknowledgement
  and every error.
* ``ReassignmentWorkload``: starts, replaces and cancels reassignments through the Kafka protocol
  (``headwater.admin.reassign.Cluster``, what ``headwater reassign`` uses), recording which replica
  sets each partition may end at.
  A share of the starts is throttled the way ``headwater reassign --execute --throttle`` does it
  (throttled-replica topic configs and broker rates), and the throttles are cleared once nothing
  moves, as ``--verify`` does.
* ``ChurnWorkload``: creates small topics, writes a few acks=all records to each, deletes them and
  creates the names again, recording each incarnation of each name.
* ``TransactionalWorkload``: a producer with a transactional.id writing a few values per
  transaction over the partitions of its own topic, committing or aborting each (seeded), recording
  each transaction's values and outcome (committed, aborted or unknown).
* ``LeaderWatcher``: polls each partition's state znode and records (partition, leader epoch, leader).

For self-healing: ``alter_broker_defaults`` (cluster-wide dynamic broker configs), ``moves_in_flight``
and ``all_assignments`` (every topic's, from ZooKeeper), ``read_healing`` (the controller's actions,
from the brokers' logs).

And the final reads: ``consume_all`` (a consumer from offset 0 to the high watermark),
``read_isolated`` (the transactional topic, read_committed or read_uncommitted) and
``read_replica_logs`` (batch headers straight from the segment files, after the brokers stopped).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import random
import threading
import time
from pathlib import Path
from typing import Any

from chaos_checker import (
    UNKNOWN_OFFSET,
    Ack,
    BatchInfo,
    ChurnFinal,
    HealingAction,
    History,
    Incarnation,
    Reassignment,
    ReplicaLog,
    parse_healing_log,
)
from chaos_txn_checker import Txn
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka.protocol.admin import DeleteTopicsRequest, IncrementalAlterConfigsRequest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from headwater.admin.client import AdminClient
from headwater.admin.reassign import (
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
    OP_DELETE,
    OP_SET,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    Cluster,
    clear_throttles,
    move_map,
    throttled_replicas,
)
from headwater.admin.topics import create_topic
from headwater.protocol.errors import ErrorCode
from headwater.records.batch import scan_valid_prefix
from headwater.spark.producer import flush_deliveries
from headwater.storage.checkpoint import REPLICATION_OFFSET_CHECKPOINT, read_offsets
from headwater.storage.manager import partition_dir_name

REPLICATION_FACTOR = 3  # of the chaos topic; reassignment targets keep it
THROTTLE_SHARE = 0.4  # of the reassignment starts
# Bytes/s per broker. The chaos topic takes ~10-30 KB/s, so a mover still catches up, slowly at the low end.
THROTTLE_RATES = (100_000, 400_000, 2_000_000)


def encode(seq: int) -> bytes:
    return b"%012d" % seq


class ProducerWorkload:
    def __init__(self, bootstrap: str, topic: str, history: History, rate_per_s: float = 300.0) -> None:
        self.topic = topic
        self.history = history
        self.rate_per_s = rate_per_s
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.producer = Producer({
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            # Longer than any fault, so a fault shows up as a delay, not as a failed delivery.
            "message.timeout.ms": 60_000,
            "retry.backoff.ms": 50,
            "topic.metadata.refresh.interval.ms": 1000,
            "log_level": 2,  # faults make librdkafka log every refused connection; the verdict says what matters
            # Bounded, as an application's buffer would be: while a partition is unavailable the
            # producer waits (BufferError) instead of piling up minutes of messages into huge retries.
            "queue.buffering.max.messages": 2000,
            "batch.num.messages": 500,
        })
        self.fatal: str | None = None  # a fatal client error ends the workload; the run reports it
        self._thread = threading.Thread(target=self._run, name="chaos-producer", daemon=True)

    @property
    def acked(self) -> int:
        return len(self.history.acks)

    def _on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        seq = int(msg.value())
        with self._lock:
            if err is not None:
                self.history.errors.append((seq, str(err)))
            else:
                self.history.acked_at[seq] = time.monotonic()
                offset = msg.offset()
                self.history.acks.append(Ack(msg.partition(), UNKNOWN_OFFSET if offset is None or offset < 0 else offset, seq))

    def start(self) -> ProducerWorkload:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self._produce_loop()
        except KafkaException as exc:
            self.fatal = str(exc)

    def _produce_loop(self) -> None:
        start, seq = time.monotonic(), 0
        while not self._stop.is_set():
            due = start + seq / self.rate_per_s
            now = time.monotonic()
            if now < due:
                self.producer.poll(min(due - now, 0.05))
                continue
            partition = seq % self.history.partitions
            # Before produce(): the acknowledgement may arrive (in poll) before the next line runs.
            self.history.sent_at[seq] = time.monotonic()
            try:
                self.producer.produce(self.topic, value=encode(seq), partition=partition, on_delivery=self._on_delivery)
            except BufferError:
                self.producer.poll(0.05)
                continue
            self.history.sent[seq] = partition
            seq += 1
            self.producer.poll(0)

    def wait_acked(self, count: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        # A producer stopped by a fatal error acknowledges nothing more: no point waiting it out.
        while self.acked < count and time.monotonic() < deadline and self.fatal is None:
            time.sleep(0.05)
        return self.acked >= count

    def finish(self, timeout_s: float) -> int:
        """Stop sending, wait for every answer; what is still unanswered is recorded as an error."""
        if self._stop.is_set():
            return 0
        self._stop.set()
        self._thread.join()
        try:
            # After a fatal error nothing more is delivered: what is queued stays unanswered. Not flush():
            # see flush_deliveries.
            remaining = len(self.producer) if self.fatal else flush_deliveries(self.producer, timeout_s)
        except KafkaException as exc:
            self.fatal = self.fatal or str(exc)
            remaining = len(self.producer)
        if remaining:
            answered = {a.seq for a in self.history.acks} | {seq for seq, _ in self.history.errors}
            for seq in sorted(set(self.history.sent) - answered):
                self.history.errors.append((seq, f"no answer within {timeout_s:.0f} s of the end"))
        return remaining


# An error built from a ListOffsets answer's code does not carry librdkafka's retriable flag.
RETRIED_END_ERRORS = {KafkaError.OFFSET_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION,
                      KafkaError.LEADER_NOT_AVAILABLE}


def end_offsets(consumer: Consumer, topic: str, partitions: int, timeout_s: float = 30.0) -> dict[int, int]:
    """Each partition's end for the consumer's isolation level (ListOffsets LATEST), asked again on a
    retriable error: a leader elected moments ago answers OFFSET_NOT_AVAILABLE until its high
    watermark reaches the start of its epoch, and librdkafka hands that error back without retrying."""
    deadline = time.monotonic() + timeout_s
    out = {}
    for p in range(partitions):
        while True:
            try:
                out[p] = int(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1])
                break
            except KafkaException as exc:
                if exc.args[0].code() not in RETRIED_END_ERRORS or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    return out


def consume_all(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60.0) -> tuple[
        dict[int, list[tuple[int, int]]], dict[int, int]]:
    """Every message below each partition's high watermark: ({partition: [(offset, seq)]}, {partition: hw})."""
    raw, hw = consume_raw(bootstrap, topic, partitions, timeout_s)
    return {p: [(o, int(v)) for o, v in records] for p, records in raw.items()}, hw


def consume_raw(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60.0) -> tuple[
        dict[int, list[tuple[int, bytes]]], dict[int, int]]:
    """Like ``consume_all``, with the values as they are."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-checker", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "enable.partition.eof": True, "log_level": 2})
    try:
        hw = end_offsets(consumer, topic, partitions)
        out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        position = dict.fromkeys(range(partitions), 0)
        deadline = time.monotonic() + timeout_s
        while any(position[p] < hw[p] for p in range(partitions)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"read back stopped at {position}, high watermarks {hw}")
            for msg in consumer.consume(500, timeout=0.5):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise RuntimeError(f"consumer error: {err}")
                p, offset = msg.partition(), msg.offset()
                if offset < hw[p]:
                    out[p].append((offset, bytes(msg.value() or b"")))
                position[p] = max(position[p], offset + 1)
        return out, hw
    finally:
        consumer.close()


def read_replica_logs(log_dirs: dict[int, list[Path]], topic: str, partitions: int) -> dict[int, dict[int, ReplicaLog]]:
    """Batch headers of every replica, read from the segment files (the brokers must be stopped).

    Reading the files, not fetching, compares exactly what each broker would serve after a restart,
    and includes followers, which do not answer consumer fetches.
    """
    out: dict[int, dict[int, ReplicaLog]] = {p: {} for p in range(partitions)}
    for broker, dirs in log_dirs.items():
        for log_dir in dirs:
            _read_dir(out, broker, log_dir, topic, partitions)
    return out


def _read_dir(out: dict[int, dict[int, ReplicaLog]], broker: int, log_dir: Path, topic: str, partitions: int) -> None:
    hws = read_offsets(log_dir / REPLICATION_OFFSET_CHECKPOINT) if (log_dir / REPLICATION_OFFSET_CHECKPOINT).exists() else {}
    for p in range(partitions):
        pdir = log_dir / partition_dir_name(topic, p)
        if not pdir.is_dir():
            continue
        batches = []
        for seg in sorted(pdir.glob("*.log"), key=lambda f: int(f.stem)):
            valid, _end = scan_valid_prefix(seg.read_bytes())
            batches += [BatchInfo(h.base_offset, h.last_offset, h.partition_leader_epoch, h.crc) for _, h in valid]
        out[p][broker] = ReplicaLog(broker, hws.get((topic, p), 0), batches)


class LeaderWatcher:
    """Polls every partition's state znode (from the root namespace, which no fault cuts off)."""

    def __init__(self, zk_connect: str, topic: str, partitions: int, history: History, interval_s: float = 0.05) -> None:
        self.paths = {p: f"/brokers/topics/{topic}/partitions/{p}/state" for p in range(partitions)}
        self.history = history
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._zk = KazooClient(hosts=zk_connect, timeout=10)
        self._thread = threading.Thread(target=self._run, name="chaos-leaders", daemon=True)

    def start(self) -> LeaderWatcher:
        self._zk.start(timeout=10)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            for p, path in self.paths.items():
                with contextlib.suppress(Exception):
                    data, _stat = self._zk.get(path)
                    state = json.loads(data)
                    self.history.leaders_seen.add((p, int(state["leader_epoch"]), int(state["leader"])))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        with contextlib.suppress(Exception):
            self._zk.stop()
            self._zk.close()


class ReassignmentWorkload:
    """Every few seconds: start a reassignment of a random partition, replace an ongoing one, or cancel it.

    For each partition it keeps the chain of requests since the partition last stood still: the set
    it started from and every target asked for. A request whose answer is lost may or may not have
    been applied, and a "replace" may race with the previous move finishing (then it is a new start
    whose original set is the previous target), so the acceptable end sets are, after an accepted
    start or replace, its target; after an accepted cancel, any set of the chain that the partition
    may have started the cancelled move from.
    """

    def __init__(self, bootstrap: str, topic: str, broker_ids: list[int], history: History, rng: random.Random,
                 interval_s: tuple[float, float] = (1.5, 3.0), others_move: bool = False) -> None:
        self.bootstrap = bootstrap
        # Someone else starts moves too (the controller's self-healing): a move whose target is none
        # the workload asked for is theirs, and the partition's chain starts again from it.
        self.others_move = others_move
        self.topic = topic
        self.broker_ids = broker_ids
        self.history = history
        self.rng = rng
        self.interval_s = interval_s
        self.requests = 0
        self.throttled = False  # a throttle is set and not yet cleared
        self._chains: dict[int, list[tuple[int, ...]]] = {}  # partition -> [original, target, target, ...]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-reassign", daemon=True)

    def start(self) -> ReassignmentWorkload:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.rng.uniform(*self.interval_s)):
            p = self.rng.randrange(self.history.partitions)
            roll = self.rng.random()
            try:
                self._step(p, roll)
            except Exception as exc:  # a fault may hide the controller: try again later
                self.history.events.append(f"reassign p{p}: {type(exc).__name__}: {exc}")

    def _step(self, p: int, roll: float) -> None:
        with AdminClient(self.bootstrap, timeout_s=5) as client:
            cluster = Cluster(client)
            at = time.time()
            moving = cluster.ongoing()
            if self.throttled and not moving:
                self._clear(cluster)
            ongoing = moving.get((self.topic, p))
            if ongoing is not None and self.others_move:
                self._adopt(p, ongoing, at)
            throttle = -1
            if ongoing is None:
                assignments = cluster.assignments([self.topic])
                current = tuple(assignments[(self.topic, p)])
                if len(current) != REPLICATION_FACTOR:
                    # Metadata from a broker that has not heard yet that the last move finished.
                    self.history.events.append(f"reassign p{p}: skipped, metadata still shows {list(current)}")
                    return
                self._chains[p] = [current]
                request, target = "start", self._new_target(current)
                if self.rng.random() < THROTTLE_SHARE:
                    throttle = self.rng.choice(THROTTLE_RATES)
                    self._throttle(cluster, moving, assignments, (self.topic, p), target, throttle)
            elif roll < 0.5:
                request, target = "cancel", None
            else:
                request = "replace"
                target = self._new_target(tuple(r for r in ongoing.replicas if r not in ongoing.adding))
            chain = self._chains.setdefault(p, [tuple(ongoing.replicas)] if ongoing else [])
            previous = self.history.reassignments.get(p)
            before = previous.acceptable if previous and request != "start" else (chain[0],)
            if target is not None:
                chain.append(target)
            after = (target,) if target is not None else tuple(dict.fromkeys(chain[:-1] or chain))
            self.requests += 1
            try:
                errors = cluster.alter({(self.topic, p): list(target) if target is not None else None})
            except Exception:
                # No answer: either outcome is possible.
                self.history.reassignments[p] = Reassignment(p, request, tuple(dict.fromkeys(before + after)), at)
                raise
            code, message = errors[(self.topic, p)]
            self.history.events.append(f"reassign p{p} {request} {list(target) if target else ''}"
                                       f"{f' throttled {throttle} B/s' if throttle >= 0 else ''}: "
                                       f"{'ok' if code == 0 else f'error {code} {message}'}")
            if code == 0:
                self.history.reassignments[p] = Reassignment(p, request, after, at)
            elif target is not None:
                chain.pop()

    def _adopt(self, p: int, ongoing: Any, at: float) -> None:
        """A move of ``p`` whose target the workload never asked for since the partition last stood
        still: someone else's. It ends at its target, or back at its original set if cancelled."""
        target = tuple(r for r in ongoing.replicas if r not in ongoing.removing)
        if any(set(t) == set(target) for t in self._chains.get(p, [])[1:]):
            return
        original = tuple(r for r in ongoing.replicas if r not in ongoing.adding)
        self._chains[p] = [original, target]
        self.history.reassignments[p] = Reassignment(p, "self-healing", (target, original), at)
        self.history.events.append(f"reassign p{p}: found a move it did not start, {list(original)} -> {list(target)}")

    def _throttle(self, cluster: Cluster, moving: dict[tuple[str, int], Any], assignments: dict[tuple[str, int], list[int]],
                  tp: tuple[str, int], target: tuple[int, ...], rate: int) -> None:
        """What ``headwater reassign --execute --throttle`` writes before it starts a move: the topic's
        leader and follower throttled replicas (every moving partition's sources and destinations) and
        the rate on every broker involved."""
        # Before the first write: if a later one fails (a broker cut off), what was written still
        # has to be cleared.
        self.throttled = True
        moves = move_map(moving, assignments, {tp: list(target)})
        for topic, (leader, follower) in sorted(throttled_replicas(moves).items()):
            cluster.alter_configs(RESOURCE_TOPIC, topic, [(LEADER_THROTTLED_REPLICAS, OP_SET, leader),
                                                          (FOLLOWER_THROTTLED_REPLICAS, OP_SET, follower)])
        for b in sorted({b for s, d in moves.values() for b in (*s, *d)}):
            cluster.alter_configs(RESOURCE_BROKER, str(b), [("leader.replication.throttled.rate", OP_SET, str(rate)),
                                                           ("follower.replication.throttled.rate", OP_SET, str(rate))])

    def _clear(self, cluster: Cluster) -> None:
        """What ``headwater reassign --verify`` does once nothing moves: every throttle config deleted."""
        plan: dict[tuple[str, int], list[int]] = {(self.topic, p): [] for p in range(self.history.partitions)}
        clear_throttles(cluster, plan, lambda _line: None)
        self.throttled = False
        self.history.events.append("reassign: throttles cleared, nothing moving")

    def clear_throttles(self, attempts: int = 5) -> str | None:
        """After the workload stopped and the moves finished (the run waits for that); returns the last
        error if every attempt failed (a broker that has just come back may not answer at once)."""
        error = None
        for _ in range(attempts if self.throttled else 0):
            try:
                with AdminClient(self.bootstrap, timeout_s=10) as client:
                    self._clear(Cluster(client))
                return None
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                time.sleep(2)
        return error

    def _new_target(self, current: tuple[int, ...]) -> tuple[int, ...]:
        choices = [t for t in itertools.permutations(self.broker_ids, REPLICATION_FACTOR) if set(t) != set(current)]
        return self.rng.choice(choices)


class ChurnWorkload:
    """Small topics created, written to, deleted and created again under the same names.

    Each step picks a name and looks at ZooKeeper (from the root namespace, never cut off): a name
    being deleted is left alone; a missing name is created (2 partitions, replication factor 3); an
    existing one gets a few acks=all records or is deleted. Records carry ``name/generation/i``, the
    generation counting the name's incarnations, so the checker can tell a recreated topic's records
    from its predecessor's. A create whose answer was lost keeps its generation: if the name is
    still missing next time it is created again under the same one, if it exists it is that one.
    A deleted incarnation gets no more records; if it is still there later, the delete is sent again.
    """

    PARTITIONS = 2
    RECORDS_PER_STEP = 5

    def __init__(self, bootstrap: str, zk_connect: str, history: History, rng: random.Random,
                 names: int = 3, interval_s: tuple[float, float] = (0.5, 1.5)) -> None:
        self.bootstrap = bootstrap
        self.history = history
        self.rng = rng
        self.interval_s = interval_s
        self.names = [f"churn-{i}" for i in range(names)]
        self._written = 0
        self._stop = threading.Event()
        self._deleted = threading.Event()  # set at the first acknowledged delete
        self._zk = KazooClient(hosts=zk_connect, timeout=10)
        self.producer = Producer({
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 2,
            "message.timeout.ms": 10_000,
            "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
            "log_level": 2,
        })
        self._thread = threading.Thread(target=self._run, name="chaos-churn", daemon=True)

    def start(self) -> ChurnWorkload:
        self._zk.start(timeout=10)
        self._thread.start()
        return self

    def wait_exercised(self, timeout_s: float) -> bool:
        """Let the workload run until one delete and a step's worth of records were acknowledged: a
        short fault run may otherwise end after a create and a produce, leaving deletion untested,
        or, when the fault timed out the create, after a delete with nothing written."""
        deadline = time.monotonic() + timeout_s
        while not (self._deleted.is_set() and self.acknowledged() >= self.RECORDS_PER_STEP):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)
        return True

    def acknowledged(self) -> int:
        return sum(len(life.acks) for lives in list(self.history.churn.values()) for life in list(lives))

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join()
        self.producer.flush(15)
        with contextlib.suppress(Exception):
            self._zk.stop()
            self._zk.close()

    def _run(self) -> None:
        while not self._stop.wait(self.rng.uniform(*self.interval_s)):
            name = self.rng.choice(self.names)
            roll = self.rng.random()
            try:
                self._step(name, roll)
            except Exception as exc:  # a fault may hide the controller: try again later
                self.history.events.append(f"churn {name}: {type(exc).__name__}: {exc}")

    def _step(self, name: str, roll: float) -> None:
        # Nothing may be in flight when a name is deleted or created: librdkafka knows topics by name
        # only, and would deliver a record meant for the old incarnation to the new one.
        if self.producer.flush(5):
            return
        lives = self.history.churn.setdefault(name, [])
        if self._zk.exists(f"/admin/delete_topics/{name}") is not None:
            return  # being deleted
        exists = self._zk.exists(f"/brokers/topics/{name}") is not None
        last = lives[-1] if lives else None
        if not exists:
            if last is not None and last.created == "ok" and last.deleted == "none":
                last.deleted = "vanished"  # created and never deleted, yet gone: the checker reports it
                self.history.events.append(f"churn {name} #{last.generation}: gone without a delete")
            if last is None or last.created == "ok":
                last = Incarnation(len(lives) + 1)
                lives.append(last)
            self._create(name, last)
            if last.created == "ok":
                self._produce(name, last)
            return
        if last is None:
            raise AssertionError(f"topic {name} exists but was never created")
        last.created = "ok"  # seen in ZooKeeper: a create whose answer was lost went through
        if last.deleted != "none" or roll < 0.5:
            self._delete(name, last)
        else:
            self._produce(name, last)

    def _create(self, name: str, life: Incarnation) -> None:
        try:
            with AdminClient(self.bootstrap, timeout_s=5) as client:
                # file.delete.delay.ms short, so a deleted partition's "-delete" directory goes soon.
                code, message = create_topic(client, name, self.PARTITIONS, REPLICATION_FACTOR, None,
                                             {"file.delete.delay.ms": "1000"})
        except Exception:
            life.created = "unknown"
            raise
        if code in (0, ErrorCode.TOPIC_ALREADY_EXISTS):
            life.created = "ok"
        self.history.events.append(f"churn create {name} #{life.generation}: {'ok' if code == 0 else f'error {code} {message}'}")

    def _delete(self, name: str, life: Incarnation) -> None:
        state = DeleteTopicsRequest.DeleteTopicState
        try:
            with AdminClient(self.bootstrap, timeout_s=5) as client:
                resp = client.send_to_controller(
                    DeleteTopicsRequest, dict(topic_names=[name], topics=[state(name=name, topic_id=None)], timeout_ms=5000),
                    lambda r: [x.error_code for x in r.responses])
        except Exception:
            if life.deleted != "ok":
                life.deleted = "unknown"
            raise
        code = resp.responses[0].error_code
        if code == 0:
            life.deleted = "ok"
            self._deleted.set()
        elif life.deleted != "ok":
            life.deleted = "error"
        self.history.events.append(f"churn delete {name} #{life.generation}: {'ok' if code == 0 else f'error {code}'}")

    def _produce(self, name: str, life: Incarnation) -> None:
        for i in range(self.RECORDS_PER_STEP):
            self._written += 1
            value = f"{name}/{life.generation}/{self._written}"

            def delivered(err: KafkaError | None, msg: Any, value: str = value) -> None:
                if err is None:
                    offset = msg.offset()
                    life.acks.append((msg.partition(), UNKNOWN_OFFSET if offset is None or offset < 0 else offset, value))

            self.producer.produce(name, value=value.encode(), partition=i % self.PARTITIONS, on_delivery=delivered)
        t0, before = time.monotonic(), len(life.acks)
        self.producer.flush(10)
        self.history.events.append(f"churn produce {name} #{life.generation}: {len(life.acks) - before} of "
                                   f"{self.RECORDS_PER_STEP} acknowledged in {time.monotonic() - t0:.1f} s")

    def _read_back(self, name: str, partitions: int, acknowledged: dict[int, int],
                   timeout_s: float = 30.0) -> dict[int, list[tuple[int, bytes]]]:
        """Every partition's records, read again until its high watermark passes the offsets that were
        acknowledged on it (``acknowledged``: partition -> highest offset) or ``timeout_s`` ends.

        A leader killed before it checkpointed its high watermark (every 5 s) comes back with an older
        one and, when it is still in the ISR with an unchanged epoch (its session expired together with
        the controller's, and it registered again before the next controller looked), leads again with
        that high watermark until its followers fetch once more, as Kafka's does. Records acknowledged
        above it are there but not yet readable; only those still missing at the deadline are lost.
        """
        # A topic created moments ago may not be in every broker's metadata yet ("Unknown partition").
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                records, hw = consume_raw(self.bootstrap, name, partitions)
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
                continue
            if all(hw.get(p, 0) > offset for p, offset in acknowledged.items()) or time.monotonic() > deadline:
                return records
            time.sleep(0.5)

    def final_state(self, kazoo: KazooClient, timeout_s: float = 60.0) -> tuple[dict[str, ChurnFinal], list[str]]:
        """Wait for pending deletions, then read what is left of every name (brokers still running);
        the partition directories are filled in by ``churn_dirs`` after the brokers stopped.
        Returns the states and liveness complaints."""
        problems = []
        deadline = time.monotonic() + timeout_s
        while any(kazoo.exists(f"/admin/delete_topics/{n}") for n in self.names) and time.monotonic() < deadline:
            time.sleep(0.5)
        out = {}
        for name in self.names:
            if kazoo.exists(f"/admin/delete_topics/{name}"):
                problems.append(f"topic {name} still being deleted {timeout_s:.0f} s after the workload stopped")
            exists = kazoo.exists(f"/brokers/topics/{name}") is not None
            leftovers = [] if exists else [z for z in (f"/config/topics/{name}", f"/admin/delete_topics/{name}")
                                           if kazoo.exists(z) is not None]
            assignment: dict[int, tuple[int, ...]] = {}
            records: dict[int, list[tuple[int, str]]] = {}
            if exists:
                data, _stat = kazoo.get(f"/brokers/topics/{name}")
                assignment = {int(p): tuple(r) for p, r in json.loads(data)["partitions"].items()}
                lives = self.history.churn.get(name) or []
                acknowledged: dict[int, int] = {}
                for p, offset, _value in lives[-1].acks if lives else ():
                    if offset != UNKNOWN_OFFSET:
                        acknowledged[p] = max(acknowledged.get(p, -1), offset)
                raw = self._read_back(name, len(assignment), acknowledged)
                records = {p: [(o, v.decode(errors="replace")) for o, v in rs] for p, rs in raw.items()}
            out[name] = ChurnFinal(exists, leftovers, assignment, records, {})
        return out, problems


def churn_dirs(log_dirs: dict[int, list[Path]], final: dict[str, ChurnFinal]) -> None:
    """Fill in each name's live partition directories (``<name>-<p>``, not the ``-delete`` ones that
    a broker removes file.delete.delay.ms after a delete), read after the brokers stopped."""
    for name, state in final.items():
        for broker, dirs in log_dirs.items():
            state.partition_dirs[broker] = sorted(
                d.name for log_dir in dirs for d in log_dir.glob(f"{name}-*")
                if d.is_dir() and d.name[len(name) + 1:].isdigit())


class TransactionalWorkload:
    """One transaction at a time through a producer with a ``transactional.id``: a few unique values
    spread over the topic's partitions, then commit or abort (the seed chooses; ``abort_share`` of
    them aborted). Each transaction is recorded with its outcome as the client saw it (see
    ``chaos_txn_checker``).

    Errors: librdkafka retries most of them itself. A retriable error of commit or abort (a
    timeout) calls it again; any other error before the commit aborts the transaction; when that is
    not possible (fenced, fatal), a new producer with the same transactional.id is made, whose
    init_transactions fences the old one and aborts what it left open (or finishes a commit
    already prepared), so every transaction is closed before the next begins.
    """

    VALUES = (3, 6)  # per transaction, inclusive
    OP_TIMEOUT_S = 30.0  # one call of init/commit/abort; a retriable failure calls it again
    GIVE_UP_S = 90.0  # on one commit or abort before the outcome is unknown (or a new producer made)

    def __init__(self, bootstrap: str, topic: str, history: History, rng: random.Random, partitions: int = 3,
                 transactional_id: str = "chaos-txn", abort_share: float = 0.25, interval_s: float = 0.05) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.history = history
        self.rng = rng
        self.partitions = partitions
        self.transactional_id = transactional_id
        self.abort_share = abort_share
        self.interval_s = interval_s  # between transactions: the machine's 2 cores are shared
        self.producers = 0  # producer instances made (a new one after each fatal error)
        self.fatal: str | None = None  # the workload itself failed; the run reports it
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-txn", daemon=True)

    def start(self) -> TransactionalWorkload:
        self._thread.start()
        return self

    @property
    def committed(self) -> int:
        return sum(1 for t in list(self.history.txns) if t.outcome == "committed")

    def wait_committed(self, count: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while self.committed < count and time.monotonic() < deadline and self.fatal is None:
            time.sleep(0.05)
        return self.committed >= count

    def finish(self, timeout_s: float = 120.0) -> None:
        """Stop after the current transaction (which still ends as chosen, and is closed)."""
        self._stop.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self.fatal = self.fatal or f"the transactional workload did not stop within {timeout_s:.0f} s"

    def _event(self, what: str) -> None:
        self.history.events.append(f"txn {what}")

    def _run(self) -> None:
        try:
            producer = self._new_producer()
            while not self._stop.wait(self.interval_s):
                producer = self._one(producer)
            flush_deliveries(producer, 5)
        except Exception as exc:
            self.fatal = f"{type(exc).__name__}: {exc}"

    def _config(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap,
            "transactional.id": self.transactional_id,
            "linger.ms": 5,
            "retry.backoff.ms": 50,
            # Longer than any fault (3-9 s) plus an election; a transaction left open longer than this
            # is aborted by the coordinator, which the next commit sees as fenced (outcome unknown).
            # librdkafka caps message.timeout.ms to it.
            "transaction.timeout.ms": 30_000,
            "topic.metadata.refresh.interval.ms": 1000,
            "log_level": 2,
        }

    def _new_producer(self) -> Producer:
        """A producer whose init_transactions went through: retried (on a fresh producer after a fatal
        error) until it does, even after the stop, for a while: it is what closes the transaction an
        old producer left."""
        deadline = None
        producer, made = None, False
        while True:
            if producer is None:
                producer, made = Producer(self._config()), True
                self.producers += 1
            try:
                producer.init_transactions(self.OP_TIMEOUT_S)
                if made and self.producers > 1:
                    self._event(f"producer #{self.producers} initialized (fences #{self.producers - 1})")
                return producer
            except KafkaException as exc:
                err = exc.args[0]
                self._event(f"producer #{self.producers} init_transactions: {err.name()}: {err.str()}")
                if not err.retriable():
                    producer = None
            if self._stop.is_set():
                deadline = deadline or time.monotonic() + self.GIVE_UP_S
                if time.monotonic() > deadline:
                    raise RuntimeError(f"init_transactions failed for {self.GIVE_UP_S:.0f} s after the stop")
            time.sleep(0.5)

    def _one(self, producer: Producer) -> Producer:
        """Run one transaction to its end; return the producer for the next one."""
        n = len(self.history.txns)
        first = self.rng.randrange(self.partitions)
        count = self.rng.randint(*self.VALUES)
        # Round-robin from a random partition: with 3 or more values, every partition gets one.
        values = [((first + i) % self.partitions, f"t{n}/{i}") for i in range(count)]
        abort = self.rng.random() < self.abort_share
        txn = Txn(n, values, producer=self.producers, note="chosen" if abort else "")
        self.history.txns.append(txn)
        commit_called = False
        err: KafkaError | None = None
        try:
            producer.begin_transaction()
            for partition, value in values:
                def delivered(err: KafkaError | None, msg: Any, value: str = value) -> None:
                    if err is None and msg.offset() is not None and msg.offset() >= 0:
                        txn.delivered[value] = (msg.partition(), msg.offset())

                producer.produce(self.topic, value=value.encode(), partition=partition, on_delivery=delivered)
                producer.poll(0)
            if abort:
                # Written first, so the abort has records to hide: abort_transaction alone would
                # purge them unsent (linger.ms) and the log would never hold them.
                flush_deliveries(producer, self.OP_TIMEOUT_S)
                self._retrying(producer.abort_transaction)
                txn.outcome = "aborted"
            else:
                commit_called = True
                self._retrying(producer.commit_transaction)
                txn.outcome = "committed"
            return producer
        except (KafkaException, BufferError) as exc:  # BufferError: produce() found the queue full
            err = exc.args[0] if isinstance(exc, KafkaException) else None
            reason = f"{err.name()}: {err.str()}" if err is not None else f"BufferError: {exc}"
            # Before the commit was asked for, nothing can commit it any more: the abort below or
            # the next producer's init_transactions ends it. After, the coordinator may have
            # prepared the commit before the error.
            txn.outcome, txn.note = ("unknown" if commit_called else "aborted"), reason
            self._event(f"transaction {n} {txn.outcome}: {'commit' if commit_called else 'before commit'}: {reason}")
        if err is None or not err.fatal():
            try:
                self._retrying(producer.abort_transaction)
                return producer
            except KafkaException as exc:
                txn.note += f"; abort_transaction: {exc.args[0].name()}"
                self._event(f"transaction {n} abort_transaction: {exc.args[0].name()}: {exc.args[0].str()}")
        return self._new_producer()

    def _retrying(self, call: Any) -> None:
        """commit_transaction or abort_transaction, called again after a retriable error (a timeout:
        librdkafka resumes where it was), for up to GIVE_UP_S."""
        deadline = time.monotonic() + self.GIVE_UP_S
        while True:
            try:
                call(self.OP_TIMEOUT_S)
                return
            except KafkaException as exc:
                err = exc.args[0]
                if err.fatal() or err.txn_requires_abort() or not err.retriable() or time.monotonic() > deadline:
                    raise
                self._event(f"{call.__name__} retried after {err.name()}")


def read_isolated(bootstrap: str, topic: str, partitions: int, isolation: str, timeout_s: float = 60.0) -> tuple[
        dict[int, list[tuple[int, str]]], dict[int, int]]:
    """Every value of a transactional topic from offset 0 to its end, with ``isolation.level``
    ``read_committed`` (the end is the last stable offset) or ``read_uncommitted`` (the high
    watermark): ({partition: [(offset, value)]}, {partition: end}).

    Ends by the partition-EOF events, not by the offsets read as ``consume_raw`` does: markers take
    offsets and aborted records are skipped, so the last offset read may be well below the end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"chaos-checker-{isolation}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest", "enable.partition.eof": True,
                         "isolation.level": isolation, "log_level": 2})
    try:
        # ListOffsets with the consumer's isolation level: the last stable offset for read_committed.
        end = end_offsets(consumer, topic, partitions)
        out: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        done: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while len(done) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{isolation} read of {topic} did not reach {end} for partitions "
                                   f"{sorted(set(range(partitions)) - done)}")
            for msg in consumer.consume(500, timeout=0.5):
                err, p = msg.error(), msg.partition()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if msg.offset() >= end[p]:
                            done.add(p)
                        continue
                    raise RuntimeError(f"consumer error: {err}")
                if msg.offset() < end[p]:
                    out[p].append((msg.offset(), bytes(msg.value() or b"").decode(errors="replace")))
        return out, end
    finally:
        consumer.close()


def wait_stable(bootstrap: str, topic: str, partitions: int, timeout_s: float) -> dict[int, tuple[int, int]]:
    """Wait until no transaction is open on the topic (last stable offset = high watermark); returns
    the partitions where it still is not, as {partition: (last stable offset, high watermark)}."""
    def ends(isolation: str) -> dict[int, int]:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-lso", "isolation.level": isolation,
                      "log_level": 2})
        try:
            return end_offsets(c, topic, partitions)
        finally:
            c.close()

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            lso, hw = ends("read_committed"), ends("read_uncommitted")
            open_ = {p: (lso[p], hw[p]) for p in range(partitions) if lso[p] != hw[p]}
        except KafkaException as exc:  # a broker just back may not answer at once
            open_ = {p: (-1, -1) for p in range(partitions)}
            error = str(exc)
        else:
            error = ""
        if not open_ or time.monotonic() > deadline:
            if error and open_:
                raise RuntimeError(f"could not read the ends of {topic}: {error}")
            return open_
        time.sleep(0.5)


def alter_broker_defaults(bootstrap: str, add: dict[str, str] | None = None, delete: tuple[str, ...] = (),
                          attempts: int = 5) -> None:
    """Set and delete cluster-wide dynamic broker configs (``/config/brokers/<default>``), as
    ``headwater configs --entity-type brokers --entity-default --alter`` does; a broker that has just
    lost its controller or its neighbour may refuse once, so a few attempts."""
    A = IncrementalAlterConfigsRequest.AlterConfigsResource
    ops = [A.AlterableConfig(name=k, config_operation=OP_SET, value=v) for k, v in (add or {}).items()]
    ops += [A.AlterableConfig(name=k, config_operation=OP_DELETE, value=None) for k in delete]
    for attempt in range(attempts):
        try:
            with AdminClient(bootstrap, timeout_s=10) as client:
                resp = client.send(IncrementalAlterConfigsRequest, dict(
                    resources=[A(resource_type=RESOURCE_BROKER, resource_name="", configs=ops)], validate_only=False))
            result = resp.responses[0]
            if result.error_code:
                raise RuntimeError(f"{ErrorCode(result.error_code).name}: {result.error_message}")
            return
        except Exception:
            if attempt == attempts - 1:
                raise
            time.sleep(2)


def moves_in_flight(kazoo: KazooClient) -> dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
    """Every partition of every topic with a reassignment in flight, from the topic znodes (KIP-455):
    (topic, partition) -> (replicas, adding, removing)."""
    out = {}
    for topic in kazoo.get_children("/brokers/topics"):
        try:
            data, _stat = kazoo.get(f"/brokers/topics/{topic}")
        except NoNodeError:  # deleted meanwhile
            continue
        doc = json.loads(data)
        adding, removing = doc.get("adding_replicas") or {}, doc.get("removing_replicas") or {}
        for p in set(adding) | set(removing):
            if adding.get(p) or removing.get(p):
                out[(topic, int(p))] = (tuple(doc["partitions"].get(p, ())), tuple(adding.get(p, ())),
                                        tuple(removing.get(p, ())))
    return out


def all_assignments(kazoo: KazooClient) -> dict[str, dict[int, tuple[int, ...]]]:
    """Every topic's replicas, from ZooKeeper."""
    out = {}
    for topic in kazoo.get_children("/brokers/topics"):
        try:
            data, _stat = kazoo.get(f"/brokers/topics/{topic}")
        except NoNodeError:
            continue
        out[topic] = {int(p): tuple(r) for p, r in json.loads(data)["partitions"].items()}
    return out


def read_healing(log_paths: list[Path]) -> list[HealingAction]:
    """The controller's self-healing actions, from every broker's log (any of them may have been the
    controller), in time order."""
    actions = []
    for path in log_paths:
        with contextlib.suppress(OSError):
            actions += parse_healing_log(path.read_text(errors="replace"))
    return sorted(actions, key=lambda a: a.at)
