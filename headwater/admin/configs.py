"""``headwater configs``: kafka-configs.sh for topics, brokers and client quotas (users, clients)."""

from __future__ import annotations

import re
import secrets
import sys
import urllib.request
from pathlib import Path
from typing import Any

import click
from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    AlterUserScramCredentialsRequest,
    DescribeClientQuotasRequest,
    DescribeConfigsRequest,
    DescribeUserScramCredentialsRequest,
    IncrementalAlterConfigsRequest,
)

from headwater.admin.client import AdminClient, AdminError
from headwater.admin.options import command_config_option, connect
from headwater.protocol.config_resources import OP_DELETE, OP_SET, RESOURCE_BROKER, RESOURCE_TOPIC
from headwater.protocol.errors import ErrorCode
from headwater.security import scram

RESOURCE_TYPES = {"topics": RESOURCE_TOPIC, "brokers": RESOURCE_BROKER}
QUOTA_TYPES = {"users": "user", "clients": "client-id"}
MATCH_EXACT, MATCH_DEFAULT = 0, 1


def _split_configs(text: str) -> dict[str, str]:
    """kafka-configs' --add-config: k=v pairs separated by commas; [a,b] keeps commas inside a value."""
    out: dict[str, str] = {}
    depth = 0
    item = ""
    items = []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            items.append(item)
            item = ""
        else:
            item += ch
    items.append(item)
    for it in items:
        if not it.strip():
            continue
        if "=" not in it:
            raise click.BadParameter(f"{it!r} is not key=value", param_hint="--add-config")
        key, value = it.split("=", 1)
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[key.strip()] = value
    return out


def _label(names: dict[str, str | None], entity_type: str) -> str:
    if entity_type not in names:
        return ""
    value = names[entity_type]
    return "<default>" if value is None else value


def remaining_tokens(metrics_url: str) -> dict[tuple[str, str], float]:
    """(user, client id) -> tokens, from a broker's headwater_controller_mutation_remaining_tokens gauge."""
    try:
        with urllib.request.urlopen(metrics_url, timeout=5) as resp:
            text = resp.read().decode()
    except OSError as exc:
        raise AdminError(f"cannot read metrics from {metrics_url}: {exc}") from None
    out: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        if line.startswith("headwater_controller_mutation_remaining_tokens{"):
            labels_text, _, value = line.rpartition("} ")
            labels = dict(re.findall(r'(\w+)="([^"]*)"', labels_text))
            out[(labels.get("user", ""), labels.get("client_id", ""))] = float(value)
    return out


def _quota_label(entity: list[tuple[str, str | None]]) -> str:
    parts = []
    for entity_type, name in entity:
        kind = "user-principal" if entity_type == "user" else "client-id"
        parts.append(f"the default {kind}" if name is None else f"{kind} '{name}'")
    return ", ".join(parts)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--bootstrap-server", required=True, help="host:port of any broker.")
@click.option("--entity-type", "entity_types", multiple=True, type=click.Choice(["topics", "brokers", "users", "clients"]),
              help="What to configure (users and clients may be given together).")
@click.option("--entity-name", "entity_names", multiple=True, help="Name of the entity (one per --entity-type).")
@click.option("--entity-default", is_flag=True, help="The <default> entity (brokers, users or clients).")
@click.option("--all", "describe_all", is_flag=True,
              help="With --describe of topics or brokers: every config, with its source and synonyms, not only those set.")
@click.option("--describe", "action", flag_value="describe", help="Show configs.")
@click.option("--alter", "action", flag_value="alter", help="Change configs.")
@click.option("--add-config", default=None, help="k=v[,k=v] to set.")
@click.option("--delete-config", default=None, help="k[,k] to remove.")
@click.option("--metrics-url", default=None,
              help="With --describe of users/clients: also show each bucket's remaining tokens, read from the "
                   "controller's Prometheus endpoint (http://host:port/metrics).")
