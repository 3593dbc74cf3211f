"""A controller request carrying a broker epoch *newer* than the one the broker knows is accepted.

After a restart the controller can see the new ``/brokers/ids/<id>`` znode (and its czxid, the new
broker epoch) and send LeaderAndIsr before the broker itself has read its czxid back. Kafka accepts
such a request (``isBrokerEpochStale`` refuses only an epoch *smaller* than the broker's); refusing
it loses the LeaderAndIsr, and the restarted broker never follows or rejoins the ISR.
"""

from __future__ import annotations

from cluster_support import LocalCluster
from hw_support import RawConnection

from headwater.protocol.interbroker import LeaderAndIsrResponse, leader_and_isr_request

STALE_BROKER_EPOCH = 77


def test_leader_and_isr_with_newer_broker_epoch_is_accepted(shared_cluster: LocalCluster) -> None:
    cluster = shared_cluster
    controller = cluster.controller_id()
    target = next(b for b in cluster.brokers if b != controller)
    epoch = cluster.broker_epoch(target)
    assert epoch is not None

    def send(broker_epoch: int) -> int:
        req = leader_and_isr_request(5, controller_id=controller, controller_epoch=cluster.controller_epoch(),
                                     broker_epoch=broker_epoch, states=[], topic_ids={}, live_leaders=[])
        with RawConnection(cluster.brokers[target].bootstrap) as conn:
            return int(conn.request(req, LeaderAndIsrResponse, 5).error_code)

    assert send(epoch - 1) == STALE_BROKER_EPOCH  # an older epoch: a request meant for a previous life
    assert send(epoch) == 0
    assert send(epoch + 1000) == 0  # newer: the broker has not read its own czxid back yet
