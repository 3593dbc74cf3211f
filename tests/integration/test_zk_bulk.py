"""The controller's bulk ZooKeeper access against a real server: multiRead reads and fenced multis.

A new controller reads every partition state before it serves; ``headwater.server.zk`` reads them
with ZooKeeper's multiRead in chunks. These check the wire format against Debian's ZooKeeper, a
missing node in the middle of a chunk, chunk boundaries, and the fallback for servers without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.exceptions import NodeExistsError, NoNodeError

from headwater.admin.local import ZooKeeperProcess, free_port
from headwater.controller import events as ev
from headwater.controller.controller import ControllerConfig
from headwater.controller.znodes import LeaderIsr, TopicPartition, decode_partition_state
from headwater.metadata import zk as znodes
from headwater.protocol.errors import ErrorCode
from headwater.server.controller_shell import ControllerShell
from headwater.server.zk import READ_CHUNK, ControllerMovedError, ZooKeeper

PATHS = znodes.PATHS


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
        version = await epoch_version(zk)
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


async def epoch_version(zk: ZooKeeper) -> int:
    """The version of /controller_epoch (created as a controller election would find it)."""
    with contextlib.suppress(NodeExistsError):
        await zk.create(PATHS.CONTROLLER_EPOCH, znodes.encode_controller_epoch(0))
    found = await zk.get(PATHS.CONTROLLER_EPOCH)
    assert found is not None
    return int(found[1].version)


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
        version = await epoch_version(zk)
        await zk.ensure("/fenced")
        with pytest.raises(ControllerMovedError):
            await zk.fenced(version + 1, [("create", f"/fenced/n{i}", b"x", -1) for i in range(50)])
        assert await zk.children("/fenced") == []
        with pytest.raises(NoNodeError):
            await zk.fenced(version, [("create", "/fenced/ok", b"x", -1), ("set", "/fenced/absent", b"x", -1)])
        assert await zk.children("/fenced") == []  # the multi is atomic: the create rolled back too

    run(zk_server, body)


def test_controller_shell_writes_in_multis_and_a_failover_reads_everything_back(zk_server: ZooKeeperProcess) -> None:
    """2,500 partition states: created in chunked multis (parents once), then a failover with a dead
    broker rewrites every ISR in pipelined multis; ZooKeeper and the cores agree throughout."""
    n = 2500

    async def body(zk: ZooKeeper) -> None:
        await zk.create_top_level_paths()
        nowhere = free_port()  # nothing listens: requests to brokers are retried until the shell stops
        for b in (1, 2, 3):
            reg = znodes.BrokerRegistration(b, (znodes.Endpoint("PLAINTEXT", "127.0.0.1", nowhere),), 0)
            await zk.register_broker(b, znodes.encode_broker(reg))
        won = await zk.elect_controller(1, 0)
        assert won is not None
        first = ControllerShell(1, zk, ControllerConfig(1, 3), on_resigned=lambda: None)
        await first.start(*won)
        resp = await first.request(ev.CreateTopicsRequested((ev.NewTopic("big", uuid.uuid4(), n, 3),)))
        assert [t.error for t in resp.topics] == [ErrorCode.NONE]
        created = dict(first.core.states)
        await first.stop()
        assert len(created) == n
        assert len(await zk.children(PATHS.partitions("big"))) == n
        assert await zk_states(zk, n) == created

        # Broker 3 goes away, then a new controller takes over: every ISR loses it.
        await zk.delete(PATHS.broker(3))
        await zk.delete(PATHS.CONTROLLER)
        won = await zk.elect_controller(2, 0)
        assert won is not None
        second = ControllerShell(2, zk, ControllerConfig(1, 3), on_resigned=lambda: None)
        await second.start(*won)
        listed = await second.request(ev.ListPartitionReassignmentsRequested())  # queued behind the election
        assert listed.error == ErrorCode.NONE and second.active
        after = dict(second.core.states)
        assert after == await zk_states(zk, n)
        for tp, state in after.items():
            assert 3 not in state.isr and state.partition_epoch == created[tp].partition_epoch + 1
            assert state.leader != 3 and state.leader in state.isr

        # Broker 4 registers; one request moves every partition's third replica to it. The topic
        # znode (only adding replicas) and 2,500 leader-epoch bumps go out as pipelined multis.
        reg = znodes.BrokerRegistration(4, (znodes.Endpoint("PLAINTEXT", "127.0.0.1", nowhere),), 0)
        await zk.register_broker(4, znodes.encode_broker(reg))
        while 4 not in second.core.live_brokers:
            await asyncio.sleep(0.05)
        plan = tuple(("big", tp.partition, (*after[tp].isr, 4)) for tp in sorted(after))
        moved = await second.request(ev.AlterPartitionReassignmentsRequested(plan))
        assert {r.error for r in moved.partitions} == {ErrorCode.NONE}
        reassigned = dict(second.core.states)
        assert reassigned == await zk_states(zk, n)
        assert all(reassigned[tp].leader_epoch == after[tp].leader_epoch + 1 for tp in after)
        found = await zk.get(PATHS.topic("big"))
        assert found is not None
        topic = znodes.decode_topic("big", found[0])
        assert topic.adding_replicas == dict.fromkeys(range(n), (4,))
        assert topic.removing_replicas == {p: (3,) for p in range(n)}
        await second.stop()

    run(zk_server, body)


async def zk_states(zk: ZooKeeper, n: int) -> dict[TopicPartition, LeaderIsr]:
    found = await zk.get_many([PATHS.partition_state("big", p) for p in range(n)])
    out = {}
    for p, f in enumerate(found):
        assert f is not None
        tp = TopicPartition("big", p)
        out[tp] = decode_partition_state(tp, f[0], f[1].version)
    return out


def test_the_healing_record_is_written_only_by_the_current_controller(zk_server: ZooKeeperProcess) -> None:
    """Every write of Kafka's ZK controller is a multi with check(/controller_epoch, its version)
    (KafkaZkClient's ``expectedControllerEpochZkVersion``): a controller that lost its election
    while it still ran writes nothing. /admin/self_healing is written the same way."""

    async def body(zk: ZooKeeper) -> None:
        await zk.create_top_level_paths()
        with contextlib.suppress(NoNodeError):
            await zk.delete(PATHS.SELF_HEALING)
        with contextlib.suppress(NoNodeError):
            await zk.delete(PATHS.CONTROLLER)
        won = await zk.elect_controller(1, 0)
        assert won is not None
        shell = ControllerShell(1, zk, ControllerConfig(1, 3), on_resigned=lambda: None)
        await shell.start(*won)
        try:
            await shell._save_healing(b"first")  # creates the znode
            await shell._save_healing(b"second")  # and sets it
            assert (await zk.get(PATHS.SELF_HEALING) or (b"",))[0] == b"second"
            # Another broker wins an election: /controller_epoch moves on.
            await zk.delete(PATHS.CONTROLLER)
            assert await zk.elect_controller(2, 0) is not None
            with pytest.raises(ControllerMovedError):
                await shell._save_healing(b"from the old controller")
            assert (await zk.get(PATHS.SELF_HEALING) or (b"",))[0] == b"second"
        finally:
            await shell.stop()

    run(zk_server, body)