@command_config_option
def configs(bootstrap_server: str, entity_types: tuple[str, ...], entity_names: tuple[str, ...], entity_default: bool,
            describe_all: bool, action: str | None, add_config: str | None, delete_config: str | None, metrics_url: str | None,
            command_config: Path | None) -> None:
    """Describe or alter topic and broker configs, client quotas and users' SCRAM credentials, like kafka-configs.sh."""
    if action is None:
        raise click.UsageError("one of --describe or --alter is required")
    if not entity_types:
        raise click.UsageError("--entity-type is required")
    try:
        with connect(bootstrap_server, "headwater-configs", command_config) as client:
            if entity_types[0] in QUOTA_TYPES:
                sys.exit(_quotas(client, entity_types, entity_names, entity_default, action, add_config, delete_config,
                                 metrics_url))
            if entity_default and entity_types[0] != "brokers":
                raise click.UsageError("--entity-default applies to brokers, users and clients")
            name = "" if entity_default else entity_names[0] if entity_names else None
            sys.exit(_resource(client, entity_types[0], name, action, add_config, delete_config, describe_all))
    except AdminError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)


def _entity(entity_types: tuple[str, ...], entity_names: tuple[str, ...], entity_default: bool) -> list[tuple[str, str | None]]:
    if any(t not in QUOTA_TYPES for t in entity_types):
        raise click.UsageError("users and clients can be combined only with each other")
    names: list[str | None] = list(entity_names)
    if entity_default:
        names.append(None)
    if len(names) != len(entity_types):
        raise click.UsageError("give one --entity-name (or --entity-default) per --entity-type")
    return [(QUOTA_TYPES[t], n) for t, n in zip(entity_types, names, strict=True)]


def _quotas(client: AdminClient, entity_types: tuple[str, ...], entity_names: tuple[str, ...], entity_default: bool,
            action: str, add_config: str | None, delete_config: str | None, metrics_url: str | None = None) -> int:
    if action == "describe":
        components = []
        if entity_names or entity_default:
            for entity_type, name in _entity(entity_types, entity_names, entity_default):
                components.append(DescribeClientQuotasRequest.ComponentData(
                    entity_type=entity_type, match_type=MATCH_DEFAULT if name is None else MATCH_EXACT, match=name))
        else:
            components = [DescribeClientQuotasRequest.ComponentData(entity_type=QUOTA_TYPES[t], match_type=2, match=None)
                          for t in entity_types]
        resp = client.send(DescribeClientQuotasRequest, dict(components=components, strict=bool(entity_names or entity_default)))
        if resp.error_code:
            click.echo(f"Error: {resp.error_message or ErrorCode(resp.error_code).name}", err=True)
            return 1
        if entity_types == ("users",) and not entity_default:
            code = _describe_scram(client, entity_names[0] if entity_names else None)
            if code:
                return code
        tokens = remaining_tokens(metrics_url) if metrics_url else {}
        for entry in resp.entries or []:
            entity = [(e.entity_type, e.entity_name) for e in entry.entity]
            values = ",".join(f"{v.key}={v.value}" for v in entry.values)
            line = f"Quota configs for {_quota_label(entity)} are {values}"
            if metrics_url:
                names = dict(entity)
                bucket = (_label(names, "user"), _label(names, "client-id"))
                line += f" (remaining tokens {tokens[bucket]:.2f})" if bucket in tokens else " (remaining tokens: bucket not in use)"
            click.echo(line)
        return 0
    entity = _entity(entity_types, entity_names, entity_default)
    added = _split_configs(add_config or "")
    deleted = [k.strip() for k in (delete_config or "").split(",") if k.strip()]
    # SCRAM credentials are user configs too, altered through their own API (as kafka-configs does).
    scram_added = {k: v for k, v in added.items() if k in scram.MECHANISMS}
    scram_deleted = [k for k in deleted if k in scram.MECHANISMS]
    if scram_added or scram_deleted:
        if entity_types != ("users",) or entity_default:
            raise click.UsageError("SCRAM credentials can be set for a named user only (--entity-type users --entity-name U)")
        code = _alter_scram(client, entity_names[0], scram_added, scram_deleted)
        added = {k: v for k, v in added.items() if k not in scram_added}
        deleted = [k for k in deleted if k not in scram_deleted]
        if code or not (added or deleted):
            return code
    E = AlterClientQuotasRequest.EntryData
    ops = []
    for key, value in added.items():
        try:
            number = float(value)
        except ValueError:
            click.echo(f"Error: quota {key}={value!r} is not a number", err=True)
            return 1
        ops.append(E.OpData(key=key, value=number, remove=False))
    for key in deleted:
        ops.append(E.OpData(key=key, value=0.0, remove=True))
    if not ops:
        raise click.UsageError("--alter needs --add-config or --delete-config")
    resp = client.send(AlterClientQuotasRequest, dict(entries=[E(
        entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in entity], ops=ops)], validate_only=False))
    result = resp.entries[0]
    if result.error_code:
        click.echo(f"Error: {result.error_message or ErrorCode(result.error_code).name}", err=True)
        return 1
    click.echo(f"Completed updating config for {_quota_label(entity)}.")
    return 0


