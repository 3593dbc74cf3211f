"""Ports chosen for servers that start later (``free_port``, ``free_port_range``).

A port chosen for a broker that joins later, or restarts on its old port, is not held in between.
Linux gives client connections local ports from ``net.ipv4.ip_local_port_range`` (ip-sysctl.rst),
and a listener cannot bind a port that a connection holds: so the chosen ports must lie below
that range, or the broker fails with EADDRINUSE (``make demo`` did, at step 5).
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from headwater.admin import local
from headwater.admin.local import free_port, free_port_range


def _first_ephemeral_port() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


def test_free_ports_lie_below_the_ephemeral_range_and_can_be_bound() -> None:
    first = _first_ephemeral_port()
    for _ in range(50):
        port = free_port()
        assert 1024 <= port < first
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_free_range_is_consecutive_free_and_below_the_ephemeral_range() -> None:
    base = free_port_range(8)
    assert base + 8 <= _first_ephemeral_port()
    held = []
    try:
        for port in range(base, base + 8):
            s = socket.socket()
            held.append(s)
            s.bind(("127.0.0.1", port))
    finally:
        for s in held:
            s.close()


def test_a_port_in_use_is_not_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", free_port()))
        taken.listen()
        busy = taken.getsockname()[1]
        other = free_port()
        draws = iter([busy, busy, other])
        monkeypatch.setattr(local.random, "choice", lambda _ports: next(draws))
        assert free_port() == other
