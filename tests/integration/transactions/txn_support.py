"""What the transaction tests share: the brokers' properties and a reader of a whole topic."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition

# Small state and offsets topics keep start-up short; the coordinator's abort sweep runs every
# second so a test of the transaction timeout does not wait Kafka's default 10 s.
TXN_PROPS = {
    "transaction.state.log.num.partitions": "5",
    "offsets.topic.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "0",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}


def read_values(bootstrap: str, topic: str, isolation: str, expected: int, partitions: int = 3,
          settle_s: float = 2.0, timeout_s: float = 60.0) -> dict[int, list[bytes]]:
    """Every value of the topic from offset 0, per partition in offset order: reads until
    ``expected`` records came and then ``settle_s`` more, so an extra record would show."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{topic}-{isolation}",
                  "isolation.level": isolation, "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout_s
        settle_until: float | None = None
        while time.monotonic() < deadline:
            for m in c.consume(500, 0.2):
                if m.error() is None:
                    got[m.partition()].append(bytes(m.value()))
            if sum(map(len, got.values())) >= expected:
                settle_until = settle_until or time.monotonic() + settle_s
                if time.monotonic() >= settle_until:
                    break
    finally:
        c.close()
    return got
