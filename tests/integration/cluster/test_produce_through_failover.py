"""Acceptance: acks=all produce through a leader kill and a controller kill loses nothing acknowledged.

3 brokers; a topic with 6 partitions, RF 3, ``min.insync.replicas=2``. An idempotent
confluent-kafka producer with acks=all sends 200,000 keyed messages while the test kills -9 a broker
that leads some partitions and, later, the active controller (with the first broker still down, so
the last one carries on alone and acks=all must wait for a replica to come back). Afterwards every
acknowledged message is read back at exactly its acknowledged offset, no offset twice, each key's
values in produce order; the killed brokers restart, truncate where needed, rejoin the ISR, and
``topics --describe`` shows full ISRs again, with every replica of a partition holding the same bytes.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable

from cluster_support import LocalCluster, wait_for
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kafka.protocol.admin import DescribeLogDirsRequest

from headwater.admin.client import AdminClient

TOPIC = "orders"
PARTITIONS = 6
MESSAGES = 200_000
RATE_PER_S = 16_000  # paced, so the kills land in the middle of the stream
NUM_KEYS = 101


def key_of(i: int) -> bytes:
    return b"k%03d" % (i % NUM_KEYS)


def value_of(i: int) -> bytes:
    return (b"%09d:" % i).ljust(100, b"v")


def seq_of(value: bytes) -> int:
    return int(value[:9])


def replica_sizes(cluster: LocalCluster, topic: str) -> dict[int, dict[int, int]]:
    """partition -> {broker: size in bytes of its replica}, from DescribeLogDirs on every broker."""
    out: dict[int, dict[int, int]] = defaultdict(dict)
    for b in cluster.live():
        with AdminClient(b.bootstrap, timeout_s=10) as client:
            resp = client.send(DescribeLogDirsRequest, {"topics": None})
        for result in resp.results:
            for t in result.topics:
                if t.name == topic:
                    for p in t.partitions:
                        out[p.partition_index][b.broker_id] = p.partition_size
    return dict(out)


def test_acks_all_survives_leader_and_controller_kill(cluster_factory: Callable[..., LocalCluster]) -> None:
    cluster = cluster_factory()
    cluster.create_topic(TOPIC, PARTITIONS, 3, **{"min.insync.replicas": "2"})
    cluster.wait_full_isr([TOPIC], PARTITIONS, timeout_s=30)

    acked: dict[tuple[int, int], int] = {}  # (partition, offset) -> message
    failed: list[tuple[int, str]] = []

    def on_delivery(err: KafkaError | None, msg: object) -> None:
        seq = seq_of(msg.value())  # type: ignore[attr-defined]
        if err is not None:
            failed.append((seq, str(err)))
            return
        where = (msg.partition(), msg.offset())  # type: ignore[attr-defined]
        assert where not in acked, f"offset {where} acknowledged twice ({acked[where]} and {seq})"
        acked[where] = seq

    producer = Producer({
        "bootstrap.servers": cluster.bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "message.timeout.ms": 180_000,
        "retry.backoff.ms": 50,
        "topic.metadata.refresh.interval.ms": 1000,
    })

    killed: list[int] = []
    events: list[str] = []
    first_victim = old_controller = -1
    start = time.monotonic()
    for i in range(MESSAGES):
        while True:
            try:
                producer.produce(TOPIC, key=key_of(i), value=value_of(i), on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 != 999:
            continue
        producer.poll(0)
        ahead = (i + 1) / RATE_PER_S - (time.monotonic() - start)
        if ahead > 0:
            producer.poll(ahead)
        done = len(acked)
        if not killed and done >= 40_000:
            controller = cluster.controller_id()
            leaders = cluster.leaders(TOPIC)
            first_victim = next(b for b in sorted(set(leaders.values())) if b != controller)
            cluster.brokers[first_victim].kill9()
            killed.append(first_victim)
            events.append(f"kill -9 broker {first_victim} (leader of "
                          f"{sorted(p for p, b in leaders.items() if b == first_victim)}) at {done} acked")
        elif len(killed) == 1 and done >= 80_000:
            old_controller = cluster.controller_id()
            assert old_controller != first_victim
            cluster.brokers[old_controller].kill9()
            killed.append(old_controller)
            events.append(f"kill -9 controller {old_controller} at {done} acked")
            cluster.wait_new_controller(old_controller)
            cluster.restart(first_victim)
            events.append(f"restarted broker {first_victim}")
        elif len(killed) == 2 and cluster.brokers[old_controller].alive is False and done >= 140_000:
            cluster.restart(old_controller)
            events.append(f"restarted broker {old_controller} at {done} acked")
    assert len(killed) == 2, f"the kills did not happen: {events}, {len(acked)} acked"
    if not cluster.brokers[old_controller].alive:
        # Everything is handed to the producer; restart the controller while acks are still coming.
        deadline = time.monotonic() + 60
        while len(acked) < 140_000 and time.monotonic() < deadline:
            producer.poll(0.1)
        cluster.restart(old_controller)
        events.append(f"restarted broker {old_controller} at {len(acked)} acked")
    remaining = producer.flush(180)
    print("; ".join(events))
    assert remaining == 0, f"{remaining} messages still in flight after flush; {events}"
    assert not failed, f"{len(failed)} deliveries failed, e.g. {failed[:3]}; {events}"
    assert len(acked) == MESSAGES

    # The killed brokers rejoin every ISR.
    lines = cluster.wait_full_isr([TOPIC], PARTITIONS, timeout_s=60)
    assert {line.partition for line in lines} == set(range(PARTITIONS))

    # Read everything below the high watermark back.
    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap,
        "group.id": "acceptance-readback",
        "enable.auto.commit": False,
        "auto.offset.reset": "error",
        "enable.partition.eof": False,
    })
    consumed: dict[int, list[tuple[int, bytes, bytes]]] = defaultdict(list)
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10, cached=False)[1]
                for p in range(PARTITIONS)}
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        todo = {p for p in range(PARTITIONS) if ends[p] > 0}
        deadline = time.monotonic() + 60
        while todo:
            assert time.monotonic() < deadline, f"read-back timed out; partitions {sorted(todo)} unfinished"
            for msg in consumer.consume(10_000, timeout=0.5):
                assert msg.error() is None, msg.error()
                p, off = msg.partition(), msg.offset()
                if off >= ends[p]:
                    continue
                consumed[p].append((off, msg.key(), msg.value()))
                if off == ends[p] - 1:
                    todo.discard(p)
    finally:
        consumer.close()

    assert sum(ends.values()) >= MESSAGES
    seen_messages: set[int] = set()
    for p in range(PARTITIONS):
        offsets = [off for off, _, _ in consumed[p]]
        assert len(offsets) == len(set(offsets)), f"partition {p}: an offset was delivered twice"
        assert offsets == sorted(offsets), f"partition {p}: offsets out of order"
        last_by_key: dict[bytes, int] = {}
        for off, key, value in consumed[p]:
            seq = seq_of(value)
            assert value == value_of(seq) and key == key_of(seq), f"partition {p} offset {off}: corrupt record"
            assert seq not in seen_messages, f"message {seq} stored twice (again at partition {p} offset {off})"
            seen_messages.add(seq)
            assert seq > last_by_key.get(key, -1), (
                f"partition {p} offset {off}: key {key!r} value {seq} after {last_by_key[key]}")
            last_by_key[key] = seq
    by_offset = {(p, off): seq_of(value) for p in consumed for off, _, value in consumed[p]}
    missing = [(where, seq) for where, seq in acked.items() if by_offset.get(where) != seq]
    assert not missing, (f"{len(missing)} acknowledged messages not at their offset, e.g. "
                         f"{[(w, s, by_offset.get(w)) for w, s in missing[:5]]}; {events}")

    # Every replica holds the same bytes (a follower that had extra records truncated them).
    sizes = wait_for(lambda: (lambda s: s if all(len(set(v.values())) == 1 and len(v) == 3 for v in s.values())
                              and len(s) == PARTITIONS else None)(replica_sizes(cluster, TOPIC)),
                     30, "every replica of every partition to hold the same bytes")
    assert all(min(v.values()) > 0 for v in sizes.values())
