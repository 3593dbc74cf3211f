"""Incremental fetch sessions (KIP-227) between real brokers: every leader keeps one session per
follower, replication through them delivers every acknowledged record to every replica, and a
leader that restarts (losing its sessions) is fetched from again."""

from __future__ import annotations

from cluster_support import LocalCluster, wait_for
from confluent_kafka import Producer
from metrics_support import scrape

PARTITIONS = 8


def sessions(cluster: LocalCluster, broker: int) -> float:
    return sum(scrape(cluster, broker).get("headwater_fetch_sessions", {}).values())


def produce(cluster: LocalCluster, topic: str, n: int, start: int) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(start, start + n):
        p.produce(topic, key=b"%d" % i, value=b"v%06d" % i, partition=i % PARTITIONS)
    assert p.flush(60) == 0


def replica_ends(cluster: LocalCluster, topic: str) -> dict[int, set[int]]:
    """partition -> the log end offsets of its replicas, from every broker's metrics."""
    out: dict[int, set[int]] = {}
    for b in cluster.brokers:
        for labels, value in scrape(cluster, b).get("headwater_log_end_offset", {}).items():
            d = dict(labels)
            if d["topic"] == topic:
                out.setdefault(int(d["partition"]), set()).add(int(value))
    return out


def all_replicas_hold(cluster: LocalCluster, topic: str, total: int) -> bool:
    ends = replica_ends(cluster, topic)
    return (len(ends) == PARTITIONS and all(len(v) == 1 for v in ends.values())
            and sum(next(iter(v)) for v in ends.values()) == total)


def test_followers_fetch_through_sessions_and_recover_from_a_lost_one(metered_cluster: LocalCluster) -> None:
    c = metered_cluster
    topic = "sessions"
    c.create_topic(topic, PARTITIONS, 3)
    c.wait_full_isr([topic], PARTITIONS, timeout_s=30)
    produce(c, topic, 2_000, 0)
    # Three replicas of 8 partitions on 4 brokers: each broker leads some and is followed by the
    # brokers holding the other replicas; a follower has one session with each of its leaders.
    leaders = set(c.leaders(topic).values())
    wait_for(lambda: all(sessions(c, b) >= 1 for b in leaders), 15, "a fetch session at every leader")
    assert sum(sessions(c, b) for b in c.brokers) <= len(c.brokers) * (len(c.brokers) - 1)
    wait_for(lambda: all_replicas_hold(c, topic, 2_000), 30, "every replica to hold every record")

    # A leader that restarts has no sessions: its followers get FETCH_SESSION_ID_NOT_FOUND (or
    # a lost connection) and start over with a full fetch.
    restarted = min(leaders)
    c.brokers[restarted].stop()
    c.brokers[restarted].start()
    c.wait_full_isr([topic], PARTITIONS, timeout_s=60)
    produce(c, topic, 2_000, 2_000)
    wait_for(lambda: all_replicas_hold(c, topic, 4_000), 60, "every replica to hold every record after the restart")
