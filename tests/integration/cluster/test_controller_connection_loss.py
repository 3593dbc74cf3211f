"""A controller whose ZooKeeper connection drops in the middle of a write (its session survives).

The chaos suite found it (``loss`` nemesis, seed 18: 40 % packet loss on the controller's host): the
controller's write failed with ConnectionLoss, the controller resigned, kazoo reconnected within the
same session, and /controller, an ephemeral node of that live session, stayed. No other broker's
watch fired and the resigned broker's own election found the node taken: the cluster had no
controller for good (no ISR change, no topic create, no reassignment). The resigned broker must
release its own /controller so that an election follows.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_support import LocalCluster, ZkGate, start_cluster, wait_for

from headwater.admin.client import AdminClient
from headwater.admin.topics import create_topic


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = start_cluster(tmp_path, 3, zk_gates=True)
    try:
        yield c
    finally:
        c.stop()


def test_controller_losing_its_connection_mid_write_is_replaced(cluster: LocalCluster) -> None:
    controller = cluster.controller_id()
    epoch = cluster.controller_epoch()
    gate = cluster.gates[controller]
    # Hold the controller's write of the new topic's znode, then drop its connection: the pending
    # multi fails with ConnectionLoss; the broker reconnects through the gate in the same session.
    tripped = gate.arm(ZkGate.path_bytes("/brokers/topics/held"), hold="request")
    def create_held() -> None:
        # Its answer does not matter (NOT_CONTROLLER, or success after the client found the next
        # controller): only the write it causes.
        with contextlib.suppress(Exception), AdminClient(cluster.bootstrap, timeout_s=20) as client:
            create_topic(client, "held", 1, 3, None, {})

    attempt = threading.Thread(target=create_held, daemon=True)
    attempt.start()
    assert tripped.wait(30), "the controller never wrote the topic's znode"
    session_before = cluster.broker_epoch(controller)
    gate.reset()
    # A controller again (the same broker may win once more: what matters is that one is elected) ...
    wait_for(lambda: cluster.controller_epoch() > epoch and cluster.zk_controller() is not None, 30,
             "a new controller election after the lost connection")
    # ... and it works: a topic can be created, with a leader for its partition.
    attempt.join(60)
    cluster.create_topic("after-loss", 1, 3)
    wait_for(lambda: any(line.topic == "after-loss" and line.full for line in cluster.describe()), 30,
             "after-loss online with a full ISR")
    # It was a lost connection, not an expired session: the broker kept its registration.
    assert cluster.broker_epoch(controller) == session_before
