"""Command-line option parsing shared by the ``headwater`` commands."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import click

from headwater.admin.client import AdminClient, AdminError
from headwater.admin.security import SecurityConfigError, load_command_config

F = TypeVar("F", bound=Callable[..., Any])


def key_values(items: Iterable[str], param_hint: str) -> dict[str, str]:
    """Repeated ``key=value`` options as a dict; anything else is a usage error naming the option."""
    out: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise click.BadParameter(f"{item!r} is not key=value", param_hint=param_hint)
        key, value = item.split("=", 1)
        out[key.strip()] = value.strip()
    return out


def command_config_option(f: F) -> F:
    """``--command-config FILE``: Kafka client properties (security.protocol, sasl.*, ssl.*, client.id)."""
    return click.option("--command-config", type=click.Path(path_type=Path, exists=True, dir_okay=False), default=None,
                        help="Client properties: security.protocol, sasl.mechanism, sasl.jaas.config (or "
                             "sasl.username/sasl.password), ssl.truststore.location, ssl.keystore.*, client.id.")(f)


def connect(bootstrap: str, client_id: str, command_config: Path | None) -> AdminClient:
    """An admin client with the security and client.id of ``--command-config``."""
    try:
        security, props = load_command_config(command_config)
    except SecurityConfigError as exc:
        raise AdminError(f"--command-config {command_config}: {exc}") from None
    return AdminClient(bootstrap, client_id=props.get("client.id", client_id), security=security)
