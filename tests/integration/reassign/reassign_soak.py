"""Soak: move a topic back and forth between two broker sets under a live idempotent producer.

    .venv/bin/python tests/integration/reassign/reassign_soak.py --rounds 40 --mib 16 --rate 400

Six brokers; a topic of 12 partitions (RF 3, ``min.insync.replicas=2``) on brokers {1,2,3} is moved
to {4,5,6} and back, ``--rounds`` times, with ``headwater reassign --execute`` and ``--verify
--watch``, while a confluent-kafka producer (acks=all, idempotent) writes numbered messages. Each
move changes every partition's leader, the moment an idempotent producer is most exposed. At the
end every acknowledged message must be at its offset and none in the log twice.

Prints one JSON line: moves, messages acknowledged, duplicates, librdkafka's epoch bumps (each one
renumbers every message the producer holds, the path to a duplicate), and how many times a new
leader answered a sequence gap with LEADER_NOT_AVAILABLE (``headwater.server.replica_manager``).
Exits 1 if anything was lost or duplicated, or the producer reported an error. ``--keep DIR`` keeps
the brokers' logs and librdkafka's full eos and msg debug log there.
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cluster"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_support import run_cli, start_cluster, wait_for
from reassign_support import LiveProducer, missing_acked, produce_bulk, read_topic

PARTITIONS = 12
SIDES = ((1, 2, 3), (4, 5, 6))


def _plan(side: tuple[int, ...]) -> dict[int, list[int]]:
    return {p: [side[(p + j) % 3] for j in range(3)] for p in range(PARTITIONS)}


def _headwater(*args: str) -> None:
    out = subprocess.run([sys.executable, "-m", "headwater", *args], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"headwater {args[0]} {args[3]} failed: {out.stdout}{out.stderr}")


def soak(data: Path, rounds: int, mib: int, rate: float) -> dict[str, object]:
    rdkafka = logging.getLogger("soak-librdkafka")
    rdkafka.propagate = False
    rdkafka.setLevel(logging.DEBUG)
    handler = logging.FileHandler(data / "librdkafka.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    rdkafka.addHandler(handler)
    cluster = start_cluster(data, 6, {"log.segment.delete.delay.ms": "0", "file.delete.delay.ms": "0"})
    topic = "soak"
    try:
        run_cli("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", topic, "--replica-assignment",
                ",".join(":".join(map(str, r)) for r in _plan(SIDES[0]).values()), "--config", "min.insync.replicas=2")
        wait_for(lambda: len([line for line in cluster.describe(topic) if line.full]) == PARTITIONS, 60, "full ISRs")
        produce_bulk(cluster.bootstrap, topic, mib * 1024 * 1024)
        producer = LiveProducer(cluster.bootstrap, topic, rate_per_s=rate, debug="eos,msg", logger=rdkafka)
        producer.start()
        started = time.monotonic()
        try:
            time.sleep(2)
            for n in range(rounds):
                plan = data / "plan.json"
                plan.write_text(json.dumps({"version": 1, "partitions": [
                    {"topic": topic, "partition": p, "replicas": r} for p, r in _plan(SIDES[(n + 1) % 2]).items()]}))
                _headwater("reassign", "--bootstrap-server", cluster.bootstrap, "--execute", "--reassignment-json-file", str(plan))
                _headwater("reassign", "--bootstrap-server", cluster.bootstrap, "--verify", "--watch",
                           "--reassignment-json-file", str(plan))
                time.sleep(1)
        finally:
            producer.stop()
        elapsed = time.monotonic() - started
        read = read_topic(cluster.bootstrap, topic, PARTITIONS)
    finally:
        cluster.stop()
        handler.close()
    found = {seq: (p, o) for p, records in read.items() for o, seq in records.items()}
    lost = missing_acked(read, producer.acked)
    lost_examples = [{"seq": seq, "acked_at": [p, offset], "found_at": found.get(seq),
                      "there_now": read.get(p, {}).get(offset) if offset is not None else None} for p, offset, seq in lost[:5]]
    without_offset = sum(1 for _p, offset, _seq in producer.acked if offset is None)
    counts = Counter(seq for records in read.values() for seq in records.values())
    twice = sorted(seq for seq, k in counts.items() if k > 1)
    log_text = (data / "librdkafka.log").read_text(errors="replace")
    guarded = sum(path.read_text(errors="replace").count("LEADER_NOT_AVAILABLE until") for path in data.glob("broker-*.log"))
    return {"moves": rounds, "partitions": PARTITIONS, "rate_per_s": rate, "seconds": round(elapsed, 1),
            "acknowledged": len(producer.acked), "acknowledged_without_offset": without_offset,
            "producer_errors": len(producer.errors), "lost": len(lost), "lost_examples": lost_examples,
            "duplicated": len(twice), "duplicated_examples": twice[:5],
            "epoch_bumps": log_text.count("bumped epoch"), "gaps_answered_leader_not_available": guarded}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40, help="moves (each one changes every leader)")
    parser.add_argument("--mib", type=int, default=16, help="data loaded before the live producer starts")
    parser.add_argument("--rate", type=float, default=400, help="live messages per second")
    parser.add_argument("--keep", type=Path, help="keep the data dir and logs here (must not exist)")
    args = parser.parse_args()
    if args.keep:
        args.keep.mkdir(parents=True)
        result = soak(args.keep, args.rounds, args.mib, args.rate)
    else:
        with tempfile.TemporaryDirectory(prefix="reassign-soak-") as tmp:
            result = soak(Path(tmp), args.rounds, args.mib, args.rate)
    print(json.dumps(result))
    return 1 if result["lost"] or result["duplicated"] or result["producer_errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
