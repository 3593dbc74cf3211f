"""Helpers for the reassignment tests on real processes: clients that keep running while partitions
move, the read-back that checks every acknowledged message, and the end state of a move.

* ``LiveProducer``: a confluent-kafka producer thread (acks=all, idempotent) with numbered
  messages; it keeps what was acknowledged, with partition and offset, and librdkafka's log of its
  idempotence state (epoch bumps and their causes) for the failure report.
* ``LiveConsumer``: a confluent-kafka consumer thread that reads every partition from given offsets
  and measures the largest gap between two records of one partition.
* ``read_topic`` / ``check_acked``: everything in the topic (each value checked whole), then: every
  acknowledged message at its offset (``missing_acked`` lists the ones that are not), and no
  message twice.
* ``set_throttle`` / ``clear_throttle``: Kafka's follower throttle on a move, applied before it returns.
* ``zk_assignment`` / ``wait_moved``: what ZooKeeper says about a partition's replicas, and the end
  state of a move (replicas = target, no adding/removing, ISR = target, removed replicas' directories
  gone).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster_support import LocalCluster, run_cli, wait_for
from confluent_kafka import Consumer, Producer, TopicPartition

SEQ_BYTES = 12  # every value starts with its message number, zero-padded
LIVE_FIRST_SEQ = 10**9  # live producers number from here, bulk loads from 0: no number is used twice


def value_of(seq: int, size: int) -> bytes:
    """Message ``seq``'s value: its number, then filler that depends on it (so a value read back can be
    checked whole without keeping what was sent: a gigabyte of it would not fit the test's memory)."""
    head = str(seq).zfill(SEQ_BYTES).encode()
    filler = bytes([97 + seq % 26]) * max(0, size - len(head))
    return head + filler


def seq_of(value: bytes) -> int:
    """The number of a message read back; fails if any byte of it is not what was produced."""
    seq = int(value[:SEQ_BYTES])
    assert value == value_of(seq, len(value)), f"message {seq} reads back corrupted"
    return seq


class _EosLog(logging.Handler):
    """The last lines librdkafka logged, most recent last, and how many times it bumped its epoch."""

    def __init__(self, keep: int = 400) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.keep = keep
        self.epoch_bumps = 0

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "bumped epoch" in message:
            self.epoch_bumps += 1
        self.lines.append(f"{time.strftime('%H:%M:%S')} {message}")
        del self.lines[:-self.keep]

    def bumps(self) -> list[str]:
        """The lines about epoch bumps and the sequence errors that caused them."""
        return [line for line in self.lines if "bump" in line or "ERRSEQ" in line or "sequence" in line]


