"""Produce p99 during a partition move: no move, unthrottled, static throttles, the adaptive throttle.

ZooKeeper and four brokers (local processes, each with a Prometheus endpoint). ``load`` (one
partition on brokers 1,2,3, leader 1, ``min.insync.replicas=2``) takes a steady acks=all
producer (confluent-kafka, 1 KiB messages at ``--load-mb`` MB/s, linger 1 ms); ``big`` (one
partition, leader 1, ``--move-mib`` MiB) moves between {1,2,3} and {1,2,4} and back, leader 1
staying, so each move copies the whole partition from broker 1 to the broker being added. A
message's latency is librdkafka's, from produce() to the broker's answer (``Message.latency()``).

Phases, one after the other, and all of them once in each of ``--repeat`` rounds: ``no_move``
(``--baseline-s`` seconds), ``unthrottled``, ``static`` at each of ``--static-mb``
(``reassignment.throttled.rate`` at the cluster default), then ``adaptive``
(``reassignment.throttle.mode=adaptive``, floor ``--floor-mb``, ceiling ``--ceiling-mb``, and a
produce target of ``--target-factor`` x the 90th percentile of broker 1's per-second p99 of acks=all
produces during the first ``no_move``, read from its metrics). A disturbance of a minute or two then
lands in one round, and the summary's medians over the rounds leave it out. For each move: the p50/p99 of the
messages sent while it ran, the copy rate (the partition's bytes over the move's time, from the
AlterPartitionReassignments request until ListPartitionReassignments no longer lists it), and for
the adaptive one the rate in force, its reason and what it judged by on broker 1 and the broker
being added every half second. For every move, each 2-second slice's copy rate (from the adding
replica's bytes) and p99 (``slices``). For every phase: the CPU each broker and the producer's process used
(``cores``) and the ms per second each waited for a CPU, the host's CPU pressure (PSI "some"), and the messages over 25 ms
(``stalls``: when in the phase, how long), and the CPU time the hypervisor gave to other guests
(``steal_ms_per_s``: on a shared host, load that no process here shows). Every move starts 1.5 s after the last, in every phase,
so the last move's removed replica is deleted between windows, and the no-move windows poll the
controller and the disk as a move's wait does (``Mover.poll``). ``--latency-from`` sets
``reassignment.adaptive.produce.latency.from`` for the no-move and adaptive phases, so the target is
taken on the scale the adaptive mode judges by. The producer runs in a process
of its own, so that the benchmark's own work does not delay its delivery reports, and every
broker's metrics are read every half second in every phase, so that their cost is the same in
each. One JSON line per measurement, then a summary line against the goal: p99
during the adaptive move at most 1.2x the no-move p99, copying at least 0.8x the rate of the
fastest static throttle that meets the same p99.

    .venv/bin/python benchmarks/adaptive_throttle.py [--move-mib 512] [--static-mb 10,20,40,80] [--repeat 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration" / "cluster"))

from cluster_support import DEFAULT_PROPS, LocalCluster, run_cli
from confluent_kafka import Producer

from headwater.admin.client import AdminClient
from headwater.admin.local import READY_TIMEOUT_S, BrokerProcess, ZooKeeperProcess, free_port, wait_for_port
from headwater.admin.reassign import Cluster, parse_throttle_metrics
from headwater.replication.copy_pacer import pressure_share
from headwater.server.cpu_pressure import CpuPressure

MESSAGE_BYTES = 1024


SLICE_S = 2.0  # the slices of slice_p99_median


def emit(**fields: Any) -> None:
    print(json.dumps({"benchmark": "adaptive_throttle", **fields}), flush=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)] if ordered else float("nan")


def runqueue_wait_ns(pid: int) -> int:
    """Nanoseconds the threads of ``pid`` have waited for a CPU while runnable (schedstat's second
    field, summed over /proc/PID/task: the process file counts the main thread only)."""
    total = 0
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError, IndexError):
                total += int((task / "schedstat").read_text().split()[1])
    return total


def cpu_ticks(pid: int) -> int:
    """User and system CPU time of ``pid`` and its threads, in USER_HZ ticks (/proc/PID/stat)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    return 0


