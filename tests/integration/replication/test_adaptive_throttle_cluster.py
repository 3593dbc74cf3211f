"""The adaptive reassignment throttle on a real 4-broker cluster, under a steady acks=all producer.

What comes from Kafka: the move itself is KIP-455's (the partition ends on the target replicas,
the leader stays while it is among them), acknowledged acks=all records survive it (they are in
every ISR member's log before the answer, ``DelayedProduce``), and the reassignment limiters
meter only the replicas being added (KIP-455's "future work" throttle; Kafka's own throttles meter
only replicas out of sync, ``ReplicationQuotaManager``). The adaptive part is headwater's own, so
the test asserts the documented contract (docs/replication.md, "Adaptive reassignment throttle"):
the rate in force never leaves ``[min, max]``; it rises while the targets are met and the copy uses
it; it falls to the floor when the produce p99 (from arrival, or from the producer's CreateTime
stamp when asked to) or the host's CPU pressure is over target; it starts at the floor.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time

from cluster_support import LocalCluster, run_cli, wait_for
from confluent_kafka import Consumer, Producer, TopicPartition
from metrics_support import scrape

MIB = 1024 * 1024
FLOOR, CEILING = 1_000_000, 4_000_000
GENEROUS_MS = 60_000  # a target no produce or follower on this machine reaches
IMPOSSIBLE_MS = 1  # an acks=all produce to three replicas takes longer than 1 ms here


def set_defaults(cluster: LocalCluster, configs: dict[str, str]) -> None:
    run_cli("configs", "--bootstrap-server", cluster.bootstrap, "--alter", "--entity-type", "brokers",
            "--entity-default", "--add-config", ",".join(f"{k}={v}" for k, v in configs.items()))


class SteadyProducer(threading.Thread):
    """acks=all, a few hundred 1 KB messages a second to partition 0; remembers what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
                                  "enable.idempotence": True, "log_level": 3})
        self.acked: set[int] = set()
        self.failed = 0
        self.stamp_behind_ms = 0  # how long before the send each record is stamped (its CreateTime)
        self._halt = threading.Event()

    def _report(self, err: object, msg: object) -> None:
        if err is None:
            self.acked.add(int(msg.value()[:10]))  # type: ignore[attr-defined]
        else:
            self.failed += 1

    def run(self) -> None:
        pad = os.urandom(1000)
        seq = 0
        while not self._halt.is_set():
            self.producer.produce(self.topic, value=b"%010d" % seq + pad, partition=0, on_delivery=self._report,
                                  timestamp=int(time.time() * 1000) - self.stamp_behind_ms)
            seq += 1
            self.producer.poll(0)
            time.sleep(0.003)
        self.producer.flush(60)

    def stop(self) -> None:
        self._halt.set()
        self.join(90)


def throttle(cluster: LocalCluster, broker: int) -> tuple[float, str]:
    """(rate in force, reason) from the broker's Prometheus endpoint."""
    m = scrape(cluster, broker)
    rates = [v for k, v in m.get("headwater_reassignment_throttle_rate_bytes_per_second", {}).items()
             if ("mode", "adaptive") in k]
    reasons = [dict(k)["reason"] for k, v in m.get("headwater_reassignment_throttle_reason", {}).items() if v == 1]
    return (rates[0] if rates else -1.0), (reasons[0] if reasons else "")


class RateWatch(threading.Thread):
    """Every 0.3 s, each broker's (rate, reason)."""

    def __init__(self, cluster: LocalCluster, brokers: list[int]) -> None:
        super().__init__(daemon=True)
        self.cluster, self.brokers = cluster, brokers
        self.seen: dict[int, list[tuple[float, str]]] = {b: [] for b in brokers}
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            for b in self.brokers:
                with contextlib.suppress(OSError):  # a scrape that times out on a busy machine
                    self.seen[b].append(throttle(self.cluster, b))
            time.sleep(0.3)

    def stop(self) -> None:
        self._halt.set()
        self.join(10)


def consumed_values(bootstrap: str, topic: str) -> set[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "adaptive-check", "enable.auto.commit": False,
                         "log_level": 3})
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    consumer.assign([TopicPartition(topic, 0, low)])
    out: set[int] = set()
    position = low
    deadline = time.monotonic() + 60
    while position < high and time.monotonic() < deadline:
        for msg in consumer.consume(500, timeout=1):
            data, offset = msg.value(), msg.offset()
            if msg.error() is None and data is not None and offset is not None:
                out.add(int(data[:10]))
                position = offset + 1
    consumer.close()
    return out


