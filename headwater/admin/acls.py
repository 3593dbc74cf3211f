"""``headwater acls``: kafka-acls.sh over the Kafka protocol (CreateAcls, DescribeAcls, DeleteAcls).

The enum values are Kafka's wire values (``org.apache.kafka.common.acl``); this module speaks only
the protocol, so it works against Apache Kafka as well.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import click
from kafka.protocol.admin import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest

from headwater.admin.client import AdminClient, AdminError
from headwater.admin.options import command_config_option, connect
from headwater.protocol.errors import ErrorCode

# Kafka's wire values.
RESOURCE_TYPES = {"ANY": 1, "TOPIC": 2, "GROUP": 3, "CLUSTER": 4, "TRANSACTIONAL_ID": 5, "DELEGATION_TOKEN": 6,
                  "USER": 7}
PATTERN_TYPES = {"ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
OPERATIONS = {"ANY": 1, "ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7, "DESCRIBE": 8,
              "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11, "IDEMPOTENT_WRITE": 12,
              "CREATE_TOKENS": 13, "DESCRIBE_TOKENS": 14}
PERMISSIONS = {"ANY": 1, "DENY": 2, "ALLOW": 3}
CLUSTER_NAME = "kafka-cluster"
# Which operations each resource type accepts (kafka-acls.sh refuses the others).
VALID_OPERATIONS = {
    "TOPIC": {"READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "ALL"},
    "GROUP": {"READ", "DESCRIBE", "DELETE", "ALL"},
    "CLUSTER": {"CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER",
                "DESCRIBE", "ALL"},
    "TRANSACTIONAL_ID": {"DESCRIBE", "WRITE", "ALL"},
    "DELEGATION_TOKEN": {"DESCRIBE", "ALL"},
    "USER": {"CREATE_TOKENS", "DESCRIBE_TOKENS", "ALL"},
}
_NAMES = {kind: {v: k for k, v in table.items()} for kind, table in
          (("resource", RESOURCE_TYPES), ("pattern", PATTERN_TYPES), ("operation", OPERATIONS), ("permission", PERMISSIONS))}


def _op_key(text: str) -> str:
    """``Read``, ``read``, ``ClusterAction``, ``cluster-action``... -> ``READ``, ``CLUSTER_ACTION``."""
    flat = text.replace("-", "").replace("_", "").upper()
    for name in OPERATIONS:
        if name.replace("_", "") == flat:
            return name
    raise click.BadParameter(f"{text!r} is not an ACL operation; one of {', '.join(n.title() for n in OPERATIONS)}",
                             param_hint="--operation")


@dataclass(frozen=True, order=True)
class Pattern:
    resource_type: str
    name: str
    pattern_type: str

    def __str__(self) -> str:
        return f"ResourcePattern(resourceType={self.resource_type}, name={self.name}, patternType={self.pattern_type})"


@dataclass(frozen=True, order=True)
class Entry:
    principal: str
    host: str
    operation: str
    permission: str

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation}, "
                f"permissionType={self.permission})")


def _resources(topics: tuple[str, ...], groups: tuple[str, ...], cluster: bool, transactional_ids: tuple[str, ...],
               pattern_type: str) -> list[Pattern]:
    out = [Pattern("TOPIC", t, pattern_type) for t in topics]
    out += [Pattern("GROUP", g, pattern_type) for g in groups]
    out += [Pattern("TRANSACTIONAL_ID", t, pattern_type) for t in transactional_ids]
    if cluster:
        out.append(Pattern("CLUSTER", CLUSTER_NAME, "LITERAL" if pattern_type in ("LITERAL", "PREFIXED") else pattern_type))
    return out


def _entries(allow_principals: Iterable[str], deny_principals: Iterable[str], allow_hosts: tuple[str, ...],
             deny_hosts: tuple[str, ...], operations: Iterable[str]) -> list[Entry]:
    ops = list(operations)
    out = [Entry(p, h, op, "ALLOW") for p in allow_principals for h in (allow_hosts or ("*",)) for op in ops]
    out += [Entry(p, h, op, "DENY") for p in deny_principals for h in (deny_hosts or ("*",)) for op in ops]
    return out


def _producer_consumer(resources: list[Pattern], producer: bool, consumer: bool, idempotent: bool) -> dict[Pattern, list[str]]:
    """kafka-acls.sh's conveniences: the operations each resource gets."""
    out: dict[Pattern, list[str]] = {}
    topics = [r for r in resources if r.resource_type == "TOPIC"]
    if producer:
        for t in topics:
            out.setdefault(t, []).extend(["WRITE", "DESCRIBE", "CREATE"])
        for r in resources:
            if r.resource_type == "TRANSACTIONAL_ID":
                out.setdefault(r, []).extend(["WRITE", "DESCRIBE"])
        if idempotent:
            out.setdefault(Pattern("CLUSTER", CLUSTER_NAME, "LITERAL"), []).append("IDEMPOTENT_WRITE")
    if consumer:
        for t in topics:
            out.setdefault(t, []).extend(["READ", "DESCRIBE"])
        for r in resources:
            if r.resource_type == "GROUP":
                out.setdefault(r, []).append("READ")
    return {k: list(dict.fromkeys(v)) for k, v in out.items()}


