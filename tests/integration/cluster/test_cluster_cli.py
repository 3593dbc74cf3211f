"""``headwater cluster up/status/add-broker/start-broker/down``: processes managed by PID."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

from cluster_support import parse_describe, run_cli, wait_for

from headwater.admin.client import AdminClient
from headwater.admin.local import free_port_range


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:  # reap our own zombie children
            return False
    return True


def _pids(data_dir: Path) -> dict[str, int]:
    return {p.stem: int(p.read_text()) for p in data_dir.glob("*.pid")}


def _status(data_dir: Path) -> dict[str, str]:
    out = run_cli("cluster", "status", "--data-dir", str(data_dir))
    return {line.split(" 127.0.0.1")[0]: line for line in out.splitlines() if line.startswith(("broker", "zookeeper"))}


def test_cluster_cli_lifecycle(tmp_path: Path) -> None:
    data_dir = tmp_path / "cli-cluster"
    first = free_port_range(6)
    zk_port, base = first, first + 1
    seen: set[int] = set()
    try:
        out = run_cli("cluster", "up", "--brokers", "3", "--data-dir", str(data_dir), "--base-port", str(base),
                      "--zookeeper-port", str(zk_port), "--racks", "r1,r2",
                      "--config", "zookeeper.session.timeout.ms=6000", "--config", "replica.lag.time.max.ms=10000")
        bootstrap = f"127.0.0.1:{base},127.0.0.1:{base + 1},127.0.0.1:{base + 2}"
        assert f"bootstrap: {bootstrap}" in out, out
        state = json.loads((data_dir / "cluster.json").read_text())
        assert [b["rack"] for b in state["brokers"]] == ["r1", "r2", "r1"]
        pids = _pids(data_dir)
        seen.update(pids.values())
        assert set(pids) == {"zookeeper", "broker-1", "broker-2", "broker-3"}
        assert all(_alive(pid) for pid in pids.values())
        status = _status(data_dir)
        assert "up" in status["zookeeper"]
        assert sum("controller" in status[f"broker {i}"] for i in (1, 2, 3)) == 1, status
        assert all("running" in status[f"broker {i}"] and "registered" in status[f"broker {i}"] for i in (1, 2, 3))
        with AdminClient(bootstrap) as client:
            client.refresh()
            assert {n: client.nodes[n].rack for n in client.nodes} == {1: "r1", 2: "r2", 3: "r1"}

        out = run_cli("cluster", "add-broker", "--data-dir", str(data_dir), "--rack", "r2")
        assert f"broker 4 on 127.0.0.1:{base + 3}" in out, out
        seen.add(_pids(data_dir)["broker-4"])
        run_cli("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "cli", "--partitions", "4",
                "--replication-factor", "3")
        lines = wait_for(lambda: (lambda ls: ls if len(ls) == 4 and all(x.full for x in ls) else None)(
            parse_describe(run_cli("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", "cli"))),
            30, "full ISRs")
        assert {b for x in lines for b in x.replicas} == {1, 2, 3, 4}

        # A killed broker shows as STOPPED, and start-broker brings it back.
        victim = _pids(data_dir)["broker-2"]
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: not _alive(victim), 10, "broker 2 to die")
        assert "STOPPED" in _status(data_dir)["broker 2"]
        wait_for(lambda: "registered" not in _status(data_dir)["broker 2"], 30, "broker 2 to be deregistered")
        run_cli("cluster", "start-broker", "--data-dir", str(data_dir), "--broker-id", "2")
        restarted = _pids(data_dir)["broker-2"]
        seen.add(restarted)
        assert restarted != victim and _alive(restarted)
        assert "running" in _status(data_dir)["broker 2"] and "registered" in _status(data_dir)["broker 2"]

        out = run_cli("cluster", "down", "--data-dir", str(data_dir))
        for i in (1, 2, 3, 4):
            assert f"broker {i} stopped" in out, out
        assert "zookeeper stopped" in out
        assert not list(data_dir.glob("*.pid"))
        assert not any(_alive(pid) for pid in seen), [pid for pid in seen if _alive(pid)]
        assert "DOWN" in _status(data_dir)["zookeeper"]
    finally:
        seen.update(_pids(data_dir).values() if data_dir.exists() else [])
        for pid in seen:
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
