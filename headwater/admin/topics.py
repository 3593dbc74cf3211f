"""``headwater topics``: kafka-topics.sh's actions and output, over the Kafka protocol only."""

from __future__ import annotations

import base64
import sys
import time
from pathlib import Path
from typing import Any

import click
from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
)

from headwater.admin.client import AdminClient, AdminError
from headwater.admin.options import command_config_option, connect, key_values
from headwater.protocol.config_resources import RESOURCE_TOPIC
from headwater.protocol.errors import ErrorCode

SOURCE_TOPIC_CONFIG = 1


def _parse_assignment(text: str) -> list[list[int]]:
    """Kafka's --replica-assignment: partitions separated by commas, replicas by colons ("1:2,2:3")."""
    out = []
    for part in text.split(","):
        try:
            out.append([int(b) for b in part.split(":")])
        except ValueError:
            raise click.BadParameter(f"{text!r}: expected broker ids like 1:2,2:3", param_hint="--replica-assignment") from None
    return out


def _error(code: int, message: str | None) -> str:
    name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
    return f"{name}: {message}" if message else name


def create_topic(client: AdminClient, topic: str, partitions: int | None, replication_factor: int | None,
                 assignment: list[list[int]] | None, configs: dict[str, str],
                 retry_on_quota_violation: bool = True) -> tuple[int, str | None]:
    """Create one topic. A topic refused by the partition-mutation quota (89) is sent again after
    the throttle time the broker gave, until the client's timeout (KIP-599's admin behaviour)."""
    T = CreateTopicsRequest.CreatableTopic
    A = T.CreatableReplicaAssignment
    C = T.CreatableTopicConfig
    spec = T(
        name=topic,
        num_partitions=-1 if assignment or partitions is None else partitions,
        replication_factor=-1 if assignment or replication_factor is None else replication_factor,
        assignments=[A(partition_index=i, broker_ids=r) for i, r in enumerate(assignment or [])],
        configs=[C(name=k, value=v) for k, v in configs.items()],
    )
    deadline = time.monotonic() + client.timeout_s
    while True:
        resp = client.send_to_controller(CreateTopicsRequest, dict(topics=[spec], timeout_ms=30000, validate_only=False),
                                         lambda r: [t.error_code for t in r.topics])
        result = resp.topics[0]
        throttle_s = resp.throttle_time_ms / 1000
        if (result.error_code != ErrorCode.THROTTLING_QUOTA_EXCEEDED or not retry_on_quota_violation
                or time.monotonic() + throttle_s > deadline):
            return result.error_code, result.error_message
        time.sleep(throttle_s)


def describe(client: AdminClient, topics: list[str] | None) -> list[str]:
    meta = client.refresh(topics)
    lines = []
    names = sorted(t.name for t in meta.topics)
    configs = _topic_configs(client, names) if names else {}
    for t in sorted(meta.topics, key=lambda t: t.name):
        if t.error_code:
            lines.append(f"Error for topic {t.name}: {_error(t.error_code, None)}")
            continue
        rf = len(t.partitions[0].replica_nodes) if t.partitions else 0
        conf = ",".join(f"{k}={v}" for k, v in sorted(configs.get(t.name, {}).items()))
        lines.append(f"Topic: {t.name}\tTopicId: {_kafka_uuid(t.topic_id)}\tPartitionCount: {len(t.partitions)}\t"
                     f"ReplicationFactor: {rf}\tConfigs: {conf}")
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            line = (f"\tTopic: {t.name}\tPartition: {p.partition_index}\tLeader: {p.leader_id if p.leader_id >= 0 else 'none'}\t"
                    f"Replicas: {','.join(map(str, p.replica_nodes))}\tIsr: {','.join(map(str, p.isr_nodes))}")
            if p.offline_replicas:
                line += f"\tOffline: {','.join(map(str, p.offline_replicas))}"
            lines.append(line)
    return lines


def _kafka_uuid(value: Any) -> str:
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=") if value is not None else ""


