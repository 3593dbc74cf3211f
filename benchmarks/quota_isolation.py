"""Isolation under the partition-mutation quota (KIP-599): other clients' latency during a throttled storm.

A 3-broker cluster with ZooKeeper (local processes, stopped by PID at the end). Two probes run
through the whole benchmark, each in its own thread with its own connection, one request at a time
at a fixed pace:

* ``ListPartitionReassignments`` (all topics) to the controller, client id ``probe-lpr``;
* ``CreateTopics`` of one topic (1 partition, ``--replication-factor``) to the controller by the
  client ``victim``, under its own generous quota (``--victim-rate``).

Phases, in the same run:

1. ``baseline``: ``--phase-seconds`` with no storm.
2. ``burst``: a separate process (client id ``storm``, kafka-python, CreateTopics v7, strict)
   starts creating topics (``--storm-batch`` topics of 1 partition per request) as fast as it can,
   under ``controller_mutation_rate=--storm-rate``. Its bucket starts full, so at first it is not
   throttled at all; this phase lasts until its first response with a topic refused (error 89).
3. ``storm``: the same client, now throttled, for ``--phase-seconds`` more. This is the phase the
   quota is meant to keep harmless.

Reported: p50/p99/max latency and sample counts of both probes in each phase, the ratios of the
storm (and burst) figures to the baseline, and what the storm client achieved (accepted mutations
per second while throttled, refused topics, requests).

Prints one JSON line.

    .venv/bin/python benchmarks/quota_isolation.py [--phase-seconds 30] [--storm-rate 20]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path

from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    CreateTopicsRequest,
    DescribeClientQuotasRequest,
    ListPartitionReassignmentsRequest,
)

from headwater.admin.client import AdminClient, AdminError
from headwater.admin.cluster import start_cluster, stop_cluster
from headwater.admin.local import free_port, free_port_range

THROTTLED = 89  # THROTTLING_QUOTA_EXCEEDED
PAUSED_POLL_S = 0.005


def percentile(values: list[float], p: float) -> float | None:
    """Nearest rank."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


# --- the storm: a separate process, so its client work does not share our GIL ------------------------

def storm_worker(bootstrap: str, client_id: str, batch: int, rf: int, events_path: Path) -> None:
    from kafka import KafkaAdminClient
    from kafka.errors import NodeNotReadyError

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_a: stop.set())
    parent = os.getppid()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id=client_id, request_timeout_ms=60_000)
    retry: deque[str] = deque()
    seq = 0
    with open(events_path, "w", buffering=1) as out:
        try:
            while not stop.is_set() and os.getppid() == parent:
                names = []
                while retry and len(names) < batch:
                    names.append(retry.popleft())
                while len(names) < batch:
                    names.append(f"storm-{seq:06d}")
                    seq += 1
                try:
                    result = admin.create_topics({n: {"num_partitions": 1, "replication_factor": rf} for n in names},
                                                 raise_errors=False)
                except NodeNotReadyError:  # kafka-python keeps a throttled connection paused
                    retry.extendleft(reversed(names))
                    time.sleep(PAUSED_POLL_S)
                    continue
                ok = refused = other = 0
                for t in result["topics"]:
                    if t["error_code"] == 0:
                        ok += 1
                    elif t["error_code"] == THROTTLED:
                        refused += 1
                        retry.append(t["name"])
                    else:
                        other += 1
                out.write(f"{time.time():.6f} {ok} {refused} {other}\n")
        finally:
            admin.close()


def read_storm_events(path: Path) -> list[tuple[float, int, int, int]]:
    events = []
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 4:
                events.append((float(parts[0]), int(parts[1]), int(parts[2]), int(parts[3])))
    return events


def stop_pid(proc: subprocess.Popen[bytes], timeout_s: float = 15) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


# --- probes -------------------------------------------------------------------------------------------

class Probe(threading.Thread):
    """One request at a time every ``interval_s``; records (wall start, latency ms, ok)."""

    def __init__(self, name: str, bootstrap: str, client_id: str, interval_s: float, stop: threading.Event) -> None:
        super().__init__(name=name, daemon=True)
        self.bootstrap = bootstrap
        self.client_id = client_id
        self.interval_s = interval_s
        self.stop = stop
        self.samples: list[tuple[float, float, bool]] = []
        self.errors: dict[str, int] = {}
        self.seq = 0

    def request(self, client: AdminClient) -> bool:
        raise NotImplementedError

    def run(self) -> None:
        client = AdminClient(self.bootstrap, client_id=self.client_id, timeout_s=60)
        try:
            next_at = time.monotonic()
            while not self.stop.is_set():
                wall = time.time()
                t = time.perf_counter()
                try:
                    ok = self.request(client)
                except AdminError as exc:
                    ok = False
                    self.errors[str(exc)] = self.errors.get(str(exc), 0) + 1
                    client.close()
                    client.controller_id = -1
                self.samples.append((wall, (time.perf_counter() - t) * 1000, ok))
                next_at += self.interval_s
                self.stop.wait(max(0.0, next_at - time.monotonic()))
                next_at = max(next_at, time.monotonic() - self.interval_s)  # no catch-up bursts after a slow call
        finally:
            client.close()


