"""Group members of three real clients, each in its own thread or process, and the group as the coordinator sees it.

* ``ConfluentMember`` (librdkafka 2.16), ``KafkaPythonMember`` (kafka-python 3) and ``KcatMember``
  (``kcat -G``, librdkafka 2.0.2) subscribe to a topic with auto-commit every 200 ms and record
  every (partition, offset) they consume. ``stop()`` closes them the way a user would (close(),
  SIGTERM for kcat): they commit and leave the group.
* ``describe_group`` / ``committed``: DescribeGroups and OffsetFetch through confluent-kafka's
  AdminClient; ``wait_assignment`` waits until the group is Stable with the expected number of
  members and every partition assigned to exactly one of them.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer

KCAT = "/usr/bin/kcat"
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_MS = 300


def wait_for(cond: Callable[[], Any], timeout_s: float, what: str, interval_s: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while True:
        try:
            value = cond()
        except Exception as exc:  # a coordinator moving answers errors for a while
            value, last = None, exc
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what} (last: {last!r})")
        time.sleep(interval_s)


class Member:
    name = "member"

    def __init__(self) -> None:
        self.consumed: list[tuple[int, int]] = []  # (partition, offset) in consumption order
        self.errors: list[str] = []
        self._lock = threading.Lock()

    def record(self, partition: int, offset: int) -> None:
        with self._lock:
            self.consumed.append((partition, offset))

    def snapshot(self) -> list[tuple[int, int]]:
        with self._lock:
            return list(self.consumed)

    def stop(self) -> None:
        raise NotImplementedError


class _ThreadMember(Member):
    def __init__(self) -> None:
        super().__init__()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    def start(self) -> _ThreadMember:
        self._thread.start()
        return self

    def _run(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), f"{self.name} did not close"


class ConfluentMember(_ThreadMember):
    name = "confluent-kafka"

    def __init__(self, bootstrap: str, group: str, topic: str, **conf: Any) -> None:
        super().__init__()
        self.conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": True, "auto.commit.interval.ms": 200,
                     "session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": HEARTBEAT_MS,
                     "client.id": "confluent-member", **conf}
        self.topic = topic
        self.on_revoke: Callable[[list[TopicPartition]], None] | None = None

    def _run(self) -> None:
        c = Consumer(self.conf)

        def revoked(_c: Any, tps: list[TopicPartition]) -> None:
            if self.on_revoke is not None:
                self.on_revoke(tps)

        c.subscribe([self.topic], on_revoke=revoked)
        try:
            while not self._stop.is_set():
                m = c.poll(0.2)
                if m is None:
                    continue
                if m.error():
                    self.errors.append(str(m.error()))
                    continue
                self.record(m.partition(), m.offset())
        finally:
            c.close()  # commits what was consumed and leaves the group


class KafkaPythonMember(_ThreadMember):
    name = "kafka-python"

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        super().__init__()
        self.bootstrap, self.group, self.topic = bootstrap, group, topic

    def _run(self) -> None:
        c = KafkaConsumer(self.topic, bootstrap_servers=self.bootstrap, group_id=self.group, client_id="kafka-python-member",
                          auto_offset_reset="earliest", enable_auto_commit=True, auto_commit_interval_ms=200,
                          session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_MS)
        try:
            while not self._stop.is_set():
                for records in c.poll(timeout_ms=200).values():
                    for r in records:
                        self.record(r.partition, r.offset)
        finally:
            c.close()


class KcatMember(Member):
    name = "kcat"

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        super().__init__()
        self.proc = subprocess.Popen(
            [KCAT, "-b", bootstrap, "-G", group, "-q", "-u", "-f", "%p %o\n",
             "-X", "auto.offset.reset=earliest", "-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=200",
             "-X", f"session.timeout.ms={SESSION_TIMEOUT_MS}", "-X", f"heartbeat.interval.ms={HEARTBEAT_MS}",
             "-X", "client.id=kcat-member", topic],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._reader = threading.Thread(target=self._read, name="kcat-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            parts = line.split()
            if len(parts) == 2:
                self.record(int(parts[0]), int(parts[1]))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # kcat closes its consumer: a final commit, then LeaveGroup
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._reader.join(5)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait(5)


def produce(bootstrap: str, topic: str, partitions: int, count: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(count):
        p.produce(topic, value=str(i).encode(), partition=i % partitions)
    assert p.flush(30) == 0


def describe_group(bootstrap: str, group: str) -> Any:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group], request_timeout=10)[group].result()


def assignment(bootstrap: str, group: str) -> dict[str, set[int]] | None:
    """member client id -> partitions, if the group is Stable; else None."""
    d = describe_group(bootstrap, group)
    if str(d.state).split(".")[-1] != "STABLE":
        return None
    return {f"{m.client_id}/{m.member_id}": {tp.partition for tp in m.assignment.topic_partitions} for m in d.members}


def wait_assignment(bootstrap: str, group: str, members: int, partitions: int, timeout_s: float = 60) -> dict[str, set[int]]:
    def ok() -> dict[str, set[int]] | None:
        a = assignment(bootstrap, group)
        if a is None or len(a) != members:
            return None
        owned = [p for ps in a.values() for p in ps]
        # Every partition assigned to exactly one member.
        return a if sorted(owned) == list(range(partitions)) else None

    return dict(wait_for(ok, timeout_s, f"{group}: {members} members owning {partitions} partitions once each"))


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    result = admin.list_consumer_group_offsets([req], request_timeout=10)[group].result()
    return {tp.partition: tp.offset for tp in result.topic_partitions}
