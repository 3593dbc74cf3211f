"""SASL on a Kafka connection, sans-IO: the mechanisms (PLAIN, SCRAM-SHA-256/512), the JAAS options
they read, and the per-connection state machine of Kafka's ``SaslServerAuthenticator``.

States and the requests each accepts (anything else ends the connection, as Kafka does):

    HANDSHAKE      ApiVersions (answered normally, stays), SaslHandshake -> AUTHENTICATE
    AUTHENTICATE   SaslAuthenticate (v1+ handshake) or a raw token (v0 handshake) -> AUTHENTICATE | DONE
    DONE           everything; a second SaslHandshake/SaslAuthenticate gets ILLEGAL_SASL_STATE
    FAILED         nothing: the connection is closed after the failure's response

The shell decodes frames and does the I/O; this module decides.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from headwater.security.scram import MECHANISMS as SCRAM_MECHANISMS
from headwater.security.scram import ScramClient, ScramCredential, ScramError, ScramServer

SUPPORTED_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
# Kafka's sasl.server.max.receive.size: an unauthenticated client cannot make the broker allocate more.
MAX_RECEIVE_BYTES = 524288
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


class SaslError(ValueError):
    """Authentication failed; the message goes back to the client in SaslAuthenticate's error_message."""


# --- JAAS configuration ------------------------------------------------------------------------------

_JAAS_ENTRY = re.compile(r"\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\s*(.*?)\s*;\s*$", re.S)
_JAAS_OPTION = re.compile(r'\s*([\w.$-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))')


@dataclass(frozen=True, slots=True)
class JaasEntry:
    login_module: str
    flag: str
    options: Mapping[str, str]


def parse_jaas(text: str) -> JaasEntry:
    """One login module, Kafka's ``sasl.jaas.config`` syntax:
    ``<LoginModule> required key="value" key2=value2;``."""
    m = _JAAS_ENTRY.match(text)
    if m is None:
        raise ValueError(f"sasl.jaas.config must be '<LoginModule> required key=\"value\" ...;', got {text[:60]!r}")
    options: dict[str, str] = {}
    rest = m.group(3)
    pos = 0
    while pos < len(rest):
        om = _JAAS_OPTION.match(rest, pos)
        if om is None:
            if rest[pos:].strip():
                raise ValueError(f"sasl.jaas.config: cannot parse options at {rest[pos:pos + 30]!r}")
            break
        value = om.group(2) if om.group(2) is not None else om.group(3)
        options[om.group(1)] = re.sub(r"\\(.)", r"\1", value)
        pos = om.end()
    return JaasEntry(m.group(1), m.group(2), options)


def plain_users(entry: JaasEntry) -> dict[str, str]:
    """PlainLoginModule's ``user_<name>="<password>"`` options: the users the broker accepts."""
    return {k[5:]: v for k, v in entry.options.items() if k.startswith("user_") and len(k) > 5}


