"""One broker with every kind of listener, for the security tests of a module to share.

PLAINTEXT (the broker's main port), SASL_PLAINTEXT, SASL_SSL, and SSL with client certificates
required. PLAIN users come from the JAAS config; the SCRAM-SHA-512 user is created through
``headwater configs`` over SASL_SSL, as an operator would.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner
from tls_material import TlsMaterial, make_tls_material

from headwater.admin.local import BrokerProcess, free_port
from headwater.cli import main as headwater_cli

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
SCRAM_USER, SCRAM_PASSWORD = "bob", "bob-secret"


@dataclass
class SecureBroker:
    broker: BrokerProcess
    tls: TlsMaterial
    sasl_plaintext: int
    sasl_ssl: int
    ssl: int
    admin_config: Path  # --command-config for the admin user over SASL_SSL

    def address(self, port: int) -> str:
        return f"127.0.0.1:{port}"

    def headwater(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``headwater ARGS`` in this process (no interpreter start-up per command)."""
        result = CliRunner().invoke(headwater_cli, list(args))
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return subprocess.CompletedProcess(["headwater", *args], result.exit_code, result.stdout, result.stderr)


def start_secure_broker(d: Path, extra: dict[str, str] | None = None) -> SecureBroker:
    tls = make_tls_material(d / "tls")
    plain, sasl_plain, sasl_ssl, ssl_port = free_port(), free_port(), free_port(), free_port()
    listeners = (f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl_plain},"
                 f"SASL_SSL://127.0.0.1:{sasl_ssl},SSL://127.0.0.1:{ssl_port}")
    broker = BrokerProcess(1, plain, d, props={
        "listeners": listeners,
        "advertised.listeners": listeners,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.location": str(tls.server_keystore),
        "ssl.truststore.location": str(tls.ca),
        "listener.name.ssl.ssl.client.auth": "required",
        **(extra or {}),
    })
    admin_config = d / "admin.properties"
    admin_config.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nssl.truststore.location={tls.ca}\n"
                            'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'username="admin" password="admin-secret";\n')
    sb = SecureBroker(broker, tls, sasl_plain, sasl_ssl, ssl_port, admin_config)
    broker.start()
    try:
        r = sb.headwater("configs", "--bootstrap-server", sb.address(sasl_ssl), "--command-config", str(admin_config),
                         "--alter", "--entity-type", "users", "--entity-name", SCRAM_USER,
                         "--add-config", f"SCRAM-SHA-512=[iterations=8192,password={SCRAM_PASSWORD}]")
        assert r.returncode == 0, r.stderr
    except BaseException:
        broker.stop()
        raise
    return sb
