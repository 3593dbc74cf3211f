"""Authentication on the broker's listeners: TLS contexts, the SASL exchange before any other
request, and the principal each connection ends up with.

Per listener: SSL and SASL_SSL get a server TLS context from the ``ssl.*`` keys; a client
certificate names the principal (``User:CN=...``) on SSL. SASL_PLAINTEXT and SASL_SSL give each
connection a :class:`SaslSession`; until it is done only ApiVersions, SaslHandshake and
SaslAuthenticate are served, frames are capped at 512 KiB, and a failure answers once and closes.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Literal

from headwater.protocol.apis import ApiKey, decode_request, encode_response
from headwater.protocol.errors import KafkaError
from headwater.protocol.frame import MalformedFrameError, peek_api
from headwater.security import sasl, tls
from headwater.security.scram import ScramCredential
from headwater.server.channel import ChannelSecurity
from headwater.server.config import BrokerConfig, ConfigError
from headwater.server.connection import Connection, Reply
from headwater.server.zk import zookeeper_security

log = logging.getLogger(__name__)
FAILURE_LOG_INTERVAL_S = 10.0  # at most one failed-authentication line per client address per interval
FAILURE_LOG_ADDRESSES = 10_000
DEFAULT_AUTHENTICATION_DEADLINE_MS = 600_000  # Kafka's connections.max.idle.ms
_SIZE = struct.Struct(">i")


class FailureLog:
    """Failed authentications, logged with the address, at most once per interval per address; the
    lines in between are counted and the count goes out with the next line."""

    def __init__(self, interval_s: float = FAILURE_LOG_INTERVAL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval_s = interval_s
        self._clock = clock
        self._seen: OrderedDict[str, tuple[float, int]] = OrderedDict()
        self.logged = 0

    def failed(self, peer: str, mechanism: str | None, message: str) -> None:
        host = peer.rsplit(":", 1)[0]
        now = self._clock()
        last, suppressed = self._seen.get(host, (float("-inf"), 0))
        if now - last < self._interval_s:
            self._seen[host] = (last, suppressed + 1)
            return
        self._seen[host] = (now, 0)
        self._seen.move_to_end(host)
        while len(self._seen) > FAILURE_LOG_ADDRESSES:
            self._seen.popitem(last=False)
        self.logged += 1
        more = f" ({suppressed} more from this address not logged)" if suppressed else ""
        log.warning("failed authentication from %s (%s): %s%s", peer, mechanism or "no mechanism", message, more)


class Authenticator:
    """The broker's authentication state: one instance per broker, used by every connection."""

    def __init__(self, config: BrokerConfig, scram_lookup: Callable[[str, str], ScramCredential | None]) -> None:
        self._config = config
        self._scram_lookup = scram_lookup
        self.failures = FailureLog()
        self._mechanisms: dict[str, tuple[str, ...]] = {}
        self._plain_users: dict[str, dict[str, str]] = {}
        self._ssl: dict[str, ssl.SSLContext] = {}
        try:
            size = config.props.get("sasl.server.max.receive.size", str(sasl.MAX_RECEIVE_BYTES))
            if not size.isdigit() or int(size) == 0:
                raise ConfigError(f"sasl.server.max.receive.size={size!r} is not a positive integer")
            self._max_receive_bytes = int(size)
            idle = config.props.get("connections.max.idle.ms", str(DEFAULT_AUTHENTICATION_DEADLINE_MS))
            if not idle.isdigit():
                raise ConfigError(f"connections.max.idle.ms={idle!r} is not a non-negative integer")
            self._deadline_s = int(idle) / 1000
            for listener in config.listeners:
                if listener.uses_sasl:
                    self._mechanisms[listener.name] = sasl.enabled_mechanisms(config.props, listener.name)
                    entry = sasl.jaas_for(config.props, listener.name, "PLAIN")
                    self._plain_users[listener.name] = sasl.plain_users(entry) if entry is not None else {}
                if listener.uses_tls:
                    self._ssl[listener.name] = tls.server_context(tls.listener_props(config.props, listener.name))
            self.channel_security = self._channel_security()
            zookeeper_security(config.props)  # refused now rather than when the cluster session starts
        except ValueError as exc:  # TlsConfigError and bad SASL settings
            raise ConfigError(str(exc)) from None

    def _channel_security(self) -> ChannelSecurity:
        """How this broker (and the controller on it) connects to the others: the inter-broker
        listener's protocol; for SASL, ``sasl.mechanism.inter.broker.protocol`` with the
        ``username``/``password`` of that mechanism's JAAS config."""
        listener = self._config.listener(self._config.inter_broker_listener)
        props = self._config.props
        if "zookeeper.connect" not in props:
            return ChannelSecurity()  # a standalone broker has no peers to reach
        context = tls.client_context(tls.listener_props(props, listener.name)) if listener.uses_tls else None
        if not listener.uses_sasl:
            return ChannelSecurity(context)
        mechanism = props.get("sasl.mechanism.inter.broker.protocol", "PLAIN").upper()
        if mechanism not in self._mechanisms[listener.name]:
            raise ConfigError(f"sasl.mechanism.inter.broker.protocol={mechanism} is not enabled on the inter-broker "
                              f"listener {listener.name} ({', '.join(self._mechanisms[listener.name])})")
        entry = sasl.jaas_for(props, listener.name, mechanism)
        if entry is None or "username" not in entry.options or "password" not in entry.options:
            raise ConfigError(f"the inter-broker listener {listener.name} uses SASL {mechanism}: its sasl.jaas.config "
                              "needs the broker's own username=\"...\" password=\"...\"")
        return ChannelSecurity(context, mechanism, entry.options["username"], entry.options["password"])

    def ssl_context(self, listener: str) -> ssl.SSLContext | None:
        return self._ssl.get(listener)

    def on_open(self, conn: Connection) -> None:
        """A client connected (after the TLS handshake): its certificate's principal, its SASL session."""
        listener = conn.listener
        if listener is None:
            return
        if conn.transport is not None and listener in self._ssl:
            ssl_object = conn.transport.get_extra_info("ssl_object")
            if ssl_object is not None:
                principal = tls.subject_principal(ssl_object.getpeercert())
                if principal is not None:
                    conn.principal = principal
        if listener in self._mechanisms:
            conn.sasl = sasl.SaslSession(self._mechanisms[listener], self._plain_users[listener], self._scram_lookup)
            conn.set_max_frame_bytes(min(self._max_receive_bytes, self._config.socket_request_max_bytes))
            if self._deadline_s > 0:
                asyncio.get_running_loop().call_later(self._deadline_s, self._deadline, conn)

    def _deadline(self, conn: Connection) -> None:
        # A client that connects and never finishes authenticating would hold its connection forever.
        if not conn.closed and self.needs_gate(conn):
            self._fail(conn, conn.sasl, f"not authenticated within connections.max.idle.ms ({self._deadline_s:g} s)")
            conn.abort("SASL authentication deadline", quiet=True)

    def needs_gate(self, conn: Connection) -> bool:
        session = conn.sasl
        return session is not None and session.state is not sasl.State.DONE

    def gate(self, conn: Connection, frame: bytearray) -> Reply | Literal[True] | None:
        """A frame before authentication finished: a reply, None (the connection was closed), or
        True when the broker should answer it as usual (ApiVersions). Closing lines go through the
        rate-limited failure log, so a flood of bad handshakes cannot flood the log."""
        session: sasl.SaslSession = conn.sasl
        if session.raw_tokens:
            return self._raw_token(conn, session, bytes(frame))
        try:
            key, version, _correlation_id = peek_api(frame)
        except MalformedFrameError:
            self._fail(conn, session, "frame too short for a request header")
            conn.abort("frame too short for a request header during SASL authentication", quiet=True)
            return None
        if not session.allows_before_auth(key):
            name = ApiKey(key).name if key in ApiKey._value2member_map_ else str(key)
            self._fail(conn, session, f"unexpected request {name} before SASL authentication")
            conn.abort(f"request {name} before SASL authentication finished", quiet=True)
            return None
        if key == ApiKey.API_VERSIONS:
            return True
        try:
            request = decode_request(frame)
        except (KafkaError, ValueError) as exc:
            self._fail(conn, session, f"undecodable SASL request: {exc}")
            conn.abort(f"undecodable SASL request v{version}: {exc}", quiet=True)
            return None
        if key == ApiKey.SASL_HANDSHAKE:
            result = session.handshake(request.version, request.body.mechanism)
            resp = request.response(error_code=result.error, mechanisms=list(result.mechanisms))
            if result.error:
                self._fail(conn, session, f"unsupported mechanism {request.body.mechanism!r}")
            return Reply([encode_response(request, resp)], close=bool(result.error))
        token = session.token(bytes(request.body.auth_bytes or b""))
        fields: dict[str, Any] = dict(error_code=token.error, error_message=token.message, auth_bytes=token.token)
        if request.version >= 1:
            fields["session_lifetime_ms"] = 0  # no re-authentication required (KIP-368 off)
        if token.error:
            self._fail(conn, session, token.message or "")
            return Reply([encode_response(request, request.response(**fields))], close=True)
        if token.done:
            self._authenticated(conn, session)
        return Reply([encode_response(request, request.response(**fields))])

    def _raw_token(self, conn: Connection, session: sasl.SaslSession, token: bytes) -> Reply | None:
        # SaslHandshake v0: tokens are bare size-prefixed frames both ways, and a failure just closes.
        result = session.token(token)
        if result.error:
            self._fail(conn, session, result.message or "")
            conn.abort("SASL authentication failed", quiet=True)
            return None
        if result.done:
            self._authenticated(conn, session)
        return Reply([_SIZE.pack(len(result.token)) + result.token])

    def _authenticated(self, conn: Connection, session: sasl.SaslSession) -> None:
        assert session.principal is not None
        conn.principal = session.principal
        conn.set_max_frame_bytes(self._config.socket_request_max_bytes)
        log.debug("%s authenticated as %s with %s", conn.peer, session.principal, session.mechanism_name)

    def _fail(self, conn: Connection, session: sasl.SaslSession, message: str) -> None:
        session.state = sasl.State.FAILED
        self.failures.failed(conn.peer, session.mechanism_name, message)
