"""ACLs on transactions, with SASL PLAIN principals on one broker and confluent-kafka clients.

As Kafka's KafkaApis authorizes them (docs/transactions.md):
- User:n may WRITE the topic but has no ACL on the transactional id: FindCoordinator for it (DESCRIBE)
  and InitProducerId (WRITE) are refused, so ``init_transactions()`` fails with
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53) and nothing is written;
- User:p gets ``headwater acls --add --allow-principal User:p --producer --topic t --transactional-id
  tx-p`` (kafka-acls.sh's producer shortcut: WRITE, DESCRIBE and CREATE on the topic, WRITE and
  DESCRIBE on the transactional id) and commits a transaction that a read_committed consumer reads;
- the audit log names each refusal with the transactional id and the operation.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from test_acls_groups import JAAS, audit, cli, conf, wait_for

from headwater.admin.local import BrokerProcess, free_port

TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = Path(tmp_path_factory.mktemp("acl-transactions"))
    port = free_port()
    listeners = f"SASL_PLAINTEXT://127.0.0.1:{port}"
    b = BrokerProcess(1, port, root, props={
        "listeners": listeners, "advertised.listeners": listeners, "sasl.enabled.mechanisms": "PLAIN",
        "sasl.jaas.config": JAAS.replace('user_l="l-secret"', 'user_p="p-secret" user_n="n-secret"'),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin",
        "transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3",
    })
    b.start()
    try:
        yield b
    finally:
        b.stop()
        if b.alive:
            b.kill9()


def test_transactional_id_acls(broker: BrokerProcess, tmp_path: Path) -> None:
    b = broker
    code, out = cli(tmp_path, "admin", "topics", "--bootstrap-server", b.bootstrap, "--create", "--topic", "t",
                    "--partitions", "1")
    assert code == 0, out
    code, out = cli(tmp_path, "admin", "acls", "--bootstrap-server", b.bootstrap, "--add", "--allow-principal",
                    "User:n", "--operation", "Write", "--topic", "t")
    assert code == 0, out

    refused = Producer(conf("n", **{"bootstrap.servers": b.bootstrap, "transactional.id": "tx-n"}))
    with pytest.raises(KafkaException) as raised:
        refused.init_transactions(20)
    assert raised.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, raised.value

    code, out = cli(tmp_path, "admin", "acls", "--bootstrap-server", b.bootstrap, "--add", "--allow-principal",
                    "User:p", "--producer", "--topic", "t", "--transactional-id", "tx-p")
    assert code == 0, out
    p = Producer(conf("p", **{"bootstrap.servers": b.bootstrap, "transactional.id": "tx-p"}))
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("t", b"committed", partition=0)
    p.commit_transaction(30)

    c = Consumer(conf("admin", **{"bootstrap.servers": b.bootstrap, "group.id": "reader",
                                  "isolation.level": "read_committed", "enable.auto.commit": False}))
    try:
        c.assign([TopicPartition("t", 0, 0)])
        got: list[bytes] = []
        wait_for(lambda: got.extend(bytes(m.value()) for m in c.consume(10, 0.5) if m.error() is None) or got,
                 30, "the committed record")
    finally:
        c.close()
    assert got == [b"committed"]

    lines = wait_for(lambda: [ln for ln in audit(b) if ln["principal"] == "User:n" and ln["outcome"] == "denied"],
                     10, "User:n's refusals in the audit log")
    denied = {(r["type"], r["name"], r.get("operation"), r["error_code"]) for ln in lines for r in ln["resources"]}
    assert ("TRANSACTIONAL_ID", "tx-n", "DESCRIBE", TRANSACTIONAL_ID_AUTHORIZATION_FAILED) in denied, denied
