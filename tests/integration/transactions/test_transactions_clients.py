"""Transactions (KIP-98) with real clients on a three-broker cluster.

What a client can tell, from Kafka's documentation of the producer's transactional API and of the
consumer's ``isolation.level``:
- a read_committed consumer sees the records of committed transactions only, in offset order per
  partition, and never a record of an aborted one; a read_uncommitted consumer sees both;
- offsets sent with ``send_offsets_to_transaction`` are the group's committed offsets once the
  transaction commits, and are not after an abort;
- a second producer with the same ``transactional.id`` fences the first: the first one's next
  transactional call fails fatally (ProducerFenced);
- a transaction left open longer than ``transaction.timeout.ms`` is aborted by the coordinator,
  after which read_committed consumers read past it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cluster_support import LocalCluster, run_cli, wait_for
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from txn_support import read_values

from headwater.coordinator.records import partition_for

PARTITIONS = 3


def _producer(bootstrap: str, txn_id: str, **extra: Any) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **extra})


def test_commit_and_abort_interleaved_across_partitions(cluster: LocalCluster, topic_name: Callable[..., str]) -> None:
    topic = topic_name()
    cluster.create_topic(topic, PARTITIONS, 3)
    p = _producer(cluster.bootstrap, f"txn-{topic}")
    p.init_transactions(30)
    committed: dict[int, list[bytes]] = {q: [] for q in range(PARTITIONS)}
    everything: dict[int, list[bytes]] = {q: [] for q in range(PARTITIONS)}
    for n in range(8):
        p.begin_transaction()
        for i in range(30):
            q = i % PARTITIONS
            value = b"txn%d-%d" % (n, i)
            p.produce(topic, value, partition=q)
            everything[q].append(value)
            if n % 2 == 0:
                committed[q].append(value)
        if n % 2 == 0:
            p.commit_transaction(30)
        else:
            p.flush(30)  # the records are in the log before the abort, so read_uncommitted sees them
            p.abort_transaction(30)
    assert read_values(cluster.bootstrap, topic, "read_committed", 120) == committed
    assert read_values(cluster.bootstrap, topic, "read_uncommitted", 240) == everything


def test_an_open_transaction_holds_read_committed_back(cluster: LocalCluster, topic_name: Callable[..., str]) -> None:
    """Records after an open transaction's first one stay invisible to read_committed (the last
    stable offset stops there) until the transaction ends, even those of other producers."""
    topic = topic_name()
    cluster.create_topic(topic, 1, 3)
    open_txn = _producer(cluster.bootstrap, f"open-{topic}")
    open_txn.init_transactions(30)
    open_txn.begin_transaction()
    open_txn.produce(topic, b"pending", partition=0)
    open_txn.flush(30)
    plain = Producer({"bootstrap.servers": cluster.bootstrap})
    plain.produce(topic, b"after", partition=0)
    plain.flush(30)
    assert read_values(cluster.bootstrap, topic, "read_committed", 0, 1, settle_s=3) == {0: []}
    assert read_values(cluster.bootstrap, topic, "read_uncommitted", 2, 1) == {0: [b"pending", b"after"]}
    open_txn.commit_transaction(30)
    assert read_values(cluster.bootstrap, topic, "read_committed", 2, 1) == {0: [b"pending", b"after"]}


def test_offsets_commit_with_the_transaction(cluster: LocalCluster, topic_name: Callable[..., str]) -> None:
    source, sink = topic_name("src"), topic_name("dst")
    cluster.create_topic(source, 1, 3)
    cluster.create_topic(sink, 1, 3)
    group = f"etl-{source}"
    plain = Producer({"bootstrap.servers": cluster.bootstrap})
    for i in range(20):
        plain.produce(source, b"in-%d" % i, partition=0)
    plain.flush(30)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    p = _producer(cluster.bootstrap, f"etl-{source}")
    p.init_transactions(30)
    try:
        consumer.assign([TopicPartition(source, 0, 0)])
        seen: list[Any] = []
        wait_for(lambda: seen.extend(m for m in consumer.consume(20, 0.5) if m.error() is None) or len(seen) >= 20,
                 30, "the source records")

        def transact(upto: int, commit: bool) -> None:
            p.begin_transaction()
            for m in seen[:upto]:
                p.produce(sink, m.value().upper(), partition=0)
            p.send_offsets_to_transaction([TopicPartition(source, 0, upto)], consumer.consumer_group_metadata(), 30)
            if commit:
                p.commit_transaction(30)
            else:
                p.abort_transaction(30)

        transact(10, commit=True)
        assert consumer.committed([TopicPartition(source, 0)], 30)[0].offset == 10
        transact(20, commit=False)
        # The aborted transaction's offsets never become the group's (GroupMetadata drops them).
        assert consumer.committed([TopicPartition(source, 0)], 30)[0].offset == 10
    finally:
        consumer.close()
    assert read_values(cluster.bootstrap, sink, "read_committed", 10, 1) == {0: [b"IN-%d" % i for i in range(10)]}


def test_a_second_producer_fences_the_first(cluster: LocalCluster, topic_name: Callable[..., str]) -> None:
    topic = topic_name()
    cluster.create_topic(topic, 1, 3)
    txn_id = f"zombie-{topic}"
    first = _producer(cluster.bootstrap, txn_id)
    first.init_transactions(30)
    first.begin_transaction()
    first.produce(topic, b"zombie", partition=0)
    first.flush(30)
    second = _producer(cluster.bootstrap, txn_id)
    second.init_transactions(30)  # aborts the first one's open transaction with a bumped epoch
    second.begin_transaction()
    second.produce(topic, b"live", partition=0)
    second.commit_transaction(30)
    with pytest.raises(KafkaException) as raised:
        first.produce(topic, b"late", partition=0)
        first.commit_transaction(30)
    assert raised.value.args[0].fatal(), raised.value
    assert read_values(cluster.bootstrap, topic, "read_committed", 1, 1) == {0: [b"live"]}


def test_a_timed_out_transaction_is_aborted_by_the_coordinator(cluster: LocalCluster,
                                                               topic_name: Callable[..., str]) -> None:
    topic = topic_name()
    cluster.create_topic(topic, 1, 3)
    p = _producer(cluster.bootstrap, f"slow-{topic}", **{"transaction.timeout.ms": 2000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"never-committed", partition=0)
    p.flush(30)
    plain = Producer({"bootstrap.servers": cluster.bootstrap})
    plain.produce(topic, b"visible", partition=0)
    plain.flush(30)
    # Kafka's coordinator aborts it after the timeout (abortTimedOutTransactions); then the last
    # stable offset passes it and read_committed sees the plain record, never the aborted one.
    assert read_values(cluster.bootstrap, topic, "read_committed", 1, 1, timeout_s=30) == {0: [b"visible"]}
    with pytest.raises(KafkaException):
        p.commit_transaction(30)


def test_kafka_python_transactions(cluster: LocalCluster, topic_name: Callable[..., str]) -> None:
    """kafka-python's transactional producer and read_committed consumer (its documented API:
    KafkaProducer(transactional_id=...), KafkaConsumer(isolation_level="read_committed"))."""
    from kafka import KafkaConsumer, KafkaProducer

    topic = topic_name()
    cluster.create_topic(topic, PARTITIONS, 3)
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap, transactional_id=f"kp-{topic}")
    try:
        p.init_transactions()
        for n, commit in enumerate((True, False, True)):
            p.begin_transaction()
            for q in range(PARTITIONS):
                p.send(topic, b"kp%d-%d" % (n, q), partition=q)
            p.flush()
            if commit:
                p.commit_transaction()
            else:
                p.abort_transaction()
    finally:
        p.close()
    c = KafkaConsumer(bootstrap_servers=cluster.bootstrap, isolation_level="read_committed",
                      auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=5000)
    try:
        from kafka import TopicPartition as KTopicPartition

        c.assign([KTopicPartition(topic, q) for q in range(PARTITIONS)])
        c.seek_to_beginning()
        got = sorted(bytes(m.value) for m in c)
    finally:
        c.close()
    assert got == sorted(b"kp%d-%d" % (n, q) for n in (0, 2) for q in range(PARTITIONS))


def test_the_coordinator_moves_with_its_partition(cluster: LocalCluster, topic_name: Callable[..., str],
                                                  tmp_path: Path) -> None:
    """Reassigning the transactional id's __transaction_state partition and electing its new
    preferred leader moves the coordinator in the middle of a transaction: the old leader unloads
    it, the new one loads it from the log (TransactionStateManager on resignation and election),
    and the producer's commit, redirected there, commits what it wrote."""
    topic = topic_name()
    cluster.create_topic(topic, 1, 3)
    txn_id = f"moving-{topic}"
    p = _producer(cluster.bootstrap, txn_id)
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"before the move", partition=0)
    p.flush(30)
    state = cluster.describe("__transaction_state")
    partition = next(line for line in state if line.partition == partition_for(txn_id, 5))
    old_leader = partition.leader
    order = [b for b in partition.replicas if b != old_leader] + [old_leader]
    plan = tmp_path / "move.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "__transaction_state", "partition": partition.partition, "replicas": order}]}))
    run_cli("reassign", "--bootstrap-server", cluster.bootstrap, "--execute", "--reassignment-json-file", str(plan))
    run_cli("leader-election", "--bootstrap-server", cluster.bootstrap, "--election-type", "PREFERRED", "--topic",
            "__transaction_state", "--partition", str(partition.partition))
    wait_for(lambda: cluster.leaders("__transaction_state")[partition.partition] == order[0], 30, "the new leader")
    p.produce(topic, b"after the move", partition=0)
    p.commit_transaction(60)
    assert read_values(cluster.bootstrap, topic, "read_committed", 2, 1) == {0: [b"before the move", b"after the move"]}
