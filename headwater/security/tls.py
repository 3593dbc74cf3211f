"""TLS from PEM files with Kafka's ``ssl.*`` keys, and the principal of a client certificate.

Keys (each may be given per listener as ``listener.name.<l>.ssl.<key>``):

- ``ssl.keystore.type``: PEM (the only type here; JKS and PKCS12 need a JVM keystore reader).
- ``ssl.keystore.location``: a PEM file with the private key and the certificate chain, or
  ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key``: the PEM text itself (Kafka's way), or
  a path to a PEM file when the value does not start with ``-----BEGIN``.
- ``ssl.key.password``: the private key's password, when it is encrypted.
- ``ssl.truststore.location`` (or ``ssl.truststore.certificates``, PEM text): the CAs that sign
  the peers' certificates. Clients also accept librdkafka's ``ssl.ca.location``.
- ``ssl.client.auth``: none | requested | required (server side).
- ``ssl.endpoint.identification.algorithm``: https (default: check the host name) or empty (client side).
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any


class TlsConfigError(ValueError):
    """A TLS setting that cannot work; the message names the key."""


CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def listener_props(props: Mapping[str, str], listener: str) -> dict[str, str]:
    """The ``ssl.*`` keys as a listener sees them: its ``listener.name.<l>.`` overrides over the plain keys."""
    prefix = f"listener.name.{listener.lower()}."
    out = {k: v for k, v in props.items() if k.startswith("ssl.")}
    out.update({k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix + "ssl.")})
    return out


@contextmanager
def _pem_file(value: str) -> Iterator[str]:
    """A path for ``load_cert_chain``: the value itself, or a private temp file holding inline PEM text."""
    if not value.lstrip().startswith("-----BEGIN"):
        yield value
        return
    fd, path = tempfile.mkstemp(suffix=".pem")  # mode 0600: the key is readable by this user only
    try:
        with os.fdopen(fd, "w") as f:
            f.write(value.replace("\\n", "\n"))
        yield path
    finally:
        os.unlink(path)


def _check_type(props: Mapping[str, str], key: str) -> None:
    kind = props.get(key, "PEM").upper()
    if kind != "PEM":
        raise TlsConfigError(f"{key}={kind}: only PEM is supported (convert with openssl)")


def _load_keystore(ctx: ssl.SSLContext, props: Mapping[str, str], required: bool) -> None:
    _check_type(props, "ssl.keystore.type")
    password = props.get("ssl.key.password") or None
    location = props.get("ssl.keystore.location")
    chain, key = props.get("ssl.keystore.certificate.chain"), props.get("ssl.keystore.key")
    try:
        if location:
            ctx.load_cert_chain(location, password=password)
        elif chain and key:
            with _pem_file(chain) as chain_path, _pem_file(key) as key_path:
                ctx.load_cert_chain(chain_path, key_path, password=password)
        elif chain or key:
            raise TlsConfigError("ssl.keystore.certificate.chain and ssl.keystore.key go together")
        elif required:
            raise TlsConfigError("an SSL listener needs ssl.keystore.location (or ssl.keystore.certificate.chain "
                                 "and ssl.keystore.key)")
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"cannot load the keystore {location or '(inline PEM)'}: {exc}") from None


def _load_truststore(ctx: ssl.SSLContext, props: Mapping[str, str]) -> bool:
    _check_type(props, "ssl.truststore.type")
    location = props.get("ssl.truststore.location") or props.get("ssl.ca.location")
    inline = props.get("ssl.truststore.certificates")
    try:
        if location:
            ctx.load_verify_locations(cafile=location)
            return True
        if inline:
            ctx.load_verify_locations(cadata=inline.replace("\\n", "\n"))
            return True
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"cannot load the truststore {location or '(inline PEM)'}: {exc}") from None
    return False


def server_context(props: Mapping[str, str]) -> ssl.SSLContext:
    """The context of an SSL / SASL_SSL listener (``props`` as :func:`listener_props` gives them)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_keystore(ctx, props, required=True)
    auth = props.get("ssl.client.auth", "none").lower()
    if auth not in CLIENT_AUTH:
        raise TlsConfigError(f"ssl.client.auth={auth!r} is not none, requested or required")
    has_trust = _load_truststore(ctx, props)
    if auth != "none" and not has_trust:
        raise TlsConfigError(f"ssl.client.auth={auth} needs ssl.truststore.location to check client certificates")
    ctx.verify_mode = CLIENT_AUTH[auth]
    return ctx


def client_context(props: Mapping[str, str]) -> ssl.SSLContext:
    """A client's context: the truststore (else the system CAs), an optional keystore for client
    auth, and host name checking unless ``ssl.endpoint.identification.algorithm`` is empty."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if not _load_truststore(ctx, props):
        ctx.load_default_certs()
    _load_keystore(ctx, props, required=False)
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("", "https", "none"):
        raise TlsConfigError(f"ssl.endpoint.identification.algorithm={algorithm!r} is not https or empty")
    ctx.check_hostname = algorithm == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


# --- the principal of a certificate ---------------------------------------------------------------------

# X500Principal.getName(RFC2253) keywords; other attributes are written as their dotted OID.
_RFC2253_KEYWORDS = {
    "commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
    "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
    "domainComponent": "DC", "userId": "UID",
}
_OIDS = {
    "emailAddress": "1.2.840.113549.1.9.1", "serialNumber": "2.5.4.5", "surname": "2.5.4.4",
    "givenName": "2.5.4.42", "title": "2.5.4.12", "initials": "2.5.4.43", "generationQualifier": "2.5.4.44",
    "dnQualifier": "2.5.4.46", "pseudonym": "2.5.4.65", "businessCategory": "2.5.4.15", "postalCode": "2.5.4.17",
}


def _escape_rfc2253(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (i == 0 and ch in "# ") or (i == len(value) - 1 and ch == " "):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _der_string_hex(value: str) -> str:
    # Attributes without a keyword are written as '#' + the DER of the value; email is an IA5String.
    data = value.encode()
    length = bytes([len(data)]) if len(data) < 128 else bytes([0x81, len(data)]) if len(data) < 256 \
        else bytes([0x82, len(data) >> 8, len(data) & 0xFF])
    return "#" + (b"\x16" + length + data).hex()


def subject_principal(peercert: Mapping[str, Any] | None) -> str | None:
    """``User:<subject DN>`` in the format Kafka's default principal builder gives
    (``X500Principal.getName()``: RFC 2253, most specific RDN first, e.g. ``CN=x,OU=y,O=z``);
    None without a verified certificate."""
    if not peercert or "subject" not in peercert:
        return None
    rdns = []
    for rdn in reversed(peercert["subject"]):
        avas = []
        for name, value in rdn:
            if name in _RFC2253_KEYWORDS:
                avas.append(f"{_RFC2253_KEYWORDS[name]}={_escape_rfc2253(value)}")
            else:
                avas.append(f"{_OIDS.get(name, name)}={_der_string_hex(value)}")
        rdns.append("+".join(avas))
    return "User:" + ",".join(rdns)
