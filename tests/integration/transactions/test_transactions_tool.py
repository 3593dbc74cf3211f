"""``headwater transactions`` (kafka-transactions.sh) end to end on a three-broker cluster.

A confluent-kafka producer commits one transaction and leaves a second one open on a partition; an
idempotent producer writes after it. The tool then lists the open transaction (ListTransactions to
every broker), describes it at its coordinator, finds its producer on the partition's leader and on a
follower (DescribeProducers), does not call it hanging while its coordinator still lists the
partition (Kafka's find-hanging logic), and aborts it by its start offset (WriteTxnMarkers to the
leader), after which a read_committed consumer reads past the aborted records. Expected tables and
messages are those of Kafka 3.9's TransactionsCommand.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from click.testing import CliRunner, Result
from cluster_support import LocalCluster, wait_for
from confluent_kafka import Consumer, Producer, TopicPartition

from headwater.cli import main

LIST = ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
DESCRIBE = ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
            "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"]
PRODUCERS = ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
             "CurrentTransactionStartOffset"]
HANGING = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset", "LastTimestamp",
           "Duration(min)"]
TXN_TIMEOUT_MS = 300_000  # longer than the test, so the coordinator does not abort the transaction itself


def tool(cluster: LocalCluster, *args: str) -> Result:
    return CliRunner().invoke(main, ["transactions", "--bootstrap-server", cluster.bootstrap, *args])


def table(cluster: LocalCluster, *args: str) -> list[list[str]]:
    """The tool's table: each line's tab-ended cells, without their padding."""
    result = tool(cluster, *args)
    assert (result.exit_code, result.stderr) == (0, ""), (result.exit_code, result.output)
    return [[cell.strip() for cell in line.split("\t")[:-1]] for line in result.stdout.splitlines()]


def read(bootstrap: str, topic: str, isolation: str, expected: int, settle_s: float = 2.0) -> list[bytes]:
    """Partition 0's values from offset 0: until ``expected`` came and ``settle_s`` more, or 30 s."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{topic}", "isolation.level": isolation,
                  "enable.auto.commit": False})
    got: list[bytes] = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline, settle_until = time.monotonic() + 30, None
        while time.monotonic() < deadline and (settle_until is None or time.monotonic() < settle_until):
            got += [bytes(m.value()) for m in c.consume(100, 0.2) if m.error() is None]
            if len(got) >= expected and settle_until is None:
                settle_until = time.monotonic() + settle_s
    finally:
        c.close()
    return got


def producer_row(rows: list[list[str]], producer_id: int) -> list[str]:
    [row] = [r for r in rows[1:] if r[0] == str(producer_id)]
    return row


def open_transaction(cluster: LocalCluster, topic: str) -> Producer:
    """A producer with a committed transaction at offset 0 (its marker at 1) and an open one at offsets 2
    and 3 of ``topic``'s partition 0, then an idempotent producer's record at offset 4."""
    cluster.create_topic(topic, 1, 3)
    cluster.wait_full_isr([topic], 1)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": f"tool-{topic}", "linger.ms": 5,
                  "transaction.timeout.ms": TXN_TIMEOUT_MS})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"committed", partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"aborted-1", partition=0)
    p.produce(topic, b"aborted-2", partition=0)
    assert p.flush(30) == 0
    plain: Any = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
    plain.produce(topic, b"after", partition=0)
    assert plain.flush(30) == 0  # read_committed consumers reach it only once the transaction ends
    return p


