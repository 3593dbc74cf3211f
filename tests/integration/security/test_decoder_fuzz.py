"""Malformed requests of every advertised API key and version, over sockets to live brokers.

For each API key and version the broker advertises, a sample of the malformed variants the unit
test tests/unit/protocol/test_strict_decoding.py checks exhaustively (a cut, a cut inside a length
field, a string or bytes length that runs past the frame, null in a non-nullable field) goes to
a standalone broker, each on its own connection and followed by an
ApiVersions v0 probe with a marker correlation id. Kafka's ``RequestContext.parseRequest`` fails on
these (apache/kafka 3.9) and ``SocketServer.processCompletedReceives`` closes the connection, so
the broker must close it without answering the malformed request or the probe. ApiVersions is no
exception for a version the broker supports: Kafka answers UNSUPPORTED_VERSION (v0) only for a
version it does not support, whose body it does not parse at all, and so does this broker.

The two frames first seen on a real broker go to a secure broker's SASL_PLAINTEXT listener: a
SaslHandshake whose mechanism length says 200 but carries 13 bytes, and a SaslAuthenticate whose
token length says 200 but carries a valid 19-byte PLAIN token. Neither may be answered, nor may
anything after them. Throughout, fresh connections still get ApiVersions and Metadata, and at the
end the brokers' logs hold no traceback and no handler failure.
"""

from __future__ import annotations

import random
import socket
import struct
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hw_support import RawConnection, api_versions_probe, size_prefixed
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from secure_broker import SecureBroker, start_secure_broker

from headwater.admin.local import BrokerProcess, free_port
from headwater.protocol.apis import API_SPECS, ApiKey

# The request builder is shared with the unit test that checks every variant in process.
_SAMPLES = str(Path(__file__).resolve().parents[2] / "unit" / "protocol")
if _SAMPLES not in sys.path:
    sys.path.append(_SAMPLES)
from request_samples import sample  # noqa: E402

PROBE_CID = 0x7EADBEEF
MALFORMED_CID = 5  # request_samples.CORRELATION_ID
UNSUPPORTED_VERSION = 35
IO_TIMEOUT_S = 10.0
HEALTH_EVERY = 100  # variants between positive controls
PLAIN_TOKEN = b"\0alice\0alice-secret"  # a valid PLAIN token for the secure broker's user alice


def _stop(broker: BrokerProcess) -> None:
    try:
        broker.stop()
    finally:
        if broker.alive:
            broker.kill9()


@pytest.fixture(scope="module")
def plain_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(1, free_port(), tmp_path_factory.mktemp("decoder-fuzz-broker"))
    try:
        b.start()
        yield b
    finally:
        _stop(b)


@pytest.fixture(scope="module")
def sb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    s = start_secure_broker(tmp_path_factory.mktemp("decoder-fuzz-secure-broker"))
    try:
        yield s
    finally:
        _stop(s.broker)


def exchange(port: int, payload: bytes) -> tuple[bool, list[bytes]]:
    """Send ``payload`` on a new connection; (closed by the broker, frames it sent before closing)."""
    frames: list[bytes] = []
    data = b""
    closed = False
    with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT_S) as sock:
        try:
            sock.sendall(payload)
            deadline = time.monotonic() + IO_TIMEOUT_S
            while time.monotonic() < deadline and PROBE_CID not in correlation_ids(frames):
                chunk = sock.recv(65536)
                if not chunk:
                    closed = True
                    break
                data += chunk
                while len(data) >= 4 and len(data) >= 4 + struct.unpack_from(">i", data, 0)[0]:
                    size = struct.unpack_from(">i", data, 0)[0]
                    frames.append(data[4 : 4 + size])
                    data = data[4 + size :]
        except (ConnectionResetError, BrokenPipeError):
            closed = True
        except TimeoutError:
            pass
    return closed, frames


def correlation_ids(frames: list[bytes]) -> list[int]:
    return [struct.unpack_from(">i", f, 0)[0] for f in frames if len(f) >= 4]


def assert_serves(port: int, broker: BrokerProcess) -> None:
    """A fresh connection gets a good ApiVersions v3 and Metadata v12 answer."""
    assert broker.alive, f"broker died\n{broker.log_tail()}"
    with RawConnection(f"127.0.0.1:{port}", timeout_s=IO_TIMEOUT_S) as conn:
        av = conn.request(ApiVersionsRequest(version=3, client_software_name="hw-test", client_software_version="1"),
                          ApiVersionsResponse, 3)
        assert av.error_code == 0
        md = conn.request(MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False,
                                          include_topic_authorized_operations=False), MetadataResponse, 12)
        assert [b.node_id for b in md.brokers] == [1]


def assert_clean_log(broker: BrokerProcess) -> None:
    log = broker.log_path.read_text(errors="replace")
    assert "Traceback" not in log and "request handler failed" not in log, broker.log_tail(80)


def advertised(port: int) -> list[tuple[ApiKey, int]]:
    with RawConnection(f"127.0.0.1:{port}", timeout_s=IO_TIMEOUT_S) as conn:
        resp = conn.request(ApiVersionsRequest(version=0), ApiVersionsResponse, 0)
    assert resp.error_code == 0
    ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert ranges == {int(k): (s.min_version, s.max_version) for k, s in API_SPECS.items()}
    return [(ApiKey(k), v) for k, (lo, hi) in sorted(ranges.items()) for v in range(lo, hi + 1)]


def kind_of(label: str) -> str:
    """The mutation class of a ``Sample.malformed`` label."""
    if label.startswith("cut inside"):
        return "cut in a length"
    for word, kind in (("cut ", "cut"), (" length +", "overlong"), ("as null", "null")):
        if word in label:
            return kind
    raise AssertionError(label)


# --- a standalone broker -----------------------------------------------------------------------------


