"""A producer's sequence gap at a broker that has just taken leadership over is LEADER_NOT_AVAILABLE,
not OUT_OF_ORDER_SEQUENCE_NUMBER, until the producer writes there under the new leader.

The gap is what a producer leaves when the old leader answered NOT_LEADER_OR_FOLLOWER for batches
the new leader does not have and the producer's next batch reaches the new leader before their
retries. OUT_OF_ORDER_SEQUENCE_NUMBER makes librdkafka bump its epoch and renumber every queued
message, including ones already written elsewhere: duplicates. The retriable answer lets the
retries come first. Once the producer has written to the new leader, a gap is a gap again.
"""

from __future__ import annotations

import time

from cluster_support import LocalCluster, run_cli, wait_for
from hw_support import RawConnection, build_batch, decode_produce_response, init_producer_id, produce_request
from kafka import KafkaAdminClient
from kafka.structs import TopicPartition

LEADER_NOT_AVAILABLE = 5
OUT_OF_ORDER_SEQUENCE_NUMBER = 45


def _records(start: int, count: int) -> list[tuple[bytes | None, bytes, int]]:
    ts = int(time.time() * 1000)
    return [(None, b"value-%06d" % i, ts) for i in range(start, start + count)]


def _send(conn: RawConnection, topic: str, pid: int, epoch: int, seq: int, count: int) -> tuple[int, int]:
    conn.send_bytes(conn.encode(produce_request(topic, 0, build_batch(_records(seq, count), pid, epoch, seq))))
    return decode_produce_response(conn.recv_frame())


def test_gap_at_a_new_leader_is_retriable_until_the_producer_writes_there(shared_cluster: LocalCluster) -> None:
    c = shared_cluster
    topic = "gap-after-move"
    run_cli("topics", "--bootstrap-server", c.bootstrap, "--create", "--topic", topic, "--replica-assignment", "1:2")
    c.wait_full_isr([topic], 1, timeout_s=30)
    with RawConnection(c.brokers[1].bootstrap) as old:
        pid, epoch = init_producer_id(old)
        assert _send(old, topic, pid, epoch, 0, 10) == (0, 0)
        # A gap at the broker that has led all along is OUT_OF_ORDER_SEQUENCE_NUMBER, as in Kafka.
        assert _send(old, topic, pid, epoch, 15, 5)[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    c.wait_full_isr([topic], 1, timeout_s=30)

    # Leader 1 is not in the target, so phase B makes broker 2 (a follower until then) the leader.
    admin = KafkaAdminClient(bootstrap_servers=c.bootstrap)
    try:
        admin.alter_partition_reassignments({TopicPartition(topic, 0): [2, 3]})
    finally:
        admin.close()
    wait_for(lambda: c.leaders(topic).get(0) == 2 and sorted(c.partition_states(topic)[0]["isr"]) == [2, 3], 60,
             "broker 2 leading the moved partition")

    with RawConnection(c.brokers[2].bootstrap) as new:
        # Sequences 10-14 "are still on their way from the old leader": the batch after them waits.
        wait_for(lambda: _send(new, topic, pid, epoch, 15, 5)[0] == LEADER_NOT_AVAILABLE, 30,
                 "broker 2 answering the gap LEADER_NOT_AVAILABLE")
        assert _send(new, topic, pid, epoch, 10, 5) == (0, 10)
        assert _send(new, topic, pid, epoch, 15, 5) == (0, 15)
        # The producer has written under the new leader: a gap now is OUT_OF_ORDER_SEQUENCE_NUMBER.
        assert _send(new, topic, pid, epoch, 30, 5)[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert _send(new, topic, pid, epoch, 20, 5) == (0, 20)
