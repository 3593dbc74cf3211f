"""``headwater groups``: kafka-consumer-groups.sh's actions and output, over the Kafka protocol only.

Every group request goes to the group's coordinator (FindCoordinator first, and again after
NOT_COORDINATOR); log-end offsets come from each partition's leader (ListOffsets). Offsets are
reset with an OffsetCommit of generation -1, which a coordinator accepts only while the group
has no members, the same rule kafka-consumer-groups.sh states before it tries.
"""

from __future__ import annotations

import struct
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from kafka.protocol.admin.groups import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

from headwater.admin.client import AdminClient, AdminError
from headwater.admin.security import SecurityConfigError, load_command_config
from headwater.protocol.errors import ErrorCode

CLIENT_ID = "headwater-groups"
LATEST, EARLIEST = -1, -2
RETRIABLE = {ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR}
OFFSET_FETCH_SINGLE_MAX = 7  # OffsetFetch v8+ batches groups; one group per request needs no more
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def _error(code: int) -> str:
    return ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)


class GroupError(Exception):
    """A group-level error the user must see (the group does not exist, is active, ...)."""


def decode_assignment(raw: bytes) -> dict[str, list[int]]:
    """A consumer protocol assignment (every version starts with its topic partitions)."""
    out: dict[str, list[int]] = {}
    if len(raw) < 6:
        return out
    pos = 2  # version
    try:
        (count,) = _I32.unpack_from(raw, pos)
        pos += 4
        for _ in range(max(count, 0)):
            (n,) = _I16.unpack_from(raw, pos)
            topic = raw[pos + 2:pos + 2 + n].decode()
            pos += 2 + n
            (parts,) = _I32.unpack_from(raw, pos)
            pos += 4
            out[topic] = [_I32.unpack_from(raw, pos + 4 * i)[0] for i in range(max(parts, 0))]
            pos += 4 * max(parts, 0)
    except (struct.error, UnicodeDecodeError):
        return {}
    return out


@dataclass(frozen=True)
class MemberInfo:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: dict[str, list[int]]


@dataclass(frozen=True)
class GroupInfo:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    coordinator: int
    members: tuple[MemberInfo, ...]