class LiveProducer(threading.Thread):
    """Produces numbered messages at about ``rate_per_s`` until ``stop()``; keeps every acknowledgement.

    ``acked`` holds (partition, offset, message number); ``errors`` what was not acknowledged (expected to stay
    empty: librdkafka retries through leader moves, and only a message it gives up on lands here)."""

    def __init__(self, bootstrap: str, topic: str, rate_per_s: float = 500, value_bytes: int = 200,
                 first_seq: int = LIVE_FIRST_SEQ, debug: str = "eos", logger: logging.Logger | None = None) -> None:
        """``debug`` is librdkafka's debug contexts; its lines go to ``logger`` (if given) as well as
        to ``eos_log``."""
        super().__init__(name=f"producer-{topic}", daemon=True)
        self.topic = topic
        self.rate_per_s = rate_per_s
        self.value_bytes = value_bytes
        self.next_seq = first_seq
        self.acked: list[tuple[int, int | None, int]] = []  # offset None: acknowledged without one
        self.errors: list[str] = []
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self.eos_log = _EosLog()
        if logger is None:
            logger = logging.getLogger(f"librdkafka-{topic}-{id(self)}")
            logger.propagate = False
            logger.setLevel(logging.DEBUG)
        logger.addHandler(self.eos_log)
        # librdkafka's "eos" debug context: PID changes, drains and epoch bumps with their reason,
        # a few lines per leader move, so a duplicate can be traced from the test report alone.
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, "message.timeout.ms": 120000, "debug": debug, "log_level": 7,
                                  "logger": logger})

    def _on_delivery(self, err: Any, msg: Any) -> None:
        with self._lock:
            if err is None:
                self.acked.append((msg.partition(), msg.offset(), int(msg.value()[:SEQ_BYTES])))
            else:
                self.errors.append(f"{msg.value()[:SEQ_BYTES]!r}: {err}")

    def run(self) -> None:
        started = time.monotonic()
        sent = 0
        while not self._stopping.is_set():
            due = started + sent / self.rate_per_s
            now = time.monotonic()
            if now < due:
                self.producer.poll(min(0.05, due - now))
                continue
            try:
                seq = self.next_seq
                self.producer.produce(self.topic, key=str(seq).encode(), value=value_of(seq, self.value_bytes),
                                      on_delivery=self._on_delivery)
                self.next_seq += 1
                sent += 1
            except BufferError:
                self.producer.poll(0.1)
            self.producer.poll(0)

    def stop(self, flush_timeout_s: float = 120) -> None:
        self._stopping.set()
        self.join(30)
        remaining = self.producer.flush(flush_timeout_s)
        assert remaining == 0, f"{remaining} messages were neither acknowledged nor failed after {flush_timeout_s} s"

    def halt(self) -> None:
        """Stop without checking anything (test teardown)."""
        self._stopping.set()
        self.join(30)
        self.producer.flush(5)

    def count(self) -> int:
        with self._lock:
            return len(self.acked)


class LiveConsumer(threading.Thread):
    """Reads ``topic`` from ``start_offsets`` until ``stop()``, keeping every message number it got, and
    measures the largest pause between two consecutive records of one partition: a partition whose
    leader moves stalls there while the others go on, so only a per-partition gap shows the stall."""

    def __init__(self, bootstrap: str, topic: str, start_offsets: Mapping[int, int]) -> None:
        super().__init__(name=f"consumer-{topic}", daemon=True)
        self.topic = topic
        self.start_offsets = dict(start_offsets)
        self.bootstrap = bootstrap
        self.seqs: list[int] = []
        self.max_gap_s = 0.0
        self.max_gap_partition = -1
        self.errors: list[str] = []
        self._stopping = threading.Event()

    def run(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"live-{self.topic}",
                      "enable.auto.commit": False, "fetch.wait.max.ms": 100, "log_level": 3})
        try:
            c.assign([TopicPartition(self.topic, p, o) for p, o in self.start_offsets.items()])
            last: dict[int, float] = {}
            while not self._stopping.is_set():
                for m in c.consume(1000, 0.1):
                    if m.error() is not None:
                        if not m.error().retriable() and m.error().code() != -191:  # -191: partition EOF
                            self.errors.append(str(m.error()))
                        continue
                    now, p = time.monotonic(), m.partition()
                    if p in last and now - last[p] > self.max_gap_s:
                        self.max_gap_s, self.max_gap_partition = now - last[p], p
                    last[p] = now
                    self.seqs.append(seq_of(m.value()))
        except Exception as exc:  # surfaced by the test through ``errors``
            self.errors.append(repr(exc))
        finally:
            c.close()

    def stop(self) -> None:
        self._stopping.set()
        self.join(30)