def jaas_for(props: Mapping[str, str], listener: str, mechanism: str) -> JaasEntry | None:
    """Kafka's lookup order: ``listener.name.<l>.<mech>.sasl.jaas.config``, then ``sasl.jaas.config``."""
    for key in (f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config", "sasl.jaas.config"):
        if key in props:
            return parse_jaas(props[key])
    return None


def enabled_mechanisms(props: Mapping[str, str], listener: str) -> tuple[str, ...]:
    """``listener.name.<l>.sasl.enabled.mechanisms`` or ``sasl.enabled.mechanisms``. Kafka's default
    is GSSAPI, which this broker does not have; without the key, PLAIN and SCRAM are on."""
    value = props.get(f"listener.name.{listener.lower()}.sasl.enabled.mechanisms", props.get("sasl.enabled.mechanisms"))
    if value is None:
        return SUPPORTED_MECHANISMS
    names = tuple(v.strip().upper() for v in value.split(",") if v.strip())
    unknown = [n for n in names if n not in SUPPORTED_MECHANISMS]
    if unknown:
        raise ValueError(f"sasl.enabled.mechanisms: {', '.join(unknown)} not supported (only {', '.join(SUPPORTED_MECHANISMS)})")
    if not names:
        raise ValueError("sasl.enabled.mechanisms is empty")
    return names


# --- mechanisms -----------------------------------------------------------------------------------------


class Mechanism(Protocol):
    @property
    def complete(self) -> bool: ...

    @property
    def username(self) -> str | None: ...

    def step(self, token: bytes) -> bytes: ...


class PlainServer:
    """RFC 4616: one message ``authzid NUL authcid NUL passwd``, checked against the JAAS users."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self.username: str | None = None
        self._done = False

    def step(self, token: bytes) -> bytes:
        if self._done:
            raise SaslError("PLAIN takes one message")
        self._done = True
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslError("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, username, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslError("Invalid SASL/PLAIN response: not UTF-8") from None
        if not username:
            raise SaslError("Authentication failed: username not specified")
        if not password:
            raise SaslError("Authentication failed: password not specified")
        if authzid and authzid != username:
            raise SaslError("Authentication failed: Client requested an authorization id that is different from username")
        expected = self._users.get(username)
        # Compare even for an unknown user, so the time taken does not tell which users exist.
        ok = hmac.compare_digest((expected or "\0" + password).encode(), password.encode())
        if expected is None or not ok:
            raise SaslError("Authentication failed: Invalid username or password")
        self.username = username
        self.complete = True
        return b""


class _ScramAdapter:
    def __init__(self, server: ScramServer) -> None:
        self._server = server

    @property
    def complete(self) -> bool:
        return self._server.complete

    @property
    def username(self) -> str | None:
        return self._server.username if self._server.complete else None

    def step(self, token: bytes) -> bytes:
        try:
            return self._server.step(token)
        except ScramError as exc:
            raise SaslError(str(exc)) from None


# Credentials the server knows: PLAIN users (name -> password) and SCRAM (mechanism, user) -> credential.
ScramLookup = Callable[[str, str], ScramCredential | None]


def new_mechanism(name: str, plain: Mapping[str, str], scram: ScramLookup) -> Mechanism:
    if name == "PLAIN":
        return PlainServer(plain)
    if name in SCRAM_MECHANISMS:
        return _ScramAdapter(ScramServer(name, lambda user: scram(name, user)))
    raise ValueError(f"unsupported mechanism {name}")


# --- the per-connection state machine ---------------------------------------------------------------------


class State(Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class HandshakeResult:
    error: int  # 0, or UNSUPPORTED_SASL_MECHANISM (33): then the connection closes after the response
    mechanisms: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TokenResult:
    token: bytes  # the server's reply token
    error: int  # 0 or SASL_AUTHENTICATION_FAILED (58)
    message: str | None
    done: bool  # authentication finished (successfully when error is 0)


UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58


class SaslSession:
    """One connection's SASL state. ``principal`` is ``User:<name>`` once authenticated."""

    def __init__(self, enabled: tuple[str, ...], plain_users: Mapping[str, str], scram: ScramLookup) -> None:
        self.enabled = enabled
        self._plain = plain_users
        self._scram = scram
        self.state = State.HANDSHAKE
        self.handshake_version = -1
        self.mechanism_name: str | None = None
        self._mechanism: Mechanism | None = None
        self.principal: str | None = None

    @property
    def raw_tokens(self) -> bool:
        """After a v0 handshake the tokens travel as bare size-prefixed frames, not SaslAuthenticate."""
        return self.state == State.AUTHENTICATE and self.handshake_version == 0

    def allows_before_auth(self, api_key: int) -> bool:
        """What Kafka accepts before authentication: ApiVersions and SaslHandshake first, then only SaslAuthenticate."""
        if self.state == State.HANDSHAKE:
            return api_key in (18, 17)
        if self.state == State.AUTHENTICATE:
            return api_key == 36
        return self.state == State.DONE

    def handshake(self, version: int, mechanism: str) -> HandshakeResult:
        if self.state != State.HANDSHAKE:
            return HandshakeResult(ILLEGAL_SASL_STATE, self.enabled)
        if mechanism not in self.enabled:
            self.state = State.FAILED
            return HandshakeResult(UNSUPPORTED_SASL_MECHANISM, self.enabled)
        self.handshake_version = version
        self.mechanism_name = mechanism
        self._mechanism = new_mechanism(mechanism, self._plain, self._scram)
        self.state = State.AUTHENTICATE
        return HandshakeResult(0, self.enabled)

    def token(self, data: bytes) -> TokenResult:
        if self.state != State.AUTHENTICATE or self._mechanism is None:
            self.state = State.FAILED
            return TokenResult(b"", ILLEGAL_SASL_STATE, "SaslAuthenticate outside the authentication phase", True)
        try:
            reply = self._mechanism.step(data)
        except SaslError as exc:
            self.state = State.FAILED
            return TokenResult(b"", SASL_AUTHENTICATION_FAILED, str(exc), True)
        if self._mechanism.complete:
            self.state = State.DONE
            self.principal = f"User:{self._mechanism.username}"
            return TokenResult(reply, 0, None, True)
        return TokenResult(reply, 0, None, False)


# --- the client side (admin client, broker-to-broker) ------------------------------------------------------


class SaslClient:
    """A client's exchange: ``initial()`` is the first token; ``respond(server_token)`` is the next
    one, or None when the exchange is over (the server's last token checked)."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        if mechanism not in SUPPORTED_MECHANISMS:
            raise ValueError(f"sasl.mechanism {mechanism} is not supported (only {', '.join(SUPPORTED_MECHANISMS)})")
        self.mechanism = mechanism
        self._username = username
        self._password = password
        self._scram = ScramClient(mechanism, username, password) if mechanism in SCRAM_MECHANISMS else None
        self._step = 0

    def initial(self) -> bytes:
        self._step = 1
        if self._scram is None:
            return b"\0" + self._username.encode() + b"\0" + self._password.encode()
        return self._scram.first()

    def respond(self, server_token: bytes) -> bytes | None:
        self._step += 1
        if self._scram is None:
            return None
        try:
            if self._step == 2:
                return self._scram.final(server_token)
            self._scram.verify(server_token)
        except ScramError as exc:
            raise SaslError(str(exc)) from None
        return None


def client_credentials(props: Mapping[str, str]) -> tuple[str, str]:
    """(username, password) from ``sasl.jaas.config`` (Plain or Scram login module) or
    ``sasl.username``/``sasl.password`` (librdkafka's keys)."""
    if "sasl.jaas.config" in props:
        options = parse_jaas(props["sasl.jaas.config"]).options
        if "username" not in options or "password" not in options:
            raise ValueError("sasl.jaas.config needs username=\"...\" and password=\"...\"")
        return options["username"], options["password"]
    if "sasl.username" in props and "sasl.password" in props:
        return props["sasl.username"], props["sasl.password"]
    raise ValueError("SASL needs sasl.jaas.config (username, password) or sasl.username and sasl.password")
