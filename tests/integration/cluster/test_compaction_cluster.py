"""Log compaction in a 3-broker cluster: each replica cleans its own copy, and a replica added by a
reassignment copies the leader's cleaned log, gaps and empty batches included.

A compacted topic with replicas [1, 2] takes 10,000 updates over 200 keys (acks=all). Both replicas'
cleaners catch up (their ``cleaner-offset-checkpoint`` reaches their active segment). Then
``headwater reassign`` adds broker 3; once it is in the ISR its files hold the same records as the
leader's, every key with its latest value, and its own cleaner runs on them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from cluster_support import LocalCluster, run_cli, wait_for
from confluent_kafka import Producer
from kafka.record.default_records import DefaultRecordBatch

from headwater.storage.checkpoint import read_offsets

UPDATES = 10_000
KEYS = 200


def log_dir(cluster: LocalCluster, broker_id: int) -> Path:
    return cluster.data_dir / f"broker-{broker_id}-logs"


def records_on_disk(cluster: LocalCluster, broker_id: int, topic: str) -> list[tuple[int, bytes, bytes]]:
    """(offset, key, value) of every record in a replica's segment files, in offset order."""
    out = []
    for path in sorted((log_dir(cluster, broker_id) / f"{topic}-0").glob("*.log")):
        data = path.read_bytes()
        pos = 0
        while pos + 12 <= len(data):
            length = int.from_bytes(data[pos + 8 : pos + 12], "big")
            if pos + 12 + length > len(data):
                break  # a batch being written right now
            out.extend((r.offset, r.key, r.value) for r in DefaultRecordBatch(data[pos : pos + 12 + length]))
            pos += 12 + length
    return out


def caught_up(cluster: LocalCluster, broker_id: int, topic: str) -> bool:
    directory = log_dir(cluster, broker_id) / f"{topic}-0"
    active = max(int(p.name[:20]) for p in directory.glob("*.log"))
    checkpoint = read_offsets(log_dir(cluster, broker_id) / "cleaner-offset-checkpoint").get((topic, 0))
    return active > 0 and checkpoint == active


def test_replicas_clean_their_own_copies_and_a_new_replica_copies_a_cleaned_log(
    cluster_factory: Callable[..., LocalCluster], tmp_path: Path
) -> None:
    cluster = cluster_factory(3, {"log.cleaner.backoff.ms": "100"})
    topic = "compacted"
    run_cli("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", topic,
            "--replica-assignment", "1:2", "--config", "cleanup.policy=compact", "--config", "segment.bytes=8192",
            "--config", "min.cleanable.dirty.ratio=0.01")
    cluster.wait_full_isr([topic], 1)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5, "batch.num.messages": 100,
                         "enable.idempotence": True})
    acked: dict[bytes, tuple[int, bytes]] = {}

    def on_delivery(err: object, msg: object) -> None:
        assert err is None, err
        acked[msg.key()] = (msg.offset(), msg.value())  # type: ignore[attr-defined]

    for i in range(UPDATES):
        while True:
            try:
                producer.produce(topic, key=b"key-%03d" % (i % KEYS), value=b"value-%06d" % i, partition=0,
                                 on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    del producer  # librdkafka stops its threads (and its reconnect attempts) once the producer is freed
    want = {k: v for k, v in acked.items()}  # the delivery reports came in offset order

    for broker_id in (1, 2):  # the follower cleans too
        wait_for(lambda b=broker_id: caught_up(cluster, b, topic), 60, f"broker {broker_id}'s cleaner to catch up")
        on_disk = records_on_disk(cluster, broker_id, topic)
        assert len(on_disk) < UPDATES // 4
        assert {k: (o, v) for o, k, v in on_disk} == want

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [1, 2, 3]}]}))
    run_cli("reassign", "--bootstrap-server", cluster.bootstrap, "--execute", "--reassignment-json-file", str(plan))
    wait_for(lambda: any(line.replicas == (1, 2, 3) and line.full for line in cluster.describe(topic)), 60,
             "broker 3 in the ISR")
    copied = records_on_disk(cluster, 3, topic)
    assert {k: (o, v) for o, k, v in copied} == want
    assert [o for o, _, _ in copied] == sorted(o for o, _, _ in copied)
    assert len(copied) < UPDATES // 4  # it copied the cleaned log, not the original
