"""Workloads that run while the nemesis acts, each recording into a ``History``.

* ``ProducerWorkload``: an idempotent acks=all confluent-kafka producer sending sequence numbers
  (message ``i`` to partition ``i % partitions``) at a steady rate, recording every acknowledgement
  and every error.
* ``ReassignmentWorkload``: starts, replaces and cancels reassignments through the Kafka protocol
  (``headwater.admin.reassign.Cluster``, what ``headwater reassign`` uses), recording which replica
  sets each partition may end at.
* ``LeaderWatcher``: polls each partition's state znode and records (partition, leader epoch, leader).

And the final reads: ``consume_all`` (a consumer from offset 0 to the high watermark) and
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

from chaos_checker import Ack, BatchInfo, History, Reassignment, ReplicaLog
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kazoo.client import KazooClient

from headwater.admin.client import AdminClient
from headwater.admin.reassign import Cluster
from headwater.records.batch import scan_valid_prefix
from headwater.storage.checkpoint import REPLICATION_OFFSET_CHECKPOINT, read_offsets
from headwater.storage.manager import partition_dir_name

REPLICATION_FACTOR = 3  # of the chaos topic; reassignment targets keep it


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
                self.history.acks.append(Ack(msg.partition(), msg.offset(), seq))

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
        while self.acked < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.acked >= count

    def finish(self, timeout_s: float) -> int:
        """Stop sending, wait for every answer; what is still unanswered is recorded as an error."""
        if self._stop.is_set():
            return 0
        self._stop.set()
        self._thread.join()
        try:
            remaining = int(self.producer.flush(timeout_s))
        except KafkaException as exc:
            self.fatal = self.fatal or str(exc)
            remaining = len(self.producer)
        if remaining:
            answered = {a.seq for a in self.history.acks} | {seq for seq, _ in self.history.errors}
            for seq in sorted(set(self.history.sent) - answered):
                self.history.errors.append((seq, f"no answer within {timeout_s:.0f} s of the end"))
        return remaining


def consume_all(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60.0) -> tuple[
        dict[int, list[tuple[int, int]]], dict[int, int]]:
    """Every message below each partition's high watermark: ({partition: [(offset, seq)]}, {partition: hw})."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-checker", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "enable.partition.eof": True, "log_level": 2})
    try:
        hw = {p: int(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]) for p in range(partitions)}
        out: dict[int, list[tuple[int, int]]] = {p: [] for p in range(partitions)}
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
                    out[p].append((offset, int(msg.value())))
                position[p] = max(position[p], offset + 1)
        return out, hw
    finally:
        consumer.close()


def read_replica_logs(log_dirs: dict[int, Path], topic: str, partitions: int) -> dict[int, dict[int, ReplicaLog]]:
    """Batch headers of every replica, read from the segment files (the brokers must be stopped).

    Reading the files, not fetching, compares exactly what each broker would serve after a restart,
    and includes followers, which do not answer consumer fetches.
    """
    out: dict[int, dict[int, ReplicaLog]] = {p: {} for p in range(partitions)}
    for broker, log_dir in log_dirs.items():
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
    return out


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
                 interval_s: tuple[float, float] = (1.5, 3.0)) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.broker_ids = broker_ids
        self.history = history
        self.rng = rng
        self.interval_s = interval_s
        self.requests = 0
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
            ongoing = cluster.ongoing().get((self.topic, p))
            if ongoing is None:
                current = tuple(cluster.assignments([self.topic])[(self.topic, p)])
                if len(current) != REPLICATION_FACTOR:
                    # Metadata from a broker that has not heard yet that the last move finished.
                    self.history.events.append(f"reassign p{p}: skipped, metadata still shows {list(current)}")
                    return
                self._chains[p] = [current]
                request, target = "start", self._new_target(current)
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
                self.history.reassignments[p] = Reassignment(p, request, tuple(dict.fromkeys(before + after)))
                raise
            code, message = errors[(self.topic, p)]
            self.history.events.append(f"reassign p{p} {request} {list(target) if target else ''}: "
                                       f"{'ok' if code == 0 else f'error {code} {message}'}")
            if code == 0:
                self.history.reassignments[p] = Reassignment(p, request, after)
            elif target is not None:
                chain.pop()

    def _new_target(self, current: tuple[int, ...]) -> tuple[int, ...]:
        choices = [t for t in itertools.permutations(self.broker_ids, REPLICATION_FACTOR) if set(t) != set(current)]
        return self.rng.choice(choices)
