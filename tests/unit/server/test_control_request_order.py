"""The controller's requests take effect one at a time, in the order they arrived.

A broker handles the requests of one connection as concurrent tasks. LeaderAndIsr waits (on
ZooKeeper for topic configs, and between slices of a large request); an UpdateMetadata sent after it
took effect first, so the broker named itself leader in Metadata while still answering produce
requests NOT_LEADER_OR_FOLLOWER, and an idempotent producer pipelining two batches got the first
refused and the second written: librdkafka then acknowledges the first without an offset.
"""

from __future__ import annotations

import asyncio
from typing import Any

from headwater.server.cluster import ClusterMember


def test_update_metadata_and_stop_replica_wait_for_the_leader_and_isr_before_them() -> None:
    async def scenario() -> list[str]:
        cluster = ClusterMember(broker=None, connect="", session_timeout_ms=6000)  # type: ignore[arg-type]
        order: list[str] = []
        zookeeper_answered = asyncio.Event()

        async def leader_and_isr(_req: Any) -> str:
            order.append("LeaderAndIsr begins")
            await zookeeper_answered.wait()  # the topic configs' read
            order.append("LeaderAndIsr applied")
            return "lai"

        def effect(name: str) -> Any:
            def apply(_req: Any) -> str:
                order.append(f"{name} applied")
                return name
            return apply

        cluster._leader_and_isr = leader_and_isr  # type: ignore[method-assign]
        cluster._update_metadata = effect("UpdateMetadata")  # type: ignore[method-assign]
        cluster._stop_replica = effect("StopReplica")  # type: ignore[method-assign]
        loop = asyncio.get_running_loop()
        # Created in arrival order, as the connection does for pipelined requests.
        tasks = [loop.create_task(cluster.leader_and_isr(None)), loop.create_task(cluster.update_metadata(None)),
                 loop.create_task(cluster.stop_replica(None))]
        await asyncio.sleep(0.05)
        assert order == ["LeaderAndIsr begins"], order
        zookeeper_answered.set()
        assert await asyncio.gather(*tasks) == ["lai", "UpdateMetadata", "StopReplica"]
        return order

    assert asyncio.run(scenario()) == ["LeaderAndIsr begins", "LeaderAndIsr applied", "UpdateMetadata applied",
                                       "StopReplica applied"]
