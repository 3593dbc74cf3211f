"""``headwater groups`` against a real broker: list, describe (lag while a producer runs), reset, delete."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from click.testing import CliRunner
from confluent_kafka import Consumer, Producer, TopicPartition
from group_support import ConfluentMember, committed, produce, wait_assignment, wait_for
from hw_support import create_topic

from headwater.admin.local import BrokerProcess
from headwater.cli import main as headwater_cli

PROPS = {"offsets.topic.num.partitions": "3", "group.initial.rebalance.delay.ms": "0"}
PARTITIONS = 3


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(headwater_cli, ["groups", *args], catch_exceptions=False)
    return result.exit_code, result.output


def rows(output: str) -> list[dict[str, str]]:
    lines = [line for line in output.splitlines() if line.strip()]
    header_at = next(i for i, line in enumerate(lines) if line.startswith("GROUP"))
    header = lines[header_at].split()
    return [dict(zip(header, line.split(), strict=True)) for line in lines[header_at + 1:]]


def log_ends(bootstrap: str, topic: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)}
    finally:
        c.close()


class Steady(threading.Thread):
    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
        self.topic = topic
        self.halt = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.halt.is_set():
            self.producer.produce(self.topic, value=b"x", partition=i % PARTITIONS)
            self.producer.poll(0)
            i += 1
            time.sleep(0.002)
        self.producer.flush(10)


def test_describe_shows_lag_while_a_producer_runs_and_resets_and_deletes(
        broker_factory: Callable[..., BrokerProcess], topic_name: Callable[..., str]) -> None:
    b = broker_factory(PROPS)
    bs = b.bootstrap
    topic = create_topic(bs, topic_name(), PARTITIONS)
    group = f"cli-{topic}"
    produce(bs, topic, PARTITIONS, 300)
    member = ConfluentMember(bs, group, topic).start()
    producer = Steady(bs, topic)
    try:
        wait_assignment(bs, group, 1, PARTITIONS)
        wait_for(lambda: committed(bs, group, topic, PARTITIONS) == dict.fromkeys(range(PARTITIONS), 100), 60, "commits")
        assert cli("--bootstrap-server", bs, "--list")[1].split() == [group]
        # An active group cannot be reset.
        code, out = cli("--bootstrap-server", bs, "--reset-offsets", "--group", group, "--all-topics", "--to-earliest",
                        "--execute")
        assert code == 1 and "can only be reset if the group" in out and "Stable" in out
        producer.start()
        time.sleep(0.5)
        before = log_ends(bs, topic)
        code, out = cli("--bootstrap-server", bs, "--describe", "--group", group)
        after = log_ends(bs, topic)
        assert code == 0, out
        table = rows(out)
        assert sorted(int(r["PARTITION"]) for r in table) == list(range(PARTITIONS))
        for r in table:
            p, current, end = int(r["PARTITION"]), int(r["CURRENT-OFFSET"]), int(r["LOG-END-OFFSET"])
            assert before[p] <= end <= after[p], (r, before, after)
            assert int(r["LAG"]) == end - current and 100 <= current <= end
            assert r["CLIENT-ID"] == "confluent-member" and r["CONSUMER-ID"].startswith("confluent-member-")
            assert r["HOST"] == "/127.0.0.1"
        members = rows(cli("--bootstrap-server", bs, "--describe", "--group", group, "--members", "--verbose")[1])
        assert [(m["CLIENT-ID"], m["#PARTITIONS"]) for m in members] == [("confluent-member", str(PARTITIONS))]
        state = rows(cli("--bootstrap-server", bs, "--describe", "--group", group, "--state")[1])
        assert (state[0]["STATE"], state[0]["#MEMBERS"]) == ("Stable", "1")
    finally:
        producer.halt.set()
        if producer.is_alive():
            producer.join(30)
        member.stop()
    # Inactive now: the lag is exact.
    ends = log_ends(bs, topic)
    final = committed(bs, group, topic, PARTITIONS)
    code, out = cli("--bootstrap-server", bs, "--describe", "--group", group)
    assert code == 0 and f"Consumer group '{group}' has no active members." in out
    assert {int(r["PARTITION"]): (int(r["CURRENT-OFFSET"]), int(r["LAG"])) for r in rows(out)} == {
        p: (final[p], ends[p] - final[p]) for p in range(PARTITIONS)}

    # Resets: a dry run changes nothing, --execute commits; out-of-range targets are clamped.
    code, out = cli("--bootstrap-server", bs, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest")
    assert code == 0 and {r["NEW-OFFSET"] for r in rows(out)} == {"0"}
    assert committed(bs, group, topic, PARTITIONS) == final
    code, out = cli("--bootstrap-server", bs, "--reset-offsets", "--group", group, "--topic", f"{topic}:0,1",
                    "--to-offset", "7", "--execute")
    assert code == 0 and len(rows(out)) == 2
    assert committed(bs, group, topic, PARTITIONS) == {0: 7, 1: 7, 2: final[2]}
    cli("--bootstrap-server", bs, "--reset-offsets", "--group", group, "--all-topics", "--shift-by", "-10", "--execute")
    assert committed(bs, group, topic, PARTITIONS) == {0: 0, 1: 0, 2: final[2] - 10}
    cli("--bootstrap-server", bs, "--reset-offsets", "--group", group, "--all-topics", "--to-latest", "--execute")
    assert committed(bs, group, topic, PARTITIONS) == ends
    cli("--bootstrap-server", bs, "--reset-offsets", "--group", group, "--all-topics", "--to-datetime",
        "2000-01-01T00:00:00.000", "--execute")
    assert committed(bs, group, topic, PARTITIONS) == dict.fromkeys(range(PARTITIONS), 0)
    code, out = cli("--bootstrap-server", bs, "--reset-offsets", "--group", group, "--all-topics", "--to-offset",
                    "99999999", "--execute")
    assert committed(bs, group, topic, PARTITIONS) == ends

    code, out = cli("--bootstrap-server", bs, "--delete-offsets", "--group", group, "--topic", f"{topic}:2")
    assert code == 0 and "Successful" in out
    assert committed(bs, group, topic, PARTITIONS) == {0: ends[0], 1: ends[1], 2: -1001}
    code, out = cli("--bootstrap-server", bs, "--delete", "--group", group)
    assert code == 0 and f"Deletion of requested consumer groups ('{group}') was successful." in out
    assert cli("--bootstrap-server", bs, "--list")[1].split() == []
    code, out = cli("--bootstrap-server", bs, "--describe", "--group", group)
    assert code == 1 and f"Consumer group '{group}' does not exist." in out
    code, out = cli("--bootstrap-server", bs, "--delete", "--group", group)
    assert code == 1 and "GROUP_ID_NOT_FOUND" in out
