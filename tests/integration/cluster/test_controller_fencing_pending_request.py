"""A request that reaches a controller while it is paused past its session is answered NOT_CONTROLLER.

The test SIGSTOPs the active controller, writes a CreateTopics request onto a connection to it (the
paused broker reads it only once it runs again), waits until another broker is the controller,
then SIGCONTs it. The deposed controller must answer the request NOT_CONTROLLER (the client then
finds the new controller) and must create nothing; the connection must keep working.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from cluster_support import LocalCluster, pause, resume, wait_for
from hw_support import RawConnection
from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

NOT_CONTROLLER = 41


def test_request_queued_at_paused_controller_gets_not_controller(cluster_factory: Callable[..., LocalCluster]) -> None:
    cluster = cluster_factory()
    old = cluster.controller_id()
    others = [b for b in cluster.brokers if b != old]
    conn = RawConnection(cluster.brokers[old].bootstrap, timeout_s=30)
    topic = "zombie-" + uuid.uuid4().hex[:8]
    pause(cluster.pid(old))
    try:
        T = CreateTopicsRequest.CreatableTopic
        cid = conn.next_correlation_id()
        conn.send_bytes(conn.encode(CreateTopicsRequest(
            version=5, timeout_ms=10_000, validate_only=False,
            topics=[T(name=topic, num_partitions=1, replication_factor=3, assignments=[], configs=[])]), cid))
        wait_for(lambda: cluster.metadata(via=others[0])[0] in others, 30, "a new controller in Metadata")
    finally:
        resume(cluster.pid(old))
    try:
        frame = conn.recv_frame()  # times out (30 s) if the deposed controller never answers
        resp = CreateTopicsResponse.decode(frame, version=5, header=True)
        assert resp.header.correlation_id == cid
        assert [t.error_code for t in resp.topics] == [NOT_CONTROLLER], resp
        # The connection is still usable, and the resumed broker learns who the controller is now
        # (from the new controller's UpdateMetadata once it has registered again).
        wait_for(lambda: conn.request(MetadataRequest(version=1, topics=None), MetadataResponse, 1).controller_id in others,
                 30, "the resumed broker names the new controller")
    finally:
        conn.close()
    assert cluster.kazoo.exists(f"/brokers/topics/{topic}") is None
    assert cluster.kazoo.exists(f"/config/topics/{topic}") is None
