"""A throwaway CA, a broker certificate (for 127.0.0.1 and localhost) and a client certificate,
made with the openssl command line in a temporary directory."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TlsMaterial:
    ca: Path  # the CA certificate (truststore)
    server_cert: Path
    server_key: Path
    server_keystore: Path  # key + certificate in one PEM file (ssl.keystore.location)
    client_cert: Path
    client_key: Path
    client_subject: str  # the client certificate's subject as Kafka prints it


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_tls_material(d: Path) -> TlsMaterial:
    d.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=headwater-test-ca", cwd=d)
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, subject, ext in (("server", "/CN=localhost", ["-extfile", "san.ext"]),
                               ("client", "/C=US/O=Headwater/OU=ops/CN=alice", [])):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", subject, cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.pem", "-days", "2", *ext, cwd=d)
    (d / "server-keystore.pem").write_text((d / "server.key").read_text() + (d / "server.pem").read_text())
    return TlsMaterial(d / "ca.pem", d / "server.pem", d / "server.key", d / "server-keystore.pem",
                       d / "client.pem", d / "client.key", "CN=alice,OU=ops,O=Headwater,C=US")