def _describe(client: AdminClient, resource_type: str, name: str | None, pattern_type: str,
              principal: str | None = None) -> dict[Pattern, list[Entry]]:
    resp = client.send(DescribeAclsRequest, dict(
        resource_type_filter=RESOURCE_TYPES[resource_type], resource_name_filter=name,
        pattern_type_filter=PATTERN_TYPES[pattern_type], principal_filter=principal, host_filter=None,
        operation=OPERATIONS["ANY"], permission_type=PERMISSIONS["ANY"]))
    if resp.error_code:
        raise AdminError(f"DescribeAcls failed: {resp.error_message or ErrorCode(resp.error_code).name}")
    out: dict[Pattern, list[Entry]] = {}
    for r in resp.resources:
        pattern = Pattern(_NAMES["resource"][r.resource_type], r.resource_name,
                          _NAMES["pattern"].get(getattr(r, "pattern_type", 3), "LITERAL"))
        out[pattern] = sorted(Entry(a.principal, a.host, _NAMES["operation"][a.operation],
                                    _NAMES["permission"][a.permission_type]) for a in r.acls)
    return out


def _print_current(client: AdminClient, pattern: Pattern) -> None:
    current = _describe(client, pattern.resource_type, pattern.name, pattern.pattern_type).get(pattern, [])
    _print_block("Current ACLs for resource", pattern, current)


def _print_block(title: str, pattern: Pattern, entries: list[Entry]) -> None:
    click.echo(f"{title} `{pattern}`: ")
    for e in entries:
        click.echo(f" \t{e} ")
    click.echo("")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--bootstrap-server", required=True, help="host:port of any broker.")
@click.option("--add", "action", flag_value="add", help="Add ACLs.")
@click.option("--remove", "action", flag_value="remove", help="Remove ACLs.")
@click.option("--list", "action", flag_value="list", help="List ACLs.")
@click.option("--force", is_flag=True, help="With --remove: do not ask for confirmation.")
@click.option("--allow-principal", "allow_principals", multiple=True, help="Principal (Type:name) to allow (repeatable).")
@click.option("--deny-principal", "deny_principals", multiple=True, help="Principal (Type:name) to deny (repeatable).")
@click.option("--principal", "principals", multiple=True, help="With --list: only ACLs of this principal.")
@click.option("--allow-host", "allow_hosts", multiple=True, help="Host the allowed principals may connect from (default *).")
@click.option("--deny-host", "deny_hosts", multiple=True, help="Host the denied principals are refused from (default *).")
@click.option("--operation", "operations", multiple=True, help="Operation (Read, Write, Alter, ...; repeatable; default All).")
@click.option("--topic", "topics", multiple=True, help="Topic resource (repeatable; * for all).")
@click.option("--group", "groups", multiple=True, help="Consumer group resource (repeatable; * for all).")
@click.option("--cluster", is_flag=True, help="The cluster resource.")
@click.option("--transactional-id", "transactional_ids", multiple=True, help="Transactional id resource (repeatable).")
@click.option("--resource-pattern-type", default="LITERAL", show_default=True,
              type=click.Choice(["ANY", "MATCH", "LITERAL", "PREFIXED"], case_sensitive=False),
              help="Pattern type of the resources (ANY and MATCH only with --list and --remove).")
