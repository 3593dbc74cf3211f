"""The controller's bulk ZooKeeper access against a real server: multiRead reads and fenced multis.

A new controller reads every partition state before it serves; ``headwater.server.zk`` reads them
with ZooKeeper's multiRead in chunks. These check the wire format against Debian's ZooKeeper, a
missing node in the middle of a chunk, chunk boundaries, and the fallback for servers without it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.exceptions import NoNodeError

from headwater.admin.local import ZooKeeperProcess, free_port
from headwater.server.zk import READ_CHUNK, ControllerMovedError, ZooKeeper


@pytest.fixture(scope="module")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    server = ZooKeeperProcess(free_port(), Path(tmp_path_factory.mktemp("zk"))).start()
    try:
        yield server
    finally:
        server.stop()


def run(server: ZooKeeperProcess, body: object) -> None:
    async def main() -> None:
        zk = ZooKeeper(server.connect, 10_000, asyncio.get_running_loop())
        await zk.start()
        try:
            await body(zk)  # type: ignore[operator]
        finally:
            await zk.stop()

    asyncio.run(main())


def test_bulk_reads_return_data_stats_and_none_for_missing_nodes(zk_server: ZooKeeperProcess) -> None:
    n = READ_CHUNK * 2 + 7  # three chunks, the last one short

    async def body(zk: ZooKeeper) -> None:
        await zk.ensure("/controller_epoch")
        version = (await zk.get("/controller_epoch"))[1].version  # type: ignore[index]
        await zk.ensure("/bulk")
        paths = [f"/bulk/n{i:05d}" for i in range(n)]
        for i in range(0, n, 500):
            await zk.fenced(version, [("create", p, f"v{j}".encode(), -1) for j, p in enumerate(paths[i:i + 500], i)])
        await zk.set(paths[5], b"changed")
        wanted = [*paths[:3], "/bulk/missing", *paths[3:]]
        found = await zk.get_many(wanted)
        assert len(found) == len(wanted)
        assert found[3] is None
        values = [f[0] for f in found if f is not None]
        assert values[:5] == [b"v0", b"v1", b"v2", b"v3", b"v4"] and values[5] == b"changed"
        assert values[-1] == f"v{n - 1}".encode()
        stats = {p: f[1] for p, f in zip(wanted, found, strict=True) if f is not None}
        assert stats[paths[5]].version == 1 and stats[paths[6]].version == 0
        assert stats[paths[0]].czxid < stats[paths[-1]].czxid
        assert await zk.exists_many(["/bulk", "/nope", paths[-1]]) == [True, False, True]
        children = await zk.children_many(["/bulk", "/nope", paths[0]])
        assert sorted(children[0]) == paths_names(paths) and children[1] == [] and children[2] == []

    run(zk_server, body)


def paths_names(paths: list[str]) -> list[str]:
    return sorted(p.rsplit("/", 1)[1] for p in paths)


def test_bulk_reads_without_multiread_fall_back_to_single_requests(zk_server: ZooKeeperProcess) -> None:
    async def body(zk: ZooKeeper) -> None:
        await zk.ensure("/fallback/a")
        zk._multi_read = False  # as after a server answered UNIMPLEMENTED (ZooKeeper < 3.6)
        assert [f is not None for f in await zk.get_many(["/fallback/a", "/fallback/b"])] == [True, False]
        assert await zk.children_many(["/fallback", "/fallback/b"]) == [["a"], []]

    run(zk_server, body)


def test_a_fenced_multi_with_a_stale_epoch_version_writes_nothing(zk_server: ZooKeeperProcess) -> None:
    async def body(zk: ZooKeeper) -> None:
        await zk.ensure("/controller_epoch")
        version = (await zk.get("/controller_epoch"))[1].version  # type: ignore[index]
        await zk.ensure("/fenced")
        with pytest.raises(ControllerMovedError):
            await zk.fenced(version + 1, [("create", f"/fenced/n{i}", b"x", -1) for i in range(50)])
        assert await zk.children("/fenced") == []
        with pytest.raises(NoNodeError):
            await zk.fenced(version, [("create", "/fenced/ok", b"x", -1), ("set", "/fenced/absent", b"x", -1)])
        assert await zk.children("/fenced") == []  # the multi is atomic: the create rolled back too

    run(zk_server, body)
