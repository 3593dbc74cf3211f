"""Accuracy of the partition-mutation quota (KIP-599): accepted mutation rate against the configured R.

One standalone broker (a local process, stopped by PID at the end). ``controller_mutation_rate=R``
is set for two client ids, then each client creates topics (``--partitions`` each, ``--batch``
topics per request) as fast as it can for ``--seconds``, one after the other:

* ``kafka-python`` sends CreateTopics v7, checked **strictly**: topics that arrive while the bucket
  is in debt get THROTTLING_QUOTA_EXCEEDED (89) and are sent again in the next request; the client
  pauses for the response's throttle_time_ms and the broker mutes the connection for it.
* ``confluent-kafka`` (librdkafka) sends CreateTopics v4, checked **permissively**: every topic is
  created, the response carries the throttle time and the broker mutes the connection for it.

A mutation counts as accepted when the response that created its topic arrives. The bucket starts
full, so the first ``burst = windows x window_seconds x R`` mutations (plus the refill during them)
go through unthrottled; the burst ends with the first response that shows the bucket in debt (a
topic refused with 89, or for the permissive client a response that comes back late because the
broker muted the connection). From that moment to the last response, the accepted rate should be R.

Reported for each client: the measured rate and its ratio to R, the burst observed (mutations
accepted up to and including the first throttled response) against the configured burst, the
per-second accepted counts after the burst (min / median / max over whole seconds), request and
refusal counts, and a check that the broker lists exactly the topics reported as created.

Prints one JSON line.

    .venv/bin/python benchmarks/quota_accuracy.py [--seconds 60] [--rate 20] [--batch 10] [--partitions 1]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

from confluent_kafka.admin import AdminClient as ConfluentAdmin
from confluent_kafka.admin import NewTopic as ConfluentTopic
from kafka import KafkaAdminClient
from kafka.errors import NodeNotReadyError
from kafka.protocol.admin import AlterClientQuotasRequest

from headwater.admin.client import AdminClient
from headwater.admin.local import BrokerProcess, free_port

THROTTLED = 89  # THROTTLING_QUOTA_EXCEEDED
PAUSED_POLL_S = 0.005  # how often to try again while kafka-python keeps a throttled connection paused


def set_rate(bootstrap: str, client_id: str, rate: float) -> None:
    """``headwater configs --alter --entity-type clients --entity-name ID --add-config controller_mutation_rate=R``."""
    E = AlterClientQuotasRequest.EntryData
    with AdminClient(bootstrap) as client:
        resp = client.send(AlterClientQuotasRequest, dict(entries=[E(
            entity=[E.EntityData(entity_type="client-id", entity_name=client_id)],
            ops=[E.OpData(key="controller_mutation_rate", value=rate, remove=False)])], validate_only=False))
    codes = [e.error_code for e in resp.entries]
    if codes != [0]:
        raise RuntimeError(f"AlterClientQuotas for {client_id}: {codes}")


def storm_strict(bootstrap: str, client_id: str, seconds: float, batch: int, partitions: int,
                 rf: int = 1) -> dict[str, object]:
    """kafka-python: CreateTopics v7 as fast as the throttle lets it; refused topics go first in the next request."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id=client_id, request_timeout_ms=60_000)
    events: list[tuple[float, int, bool]] = []  # (seconds since start, mutations accepted, throttled)
    retry: deque[str] = deque()
    created: list[str] = []
    seq = requests = refused = other = paused = 0
    try:
        t0 = time.monotonic()
        deadline = t0 + seconds
        while time.monotonic() < deadline:
            names = []
            while retry and len(names) < batch:
                names.append(retry.popleft())
            while len(names) < batch:
                names.append(f"{client_id}-{seq:06d}")
                seq += 1
            try:
                result = admin.create_topics({n: {"num_partitions": partitions, "replication_factor": rf} for n in names},
                                             raise_errors=False)
            except NodeNotReadyError:
                # kafka-python pauses the connection for throttle_time_ms and refuses to send until then.
                retry.extendleft(reversed(names))
                paused += 1
                time.sleep(PAUSED_POLL_S)
                continue
            now = time.monotonic() - t0
            requests += 1
            ok = 0
            throttled = False
            for t in result["topics"]:
                if t["error_code"] == 0:
                    ok += partitions
                    created.append(t["name"])
                elif t["error_code"] == THROTTLED:
                    refused += 1
                    throttled = True
                    retry.append(t["name"])
                else:
                    other += 1
            events.append((now, ok, throttled))
        elapsed = time.monotonic() - t0
    finally:
        admin.close()
    return {"events": events, "created": created, "requests": requests, "refused_topics": refused,
            "other_errors": other, "elapsed_s": elapsed, "client_paused_polls": paused}


def storm_permissive(bootstrap: str, client_id: str, seconds: float, batch: int, partitions: int) -> dict[str, object]:
    """confluent-kafka: CreateTopics v4, one request at a time; every topic is created, the connection is muted.

    A response counts as throttled when librdkafka reports its throttle time (``throttle_cb``).
    """
    throttles: list[float] = []
    admin = ConfluentAdmin({"bootstrap.servers": bootstrap, "client.id": client_id,
                            "throttle_cb": lambda e: throttles.append(e.throttle_time)})
    events: list[tuple[float, int, bool]] = []
    created: list[str] = []
    seq = requests = other = 0
    t0 = time.monotonic()
    deadline = t0 + seconds
    while time.monotonic() < deadline:
        names = [f"{client_id}-{seq + i:06d}" for i in range(batch)]
        seq += batch
        futures = admin.create_topics([ConfluentTopic(n, partitions, 1) for n in names], operation_timeout=60,
                                      request_timeout=120)
        ok = 0
        for name, fut in futures.items():
            try:
                fut.result(180)
                ok += partitions
                created.append(name)
            except Exception:  # any failure is counted and reported, not raised
                other += 1
        now = time.monotonic() - t0
        seen = len(throttles)
        admin.poll(0)  # serves throttle_cb
        requests += 1
        events.append((now, ok, len(throttles) > seen))
    return {"events": events, "created": created, "requests": requests, "refused_topics": 0,
            "other_errors": other, "elapsed_s": time.monotonic() - t0,
            "max_throttle_ms": round(max(throttles, default=0) * 1000)}


