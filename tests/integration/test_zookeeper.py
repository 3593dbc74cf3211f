"""The ZooKeeper server from Debian's package starts, serves kazoo, and stops by PID."""

from __future__ import annotations

from pathlib import Path

from kazoo.client import KazooClient

from headwater.admin.local import ZooKeeperProcess, free_port, zookeeper_ok


def _client(connect: str) -> KazooClient:
    # The first session of a freshly started JVM can take longer than one session timeout on a
    # loaded machine (seen at load 19 on 2 cores); keep retrying the handshake rather than give up.
    client = KazooClient(hosts=connect, timeout=10, connection_retry={"max_tries": -1, "delay": 0.2, "max_delay": 1})
    client.start(timeout=60)
    return client


def test_zookeeper_lifecycle(tmp_path: Path) -> None:
    zk = ZooKeeperProcess(free_port(), tmp_path).start()
    try:
        assert zk.proc is not None
        assert int(zk.pid_path.read_text()) == zk.proc.pid
        client = _client(zk.connect)
        try:
            client.create("/brokers/ids/1", b'{"version":5}', ephemeral=True, makepath=True)
            data, stat = client.get("/brokers/ids/1")
            assert data == b'{"version":5}'
            assert stat.ephemeralOwner == client.client_id[0]
        finally:
            client.stop()
            client.close()
        # The ephemeral node went with the session.
        other = _client(zk.connect)
        try:
            assert other.exists("/brokers/ids/1") is None
        finally:
            other.stop()
            other.close()
    finally:
        zk.stop()
    assert zk.proc is not None and zk.proc.poll() is not None
    assert not zk.pid_path.exists()
    assert not zookeeper_ok("127.0.0.1", zk.port)