def test_the_probe_is_answered_after_a_valid_request(plain_broker: BrokerProcess) -> None:
    """The judgement below can fail: after a valid request the probe is answered."""
    for version in range(5):
        closed, frames = exchange(plain_broker.port, size_prefixed(sample(ApiKey.API_VERSIONS, version).frame) + api_versions_probe(PROBE_CID))
        assert correlation_ids(frames) == [MALFORMED_CID, PROBE_CID], (version, closed)


def test_malformed_requests_of_every_api_version_close_unanswered(plain_broker: BrokerProcess) -> None:
    rng = random.Random(20240917)
    sent = 0
    kinds: set[str] = set()
    for key, version in advertised(plain_broker.port):
        for label, frame in sample(key, version).malformed(rng):
            closed, frames = exchange(plain_broker.port, size_prefixed(frame) + api_versions_probe(PROBE_CID))
            what = f"{key.name} v{version}, {label}"
            assert not frames, f"{what}: answered {correlation_ids(frames)}"
            assert closed, f"{what}: the connection stayed open"
            kinds.add(kind_of(label))
            sent += 1
            if sent % HEALTH_EVERY == 0:
                assert_serves(plain_broker.port, plain_broker)
    assert sent > 650
    assert kinds == {"cut", "cut in a length", "overlong", "null"}
    assert_serves(plain_broker.port, plain_broker)
    log = plain_broker.log_path.read_text(errors="replace")
    for reason in ("runs past the end of the frame", "was serialized as null"):
        assert reason in log, reason
    assert_clean_log(plain_broker)


def test_api_versions_of_an_unsupported_version_is_answered_v0_error_35(plain_broker: BrokerProcess) -> None:
    """Kafka does not parse the body of an ApiVersions it does not support: it answers v0 with
    UNSUPPORTED_VERSION whatever follows the header. A supported version that does not parse closes
    (the test above)."""
    frame = bytearray(sample(ApiKey.API_VERSIONS, 3).frame)
    struct.pack_into(">h", frame, 2, 99)
    closed, frames = exchange(plain_broker.port, size_prefixed(bytes(frame) + b"\xff\xff\xff") + api_versions_probe(PROBE_CID))
    assert correlation_ids(frames) == [MALFORMED_CID, PROBE_CID]
    resp = ApiVersionsResponse.decode(frames[0], version=0, header=True)
    assert resp.error_code == UNSUPPORTED_VERSION
    assert not closed


# --- the SASL_PLAINTEXT listener of a secure broker ----------------------------------------------------


def header_v1(key: int, version: int, correlation_id: int) -> bytes:
    return struct.pack(">hhih", key, version, correlation_id, 4) + b"fuzz"


def encoded(request: object, cid: int) -> bytes:
    request.with_header(correlation_id=cid, client_id="fuzz")  # type: ignore[attr-defined]
    return bytes(request.encode(header=True, framed=True))  # type: ignore[attr-defined]


def metadata_marker() -> bytes:
    return encoded(MetadataRequest(version=4, topics=None, allow_auto_topic_creation=False), PROBE_CID)


def test_the_two_sasl_frames_are_refused(sb: SecureBroker) -> None:
    port = sb.sasl_plaintext
    # SaslHandshake v1: the mechanism's length says 200; 13 bytes follow.
    handshake = size_prefixed(header_v1(17, 1, 11) + struct.pack(">h", 200) + b"SCRAM-SHA-512")
    closed, frames = exchange(port, handshake + api_versions_probe(PROBE_CID))
    assert closed and not frames, correlation_ids(frames)

    # SaslAuthenticate v0/v1: the token's length says 200; a valid 19-byte PLAIN token follows.
    for version in (0, 1):
        authenticate = size_prefixed(header_v1(36, version, 12) + struct.pack(">i", 200) + PLAIN_TOKEN)
        good_handshake = encoded(SaslHandshakeRequest(version=1, mechanism="PLAIN"), 10)
        closed, frames = exchange(port, good_handshake + authenticate + metadata_marker() + api_versions_probe(PROBE_CID))
        assert correlation_ids(frames) == [10], f"v{version}: answered {correlation_ids(frames)}"
        assert closed

    # The control: with the right lengths the same token authenticates and the marker is served.
    authenticate = encoded(SaslAuthenticateRequest(version=1, auth_bytes=PLAIN_TOKEN), 12)
    closed, frames = exchange(port, encoded(SaslHandshakeRequest(version=1, mechanism="PLAIN"), 10) + authenticate
                              + metadata_marker())
    assert correlation_ids(frames) == [10, 12, PROBE_CID]
    assert_serves(sb.broker.port, sb.broker)


def test_malformed_sasl_requests_close_unanswered(sb: SecureBroker) -> None:
    """Every version of the requests a SASL listener decodes before authentication, malformed."""
    rng = random.Random(11)
    port = sb.sasl_plaintext
    good_handshake = encoded(SaslHandshakeRequest(version=1, mechanism="PLAIN"), 10)
    for key in (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
        spec = API_SPECS[key]
        for version in range(spec.min_version, spec.max_version + 1):
            # SaslAuthenticate is only read after a handshake, which is answered.
            before = good_handshake if key == ApiKey.SASL_AUTHENTICATE else b""
            for label, frame in sample(key, version).malformed(rng):
                closed, frames = exchange(port, before + size_prefixed(frame) + metadata_marker() + api_versions_probe(PROBE_CID))
                want = [10] if before else []
                assert correlation_ids(frames) == want, f"{key.name} v{version}, {label}: {correlation_ids(frames)}"
                assert closed, f"{key.name} v{version}, {label}: the connection stayed open"
    assert_serves(sb.broker.port, sb.broker)
    assert_clean_log(sb.broker)
