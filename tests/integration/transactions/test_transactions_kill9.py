"""Consume-transform-produce with transactions through kill -9 of the transaction coordinator's
broker and of an output partition's leader.

The loop is the one Kafka documents for exactly-once processing (the producer's
``send_offsets_to_transaction`` with the consumer's group metadata, read_committed input): on an
abortable error it aborts and rewinds to the group's committed offsets, on a fatal one it starts a
new producer with the same transactional id (which fences the old one). However the brokers die,
the output read read_committed holds each input record's result exactly once.

Neither kill takes down the consumer group's coordinator. librdkafka (up to 2.16 at least) can hang
``send_offsets_to_transaction`` past its timeout when the group coordinator it cached is dropped
from the metadata before the call: its coordinator request waits for a state change of that broker's
connection, which was decommissioned and never changes again (confluentinc/librdkafka#5511, with
#5456: the request's timeout is never checked). Apache Kafka drops a dead broker from the metadata
too, so the same hang happens against it; the group coordinator's failover is covered by the group
tests.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from cluster_support import LocalCluster, start_cluster, wait_for
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from hw_support import RawConnection
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from txn_support import TXN_PROPS, read_values

INPUT_RECORDS = 3000
PARTITIONS = 3
TXN_ID = "etl-kill9"


class TransformLoop:
    """Reads the input, writes each value upper-cased to the output, one transaction per batch."""

    def __init__(self, bootstrap: str, source: str, sink: str, group: str) -> None:
        self.bootstrap, self.source, self.sink = bootstrap, source, sink
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                                  "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
        self.partitions = [TopicPartition(source, p) for p in range(PARTITIONS)]
        self.producer = self._new_producer()
        self.committed_batches = 0
        self.idle_polls = 0  # consume() calls that brought no record
        self.errors: Counter[str] = Counter()
        self.done = threading.Event()
        self.failure: BaseException | None = None

    def _new_producer(self) -> Producer:
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": TXN_ID, "linger.ms": 5,
                      "transaction.timeout.ms": 20000})
        p.init_transactions(60)
        return p

    def _rewind(self) -> None:
        committed = self.consumer.committed(self.partitions, 30)
        self.consumer.assign([TopicPartition(self.source, tp.partition, tp.offset if tp.offset >= 0 else 0)
                              for tp in committed])

    def _committed_total(self) -> int:
        return sum(max(tp.offset, 0) for tp in self.consumer.committed(self.partitions, 30))

    def run(self) -> None:
        try:
            self._rewind()
            while self._committed_total() < INPUT_RECORDS:
                batch = []
                for m in self.consumer.consume(100, 1.0):
                    if m.error() is None:
                        batch.append(m)
                    else:
                        self.errors[f"consume: {m.error().name()}"] += 1
                if not batch:
                    self.idle_polls += 1
                    continue
                try:
                    self.producer.begin_transaction()
                    for m in batch:
                        self.producer.produce(self.sink, m.value().upper(), partition=m.partition())
                    positions = self.consumer.position(self.partitions)
                    self.producer.send_offsets_to_transaction(positions, self.consumer.consumer_group_metadata(), 30)
                    self._commit()
                    self.committed_batches += 1
                except KafkaException as exc:
                    self._recover(exc)
        except BaseException as exc:  # reported by the test
            self.failure = exc
        finally:
            self.done.set()

    def _commit(self) -> None:
        while True:
            try:
                self.producer.commit_transaction(30)
                return
            except KafkaException as exc:
                if not exc.args[0].retriable():
                    raise
                self.errors["commit retried"] += 1  # librdkafka: call commit_transaction again

    def _abort(self) -> None:
        while True:
            try:
                self.producer.abort_transaction(60)
                return
            except KafkaException as exc:
                # librdkafka: an abort that timed out is still under way; call abort_transaction again.
                if not exc.args[0].retriable():
                    raise
                self.errors["abort retried"] += 1

    def _recover(self, exc: KafkaException) -> None:
        err = exc.args[0]
        self.errors[err.name()] += 1
        if err.txn_requires_abort():
            self._abort()
        else:
            # Fatal (or an unknown outcome): a new producer with the same id fences the old one and
            # aborts what it left open.
            self.producer = self._new_producer()
        self._rewind()

    def close(self) -> None:
        self.consumer.close()


GROUP, TRANSACTION = 0, 1  # FindCoordinator's key types


def _coordinator(cluster: LocalCluster, key: str, key_type: int) -> int:
    def ask() -> int | None:
        for b in cluster.live():
            with RawConnection(b.bootstrap) as conn:
                resp = conn.request(FindCoordinatorRequest(version=3, key=key, key_type=key_type),
                                    FindCoordinatorResponse, 3)
            if resp.error_code == 0:
                return int(resp.node_id)
        return None
    return int(wait_for(ask, 30, f"the coordinator of {key}"))


def _group_not_on(cluster: LocalCluster, broker: int) -> str:
    """A group name whose coordinator is not ``broker`` (see the module's docstring)."""
    for i in range(64):
        if _coordinator(cluster, group := f"etl-group-{i}", GROUP) != broker:
            return group
    raise AssertionError(f"every group tried is coordinated by broker {broker}")


def _partition_report(cluster: LocalCluster, topic: str, committed: dict[int, list[bytes]]) -> str:
    """Per partition: results read committed, records read uncommitted, the high watermark and the
    last stable offset, and the leader: enough to tell a stuck LSO from a lost write."""
    uncommitted = read_values(cluster.bootstrap, topic, "read_uncommitted", INPUT_RECORDS, PARTITIONS,
                              settle_s=1.0, timeout_s=20.0)
    leaders = cluster.leaders(topic)
    rows = []
    for p in range(PARTITIONS):
        marks = {}
        for isolation in ("read_uncommitted", "read_committed"):
            c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "report", "isolation.level": isolation})
            try:
                marks[isolation] = c.get_watermark_offsets(TopicPartition(topic, p), 10)[1]
            except KafkaException as exc:
                marks[isolation] = repr(exc)
            finally:
                c.close()
        rows.append(f"p{p}: {len(committed[p])} committed, {len(uncommitted[p])} uncommitted, "
                    f"HW {marks['read_uncommitted']}, LSO {marks['read_committed']}, leader {leaders.get(p)}")
    return "; ".join(rows)


