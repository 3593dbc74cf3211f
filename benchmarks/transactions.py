"""What transactions cost: transactional produce against idempotent produce, and read_committed
consumption against read_uncommitted, on one broker in the same run.

confluent-kafka producers write 1 KiB messages to a 3-partition topic: an idempotent producer
(acks=all), then a transactional one that commits every ``--commit-ms`` (100 ms by default, what a
stream processor's commit interval looks like); the two alternate for ``--rounds`` rounds, each
into a topic of its own. Then an assign() consumer reads the last transactional topic from offset 0
with isolation.level read_committed and read_uncommitted, alternating. Goals (the transactions
issue): transactional produce >= 0.8x idempotent, read_committed >= 0.95x read_uncommitted.

    .venv/bin/python benchmarks/transactions.py [--mib 128] [--rounds 2] [--commit-ms 100]

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from headwater.admin.local import BrokerProcess, free_port

MESSAGE_BYTES = 1024
PARTITIONS = 3
PRODUCER_CONF = {"acks": "all", "linger.ms": 5, "batch.size": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
                 "queue.buffering.max.messages": 1_000_000}


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        fut.result(30)


def produce(bootstrap: str, topic: str, count: int, transactional_id: str | None, commit_ms: int) -> tuple[float, int]:
    """(seconds, transactions committed) to write ``count`` messages."""
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, **PRODUCER_CONF}
    if transactional_id is None:
        conf["enable.idempotence"] = True
    else:
        conf["transactional.id"] = transactional_id
    p = Producer(conf)
    payload = os.urandom(MESSAGE_BYTES)
    commits = 0
    if transactional_id is not None:
        p.init_transactions(30)
    # The topic's metadata first: a producer meeting a new topic waits out a retry backoff otherwise.
    p.list_topics(topic, timeout=30)
    t0 = time.perf_counter()
    if transactional_id is not None:
        p.begin_transaction()
    next_commit = t0 + commit_ms / 1000
    for i in range(count):
        while True:
            try:
                p.produce(topic, payload, partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
            if transactional_id is not None and time.perf_counter() >= next_commit:
                p.commit_transaction(60)  # flushes what the transaction holds, then commits it
                commits += 1
                p.begin_transaction()
                next_commit = time.perf_counter() + commit_ms / 1000
    if transactional_id is not None:
        p.commit_transaction(60)
        commits += 1
    elif p.flush(120):
        raise RuntimeError("messages left undelivered")
    return time.perf_counter() - t0, commits


def consume(bootstrap: str, topic: str, count: int, isolation: str) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "isolation.level": isolation, "fetch.max.bytes": 52_428_800,
                  "max.partition.fetch.bytes": 10_485_760, "fetch.queue.backoff.ms": 10})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    t0 = time.perf_counter()
    deadline = t0 + 300
    try:
        while got < count:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"{isolation}: read {got} of {count}")
            got += sum(1 for m in c.consume(10_000, 1.0) if m.error() is None)
        return time.perf_counter() - t0
    finally:
        c.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mib", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--commit-ms", type=int, default=100)
    args = ap.parse_args()
    count = args.mib * 1024 * 1024 // MESSAGE_BYTES
    mb = count * MESSAGE_BYTES / 1e6
    root = Path(tempfile.mkdtemp(prefix="headwater-bench-", dir=os.environ.get("BENCH_DIR")))
    broker = BrokerProcess(1, free_port(), root, {"log.segment.bytes": str(256 << 20),
                                                  "transaction.state.log.num.partitions": "5"})
    rates: dict[str, list[float]] = {"idempotent": [], "transactional": [], "read_committed": [],
                                     "read_uncommitted": []}
    commits: list[int] = []
    try:
        broker.start()
        last = ""
        for r in range(args.rounds):
            for kind in ("idempotent", "transactional"):
                topic = last = f"{kind}-{r}"
                create_topic(broker.bootstrap, topic)
                seconds, n = produce(broker.bootstrap, topic, count, f"bench-{r}" if kind == "transactional" else None,
                                     args.commit_ms)
                rates[kind].append(mb / seconds)
                if kind == "transactional":
                    commits.append(n)
                print(f"{kind} produce: {mb / seconds:.1f} MB/s", file=sys.stderr)
        for _ in range(args.rounds):
            for isolation in ("read_uncommitted", "read_committed"):
                seconds = consume(broker.bootstrap, last, count, isolation)
                rates[isolation].append(mb / seconds)
                print(f"{isolation} consume: {mb / seconds:.1f} MB/s", file=sys.stderr)
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(json.dumps({
        "benchmark": "transactions", "messages": count, "message_bytes": MESSAGE_BYTES, "commit_ms": args.commit_ms,
        "rounds": args.rounds, "transactions_per_round": commits,
        **{f"{k}_mb_s": [round(x, 1) for x in v] for k, v in rates.items()},
        "transactional_over_idempotent": round(med["transactional"] / med["idempotent"], 2),
        "read_committed_over_uncommitted": round(med["read_committed"] / med["read_uncommitted"], 2),
    }))


if __name__ == "__main__":
    main()