def steal_ticks() -> int | None:
    """The host's CPU time stolen from this virtual machine by its hypervisor, in USER_HZ ticks
    (/proc/stat's "cpu" line, eighth value; None where unknown)."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()
        return int(fields[8]) if fields[0] == b"cpu" and len(fields) > 8 else None
    except (OSError, ValueError):
        return None


TICKS_PER_S = os.sysconf("SC_CLK_TCK")


class RunQueueSampler(threading.Thread):
    """Every half second, how long each process has waited for a CPU, so that a phase can be given
    its ms of run-queue wait per second: the CPU contention a copy adds, which the brokers'
    arrival-to-answer produce latency does not see (a frame waits in the kernel until it is read)."""

    def __init__(self, pids: dict[str, int]) -> None:
        super().__init__(daemon=True)
        self.pids = pids
        self.samples: list[tuple[float, dict[str, int]]] = []
        self.psi: list[tuple[float, int]] = []  # the host's PSI CPU "some" total, µs
        self.steal: list[tuple[float, int]] = []  # steal_ticks()
        self.cpu: list[tuple[float, dict[str, int]]] = []  # cpu_ticks() of each process
        self._pressure = CpuPressure()
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(0.5):
            now = time.monotonic()
            self.samples.append((now, {name: runqueue_wait_ns(pid) for name, pid in self.pids.items()}))
            self.cpu.append((now, {name: cpu_ticks(pid) for name, pid in self.pids.items()}))
            if (waited := self._pressure.waited_us()) is not None:
                self.psi.append((now, waited))
            if (stolen := steal_ticks()) is not None:
                self.steal.append((now, stolen))

    def cpu_pressure(self, t0: float, t1: float) -> float | None:
        """The share of [t0, t1] in which some task on the host waited for a CPU (None: no PSI)."""
        inside = [(t, w) for t, w in list(self.psi) if t0 <= t <= t1]
        if len(inside) < 2:
            return None
        share = pressure_share((inside[0][0] * 1000, inside[0][1]), (inside[-1][0] * 1000, inside[-1][1]))
        return None if share is None else round(share, 3)

    def steal_ms_per_s(self, t0: float, t1: float) -> float | None:
        """CPU ms per second the hypervisor gave to others during [t0, t1], over all of the VM's CPUs:
        a neighbour's load that no process here can see (None: not known)."""
        inside = [(t, n) for t, n in list(self.steal) if t0 <= t <= t1]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return None
        return round((inside[-1][1] - inside[0][1]) * 1000 / TICKS_PER_S / (inside[-1][0] - inside[0][0]), 1)

    def cores(self, t0: float, t1: float) -> dict[str, float]:
        """The CPU each process used during [t0, t1], in cores (the producer's includes librdkafka's
        spin, docs/performance.md)."""
        inside = [(t, c) for t, c in list(self.cpu) if t0 <= t <= t1]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return {}
        (ta, ca), (tb, cb) = inside[0], inside[-1]
        return {name: round((cb[name] - ca[name]) / TICKS_PER_S / (tb - ta), 2) for name in self.pids}

    def ms_per_s(self, t0: float, t1: float) -> dict[str, float]:
        inside = [(t, w) for t, w in list(self.samples) if t0 <= t <= t1]
        if len(inside) < 2:
            return {}
        (ta, wa), (tb, wb) = inside[0], inside[-1]
        return {name: round((wb[name] - wa[name]) / 1e6 / (tb - ta), 1) for name in self.pids}

    def stop(self) -> None:
        self._halt.set()


SEND_EVERY_S = 0.1  # how often the producer's process hands its samples over
ACK_GRACE_S = 1.0  # a window waits this long past its end for the answers to messages sent in it


