"""Start and stop local broker processes, by PID.

Used by the demo, by ``headwater cluster`` and by the tests. A broker is a separate
``python -m headwater broker`` process, so a test can kill -9 it exactly as an operator would.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")  # Debian's zookeeper package
ZOOKEEPER_CONF_DIR = Path("/etc/zookeeper/conf")  # its log4j settings


LISTEN_PORTS_FROM = 10_000
EPHEMERAL_PORT_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _listen_port_range() -> range:
    """Ports for servers started here: below the kernel's ephemeral range. A port chosen now for a
    server started later (a broker that joins, or restarts on its old port) is not held meanwhile;
    inside the ephemeral range any client connection may take it as its local port, and the
    server then fails to bind (EADDRINUSE)."""
    try:
        first_ephemeral = int(EPHEMERAL_PORT_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        first_ephemeral = 32_768  # Linux's default range starts here
    return range(LISTEN_PORTS_FROM, max(first_ephemeral, LISTEN_PORTS_FROM + 1_000))


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(attempts: int = 1_000) -> int:
    """A port on 127.0.0.1 that is free now, outside the ephemeral range (``_listen_port_range``)."""
    ports = _listen_port_range()
    for _ in range(attempts):
        port = random.choice(ports)
        if _bindable(port):
            return port
    raise RuntimeError(f"no free port in {ports.start}-{ports.stop - 1}")


def free_port_range(count: int, attempts: int = 100) -> int:
    """A port that is free now with the ``count - 1`` after it (``headwater cluster up --base-port``
    gives broker i the port base + i - 1): one free port alone says nothing of its neighbours."""
    for _ in range(attempts):
        base = free_port()
        if base + count > _listen_port_range().stop:
            continue
        held: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                held.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError(f"no {count} consecutive free ports found")


def spawn(argv: list[str], log_path: Path, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start a server process with its output appended to ``log_path``, in its own session (a Ctrl-C
    in the terminal goes to the demo or the test, which stop their servers themselves)."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env)


def same_code_command(*args: str) -> tuple[list[str], dict[str, str]]:
    """``python -m headwater ARGS`` running this process's headwater, and its environment.

    ``python -m`` puts the working directory first on ``sys.path``, so a checkout there (the
    repository root, where benchmarks run) would win over the one this process imported, e.g.
    one named by ``PYTHONPATH`` for an old-against-new comparison. ``-P`` leaves the working
    directory out, and this process's package root leads ``PYTHONPATH``.
    """
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return [sys.executable, "-P", "-m", "headwater", *args], env


def wait_for_port(host: str, port: int, timeout_s: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process {proc.pid} exited with code {proc.returncode} before listening on {host}:{port}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout_s:.0f} s")


@dataclass
class BrokerProcess:
    broker_id: int
    port: int
    data_dir: Path
    props: Mapping[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.data_dir / f"broker-{self.broker_id}.properties"

    @property
    def log_path(self) -> Path:
        return self.data_dir / f"broker-{self.broker_id}.log"

    @property
    def pid_path(self) -> Path:
        return self.data_dir / f"broker-{self.broker_id}.pid"

    def write_config(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        props = {
            "broker.id": str(self.broker_id),
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.data_dir / f"broker-{self.broker_id}-logs"),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            # A local cluster is stopped all at once: brokers whose controller stops first retry
            # it in vain, and Kafka's 5 s between attempts would make each stop take 10 s.
            "controlled.shutdown.retry.backoff.ms": "1000",
            **self.props,
        }
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def launcher(self) -> list[str]:
        """Words put before the command line (e.g. ``ip netns exec NS``); none here."""
        return []

    def start(self, wait: bool = True) -> BrokerProcess:
        if not self.config_path.exists():
            self.write_config()
        command, env = same_code_command("broker", "--config", str(self.config_path))
        self.proc = spawn([*self.launcher(), *command], self.log_path, env)
        self.pid_path.write_text(f"{self.proc.pid}\n")
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Until the broker accepts connections (it has recovered its logs); fails if it exits first."""
        try:
            wait_for_port(self.host, self.port, timeout_s, self.proc)
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"{exc}\n--- broker log ---\n{self.log_tail()}") from None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM, then SIGKILL if it has not exited in time. Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill9()
        with contextlib.suppress(OSError):
            self.pid_path.unlink()
        return self.proc.returncode


def zookeeper_ok(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """ZooKeeper's own health probe: the four-letter word ``ruok`` answered with ``imok``."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as s:
            s.sendall(b"ruok")
            return s.recv(4) == b"imok"
    except OSError:
        return False


@dataclass
class ZooKeeperProcess:
    """A standalone ZooKeeper server from Debian's package, run as a plain JVM we own by PID."""

    port: int
    data_dir: Path
    host: str = "127.0.0.1"
    heap_mib: int = 256
    tick_ms: int = 500  # session timeouts are bounded by 2..20 ticks: a short tick allows fast failure detection
    proc: subprocess.Popen[bytes] | None = None

    @property
    def connect(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid_path(self) -> Path:
        return self.data_dir / "zookeeper.pid"

    def write_config(self) -> Path:
        (self.data_dir / "zookeeper").mkdir(parents=True, exist_ok=True)
        cfg = self.data_dir / "zookeeper.cfg"
        cfg.write_text(
            f"tickTime={self.tick_ms}\n"
            f"dataDir={self.data_dir / 'zookeeper'}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={self.host}\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,stat,mntr,envi\n"
        )
        return cfg

    def launcher(self) -> list[str]:
        """Words put before the command line (e.g. ``ip netns exec NS``); none here."""
        return []

    def start(self, wait: bool = True) -> ZooKeeperProcess:
        if not ZOOKEEPER_JAR.exists():
            raise RuntimeError(f"{ZOOKEEPER_JAR} not found: install Debian's zookeeper package (make installs it)")
        cfg = self.write_config()
        self.proc = spawn([
            *self.launcher(), "java", f"-Xmx{self.heap_mib}m", f"-Dzookeeper.log.dir={self.data_dir}",
            "-cp", f"{ZOOKEEPER_CONF_DIR}:{ZOOKEEPER_JAR}",
            "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg),
        ], self.data_dir / "zookeeper.log")
        self.pid_path.write_text(f"{self.proc.pid}\n")
        if wait:
            deadline = time.monotonic() + READY_TIMEOUT_S
            while not zookeeper_ok(self.host, self.port):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"ZooKeeper did not start on {self.connect}; see {self.data_dir / 'zookeeper.log'}")
                time.sleep(0.05)
        return self

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        with contextlib.suppress(OSError):
            self.pid_path.unlink()