class ListReassignmentsProbe(Probe):
    def request(self, client: AdminClient) -> bool:
        resp = client.send_to_controller(ListPartitionReassignmentsRequest, dict(timeout_ms=30_000, topics=None),
                                         lambda r: [r.error_code])
        if resp.error_code:
            self.errors[f"error {resp.error_code}"] = self.errors.get(f"error {resp.error_code}", 0) + 1
        return resp.error_code == 0


class VictimCreateProbe(Probe):
    rf = 3

    def request(self, client: AdminClient) -> bool:
        T = CreateTopicsRequest.CreatableTopic
        name = f"victim-{self.seq:06d}"
        self.seq += 1
        resp = client.send_to_controller(CreateTopicsRequest, dict(
            topics=[T(name=name, num_partitions=1, replication_factor=self.rf, assignments=[], configs=[])],
            timeout_ms=30_000, validate_only=False), lambda r: [t.error_code for t in r.topics])
        code = resp.topics[0].error_code
        if code:
            self.errors[f"error {code}"] = self.errors.get(f"error {code}", 0) + 1
        return code == 0 and not resp.throttle_time_ms


# --- setup --------------------------------------------------------------------------------------------

def set_rates(bootstrap: str, rates: dict[str, float]) -> None:
    E = AlterClientQuotasRequest.EntryData
    with AdminClient(bootstrap) as client:
        resp = client.send(AlterClientQuotasRequest, dict(entries=[E(
            entity=[E.EntityData(entity_type="client-id", entity_name=cid)],
            ops=[E.OpData(key="controller_mutation_rate", value=rate, remove=False)]) for cid, rate in rates.items()],
            validate_only=False))
        if [e.error_code for e in resp.entries] != [0] * len(rates):
            raise RuntimeError(f"AlterClientQuotas: {[e.error_code for e in resp.entries]}")
        # Every broker learns quota changes from ZooKeeper; wait until the controller has them.
        deadline = time.monotonic() + 30
        C = DescribeClientQuotasRequest.ComponentData
        while True:
            client.refresh()
            resp = client.send(DescribeClientQuotasRequest, dict(components=[C(entity_type="client-id", match_type=2,
                                                                               match=None)], strict=False),
                               node_id=client.controller_id)
            seen = {e.entity[0].entity_name: v.value for e in resp.entries or [] for v in e.values}
            if all(seen.get(cid) == rate for cid, rate in rates.items()):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the controller does not show the quotas after 30 s: {seen}")
            time.sleep(0.2)


def summarise(samples: list[tuple[float, float, bool]], start: float, end: float) -> dict[str, object]:
    lat = [ms for wall, ms, _ok in samples if start <= wall < end]
    failed = sum(1 for wall, _ms, ok in samples if start <= wall < end and not ok)
    return {"n": len(lat), "failed": failed,
            "p50_ms": round(percentile(lat, 50), 2) if lat else None,  # type: ignore[arg-type]
            "p99_ms": round(percentile(lat, 99), 2) if lat else None,  # type: ignore[arg-type]
            "max_ms": round(max(lat), 2) if lat else None}