def _produce(conn: Connection, bootstrap: str, topic: str, rate: float, idempotent: bool) -> None:
    """The load generator's process: acks=all at ``rate`` messages/s until told to stop; sends
    ("samples", [(send time, latency ms)], its clock) every SEND_EVERY_S, then ("errors", n)."""
    # librdkafka's idempotent producer busy-loops while a partition has five requests in flight
    # (docs/performance.md, "The load generator's spin"); on a shared machine that spin takes the
    # brokers' cores, so the benchmarks can run without idempotence to keep it out of the figures.
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": idempotent,
                         "linger.ms": 1, "log_level": 3})
    samples: list[tuple[float, float]] = []
    errors = 0

    def report(err: Any, msg: Any) -> None:
        nonlocal errors
        if err is not None:
            errors += 1
            return
        # librdkafka's latency() is its clock at this call minus the produce() call's, so the time
        # this callback waited for the thread counts: the process runs nothing else.
        latency = msg.latency()
        if latency is not None:
            samples.append((time.monotonic() - latency, latency * 1000))

    payload = os.urandom(MESSAGE_BYTES)
    start = last_send = time.monotonic()
    sent = 0
    while not conn.poll():
        due = int((time.monotonic() - start) * rate) + 1
        while sent < due:
            producer.produce(topic, value=payload, partition=0, on_delivery=report)
            sent += 1
        producer.poll(0)
        if (now := time.monotonic()) - last_send >= SEND_EVERY_S:
            conn.send(("samples", samples, now))
            samples, last_send = [], now
        time.sleep(0.001)  # the load generator must not take the CPU the brokers are measured on
    producer.flush(30)
    conn.send(("samples", samples, time.monotonic()))
    conn.send(("errors", errors, time.monotonic()))


