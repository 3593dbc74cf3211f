"""The principal of a client certificate, in Kafka's form, from a certificate openssl made, and the
TLS contexts' refusals of settings that cannot work."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import pytest
from tls_material import TlsMaterial, make_tls_material

from headwater.security import tls


@pytest.fixture(scope="module")
def m(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_tls_material(tmp_path_factory.mktemp("tls"))


def test_subject_principal_is_the_rfc2253_subject_most_specific_first(m: TlsMaterial) -> None:
    decoded = ssl._ssl._test_decode_cert(str(m.client_cert))  # type: ignore[attr-defined]
    assert tls.subject_principal(decoded) == f"User:{m.client_subject}"
    assert tls.subject_principal({}) is None and tls.subject_principal(None) is None
    odd = {"subject": ((("commonName", "a,b+c"),), (("organizationName", " lead"),), (("emailAddress", "x@y"),))}
    assert tls.subject_principal(odd) == "User:1.2.840.113549.1.9.1=#1603784079,O=\\ lead,CN=a\\,b\\+c"


def test_contexts_from_pem_and_bad_settings(m: TlsMaterial, tmp_path: Path) -> None:
    ctx = tls.server_context({"ssl.keystore.location": str(m.server_keystore), "ssl.truststore.location": str(m.ca),
                              "ssl.client.auth": "requested"})
    assert ctx.verify_mode == ssl.CERT_OPTIONAL
    inline = tls.server_context({"ssl.keystore.certificate.chain": m.server_cert.read_text(),
                                 "ssl.keystore.key": m.server_key.read_text()})
    assert inline.verify_mode == ssl.CERT_NONE
    client = tls.client_context({"ssl.truststore.location": str(m.ca), "ssl.endpoint.identification.algorithm": ""})
    assert not client.check_hostname
    for props, message in (
        ({}, "needs ssl.keystore.location"),
        ({"ssl.keystore.location": str(tmp_path / "missing.pem")}, "cannot load the keystore"),
        ({"ssl.keystore.location": str(m.server_keystore), "ssl.client.auth": "required"}, "needs ssl.truststore"),
        ({"ssl.keystore.location": str(m.server_keystore), "ssl.client.auth": "maybe"}, "none, requested or required"),
        ({"ssl.keystore.location": str(m.server_keystore), "ssl.keystore.type": "JKS"}, "only PEM"),
        ({"ssl.keystore.certificate.chain": m.server_cert.read_text()}, "go together"),
    ):
        with pytest.raises(tls.TlsConfigError, match=message):
            tls.server_context(props)
    assert tls.listener_props({"ssl.client.auth": "none", "listener.name.ssl.ssl.client.auth": "required",
                               "listener.name.other.ssl.client.auth": "requested"}, "SSL") == {"ssl.client.auth": "required"}


def test_encrypted_private_key_with_ssl_key_password(m: TlsMaterial, tmp_path: Path) -> None:
    encrypted = tmp_path / "server-encrypted.key"
    subprocess.run(["openssl", "pkey", "-in", str(m.server_key), "-aes256", "-passout", "pass:key-pw", "-out",
                    str(encrypted)], check=True, capture_output=True, timeout=60)
    keystore = tmp_path / "encrypted-keystore.pem"
    keystore.write_text(encrypted.read_text() + m.server_cert.read_text())
    assert tls.server_context({"ssl.keystore.location": str(keystore), "ssl.key.password": "key-pw"})
    with pytest.raises(tls.TlsConfigError, match="cannot load the keystore"):
        tls.server_context({"ssl.keystore.location": str(keystore), "ssl.key.password": "wrong"})
