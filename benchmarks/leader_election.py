"""Leader elections at scale (issue #17): 10,000 partitions whose leadership left their preferred replica.

Three brokers and ZooKeeper (local processes). ``--partitions`` partitions (RF 2, topics of
``--per-topic``) all have broker P, which is not the controller, as their preferred replica. A
controlled shutdown of P and its restart move every leadership away from it (the skew). Reported,
each against the same partitions in the same run:

* ``elect_ms``: one ElectLeaders PREFERRED naming every partition, from sending it to its answer
  (the controller's election, its ZooKeeper writes, and the wait until its own metadata shows every
  new leader, as Kafka's DelayedElectLeader); ``elected`` is how many came back NONE.
* ``rebalance_s``: after a second skew, from turning ``auto.leader.rebalance.enable`` on (a
  cluster-wide dynamic config; ``leader.imbalance.check.interval.seconds=1``) until Metadata shows
  every partition led by P again.
* ``reassign_accept_ms``: one AlterPartitionReassignments of the same partitions (each replica list
  reversed: no data moves) from sending it to its answer, the controller's other bulk operation.

Prints one JSON line; progress on stderr.

    .venv/bin/python benchmarks/leader_election.py [--partitions 10000] [--per-topic 1000]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration" / "cluster"))

from cluster_support import LocalCluster, run_cli, start_cluster
from kafka.protocol.admin import AlterPartitionReassignmentsRequest, ElectLeadersRequest
from reassign_scale import create, metadata

from headwater.admin.client import AdminClient


def led_by(client: AdminClient, topics: list[str], broker: int, with_isr: bool = False) -> int:
    """Partitions Metadata shows led by ``broker`` (``with_isr``: partitions with ``broker`` in the ISR)."""
    meta = metadata(client, topics, node_id=client.controller_id)
    if with_isr:
        return sum(1 for t in meta.topics for p in t.partitions if broker in p.isr_nodes)
    return sum(1 for t in meta.topics for p in t.partitions if p.leader_id == broker)


def wait(cond: object, what: str, timeout_s: float = 600) -> float:
    started = time.monotonic()
    while not cond():  # type: ignore[operator]
        if time.monotonic() - started > timeout_s:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)
    return time.monotonic() - started


def skew(cluster: LocalCluster, client: AdminClient, topics: list[str], preferred: int, total: int) -> None:
    """Controlled shutdown of the preferred broker moves every leadership away; then it comes back
    and catches up into every ISR."""
    cluster.brokers[preferred].stop()
    wait(lambda: led_by(client, topics, preferred) == 0, "leadership to leave the preferred broker")
    cluster.restart(preferred)
    cluster.wait_registered({preferred})
    wait(lambda: led_by(client, topics, preferred, with_isr=True) == total, "the preferred broker back in every ISR")
    print(f"skewed: broker {preferred} leads {led_by(client, topics, preferred)} partitions", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--per-topic", type=int, default=1000)
    args = ap.parse_args()
    n_topics = (args.partitions + args.per_topic - 1) // args.per_topic
    topics = [f"lead-{i:03d}" for i in range(n_topics)]
    sizes = [min(args.per_topic, args.partitions - i * args.per_topic) for i in range(n_topics)]
    out: dict[str, object] = {"benchmark": "leader_election", "partitions": args.partitions, "rf": 2}
    with tempfile.TemporaryDirectory(prefix="hw-leader-election-") as tmp:
        cluster = start_cluster(Path(tmp), 3, {"auto.leader.rebalance.enable": "false",
                                               "leader.imbalance.check.interval.seconds": "1",
                                               "zookeeper.session.timeout.ms": "30000"})
        try:
            controller = cluster.controller_id()
            preferred = max(b for b in cluster.brokers if b != controller)
            others = sorted(b for b in cluster.brokers if b != preferred)
            with AdminClient(cluster.bootstrap, timeout_s=600) as client:
                assignments: dict[str, list[list[int]]] = {}
                for name, n in zip(topics, sizes, strict=True):
                    assignments[name] = [[preferred, others[p % 2]] for p in range(n)]
                    create(client, name, assignments[name])
                wait(lambda: led_by(client, topics, preferred) == args.partitions, "every partition online")
                print(f"{args.partitions} partitions led by broker {preferred}; controller {controller}", file=sys.stderr)

                skew(cluster, client, topics, preferred, args.partitions)
                T = ElectLeadersRequest.TopicPartitions
                fields = dict(election_type=0, timeout_ms=60_000,
                              topic_partitions=[T(topic=name, partitions=list(range(n)))
                                                for name, n in zip(topics, sizes, strict=True)])
                t = time.monotonic()
                resp = client.send_to_controller(ElectLeadersRequest, fields, lambda r: [r.error_code])
                out["elect_ms"] = round((time.monotonic() - t) * 1000)
                codes = [p.error_code for r in resp.replica_election_results for p in r.partition_result]
                out["elected"] = sum(1 for c in codes if c == 0)
                print(f"ElectLeaders answered in {out['elect_ms']} ms ({out['elected']} elected)", file=sys.stderr)

                skew(cluster, client, topics, preferred, args.partitions)
                t = time.monotonic()
                run_cli("configs", "--bootstrap-server", cluster.bootstrap, "--alter", "--entity-type", "brokers",
                        "--entity-default", "--add-config", "auto.leader.rebalance.enable=true")
                wait(lambda: led_by(client, topics, preferred) == args.partitions, "the automatic rebalance")
                out["rebalance_s"] = round(time.monotonic() - t, 2)
                print(f"automatic rebalance converged in {out['rebalance_s']} s", file=sys.stderr)

                R = AlterPartitionReassignmentsRequest.ReassignableTopic
                P = R.ReassignablePartition
                fields = dict(timeout_ms=60_000, allow_replication_factor_change=True, topics=[
                    R(name=name, partitions=[P(partition_index=p, replicas=list(reversed(r)))
                                             for p, r in enumerate(assignments[name])]) for name in topics])
                t = time.monotonic()
                moved = client.send_to_controller(AlterPartitionReassignmentsRequest, fields, lambda r: [r.error_code])
                out["reassign_accept_ms"] = round((time.monotonic() - t) * 1000)
                errors = [p.error_code for t_ in moved.responses for p in t_.partitions]
                assert moved.error_code == 0 and not any(errors), sorted(set(errors))
                out["elect_over_reassign"] = round(int(out["elect_ms"]) / max(int(out["reassign_accept_ms"]), 1), 2)
            # Where the controller's time went (its slow-event lines name each part).
            log_text = cluster.brokers[controller].log_path.read_text(errors="replace")
            for line in log_text.splitlines():
                if ("ElectLeadersRequested took" in line or "AutoRebalanceCheck took" in line
                        or "AlterPartitionReassignmentsRequested took" in line or " answered in " in line):
                    print(line, file=sys.stderr)
        finally:
            cluster.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
