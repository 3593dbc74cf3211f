"""A small synchronous Kafka admin client: one request at a time, to any broker or the controller.

The CLI tools (topics, configs, reassign, plan) use it. It speaks only the Kafka protocol, with
kafka-python's message classes, so it works against Apache Kafka as well as headwater. Versions
are negotiated per broker with ApiVersions; requests that only the controller may answer are
sent to the controller named in Metadata and re-sent once after NOT_CONTROLLER.
"""

from __future__ import annotations

import itertools
import socket
import ssl
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from headwater.admin.security import PLAINTEXT, ClientSecurity
from headwater.protocol.errors import ErrorCode
from headwater.security.sasl import SaslError

_SIZE = struct.Struct(">i")
DEFAULT_TIMEOUT_S = 30.0


class AdminError(Exception):
    """Something the user must see: the broker is unreachable, or an answer we cannot use."""


@dataclass
class _Conn:
    sock: socket.socket
    versions: dict[int, tuple[int, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class Node:
    node_id: int
    host: str
    port: int
    rack: str | None


class AdminClient:
    def __init__(self, bootstrap: str, client_id: str = "headwater-admin", timeout_s: float = DEFAULT_TIMEOUT_S,
                 security: ClientSecurity = PLAINTEXT) -> None:
        self.security = security
        self.bootstrap = [self._split(b) for b in bootstrap.split(",") if b.strip()]
        if not self.bootstrap:
            raise AdminError("no bootstrap server given")
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._conns: dict[tuple[str, int], _Conn] = {}
        self._correlation = itertools.count(1)
        self.nodes: dict[int, Node] = {}
        self.controller_id = -1
        self.cluster_id: str | None = None

    @staticmethod
    def _split(address: str) -> tuple[str, int]:
        host, _, port = address.strip().rpartition(":")
        if not host or not port.isdigit():
            raise AdminError(f"bad server address {address!r}: expected host:port")
        return host, int(port)

    # --- connections ----------------------------------------------------------------------------

    def _connect(self, address: tuple[str, int]) -> _Conn:
        conn = self._conns.get(address)
        if conn is not None:
            return conn
        try:
            sock = socket.create_connection(address, timeout=self.timeout_s)
        except OSError as exc:
            raise AdminError(f"cannot connect to {address[0]}:{address[1]}: {exc.strerror or exc}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.security.ssl_context is not None:
            try:
                sock = self.security.ssl_context.wrap_socket(sock, server_hostname=address[0])
            except (ssl.SSLError, OSError) as exc:
                sock.close()
                raise AdminError(f"TLS handshake with {address[0]}:{address[1]} failed: {exc}") from None
        conn = _Conn(sock)
        try:
            resp = self._roundtrip(conn, ApiVersionsRequest[0](), 0)
            if resp.error_code != 0:
                raise AdminError(f"ApiVersions failed on {address[0]}:{address[1]}: error {resp.error_code}")
            conn.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            if self.security.mechanism is not None:
                self._authenticate(conn, address)
        except AdminError:
            sock.close()
            raise
        self._conns[address] = conn
        return conn

    def _authenticate(self, conn: _Conn, address: tuple[str, int]) -> None:
        """SaslHandshake v1, then SaslAuthenticate until the mechanism is done (KIP-152)."""
        client = self.security.sasl_client()
        assert client is not None
        where = f"{address[0]}:{address[1]}"
        resp = self._roundtrip(conn, SaslHandshakeRequest(version=1, mechanism=client.mechanism), 1)
        if resp.error_code != 0:
            raise AdminError(f"SASL handshake with {where} failed: {ErrorCode(resp.error_code).name} "
                             f"(the broker enables {', '.join(resp.mechanisms) or 'no mechanism'})")
        version = min(2, conn.versions.get(36, (0, 0))[1])
        token: bytes | None = client.initial()
        try:
            while token is not None:
                auth = self._roundtrip(conn, SaslAuthenticateRequest(version=version, auth_bytes=token), version)
                if auth.error_code != 0:
                    raise AdminError(f"SASL authentication with {where} failed: "
                                     f"{auth.error_message or ErrorCode(auth.error_code).name}")
                token = client.respond(bytes(auth.auth_bytes))
        except SaslError as exc:
            raise AdminError(f"SASL authentication with {where} failed: {exc}") from None

    def close(self) -> None:
        for conn in self._conns.values():
            conn.sock.close()
        self._conns.clear()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _recv_exact(self, sock: socket.socket, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise AdminError("the broker closed the connection")
            buf += chunk
        return bytes(buf)

    def _roundtrip(self, conn: _Conn, request: Any, version: int) -> Any:
        correlation_id = next(self._correlation)
        req = request if version == request.API_VERSION else type(request)[None](version=version, **_fields(request))
        req.with_header(correlation_id=correlation_id, client_id=self.client_id)
        try:
            conn.sock.sendall(req.encode(header=True, framed=True))
            size = _SIZE.unpack(self._recv_exact(conn.sock, 4))[0]
            payload = self._recv_exact(conn.sock, size)
        except OSError as exc:
            raise AdminError(f"request failed: {exc}") from None
        response_cls = ApiVersionsResponse if req.API_KEY == 18 else req.header.get_response_class()
        resp = response_cls.decode(payload, version=version, header=True)
        if resp.header.correlation_id != correlation_id:
            raise AdminError("response out of order")
        return resp

    # --- requests ---------------------------------------------------------------------------------

    def version_for(self, address: tuple[str, int], api_key: int, client_max: int) -> int:
        conn = self._connect(address)
        lo, hi = conn.versions.get(api_key, (-1, -1))
        version = min(hi, client_max)
        if version < lo or version < 0:
            raise AdminError(f"the broker at {address[0]}:{address[1]} does not support API key {api_key}")
        return version

    def send(self, request_cls: Any, fields: dict[str, Any], *, node_id: int | None = None, max_version: int | None = None) -> Any:
        """Build ``request_cls`` at the best version both sides speak and send it to a node (or bootstrap)."""
        address = self._address(node_id)
        version = self.version_for(address, request_cls.API_KEY, request_cls.max_version if max_version is None else max_version)
        request = request_cls(version=version, **_defaults_for(request_cls, version, fields))
        return self._roundtrip(self._connect(address), request, version)

    def _address(self, node_id: int | None) -> tuple[str, int]:
        if node_id is None:
            return self.bootstrap[0]
        node = self.nodes.get(node_id)
        if node is None:
            self.refresh()
            node = self.nodes.get(node_id)
        if node is None:
            raise AdminError(f"broker {node_id} is not in the cluster metadata")
        return node.host, node.port

    def refresh(self, topics: list[str] | None = None) -> Any:
        last: Exception | None = None
        for address in self.bootstrap + [(n.host, n.port) for n in self.nodes.values()]:
            try:
                version = self.version_for(address, 3, 12)
                req = MetadataRequest(version=version, topics=None if topics is None else [
                    MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                    allow_auto_topic_creation=False)
                resp = self._roundtrip(self._connect(address), req, version)
            except AdminError as exc:
                last = exc
                self._conns.pop(address, None)
                continue
            self.nodes = {b.node_id: Node(b.node_id, b.host, b.port, b.rack) for b in resp.brokers}
            self.controller_id = resp.controller_id
            self.cluster_id = resp.cluster_id
            return resp
        raise AdminError(f"no broker answered: {last}")

    def send_to_controller(self, request_cls: Any, fields: dict[str, Any], errors_of: Any, max_version: int | None = None) -> Any:
        """Send to the controller; after NOT_CONTROLLER, find the controller again and re-send."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            if self.controller_id < 0:
                self.refresh()
            if self.controller_id < 0:
                if time.monotonic() > deadline:
                    raise AdminError("no active controller")
                time.sleep(0.2)
                continue
            resp = self.send(request_cls, fields, node_id=self.controller_id, max_version=max_version)
            if ErrorCode.NOT_CONTROLLER not in set(errors_of(resp)) or time.monotonic() > deadline:
                return resp
            self.controller_id = -1


def _fields(message: Any) -> dict[str, Any]:
    return {name: getattr(message, name) for name in message.fields if hasattr(message, name)}


def _defaults_for(request_cls: Any, version: int, fields: dict[str, Any]) -> dict[str, Any]:
    """Drop fields the chosen version does not have, so one call site serves every version."""
    out = {}
    for name, value in fields.items():
        spec = request_cls.fields.get(name)
        if spec is None:
            raise TypeError(f"{request_cls.__name__} has no field {name}")
        if spec.for_version_q(version):
            out[name] = value
    return out