def _describe_scram(client: AdminClient, user: str | None) -> int:
    users = None if user is None else [DescribeUserScramCredentialsRequest.UserName(name=user)]
    resp = client.send(DescribeUserScramCredentialsRequest, dict(users=users))
    if resp.error_code:
        click.echo(f"Error: {resp.error_message or ErrorCode(resp.error_code).name}", err=True)
        return 1
    for result in resp.results:
        if result.error_code == ErrorCode.RESOURCE_NOT_FOUND:
            continue  # a user with quotas only
        if result.error_code:
            click.echo(f"Error: {result.error_message or ErrorCode(result.error_code).name}", err=True)
            return 1
        # Only the mechanism and iterations: the salt and keys stay on the brokers.
        values = ", ".join(f"{scram.MECHANISM_NAMES.get(c.mechanism, str(c.mechanism))}=iterations={c.iterations}"
                           for c in result.credential_infos)
        click.echo(f"SCRAM credential configs for user-principal '{result.user}' are {values}")
    return 0


def _scram_value(mechanism: str, text: str) -> tuple[int, str]:
    """``iterations=8192,password=...`` (kafka-configs' form; iterations default to 4096)."""
    fields = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or key.strip() not in ("iterations", "password"):
            raise click.BadParameter(f"{mechanism}=[{text}]: expected [iterations=N,]password=P", param_hint="--add-config")
        fields[key.strip()] = value
    if not fields.get("password"):
        raise click.BadParameter(f"{mechanism} needs password=...", param_hint="--add-config")
    iterations = fields.get("iterations", str(scram.DEFAULT_ITERATIONS)).strip()
    if not iterations.isdigit():
        raise click.BadParameter(f"{mechanism}: iterations={iterations!r} is not a number", param_hint="--add-config")
    return int(iterations), fields["password"]


def _alter_scram(client: AdminClient, user: str, added: dict[str, str], deleted: list[str]) -> int:
    R = AlterUserScramCredentialsRequest
    upsertions = []
    for mechanism, text in added.items():
        iterations, password = _scram_value(mechanism, text)
        # The password never leaves this process: the broker gets the salt and the salted password.
        salt = secrets.token_bytes(32)
        upsertions.append(R.ScramCredentialUpsertion(
            name=user, mechanism=scram.MECHANISM_IDS[mechanism], iterations=iterations, salt=salt,
            salted_password=scram.salted_password(mechanism, password, salt, iterations)))
    deletions = [R.ScramCredentialDeletion(name=user, mechanism=scram.MECHANISM_IDS[m]) for m in deleted]
    resp = client.send(R, dict(deletions=deletions, upsertions=upsertions))
    failed = [r for r in resp.results if r.error_code]
    for r in failed:
        click.echo(f"Error: {r.error_message or ErrorCode(r.error_code).name}", err=True)
    if failed:
        return 1
    click.echo(f"Completed updating config for user {user}.")
    return 0