def ratio(a: object, b: object) -> float | None:
    return round(a / b, 2) if isinstance(a, float) and isinstance(b, float) and b > 0 else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--phase-seconds", type=float, default=30.0, help="length of the baseline and of the storm phase")
    ap.add_argument("--storm-rate", type=float, default=20.0, help="the storm client's controller_mutation_rate")
    ap.add_argument("--storm-batch", type=int, default=10, help="topics per storm CreateTopics request")
    ap.add_argument("--victim-rate", type=float, default=1000.0, help="the victim client's controller_mutation_rate")
    ap.add_argument("--replication-factor", type=int, default=3, help="of every topic created (storm and victim)")
    ap.add_argument("--lpr-interval", type=float, default=0.1, help="seconds between ListPartitionReassignments")
    ap.add_argument("--victim-interval", type=float, default=0.2, help="seconds between the victim's CreateTopics")
    ap.add_argument("--max-burst-seconds", type=float, default=120.0, help="give up if the storm is never throttled")
    ap.add_argument("--storm-worker", nargs=5, metavar=("BOOTSTRAP", "CLIENT_ID", "BATCH", "RF", "EVENTS"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.storm_worker:
        bootstrap, cid, batch, rf, path = args.storm_worker
        storm_worker(bootstrap, cid, int(batch), int(rf), Path(path))
        return

    out: dict[str, object] = {"benchmark": "quota_isolation", "brokers": 3, "phase_seconds": args.phase_seconds,
                              "storm_rate": args.storm_rate, "storm_batch": args.storm_batch,
                              "victim_rate": args.victim_rate, "replication_factor": args.replication_factor,
                              "lpr_interval_s": args.lpr_interval, "victim_interval_s": args.victim_interval}
    VictimCreateProbe.rf = args.replication_factor
    with tempfile.TemporaryDirectory(prefix="hw-quota-isolation-") as tmp:
        root = Path(tmp)
        storm: subprocess.Popen[bytes] | None = None
        stop = threading.Event()
        probes: list[Probe] = []
        try:
            state = start_cluster(root, 3, free_port_range(3), free_port(), [], {})
            bootstrap = state.bootstrap
            set_rates(bootstrap, {"storm": args.storm_rate, "victim": args.victim_rate})
            probes = [ListReassignmentsProbe("lpr", bootstrap, "probe-lpr", args.lpr_interval, stop),
                      VictimCreateProbe("victim", bootstrap, "victim", args.victim_interval, stop)]
            t_base = time.time()
            for p in probes:
                p.start()
            print(f"baseline for {args.phase_seconds:g} s", file=sys.stderr)
            time.sleep(args.phase_seconds)
            events_path = root / "storm-events.txt"
            t_storm = time.time()
            with open(root / "storm.log", "wb") as log:
                storm = subprocess.Popen(
                    [sys.executable, __file__, "--storm-worker", bootstrap, "storm", str(args.storm_batch),
                     str(args.replication_factor), str(events_path)],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
            print(f"storm started (pid {storm.pid}); waiting for its first throttled response", file=sys.stderr)
            t_throttled = None
            while t_throttled is None:
                if storm.poll() is not None:
                    raise RuntimeError(f"the storm client exited with {storm.returncode}: "
                                       f"{(root / 'storm.log').read_text()[-2000:]}")
                if time.time() - t_storm > args.max_burst_seconds:
                    raise RuntimeError(f"the storm was not throttled within {args.max_burst_seconds:g} s")
                time.sleep(0.05)
                t_throttled = next((t for t, _ok, refused, _o in read_storm_events(events_path) if refused), None)
            print(f"storm throttled after {t_throttled - t_storm:.1f} s; measuring for {args.phase_seconds:g} s",
                  file=sys.stderr)
            time.sleep(max(0.0, t_throttled + args.phase_seconds - time.time()))
            t_end = time.time()
            stop.set()
            for p in probes:
                p.join(90)
            stop_pid(storm)
            events = read_storm_events(events_path)
            phases = {"baseline": (t_base, t_storm), "burst": (t_storm, t_throttled), "storm": (t_throttled, t_end)}
            for p in probes:
                key = "list_partition_reassignments" if p.name == "lpr" else "victim_create_topics"
                res: dict[str, object] = {ph: summarise(p.samples, a, b) for ph, (a, b) in phases.items()}
                for ph in ("burst", "storm"):
                    for q in ("p50_ms", "p99_ms"):
                        res[f"{ph}_vs_baseline_{q[:3]}"] = ratio(res[ph][q], res["baseline"][q])  # type: ignore[index]
                if p.errors:
                    res["errors"] = p.errors
                out[key] = res
            burst_events = [e for e in events if e[0] <= t_throttled]
            storm_events = [e for e in events if t_throttled < e[0] <= t_end]
            out["storm_client"] = {
                "burst_s": round(t_throttled - t_storm, 2),
                "burst_accepted": sum(e[1] for e in burst_events),
                "throttled_window_s": round(t_end - t_throttled, 2),
                "throttled_accepted": sum(e[1] for e in storm_events),
                "throttled_accepted_per_s": round(sum(e[1] for e in storm_events) / (t_end - t_throttled), 2),
                "requests": len(events),
                "refused_topics": sum(e[2] for e in events),
                "other_errors": sum(e[3] for e in events),
            }
        finally:
            stop.set()
            for p in probes:
                p.join(30)
            if storm is not None:
                stop_pid(storm)
            if (root / "cluster.json").exists():
                stop_cluster(root)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