def test_open_transaction_listed_described_found_and_aborted(cluster: LocalCluster,
                                                             topic_name: Callable[..., str]) -> None:
    topic = topic_name("txtool")
    txn_id = f"tool-{topic}"
    p = open_transaction(cluster, topic)
    assert read(cluster.bootstrap, topic, "read_committed", 2) == [b"committed"]

    # list: one row per transaction of every coordinator
    listed = table(cluster, "list")
    assert listed[0] == LIST
    [(_, coordinator, producer_id, state)] = [r for r in listed[1:] if r[0] == txn_id]
    assert state == "Ongoing" and int(coordinator) in cluster.brokers

    # describe: the coordinator's view of it
    [header, row] = table(cluster, "describe", "--transactional-id", txn_id)
    assert header == DESCRIBE
    assert row[:2] == [coordinator, txn_id] and row[2] == producer_id
    assert row[4:6] == ["Ongoing", str(TXN_TIMEOUT_MS)] and row[8] == f"{topic}-0"
    assert int(row[6]) <= time.time() * 1000 and int(row[7]) >= 0

    # describe-producers: the leader's producers; the open transaction starts at offset 2
    rows = table(cluster, "describe-producers", "--topic", topic, "--partition", "0")
    assert rows[0] == PRODUCERS
    txn_row = producer_row(rows, int(producer_id))
    assert txn_row[5] == "2" and txn_row[3] == "2"  # last sequence: the third record of this producer epoch
    assert [r[5] for r in rows[1:] if r[0] != producer_id] == ["None"]  # the idempotent producer
    leader = cluster.leaders(topic)[0]
    assert table(cluster, "describe-producers", "--topic", topic, "--partition", "0", "--broker-id",
                 str(leader)) == rows

    # find-hanging: old enough with a 0-minute timeout, but its coordinator lists the partition
    assert table(cluster, "find-hanging", "--topic", topic, "--partition", "0", "--max-transaction-timeout",
                 "0") == [HANGING]
    assert table(cluster, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0") == [HANGING]
    assert table(cluster, "find-hanging", "--topic", topic) == [HANGING]  # younger than 15 minutes

    # abort by start offset: prints nothing, and the partition has no open transaction any more
    aborted = tool(cluster, "abort", "--topic", topic, "--partition", "0", "--start-offset", "2")
    assert (aborted.exit_code, aborted.output) == (0, "")
    rows = table(cluster, "describe-producers", "--topic", topic, "--partition", "0")
    assert producer_row(rows, int(producer_id))[5] == "None"
    again = tool(cluster, "abort", "--topic", topic, "--partition", "0", "--start-offset", "2")
    assert (again.exit_code, again.stdout) == (1, "")
    assert again.stderr == f"Could not find any open transactions starting at offset 2 on partition {topic}-0\n"
    assert read(cluster.bootstrap, topic, "read_committed", 2) == [b"committed", b"after"]
    assert read(cluster.bootstrap, topic, "read_uncommitted", 4) == [b"committed", b"aborted-1", b"aborted-2",
                                                                      b"after"]

    # the producer ends its transaction as it would anyway: its coordinator's markers find nothing open
    p.abort_transaction(30)
    assert read(cluster.bootstrap, topic, "read_committed", 2) == [b"committed", b"after"]


def test_producers_on_every_replica(cluster: LocalCluster, topic_name: Callable[..., str]) -> None:
    """``--broker-id`` asks one broker about the partitions it holds a replica of (TC: "the producer state
    on a specific replica"), so ``find-hanging --broker-id`` asks about its follower replicas too."""
    topic = topic_name("txtool")
    p = open_transaction(cluster, topic)
    try:
        leader = cluster.leaders(topic)[0]
        follower = min(b for b in cluster.brokers if b != leader)
        [producer_id] = [int(r[0]) for r in table(cluster, "describe-producers", "--topic", topic, "--partition",
                                                  "0")[1:] if r[5] == "2"]
        assert table(cluster, "find-hanging", "--broker-id", str(leader), "--max-transaction-timeout", "0") == [HANGING]
        wait_for(lambda: producer_row(table(cluster, "describe-producers", "--topic", topic, "--partition", "0",
                                            "--broker-id", str(follower)), producer_id)[5] == "2",
                 10, "the follower's producer state")
        assert table(cluster, "find-hanging", "--broker-id", str(follower), "--max-transaction-timeout", "0") == [
            HANGING]
    finally:
        p.abort_transaction(30)


def test_errors_from_the_cluster(cluster: LocalCluster, topic_name: Callable[..., str]) -> None:
    """Kafka's messages for what the cluster refuses: an unknown transactional id, a start offset with
    no open transaction, a broker that is no replica of the partition."""
    topic = topic_name("txtool")
    cluster.create_topic(topic, 1, 1)
    unknown = tool(cluster, "describe", "--transactional-id", f"nobody-{topic}")
    assert (unknown.exit_code, unknown.stdout) == (1, "")
    assert unknown.stderr == (f"Failed to describe transaction state of transactional-id `nobody-{topic}`: "
                              f"DescribeTransactions request for transactionalId `nobody-{topic}` failed because the "
                              "ID could not be found. Enable debug logging for additional detail.\n")
    nothing = tool(cluster, "abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
    assert (nothing.exit_code, nothing.stderr) == (
        1, f"Could not find any open transactions starting at offset 0 on partition {topic}-0\n")
    leader = cluster.leaders(topic)[0]
    other = min(b for b in cluster.brokers if b != leader)
    elsewhere = tool(cluster, "describe-producers", "--topic", topic, "--partition", "0", "--broker-id", str(other))
    assert (elsewhere.exit_code, elsewhere.stdout) == (1, "")
    assert elsewhere.stderr == (f"Failed to describe producers for partition {topic}-0 on broker {other}: Failed to "
                                f"describe active producers for partition {topic}-0 on brokerId {other}. Enable "
                                "debug logging for additional detail.\n")
