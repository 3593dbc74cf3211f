"""What the ACL authorizer costs a Produce request: 1,000 ACLs against no authorizer, same run.

Two standalone brokers run in this process, in one event loop, measured in alternating rounds (best
round of each) so that a busy machine slows both alike; no sockets on the hot path. One is without an
authorizer, one with ``kafka.security.authorizer.AclAuthorizer`` and 1,000 ACLs (literal and
prefixed, on topics, groups and the cluster, for many principals; the producing principal is
allowed WRITE on its topics through a prefixed ACL). Each handles the same framed Produce request
(``--topics`` topics, one small batch each, acks=1) through the broker's full request path:
decode, authorization, append, response. Also reported: one ``authorize`` call on its own.
Prints one JSON line.

    .venv/bin/python benchmarks/authorizer_cost.py [--requests 2000] [--topics 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from headwater.controller import quota
from headwater.protocol.apis import Request
from headwater.security.acl import (
    AccessControlEntry,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from headwater.security.authorizer import AclSet
from headwater.server.authz import Authz
from headwater.server.broker import Broker
from headwater.server.config import broker_config

PRODUCE_VERSION = 9
ACL_COUNT = 1000


def small_batch() -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    builder.append(0, timestamp=1_700_000_000_000, key=None, value=b"x" * 100, headers=[])
    return bytes(builder.build())


def produce_frame(topics: list[str]) -> bytearray:
    req_cls = ProduceRequest[PRODUCE_VERSION]
    data = [req_cls.TopicProduceData(name=t, partition_data=[
        req_cls.TopicProduceData.PartitionProduceData(index=0, records=small_batch())]) for t in topics]
    req = req_cls(transactional_id=None, acks=1, timeout_ms=1000, topic_data=data)
    req.with_header(correlation_id=1, client_id="bench")
    return bytearray(req.encode(header=True, framed=False))


def thousand_acls() -> dict[ResourcePattern, set[AccessControlEntry]]:
    acls: dict[ResourcePattern, set[AccessControlEntry]] = {}
    allow, deny = PermissionType.ALLOW, PermissionType.DENY
    for i in range(ACL_COUNT - 1):
        kind = i % 4
        if kind == 0:
            pattern = ResourcePattern(ResourceType.TOPIC, f"team{i % 50}-topic-{i}", PatternType.LITERAL)
            entry = AccessControlEntry(f"User:svc{i % 97}", "*", AclOperation.READ, allow)
        elif kind == 1:
            pattern = ResourcePattern(ResourceType.TOPIC, f"team{i % 50}-", PatternType.PREFIXED)
            entry = AccessControlEntry(f"User:svc{i}", "*", AclOperation.WRITE, allow if i % 3 else deny)
        elif kind == 2:
            pattern = ResourcePattern(ResourceType.GROUP, f"group-{i}", PatternType.LITERAL)
            entry = AccessControlEntry(f"User:svc{i % 97}", "*", AclOperation.READ, allow)
        else:
            pattern = ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL)
            entry = AccessControlEntry(f"User:svc{i}", "10.0.0.1", AclOperation.DESCRIBE, allow)
        acls.setdefault(pattern, set()).add(entry)
    # The benchmark's own principal may write its topics through one prefixed ACL.
    acls.setdefault(ResourcePattern(ResourceType.TOPIC, "bench-", PatternType.PREFIXED), set()).add(
        AccessControlEntry("User:ANONYMOUS", "*", AclOperation.WRITE, allow))
    return acls


class _Conn:
    """What the request path reads of a connection: an authenticated-or-not plaintext client."""

    principal = "User:ANONYMOUS"
    peer = "127.0.0.1:40000"
    sasl = None
    listener = "PLAINTEXT"

    def abort(self, reason: str) -> None:
        raise RuntimeError(reason)


async def open_broker(directory: Path, props: dict[str, str], topics: list[str],
                      acls: dict[ResourcePattern, set[AccessControlEntry]] | None) -> Broker:
    config = broker_config({"broker.id": "1", "log.dirs": str(directory / "logs"), "listeners": "PLAINTEXT://127.0.0.1:1",
                            "auto.create.topics.enable": "false", **props})
    broker = Broker(config)
    broker.logs.load()
    broker.replicas.start()
    if acls is not None:
        broker.authz.acls = AclSet(acls)
    rq = quota.RequestQuota(broker.quotas, "ANONYMOUS", "bench", False, 0)
    for t in topics:
        await broker.authority.create_topic(t, 1, 1, {}, {}, False, rq)
    return broker


async def close_broker(broker: Broker) -> None:
    await broker.replicas.stop()
    broker.logs.close()
    broker.authz.close()


async def time_requests(broker: Broker, frame: bytearray, requests: int) -> float:
    conn: Any = _Conn()
    start = time.perf_counter()
    for _ in range(requests):
        reply = await broker._handle_frame(conn, bytearray(frame))
        assert reply is not None
    return (time.perf_counter() - start) / requests


async def compare(root: Path, topics: list[str], frame: bytearray, requests: int,
                  acls: dict[ResourcePattern, set[AccessControlEntry]], rounds: int = 5) -> dict[str, Any]:
    """Both brokers in one loop, measured in alternating rounds (best of each), so a busy machine
    slows both alike."""
    plain = await open_broker(root / "plain", {}, topics, None)
    secured = await open_broker(root / "acl", {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"},
                                topics, acls)
    try:
        await time_requests(plain, frame, 50)  # warm up
        await time_requests(secured, frame, 50)
        best = {"plain": float("inf"), "secured": float("inf")}
        for _round in range(rounds):
            best["plain"] = min(best["plain"], await time_requests(plain, frame, requests))
            best["secured"] = min(best["secured"], await time_requests(secured, frame, requests))
        # Sanity: every partition of both took every write (the authorizer refused nothing).
        appended = [sum(b.replicas.hosted(t, 0).plog.log_end_offset for t in topics)  # type: ignore[union-attr]
                    for b in (plain, secured)]
        return {"plain_us": round(best["plain"] * 1e6, 1), "secured_us": round(best["secured"] * 1e6, 1),
                "appended": appended}
    finally:
        await close_broker(plain)
        await close_broker(secured)


def authorize_call_ns(acls: dict[ResourcePattern, set[AccessControlEntry]], directory: Path) -> float:
    authz = Authz({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}, directory, 1)
    authz.acls = AclSet(acls)
    req = Request(Any, PRODUCE_VERSION, 1, "bench", None, principal="User:ANONYMOUS", client_address="127.0.0.1:1")  # type: ignore[arg-type]
    n = 20000
    best = min(timeit.repeat(lambda: authz.topic(req, AclOperation.WRITE, "bench-topic-7"), number=n, repeat=5))
    authz.close()
    return best / n * 1e9


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000, help="requests per round (5 rounds each)")
    parser.add_argument("--topics", type=int, default=10)
    args = parser.parse_args()
    topics = [f"bench-topic-{i}" for i in range(args.topics)]
    frame = produce_frame(topics)
    acls = thousand_acls()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        result = asyncio.run(compare(root, topics, frame, args.requests, acls))
        call_ns = authorize_call_ns(acls, root / "call")
    print(json.dumps({
        "benchmark": "authorizer_cost",
        "api": f"Produce v{PRODUCE_VERSION}, {args.topics} topics x 1 batch of 1 record, acks=1",
        "acls": sum(len(v) for v in acls.values()),
        "requests": args.requests,
        "no_authorizer_us_per_request": result["plain_us"],
        "acl_authorizer_us_per_request": result["secured_us"],
        "ratio": round(result["secured_us"] / result["plain_us"], 3),
        "authorize_call_ns": round(call_ns, 1),
        "records_appended": result["appended"],
    }))


if __name__ == "__main__":
    main()
