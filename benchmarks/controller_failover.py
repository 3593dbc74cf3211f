"""Controller failover with many partitions in place, and the time to create them.

Three brokers and ZooKeeper (local processes). First, ``--partitions`` partitions (RF 3) are
created in topics of ``--per-topic`` partitions each; the creation time runs from the first
CreateTopics request to the moment Metadata shows every partition with a leader. Then the active
controller is killed -9 and a client sends CreateTopics (1 partition, RF 2) in a loop until one
succeeds. Reported:

* ``kill_to_create_ms``: from the kill to the first successful CreateTopics. The surviving brokers
  learn that the controller is gone only when its ZooKeeper session expires, so this includes
  ``zookeeper.session.timeout.ms``.
* ``expiry_to_create_ms``: from the moment ``/controller`` disappears from ZooKeeper (watched with
  kazoo) to the first successful CreateTopics: the election plus the new controller loading every
  partition state and starting to serve.

Every broker holds a replica of every partition (RF 3 on 3 brokers). A broker keeps one file open
per partition (its active segment's log; index files are opened only to write them) and raises its
own open-file limit at start, so 10,000 partitions fit in a hard limit of 20,000. The JSON reports
each broker's open descriptors once every partition is online (``open_fds``).

Prints one JSON line.

    .venv/bin/python benchmarks/controller_failover.py [--partitions 10000] [--per-topic 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration" / "cluster"))

from cluster_support import start_cluster
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.metadata import MetadataRequest

from headwater.admin.client import AdminClient, AdminError


def create_topics(bootstrap: str, names: list[str], partitions: int, rf: int, timeout_s: float = 600) -> None:
    T = CreateTopicsRequest.CreatableTopic
    with AdminClient(bootstrap, timeout_s=timeout_s) as client:
        for name in names:
            resp = client.send_to_controller(CreateTopicsRequest, dict(
                topics=[T(name=name, num_partitions=partitions, replication_factor=rf, assignments=[], configs=[])],
                timeout_ms=int(timeout_s * 1000), validate_only=False), lambda r: [t.error_code for t in r.topics])
            codes = [t.error_code for t in resp.topics]
            assert codes == [0], f"CreateTopics {name}: {codes}"


def online_count(bootstrap: str, names: list[str]) -> int:
    with AdminClient(bootstrap, timeout_s=60) as client:
        version = client.version_for(client.bootstrap[0], 3, 12)
        meta = client.send(MetadataRequest, dict(
            topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names], allow_auto_topic_creation=False),
            max_version=version)
    return sum(1 for t in meta.topics if t.error_code == 0 for p in t.partitions if p.leader_id >= 0)


def try_create(bootstrap: str, name: str) -> tuple[bool, str]:
    """One CreateTopics at the controller Metadata names; (success, what happened) for the progress log."""
    T = CreateTopicsRequest.CreatableTopic
    try:
        with AdminClient(bootstrap, timeout_s=2) as client:
            # No topics: a probe every 20 ms asking for all 10,000 partitions loaded the brokers it measures.
            client.refresh([])
            if client.controller_id < 0:
                return False, "no controller in Metadata"
            resp = client.send(CreateTopicsRequest, dict(
                topics=[T(name=name, num_partitions=1, replication_factor=2, assignments=[], configs=[])],
                timeout_ms=2000, validate_only=False), node_id=client.controller_id)
            codes = [t.error_code for t in resp.topics]
            return codes == [0], f"controller {client.controller_id}: {codes}"
    except (AdminError, OSError) as exc:
        return False, f"{type(exc).__name__}: {exc}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--per-topic", type=int, default=1000)
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    ap.add_argument("--profile-dir", type=Path, default=None,
                    help="record the surviving brokers with py-spy (raw stacks) from the kill on, for --profile-s")
    ap.add_argument("--profile-s", type=int, default=30)
    args = ap.parse_args()
    topics = [f"bulk-{i:03d}" for i in range((args.partitions + args.per_topic - 1) // args.per_topic)]
    sizes = [min(args.per_topic, args.partitions - i * args.per_topic) for i in range(len(topics))]
    out: dict[str, object] = {"benchmark": "controller_failover", "partitions": args.partitions, "rf": 3,
                              "session_timeout_ms": args.session_timeout_ms}
    with tempfile.TemporaryDirectory(prefix="hw-ctrl-failover-") as tmp:
        cluster = start_cluster(Path(tmp), 3, {"zookeeper.session.timeout.ms": str(args.session_timeout_ms)})
        try:
            t0 = time.monotonic()
            for name, n in zip(topics, sizes, strict=True):
                create_topics(cluster.bootstrap, [name], n, 3)
            t_acked = time.monotonic()
            while online_count(cluster.bootstrap, topics) < args.partitions:
                time.sleep(1.0)
            t_online = time.monotonic()
            out["create_acked_s"] = round(t_acked - t0, 2)
            out["create_online_s"] = round(t_online - t0, 2)
            print(f"{args.partitions} partitions online in {t_online - t0:.1f} s", file=sys.stderr)
            out["open_fds"] = {b: len(os.listdir(f"/proc/{cluster.pid(b)}/fd")) for b in sorted(cluster.brokers)}

            old = cluster.controller_id()
            gone = threading.Event()
            gone_at: list[float] = []

            def watch(event: object) -> None:
                # A one-shot watch: ZooKeeper notifies the deletion even when the new controller
                # re-creates /controller at once (a DataWatch re-reads first and can miss it).
                if getattr(event, "type", None) == "DELETED":
                    gone_at.append(time.monotonic())
                    gone.set()

            assert cluster.kazoo.exists("/controller", watch=watch) is not None
            spies = []
            if args.profile_dir is not None:
                args.profile_dir.mkdir(parents=True, exist_ok=True)
                spy = Path(sys.executable).with_name("py-spy")
                spies = [subprocess.Popen([str(spy), "record", "--pid", str(cluster.pid(b)), "-d", str(args.profile_s),
                                           "-r", "200", "-f", "raw", "-o", str(args.profile_dir / f"broker-{b}.txt")],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                         for b in sorted(cluster.brokers) if b != old]
            t_kill = time.monotonic()
            cluster.brokers[old].kill9()
            i = 0
            last = ""
            while True:
                ok, what = try_create(cluster.bootstrap, f"probe-{i}")
                if what != last:  # each new outcome once, with the time since the kill
                    print(f"+{time.monotonic() - t_kill:6.2f} s probe: {what}", file=sys.stderr)
                    last = what
                if ok:
                    break
                i += 1
                time.sleep(0.02)
            t_served = time.monotonic()
            assert gone.wait(5)
            new = cluster.controller_id()
            assert new != old
            out["kill_to_create_ms"] = round((t_served - t_kill) * 1000)
            out["expiry_to_create_ms"] = round((t_served - gone_at[0]) * 1000)
            out["new_controller"] = new
            for proc in spies:
                proc.wait()
            if args.profile_dir is not None:
                for b in sorted(cluster.brokers):
                    shutil.copy(cluster.brokers[b].log_path, args.profile_dir / f"broker-{b}.log")
        finally:
            cluster.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