@click.option("--producer", is_flag=True, help="Convenience: WRITE, DESCRIBE, CREATE on the topics.")
@click.option("--consumer", is_flag=True, help="Convenience: READ, DESCRIBE on the topics, READ on the group.")
@click.option("--idempotent", is_flag=True, help="With --producer: IDEMPOTENT_WRITE on the cluster.")
@command_config_option
def acls(bootstrap_server: str, command_config: Path | None, action: str | None, force: bool,
         allow_principals: tuple[str, ...], deny_principals: tuple[str, ...], principals: tuple[str, ...],
         allow_hosts: tuple[str, ...], deny_hosts: tuple[str, ...], operations: tuple[str, ...], topics: tuple[str, ...],
         groups: tuple[str, ...], cluster: bool, transactional_ids: tuple[str, ...], resource_pattern_type: str,
         producer: bool, consumer: bool, idempotent: bool) -> None:
    """Add, remove or list ACLs, like kafka-acls.sh."""
    if action is None:
        raise click.UsageError("one of --add, --remove or --list is required")
    pattern_type = resource_pattern_type.upper()
    if action == "add" and pattern_type not in ("LITERAL", "PREFIXED"):
        raise click.UsageError("A '--resource-pattern-type' value of 'ANY' or 'MATCH' is not valid when adding acls.")
    if (producer or consumer) and action == "list":
        raise click.UsageError("--producer and --consumer are only valid with --add or --remove")
    if producer and not topics:
        raise click.UsageError("With --producer you must specify a --topic")
    if idempotent and not producer:
        raise click.UsageError("The --idempotent option is only available if --producer is set")
    # A consumer reads topics as a group member; the cluster and transactional ids are a producer's.
    if consumer and (not topics or not groups or (not producer and (cluster or transactional_ids))):
        raise click.UsageError("With --consumer you must specify a --topic and a --group and no --cluster or "
                               "--transactional-id option should be specified.")
    if (producer or consumer) and operations:
        raise click.UsageError("--operation cannot be combined with --producer or --consumer")
    if (producer or consumer) and (deny_principals or deny_hosts):
        raise click.UsageError("--deny-principal and --deny-host cannot be combined with --producer or --consumer")
    for p in (*allow_principals, *deny_principals, *principals):
        kind, sep, name = p.partition(":")
        if not sep or not kind or not name:
            raise click.BadParameter(f"{p!r} is not Type:name (e.g. User:alice)", param_hint="principal")
    resources = _resources(topics, groups, cluster, transactional_ids, pattern_type)
    ops = [_op_key(o) for o in operations] or ["ALL"]
    plan: dict[Pattern, list[str]]
    if producer or consumer:
        plan = _producer_consumer(resources, producer, consumer, idempotent)
    else:
        plan = {r: ops for r in resources}
    for r, r_ops in plan.items():
        bad = [o for o in r_ops if o not in VALID_OPERATIONS[r.resource_type]]
        if bad:
            raise click.UsageError(f"ResourceType {r.resource_type} only supports operations "
                                   f"{','.join(sorted(VALID_OPERATIONS[r.resource_type]))}")
    try:
        with connect(bootstrap_server, "headwater-acls", command_config) as client:
            if action == "list":
                sys.exit(_list(client, resources, principals))
            if action == "add":
                sys.exit(_add(client, plan, allow_principals, deny_principals, allow_hosts, deny_hosts))
            sys.exit(_remove(client, plan, resources, allow_principals, deny_principals, allow_hosts, deny_hosts,
                             force))
    except AdminError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)


