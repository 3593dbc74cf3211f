"""A local ZooKeeper-mode cluster for the cluster integration tests (and the cluster benchmarks).

``LocalCluster`` owns one ZooKeeper and N ``python -m headwater broker`` processes, each started
and stopped by its PID. It reads the cluster the way an operator would: Metadata from a live
broker, ``headwater topics --describe``, and ZooKeeper itself through kazoo.

With ``zk_gates=True`` every broker reaches ZooKeeper through its own ``ZkGate``, a relay in the
test process that can hold back one broker's writes from a chosen one on. A test uses it to stop a
controller between two of its ZooKeeper writes and kill it there, which timing alone cannot do
reliably: the writes of one controller decision follow each other within a millisecond.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from kazoo.client import KazooClient

from headwater.admin.client import AdminClient
from headwater.admin.local import BrokerProcess, ZooKeeperProcess, free_port
from headwater.cli import main as headwater_cli

DEFAULT_PROPS = {
    "replica.lag.time.max.ms": "10000",
    "zookeeper.session.timeout.ms": "6000",
    "default.replication.factor": "3",
    "num.partitions": "1",
    "auto.create.topics.enable": "false",
    # ``stop`` stops every broker at once; those whose controller stopped first retry it in vain,
    # one backoff per retry (docs/operations.md, "Controlled shutdown").
    "controlled.shutdown.retry.backoff.ms": "300",
}


def wait_for(cond: Callable[[], Any], timeout_s: float, what: str, interval_s: float = 0.1) -> Any:
    """Poll ``cond`` until it returns something truthy; fail after ``timeout_s`` with ``what``."""
    deadline = time.monotonic() + timeout_s
    last_exc: Exception | None = None
    while True:
        try:
            value = cond()
        except Exception as exc:  # a broker that is restarting refuses connections for a while
            value, last_exc = None, exc
        if value:
            return value
        if time.monotonic() > deadline:
            detail = f" (last error: {last_exc})" if last_exc else ""
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}{detail}")
        time.sleep(interval_s)


@dataclass(frozen=True)
class PartitionLine:
    """One partition line of ``headwater topics --describe``."""

    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]

    @property
    def full(self) -> bool:
        return self.leader in self.replicas and set(self.isr) == set(self.replicas) and not self.offline


def _ids(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x)


def parse_describe(output: str) -> list[PartitionLine]:
    out = []
    for line in output.splitlines():
        fields = dict(part.split(": ", 1) for part in line.strip().split("\t") if ": " in part)
        if "Partition" not in fields:
            continue
        leader = fields["Leader"]
        out.append(PartitionLine(fields["Topic"], int(fields["Partition"]), -1 if leader == "none" else int(leader),
                                 _ids(fields["Replicas"]), _ids(fields["Isr"]), _ids(fields.get("Offline", ""))))
    return out


def run_cli(*args: str) -> str:
    """Run ``headwater ARGS`` in this process; fail with its output if it exits non-zero."""
    result = CliRunner().invoke(headwater_cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, f"headwater {' '.join(args)} exited {result.exit_code}: {result.output}"
    return result.output


# ZooKeeper's request header: xid then op type (jute's RequestHeader); 14 is multi (a transaction).
ZK_OP_MULTI = 14


class ZkGate:
    """A TCP relay between one broker and ZooKeeper that can cut that broker off at a chosen write.

    ``arm(match, nth, hold)`` watches the broker's multis (controller writes are fenced multis:
    ``check(/controller_epoch)`` and the writes of one decision). At the ``nth`` one whose bytes
    contain ``match``, ``tripped`` is set and, until ``disarm()``:

    * ``hold="request"``: that multi is not forwarded, nor anything the broker sends after it, so
      ZooKeeper never sees the write;
    * ``hold="response"``: the multi reaches ZooKeeper, but nothing ZooKeeper sends back does, so the
      write is made and the broker never learns it (a controller then never sends the requests that
      follow the write).

    ``match`` is usually a path: ``ZkGate.path_bytes`` for an exact path (ZooKeeper strings are
    length-prefixed, so ``/brokers/topics/t`` does not match ``/brokers/topics/t/partitions/0/state``),
    or plain bytes for a prefix.
    """

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port = int(self._listener.getsockname()[1])
        self.tripped = threading.Event()
        self._lock = threading.Lock()
        self._match: bytes | None = None
        self._remaining = 0
        self._hold = "request"
        self._held = False  # requests stopped
        self._muted = False  # responses stopped
        self._closed = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, name=f"zk-gate-{self.port}", daemon=True).start()

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    @staticmethod
    def path_bytes(path: str) -> bytes:
        raw = path.encode()
        return struct.pack(">i", len(raw)) + raw

    def arm(self, match: bytes, nth: int = 1, hold: str = "request") -> threading.Event:
        assert hold in ("request", "response")
        with self._lock:
            self._match, self._remaining, self._hold = match, nth, hold
            self._held = self._muted = False
            self.tripped.clear()
        return self.tripped

    def disarm(self) -> None:
        """Forward again (what was held is dropped: its broker is expected to be dead by now)."""
        with self._lock:
            self._match, self._held, self._muted = None, False, False

    def reset(self) -> None:
        """Drop the broker's current connection (what was held is lost) and forward again: the broker
        reconnects within its session, as after a network blip: a lost connection, not an expired session."""
        with self._lock:
            self._match, self._held, self._muted = None, False, False
            sockets, self._sockets = self._sockets, []
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for s in sockets:
            with contextlib.suppress(OSError):
                s.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
                server = socket.create_connection(self.upstream, timeout=10)
                server.settimeout(None)
            except OSError:
                if self._closed:
                    return
                continue
            with self._lock:
                self._sockets += [client, server]
            threading.Thread(target=self._client_to_server, args=(client, server), daemon=True).start()
            threading.Thread(target=self._server_to_client, args=(server, client), daemon=True).start()

    def _pass(self, frame: bytes, first: bool) -> bool:
        """Whether to forward this request frame (length prefix included)."""
        with self._lock:
            if self._held:
                return False
            if first or self._match is None or len(frame) < 12:
                return True  # the connect request has no header
            op = struct.unpack_from(">i", frame, 8)[0]
            if op == ZK_OP_MULTI and self._match in frame:
                self._remaining -= 1
                if self._remaining <= 0:
                    self._match = None
                    self.tripped.set()
                    if self._hold == "request":
                        self._held = True
                        return False
                    self._muted = True  # before forwarding: the answer must not slip through
            return True

    def _client_to_server(self, client: socket.socket, server: socket.socket) -> None:
        buf = b""
        first = True
        try:
            while True:
                data = client.recv(65536)
                if not data:
                    break
                buf += data
                while len(buf) >= 4:
                    size = struct.unpack_from(">i", buf)[0]
                    if len(buf) < 4 + size:
                        break
                    frame, buf = buf[:4 + size], buf[4 + size:]
                    if self._pass(frame, first):
                        server.sendall(frame)
                    first = False
        except OSError:
            pass
        finally:
            for s in (client, server):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def _server_to_client(self, server: socket.socket, client: socket.socket) -> None:
        try:
            while True:
                data = server.recv(65536)
                if not data:
                    break
                with self._lock:
                    muted = self._muted
                if not muted:
                    client.sendall(data)
        except OSError:
            pass
        finally:
            for s in (client, server):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)


@dataclass
class LocalCluster:
    data_dir: Path
    size: int = 3
    props: Mapping[str, str] = field(default_factory=dict)
    zk: ZooKeeperProcess | None = None
    brokers: dict[int, BrokerProcess] = field(default_factory=dict)
    zk_gates: bool = False
    gates: dict[int, ZkGate] = field(default_factory=dict)
    # Extra properties of one broker from its id and main (PLAINTEXT) port: its other listeners' ports.
    broker_props: Callable[[int, int], Mapping[str, str]] | None = None
    _kazoo: KazooClient | None = None

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> LocalCluster:
        self.zk = ZooKeeperProcess(free_port(), self.data_dir).start()
        props = {**DEFAULT_PROPS, "zookeeper.connect": self.zk.connect, **self.props}
        for broker_id in range(1, self.size + 1):
            connect = props["zookeeper.connect"]
            if self.zk_gates:
                gate = self.gates[broker_id] = ZkGate((self.zk.host, self.zk.port))
                connect = gate.connect
            port = free_port()
            extra = self.broker_props(broker_id, port) if self.broker_props is not None else {}
            self.brokers[broker_id] = BrokerProcess(broker_id, port, self.data_dir,
                                                    {**props, "zookeeper.connect": connect, **extra})
        # All at once: each broker spends its first seconds importing and recovering, not waiting on the others.
        for b in self.brokers.values():
            b.start(wait=False)
        for b in self.brokers.values():
            b.wait_ready()
        self.wait_registered(set(self.brokers))
        return self

    def stop(self) -> None:
        """Every process by its PID: SIGCONT first (a test may have paused one), then SIGTERM/SIGKILL."""
        if self._kazoo is not None:
            with contextlib.suppress(Exception):
                self._kazoo.stop()
                self._kazoo.close()
            self._kazoo = None
        # SIGTERM to all first, then wait for each: one by one, every broker's controlled shutdown
        # would wait for the previous one's.
        for b in self.brokers.values():
            if b.alive and b.proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(b.proc.pid, signal.SIGCONT)
                    os.kill(b.proc.pid, signal.SIGTERM)
        for b in self.brokers.values():
            with contextlib.suppress(Exception):
                b.stop(timeout_s=10)
            if b.alive:
                b.kill9()
        for gate in self.gates.values():
            gate.close()
        if self.zk is not None:
            self.zk.stop()

    def restart(self, broker_id: int) -> BrokerProcess:
        b = self.brokers[broker_id]
        assert not b.alive, f"broker {broker_id} is still running"
        return b.start()

    def pid(self, broker_id: int) -> int:
        proc = self.brokers[broker_id].proc
        assert proc is not None
        return proc.pid

    def log_tails(self, lines: int = 60, notable: int = 40) -> list[tuple[str, str]]:
        """Each broker's last ``lines`` log lines, and its last ``notable`` warnings and errors from
        the whole log (a failure's cause is often long before the tail)."""
        out = []
        for b in self.brokers.values():
            name = f"broker {b.broker_id} (pid {b.proc.pid if b.proc else '-'})"
            try:
                text = b.log_path.read_text(errors="replace")
            except OSError:
                text = ""
            warned = [line for line in text.splitlines() if " WARNING " in line or " ERROR " in line]
            if warned:
                out.append((f"{name} warnings and errors (last {notable})", "\n".join(warned[-notable:])))
            out.append((f"{name} log", b.log_tail(lines)))
        return out

    # --- reading the cluster ----------------------------------------------------------------------

    def live(self) -> list[BrokerProcess]:
        return [b for b in self.brokers.values() if b.alive]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.live())

    def metadata(self, via: int | None = None) -> tuple[int, set[int]]:
        """(controller id, registered broker ids) from the Metadata answer of one live broker."""
        address = self.brokers[via].bootstrap if via is not None else self.bootstrap
        with AdminClient(address, timeout_s=5) as client:
            client.refresh()
            return client.controller_id, set(client.nodes)

    def wait_registered(self, broker_ids: set[int], timeout_s: float = 60.0) -> None:
        def ok() -> bool:
            controller, nodes = self.metadata()
            return controller >= 0 and broker_ids <= nodes

        wait_for(ok, timeout_s, f"brokers {sorted(broker_ids)} registered with a controller")

    def controller_id(self, timeout_s: float = 30.0) -> int:
        return int(wait_for(lambda: max(self.metadata()[0], 0), timeout_s, "a controller"))

    def wait_new_controller(self, old: int, timeout_s: float = 30.0) -> int:
        """Wait until Metadata names a controller other than ``old``; return it."""
        return int(wait_for(lambda: (lambda c: c if c not in (-1, old) else None)(self.metadata()[0]),
                            timeout_s, f"a controller other than broker {old}"))

    @property
    def kazoo(self) -> KazooClient:
        if self._kazoo is None:
            assert self.zk is not None
            client = KazooClient(hosts=self.zk.connect, timeout=10)
            client.start(timeout=10)
            self._kazoo = client
        return self._kazoo

    def zk_json(self, path: str) -> tuple[dict[str, Any], Any] | None:
        found = self.kazoo.exists(path)
        if found is None:
            return None
        data, stat = self.kazoo.get(path)
        return json.loads(data), stat

    def zk_controller(self) -> int | None:
        found = self.zk_json("/controller")
        return None if found is None else int(found[0]["brokerid"])

    def controller_epoch(self) -> int:
        data, _stat = self.kazoo.get("/controller_epoch")
        return int(data)

    def broker_epoch(self, broker_id: int) -> int | None:
        stat = self.kazoo.exists(f"/brokers/ids/{broker_id}")
        return None if stat is None else int(stat.czxid)

    def partition_states(self, topic: str) -> dict[int, dict[str, Any]]:
        base = f"/brokers/topics/{topic}/partitions"
        out = {}
        for p in self.kazoo.get_children(base):
            found = self.zk_json(f"{base}/{p}/state")
            if found is not None:
                out[int(p)] = found[0]
        return out

    def describe(self, topic: str | None = None) -> list[PartitionLine]:
        args = ["topics", "--bootstrap-server", self.bootstrap, "--describe"]
        if topic is not None:
            args += ["--topic", topic]
        return parse_describe(run_cli(*args))

    def log_bytes(self, broker: int, topic: str, partition: int = 0) -> int:
        """Bytes of a replica's segment files on a broker's disk (0 where it holds none)."""
        total = 0
        for f in (self.data_dir / f"broker-{broker}-logs" / f"{topic}-{partition}").glob("*.log"):
            with contextlib.suppress(FileNotFoundError):  # a segment deleted between listing and stat
                total += f.stat().st_size
        return total

    def leaders(self, topic: str) -> dict[int, int]:
        return {line.partition: line.leader for line in self.describe(topic)}

    def wait_full_isr(self, topics: Iterable[str], partitions: int, timeout_s: float = 60.0) -> list[PartitionLine]:
        wanted = set(topics)

        def full() -> list[PartitionLine] | None:
            lines = [line for line in self.describe() if line.topic in wanted]
            if len(lines) != partitions * len(wanted) or not all(line.full for line in lines):
                return None
            # ZooKeeper too: Metadata comes from one broker's cache, and a broker that was paused or
            # cut off answers from what it knew before (full ISRs, say) until the controller reaches it.
            states = {t: self.partition_states(t) for t in wanted}
            if all(sorted(states[line.topic].get(line.partition, {}).get("isr", ())) == sorted(line.replicas)
                   for line in lines):
                return lines
            return None

        try:
            return list(wait_for(full, timeout_s, f"full ISRs of {sorted(wanted)}"))
        except AssertionError:
            raise AssertionError(f"ISRs not full after {timeout_s:.0f} s: {self.describe()}") from None

    def create_topic(self, topic: str, partitions: int, replication_factor: int = 3, **configs: str) -> None:
        args = ["topics", "--bootstrap-server", self.bootstrap, "--create", "--topic", topic,
                "--partitions", str(partitions), "--replication-factor", str(replication_factor)]
        for k, v in configs.items():
            args += ["--config", f"{k.replace('_', '.')}={v}"]
        out = run_cli(*args)
        assert f"Created topic {topic}." in out, out


def start_cluster(data_dir: Path, size: int = 3, props: Mapping[str, str] | None = None, *,
                  zk_gates: bool = False,
                  broker_props: Callable[[int, int], Mapping[str, str]] | None = None) -> LocalCluster:
    """Start a cluster; if start-up fails part way, stop what did start before re-raising."""
    cluster = LocalCluster(data_dir, size, dict(props or {}), zk_gates=zk_gates, broker_props=broker_props)
    try:
        return cluster.start()
    except BaseException:
        cluster.stop()
        raise


def pause(pid: int) -> None:
    os.kill(pid, signal.SIGSTOP)


def resume(pid: int) -> None:
    os.kill(pid, signal.SIGCONT)


def _stat_fields(pid: int) -> list[str]:
    """stat(5) of a process from field 3 on (the command name, field 2, may hold spaces)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU seconds the processes have used so far (fields 14 and 15 of stat(5))."""
    total = 0
    for pid in pids:
        fields = _stat_fields(pid)
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def minor_faults(pids: Iterable[int]) -> int:
    """Minor page faults the processes have taken so far (field 10 of stat(5)): first touches of
    freshly mapped memory, such as a new buffer for a large request."""
    return sum(int(_stat_fields(pid)[7]) for pid in pids)
