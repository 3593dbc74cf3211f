"""max.connections, max.connections.per.ip and max.connections.per.ip.overrides applied, as Kafka 3.9's
ConnectionQuotas applies them (core/src/main/scala/kafka/network/SocketServer.scala):

- per address: a connection past ``max.connections.per.ip`` (or the address's override) is closed at
  once (``Acceptor.accept``: TooManyConnectionsException, "Rejected connection from ...");
- broker-wide: past ``max.connections`` the acceptor stops accepting until a connection closes
  (``waitForConnectionSlot``), so a new client's requests go unanswered until then;
- the three are dynamic cluster-wide configs (``SocketServer.ReconfigurableConfigs``): changing them
  takes effect without a restart (``SocketServer.reconfigure``), and KafkaConfig refuses overrides it
  cannot parse (``KafkaConfig.maxConnectionsPerIpOverrides``).
"""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest
from hw_support import RawConnection
from kafka.protocol.admin import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from headwater.admin.local import BrokerProcess

BROKER, SET, DELETE = 4, 0, 1


def alter(conn: RawConnection, name: str, ops: list[tuple[str, int, str | None]]) -> tuple[int, str | None]:
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    resp = conn.request(IncrementalAlterConfigsRequest(version=1, validate_only=False, resources=[
        R(resource_type=BROKER, resource_name=name, configs=[
            R.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])]),
        IncrementalAlterConfigsResponse, 1)
    return resp.responses[0].error_code, resp.responses[0].error_message


def connect_from(bootstrap: str, source: str) -> RawConnection:
    conn = RawConnection.__new__(RawConnection)
    host, port = bootstrap.rsplit(":", 1)
    conn.sock = socket.create_connection((host, int(port)), timeout=5, source_address=(source, 0))
    conn._correlation = 0
    return conn


def answers(conn: RawConnection, timeout_s: float) -> bool:
    """Whether ApiVersions is answered within ``timeout_s``."""
    conn.sock.settimeout(timeout_s)
    try:
        conn.request(ApiVersionsRequest(version=0), ApiVersionsResponse, 0)
    except (TimeoutError, OSError, ConnectionError, AssertionError):
        return False
    return True


@pytest.fixture
def standalone(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory()


def test_per_ip_override_closes_the_connection_over_it(standalone: BrokerProcess) -> None:
    with RawConnection(standalone.bootstrap) as admin:
        assert alter(admin, "", [("max.connections.per.ip.overrides", SET, "127.0.0.2:1")]) == (0, None)
        first = connect_from(standalone.bootstrap, "127.0.0.2")
        assert answers(first, 5)
        second = connect_from(standalone.bootstrap, "127.0.0.2")
        assert second.closed_by_peer(5)  # closed at once, before any request
        assert answers(connect_from(standalone.bootstrap, "127.0.0.3"), 5)  # other addresses: no limit
        first.close()
        # The default per address applies to every other one; this admin connection is 127.0.0.1's first.
        assert alter(admin, "", [("max.connections.per.ip", SET, "1")]) == (0, None)
        assert RawConnection(standalone.bootstrap).closed_by_peer(5)
        assert alter(admin, "", [("max.connections.per.ip", DELETE, None),
                                 ("max.connections.per.ip.overrides", DELETE, None)]) == (0, None)
    assert "Rejected connection from /127.0.0.2, address already has the configured maximum of 1 connections." \
        in standalone.log_tail(200)


def test_broker_wide_limit_holds_a_new_connection_until_one_closes(standalone: BrokerProcess) -> None:
    with RawConnection(standalone.bootstrap) as admin:
        assert alter(admin, "1", [("max.connections", SET, "2")]) == (0, None)
        second = RawConnection(standalone.bootstrap)
        assert answers(second, 5)
        third = RawConnection(standalone.bootstrap)
        assert not answers(third, 1.0)  # waiting: connected, nothing read
        second.close()
        third.sock.settimeout(5)
        # The request sent while it waited is read and answered once a slot frees.
        assert ApiVersionsResponse.decode(third.recv_frame(), version=0, header=True).error_code == 0
        third.close()
        assert alter(admin, "1", [("max.connections", DELETE, None)]) == (0, None)


def test_unparsable_overrides_are_refused_with_kafkas_messages(standalone: BrokerProcess) -> None:
    prefix = "Invalid config value for resource ConfigResource(type=BROKER, name=''): "
    with RawConnection(standalone.bootstrap) as admin:
        assert alter(admin, "", [("max.connections.per.ip.overrides", SET, "hostA")]) == (40, prefix + (
            "Error parsing configuration property 'max.connections.per.ip.overrides': begin 0, end -1, length 5"))
        assert alter(admin, "", [("max.connections.per.ip.overrides", SET, "hostA:x")]) == (
            40, prefix + 'For input string: "x"')
        assert alter(admin, "", [("max.connections.per.ip", SET, "0")]) == (40, prefix + (
            "requirement failed: max.connections.per.ip can be set to zero only if "
            "max.connections.per.ip.overrides property is set."))