# ConfigEntry.ConfigSource's names, as kafka-configs.sh prints them in synonyms={...}
SOURCE_NAMES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
                4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG"}


def _resource(client: AdminClient, entity_type: str, name: str | None, action: str,
              add_config: str | None, delete_config: str | None, describe_all: bool = False) -> int:
    resource_type = RESOURCE_TYPES[entity_type]
    if action == "describe":
        R = DescribeConfigsRequest.DescribeConfigsResource
        failed = 0
        for n in [name] if name is not None else _all_names(client, entity_type):
            # A broker's configs are described by that broker, as kafka-configs.sh does.
            node = int(n) if entity_type == "brokers" and n.isdigit() else None
            resp = client.send(DescribeConfigsRequest, dict(
                resources=[R(resource_type=resource_type, resource_name=n, configuration_keys=None)],
                include_synonyms=True, include_documentation=False), node_id=node)
            r = resp.results[0]
            if r.error_code:
                click.echo(f"Error: {r.error_message or ErrorCode(r.error_code).name}", err=True)
                failed = 1
                continue
            # Like kafka-configs.sh: what was set on the entity itself, or everything with --all.
            own_source = 1 if entity_type == "topics" else 3 if n == "" else 2
            if n == "":
                click.echo(f"Default configs for {entity_type} in the cluster are:")
            else:
                click.echo(f"{'All' if describe_all else 'Dynamic'} configs for {entity_type[:-1]} {n} are:")
            for c in sorted(r.configs, key=lambda c: c.name):
                if describe_all or c.config_source == own_source:
                    synonyms = ", ".join(f"{SOURCE_NAMES.get(s.source, 'UNKNOWN')}:{s.name}={_text(s.value)}"
                                         for s in c.synonyms)
                    click.echo(f"  {c.name}={_text(c.value)} sensitive={str(c.is_sensitive).lower()} synonyms={{{synonyms}}}")
        return failed
    if name is None:
        raise click.UsageError("--alter needs --entity-name (or --entity-default for brokers)")
    A = IncrementalAlterConfigsRequest.AlterConfigsResource
    C = A.AlterableConfig
    ops: list[Any] = [C(name=k, config_operation=OP_SET, value=v) for k, v in _split_configs(add_config or "").items()]
    ops += [C(name=k.strip(), config_operation=OP_DELETE, value=None) for k in (delete_config or "").split(",") if k.strip()]
    if not ops:
        raise click.UsageError("--alter needs --add-config or --delete-config")
    node = int(name) if entity_type == "brokers" and name.isdigit() else None
    resp = client.send(IncrementalAlterConfigsRequest, dict(resources=[A(resource_type=resource_type, resource_name=name,
                                                                          configs=ops)], validate_only=False), node_id=node)
    result = resp.responses[0]
    if result.error_code:
        click.echo(f"Error: {result.error_message or ErrorCode(result.error_code).name}", err=True)
        return 1
    if name == "":
        click.echo(f"Completed updating default config for {entity_type} in the cluster.")
    else:
        click.echo(f"Completed updating config for {entity_type[:-1]} {name}.")
    return 0


def _text(value: str | None) -> str:
    return "null" if value is None else value


def _all_names(client: AdminClient, entity_type: str) -> list[str]:
    meta = client.refresh()
    if entity_type == "topics":
        return sorted(t.name for t in meta.topics)
    return [str(n) for n in sorted(client.nodes)] + [""]  # and the cluster-wide default, as kafka-configs.sh
