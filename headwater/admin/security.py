"""Client security for the admin commands: ``--command-config FILE`` with Kafka client properties.

``security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), ``sasl.mechanism`` (PLAIN,
SCRAM-SHA-256, SCRAM-SHA-512), ``sasl.jaas.config`` or ``sasl.username``/``sasl.password``,
``ssl.truststore.location`` / ``ssl.ca.location``, ``ssl.keystore.*`` for a client certificate,
``ssl.endpoint.identification.algorithm``, and ``client.id``.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from headwater.security import sasl, tls

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class SecurityConfigError(ValueError):
    """A client property that cannot work; the message names it."""


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    username: str = ""
    password: str = ""
    ssl_context: ssl.SSLContext | None = None

    def sasl_client(self) -> sasl.SaslClient | None:
        if self.mechanism is None:
            return None
        return sasl.SaslClient(self.mechanism, self.username, self.password)


PLAINTEXT = ClientSecurity()


def read_properties(path: Path) -> dict[str, str]:
    """A client .properties file: ``key=value`` lines, ``#``/``!`` comments."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise SecurityConfigError(f"cannot read {path}: {exc.strerror}") from None
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise SecurityConfigError(f"{path}: cannot parse line {raw!r}: expected key=value")
        props[key.strip()] = value.strip()
    return props


def client_security(props: dict[str, str]) -> ClientSecurity:
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise SecurityConfigError(f"security.protocol={protocol!r} is not one of {', '.join(PROTOCOLS)}")
    try:
        context = tls.client_context(props) if protocol in ("SSL", "SASL_SSL") else None
        if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
            return ClientSecurity(protocol, ssl_context=context)
        # Kafka's default mechanism is GSSAPI, which this client does not have: say so plainly.
        mechanism = props.get("sasl.mechanism", props.get("sasl.mechanisms", "GSSAPI")).upper()
        if mechanism not in sasl.SUPPORTED_MECHANISMS:
            raise SecurityConfigError(f"sasl.mechanism={mechanism} is not supported (use one of "
                                      f"{', '.join(sasl.SUPPORTED_MECHANISMS)})")
        username, password = sasl.client_credentials(props)
    except ValueError as exc:
        raise SecurityConfigError(str(exc)) from None
    return ClientSecurity(protocol, mechanism, username, password, context)


def load_command_config(path: Path | None) -> tuple[ClientSecurity, dict[str, str]]:
    """The security settings and all properties of ``--command-config`` (none: plaintext)."""
    if path is None:
        return PLAINTEXT, {}
    props = read_properties(path)
    return client_security(props), props


def kafka_python_settings(props: dict[str, str]) -> dict[str, Any]:
    """The same properties as kafka-python client keyword arguments (for commands built on it)."""
    sec = client_security(props)
    out: dict[str, Any] = {"security_protocol": sec.protocol}
    if sec.ssl_context is not None:
        out["ssl_context"] = sec.ssl_context
    if sec.mechanism is not None:
        out.update(sasl_mechanism=sec.mechanism, sasl_plain_username=sec.username, sasl_plain_password=sec.password)
    if "client.id" in props:
        out["client_id"] = props["client.id"]
    return out
