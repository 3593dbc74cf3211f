"""A restarted broker registers with a larger broker epoch (the czxid of /brokers/ids/<id>), and
requests that carry its previous epoch are refused by the controller (STALE_BROKER_EPOCH) and
change nothing."""

from __future__ import annotations

from collections.abc import Callable

from cluster_support import LocalCluster, wait_for
from hw_support import RawConnection

from headwater.protocol.interbroker import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)

STALE_BROKER_EPOCH = 77
TOPIC = "epochs"
PARTITIONS = 3


def _stale_requests_refused(cluster: LocalCluster, broker_id: int, stale_epoch: int) -> None:
    controller = cluster.controller_id()
    states = cluster.partition_states(TOPIC)
    before = cluster.describe(TOPIC)
    with RawConnection(cluster.brokers[controller].bootstrap) as conn:
        shutdown = conn.request(ControlledShutdownRequest(version=3, broker_id=broker_id, broker_epoch=stale_epoch),
                                ControlledShutdownResponse, 3)
        assert shutdown.error_code == STALE_BROKER_EPOCH
        T = AlterPartitionRequest.TopicData
        P = T.PartitionData
        shrink = AlterPartitionRequest(version=1, broker_id=broker_id, broker_epoch=stale_epoch, topics=[
            T(topic_name=TOPIC, partitions=[P(partition_index=p, leader_epoch=states[p]["leader_epoch"],
                                              new_isr=[broker_id], leader_recovery_state=0,
                                              partition_epoch=0) for p in states])])
        alter = conn.request(shrink, AlterPartitionResponse, 1)
        assert alter.error_code == STALE_BROKER_EPOCH
    assert cluster.describe(TOPIC) == before
    assert cluster.partition_states(TOPIC) == states


def test_restart_after_session_expiry_gets_new_epoch_and_old_one_is_fenced(
        cluster_factory: Callable[..., LocalCluster]) -> None:
    cluster = cluster_factory()
    cluster.create_topic(TOPIC, PARTITIONS, 3)
    cluster.wait_full_isr([TOPIC], PARTITIONS, timeout_s=30)
    controller = cluster.controller_id()
    victim = next(b for b in cluster.brokers if b != controller)
    old_epoch = cluster.broker_epoch(victim)
    assert old_epoch is not None

    cluster.brokers[victim].kill9()
    wait_for(lambda: cluster.broker_epoch(victim) is None, 30, f"broker {victim}'s session to expire")
    wait_for(lambda: all(victim not in line.isr for line in cluster.describe(TOPIC)), 30,
             f"broker {victim} to leave every ISR")
    cluster.restart(victim)
    new_epoch = wait_for(lambda: cluster.broker_epoch(victim), 30, f"broker {victim} to register")
    assert new_epoch > old_epoch
    cluster.wait_full_isr([TOPIC], PARTITIONS, timeout_s=60)
    _stale_requests_refused(cluster, victim, old_epoch)
    assert cluster.brokers[victim].alive
