"""SCRAM against RFC 7677's SCRAM-SHA-256 test vector, both ends against each other, Kafka's
credential string, and AlterUserScramCredentials' checks."""

from __future__ import annotations

import base64

import pytest

from headwater.security import scram
from headwater.security.scram import ScramClient, ScramCredential, ScramError, ScramServer

# RFC 7677 section 3.
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_credential() -> ScramCredential:
    return scram.make_credential("SCRAM-SHA-256", "pencil", 4096, RFC_SALT)


def test_server_reproduces_rfc_7677() -> None:
    server = ScramServer("SCRAM-SHA-256", lambda user: rfc_credential() if user == "user" else None,
                         nonce=lambda: RFC_SERVER_NONCE)
    assert server.step(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert not server.complete
    assert server.step(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete and server.username == "user"


def test_client_reproduces_rfc_7677() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC_CLIENT_NONCE)
    assert client.first() == RFC_CLIENT_FIRST
    assert client.final(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    client.verify(RFC_SERVER_FINAL)
    assert client.complete
    with pytest.raises(ScramError):
        ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC_CLIENT_NONCE).verify(b"v=AAAA")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_client_and_server_agree_and_a_wrong_password_fails(mechanism: str) -> None:
    cred = scram.make_credential(mechanism, "s3cret,=", 4096)
    users = {"al,i=ce": cred}
    server = ScramServer(mechanism, users.get)
    client = ScramClient(mechanism, "al,i=ce", "s3cret,=")
    client.verify(server.step(client.final(server.step(client.first()))))
    assert server.username == "al,i=ce" and client.complete

    server = ScramServer(mechanism, users.get)
    client = ScramClient(mechanism, "al,i=ce", "wrong")
    with pytest.raises(ScramError, match="Invalid user credentials"):
        server.step(client.final(server.step(client.first())))
    assert not server.complete


@pytest.mark.parametrize("first", [
    b"y,,n=user,r=abc", b"p=tls-unique,,n=user,r=abc",  # channel binding flags other than 'n'
    b"n,,r=abc,n=user", b"n,,n=,r=abc", b"n,,n=user", b"n,a=other,n=user,r=abc", b"n,,n=us=2Xer,r=abc",
    b"\xff\xfe", b"", b"n,,n=user,r=a,b", b"n,,n=user,r=abc,tokenauth=true",
])
def test_malformed_or_refused_client_first(first: bytes) -> None:
    server = ScramServer("SCRAM-SHA-256", lambda user: rfc_credential())
    with pytest.raises(ScramError):
        server.step(first)
    with pytest.raises(ScramError):
        server.step(RFC_CLIENT_FINAL)  # no second chance


def test_unknown_user_fails_at_the_first_message() -> None:
    with pytest.raises(ScramError, match="Invalid user credentials"):
        ScramServer("SCRAM-SHA-256", lambda user: None).step(RFC_CLIENT_FIRST)


@pytest.mark.parametrize("final", [
    RFC_CLIENT_FINAL.replace(b"c=biws", b"c=eSws"),  # channel binding data differs from the gs2 header
    RFC_CLIENT_FINAL.replace(b"$k0,", b"$k1,"),  # nonce changed
    RFC_CLIENT_FINAL.replace(b"p=dHzb", b"p=dHzc"),  # proof changed
    RFC_CLIENT_FINAL.split(b",p=")[0],  # no proof
    RFC_CLIENT_FINAL[:-10] + b"!!!",  # proof not base64
    b"c=biws,r=x,p=AAAA",
])
def test_bad_client_final(final: bytes) -> None:
    server = ScramServer("SCRAM-SHA-256", lambda user: rfc_credential(), nonce=lambda: RFC_SERVER_NONCE)
    server.step(RFC_CLIENT_FIRST)
    with pytest.raises(ScramError):
        server.step(final)
    assert not server.complete


def test_credential_string_round_trip_in_kafkas_form() -> None:
    cred = rfc_credential()
    text = cred.to_config()
    assert text.startswith("salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key=") and text.endswith(",iterations=4096")
    assert ",server_key=" in text
    assert ScramCredential.from_config(text) == cred
    for bad in ("salt=x", "salt=!!,stored_key=AA==,server_key=AA==,iterations=1", "garbage",
                "salt=AA==,stored_key=AA==,server_key=AA==,iterations=many"):
        with pytest.raises(ValueError):
            ScramCredential.from_config(bad)


def upsert(user: str, mechanism: int = 2, iterations: int = 8192) -> scram.Upsertion:
    return scram.Upsertion(user, mechanism, iterations, b"salt", b"x" * 64)


def test_alterations_follow_kafkas_checks_per_user() -> None:
    current = {"bob": {"SCRAM-SHA-256": scram.make_credential("SCRAM-SHA-256", "pw").to_config()}}
    results, changed = scram.plan_alterations(current, [
        scram.Deletion("bob", 1),
        scram.Deletion("carol", 2),  # has none
        scram.Deletion("dave", 7),  # unknown mechanism
    ], [
        upsert("alice"),
        upsert("erin", iterations=100), upsert("frank", iterations=20000),
        upsert("gina"), upsert("gina"),  # twice in one request
        upsert(""),
        scram.Upsertion("hal", 2, 8192, b"", b""),
    ])
    codes = {r.user: r.error for r in results}
    assert codes == {"bob": 0, "carol": scram.RESOURCE_NOT_FOUND, "dave": scram.UNSUPPORTED_SASL_MECHANISM,
                     "alice": 0, "erin": scram.UNACCEPTABLE_CREDENTIAL, "frank": scram.UNACCEPTABLE_CREDENTIAL,
                     "gina": scram.DUPLICATE_RESOURCE, "": scram.UNACCEPTABLE_CREDENTIAL,
                     "hal": scram.UNACCEPTABLE_CREDENTIAL}
    assert set(changed) == {"bob", "alice"}
    assert changed["bob"] == {}
    alice = ScramCredential.from_config(changed["alice"]["SCRAM-SHA-512"])
    assert alice.iterations == 8192 and alice.salt == b"salt"
    assert alice == scram.credential_from_salted("SCRAM-SHA-512", b"x" * 64, b"salt", 8192)
