"""SASL, sans-IO: JAAS options, PLAIN, and the per-connection state machine."""

from __future__ import annotations

import pytest

from headwater.security import sasl, scram
from headwater.security.sasl import SaslSession, State


def test_jaas_parsing_in_kafkas_syntax() -> None:
    entry = sasl.parse_jaas('org.apache.kafka.common.security.plain.PlainLoginModule required\n'
                            '  username="admin" password="adm\\"in" user_admin="adm\\"in" user_alice=alice-pw;')
    assert entry.login_module == sasl.PLAIN_LOGIN_MODULE and entry.flag == "required"
    assert entry.options["password"] == 'adm"in'
    assert sasl.plain_users(entry) == {"admin": 'adm"in', "alice": "alice-pw"}
    for bad in ("PlainLoginModule", "PlainLoginModule required username=;", "X maybe a=b;"):
        with pytest.raises(ValueError):
            sasl.parse_jaas(bad)


def test_jaas_lookup_prefers_the_listener_and_mechanism_key() -> None:
    props = {"sasl.jaas.config": 'M required user_a="1";',
             "listener.name.client.plain.sasl.jaas.config": 'M required user_b="2";'}
    assert sasl.plain_users(sasl.jaas_for(props, "CLIENT", "PLAIN")) == {"b": "2"}  # type: ignore[arg-type]
    assert sasl.plain_users(sasl.jaas_for(props, "OTHER", "PLAIN")) == {"a": "1"}  # type: ignore[arg-type]
    assert sasl.jaas_for({}, "CLIENT", "PLAIN") is None


def test_enabled_mechanisms() -> None:
    assert sasl.enabled_mechanisms({}, "X") == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    assert sasl.enabled_mechanisms({"sasl.enabled.mechanisms": "scram-sha-512"}, "X") == ("SCRAM-SHA-512",)
    assert sasl.enabled_mechanisms({"sasl.enabled.mechanisms": "PLAIN",
                                    "listener.name.x.sasl.enabled.mechanisms": "SCRAM-SHA-256"}, "X") == ("SCRAM-SHA-256",)
    with pytest.raises(ValueError, match="GSSAPI"):
        sasl.enabled_mechanisms({"sasl.enabled.mechanisms": "GSSAPI"}, "X")


@pytest.mark.parametrize(("token", "message"), [
    (b"\0alice\0alice-pw", None),
    (b"alice\0alice\0alice-pw", None),
    (b"\0alice\0wrong", "Invalid username or password"),
    (b"\0mallory\0alice-pw", "Invalid username or password"),
    (b"bob\0alice\0alice-pw", "authorization id"),
    (b"\0\0pw", "username not specified"),
    (b"\0alice\0", "password not specified"),
    (b"alice-pw", "expected 3 tokens"),
    (b"\0\xff\0x", "not UTF-8"),
])
def test_plain(token: bytes, message: str | None) -> None:
    server = sasl.PlainServer({"alice": "alice-pw"})
    if message is None:
        assert server.step(token) == b""
        assert server.complete and server.username == "alice"
    else:
        with pytest.raises(sasl.SaslError, match=message):
            server.step(token)
        assert not server.complete


def session(enabled: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-512")) -> SaslSession:
    cred = scram.make_credential("SCRAM-SHA-512", "bob-pw")
    return SaslSession(enabled, {"alice": "alice-pw"}, lambda m, u: cred if (m, u) == ("SCRAM-SHA-512", "bob") else None)


def test_plain_session_sets_the_principal() -> None:
    s = session()
    assert s.allows_before_auth(18) and s.allows_before_auth(17) and not s.allows_before_auth(3)
    assert s.handshake(1, "PLAIN").error == 0
    assert s.state is State.AUTHENTICATE and not s.raw_tokens
    assert s.allows_before_auth(36) and not s.allows_before_auth(17) and not s.allows_before_auth(18)
    result = s.token(b"\0alice\0alice-pw")
    assert (result.error, result.done) == (0, True)
    assert s.state is State.DONE and s.principal == "User:alice"


def test_scram_session_over_raw_v0_tokens() -> None:
    s = session()
    assert s.handshake(0, "SCRAM-SHA-512").error == 0
    assert s.raw_tokens
    client = scram.ScramClient("SCRAM-SHA-512", "bob", "bob-pw")
    first = s.token(client.first())
    assert first.error == 0 and not first.done
    final = s.token(client.final(first.token))
    assert final.error == 0 and final.done
    client.verify(final.token)
    assert s.principal == "User:bob" and not s.raw_tokens


def test_unknown_mechanism_lists_the_enabled_ones_and_fails_the_session() -> None:
    s = session()
    result = s.handshake(1, "GSSAPI")
    assert result.error == sasl.UNSUPPORTED_SASL_MECHANISM and result.mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert s.state is State.FAILED
    assert session(("PLAIN",)).handshake(1, "SCRAM-SHA-512").error == sasl.UNSUPPORTED_SASL_MECHANISM


def test_wrong_password_and_wrong_order_fail() -> None:
    s = session()
    s.handshake(1, "PLAIN")
    result = s.token(b"\0alice\0nope")
    assert result.error == sasl.SASL_AUTHENTICATION_FAILED and s.state is State.FAILED and s.principal is None
    assert s.token(b"\0alice\0alice-pw").error == sasl.ILLEGAL_SASL_STATE  # no retry on a failed session
    s = session()
    assert s.token(b"\0alice\0alice-pw").error == sasl.ILLEGAL_SASL_STATE  # token before the handshake
    assert s.principal is None
    s = session()
    s.handshake(1, "PLAIN")
    assert s.handshake(1, "PLAIN").error == sasl.ILLEGAL_SASL_STATE
