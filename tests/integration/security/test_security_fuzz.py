"""Malformed SASL and TLS handshakes against a broker's SASL_PLAINTEXT and SASL_SSL listeners.

Each example opens a connection, sends a hostile sequence (random bytes, truncated or mutated SASL
requests, oversize or negative frame sizes, requests in the wrong order, wrong passwords), then a
Metadata request with a marker correlation id, and half-closes. The broker may answer the SASL
requests or close, but it must never answer the marker: that would mean a session that was never
authenticated is being served. TLS examples send garbage or cut ClientHellos instead of a handshake.
After all of it the broker is alive, has logged no handler failure, and serves clients on every
listener, including while half-finished handshakes are left open.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import struct
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import KafkaAdminClient
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from secure_broker import SCRAM_USER, SecureBroker, start_secure_broker

from headwater.security.scram import ScramClient

MARKER_CID = 0x5EC0DE
IO_TIMEOUT_S = 5.0
IDLE_S = 0.25
DEADLINE_MS = 3000


@pytest.fixture(scope="module")
def sb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    # Unauthenticated SASL connections are closed after connections.max.idle.ms: 3 s here.
    s = start_secure_broker(tmp_path_factory.mktemp("fuzz-secure-broker"), {"connections.max.idle.ms": str(DEADLINE_MS)})
    try:
        yield s
    finally:
        s.broker.stop()


def encoded(request: object, cid: int) -> bytes:
    request.with_header(correlation_id=cid, client_id="fuzz")  # type: ignore[attr-defined]
    return bytes(request.encode(header=True, framed=True))  # type: ignore[attr-defined]


def seeds() -> list[bytes]:
    """Size-prefixed SASL-phase frames; no seed carries a right password."""
    out = [encoded(SaslHandshakeRequest(version=v, mechanism=m), 10 + v)
           for v in (0, 1) for m in ("PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256", "GSSAPI", "")]
    tokens = [b"\0alice\0wrong", b"alice\0alice\0", b"\0\0", ScramClient("SCRAM-SHA-512", SCRAM_USER, "x").first(),
              b"n,,n=bob,r=abc", b"c=biws,r=abc,p=AAAA", b"y,,n=bob,r=abc", b""]
    out += [encoded(SaslAuthenticateRequest(version=v, auth_bytes=t), 20 + v) for v in (0, 1, 2) for t in tokens]
    out += [struct.pack(">i", len(t)) + t for t in tokens]  # v0 raw tokens
    out += [encoded(ApiVersionsRequest(version=0), 30),
            encoded(MetadataRequest(version=4, topics=None, allow_auto_topic_creation=False), 31)]
    return out


SEEDS = seeds()


@st.composite
def hostile_part(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["seed", "truncated", "mutated", "random", "random-framed", "size"]))
    seed = draw(st.sampled_from(SEEDS))
    if kind == "seed":
        return seed
    if kind == "truncated":
        return seed[: draw(st.integers(0, max(len(seed) - 1, 0)))]
    if kind == "mutated":
        data = bytearray(seed)
        for _ in range(draw(st.integers(1, 6))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        return bytes(data)
    if kind == "random":
        return draw(st.binary(min_size=1, max_size=200))
    if kind == "random-framed":
        body = draw(st.binary(min_size=0, max_size=200))
        return struct.pack(">i", len(body)) + body
    # Oversize (beyond the 512 KiB allowed before authentication, up to 2 GiB) or negative sizes.
    return struct.pack(">i", draw(st.sampled_from([524289, 1 << 20, 100 << 20, 2**31 - 1, -1, -(2**31)])))


def tls_wrap(sb: SecureBroker, sock: socket.socket) -> socket.socket:
    ctx = ssl.create_default_context(cafile=str(sb.tls.ca))
    return ctx.wrap_socket(sock, server_hostname="127.0.0.1")


def marker_served(sb: SecureBroker, parts: list[bytes], tls: bool) -> bool:
    """Send ``parts`` and the marker Metadata request; True if the marker was answered."""
    marker = encoded(MetadataRequest(version=4, topics=None, allow_auto_topic_creation=False), MARKER_CID)
    raw = socket.create_connection(("127.0.0.1", sb.sasl_ssl if tls else sb.sasl_plaintext), timeout=IO_TIMEOUT_S)
    sock = tls_wrap(sb, raw) if tls else raw
    data = b""
    try:
        try:
            sock.sendall(b"".join(parts) + marker)
        except OSError:  # BrokenPipe, reset, TLS alerts: the broker closed first
            return False
        # No half-close (the broker drops a connection at the end of its stream, answered or not). A
        # connection still waiting for the rest of a frame it was promised stays open, so stop once
        # nothing more comes for a while.
        sock.settimeout(IDLE_S)
        deadline = time.monotonic() + IO_TIMEOUT_S
        while True:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            except OSError:
                break
            if not chunk:
                break
            data += chunk
            assert time.monotonic() < deadline, "the broker kept talking"
    finally:
        sock.close()
    pos = 0
    while pos + 8 <= len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        if size >= 4 and struct.unpack_from(">i", data, pos + 4)[0] == MARKER_CID:
            return True
        pos += 4 + max(size, 0)
    return False


def test_the_marker_is_served_after_a_real_authentication(sb: SecureBroker) -> None:
    """The check the fuzz relies on can fail: with the right password the marker is answered."""
    good = [encoded(SaslHandshakeRequest(version=1, mechanism="PLAIN"), 1),
            encoded(SaslAuthenticateRequest(version=2, auth_bytes=b"\0alice\0alice-secret"), 2)]
    assert marker_served(sb, good, tls=False)
    assert marker_served(sb, good, tls=True)
    assert not marker_served(sb, [good[0], encoded(SaslAuthenticateRequest(version=2, auth_bytes=b"\0alice\0x"), 2)],
                             tls=False)


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(parts=st.lists(hostile_part(), min_size=1, max_size=4))
def test_malformed_sasl_over_sasl_plaintext(sb: SecureBroker, parts: list[bytes]) -> None:
    assert not marker_served(sb, parts, tls=False), "an unauthenticated connection was served"


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(parts=st.lists(hostile_part(), min_size=1, max_size=3))
def test_malformed_sasl_over_sasl_ssl(sb: SecureBroker, parts: list[bytes]) -> None:
    assert not marker_served(sb, parts, tls=True), "an unauthenticated connection was served"


def client_hello() -> bytes:
    """The first flight of a real TLS client, taken from an in-memory handshake."""
    ctx = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with contextlib.suppress(ssl.SSLWantReadError):
        obj.do_handshake()
    return outgoing.read()


HELLO = client_hello()


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(kind=st.sampled_from(["random", "truncated", "mutated", "plaintext-kafka"]), data=st.data())
def test_malformed_tls_handshakes(sb: SecureBroker, kind: str, data: st.DataObject) -> None:
    if kind == "random":
        payload = data.draw(st.binary(min_size=1, max_size=600))
    elif kind == "truncated":
        payload = HELLO[: data.draw(st.integers(1, len(HELLO) - 1))]
    elif kind == "mutated":
        buf = bytearray(HELLO)
        for _ in range(data.draw(st.integers(1, 8))):
            buf[data.draw(st.integers(0, len(buf) - 1))] = data.draw(st.integers(0, 255))
        payload = bytes(buf)
    else:  # a Kafka request where a ClientHello belongs
        payload = data.draw(st.sampled_from(SEEDS))
    with socket.create_connection(("127.0.0.1", sb.sasl_ssl), timeout=IO_TIMEOUT_S) as sock:
        try:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + IO_TIMEOUT_S
            while sock.recv(65536):
                assert time.monotonic() < deadline, "the broker neither finished nor closed the handshake"
        except (ConnectionResetError, BrokenPipeError):
            pass


def test_broker_serves_everyone_after_the_fuzz_and_beside_stalled_handshakes(sb: SecureBroker) -> None:
    stalled = []
    try:
        for port, payload in [(sb.sasl_ssl, HELLO[:20])] * 10 + [(sb.sasl_plaintext, SEEDS[1][:7])] * 10:
            s = socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT_S)
            s.sendall(payload)
            stalled.append(s)
        for port, extra in ((sb.broker.port, {}),
                            (sb.sasl_ssl, dict(security_protocol="SASL_SSL", sasl_mechanism="PLAIN",
                                               sasl_plain_username="alice", sasl_plain_password="alice-secret",
                                               ssl_cafile=str(sb.tls.ca))),
                            (sb.sasl_plaintext, dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                                                     sasl_plain_username="alice", sasl_plain_password="alice-secret"))):
            admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=10000, **extra)
            try:
                assert [b["port"] for b in admin.describe_cluster()["brokers"]] == [port]
            finally:
                admin.close()
        # The stalled SASL connections (not the stalled TLS handshakes) are closed at the deadline.
        started = time.monotonic()
        for s in stalled[10:]:
            s.settimeout(DEADLINE_MS / 1000 + 5)
            assert s.recv(1) == b"", "an unauthenticated connection outlived the deadline"
        assert time.monotonic() - started < DEADLINE_MS / 1000 + 5
    finally:
        for s in stalled:
            s.close()
    assert sb.broker.alive
    log = sb.broker.log_path.read_text(errors="replace")
    assert "Traceback" not in log and "request handler failed" not in log
    assert "failed authentication from 127.0.0.1" in log
