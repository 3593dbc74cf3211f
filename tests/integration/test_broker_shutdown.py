"""A broker that is stopped cleanly, or whose clients vanish mid-request, logs no errors."""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable

from hw_support import RawConnection, create_topic
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from headwater.admin.local import BrokerProcess


def _error_lines(broker: BrokerProcess) -> list[str]:
    return [line for line in broker.log_path.read_text().splitlines() if "ERROR" in line or "Traceback" in line]


def test_clean_stop_logs_no_errors(broker_factory: Callable[..., BrokerProcess],
                                   topic_name: Callable[..., str]) -> None:
    # Retention checked on every housekeeping tick, as an operator may configure it.
    b = broker_factory({"log.retention.check.interval.ms": "1"})
    create_topic(b.bootstrap, topic_name(), partitions=3)
    assert b.stop() == 0
    assert _error_lines(b) == []


def test_client_resetting_with_pipelined_requests_logs_no_errors(fresh_broker: BrokerProcess) -> None:
    req = MetadataRequest(version=12, topics=None)
    req.with_header(correlation_id=1, client_id="impatient")
    frame = bytes(req.encode(header=True, framed=True))
    for _ in range(5):
        s = socket.create_connection(("127.0.0.1", fresh_broker.port))
        s.sendall(frame * 20)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST on close
        s.close()
    with RawConnection(fresh_broker.bootstrap) as conn:  # the broker is still fine
        assert conn.request(MetadataRequest(version=12, topics=None), MetadataResponse, 12).brokers
    assert fresh_broker.stop() == 0
    assert _error_lines(fresh_broker) == []
