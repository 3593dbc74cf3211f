"""A local ZooKeeper-mode cluster for the cluster integration tests (and the cluster benchmarks).

``LocalCluster`` owns one ZooKeeper and N ``python -m headwater broker`` processes, each started
and stopped by its PID. It reads the cluster the way an operator would: Metadata from a live
broker, ``headwater topics --describe``, and ZooKeeper itself through kazoo.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
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


@dataclass
class LocalCluster:
    data_dir: Path
    size: int = 3
    props: Mapping[str, str] = field(default_factory=dict)
    zk: ZooKeeperProcess | None = None
    brokers: dict[int, BrokerProcess] = field(default_factory=dict)
    _kazoo: KazooClient | None = None

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> LocalCluster:
        self.zk = ZooKeeperProcess(free_port(), self.data_dir).start()
        props = {**DEFAULT_PROPS, "zookeeper.connect": self.zk.connect, **self.props}
        for broker_id in range(1, self.size + 1):
            self.brokers[broker_id] = BrokerProcess(broker_id, free_port(), self.data_dir, props)
        for b in self.brokers.values():
            b.start()
        self.wait_registered(set(self.brokers))
        return self

    def stop(self) -> None:
        """Every process by its PID: SIGCONT first (a test may have paused one), then SIGTERM/SIGKILL."""
        if self._kazoo is not None:
            with contextlib.suppress(Exception):
                self._kazoo.stop()
                self._kazoo.close()
            self._kazoo = None
        for b in self.brokers.values():
            if b.alive and b.proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(b.proc.pid, signal.SIGCONT)
            with contextlib.suppress(Exception):
                b.stop(timeout_s=10)
            if b.alive:
                b.kill9()
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

    def log_tails(self, lines: int = 60) -> list[tuple[str, str]]:
        return [(f"broker {b.broker_id} (pid {b.proc.pid if b.proc else '-'}) log", b.log_tail(lines))
                for b in self.brokers.values()]

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

    def leaders(self, topic: str) -> dict[int, int]:
        return {line.partition: line.leader for line in self.describe(topic)}

    def wait_full_isr(self, topics: Iterable[str], partitions: int, timeout_s: float = 60.0) -> list[PartitionLine]:
        wanted = set(topics)

        def full() -> list[PartitionLine] | None:
            lines = [line for line in self.describe() if line.topic in wanted]
            if len(lines) == partitions * len(wanted) and all(line.full for line in lines):
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


def start_cluster(data_dir: Path, size: int = 3, props: Mapping[str, str] | None = None) -> LocalCluster:
    """Start a cluster; if start-up fails part way, stop what did start before re-raising."""
    cluster = LocalCluster(data_dir, size, dict(props or {}))
    try:
        return cluster.start()
    except BaseException:
        cluster.stop()
        raise


def pause(pid: int) -> None:
    os.kill(pid, signal.SIGSTOP)


def resume(pid: int) -> None:
    os.kill(pid, signal.SIGCONT)