def read_topic(bootstrap: str, topic: str, partitions: int, timeout_s: float = 300) -> dict[int, dict[int, int]]:
    """Every record of every partition, from the log start to the end offsets at the time of the call,
    as offset -> message number; each value is checked whole as it is read."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "enable.auto.commit": False,
                  "log_level": 3})
    try:
        ends = {}
        for p in range(partitions):
            ends[p] = wait_for(lambda p=p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1] + 1,
                               60, f"the end offset of {topic}-{p}") - 1
        out: dict[int, dict[int, int]] = {p: {} for p in range(partitions)}
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout_s
        while any(len(out[p]) < ends[p] for p in out):
            assert time.monotonic() < deadline, \
                f"read {sum(map(len, out.values()))} of {sum(ends.values())} records of {topic} in {timeout_s} s"
            for m in c.consume(10000, 0.5):
                if m.error() is None and m.offset() < ends[m.partition()]:
                    out[m.partition()][m.offset()] = seq_of(m.value())
        return out
    finally:
        c.close()


def missing_acked(read: Mapping[int, Mapping[int, int]],
                  acked: Iterable[tuple[int, int | None, int]]) -> list[tuple[int, int | None, int]]:
    """The acknowledged messages that are not where their acknowledgement says.

    A message acknowledged without an offset (librdkafka acknowledges one implicitly when a later
    batch of its partition succeeds after its own request failed: "implicitly acked by subsequent
    batch success") must be in its partition, at whatever offset."""
    in_partition: dict[int, set[int]] = {}
    missing = []
    for p, offset, seq in acked:
        if offset is None or offset < 0:
            if p not in in_partition:
                in_partition[p] = set(read.get(p, {}).values())
            if seq not in in_partition[p]:
                missing.append((p, offset, seq))
        elif read.get(p, {}).get(offset) != seq:
            missing.append((p, offset, seq))
    return missing


def check_acked(read: Mapping[int, Mapping[int, int]], acked: Iterable[tuple[int, int | None, int]],
                context: str = "") -> int:
    """Every acknowledged message is where ``missing_acked`` wants it; no message number appears
    twice (the report says where each copy is, then ``context``). Returns the count."""
    acked = list(acked)
    missing = missing_acked(read, acked)
    if missing:
        p, offset, seq = missing[0]
        problem = (f"(no offset) is not in partition {p}" if offset is None or offset < 0
                   else f"at {p}:{offset} reads back as {read.get(p, {}).get(offset)}")
        raise AssertionError(f"acknowledged message {seq} {problem} ({len(missing)} missing in all)")
    seqs = Counter(seq for records in read.values() for seq in records.values())
    twice = [s for s, k in seqs.items() if k > 1]
    if twice:
        where = {s: [(p, o) for p, records in read.items() for o, v in records.items() if v == s] for s in twice[:5]}
        raise AssertionError(f"{len(twice)} messages are in the log more than once, e.g. (partition, offset) "
                             f"of each copy: {where}\n{context}")
    return len(acked)


def produce_bulk(bootstrap: str, topic: str, total_bytes: int, value_bytes: int = 10240,
                 first_seq: int = 0) -> list[tuple[int, int, int]]:
    """As fast as the cluster takes it (acks=all); returns what was acknowledged (partition, offset, number)."""
    acked: list[tuple[int, int, int]] = []
    failed: list[str] = []

    def cb(err: Any, msg: Any) -> None:
        if err is None:
            acked.append((msg.partition(), msg.offset(), int(msg.value()[:SEQ_BYTES])))
        else:
            failed.append(str(err))

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                  "queue.buffering.max.kbytes": 262144, "log_level": 3})
    for seq in range(first_seq, first_seq + max(1, total_bytes // value_bytes)):
        while True:
            try:
                p.produce(topic, key=str(seq).encode(), value=value_of(seq, value_bytes), on_delivery=cb)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    assert p.flush(300) == 0
    assert not failed, failed[:5]
    return acked


# --- what the cluster says --------------------------------------------------------------------------


@dataclass
class Assignment:
    """One partition in the topic znode (``/brokers/topics/<t>``)."""

    replicas: list[int]
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)


def zk_assignment(cluster: LocalCluster, topic: str) -> dict[int, Assignment]:
    found = cluster.zk_json(f"/brokers/topics/{topic}")
    assert found is not None, f"no topic znode for {topic}"
    doc = found[0]
    adding, removing = doc.get("adding_replicas") or {}, doc.get("removing_replicas") or {}
    return {int(p): Assignment(list(r), list(adding.get(p, [])), list(removing.get(p, [])))
            for p, r in doc["partitions"].items()}


def partition_dirs(cluster: LocalCluster, broker_id: int, topic: str, partition: int) -> list[Path]:
    """The partition's directory on a broker, and any copy renamed for deletion but not removed yet."""
    logs = cluster.data_dir / f"broker-{broker_id}-logs"
    return [*logs.glob(f"{topic}-{partition}"), *logs.glob(f"{topic}-{partition}.*-delete")]


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.glob("*.log")) if path.is_dir() else 0