class LoadProducer:
    """acks=all at a fixed rate; (send time, latency ms) of every acknowledged message.

    It runs in a process of its own: in the benchmark's process, whatever else the benchmark does
    (parsing the brokers' metrics during the adaptive phase) would hold the interpreter while
    delivery reports wait, and that wait is part of the latency librdkafka reports."""

    def __init__(self, bootstrap: str, topic: str, mb_per_s: float, idempotent: bool = True) -> None:
        self._conn, child = multiprocessing.get_context("spawn").Pipe()
        self._proc = multiprocessing.get_context("spawn").Process(
            target=_produce, args=(child, bootstrap, topic, mb_per_s * 1_000_000 / MESSAGE_BYTES, idempotent),
            daemon=True)
        self.samples: list[tuple[float, float]] = []
        self.errors = 0
        self._through = 0.0  # the producer's clock at its last hand-over
        self._receiver = threading.Thread(target=self._receive, daemon=True)

    def start(self) -> None:
        self._proc.start()
        self._receiver.start()

    @property
    def pid(self) -> int:
        assert self._proc.pid is not None
        return self._proc.pid

    def _receive(self) -> None:
        with contextlib.suppress(EOFError, OSError):
            while True:
                kind, value, through = self._conn.recv()
                if kind == "samples":
                    self.samples.extend(value)
                else:
                    self.errors = value
                self._through = through

    def _wait_through(self, t: float) -> None:
        deadline = time.monotonic() + ACK_GRACE_S + 10
        while self._through < t + ACK_GRACE_S and self._proc.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)

    def window(self, t0: float, t1: float) -> list[float]:
        self._wait_through(t1)
        return [lat for sent, lat in list(self.samples) if t0 <= sent < t1]

    def slice_p99_median(self, t0: float, t1: float, slice_s: float = SLICE_S) -> float | None:
        """The median of the p99s of the whole ``slice_s`` slices of [t0, t1). A p99 over a long
        window catches more of the machine's rare stalls than one over a short window, so phases of
        different lengths (a move at 25 MB/s against one at 100) are compared on equal slices too."""
        p99s = [percentile(lat, 0.99) for k in range(int((t1 - t0) // slice_s))
                if (lat := self.window(t0 + k * slice_s, t0 + (k + 1) * slice_s))]
        return round(statistics.median(p99s), 2) if p99s else None

    def slices(self, t0: float, t1: float, copied: list[tuple[float, int]],
               slice_s: float = SLICE_S) -> list[tuple[float, float]]:
        """(copy MB/s, p99 ms) of each whole ``slice_s`` slice of [t0, t1), the copy rate from the
        adding replica's bytes at the samples nearest the slice's ends: whether a phase's p99 follows
        the rate it copied at moment by moment, as a varying (adaptive) rate would need it to."""
        out = []
        for k in range(int((t1 - t0) // slice_s)):
            a, b = t0 + k * slice_s, t0 + (k + 1) * slice_s
            lat = self.window(a, b)
            inside = [(t, n) for t, n in copied if a <= t <= b]
            if lat and len(inside) >= 2 and inside[-1][0] > inside[0][0]:
                (ta, na), (tb, nb) = inside[0], inside[-1]
                out.append((round((nb - na) / 1e6 / (tb - ta), 1), round(percentile(lat, 0.99), 2)))
        return out

    def stop(self) -> None:
        if self._proc.is_alive():
            with contextlib.suppress(OSError):
                self._conn.send("stop")
        self._proc.join(60)
        if self._proc.is_alive():
            self._proc.kill()
        self._receiver.join(10)


def start(root: Path) -> tuple[LocalCluster, dict[int, str]]:
    cluster = LocalCluster(root, 4)
    cluster.zk = ZooKeeperProcess(free_port(), root).start()
    props = {**DEFAULT_PROPS, "zookeeper.connect": cluster.zk.connect, "log.segment.bytes": str(64 * 1024 * 1024),
             "file.delete.delay.ms": "0"}
    urls: dict[int, str] = {}
    for b in range(1, 5):
        port = free_port()
        cluster.brokers[b] = BrokerProcess(b, free_port(), root, {**props, "metrics.port": str(port)})
        urls[b] = f"http://127.0.0.1:{port}/metrics"
    for bp in cluster.brokers.values():
        bp.start(wait=False)
    for bp in cluster.brokers.values():
        assert bp.proc is not None
        wait_for_port(bp.host, bp.port, READY_TIMEOUT_S, bp.proc)
    cluster.wait_registered(set(cluster.brokers))
    return cluster, urls


def throttles(urls: dict[int, str]) -> dict[int, Any]:
    out: dict[int, Any] = {}
    for url in urls.values():
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as resp:
            out.update(parse_throttle_metrics(resp.read().decode()))
    return out


def set_defaults(cluster: LocalCluster, configs: dict[str, str | None]) -> None:
    """Cluster-wide dynamic broker configs (None: delete), as an operator sets them."""
    added = ",".join(f"{k}={v}" for k, v in configs.items() if v is not None)
    deleted = ",".join(k for k, v in configs.items() if v is None)
    args = ["configs", "--bootstrap-server", cluster.bootstrap, "--alter", "--entity-type", "brokers", "--entity-default"]
    run_cli(*args, *(["--add-config", added] if added else []), *(["--delete-config", deleted] if deleted else []))


def fill(bootstrap: str, topic: str, mib: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20, "batch.size": 1_000_000,
                         "log_level": 3})
    value = os.urandom(10_000)
    for _ in range(mib * 1024 * 1024 // len(value)):
        while True:
            try:
                producer.produce(topic, value=value, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(120) == 0


def load_and_big(cluster: LocalCluster, move_mib: int, load_mb: float, fill_timeout_s: float,
                 idempotent: bool = True) -> LoadProducer:
    """Create ``load`` (``min.insync.replicas=2``) and ``big`` on brokers 1,2,3, both led by broker 1
    (the first of an explicit assignment is the preferred leader), fill ``big`` with ``move_mib``
    MiB, and start the acks=all producer on ``load``."""
    run_cli("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", "load",
            "--replica-assignment", "1:2:3", "--config", "min.insync.replicas=2")
    run_cli("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", "big",
            "--replica-assignment", "1:2:3")
    cluster.wait_full_isr(["load", "big"], 1)
    assert cluster.leaders("load") == {0: 1} and cluster.leaders("big") == {0: 1}
    fill(cluster.bootstrap, "big", move_mib)
    cluster.wait_full_isr(["big"], 1, timeout_s=fill_timeout_s)
    load = LoadProducer(cluster.bootstrap, "load", load_mb, idempotent)
    load.start()
    time.sleep(5)  # connections, metadata, the producer's first batches
    return load


class ThrottleWatcher(threading.Thread):
    """Every half second, every broker's reassignment throttle from its metrics endpoint, in every
    phase alike: rendering and reading the metrics costs the brokers some CPU, which must not count
    against one phase only."""

    def __init__(self, urls: dict[int, str]) -> None:
        super().__init__(daemon=True)
        self.urls = urls
        self.samples: list[tuple[float, dict[int, Any]]] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(0.5):
            self.samples.append((time.monotonic(), throttles(self.urls)))

    def between(self, t0: float, t1: float) -> list[tuple[float, dict[int, Any]]]:
        return [(t, found) for t, found in list(self.samples) if t0 <= t <= t1]

    def trace(self, t0: float, t1: float, brokers: tuple[int, ...]) -> list[dict[str, Any]]:
        """[rate MB/s, reason, produce p99, CPU pressure] of ``brokers`` at each sample of [t0, t1]."""
        return [{"t": round(t - t0, 1), **{f"b{b}": [round(th.rate / 1e6, 2), th.reason, round(th.produce_p99_ms, 1),
                                                     round(th.cpu_pressure, 2)]
                                           for b, th in sorted(found.items()) if b in brokers}}
                for t, found in self.between(t0, t1)]

    def stop(self) -> None:
        self._halt.set()


STALL_MS = 25.0
SETTLE_S = 1.5  # before each move: longer than a broker's housekeeping tick (1 s)


class Mover:
    """Moves ``big``-0 between {1,2,3} and {1,2,4}; times each move."""

    def __init__(self, cluster: LocalCluster, admin: Cluster) -> None:
        self.cluster, self.admin = cluster, admin
        self.current = [1, 2, 3]
        self.adding = 0  # the broker the last move added
        self.copied: list[tuple[float, int]] = []  # (time, bytes of the adding replica) during the last move

    def poll(self, seconds: float) -> None:
        """What ``move`` does while a move runs (ListPartitionReassignments to the controller and a
        look at a replica's files every 0.1 s), for ``seconds`` with no move: the no-move windows pay
        the same cost as the moves, whose controller may be the producer's leader."""
        end = time.monotonic() + seconds
        probe = 4 if self.current == [1, 2, 3] else 3
        while time.monotonic() < end:
            assert not self.admin.ongoing()
            self.cluster.log_bytes(probe, "big")
            time.sleep(0.1)

    def move(self) -> tuple[float, float, float]:
        """(start, end, bytes/s) of one move, after the same pause in every phase: the last move's
        removed replica is deleted in it, not in this move's window, whichever phase comes first."""
        time.sleep(SETTLE_S)
        target = [1, 2, 4] if self.current == [1, 2, 3] else [1, 2, 3]
        self.adding = next(b for b in target if b not in self.current)
        size = self.cluster.log_bytes(1, "big")
        t0 = time.monotonic()
        self.copied = [(t0, self.cluster.log_bytes(self.adding, "big"))]
        result = self.admin.alter({("big", 0): target})
        assert result[("big", 0)][0] == 0, result
        while ("big", 0) in self.admin.ongoing():
            time.sleep(0.1)
            self.copied.append((time.monotonic(), self.cluster.log_bytes(self.adding, "big")))
        t1 = time.monotonic()
        self.current = target
        return t0, t1, size / (t1 - t0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--move-mib", type=int, default=512)
    parser.add_argument("--load-mb", type=float, default=0.5, help="MB/s of the acks=all producer")
    parser.add_argument("--baseline-s", type=float, default=20)
    parser.add_argument("--static-mb", default="10,20,40,80")
    parser.add_argument("--floor-mb", type=float, default=2)
    parser.add_argument("--ceiling-mb", type=float, default=100)
    parser.add_argument("--target-factor", type=float, default=1.2)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--no-idempotence", action="store_true",
                        help="run the acks=all producer with enable.idempotence=false (see LoadProducer)")
    parser.add_argument("--copy-max-cpu-pressure", type=float, default=None,
                        help="set reassignment.copy.max.cpu.pressure cluster-wide for every phase (default: unset)")
    parser.add_argument("--adaptive-max-cpu-pressure", type=float, default=None,
                        help="reassignment.adaptive.max.cpu.pressure in the adaptive phase (default: unset, "
                             "so the adaptive mode does not judge by CPU pressure)")
    parser.add_argument("--latency-from", choices=("ArrivalTime", "CreateTime"), default=None,
                        help="reassignment.adaptive.produce.latency.from in the no-move and adaptive phases "
                             "(default: unset, ArrivalTime); the target is taken on the same scale")
    args = parser.parse_args()
    static_rates = [float(x) for x in args.static_mb.split(",") if x]
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        cluster, urls = start(Path(tmp))
        client = AdminClient(cluster.bootstrap, client_id="adaptive-bench")
        admin = Cluster(client)
        load: LoadProducer | None = None
        try:
            load = load_and_big(cluster, args.move_mib, args.load_mb, fill_timeout_s=120, idempotent=not args.no_idempotence)
            if args.copy_max_cpu_pressure is not None:
                set_defaults(cluster, {"reassignment.copy.max.cpu.pressure": str(args.copy_max_cpu_pressure)})
            mover = Mover(cluster, admin)
            watcher = ThrottleWatcher(urls)
            watcher.start()
            results: list[dict[str, Any]] = []
            sampler = RunQueueSampler({**{f"b{b}": cluster.pid(b) for b in cluster.brokers}, "producer": load.pid,
                                       "bench": os.getpid()})
            sampler.start()

            def record(phase: str, t0: float, t1: float, throttle_mb: float | None = None, copy: float | None = None,
                       **extra: Any) -> dict[str, Any]:
                lat = load.window(t0, t1) if load is not None else []
                row = {"phase": phase, "throttle_mb_per_s": throttle_mb, "seconds": round(t1 - t0, 1),
                       "messages": len(lat), "p50_ms": round(percentile(lat, 0.5), 2),
                       "p99_ms": round(percentile(lat, 0.99), 2),
                       "slice_p99_median_ms": load.slice_p99_median(t0, t1) if load is not None else None,
                       "copy_mb_per_s": None if copy is None else round(copy / 1e6, 2),
                       "runqueue_wait_ms_per_s": sampler.ms_per_s(t0, t1), "cores": sampler.cores(t0, t1),
                       "cpu_pressure": sampler.cpu_pressure(t0, t1),
                       "steal_ms_per_s": sampler.steal_ms_per_s(t0, t1), **extra,
                       # Messages over STALL_MS: (seconds into the phase, ms), so a stall can be
                       # matched with what a broker did then.
                       "stalls": [(round(sent - t0, 2), round(v, 1)) for sent, v in list(load.samples)
                                  if t0 <= sent < t1 and v > STALL_MS][:50] if load is not None else []}
                emit(**row)
                results.append(row)
                return row

            # The brokers' own p99 during no_move (the adaptive mode, with no move, reports it every tick).
            no_move_settings = {"reassignment.throttle.mode": "adaptive",
                                "reassignment.adaptive.produce.latency.from": args.latency_from}
            broker_p99: list[float] = []

            def no_move() -> None:
                set_defaults(cluster, no_move_settings)
                time.sleep(SETTLE_S)
                t0 = time.monotonic()
                mover.poll(args.baseline_s)
                t1 = time.monotonic()
                # Each tick's p99 once: the metrics show the last tick's for a second, read twice.
                seen_p99 = [th.produce_p99_ms for _t, found in watcher.between(t0, t1)
                            if (th := found.get(1)) is not None and th.produce_p99_ms > 0]
                broker_p99.extend(v for i, v in enumerate(seen_p99) if i == 0 or v != seen_p99[i - 1])
                record("no_move", t0, t1)

            # The target an operator would pick from a dashboard of the brokers' per-second p99: what it
            # stays under 9 seconds in 10 without a move, plus the headroom the goal allows. Taken from
            # the first no-move window, so that every adaptive move runs to the same target.
            emit(phase="setup", controller=cluster.controller_id(), producer_leader=1)
            no_move()
            target_ms = round(max(0.1, args.target_factor * percentile(broker_p99, 0.9)), 2) if broker_p99 else 100.0
            calibration_p99 = round(percentile(broker_p99, 0.9), 2) if broker_p99 else None
            adaptive_settings = {**no_move_settings,
                                 "reassignment.adaptive.min.throttled.rate": str(int(args.floor_mb * 1e6)),
                                 "reassignment.adaptive.max.throttled.rate": str(int(args.ceiling_mb * 1e6)),
                                 "reassignment.adaptive.max.produce.latency.ms": str(target_ms),
                                 "reassignment.adaptive.max.cpu.pressure": None if args.adaptive_max_cpu_pressure is None
                                 else str(args.adaptive_max_cpu_pressure)}
            # Every repeat runs every phase in turn, so that a disturbance of a minute or two (another
            # guest on the host, a slow stretch of the machine) lands in one repeat's phases, not in
            # every window of one phase; the summary takes each phase's median over the repeats.
            for repeat in range(args.repeat):
                if repeat:
                    no_move()
                set_defaults(cluster, {"reassignment.throttle.mode": None})
                t0, t1, copy = mover.move()
                record("unthrottled", t0, t1, None, copy, slices=load.slices(t0, t1, mover.copied))
                for mb in static_rates:
                    set_defaults(cluster, {"reassignment.throttled.rate": str(int(mb * 1e6))})
                    t0, t1, copy = mover.move()
                    record("static", t0, t1, mb, copy, slices=load.slices(t0, t1, mover.copied))
                set_defaults(cluster, {"reassignment.throttled.rate": None, **adaptive_settings})
                t0, t1, copy = mover.move()
                seen = watcher.trace(t0, t1, (1, mover.adding))
                rates = [s["b1"][0] for s in seen if "b1" in s]
                record("adaptive", t0, t1, None, copy, target_ms=target_ms, broker_p99_no_move_ms=calibration_p99,
                       leader_rate_mb_min=min(rates, default=None), leader_rate_mb_max=max(rates, default=None),
                       leader_rate_mb_mean=round(statistics.mean(rates), 2) if rates else None, trace=seen,
                       slices=load.slices(t0, t1, mover.copied))
            summary(results)
        finally:
            if load is not None:
                load.stop()
            client.close()
            cluster.stop()


def summary(results: list[dict[str, Any]]) -> None:
    def med(phase: str, key: str, rows: list[dict[str, Any]] | None = None) -> float:
        return float(statistics.median(r[key] for r in (rows or results) if r["phase"] == phase))

    base = med("no_move", "p99_ms")
    adaptive_p99, adaptive_copy = med("adaptive", "p99_ms"), med("adaptive", "copy_mb_per_s")
    statics: dict[float, list[dict[str, Any]]] = {}
    for r in results:
        if r["phase"] == "static":
            statics.setdefault(r["throttle_mb_per_s"], []).append(r)
    meeting = [mb for mb, rows in statics.items() if med("static", "p99_ms", rows) <= max(adaptive_p99, 1.2 * base)]
    fastest = max(meeting, default=None)
    fastest_copy = med("static", "copy_mb_per_s", statics[fastest]) if fastest is not None else None
    slices: dict[str, list[float]] = {}
    for r in results:
        label = r["phase"] if r["phase"] != "static" else f"static_{r['throttle_mb_per_s']:g}"
        if r.get("slice_p99_median_ms") is not None:
            slices.setdefault(label, []).append(r["slice_p99_median_ms"])
    emit(phase="summary", no_move_p99_ms=base, unthrottled_p99_ms=med("unthrottled", "p99_ms"),
         slice_p99_median_ms={k: round(statistics.median(v), 2) for k, v in slices.items()},
         adaptive_p99_ms=adaptive_p99, adaptive_p99_over_no_move=round(adaptive_p99 / base, 2),
         adaptive_copy_mb_per_s=adaptive_copy, fastest_static_meeting_p99_mb=fastest,
         fastest_static_copy_mb_per_s=fastest_copy,
         copy_vs_that_static=None if not fastest_copy else round(adaptive_copy / fastest_copy, 2),
         goal_p99=adaptive_p99 <= 1.2 * base,
         goal_copy=None if not fastest_copy else adaptive_copy >= 0.8 * fastest_copy)


if __name__ == "__main__":
    main()
