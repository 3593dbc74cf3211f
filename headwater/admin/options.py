"""Command-line option parsing shared by the ``headwater`` commands."""

from __future__ import annotations

from collections.abc import Iterable

import click


def key_values(items: Iterable[str], param_hint: str) -> dict[str, str]:
    """Repeated ``key=value`` options as a dict; anything else is a usage error naming the option."""
    out: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise click.BadParameter(f"{item!r} is not key=value", param_hint=param_hint)
        key, value = item.split("=", 1)
        out[key.strip()] = value.strip()
    return out
