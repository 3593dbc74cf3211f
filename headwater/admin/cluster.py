"""``headwater cluster``: a local ZooKeeper and N brokers on 127.0.0.1, managed by PID.

``up`` writes ``DIR/cluster.json`` (ports, racks, PIDs) and ``DIR/<name>.pid`` for every process it
starts, waits until every broker is registered (the cluster's Metadata lists it), prints the
bootstrap address and returns; the processes keep running. ``status``, ``add-broker`` and ``down``
read the same file.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import click

from headwater.admin.client import AdminClient, AdminError
from headwater.admin.local import BrokerProcess, ZooKeeperProcess, zookeeper_ok
from headwater.admin.options import key_values

STATE_FILE = "cluster.json"
REGISTER_TIMEOUT_S = 60.0


@dataclass
class BrokerEntry:
    broker_id: int
    port: int
    rack: str | None = None


@dataclass
class ClusterState:
    zookeeper_port: int
    brokers: list[BrokerEntry] = field(default_factory=list)
    props: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, data_dir: Path) -> ClusterState:
        path = data_dir / STATE_FILE
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            raise click.ClickException(f"no cluster in {data_dir} (no {STATE_FILE}); start one with 'headwater cluster up'") from None
        except json.JSONDecodeError as exc:
            raise click.ClickException(f"{path} is not valid JSON: {exc}") from None
        return cls(doc["zookeeper_port"], [BrokerEntry(**b) for b in doc["brokers"]], doc.get("props", {}))

    def save(self, data_dir: Path) -> None:
        (data_dir / STATE_FILE).write_text(json.dumps(asdict(self), indent=1) + "\n")

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{b.port}" for b in self.brokers)


def broker_process(state: ClusterState, entry: BrokerEntry, data_dir: Path) -> BrokerProcess:
    props = {
        "zookeeper.connect": f"127.0.0.1:{state.zookeeper_port}",
        "num.partitions": "1",
        "default.replication.factor": str(min(3, len(state.brokers))),
        "auto.create.topics.enable": "true",  # Kafka's default
        **state.props,
    }
    if entry.rack:
        props["broker.rack"] = entry.rack
    return BrokerProcess(entry.broker_id, entry.port, data_dir, props)


def _pid_alive(path: Path) -> int | None:
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    return pid


def wait_registered(bootstrap: str, broker_ids: set[int], timeout_s: float = REGISTER_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        try:
            with AdminClient(bootstrap, timeout_s=5) as client:
                client.refresh()
                if broker_ids <= set(client.nodes) and client.controller_id >= 0:
                    return
                last = f"registered: {sorted(client.nodes)}, controller {client.controller_id}"
        except AdminError as exc:
            last = str(exc)
        time.sleep(0.2)
    raise click.ClickException(f"brokers {sorted(broker_ids)} did not all register within {timeout_s:.0f} s ({last})")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cluster() -> None:
    """Run a local cluster: ZooKeeper and brokers on 127.0.0.1."""


@cluster.command()
@click.option("--brokers", "count", default=3, show_default=True, help="How many brokers.")
@click.option("--data-dir", required=True, type=click.Path(path_type=Path), help="Where the cluster keeps everything.")
@click.option("--base-port", default=9092, show_default=True, help="Broker i listens on base-port + i - 1.")
@click.option("--zookeeper-port", default=None, type=int, help="ZooKeeper's port (default: base-port - 1).")
@click.option("--racks", default=None, help="Comma-separated racks, assigned to brokers in turn (r1,r2,...).")
@click.option("--config", "configs", multiple=True, help="Extra broker property key=value (repeatable).")
def up(count: int, data_dir: Path, base_port: int, zookeeper_port: int | None, racks: str | None, configs: tuple[str, ...]) -> None:
    """Start ZooKeeper and the brokers, wait until all are registered, print the bootstrap address."""
    props = key_values(configs, "--config")
    rack_list = [r.strip() for r in racks.split(",")] if racks else []
    state = start_cluster(data_dir, count, base_port, zookeeper_port or base_port - 1, rack_list, props, echo=click.echo)
    click.echo(f"bootstrap: {state.bootstrap}")


def start_cluster(data_dir: Path, count: int, base_port: int, zookeeper_port: int, racks: list[str],
                  props: dict[str, str], echo: Callable[[str], object] = lambda _m: None) -> ClusterState:
    """Start ZooKeeper and ``count`` brokers in ``data_dir``; return once every broker is registered."""
    data_dir.mkdir(parents=True, exist_ok=True)
    if (data_dir / STATE_FILE).exists() and any(_pid_alive(p) for p in data_dir.glob("*.pid")):
        raise click.ClickException(f"a cluster is already running in {data_dir}; 'headwater cluster down' first")
    state = ClusterState(zookeeper_port, props=props)
    state.brokers = [BrokerEntry(i, base_port + i - 1, racks[(i - 1) % len(racks)] if racks else None)
                     for i in range(1, count + 1)]
    state.save(data_dir)
    zk = ZooKeeperProcess(state.zookeeper_port, data_dir)
    try:
        zk.start()
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    echo(f"ZooKeeper on 127.0.0.1:{state.zookeeper_port} (pid {zk.proc.pid if zk.proc else '?'})")
    # Every broker starts at once (each spends its first seconds importing and recovering), then each
    # is waited for in turn.
    procs = [(entry, broker_process(state, entry, data_dir).start(wait=False)) for entry in state.brokers]
    for entry, proc in procs:
        try:
            proc.wait_ready()
        except RuntimeError as exc:
            stop_cluster(data_dir)
            raise click.ClickException(f"broker {entry.broker_id} did not start: {exc}") from None
        echo(f"broker {entry.broker_id} on 127.0.0.1:{entry.port}{f' rack {entry.rack}' if entry.rack else ''} "
             f"(pid {proc.proc.pid if proc.proc else '?'})")
    wait_registered(state.bootstrap, {b.broker_id for b in state.brokers})
    return state


@cluster.command("add-broker")
@click.option("--data-dir", required=True, type=click.Path(path_type=Path))
@click.option("--rack", default=None)
def add_broker(data_dir: Path, rack: str | None) -> None:
    """Start one more broker with the next id and port."""
    try:
        entry, pid = start_new_broker(data_dir, rack)
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"broker {entry.broker_id} on 127.0.0.1:{entry.port} (pid {pid})")


def start_new_broker(data_dir: Path, rack: str | None = None) -> tuple[BrokerEntry, int | None]:
    """Add a broker with the next id and port to the cluster in ``data_dir``, start it and wait until
    it is registered; its entry and pid. RuntimeError if it does not start."""
    state = ClusterState.load(data_dir)
    last = max(state.brokers, key=lambda b: b.broker_id)
    entry = BrokerEntry(last.broker_id + 1, max(b.port for b in state.brokers) + 1, rack)
    state.brokers.append(entry)
    state.save(data_dir)
    proc = broker_process(state, entry, data_dir)
    proc.start()
    wait_registered(state.bootstrap, {entry.broker_id})
    return entry, proc.proc.pid if proc.proc else None


@cluster.command("start-broker")
@click.option("--data-dir", required=True, type=click.Path(path_type=Path))
@click.option("--broker-id", required=True, type=int)
def start_broker(data_dir: Path, broker_id: int) -> None:
    """Start a broker of this cluster again (after it was stopped or killed)."""
    state = ClusterState.load(data_dir)
    entry = next((b for b in state.brokers if b.broker_id == broker_id), None)
    if entry is None:
        raise click.ClickException(f"broker {broker_id} is not part of the cluster in {data_dir}")
    proc = broker_process(state, entry, data_dir)
    if _pid_alive(proc.pid_path):
        raise click.ClickException(f"broker {broker_id} is already running")
    try:
        proc.start()
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    wait_registered(state.bootstrap, {broker_id})
    click.echo(f"broker {broker_id} on 127.0.0.1:{entry.port} (pid {proc.proc.pid if proc.proc else '?'})")


@cluster.command()
@click.option("--data-dir", required=True, type=click.Path(path_type=Path))
def status(data_dir: Path) -> None:
    """Which processes run, which brokers are registered, who is the controller."""
    state = ClusterState.load(data_dir)
    zk_pid = _pid_alive(data_dir / "zookeeper.pid")
    zk_ok = zookeeper_ok("127.0.0.1", state.zookeeper_port)
    click.echo(f"zookeeper 127.0.0.1:{state.zookeeper_port}: {'up' if zk_ok else 'DOWN'} (pid {zk_pid or '-'})")
    registered: set[int] = set()
    controller = -1
    with contextlib.suppress(AdminError), AdminClient(state.bootstrap, timeout_s=5) as client:
        client.refresh()
        registered, controller = set(client.nodes), client.controller_id
    for b in state.brokers:
        pid = _pid_alive(data_dir / f"broker-{b.broker_id}.pid")
        flags = []
        if b.broker_id in registered:
            flags.append("registered")
        if b.broker_id == controller:
            flags.append("controller")
        click.echo(f"broker {b.broker_id} 127.0.0.1:{b.port}: {'running' if pid else 'STOPPED'} (pid {pid or '-'})"
                   f"{' ' + ', '.join(flags) if flags else ''}")
    click.echo(f"bootstrap: {state.bootstrap}")


@cluster.command()
@click.option("--data-dir", required=True, type=click.Path(path_type=Path))
def down(data_dir: Path) -> None:
    """Stop every broker (controlled shutdown) and ZooKeeper, by PID."""
    stop_cluster(data_dir, echo=click.echo)


def stop_cluster(data_dir: Path, echo: Callable[[str], object] = lambda _m: None) -> None:
    state = ClusterState.load(data_dir)
    # Every broker is told at once (as kafka-server-stop.sh does); each still shuts down in a
    # controlled way. One after the other, each waited for the previous one's shutdown.
    pids = {b.broker_id: _pid_alive(data_dir / f"broker-{b.broker_id}.pid") for b in state.brokers}
    for pid in pids.values():
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    for b in state.brokers:
        path = data_dir / f"broker-{b.broker_id}.pid"
        pid = pids[b.broker_id]
        if pid is None:
            continue
        _stop_pid(pid, timeout_s=60)
        with contextlib.suppress(OSError):
            path.unlink()
        echo(f"broker {b.broker_id} stopped")
    zk_pid = _pid_alive(data_dir / "zookeeper.pid")
    if zk_pid is not None:
        _stop_pid(zk_pid, timeout_s=15)
        echo("zookeeper stopped")
    with contextlib.suppress(OSError):
        (data_dir / "zookeeper.pid").unlink()


def _stop_pid(pid: int, timeout_s: float) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    print(f"process {pid} did not stop in {timeout_s:.0f} s; killed", file=sys.stderr)
