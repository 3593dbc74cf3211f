"""An acks=all produce whose followers do not fetch is answered REQUEST_TIMED_OUT once its timeout
passes (the leader's deadline check), and one whose followers fetch again is acknowledged."""

from __future__ import annotations

import time

from cluster_support import LocalCluster, pause, resume
from confluent_kafka import KafkaError, Producer


def test_acks_all_times_out_while_the_followers_are_stopped(shared_cluster: LocalCluster) -> None:
    c = shared_cluster
    topic = "acks-timeout"
    c.create_topic(topic, 1, 3)
    c.wait_full_isr([topic], 1, timeout_s=30)
    leader = c.leaders(topic)[0]
    followers = [b for b in c.brokers if b != leader]
    results: list[tuple[KafkaError | None, float]] = []
    producer = Producer({"bootstrap.servers": c.brokers[leader].bootstrap, "acks": "all", "retries": 0,
                         "request.timeout.ms": 1000, "message.timeout.ms": 5000})
    started = time.monotonic()

    def report(err: KafkaError | None, _msg: object) -> None:
        results.append((err, time.monotonic() - started))

    for b in followers:
        pause(c.pid(b))
    try:
        producer.produce(topic, value=b"waits", on_delivery=report)
        producer.flush(10)
    finally:
        for b in followers:
            resume(c.pid(b))
    # The ISR has not shrunk (replica.lag.time.max.ms is 10 s): the leader waited for the followers
    # and gave up at the produce's 1 s timeout.
    assert len(results) == 1, results
    err, after_s = results[0]
    assert err is not None and err.code() == KafkaError.REQUEST_TIMED_OUT, err
    assert 0.9 <= after_s < 4, after_s
    producer.produce(topic, value=b"goes through", on_delivery=report)
    producer.flush(30)
    assert results[-1][0] is None, results[-1]
