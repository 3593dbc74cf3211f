"""The broker's ZooKeeper shell against a real ZooKeeper: registration, election, fencing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from headwater.admin.local import ZooKeeperProcess, free_port
from headwater.metadata import zk as znodes
from headwater.server.zk import ControllerMovedError, ZooKeeper

PATHS = znodes.PATHS


@pytest.fixture(scope="module")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    server = ZooKeeperProcess(free_port(), Path(tmp_path_factory.mktemp("zk"))).start()
    try:
        yield server
    finally:
        server.stop()


def test_registration_election_and_fencing(zk_server: ZooKeeperProcess) -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        a = ZooKeeper(zk_server.connect, 4000, loop)
        b = ZooKeeper(zk_server.connect, 4000, loop)
        await a.start()
        await b.start()
        try:
            await a.create_top_level_paths()
            assert set(await a.children("/brokers")) >= {"ids", "topics", "seqid"}

            epoch_a = await a.register_broker(1, b'{"version":5}')
            assert epoch_a > 0
            # The same session may register again (a retry) and keeps its epoch...
            assert await a.register_broker(1, b'{"version":5}') == epoch_a
            # ...another session may not take the id.
            with pytest.raises(RuntimeError, match="already registered"):
                await b.register_broker(1, b'{"version":5}')

            assert await a.elect_controller(1, 1000) == (1, 1)
            assert await b.elect_controller(2, 1000) is None
            holder = await b.get(PATHS.CONTROLLER)
            assert holder is not None and znodes.decode_controller(holder[0]).broker_id == 1

            await a.fenced(1, [("create", "/fenced-a", b"x", -1)])
            assert (await b.get("/fenced-a")) is not None

            # Controller 1's session ends: its ephemeral nodes go, broker 2 wins epoch 2.
            await a.stop()
            assert await b.elect_controller(2, 2000) == (2, 2)
            epoch_b = await b.register_broker(1, b'{"version":5}')
            assert epoch_b > epoch_a  # a restarted broker gets a new, larger epoch (czxid)

            # A deposed controller's fenced write fails and changes nothing.
            stale = ZooKeeper(zk_server.connect, 4000, loop)
            await stale.start()
            try:
                with pytest.raises(ControllerMovedError):
                    await stale.fenced(1, [("create", "/fenced-stale", b"x", -1)])
                assert (await b.get("/fenced-stale")) is None
            finally:
                await stale.stop()
        finally:
            if a.client.connected:
                await a.stop()
            await b.stop()

    asyncio.run(scenario())


def test_watches_deliver_on_the_loop(zk_server: ZooKeeperProcess) -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        zk = ZooKeeper(zk_server.connect, 4000, loop)
        await zk.start()
        try:
            await zk.ensure("/watched")
            seen: list[list[str]] = []
            changed = asyncio.Event()

            def on_children(children: list[str]) -> None:
                seen.append(sorted(children))
                changed.set()

            zk.watch_children("/watched", on_children)
            await asyncio.wait_for(changed.wait(), 10)
            changed.clear()
            await zk.create("/watched/a", b"1")
            await asyncio.wait_for(changed.wait(), 10)
            assert seen[0] == [] and seen[-1] == ["a"]
        finally:
            await zk.stop()

    asyncio.run(scenario())
