"""Requests that reach a broker which is not the partition's leader, through each client library,
and each library's producer delivering through a leadership change. One 3-broker cluster.

Expected answers, from Kafka 3.9's ZooKeeper-mode broker, for partition 0 of a topic placed on
brokers 1 (leader) and 2, so broker 2 is a follower and broker 3 holds no replica:
- Produce: ``ReplicaManager.appendToLocalLog`` -> ``getPartitionOrException``: broker 3 hosts no
  replica of a partition in its metadata cache, so ``getPartitionOrError`` answers
  NOT_LEADER_OR_FOLLOWER (6) ("this broker is no longer a replica of it"); broker 2 hosts one,
  and ``Partition.appendRecordsToLeader`` throws NotLeaderOrFollowerException ("Leader not local
  for partition"). The leader answers NONE.
- ListOffsets from a consumer (replica id -1): ``KafkaApis.handleListOffsetRequestV1AndAbove``
  sets ``fetchOnlyFromLeader`` for any replica id but DEBUGGING_REPLICA_ID, and
  ``Partition.fetchOffsetForTimestamp`` -> ``localLogWithEpochOrThrow(requireLeader = true)`` answers
  NOT_LEADER_OR_FOLLOWER on the follower; broker 3 answers it from ``getPartitionOrError``.

Through each library:
- kafka-python: ``KafkaNetClient`` (3.0's ``KafkaClient``) ``send_and_receive(node_id, request)``,
  with the library's own request classes at the versions it negotiates.
- KafkaJS: the ``Broker.produce`` / ``Broker.listOffsets`` its producer and admin call, on the
  Broker its Cluster holds for a node id (tests/js/not_leader.js: reached through a private symbol,
  as KafkaJS has no public call aimed at one broker).
- confluent-kafka: librdkafka sends a partition's requests only to the leader it knows and has no
  call aimed at one broker, so its row is raw requests (``RawConnection``) at Produce v9 and
  ListOffsets v7, not librdkafka itself.

Leadership change: an idempotent producer of each library sends records to a partition while its
leader (not the controller) is stopped (SIGTERM: controlled shutdown, which moves leadership first,
``KafkaController.doControlledShutdown``). Each library's documented behaviour is to refresh
metadata on NOT_LEADER_OR_FOLLOWER or a lost connection and retry against the new leader, so
every record is acknowledged, and read back exactly once in order (idempotence: the new leader
holds the producers' sequence state, replicated with the log, ``ProducerStateManager``). The
stored batches' partition leader epochs show that each producer wrote under both leaders.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_support import LocalCluster, run_cli, start_cluster, wait_for
from confluent_kafka import Producer
from hw_support import (
    RawConnection,
    build_batch,
    decode_produce_response,
    fetch_batches,
    list_offset,
    produce_request,
    watermarks,
)
from kafka import KafkaProducer
from kafka.net import KafkaNetClient
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.memory_records import MemoryRecordsBuilder

JS = Path(__file__).resolve().parents[2] / "js"
NONE, NOT_LEADER_OR_FOLLOWER = 0, 6
LEADER, FOLLOWER, NOT_A_REPLICA = 1, 2, 3
EXPECTED = {LEADER: NONE, FOLLOWER: NOT_LEADER_OR_FOLLOWER, NOT_A_REPLICA: NOT_LEADER_OR_FOLLOWER}
RECORDS_EACH = 100  # per producer, one every PAUSE_S: the leadership change lands mid-stream
PAUSE_S = 0.05


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = start_cluster(tmp_path_factory.mktemp("not-leader"), 3)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def placed(cluster: LocalCluster) -> str:
    """A topic whose partition 0 is led by broker 1 with broker 2 as its follower."""
    topic = f"placed-{uuid.uuid4().hex[:6]}"
    run_cli("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", topic,
            "--replica-assignment", f"{LEADER}:{FOLLOWER}")
    cluster.wait_full_isr([topic], 1)
    assert cluster.leaders(topic) == {0: LEADER}
    # Every broker's metadata cache knows the partition (broker 3 must answer from it).
    for b in cluster.brokers.values():
        wait_for(lambda b=b: watermarks(b.bootstrap, topic, [0]), 20, f"{topic} in broker {b.broker_id}'s metadata")
    return topic


def test_kafka_python_client_aimed_at_each_broker(cluster: LocalCluster, placed: str) -> None:
    client = KafkaNetClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10_000)
    try:
        client.check_version()
        wait_for(lambda: {b.node_id for b in client.cluster.brokers()} == set(EXPECTED), 10, "all brokers known")
        got = {}
        for node in EXPECTED:
            builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 16)
            builder.append(timestamp=None, key=b"k", value=f"to {node}".encode(), headers=[])
            builder.close()
            T = ProduceRequest.TopicProduceData
            produced = client.send_and_receive(node, ProduceRequest(
                transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
                    T(name=placed, partition_data=[T.PartitionProduceData(index=0, records=builder.buffer())])]))
            L = ListOffsetsRequest.ListOffsetsTopic
            listed = client.send_and_receive(node, ListOffsetsRequest(
                replica_id=-1, isolation_level=0, topics=[
                    L(name=placed, partitions=[L.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                                      timestamp=-1)])]))
            got[node] = (produced.responses[0].partition_responses[0].error_code,
                         listed.topics[0].partitions[0].error_code)
    finally:
        client.close()
    assert got == {node: (code, code) for node, code in EXPECTED.items()}


def test_kafkajs_broker_objects_aimed_at_each_broker(cluster: LocalCluster, placed: str) -> None:
    done = subprocess.run(["node", str(JS / "not_leader.js"), cluster.bootstrap, placed, *map(str, EXPECTED)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    got = {int(node): (r["produce"], r["listOffsets"]) for node, r in json.loads(done.stdout).items()}
    assert got == {node: (code, code) for node, code in EXPECTED.items()}


def test_raw_requests_in_place_of_librdkafka(cluster: LocalCluster, placed: str) -> None:
    got = {}
    for node in EXPECTED:
        with RawConnection(cluster.brokers[node].bootstrap) as conn:
            batch = build_batch([(b"k", f"raw to {node}".encode(), int(time.time() * 1000))])
            conn.send_bytes(conn.encode(produce_request(placed, 0, batch)))
            produced = decode_produce_response(conn.recv_frame())
            got[node] = (produced[0], list_offset(conn, placed, 0, -1)[0])
    assert got == {node: (code, code) for node, code in EXPECTED.items()}


# --- delivery through a leadership change (last: it stops a broker) -------------------------------------------

def _confluent(bootstrap: str, topic: str, out: dict[str, Any]) -> None:
    reports: list[tuple[str | None, int]] = out["reports"]
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "message.timeout.ms": 60_000, "retry.backoff.ms": 100})
    for i in range(RECORDS_EACH):
        p.produce(topic, f"confluent-{i}".encode(), partition=0,
                  on_delivery=lambda err, msg: reports.append((None if err is None else str(err), msg.offset())))
        p.poll(PAUSE_S)
    out["left"] = p.flush(60)


def _kafka_python(bootstrap: str, topic: str, out: dict[str, Any]) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, retry_backoff_ms=100)
    futures: list[Any] = out["futures"]
    try:
        for i in range(RECORDS_EACH):
            futures.append(p.send(topic, f"kafka-python-{i}".encode(), partition=0))
            time.sleep(PAUSE_S)
        p.flush(60)
    finally:
        p.close(timeout=5)
    for f in futures:
        try:
            out["reports"].append((None, f.get(timeout=0).offset))
        except Exception as exc:
            out["reports"].append((repr(exc), -1))


def test_producers_deliver_through_a_leadership_change(cluster: LocalCluster) -> None:
    controller = cluster.controller_id()
    leader = next(b for b in cluster.brokers if b != controller)
    others = [b for b in cluster.brokers if b != leader]
    topic = f"moving-{uuid.uuid4().hex[:6]}"
    run_cli("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", topic,
            "--replica-assignment", ":".join(map(str, [leader, *others])))
    cluster.wait_full_isr([topic], 1)
    assert cluster.leaders(topic) == {0: leader}

    bootstrap = cluster.bootstrap
    confluent: dict[str, Any] = {"reports": []}
    kafka_python: dict[str, Any] = {"reports": [], "futures": []}
    threads = [threading.Thread(target=_confluent, args=(bootstrap, topic, confluent)),
               threading.Thread(target=_kafka_python, args=(bootstrap, topic, kafka_python))]
    js = subprocess.Popen(["node", str(JS / "produce_through_failover.js"), bootstrap, topic, str(RECORDS_EACH),
                           str(int(PAUSE_S * 1000))], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for t in threads:
            t.start()
        assert js.stdout is not None
        assert js.stdout.readline().strip() == "started"
        # A few records acknowledged by the old leader from each producer, then the change.
        wait_for(lambda: len(confluent["reports"]) >= 5 and sum(f.is_done for f in kafka_python["futures"]) >= 5, 20,
                 "the Python producers' first acknowledgements")
        cluster.brokers[leader].stop()
        new_leader = wait_for(lambda: (lambda lead: lead if lead in others else None)(cluster.leaders(topic)[0]), 30,
                              "a new leader")
        for t in threads:
            t.join(90)
        js_out, js_err = js.communicate(timeout=90)
    finally:
        if js.poll() is None:
            js.kill()
            js.wait()
    assert js.returncode == 0, js_err
    kafkajs = json.loads(js_out.strip().splitlines()[-1])
    assert kafkajs["errors"] == [], kafkajs["errors"][:3]
    for name, got in (("confluent", confluent), ("kafka-python", kafka_python)):
        assert got.get("left", 0) == 0, name
        assert [err for err, _ in got["reports"]] == [None] * RECORDS_EACH, (name, got["reports"][:5])
    told = {"confluent": [off for _, off in confluent["reports"]],
            "kafka-python": [off for _, off in kafka_python["reports"]], "kafkajs": kafkajs["offsets"]}

    # Every record once, each producer's in its order, at the offsets it was told; and each
    # producer wrote under both leaders (the batches' partition leader epochs).
    end = watermarks(cluster.brokers[new_leader].bootstrap, topic, [0])[0][1]
    assert end == 3 * RECORDS_EACH
    at: dict[int, tuple[str, int]] = {}
    with RawConnection(cluster.brokers[new_leader].bootstrap) as conn:
        while len(at) < end:
            batches = fetch_batches(conn, topic, 0, len(at))
            assert batches, f"nothing to fetch at offset {len(at)} of {end}"
            for batch in batches:
                at.update({r.offset: ((r.value or b"").decode(), batch.leader_epoch) for r in batch})
    for name, offsets in told.items():
        assert [at[o][0] for o in offsets] == [f"{name}-{i}" for i in range(RECORDS_EACH)], name
        assert offsets == sorted(offsets), name
        epochs = [at[o][1] for o in offsets]
        assert epochs[0] < epochs[-1], f"{name} wrote under one leader only: epochs {sorted(set(epochs))}"
