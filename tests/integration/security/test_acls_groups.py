"""ACLs on the consumer-group APIs, with SASL PLAIN principals on one broker and confluent-kafka clients.

- User:c may DESCRIBE the group but not READ it: ``subscribe()`` reports GROUP_AUTHORIZATION_FAILED
  and no member joins. After ``headwater acls --add --allow-principal User:c --consumer --group g
  --topic t`` it consumes and commits.
- User:r may READ its group and topic ``ok`` but not topic ``t``: one commit of both answers
  TOPIC_AUTHORIZATION_FAILED for ``t`` and commits ``ok``.
- ListGroups shows User:l only the group it may DESCRIBE; it cannot delete it.
- The audit log has every refusal, with the principal, and the group deletion.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from headwater.admin.local import BrokerProcess, free_port
from headwater.cli import main

USERS = ("admin", "c", "r", "l")
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" "
        "password=\"admin-secret\" " + " ".join(f'user_{u}="{u}-secret"' for u in USERS) + ";")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = Path(tmp_path_factory.mktemp("acl-groups"))
    port = free_port()
    listeners = f"SASL_PLAINTEXT://127.0.0.1:{port}"
    b = BrokerProcess(1, port, root, props={
        "listeners": listeners, "advertised.listeners": listeners, "sasl.enabled.mechanisms": "PLAIN",
        "sasl.jaas.config": JAAS, "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin", "offsets.topic.num.partitions": "3", "offsets.topic.replication.factor": "1",
        "group.initial.rebalance.delay.ms": "0",
    })
    b.start()
    try:
        yield b
    finally:
        b.stop()
        if b.alive:
            b.kill9()


def conf(user: str, **extra: Any) -> dict[str, Any]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": user,
            "sasl.password": f"{user}-secret", **extra}


def cli(tmp_path: Path, user: str, *args: str) -> tuple[int, str]:
    config = tmp_path / f"{user}.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in conf(user).items()))
    result = CliRunner().invoke(main, [args[0], "--command-config", str(config), *args[1:]])
    return result.exit_code, result.output


def audit(b: BrokerProcess) -> list[dict[str, Any]]:
    path = b.data_dir / "audit" / f"broker-{b.broker_id}-audit.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_for(cond: Callable[[], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (value := cond()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return value


def consumer_offsets(admin: AdminClient, group: str, *topics: str) -> list[TopicPartition]:
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, 0) for t in topics])
    return list(admin.list_consumer_group_offsets([request])[group].result(10).topic_partitions)


def members(b: BrokerProcess, group: str) -> int:
    admin = AdminClient(conf("admin", **{"bootstrap.servers": b.bootstrap}))
    return len(admin.describe_consumer_groups([group])[group].result(10).members)


def test_group_acls(broker: BrokerProcess, tmp_path: Path) -> None:
    b = broker
    for topic in ("t", "ok"):
        code, out = cli(tmp_path, "admin", "topics", "--bootstrap-server", b.bootstrap, "--create", "--topic", topic,
                        "--partitions", "1")
        assert code == 0, out
    producer = Producer(conf("admin", **{"bootstrap.servers": b.bootstrap}))
    for i in range(3):
        producer.produce("t", f"m{i}".encode())
    assert producer.flush(10) == 0

    # c: READ and DESCRIBE on the topic and DESCRIBE on the group, not READ on it.
    for args in (("--operation", "Read", "--operation", "Describe", "--topic", "t"),
                 ("--operation", "Describe", "--group", "g")):
        code, out = cli(tmp_path, "admin", "acls", "--bootstrap-server", b.bootstrap, "--add", "--allow-principal",
                        "User:c", *args)
        assert code == 0, out
    consumer = Consumer(conf("c", **{"bootstrap.servers": b.bootstrap, "group.id": "g", "auto.offset.reset": "earliest",
                                     "enable.auto.commit": False, "session.timeout.ms": 6000}))
    try:
        consumer.subscribe(["t"])
        errors = []
        deadline = time.monotonic() + 10
        while not errors and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is not None, "consumed without READ on the group"
                errors.append(msg.error().code())
        assert errors == [KafkaError.GROUP_AUTHORIZATION_FAILED]
        assert members(b, "g") == 0
    finally:
        consumer.close()

    code, out = cli(tmp_path, "admin", "acls", "--bootstrap-server", b.bootstrap, "--add", "--allow-principal",
                    "User:c", "--consumer", "--group", "g", "--topic", "t")
    assert code == 0, out
    assert "(principal=User:c, host=*, operation=READ, permissionType=ALLOW)" in out
    consumer = Consumer(conf("c", **{"bootstrap.servers": b.bootstrap, "group.id": "g", "auto.offset.reset": "earliest",
                                     "enable.auto.commit": False, "session.timeout.ms": 6000}))
    try:
        consumer.subscribe(["t"])
        got: list[bytes] = []
        deadline = time.monotonic() + 15
        while len(got) < 3 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(msg.value())
        assert got == [b"m0", b"m1", b"m2"]
        assert members(b, "g") == 1
        committed = consumer.commit(asynchronous=False)
        assert [(tp.topic, tp.offset, tp.error) for tp in committed] == [("t", 3, None)]
    finally:
        consumer.close()
    admin = AdminClient(conf("admin", **{"bootstrap.servers": b.bootstrap}))
    assert [tp.offset for tp in consumer_offsets(admin, "g", "t")] == [3]

    # r: READ on its group and on topic "ok" only; one commit of both topics.
    for args in (("--operation", "Read", "--group", "rg"), ("--operation", "Read", "--topic", "ok")):
        code, out = cli(tmp_path, "admin", "acls", "--bootstrap-server", b.bootstrap, "--add", "--allow-principal",
                        "User:r", *args)
        assert code == 0, out
    rc = Consumer(conf("r", **{"bootstrap.servers": b.bootstrap, "group.id": "rg", "enable.auto.commit": False}))
    try:
        with pytest.raises(KafkaException) as info:  # librdkafka raises with the refused partition's error
            rc.commit(offsets=[TopicPartition("t", 0, 2), TopicPartition("ok", 0, 1)], asynchronous=False)
        assert info.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        rc.close()
    offsets = {tp.topic: tp.offset for tp in consumer_offsets(admin, "rg", "t", "ok")}
    assert offsets == {"t": -1001, "ok": 1}  # the authorized topic's offset was committed, not the other

    # l: DESCRIBE on group g only. ListGroups shows it just g; DeleteGroups is refused.
    code, out = cli(tmp_path, "admin", "acls", "--bootstrap-server", b.bootstrap, "--add", "--allow-principal",
                    "User:l", "--operation", "Describe", "--group", "g")
    assert code == 0, out
    lister = AdminClient(conf("l", **{"bootstrap.servers": b.bootstrap}))  # kept: results need a live client
    listed = {g.group_id for g in lister.list_consumer_groups().result(10).valid}
    assert listed == {"g"}
    everything = {g.group_id for g in admin.list_consumer_groups().result(10).valid}
    assert {"g", "rg"} <= everything
    code, out = cli(tmp_path, "l", "groups", "--bootstrap-server", b.bootstrap, "--delete", "--group", "g")
    assert code != 0 and "GROUP_AUTHORIZATION_FAILED" in out, out
    assert "g" in {g.group_id for g in admin.list_consumer_groups().result(10).valid}
    code, out = cli(tmp_path, "admin", "groups", "--bootstrap-server", b.bootstrap, "--delete", "--group", "rg")
    assert code == 0, out

    lines = wait_for(lambda: [ln for ln in audit(b) if ln["api"] == "DELETE_GROUPS" and ln["principal"] == "User:admin"]
                     and audit(b), 5, "the audit lines")
    denied = [(ln["principal"], ln["api"], r["type"], r["name"], r.get("operation"), r["error_code"])
              for ln in lines if ln["outcome"] == "denied" for r in ln["resources"]]
    assert ("User:c", "JOIN_GROUP", "GROUP", "g", "READ", 30) in denied
    assert ("User:r", "OFFSET_COMMIT", "TOPIC", "t", "READ", 29) in denied
    assert ("User:l", "DELETE_GROUPS", "GROUP", "g", "DELETE", 30) in denied
    deleted = [ln for ln in lines if ln["api"] == "DELETE_GROUPS" and ln["principal"] == "User:admin"]
    assert deleted[-1]["outcome"] == "allowed" and deleted[-1]["resources"] == [
        {"type": "GROUP", "name": "rg", "error_code": 0}]
    assert {g.group_id for g in admin.list_consumer_groups().result(10).valid} == {"g"}
