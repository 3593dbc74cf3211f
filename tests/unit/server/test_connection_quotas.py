"""ConnectionQuotas as Kafka 3.9's (core/src/main/scala/kafka/network/SocketServer.scala, ConnectionQuotas):

- ``inc``: past ``max.connections.per.ip`` (or the address's override) the new connection is closed
  (``TooManyConnectionsException``, "Rejected connection from ...");
- ``waitForConnectionSlot`` / ``connectionSlotAvailable``: past ``max.connections`` (or the listener's own
  ``max.connections``) the acceptor waits until a connection closes (``dec`` notifies it); the inter-broker
  listener, when the broker has several, is not held by the broker-wide limit (``protectedListener``);
- ``maxConnectionsExceeded`` / ``closeExcessConnections``: above the broker-wide limit the other
  listeners close their least recently used connection.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from headwater.metadata.configs import ConnectionLimits
from headwater.server.connection import Connection, ConnectionQuotas

_clock = itertools.count()


@dataclass(eq=False)
class FakeConnection:
    ip: str = "10.0.0.1"
    listener: str | None = "PLAINTEXT"
    closed: bool = False
    held: bool = False
    last_active_s: float = field(default_factory=lambda: float(next(_clock)))

    def hold(self) -> None:
        self.held = True

    def release(self) -> None:
        self.held = False

    def abort(self, reason: str, *, quiet: bool = False) -> None:
        self.closed = True


def open_(quotas: ConnectionQuotas, conn: FakeConnection) -> FakeConnection:
    quotas.opened(conn)  # type: ignore[arg-type]  # the quotas use only what FakeConnection has
    return conn


def close(quotas: ConnectionQuotas, conn: FakeConnection) -> None:
    conn.closed = True
    quotas.closed(conn)  # type: ignore[arg-type]


def test_per_ip_limit_and_overrides() -> None:
    quotas = ConnectionQuotas()
    quotas.configure(ConnectionLimits(per_ip=2, per_ip_overrides={"10.0.0.9": 0, "localhost": 1}))
    a, b, c = (open_(quotas, FakeConnection()) for _ in range(3))
    assert (a.closed, b.closed, c.closed) == (False, False, True)
    assert open_(quotas, FakeConnection("10.0.0.9")).closed  # an override of 0 refuses every one
    assert not open_(quotas, FakeConnection("127.0.0.1")).closed  # localhost resolved: 1 allowed
    assert open_(quotas, FakeConnection("127.0.0.1")).closed
    close(quotas, a)
    assert not open_(quotas, FakeConnection()).closed  # a slot for 10.0.0.1 again
    assert quotas.total == 3


def test_broker_wide_limit_holds_new_connections_until_one_closes() -> None:
    quotas = ConnectionQuotas()
    quotas.configure(ConnectionLimits(max_connections=2))
    a, b = open_(quotas, FakeConnection()), open_(quotas, FakeConnection("10.0.0.2"))
    c = open_(quotas, FakeConnection("10.0.0.3"))
    assert c.held and not c.closed and quotas.total == 2
    close(quotas, a)
    assert not c.held and quotas.total == 2
    d = open_(quotas, FakeConnection())
    close(quotas, d)  # a client giving up while it waits
    assert quotas.total == 2
    quotas.configure(ConnectionLimits(max_connections=3))
    assert not b.closed and quotas.total == 2


def test_lowering_the_limit_closes_the_least_recently_active() -> None:
    quotas = ConnectionQuotas()
    conns = [open_(quotas, FakeConnection(f"10.0.0.{i}")) for i in range(4)]
    conns[0].last_active_s = 100.0  # the oldest connection is the busiest
    quotas.configure(ConnectionLimits(max_connections=2))
    assert [c.closed for c in conns] == [False, True, True, False]


def test_the_inter_broker_listener_is_protected_when_there_are_several() -> None:
    quotas = ConnectionQuotas("INTERNAL", listener_count=2)
    quotas.configure(ConnectionLimits(max_connections=1, per_listener={"INTERNAL": 5}))
    client = open_(quotas, FakeConnection("10.0.0.1", "PLAINTEXT"))
    peer = open_(quotas, FakeConnection("10.0.0.2", "INTERNAL"))
    assert not peer.held and not peer.closed
    assert client.closed  # the broker-wide limit is met by closing another listener's connection
    waiting = open_(quotas, FakeConnection("10.0.0.3", "PLAINTEXT"))
    assert waiting.held


def test_listener_limit() -> None:
    quotas = ConnectionQuotas()
    quotas.configure(ConnectionLimits(per_listener={"PLAINTEXT": 1}))
    open_(quotas, FakeConnection())
    assert open_(quotas, FakeConnection("10.0.0.2")).held
    assert not open_(quotas, FakeConnection("10.0.0.3", "OTHER")).held


def test_connection_has_what_the_quotas_use() -> None:
    names = {"ip", "listener", "closed", "hold", "release", "abort", "last_active_s"}
    conn = Connection(lambda *_: None, 100, lambda _c: None)  # type: ignore[arg-type, return-value]
    assert all(hasattr(conn, n) for n in names)