def wait_moved(cluster: LocalCluster, topic: str, targets: Mapping[int, list[int]],
               removed: Mapping[int, Iterable[int]], timeout_s: float = 120) -> None:
    """The end state of a move, as ZooKeeper, Metadata and the brokers' disks show it: replicas = target
    in target order, no adding or removing replicas, ISR = target, a target leader, the removed replicas'
    directories gone from their brokers, and nothing left to list."""

    def settled() -> bool:
        assignment = zk_assignment(cluster, topic)
        states = cluster.partition_states(topic)
        for p, target in targets.items():
            a, st = assignment[p], states.get(p)
            if a.replicas != target or a.adding or a.removing or st is None:
                return False
            if sorted(st["isr"]) != sorted(target) or st["leader"] not in target:
                return False
        return True

    wait_for(settled, timeout_s, f"{topic} moved to {dict(targets)} in ZooKeeper with full ISRs")
    wait_for(lambda: all(list(line.replicas) == targets[line.partition] and sorted(line.isr) == sorted(targets[line.partition])
                         for line in cluster.describe(topic) if line.partition in targets),
             30, f"Metadata of {topic} showing the targets")
    for p, brokers in removed.items():
        for b in brokers:
            wait_for(lambda b=b, p=p: not partition_dirs(cluster, b, topic, p), 60,
                     f"the directory of {topic}-{p} gone from broker {b}")
    out = run_cli("reassign", "--bootstrap-server", cluster.bootstrap, "--list")
    assert f"{topic}-" not in out, out


def set_throttle(cluster: LocalCluster, topic: str, follower_replicas: str, brokers: Iterable[int],
                 rate_bytes_per_s: int) -> None:
    """Slow the followers of a move (Kafka's follower throttle) so that it is still copying when the test
    acts; returns once every broker applies it.

    Brokers learn config changes from ZooKeeper notifications, in order, a moment later. The topic's
    list goes first and the brokers' rate last, so a broker that shows the rate (its DescribeConfigs
    answers from what it applied) has also dropped its cached topic configs, and reads the list when
    the move's LeaderAndIsr arrives."""
    run_cli("configs", "--bootstrap-server", cluster.bootstrap, "--alter", "--entity-type", "topics",
            "--entity-name", topic, "--add-config", f"follower.replication.throttled.replicas=[{follower_replicas}]")
    rate = f"follower.replication.throttled.rate={rate_bytes_per_s}"
    for b in brokers:
        run_cli("configs", "--bootstrap-server", cluster.bootstrap, "--alter", "--entity-type", "brokers",
                "--entity-name", str(b), "--add-config", rate)
    for b in brokers:
        wait_for(lambda b=b: rate in run_cli("configs", "--bootstrap-server", cluster.bootstrap, "--describe",
                                             "--entity-type", "brokers", "--entity-name", str(b)),
                 30, f"broker {b} applying {rate}")


def clear_throttle(cluster: LocalCluster, topic: str, brokers: Iterable[int]) -> None:
    for b in brokers:
        with contextlib.suppress(AssertionError):  # a broker that is down keeps its config in ZooKeeper: fine
            run_cli("configs", "--bootstrap-server", cluster.bootstrap, "--alter", "--entity-type", "brokers",
                    "--entity-name", str(b), "--delete-config", "follower.replication.throttled.rate")
    run_cli("configs", "--bootstrap-server", cluster.bootstrap, "--alter", "--entity-type", "topics",
            "--entity-name", topic, "--delete-config", "follower.replication.throttled.replicas")