def _topic_configs(client: AdminClient, names: list[str]) -> dict[str, dict[str, str]]:
    R = DescribeConfigsRequest.DescribeConfigsResource
    resp = client.send(DescribeConfigsRequest, dict(
        resources=[R(resource_type=RESOURCE_TOPIC, resource_name=n, configuration_keys=None) for n in names],
        include_synonyms=False, include_documentation=False))
    out: dict[str, dict[str, str]] = {}
    for r in resp.results:
        # Like kafka-topics.sh, show only what was set on the topic itself.
        out[r.resource_name] = {c.name: c.value for c in r.configs
                                if getattr(c, "config_source", SOURCE_TOPIC_CONFIG) == SOURCE_TOPIC_CONFIG}
    return out


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--bootstrap-server", required=True, help="host:port of any broker.")
@click.option("--create", "action", flag_value="create", help="Create a topic.")
@click.option("--delete", "action", flag_value="delete", help="Delete a topic.")
@click.option("--describe", "action", flag_value="describe", help="Describe topics (all by default).")
@click.option("--list", "action", flag_value="list", help="List topic names.")
@click.option("--alter", "action", flag_value="alter", help="Add partitions to a topic (--partitions).")
@click.option("--topic", help="Topic name.")
@click.option("--partitions", type=int, help="Number of partitions (create), or the new total (alter).")
@click.option("--replication-factor", type=int, help="Replication factor (create).")
@click.option("--replica-assignment", help="Manual assignment: 1:2,2:3 (one entry per partition).")
@click.option("--config", "configs", multiple=True, help="Topic config key=value (create; repeatable).")
@click.option("--if-not-exists", is_flag=True, help="With --create: succeed if the topic already exists.")
@click.option("--if-exists", is_flag=True, help="With --delete/--alter: succeed if the topic does not exist.")
@click.option("--retry-on-quota-violation/--no-retry-on-quota-violation", default=True, show_default=True,
              help="Re-send a create refused by the partition-mutation quota after its throttle time.")
@command_config_option
def topics(bootstrap_server: str, action: str | None, topic: str | None, partitions: int | None,
           replication_factor: int | None, replica_assignment: str | None, configs: tuple[str, ...],
           if_not_exists: bool, if_exists: bool, retry_on_quota_violation: bool, command_config: Path | None) -> None:
    """Create, delete, describe, list or alter topics, like kafka-topics.sh."""
    if action is None:
        raise click.UsageError("one of --create, --delete, --describe, --list, --alter is required")
    if action in ("create", "delete", "alter") and not topic:
        raise click.UsageError(f"--{action} needs --topic")
    try:
        with connect(bootstrap_server, "headwater-topics", command_config) as client:
            sys.exit(_run(client, action, topic, partitions, replication_factor, replica_assignment, configs,
                          if_not_exists, if_exists, retry_on_quota_violation))
    except AdminError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)


def _run(client: AdminClient, action: str, topic: str | None, partitions: int | None, replication_factor: int | None,
         replica_assignment: str | None, configs: tuple[str, ...], if_not_exists: bool, if_exists: bool,
         retry_on_quota_violation: bool = True) -> int:
    assert topic is not None or action in ("describe", "list")
    if action == "create":
        assert topic is not None
        assignment = _parse_assignment(replica_assignment) if replica_assignment else None
        code, message = create_topic(client, topic, partitions, replication_factor, assignment,
                                     key_values(configs, "--config"), retry_on_quota_violation)
        if code == ErrorCode.TOPIC_ALREADY_EXISTS and if_not_exists:
            return 0
        if code:
            click.echo(f"Error while executing topic command : {message or _error(code, None)}", err=True)
            return 1
        click.echo(f"Created topic {topic}.")
        return 0
    if action == "delete":
        resp = client.send_to_controller(DeleteTopicsRequest, dict(topic_names=[topic], topics=[
            DeleteTopicsRequest.DeleteTopicState(name=topic, topic_id=None)], timeout_ms=30000),
            lambda r: [x.error_code for x in r.responses])
        code = resp.responses[0].error_code
        if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and if_exists:
            return 0
        if code:
            click.echo(f"Error while executing topic command : {_error(code, getattr(resp.responses[0], 'error_message', None))}", err=True)
            return 1
        return 0
    if action == "alter":
        if partitions is None:
            raise click.UsageError("--alter needs --partitions")
        P = CreatePartitionsRequest.CreatePartitionsTopic
        A = P.CreatePartitionsAssignment
        assignment = _parse_assignment(replica_assignment) if replica_assignment else None
        resp = client.send_to_controller(CreatePartitionsRequest, dict(topics=[P(
            name=topic, count=partitions, assignments=[A(broker_ids=r) for r in assignment] if assignment else None)],
            timeout_ms=30000, validate_only=False), lambda r: [x.error_code for x in r.results])
        result = resp.results[0]
        if result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and if_exists:
            return 0
        if result.error_code:
            click.echo(f"Error while executing topic command : {result.error_message or _error(result.error_code, None)}", err=True)
            return 1
        return 0
    if action == "list":
        meta = client.refresh()
        for name in sorted(t.name for t in meta.topics):
            click.echo(name)
        return 0
    lines = describe(client, [topic] if topic else None)
    for line in lines:
        click.echo(line)
    return 1 if any(line.startswith("Error for topic") for line in lines) else 0