def _list(client: AdminClient, resources: list[Pattern], principals: tuple[str, ...]) -> int:
    found: dict[Pattern, list[Entry]] = {}
    for principal in principals or (None,):
        if resources:
            for r in resources:
                for p, entries in _describe(client, r.resource_type, r.name, r.pattern_type, principal).items():
                    found.setdefault(p, []).extend(entries)
        else:
            for p, entries in _describe(client, "ANY", None, "ANY", principal).items():
                found.setdefault(p, []).extend(entries)
    for p in sorted(found):
        _print_block("Current ACLs for resource", p, sorted(set(found[p])))
    return 0


def _add(client: AdminClient, plan: dict[Pattern, list[str]], allow_principals: tuple[str, ...],
         deny_principals: tuple[str, ...], allow_hosts: tuple[str, ...], deny_hosts: tuple[str, ...]) -> int:
    if not allow_principals and not deny_principals:
        raise click.UsageError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    if not plan:
        raise click.UsageError("You must specify one of: --topic, --group, --cluster, --transactional-id")
    C = CreateAclsRequest.AclCreation
    failed = 0
    for pattern, ops in plan.items():
        entries = _entries(allow_principals, deny_principals, allow_hosts, deny_hosts, ops)
        _print_block("Adding ACLs for resource", pattern, entries)
        creations = [C(resource_type=RESOURCE_TYPES[pattern.resource_type], resource_name=pattern.name,
                       resource_pattern_type=PATTERN_TYPES[pattern.pattern_type], principal=e.principal, host=e.host,
                       operation=OPERATIONS[e.operation], permission_type=PERMISSIONS[e.permission]) for e in entries]
        resp = client.send(CreateAclsRequest, dict(creations=creations))
        for e, r in zip(entries, resp.results, strict=False):
            if r.error_code:
                failed = 1
                click.echo(f"Error while adding ACL {e} on {pattern}: "
                           f"{r.error_message or ErrorCode(r.error_code).name}", err=True)
    if failed:
        return 1
    for pattern in plan:
        _print_current(client, pattern)
    return 0


def _remove(client: AdminClient, plan: dict[Pattern, list[str]], resources: list[Pattern],
            allow_principals: tuple[str, ...], deny_principals: tuple[str, ...], allow_hosts: tuple[str, ...],
            deny_hosts: tuple[str, ...], force: bool) -> int:
    if not resources:
        raise click.UsageError("You must specify one of: --topic, --group, --cluster, --transactional-id")
    F = DeleteAclsRequest.DeleteAclsFilter
    failed = 0
    for pattern, ops in plan.items():
        if allow_principals or deny_principals:
            # Exactly these ACLs (the operation defaults to All, as in kafka-acls.sh).
            entries = _entries(allow_principals, deny_principals, allow_hosts, deny_hosts, ops)
            filters = [F(resource_type_filter=RESOURCE_TYPES[pattern.resource_type], resource_name_filter=pattern.name,
                         pattern_type_filter=PATTERN_TYPES[pattern.pattern_type], principal_filter=e.principal,
                         host_filter=e.host, operation=OPERATIONS[e.operation],
                         permission_type=PERMISSIONS[e.permission]) for e in entries]
            question = f"Are you sure you want to remove ACLs: \n\t{chr(10).join(map(str, entries))} \n from resource `{pattern}`? (y/n)"
        else:
            # No principal: every ACL of the resource (kafka-acls.sh's behaviour).
            filters = [F(resource_type_filter=RESOURCE_TYPES[pattern.resource_type], resource_name_filter=pattern.name,
                         pattern_type_filter=PATTERN_TYPES[pattern.pattern_type], principal_filter=None, host_filter=None,
                         operation=OPERATIONS["ANY"], permission_type=PERMISSIONS["ANY"])]
            question = f"Are you sure you want to delete all ACLs for resource filter `{pattern}`? (y/n)"
        if not force and not click.confirm(question, default=False):
            continue
        resp = client.send(DeleteAclsRequest, dict(filters=filters))
        for r in resp.filter_results:
            if r.error_code:
                failed = 1
                click.echo(f"Error while removing ACLs from {pattern}: {r.error_message or ErrorCode(r.error_code).name}",
                           err=True)
        if pattern.pattern_type in ("LITERAL", "PREFIXED"):
            _print_current(client, pattern)
    return failed

