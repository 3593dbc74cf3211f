"""Reassignment at scale (issue #4): one AlterPartitionReassignments request moving 10,000 partitions.

Four brokers and ZooKeeper (local processes). ``--partitions`` partitions (RF 2, topics of
``--per-topic``) are placed on three brokers; the fourth, T, is not the controller and holds
nothing. Then T is paused (SIGSTOP, so its replicas cannot catch up and every move stays in
flight while it keeps its registration for the session timeout) and one request moves every
partition's second replica to T. Reported:

* ``accept_ms``: from sending that request to its answer, every partition accepted. It covers the
  controller's validation, phase U (the topic znodes with RS/AR/RR) and phase A (a leader epoch
  bump per partition), all written to ZooKeeper before the answer.
* ``list_ms``: ListPartitionReassignments of everything, with all 10,000 in flight, over
  ``--list-runs`` runs (p50 and max), next to a Metadata request for the same topics on the same
  controller (``metadata_ms``, the same number of partitions in an answer): ``list_over_metadata``
  is the ratio, which a noisy machine moves less than the times themselves.
  Timed ``--settle-s`` after the alter; ``list_first_ms`` is the first List, sent right after it,
  while the controller is still sending LeaderAndIsr and taking ISR changes.
* ``list_wire_ms``: the same List request sent as bytes on a socket of its own, timed from the send
  to the last byte of the answer: the broker's side, without the client library's decoding (which
  is kafka-python's cost, about 30 ms for 10,000 entries).
* ``rss_mib_controller`` and ``rss_mib_max``: resident memory of the controller's broker and of the
  largest broker at the end, with everything in flight.

Prints one JSON line; progress on stderr.

    .venv/bin/python benchmarks/reassign_scale.py [--partitions 10000] [--per-topic 1000]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration" / "cluster"))

from cluster_support import pause, resume, start_cluster
from datapath import rss_mib
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    CreateTopicsRequest,
    ListPartitionReassignmentsRequest,
)
from kafka.protocol.metadata import MetadataRequest

from headwater.admin.client import AdminClient


def create(client: AdminClient, name: str, assignment: list[list[int]]) -> None:
    T = CreateTopicsRequest.CreatableTopic
    A = T.CreatableReplicaAssignment
    resp = client.send_to_controller(CreateTopicsRequest, dict(
        topics=[T(name=name, num_partitions=-1, replication_factor=-1,
                  assignments=[A(partition_index=p, broker_ids=r) for p, r in enumerate(assignment)], configs=[])],
        timeout_ms=600_000, validate_only=False), lambda r: [t.error_code for t in r.topics])
    codes = [t.error_code for t in resp.topics]
    assert codes == [0], f"CreateTopics {name}: {codes}"


def online(client: AdminClient, names: list[str]) -> int:
    meta = metadata(client, names)
    return sum(1 for t in meta.topics if t.error_code == 0 for p in t.partitions if p.leader_id >= 0)


def metadata(client: AdminClient, names: list[str], node_id: int | None = None) -> Any:
    version = client.version_for(client.bootstrap[0], 3, 12)
    return client.send(MetadataRequest, dict(
        topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names], allow_auto_topic_creation=False),
        node_id=node_id, max_version=version)


def wire_roundtrip(sock: socket.socket, frame: bytes) -> int:
    """Send a framed request; read the whole framed answer without decoding it. Returns its size."""
    sock.sendall(frame)
    head = b""
    while len(head) < 4:
        head += sock.recv(4 - len(head))
    size = struct.unpack(">i", head)[0]
    left = size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        left -= len(chunk)
    return size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--per-topic", type=int, default=1000)
    ap.add_argument("--list-runs", type=int, default=10)
    ap.add_argument("--settle-s", type=float, default=10.0, help="wait after the alter before timing List")
    ap.add_argument("--session-timeout-ms", type=int, default=30_000)
    args = ap.parse_args()
    n_topics = (args.partitions + args.per_topic - 1) // args.per_topic
    topics = [f"move-{i:03d}" for i in range(n_topics)]
    sizes = [min(args.per_topic, args.partitions - i * args.per_topic) for i in range(n_topics)]
    out: dict[str, object] = {"benchmark": "reassign_scale", "partitions": args.partitions, "rf": 2}
    with tempfile.TemporaryDirectory(prefix="hw-reassign-scale-") as tmp:
        cluster = start_cluster(Path(tmp), 4, {"zookeeper.session.timeout.ms": str(args.session_timeout_ms),
                                               "default.replication.factor": "2"})
        paused: int | None = None
        try:
            controller = cluster.controller_id()
            target = max(b for b in cluster.brokers if b != controller)
            others = sorted(b for b in cluster.brokers if b != target)
            with AdminClient(cluster.bootstrap, timeout_s=600) as client:
                t0 = time.monotonic()
                plan: dict[tuple[str, int], list[int]] = {}
                for name, n in zip(topics, sizes, strict=True):
                    assignment = [[others[p % 3], others[(p + 1) % 3]] for p in range(n)]
                    create(client, name, assignment)
                    plan.update({(name, p): [r[0], target] for p, r in enumerate(assignment)})
                while online(client, topics) < args.partitions:
                    time.sleep(0.5)
                out["create_online_s"] = round(time.monotonic() - t0, 1)
                print(f"{args.partitions} partitions online in {out['create_online_s']} s; moving them to broker "
                      f"{target} (paused), controller {controller}", file=sys.stderr)

                pause(cluster.pid(target))
                paused = target
                R = AlterPartitionReassignmentsRequest.ReassignableTopic
                P = R.ReassignablePartition
                by_topic: dict[str, list[object]] = {}
                for (name, p), replicas in sorted(plan.items()):
                    by_topic.setdefault(name, []).append(P(partition_index=p, replicas=replicas))
                fields = dict(timeout_ms=60_000, allow_replication_factor_change=True,
                              topics=[R(name=t, partitions=ps) for t, ps in by_topic.items()])
                t_send = time.monotonic()
                resp = client.send_to_controller(AlterPartitionReassignmentsRequest, fields, lambda r: [r.error_code])
                accept_s = time.monotonic() - t_send
                errors = [p.error_code for t in resp.responses for p in t.partitions]
                assert resp.error_code == 0 and len(errors) == args.partitions and not any(errors), \
                    (resp.error_code, sorted(set(errors)))
                out["accept_ms"] = round(accept_s * 1000)
                print(f"accepted in {accept_s * 1000:.0f} ms", file=sys.stderr)

                # The controller spends the first seconds after a 10,000-partition alter sending
                # LeaderAndIsr and taking ISR changes; List is timed once that has settled (its
                # answer right after the alter waits behind those events: list_first_ms).
                t = time.monotonic()
                client.send_to_controller(ListPartitionReassignmentsRequest, dict(timeout_ms=30_000, topics=None),
                                          lambda r: [r.error_code])
                out["list_first_ms"] = round((time.monotonic() - t) * 1000)
                time.sleep(args.settle_s)
                host, port = client._address(client.controller_id)
                request = ListPartitionReassignmentsRequest(version=0, timeout_ms=30_000, topics=None)
                list_s: list[float] = []
                meta_s: list[float] = []
                wire_s: list[float] = []
                with socket.create_connection((host, port)) as sock:
                    for run in range(args.list_runs):
                        t = time.monotonic()
                        listed = client.send_to_controller(ListPartitionReassignmentsRequest,
                                                           dict(timeout_ms=30_000, topics=None), lambda r: [r.error_code])
                        list_s.append(time.monotonic() - t)
                        in_flight = sum(len(t.partitions) for t in listed.topics)
                        if run == 0:
                            out["in_flight"] = in_flight
                        request.with_header(correlation_id=run, client_id="reassign-scale")
                        frame = request.encode(header=True, framed=True)
                        t = time.monotonic()
                        wire_roundtrip(sock, frame)
                        wire_s.append(time.monotonic() - t)
                        t = time.monotonic()
                        metadata(client, topics, node_id=client.controller_id)
                        meta_s.append(time.monotonic() - t)
                out["list_wire_ms_p50"] = round(statistics.median(wire_s) * 1000)
                out["list_wire_ms_max"] = round(max(wire_s) * 1000)
                out["list_ms_p50"] = round(statistics.median(list_s) * 1000)
                out["list_ms_max"] = round(max(list_s) * 1000)
                out["metadata_ms_p50"] = round(statistics.median(meta_s) * 1000)
                out["list_over_metadata"] = round(statistics.median(list_s) / statistics.median(meta_s), 2)
                out["rss_mib_controller"] = round(rss_mib(cluster.pid(controller)))
                out["rss_mib_max"] = round(max(rss_mib(cluster.pid(b)) for b in cluster.brokers))
        finally:
            if paused is not None:
                resume(cluster.pid(paused))
            cluster.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
