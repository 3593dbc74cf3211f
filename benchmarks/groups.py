"""Consumer groups: rebalance time after a member leaves, and OffsetCommit throughput, each next to a
no-group baseline measured in the same run on the same broker.

Rebalance: ``--members`` confluent-kafka consumers (one thread each, heartbeat.interval.ms=100)
subscribe to a topic of as many partitions while a producer writes to every partition every
few milliseconds. One member closes (LeaveGroup); the figure is the time from close() until
every partition it owned has delivered a record to a remaining member, i.e. the whole handover.
Baseline without a group: the same consumers with assign(), one partition each; one closes and
its partition is assigned to another consumer at the next offset by the benchmark itself, timed
the same way (what the fetch path alone costs; the rest of the group figure is the rebalance).

OffsetCommit: one synchronous commit after another for ``--seconds`` (each waits for its record
to be replicated and committed in ``__consumer_offsets``); baseline: one synchronous acks=all
produce of a record of the same size after another, for as long.

    .venv/bin/python benchmarks/groups.py [--members 10] [--rounds 3] [--seconds 5]

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from headwater.admin.local import BrokerProcess, free_port

HEARTBEAT_MS = 100
PRODUCE_EVERY_S = 0.01  # one record per partition every 10 ms: the handover's resolution, and no flood


class Feeder(threading.Thread):
    """Keeps every partition receiving records, so a handover shows as the first record after it."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self.p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
        self.topic, self.partitions = topic, partitions
        self.halt = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.halt.is_set():
            self.p.produce(self.topic, value=b"v", partition=i % self.partitions)
            self.p.poll(0)
            i += 1
            if i % self.partitions == 0:
                time.sleep(PRODUCE_EVERY_S)
        self.p.flush(30)


class Member(threading.Thread):
    def __init__(self, conf: dict[str, Any], topic: str, subscribe: bool) -> None:
        super().__init__(daemon=True)
        self.c = Consumer(conf)
        self.topic, self.subscribe = topic, subscribe
        self.last: dict[int, tuple[int, float]] = {}  # partition -> (offset, when) of the last record
        self.first_after: dict[int, float] = {}  # partition -> first record time after `since`
        self.since = float("inf")
        self.halt = threading.Event()
        self.pending_assign: list[TopicPartition] | None = None
        self.lock = threading.Lock()
        self.assigned: set[int] = set()  # kept by the rebalance callbacks (assignment() blocks during poll)

    def _on_assign(self, _c: Any, tps: list[TopicPartition]) -> None:
        with self.lock:
            self.assigned = {tp.partition for tp in tps}

    def _on_revoke(self, _c: Any, _tps: list[TopicPartition]) -> None:
        with self.lock:
            self.assigned = set()

    def run(self) -> None:
        if self.subscribe:
            self.c.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        while not self.halt.is_set():
            with self.lock:
                if self.pending_assign is not None:
                    self.c.incremental_assign(self.pending_assign)
                    self.pending_assign = None
            m = self.c.poll(0.01)
            if m is None or m.error():
                continue
            now = time.monotonic()
            with self.lock:
                self.last[m.partition()] = (m.offset(), now)
                if now >= self.since and m.partition() not in self.first_after:
                    self.first_after[m.partition()] = now
        self.c.close()

    def owned(self) -> set[int]:
        with self.lock:
            return set(self.assigned)


def wait(cond: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.01)


def handover_ms(members: list[Member], leaver: Member, partitions: set[int], start: float) -> float:
    rest = [m for m in members if m is not leaver]

    def done() -> bool:
        return all(any(p in m.first_after for m in rest) for p in partitions)

    wait(done, 60, "the handover")
    return (max(min(m.first_after[p] for m in rest if p in m.first_after) for p in partitions) - start) * 1000