def test_an_adaptive_move_under_acks_all_produce(metered_cluster: LocalCluster) -> None:
    c, topic = metered_cluster, "adaptive"
    run_cli("topics", "--bootstrap-server", c.bootstrap, "--create", "--topic", topic, "--replica-assignment", "1:2:3")
    c.wait_full_isr([topic], 1)
    producer = SteadyProducer(c.bootstrap, topic)
    producer.start()
    # Data to copy: the producer's own messages plus a bulk load, ~40 MiB in all, enough for the copy
    # to run through every step below at rates near the floor.
    bulk = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 20, "log_level": 3})
    value = b"%010d" % -1 + os.urandom(10_000)
    for _ in range(40 * MIB // len(value)):
        while True:
            try:
                bulk.produce(topic, value=value, partition=0)
                break
            except BufferError:
                bulk.poll(0.05)
    assert bulk.flush(60) == 0
    set_defaults(c, {"reassignment.throttle.mode": "adaptive",
                     "reassignment.adaptive.min.throttled.rate": str(FLOOR),
                     "reassignment.adaptive.max.throttled.rate": str(CEILING),
                     "reassignment.adaptive.max.produce.latency.ms": str(GENEROUS_MS),
                     "reassignment.adaptive.max.follower.lag.ms": str(GENEROUS_MS)})
    # Every broker takes the mode; with no move running it starts at the floor and holds there.
    wait_for(lambda: all(throttle(c, b) == (FLOOR, "not_limiting") for b in c.brokers), 30,
             "every broker in adaptive mode, holding at the floor")
    watch = RateWatch(c, [1, 4])
    watch.start()
    plan = c.data_dir / "plan-adaptive.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [1, 2, 4]}]}))
    try:
        out = run_cli("reassign", "--bootstrap-server", c.bootstrap, "--execute", "--reassignment-json-file", str(plan))
        assert f"Successfully started partition reassignment for {topic}-0" in out, out
        # Targets met and the copy using the rate: the leader (1) raises it.
        wait_for(lambda: throttle(c, 1)[0] >= FLOOR + 3 * (CEILING - FLOOR) / 20, 30,
                 "the leader's rate to rise above the floor")
        assert throttle(c, 1)[1] in ("slow_start", "increase", "near_target", "not_limiting", "no_samples"), throttle(c, 1)
        # A p99 target no produce meets: cut by 0.7 each tick, down to the floor.
        set_defaults(c, {"reassignment.adaptive.max.produce.latency.ms": str(IMPOSSIBLE_MS)})
        wait_for(lambda: throttle(c, 1) == (FLOOR, "produce_latency"), 30, "the leader's rate cut to the floor")
        # Generous again, but a CPU pressure target of 0: any tick in which some task on the host
        # waited for a CPU cuts. Without PSI the pressure is unknown (-1) and never cuts.
        set_defaults(c, {"reassignment.adaptive.max.produce.latency.ms": str(GENEROUS_MS),
                         "reassignment.adaptive.max.cpu.pressure": "0"})
        if os.path.exists("/proc/pressure/cpu"):
            def cut_for_pressure() -> bool:
                m = scrape(c, 1)
                judged = m["headwater_reassignment_throttle_cpu_pressure"][frozenset({("broker", "1")})]
                cut = m["headwater_reassignment_throttle_reason"][frozenset({("broker", "1"), ("reason", "cpu_pressure")})]
                rate = m["headwater_reassignment_throttle_rate_bytes_per_second"][
                    frozenset({("broker", "1"), ("mode", "adaptive")})]
                return cut == 1 and rate == FLOOR and 0 < judged <= 1

            wait_for(cut_for_pressure, 30, "the leader's rate cut to the floor for CPU pressure")
        # Records stamped 400 ms before they are sent (as a producer whose requests wait that long
        # for a CPU or a socket would stamp them), against a 200 ms target: judged from their
        # arrival they meet it; judged from their CreateTime they do not, and the rate is cut.
        set_defaults(c, {"reassignment.adaptive.max.cpu.pressure": "1.0",
                         "reassignment.adaptive.max.produce.latency.ms": "200"})
        producer.stamp_behind_ms = 400

        def judged_p99() -> float:
            return scrape(c, 1)["headwater_reassignment_throttle_produce_p99_ms"][frozenset({("broker", "1")})]

        wait_for(lambda: throttle(c, 1)[1] != "produce_latency" and 0 < judged_p99() < 200, 30,
                 "the stamps ignored under ArrivalTime")
        set_defaults(c, {"reassignment.adaptive.produce.latency.from": "CreateTime"})
        wait_for(lambda: throttle(c, 1) == (FLOOR, "produce_latency") and judged_p99() >= 400, 30,
                 "the leader's rate cut to the floor for produces judged from their CreateTime")
        # No target: the move completes.
        producer.stamp_behind_ms = 0
        set_defaults(c, {"reassignment.adaptive.produce.latency.from": "ArrivalTime",
                         "reassignment.adaptive.max.produce.latency.ms": str(GENEROUS_MS)})

        def done() -> bool:
            out = run_cli("reassign", "--bootstrap-server", c.bootstrap, "--verify", "--reassignment-json-file",
                          str(plan))
            return f"Reassignment of partition {topic}-0 is completed." in out

        wait_for(done, 120, "the move to complete", interval_s=1.0)
    finally:
        watch.stop()
        producer.stop()
    assert c.describe(topic)[0].replicas == (1, 2, 4)
    for b in (1, 4):
        rates = [rate for rate, _reason in watch.seen[b] if rate >= 0]
        assert rates and all(FLOOR <= r <= CEILING for r in rates), (b, sorted(set(rates)))
    leader_rates = [rate for rate, _reason in watch.seen[1]]
    print(f"leader's rates seen: min {min(leader_rates):.0f}, max {max(leader_rates):.0f}; "
          f"receiver's max {max(r for r, _ in watch.seen[4]):.0f}; acked {len(producer.acked)}, failed {producer.failed}")
    assert max(leader_rates) > FLOOR and min(leader_rates) == FLOOR
    # Nothing acknowledged is lost.
    assert producer.acked, "the producer had nothing acknowledged"
    missing = producer.acked - consumed_values(c.bootstrap, topic)
    assert not missing, f"{len(missing)} acknowledged messages missing, e.g. {sorted(missing)[:5]}"
    set_defaults(c, {"reassignment.throttle.mode": "static"})
    wait_for(lambda: all(throttle(c, b)[1] == "static" for b in c.brokers), 30, "every broker back to static")