def test_exactly_once_through_kill9(tmp_path: Path, report_logs: Callable[[object], None]) -> None:
    cluster = start_cluster(tmp_path / "cluster", 3, TXN_PROPS)
    report_logs(cluster)
    loop: TransformLoop | None = None
    try:
        cluster.create_topic("in", PARTITIONS, 3)
        cluster.create_topic("out", PARTITIONS, 3)
        cluster.wait_full_isr(["in", "out"], PARTITIONS)
        plain = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
        for i in range(INPUT_RECORDS):
            plain.produce("in", b"v%05d" % i, partition=i % PARTITIONS)
        assert plain.flush(60) == 0
        group = _group_not_on(cluster, _coordinator(cluster, TXN_ID, TRANSACTION))
        loop = TransformLoop(cluster.bootstrap, "in", "out", group)
        worker = threading.Thread(target=loop.run, daemon=True)
        worker.start()

        def progressed(n: int) -> None:
            start = loop.committed_batches if loop else 0
            try:
                wait_for(lambda: loop is not None and (loop.committed_batches >= start + n or loop.done.is_set()), 120,
                         f"{n} more committed batches")
            except AssertionError as exc:
                raise AssertionError(f"{exc}; the loop's errors: {loop.errors if loop else None}, idle polls "
                                     f"{loop.idle_polls if loop else None}, positions "
                                     f"{loop.consumer.position(loop.partitions) if loop else None}") from None

        progressed(3)
        coordinator = _coordinator(cluster, TXN_ID, TRANSACTION)
        assert coordinator != _coordinator(cluster, group, GROUP)
        cluster.brokers[coordinator].kill9()
        progressed(3)
        cluster.restart(coordinator)
        cluster.wait_full_isr(["in", "out"], PARTITIONS, timeout_s=90)
        group_coordinator = _coordinator(cluster, group, GROUP)
        leader = next((b for b in cluster.leaders("out").values() if b != group_coordinator), None)
        assert leader is not None, f"every output partition is led by the group's coordinator {group_coordinator}"
        cluster.brokers[leader].kill9()
        progressed(3)
        cluster.restart(leader)
        assert loop.done.wait(300), f"the loop did not finish: {loop.committed_batches} batches, {loop.errors}"
        assert loop.failure is None, f"{loop.failure!r} after {loop.errors}"
        worker.join(10)
        values = read_values(cluster.bootstrap, "out", "read_committed", INPUT_RECORDS, PARTITIONS)
        counts = Counter(v for vs in values.values() for v in vs)
        assert sorted(counts) == sorted(b"V%05d" % i for i in range(INPUT_RECORDS)), (
            f"a result is missing: {_partition_report(cluster, 'out', values)}; the loop's errors: {loop.errors}")
        assert not [v for v, n in counts.items() if n > 1], f"results written twice; errors seen: {loop.errors}"
    finally:
        if loop is not None:
            loop.close()
        cluster.stop()
        time.sleep(0)