def analyse(run: dict[str, object], rate: float, burst: float) -> dict[str, object]:
    events: list[tuple[float, int, bool]] = run["events"]  # type: ignore[assignment]
    out: dict[str, object] = {k: run[k] for k in ("requests", "refused_topics", "other_errors", "client_paused_polls",
                                                          "max_throttle_ms")
                              if k in run}
    out["elapsed_s"] = round(float(run["elapsed_s"]), 2)  # type: ignore[arg-type]
    out["accepted_total"] = sum(n for _t, n, _th in events)
    first = next((i for i, (_t, _n, th) in enumerate(events) if th), None)
    if first is None:
        out["error"] = "the quota never throttled this client: run longer or lower --rate"
        return out
    t_b = events[first][0]
    out["burst_configured"] = burst
    out["burst_observed"] = sum(n for _t, n, _th in events[:first + 1])
    out["burst_end_s"] = round(t_b, 3)
    # What a full bucket plus its refill during the burst allows (the last request may overshoot it).
    out["burst_plus_refill"] = round(burst + rate * t_b, 1)
    after = events[first + 1:]
    if not after:
        out["error"] = "no response after the burst"
        return out
    t_end = after[-1][0]
    accepted = sum(n for _t, n, _th in after)
    measured = accepted / (t_end - t_b)
    out["steady_window_s"] = round(t_end - t_b, 2)
    out["steady_accepted"] = accepted
    out["measured_rate"] = round(measured, 3)
    out["ratio"] = round(measured / rate, 4)
    out["within_5pct"] = abs(measured / rate - 1) <= 0.05
    # Near 1 when the quota, not the broker, limits the client: most responses after the burst are throttled.
    out["throttled_fraction_after_burst"] = round(sum(1 for *_x, th in after if th) / len(after), 3)
    # How fast the broker created topics while the bucket was full (the client was not throttled yet).
    out["burst_rate"] = round(out["burst_observed"] / t_b, 1) if t_b > 0 else None  # type: ignore[operator]
    whole = int(t_end - t_b)
    if whole >= 1:
        bins = [0] * whole
        for t, n, _th in after:
            i = int(t - t_b)
            if i < whole:
                bins[i] += n
        out["per_second"] = {"min": min(bins), "median": statistics.median(bins), "max": max(bins), "seconds": whole}
        # The trend: if the broker, not the quota, becomes the limit as topics pile up, this falls below R.
        out["per_10s_rate"] = [round(sum(bins[i:i + 10]) / len(bins[i:i + 10]), 2) for i in range(0, whole, 10)]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="how long each client creates topics")
    ap.add_argument("--rate", type=float, default=20.0, help="controller_mutation_rate R (partitions/s)")
    ap.add_argument("--batch", type=int, default=10, help="topics per CreateTopics request")
    ap.add_argument("--partitions", type=int, default=1, help="partitions per topic")
    ap.add_argument("--windows", type=int, default=11, help="controller.quota.window.num")
    ap.add_argument("--window-seconds", type=float, default=1.0, help="controller.quota.window.size.seconds")
    ap.add_argument("--clients", default="kafka-python,confluent-kafka", help="which clients to run, comma-separated")
    args = ap.parse_args()
    burst = args.windows * args.window_seconds * args.rate
    out: dict[str, object] = {"benchmark": "quota_accuracy", "rate": args.rate, "seconds": args.seconds,
                              "batch": args.batch, "partitions_per_topic": args.partitions, "windows": args.windows,
                              "window_seconds": args.window_seconds, "burst_configured": burst}
    props = {"controller.quota.window.num": str(args.windows),
             "controller.quota.window.size.seconds": str(args.window_seconds)}
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    for name in clients:
        if name not in ("kafka-python", "confluent-kafka"):
            raise SystemExit(f"unknown client {name!r}: kafka-python or confluent-kafka")
        # A fresh broker for each client: both start from an empty cluster.
        with tempfile.TemporaryDirectory(prefix="hw-quota-accuracy-") as tmp:
            broker = BrokerProcess(1, free_port(), Path(tmp), props)
            try:
                broker.start()
                client_id = f"acc-{name}"
                set_rate(broker.bootstrap, client_id, args.rate)
                print(f"{name}: creating topics for {args.seconds:g} s at R={args.rate:g}/s", file=sys.stderr)
                if name == "kafka-python":
                    run = storm_strict(broker.bootstrap, client_id, args.seconds, args.batch, args.partitions)
                else:
                    run = storm_permissive(broker.bootstrap, client_id, args.seconds, args.batch, args.partitions)
                result = analyse(run, args.rate, burst)
                result["mode"] = "strict (CreateTopics v7)" if name == "kafka-python" else "permissive (CreateTopics v4)"
                with AdminClient(broker.bootstrap) as client:
                    listed = {t.name for t in client.refresh().topics if t.name.startswith(client_id + "-")}
                result["broker_lists_exactly_created"] = listed == set(run["created"])  # type: ignore[arg-type]
                out[name] = result
                print(f"{name}: {json.dumps(result)}", file=sys.stderr)
            finally:
                with contextlib.suppress(Exception):
                    broker.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