class Groups:
    def __init__(self, client: AdminClient) -> None:
        self.client = client
        self._coordinators: dict[str, int] = {}

    # --- coordinator ------------------------------------------------------------------------------

    def coordinator(self, group: str) -> int:
        found = self._coordinators.get(group)
        if found is not None:
            return found
        deadline = time.monotonic() + self.client.timeout_s
        while True:
            resp = self.client.send(FindCoordinatorRequest, dict(key=group, key_type=0, coordinator_keys=[group]),
                                    max_version=4)
            entry = resp.coordinators[0] if getattr(resp, "coordinators", None) else resp
            if entry.error_code == 0:
                self._coordinators[group] = entry.node_id
                return int(entry.node_id)
            if entry.error_code not in RETRIABLE or time.monotonic() > deadline:
                raise GroupError(f"cannot find the coordinator of group '{group}': {_error(entry.error_code)}")
            time.sleep(0.2)

    def _to_coordinator(self, group: str, request_cls: Any, fields: dict[str, Any], error_of: Callable[[Any], int],
                        max_version: int | None = None) -> Any:
        """Send to the group's coordinator; find it again and re-send while it moves or loads."""
        deadline = time.monotonic() + self.client.timeout_s
        while True:
            resp = self.client.send(request_cls, fields, node_id=self.coordinator(group), max_version=max_version)
            code = error_of(resp)
            if code not in RETRIABLE or time.monotonic() > deadline:
                return resp
            self._coordinators.pop(group, None)
            self.client.refresh()
            time.sleep(0.2)

    # --- reading ------------------------------------------------------------------------------------

    def list_groups(self) -> list[tuple[str, str]]:
        """(group id, state) of every group on every broker."""
        self.client.refresh()
        out = []
        deadline = time.monotonic() + self.client.timeout_s
        for node_id in sorted(self.client.nodes):
            while True:
                resp = self.client.send(ListGroupsRequest, dict(states_filter=[], types_filter=[]), node_id=node_id,
                                        max_version=4)
                # A broker still loading an offsets partition it just took over answers in a moment.
                if resp.error_code not in RETRIABLE or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            if resp.error_code:
                raise GroupError(f"ListGroups failed on broker {node_id}: {_error(resp.error_code)}")
            out += [(g.group_id, getattr(g, "group_state", "") or "") for g in resp.groups]
        return sorted(out)

    def describe(self, group: str) -> GroupInfo:
        resp = self._to_coordinator(group, DescribeGroupsRequest, dict(groups=[group], include_authorized_operations=False),
                                    lambda r: r.groups[0].error_code)
        g = resp.groups[0]
        if g.error_code:
            raise GroupError(f"describing group '{group}' failed: {_error(g.error_code)}")
        members = tuple(MemberInfo(m.member_id, getattr(m, "group_instance_id", None), m.client_id, m.client_host,
                                   decode_assignment(bytes(m.member_assignment))) for m in g.members)
        return GroupInfo(group, g.group_state, g.protocol_type, g.protocol_data, self.coordinator(group), members)

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        resp = self._to_coordinator(group, OffsetFetchRequest, dict(group_id=group, topics=None, require_stable=False),
                                    lambda r: r.error_code, max_version=OFFSET_FETCH_SINGLE_MAX)
        if resp.error_code:
            raise GroupError(f"fetching the offsets of group '{group}' failed: {_error(resp.error_code)}")
        return {(t.name, p.partition_index): p.committed_offset for t in resp.topics for p in t.partitions
                if p.committed_offset >= 0}

    def partitions(self, topics: Iterable[str]) -> dict[tuple[str, int], int]:
        """(topic, partition) -> leader id."""
        names = sorted(set(topics))
        meta = self.client.refresh(names)
        out = {}
        for t in meta.topics:
            if t.error_code:
                raise GroupError(f"topic '{t.name}': {_error(t.error_code)}")
            for p in t.partitions:
                out[(t.name, p.partition_index)] = p.leader_id
        return out

    def list_offsets(self, tps: Iterable[tuple[str, int]], timestamp: int) -> dict[tuple[str, int], int]:
        """Each partition's offset for a ListOffsets timestamp (-1 latest, -2 earliest); -1 if none."""
        wanted = sorted(set(tps))
        leaders = self.partitions(t for t, _ in wanted)
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for tp in wanted:
            if tp not in leaders:
                raise GroupError(f"partition {tp[0]}-{tp[1]} does not exist")
            by_leader.setdefault(leaders[tp], []).append(tp)
        out: dict[tuple[str, int], int] = {}
        T = ListOffsetsRequest.ListOffsetsTopic
        P = T.ListOffsetsPartition
        for leader, items in by_leader.items():
            topics: dict[str, list[Any]] = {}
            for t, p in items:
                topics.setdefault(t, []).append(P(partition_index=p, current_leader_epoch=-1, timestamp=timestamp,
                                                  max_num_offsets=1))
            resp = self.client.send(ListOffsetsRequest, dict(replica_id=-1, isolation_level=0, timeout_ms=30000,
                                                             topics=[T(name=n, partitions=ps) for n, ps in topics.items()]),
                                    node_id=leader)
            for t in resp.topics:
                for p in t.partitions:
                    if p.error_code:
                        raise GroupError(f"ListOffsets of {t.name}-{p.partition_index}: {_error(p.error_code)}")
                    out[(t.name, p.partition_index)] = p.offset
        return out

    # --- writing ------------------------------------------------------------------------------------

    def commit(self, group: str, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        T = OffsetCommitRequest.OffsetCommitRequestTopic
        P = T.OffsetCommitRequestPartition
        topics: dict[str, list[Any]] = {}
        for (t, p), o in sorted(offsets.items()):
            topics.setdefault(t, []).append(P(partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                                              committed_metadata=""))
        resp = self._to_coordinator(group, OffsetCommitRequest, dict(
            group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            retention_time_ms=-1, topics=[T(name=n, partitions=ps) for n, ps in topics.items()]),
            lambda r: max((p.error_code for t in r.topics for p in t.partitions), key=lambda c: c in RETRIABLE,
                          default=0), max_version=8)
        return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}

    def delete(self, groups: list[str]) -> dict[str, int]:
        out = {}
        for g in groups:
            resp = self._to_coordinator(g, DeleteGroupsRequest, dict(groups_names=[g]), lambda r: r.results[0].error_code)
            out[g] = resp.results[0].error_code
        return out

    def delete_offsets(self, group: str, tps: list[tuple[str, int]]) -> tuple[int, dict[tuple[str, int], int]]:
        T = OffsetDeleteRequest.OffsetDeleteRequestTopic
        P = T.OffsetDeleteRequestPartition
        topics: dict[str, list[Any]] = {}
        for t, p in tps:
            topics.setdefault(t, []).append(P(partition_index=p))
        resp = self._to_coordinator(group, OffsetDeleteRequest, dict(
            group_id=group, topics=[T(name=n, partitions=ps) for n, ps in topics.items()]), lambda r: r.error_code)
        return resp.error_code, {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


# --- output ---------------------------------------------------------------------------------------------


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Columns as wide as their widest cell, left-aligned and one space apart (kafka-consumer-groups.sh's layout)."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]
    return [" ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in [header, *rows]]


def describe_offsets(g: Groups, group: str) -> list[str]:
    info = g.describe(group)
    if info.state == "Dead":
        raise GroupError(f"Consumer group '{group}' does not exist.")
    committed = g.committed(group)
    owner: dict[tuple[str, int], MemberInfo] = {}
    for member in info.members:
        for t, ps in member.assignment.items():
            for p in ps:
                owner[(t, p)] = member
    tps = sorted(set(committed) | set(owner))
    ends = g.list_offsets(tps, LATEST) if tps else {}
    lines = []
    if not info.members:
        lines.append(f"Consumer group '{group}' has no active members.")
        lines.append("")
    rows = []
    for tp in tps:
        m: MemberInfo | None = owner.get(tp)
        current = committed.get(tp)
        end = ends.get(tp, -1)
        lag = "-" if current is None or end < 0 else str(max(end - current, 0))
        rows.append([group, tp[0], str(tp[1]), "-" if current is None else str(current), str(end) if end >= 0 else "-",
                     lag, m.member_id if m else "-", (m.host or "-") if m else "-", m.client_id if m else "-"])
    lines += table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                    "CLIENT-ID"], rows)
    return lines


def describe_members(g: Groups, group: str, verbose: bool) -> list[str]:
    info = g.describe(group)
    if info.state == "Dead":
        raise GroupError(f"Consumer group '{group}' does not exist.")
    if not info.members:
        return [f"Consumer group '{group}' has no active members."]
    header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"] + (["ASSIGNMENT"] if verbose else [])
    rows = []
    for m in info.members:
        row = [group, m.member_id, m.host or "-", m.client_id, str(sum(len(ps) for ps in m.assignment.values()))]
        if verbose:
            row.append(",".join(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(m.assignment.items())) or "-")
        rows.append(row)
    return table(header, rows)


def describe_state(g: Groups, group: str) -> list[str]:
    info = g.describe(group)
    node = g.client.nodes.get(info.coordinator)
    where = f"{node.host}:{node.port}  ({info.coordinator})" if node else f"({info.coordinator})"
    return table(["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                 [[group, where, info.protocol or "", info.state, str(len(info.members))]])


def parse_topic_partitions(specs: Iterable[str]) -> list[tuple[str, list[int] | None]]:
    """``--topic t`` or ``--topic t:0,2``."""
    out = []
    for spec in specs:
        name, _, parts = spec.partition(":")
        if not name:
            raise click.BadParameter(f"{spec!r}: expected a topic name, optionally with :partitions", param_hint="--topic")
        try:
            out.append((name, [int(p) for p in parts.split(",")] if parts else None))
        except ValueError:
            raise click.BadParameter(f"{spec!r}: partitions must be numbers like t:0,1", param_hint="--topic") from None
    return out


def parse_datetime(text: str) -> int:
    """Kafka's --to-datetime: 'YYYY-MM-DDTHH:mm:SS.sss', optionally with a zone ('Z', '+01:00'); UTC without one."""
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(f"{text!r}: expected YYYY-MM-DDTHH:mm:SS.sss", param_hint="--to-datetime") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def plan_reset(g: Groups, group: str, scope: list[tuple[str, list[int] | None]] | None, how: str,
               value: int | None) -> dict[tuple[str, int], int]:
    info = g.describe(group)
    if info.state not in ("Empty", "Dead"):
        raise GroupError(f"Assignments can only be reset if the group '{group}' is inactive, but the current state is "
                         f"{info.state}.")
    committed = g.committed(group)
    if scope is None:  # --all-topics: what the group has offsets for
        tps = sorted(committed)
    else:
        known = g.partitions(t for t, _ in scope)
        tps = []
        for t, ps in scope:
            have = sorted(p for tt, p in known if tt == t)
            for p in ps if ps is not None else have:
                if p not in have:
                    raise GroupError(f"partition {t}-{p} does not exist")
                tps.append((t, p))
    if not tps:
        return {}
    earliest = g.list_offsets(tps, EARLIEST)
    latest = g.list_offsets(tps, LATEST)
    out = {}
    for tp in tps:
        lo, hi = earliest[tp], latest[tp]
        if how == "earliest":
            target = lo
        elif how == "latest":
            target = hi
        elif how == "offset":
            assert value is not None
            target = value
        elif how == "shift":
            assert value is not None
            target = committed.get(tp, lo) + value
        else:  # datetime: the first offset at or after it, or the end if none is
            assert value is not None
            found = g.list_offsets([tp], value)[tp]
            target = found if found >= 0 else hi
        out[tp] = min(max(target, lo), hi)  # out of range is clamped, as Kafka's tool does
    return out


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--bootstrap-server", required=True, help="host:port of any broker.")
@click.option("--command-config", type=click.Path(path_type=Path, exists=True, dir_okay=False), default=None,
              help="Client properties: security.protocol, sasl.*, ssl.*, client.id, request.timeout.ms.")
@click.option("--list", "action", flag_value="list", help="List every group.")
@click.option("--describe", "action", flag_value="describe", help="Describe a group: offsets and lag by default.")
@click.option("--reset-offsets", "action", flag_value="reset", help="Reset a group's offsets (group must be inactive).")
@click.option("--delete", "action", flag_value="delete", help="Delete groups (they must be empty).")
@click.option("--delete-offsets", "action", flag_value="delete-offsets", help="Delete a group's offsets of --topic.")
@click.option("--group", "groups", multiple=True, help="Group id (repeatable for --delete).")
@click.option("--all-groups", is_flag=True, help="With --describe or --delete: every group.")
@click.option("--members", is_flag=True, help="With --describe: the members.")
@click.option("--state", is_flag=True, help="With --describe: the group's state.")
@click.option("--offsets", is_flag=True, help="With --describe: offsets and lag (the default).")
@click.option("--verbose", is_flag=True, help="With --describe --members: each member's partitions.")
@click.option("--topic", "topics", multiple=True, help="topic or topic:0,1 (repeatable).")
@click.option("--all-topics", is_flag=True, help="With --reset-offsets: every topic the group has offsets for.")
@click.option("--to-earliest", "how", flag_value="earliest", help="Reset to the earliest offset.")
@click.option("--to-latest", "how", flag_value="latest", help="Reset to the latest offset.")
@click.option("--to-offset", type=int, default=None, help="Reset to this offset.")
@click.option("--shift-by", type=int, default=None, help="Move the committed offset by this many (+/-).")
@click.option("--to-datetime", default=None, help="Reset to the first offset at or after YYYY-MM-DDTHH:mm:SS.sss.")
@click.option("--dry-run", "execute", flag_value=False, default=False, help="Only show the new offsets (default).")
@click.option("--execute", "execute", flag_value=True, help="Commit the new offsets.")
def groups(bootstrap_server: str, command_config: Path | None, action: str | None, groups: tuple[str, ...],
           all_groups: bool, members: bool, state: bool, offsets: bool, verbose: bool, topics: tuple[str, ...],
           all_topics: bool, how: str | None, to_offset: int | None, shift_by: int | None, to_datetime: str | None,
           execute: bool) -> None:
    """List, describe, reset, and delete consumer groups, like kafka-consumer-groups.sh."""
    if action is None:
        raise click.UsageError("one of --list, --describe, --reset-offsets, --delete, --delete-offsets is required")
    try:
        # Its security settings too: every connection (bootstrap and coordinators) authenticates alike.
        security, props = load_command_config(command_config)
    except SecurityConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--command-config") from None
    try:
        timeout_s = int(props.get("request.timeout.ms", "30000")) / 1000
    except ValueError:
        raise click.BadParameter("request.timeout.ms must be a number", param_hint="--command-config") from None
    try:
        with AdminClient(bootstrap_server, client_id=props.get("client.id", CLIENT_ID), timeout_s=timeout_s,
                         security=security) as client:
            g = Groups(client)
            sys.exit(_run(g, action, list(groups), all_groups, members, state, verbose, topics, all_topics, how,
                          to_offset, shift_by, to_datetime, execute))
    except (AdminError, GroupError) as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)


def _run(g: Groups, action: str, group_ids: list[str], all_groups: bool, members: bool, state: bool, verbose: bool,
         topics: tuple[str, ...], all_topics: bool, how: str | None, to_offset: int | None, shift_by: int | None,
         to_datetime: str | None, execute: bool) -> int:
    if action == "list":
        for group_id, _state in g.list_groups():
            click.echo(group_id)
        return 0
    if all_groups:
        group_ids = [gid for gid, _ in g.list_groups()]
    elif not group_ids:
        raise click.UsageError(f"--{action if action != 'reset' else 'reset-offsets'} needs --group (or --all-groups)")
    if action == "describe":
        for i, group in enumerate(group_ids):
            if i:
                click.echo("")
            if members:
                lines = describe_members(g, group, verbose)
            elif state:
                lines = describe_state(g, group)
            else:
                lines = describe_offsets(g, group)
            click.echo("")
            for line in lines:
                click.echo(line)
        return 0
    if action == "delete":
        deleted = g.delete(group_ids)
        failed = {k: v for k, v in deleted.items() if v}
        if not failed:
            quoted = ", ".join(f"'{k}'" for k in deleted)
            click.echo(f"Deletion of requested consumer groups ({quoted}) was successful.")
            return 0
        click.echo("Deletion of some consumer groups failed:")
        for k, v in failed.items():
            click.echo(f"* Group '{k}' could not be deleted due to: {_error(v)}")
        return 1
    if len(group_ids) != 1:
        raise click.UsageError("give exactly one --group")
    group = group_ids[0]
    if action == "delete-offsets":
        if not topics:
            raise click.UsageError("--delete-offsets needs --topic")
        scope = parse_topic_partitions(topics)
        known = g.partitions(t for t, _ in scope)
        tps = [(t, p) for t, ps in scope for p in (ps if ps is not None else sorted(p for tt, p in known if tt == t))]
        top, results = g.delete_offsets(group, tps)
        if top:
            click.echo(f"Error: deleting offsets of group '{group}' failed: {_error(top)}", err=True)
            return 1
        rows = [[t, str(p), "Successful" if results.get((t, p), 0) == 0 else f"Error: {_error(results[(t, p)])}"]
                for t, p in tps]
        failed_any = any(results.get(tp, 0) for tp in tps)
        click.echo(f"Request {'failed' if failed_any else 'succeed'} for deleting offsets with topic "
                   f"{','.join(sorted({t for t, _ in tps}))} group {group}")
        click.echo("")
        for line in table(["TOPIC", "PARTITION", "STATUS"], rows):
            click.echo(line)
        return 1 if failed_any else 0
    # reset
    chosen = [x for x in (how, "offset" if to_offset is not None else None, "shift" if shift_by is not None else None,
                          "datetime" if to_datetime is not None else None) if x]
    if len(chosen) != 1:
        raise click.UsageError("give one of --to-earliest, --to-latest, --to-offset, --shift-by, --to-datetime")
    if bool(topics) == all_topics:
        raise click.UsageError("give --topic or --all-topics")
    value = to_offset if to_offset is not None else shift_by if shift_by is not None else (
        parse_datetime(to_datetime) if to_datetime is not None else None)
    plan = plan_reset(g, group, None if all_topics else parse_topic_partitions(topics), chosen[0], value)
    errors: dict[tuple[str, int], int] = {}
    if execute and plan:
        errors = {tp: c for tp, c in g.commit(group, plan).items() if c}
    rows = [[group, t, str(p), str(o)] for (t, p), o in sorted(plan.items())]
    click.echo("")
    for line in table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows):
        click.echo(line)
    for (t, p), c in sorted(errors.items()):
        click.echo(f"Error: resetting {t}-{p} failed: {_error(c)}", err=True)
    return 1 if errors else 0