def group_round(bootstrap: str, topic: str, n: int, round_no: int) -> float:
    conf = {"bootstrap.servers": bootstrap, "group.id": f"bench-{round_no}", "auto.offset.reset": "latest",
            "session.timeout.ms": 6000, "heartbeat.interval.ms": HEARTBEAT_MS, "enable.auto.commit": True,
            "auto.commit.interval.ms": 100}
    members = [Member(dict(conf), topic, True) for _ in range(n)]
    for m in members:
        m.start()
    try:
        wait(lambda: sorted(p for m in members for p in m.owned()) == list(range(n))
             and all(m.last for m in members), 60, "a stable group with data flowing")
        time.sleep(0.5)
        leaver = members[0]
        gone = leaver.owned()
        start = time.monotonic()
        for m in members[1:]:
            with m.lock:
                m.since = start
        leaver.halt.set()
        leaver.join(30)
        return handover_ms(members, leaver, gone, start)
    finally:
        for m in members:
            m.halt.set()
        for m in members:
            m.join(30)


def assign_round(bootstrap: str, topic: str, n: int) -> float:
    conf = {"bootstrap.servers": bootstrap, "group.id": "bench-assign", "enable.auto.commit": False,
            "auto.offset.reset": "latest"}
    members = [Member(dict(conf), topic, False) for _ in range(n)]
    for i, m in enumerate(members):
        m.c.assign([TopicPartition(topic, i)])
        m.start()
    try:
        wait(lambda: all(m.last for m in members), 60, "data on every assigned partition")
        time.sleep(0.5)
        leaver, taker = members[0], members[1]
        start = time.monotonic()
        for m in members[1:]:
            with m.lock:
                m.since = start
        leaver.halt.set()
        leaver.join(30)
        next_offset = leaver.last[0][0] + 1
        with taker.lock:
            taker.pending_assign = [TopicPartition(topic, 0, next_offset)]
        return handover_ms(members, leaver, {0}, start)
    finally:
        for m in members:
            m.halt.set()
        for m in members:
            m.join(30)


def commit_rate(bootstrap: str, topic: str, seconds: float) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-commits", "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)  # coordinator found, partition loaded
        count, start = 0, time.monotonic()
        while time.monotonic() - start < seconds:
            count += 1
            c.commit(offsets=[TopicPartition(topic, 0, count)], asynchronous=False)
        return count / (time.monotonic() - start)
    finally:
        c.close()


def produce_rate(bootstrap: str, topic: str, seconds: float) -> float:
    # An offset commit record is about 60 bytes of key and value; so is this one.
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    p.produce(topic, key=b"k" * 30, value=b"v" * 30, partition=0)
    p.flush(10)
    count, start = 0, time.monotonic()
    while time.monotonic() - start < seconds:
        p.produce(topic, key=b"k" * 30, value=b"v" * 30, partition=0)
        p.flush(10)
        count += 1
    return count / (time.monotonic() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="hw-bench-groups-"))
    broker = BrokerProcess(1, free_port(), root, props={"offsets.topic.num.partitions": "3",
                                                        "group.initial.rebalance.delay.ms": "0"})
    try:
        broker.start()
        bs = broker.bootstrap
        admin = AdminClient({"bootstrap.servers": bs})
        for fut in admin.create_topics([NewTopic("bench", args.members, 1), NewTopic("bench-commit", 1, 1)]).values():
            fut.result(30)
        feeder = Feeder(bs, "bench", args.members)
        feeder.start()
        try:
            group_ms = [group_round(bs, "bench", args.members, r) for r in range(args.rounds)]
            assign_ms = [assign_round(bs, "bench", args.members) for _ in range(args.rounds)]
        finally:
            feeder.halt.set()
            feeder.join(30)
        commits = commit_rate(bs, "bench-commit", args.seconds)
        produces = produce_rate(bs, "bench-commit", args.seconds)
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    g, a = statistics.median(group_ms), statistics.median(assign_ms)
    print(json.dumps({
        "benchmark": "groups", "members": args.members, "rounds": args.rounds, "heartbeat_interval_ms": HEARTBEAT_MS,
        "rebalance_after_leave_ms": [round(x, 1) for x in group_ms], "rebalance_after_leave_median_ms": round(g, 1),
        "no_group_handover_ms": [round(x, 1) for x in assign_ms], "no_group_handover_median_ms": round(a, 1),
        "rebalance_vs_no_group": round(g / a, 2) if a > 0 else None,
        "offset_commits_per_s": round(commits, 1), "no_group_acks_all_produces_per_s": round(produces, 1),
        "commit_vs_produce": round(commits / produces, 2) if produces > 0 else None,
    }))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
