"""Produce and consume throughput over SASL_SSL (SCRAM-SHA-512) against PLAINTEXT, same broker, same run.

One broker with both listeners; confluent-kafka producer (acks=1), then an assign() consumer from
offset 0, then a group consumer (subscribe: FindCoordinator, join, sync, offset fetch, commits) over
the same records (its rate from the assignment to the last record, and apart the time to the assignment), 1 KiB messages, one partition per topic, first on the PLAINTEXT listener and then
on the SASL_SSL one, for --rounds rounds (each round a fresh pair of topics and groups). TLS costs the broker the
encryption and the loss of sendfile (fetched bytes are read and written through the TLS transport);
SASL costs one exchange per connection. The ratio is SASL_SSL / PLAINTEXT (1.0 = no cost).

    .venv/bin/python benchmarks/security_throughput.py [--mib 64] [--rounds 2]

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from headwater.admin.local import BrokerProcess, free_port

sys.path.insert(0, str(Path(__file__).resolve().parent))
from datapath import MESSAGE_BYTES, consume, produce

USER, PASSWORD = "bench", "bench-secret"


def self_signed(d: Path) -> tuple[Path, Path]:
    """A key+certificate PEM for 127.0.0.1 (the broker's keystore) and the certificate (clients' CA)."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "key.pem", "-out", "cert.pem",
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   cwd=d, check=True, capture_output=True, timeout=60)
    keystore = d / "keystore.pem"
    keystore.write_text((d / "key.pem").read_text() + (d / "cert.pem").read_text())
    return keystore, d / "cert.pem"


def consume_group(conf: dict[str, Any], topic: str, count: int, group: str) -> tuple[float, float]:
    """(seconds from subscribe() to the assignment, seconds from the assignment to the last record)
    for a consumer joining a new group (auto commit on). The first includes the coordinator's
    group.initial.rebalance.delay.ms (3 s by default, as in Kafka), so the two are kept apart."""
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "fetch.max.bytes": 52_428_800,
                  "max.partition.fetch.bytes": 10_485_760, "fetch.queue.backoff.ms": 10})
    assigned: list[float] = []
    t0 = time.perf_counter()
    c.subscribe([topic], on_assign=lambda _c, _parts: assigned.append(time.perf_counter()))
    got = 0
    deadline = t0 + 300
    while got < count and time.perf_counter() < deadline:
        batch = c.consume(min(100_000, count - got), 1.0)
        got += sum(1 for m in batch if m.error() is None)
    last = time.perf_counter()
    c.close()
    if got != count or not assigned:
        raise RuntimeError(f"group consumer read {got} of {count} (assigned: {bool(assigned)})")
    return assigned[0] - t0, last - assigned[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    count = args.mib * 1024 * 1024 // MESSAGE_BYTES
    root = Path(tempfile.mkdtemp(prefix="headwater-bench-", dir=os.environ.get("BENCH_DIR")))
    results: dict[str, Any] = {"benchmark": "security_throughput", "messages": count, "message_bytes": MESSAGE_BYTES,
                               "rounds": args.rounds}
    try:
        keystore, ca = self_signed(root)
        plain_port, secure_port = free_port(), free_port()
        listeners = f"PLAINTEXT://127.0.0.1:{plain_port},SASL_SSL://127.0.0.1:{secure_port}"
        broker = BrokerProcess(1, plain_port, root / "broker", {
            "listeners": listeners, "advertised.listeners": listeners, "log.segment.bytes": str(256 << 20),
            "sasl.enabled.mechanisms": "SCRAM-SHA-512", "ssl.keystore.location": str(keystore),
        })
        broker.start()
        try:
            subprocess.run([sys.executable, "-m", "headwater", "configs", "--bootstrap-server", broker.bootstrap,
                            "--alter", "--entity-type", "users", "--entity-name", USER,
                            "--add-config", f"SCRAM-SHA-512=[password={PASSWORD}]"], check=True, capture_output=True)
            confs = {
                "plaintext": {"bootstrap.servers": broker.bootstrap},
                "sasl_ssl": {"bootstrap.servers": f"127.0.0.1:{secure_port}", "security.protocol": "SASL_SSL",
                             "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": USER, "sasl.password": PASSWORD,
                             "ssl.ca.location": str(ca)},
            }
            rates: dict[str, dict[str, list[float]]] = {name: {"produce": [], "consume": [], "group_consume": []}
                                                        for name in confs}
            joins: dict[str, list[float]] = {name: [] for name in confs}
            mb = count * MESSAGE_BYTES / 1e6
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            for r in range(args.rounds):
                for name, conf in confs.items():
                    topic = f"bench-{name}-{r}"
                    for fut in admin.create_topics([NewTopic(topic, 1, 1)]).values():
                        fut.result(30)
                    rates[name]["produce"].append(mb / produce(conf["bootstrap.servers"], topic, count, conf))
                    rates[name]["consume"].append(mb / consume(conf["bootstrap.servers"], topic, count, conf))
                    join_s, read_s = consume_group(conf, topic, count, f"bench-{name}-{r}")
                    joins[name].append(join_s)
                    rates[name]["group_consume"].append(mb / read_s)
                    print(f"round {r} {name}: produce {rates[name]['produce'][-1]:.1f} MB/s, "
                          f"consume {rates[name]['consume'][-1]:.1f} MB/s, "
                          f"group consume {rates[name]['group_consume'][-1]:.1f} MB/s "
                          f"(assigned {joins[name][-1]:.2f} s after subscribe)", file=sys.stderr)
            del admin  # librdkafka's admin client closes when collected, before the broker goes away
        finally:
            broker.stop()
        for name in confs:
            results[name] = {f"{k}_mb_s": round(statistics.median(v), 1) for k, v in rates[name].items()}
            results[name]["group_assigned_s"] = round(statistics.median(joins[name]), 2)
        for k in ("produce", "consume", "group_consume"):
            results[f"{k}_ratio"] = round(results["sasl_ssl"][f"{k}_mb_s"] / results["plaintext"][f"{k}_mb_s"], 2)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
