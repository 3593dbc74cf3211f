"""The group shell's side of transactions: the __consumer_offsets batches it writes and reads back
(transactional batches, control batches), the TxnOffsetCommit handler's checks in Kafka's order,
OffsetFetch's require_stable, and ``on_txn_marker``, on a real (unstarted) broker.

Expected answers: Kafka 3.9's KafkaApis.handleTxnOffsetCommitRequest (TRANSACTIONAL_ID WRITE, then
GROUP READ, then TOPIC READ per topic, then unknown partitions), GroupMetadataManager.storeOffsets
(a transactional batch of the producer, no sequence) and doLoadGroupsAndOffsets (control batches)."""

from __future__ import annotations

import asyncio
import json
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.util import calc_crc32c

from headwater.coordinator import events as ev
from headwater.coordinator.records import OffsetKey, OffsetValue, encode_offset_key, encode_offset_value
from headwater.metadata.image import PartitionState, TopicImage
from headwater.protocol.apis import API_SPECS, ApiKey, Request
from headwater.protocol.errors import ErrorCode
from headwater.records import CorruptRecordError, iter_batches
from headwater.security.acl import (
    AccessControlEntry,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from headwater.security.authorizer import AclSet
from headwater.server.broker import Broker
from headwater.server.config import broker_config
from headwater.server.groups import build_batch, read_records

E = ErrorCode
NOW_MS = 1_700_000_000_000
AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin"}


# --- batches ---------------------------------------------------------------------------------------------


def control_batch(producer_id: int, commit: bool, key: bytes | None = None) -> bytes:
    """A transaction marker as a broker writes it: a transactional control batch of one record."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=producer_id,
                                  producer_epoch=1, base_sequence=-1, batch_size=2**31 - 1)
    b.append(0, timestamp=NOW_MS, key=key if key is not None else struct.pack(">hh", 0, 1 if commit else 0),
             value=struct.pack(">hi", 0, 3), headers=[])
    raw = bytearray(b.build())
    attributes = struct.unpack_from(">h", raw, 21)[0] | 0x20  # the control bit; kafka-python never sets it
    struct.pack_into(">h", raw, 21, attributes)
    struct.pack_into(">I", raw, 17, calc_crc32c(memoryview(raw)[21:]))
    return bytes(raw)


def test_build_batch_marks_a_transactional_commit() -> None:
    plain = build_batch(((b"k", b"v"),), NOW_MS)
    txn = build_batch(((b"k", b"v"), (b"k2", None)), NOW_MS, producer_id=42, producer_epoch=3, transactional=True)
    [(_, p)] = list(iter_batches(plain))
    [(_, t)] = list(iter_batches(txn))
    assert (p.is_transactional, p.producer_id, p.producer_epoch, p.base_sequence) == (False, -1, -1, -1)
    assert (t.is_transactional, t.producer_id, t.producer_epoch, t.base_sequence) == (True, 42, 3, -1)
    assert not t.is_control and t.record_count == 2


def test_read_records_in_log_order_with_their_transactions() -> None:
    buf = (bytes(build_batch(((b"a", b"1"),), NOW_MS))
           + bytes(build_batch(((b"b", b"2"), (b"c", None)), NOW_MS, producer_id=7, producer_epoch=0, transactional=True))
           + bytes(build_batch(((b"d", b"3"),), NOW_MS, producer_id=9, producer_epoch=0))  # idempotent, not transactional
           + control_batch(7, commit=True)
           + control_batch(8, commit=False))
    assert list(read_records(buf)) == [
        (b"a", b"1"), ev.LoadedTxnRecord(7, b"b", b"2"), ev.LoadedTxnRecord(7, b"c", None), (b"d", b"3"),
        ev.LoadedTxnMarker(7, True), ev.LoadedTxnMarker(8, False)]


def test_control_record_keys() -> None:
    """ControlRecordType.parse: version int16, type int16; a newer, longer key still has its type
    there; a shorter key is corrupt. GroupMetadataManager's load: any type but COMMIT drops the
    producer's pending offsets."""
    assert list(read_records(control_batch(7, commit=True))) == [ev.LoadedTxnMarker(7, True)]
    assert list(read_records(control_batch(7, commit=False))) == [ev.LoadedTxnMarker(7, False)]
    assert list(read_records(control_batch(7, True, key=struct.pack(">hhi", 1, 1, 99)))) == [ev.LoadedTxnMarker(7, True)]
    assert list(read_records(control_batch(7, True, key=struct.pack(">hh", 0, 5)))) == [ev.LoadedTxnMarker(7, False)]
    with pytest.raises(CorruptRecordError):
        list(read_records(control_batch(7, commit=True, key=b"\x00")))


# --- the handler ------------------------------------------------------------------------------------------


def rule(principal: str, resource_type: ResourceType, name: str, *ops: AclOperation) -> tuple[ResourcePattern,
                                                                                            list[AccessControlEntry]]:
    return ResourcePattern(resource_type, name, PatternType.LITERAL), [AccessControlEntry(principal, "*", op, PermissionType.ALLOW)
                                                  for op in ops]


# User:p is a transactional producer of tx committing for group g on topic t; User:nogroup lacks the
# group, User:notx the transactional id.
RULES_BY_PATTERN: dict[ResourcePattern, list[AccessControlEntry]] = {}
for _pattern, _entries in (
    rule("User:p", ResourceType.TRANSACTIONAL_ID, "tx", AclOperation.WRITE),
    rule("User:p", ResourceType.GROUP, "g", AclOperation.READ),
    rule("User:p", ResourceType.TOPIC, "t", AclOperation.READ),
    rule("User:nogroup", ResourceType.TRANSACTIONAL_ID, "tx", AclOperation.WRITE),
    rule("User:notx", ResourceType.GROUP, "g", AclOperation.READ),
):
    RULES_BY_PATTERN.setdefault(_pattern, []).extend(_entries)
RULES = AclSet(RULES_BY_PATTERN)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(broker_config({"broker.id": "1", "log.dirs": str(tmp_path / "logs"), "listeners": "PLAINTEXT://127.0.0.1:1",
                              "offsets.topic.num.partitions": "1", **AUTHORIZER}))
    b.authz.acls = RULES
    b.groups.core.handle(ev.LoadStarted(0, 1), NOW_MS)
    b.groups.core.handle(ev.LoadFinished(0, 1, ()), NOW_MS)
    yield b
    b.authz.close()
    b.logs.close()


def request(api: ApiKey, version: int, principal: str, **fields: Any) -> Request:
    spec = API_SPECS[api]
    return Request(spec, version, 1, "unit", spec.request(version=version, **fields), principal=principal,
                   client_address="10.0.0.9:5000")


def call(b: Broker, handler: Any, req: Request) -> Any:
    async def run() -> Any:
        return await handler(req)
    resp = asyncio.run(run())
    b.authz.audit_request(req, resp)
    return resp


def txn_commit(b: Broker, principal: str, *partitions: tuple[str, int], version: int = 3,
               group: str = "g") -> list[tuple[str, int, int]]:
    T = API_SPECS[ApiKey.TXN_OFFSET_COMMIT].request.TxnOffsetCommitRequestTopic
    P = T.TxnOffsetCommitRequestPartition
    by_topic: dict[str, list[Any]] = {}
    for topic, partition in partitions:
        fields: dict[str, Any] = dict(partition_index=partition, committed_offset=10 + partition, committed_metadata="")
        if version >= 2:
            fields["committed_leader_epoch"] = -1
        by_topic.setdefault(topic, []).append(P(**fields))
    body: dict[str, Any] = dict(transactional_id="tx", group_id=group, producer_id=42, producer_epoch=3,
                                topics=[T(name=n, partitions=ps) for n, ps in by_topic.items()])
    if version >= 3:
        body.update(generation_id=-1, member_id="", group_instance_id=None)
    resp = call(b, b.groups.txn_offset_commit, request(ApiKey.TXN_OFFSET_COMMIT, version, principal, **body))
    return [(t.name, p.partition_index, p.error_code) for t in resp.topics for p in t.partitions]


def with_topic_t(b: Broker) -> None:
    b.publish_image(b.image.with_topic(TopicImage("t", uuid.uuid4(), {0: PartitionState((1,), 1, 0, (1,))})))


def audit_lines(b: Broker) -> list[dict[str, Any]]:
    b.authz.audit.close()  # drains the writer thread
    return [json.loads(line) for line in b.authz.audit.path.read_text().splitlines()]


def test_the_transactional_id_is_checked_first(broker: Broker) -> None:
    with_topic_t(broker)
    assert txn_commit(broker, "User:notx", ("t", 0), ("secret", 0)) == [
        ("t", 0, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), ("secret", 0, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)]
    assert txn_commit(broker, "User:nogroup", ("t", 0)) == [("t", 0, E.GROUP_AUTHORIZATION_FAILED)]
    assert "g" not in broker.groups.core.groups
    lines = audit_lines(broker)
    assert [(ln["principal"], [(r["type"], r["name"], r.get("operation")) for r in ln["resources"]]) for ln in lines] == [
        ("User:notx", [("TRANSACTIONAL_ID", "tx", "WRITE")]), ("User:nogroup", [("GROUP", "g", "READ")])]


def test_refused_topics_and_unknown_partitions_never_reach_the_coordinator(broker: Broker) -> None:
    assert txn_commit(broker, "User:p", ("secret", 0), ("t", 0)) == [
        ("secret", 0, E.TOPIC_AUTHORIZATION_FAILED), ("t", 0, E.UNKNOWN_TOPIC_OR_PARTITION)]
    assert "g" not in broker.groups.core.groups
    with_topic_t(broker)
    # t-0 reaches the coordinator; the offsets partition is not hosted here, so its write fails.
    assert txn_commit(broker, "User:p", ("t", 1), ("t", 0), ("secret", 0)) == [
        ("t", 1, E.UNKNOWN_TOPIC_OR_PARTITION), ("t", 0, E.NOT_COORDINATOR), ("secret", 0, E.TOPIC_AUTHORIZATION_FAILED)]
    assert "g" not in broker.groups.core.groups  # nothing pending, nothing kept


def test_load_in_progress_is_not_available_before_v2(broker: Broker) -> None:
    """KafkaApis: producers before 2.0 do not retry COORDINATOR_LOAD_IN_PROGRESS (KAFKA-7296)."""
    with_topic_t(broker)
    broker.groups.core.handle(ev.LoadStarted(0, 2), NOW_MS)
    assert txn_commit(broker, "User:p", ("t", 0), version=1) == [("t", 0, E.COORDINATOR_NOT_AVAILABLE)]
    assert txn_commit(broker, "User:p", ("t", 0), version=3) == [("t", 0, E.COORDINATOR_LOAD_IN_PROGRESS)]


def fetch_stable(b: Broker) -> list[tuple[int, int, int]]:
    T = API_SPECS[ApiKey.OFFSET_FETCH].request.OffsetFetchRequestTopic
    resp = call(b, b.groups.offset_fetch, request(ApiKey.OFFSET_FETCH, 7, "User:admin", group_id="g",
                                                  topics=[T(name="t", partition_indexes=[0])], require_stable=True))
    assert resp.error_code == 0  # UNSTABLE_OFFSET_COMMIT is a partition's error, never the group's
    return [(p.partition_index, p.committed_offset, p.error_code) for t in resp.topics for p in t.partitions]


def test_a_written_commit_waits_for_its_marker(broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch the coordinator appends, and on_txn_marker making its offsets visible."""
    with_topic_t(broker)
    written: list[bytes] = []

    def append(_hosted: object, batch: bytearray, acks: int, _timeout_ms: int, **_kw: object) -> tuple[None, Any]:
        assert acks == -1
        written.append(bytes(batch))
        done: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        done.set_result(E.NONE)
        return None, done

    monkeypatch.setattr(broker.replicas, "leader", lambda topic, partition, *a: object())
    monkeypatch.setattr(broker.replicas, "append", append)
    assert txn_commit(broker, "User:p", ("t", 0)) == [("t", 0, E.NONE)]
    [(_, header)] = list(iter_batches(written[0]))
    assert (header.is_transactional, header.producer_id, header.producer_epoch, header.base_sequence) == (True, 42, 3, -1)
    assert fetch_stable(broker) == [(0, -1, E.UNSTABLE_OFFSET_COMMIT)]
    broker.groups.on_txn_marker(0, 41, True)  # another producer's marker
    assert fetch_stable(broker) == [(0, -1, E.UNSTABLE_OFFSET_COMMIT)]
    broker.groups.on_txn_marker(0, 42, True)
    assert fetch_stable(broker) == [(0, 10, E.NONE)]


def test_on_txn_marker_completes_a_loaded_transaction(broker: Broker) -> None:
    records = (ev.LoadedTxnRecord(42, encode_offset_key(OffsetKey("g", "t", 0)),
                                  encode_offset_value(OffsetValue(77, -1, "", NOW_MS))),)
    core = broker.groups.core
    core.handle(ev.LoadStarted(0, 2), NOW_MS)
    broker.groups.on_txn_marker(0, 42, False)  # while loading: applied once loaded
    core.handle(ev.LoadFinished(0, 2, records), NOW_MS)
    assert fetch_stable(broker) == [(0, -1, E.NONE)]
    core.handle(ev.LoadStarted(0, 3), NOW_MS)
    core.handle(ev.LoadFinished(0, 3, records), NOW_MS)
    assert fetch_stable(broker) == [(0, -1, E.UNSTABLE_OFFSET_COMMIT)]
    broker.groups.on_txn_marker(0, 42, True)
    assert fetch_stable(broker) == [(0, 77, E.NONE)]
