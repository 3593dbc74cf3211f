"""A broker killed -9 and started again within its ZooKeeper session timeout, while its old
registration (held by the dead session) is still in /brokers/ids, must come up: it registers once
the old session is gone, with a larger broker epoch, and rejoins every ISR."""

from __future__ import annotations

import time
from collections.abc import Callable

from cluster_support import LocalCluster, wait_for

TOPIC = "quick"
PARTITIONS = 3


def test_quick_restart_registers_with_a_larger_epoch(cluster_factory: Callable[..., LocalCluster]) -> None:
    cluster = cluster_factory()
    cluster.create_topic(TOPIC, PARTITIONS, 3)
    cluster.wait_full_isr([TOPIC], PARTITIONS, timeout_s=30)
    victim = next(b for b in cluster.brokers if b != cluster.controller_id())
    old_epoch = cluster.broker_epoch(victim)
    assert old_epoch is not None

    cluster.brokers[victim].kill9()
    # Checked right after the spawn, not once the broker listens: on a loaded machine its start-up
    # alone can outlast the 6 s session, and the scenario needs the dead session's registration.
    cluster.brokers[victim].start(wait=False)
    assert cluster.broker_epoch(victim) == old_epoch, "the old registration should still be there"
    cluster.brokers[victim].wait_ready()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert cluster.brokers[victim].alive, (
            f"broker {victim} exited after a quick restart:\n{cluster.brokers[victim].log_tail(15)}")
        epoch = cluster.broker_epoch(victim)
        if epoch is not None and epoch != old_epoch:
            break
        time.sleep(0.2)
    new_epoch = cluster.broker_epoch(victim)
    assert new_epoch is not None and new_epoch > old_epoch
    cluster.wait_full_isr([TOPIC], PARTITIONS, timeout_s=60)
    assert wait_for(lambda: victim in cluster.metadata()[1], 10, f"broker {victim} in Metadata")
