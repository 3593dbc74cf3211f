"""Helpers shared by the broker integration tests (imported by the tests and by conftest.py).

* ``wait_until``: a bounded poll for a condition, instead of sleeps.
* ``Workload``: deterministic keyed messages (key, value, client timestamp from a sequence number),
  and ``check_consumed``, which checks what came back against it partition by partition.
* ``RawConnection``: a blocking socket that speaks the Kafka framing with kafka-python's message
  classes, for tests that need exact control over the bytes (idempotence, fuzzing);
  ``fetch_batches`` reads the stored record batches through it (codec bits, leader epochs).
* ``create_topic`` / ``consume_partitions``: confluent-kafka based setup and read-back.
"""

from __future__ import annotations

import socket
import struct
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

DEFAULT_TIMEOUT_S = 30.0


def wait_until(cond: Callable[[], Any], timeout_s: float = DEFAULT_TIMEOUT_S, interval_s: float = 0.05,
               what: str = "condition") -> Any:
    """Poll ``cond`` until it returns something truthy; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(interval_s)


# --- workload -------------------------------------------------------------------------------------

NUM_KEYS = 97
VALUE_BYTES = 100
_FILLER = "abcdefghijklmnopqrstuvwxyz0123456789" * 4


@dataclass(frozen=True)
class Workload:
    """``n`` keyed messages; message ``i`` has key ``key-<i % 97>``, a 100-byte value that starts with
    ``i`` (so a consumed value names its message) and the client timestamp ``ts0 + i``.

    Keys and values contain no ``:`` and no newline, so they can go through ``kcat -K:``.
    """

    n: int
    ts0: int

    @staticmethod
    def starting_now(n: int) -> Workload:
        # A little in the past, so ListOffsets by timestamp and retention see ordinary timestamps.
        return Workload(n, int(time.time() * 1000) - 10 * n - 60_000)

    def key(self, i: int) -> bytes:
        return b"key-%d" % (i % NUM_KEYS)

    def value(self, i: int) -> bytes:
        head = f"{i:09d}-"
        return (head + _FILLER[(i % 36):][: VALUE_BYTES - len(head)]).encode()

    def timestamp(self, i: int) -> int:
        return self.ts0 + i

    @staticmethod
    def seq_of(value: bytes) -> int:
        return int(value[:9])

    def kcat_lines(self) -> str:
        return "".join(f"{self.key(i).decode()}:{self.value(i).decode()}\n" for i in range(self.n))


@dataclass(frozen=True)
class Consumed:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


def check_consumed(
    workload: Workload,
    consumed: Iterable[Consumed],
    partitions: int,
    *,
    client_timestamps: bool = True,
    timestamp_window: tuple[int, int] | None = None,
    delivered: dict[int, tuple[int, int]] | None = None,
) -> dict[int, list[Consumed]]:
    """Check a full read-back of ``workload`` and return the records per partition, in offset order.

    Every message exactly once; per partition offsets 0, 1, 2, ... and messages in produce order;
    every key in one partition only; keys, values and timestamps as produced (client timestamps
    exactly, or, when the client chose them, inside ``timestamp_window`` and never decreasing);
    and, given the delivery reports ``delivered`` (seq -> (partition, offset)), each message at the
    offset its producer was told.
    """
    by_partition: dict[int, list[Consumed]] = defaultdict(list)
    for rec in consumed:
        by_partition[rec.partition].append(rec)
    assert set(by_partition) <= set(range(partitions)), f"records from unknown partitions {sorted(by_partition)}"
    seen: set[int] = set()
    key_partition: dict[bytes, int] = {}
    for p, recs in sorted(by_partition.items()):
        offsets = [r.offset for r in recs]
        assert offsets == list(range(len(recs))), f"partition {p}: offsets are not 0..{len(recs) - 1}"
        last_seq, last_ts = -1, -1
        for r in recs:
            assert r.value is not None, f"partition {p} offset {r.offset}: null value"
            seq = Workload.seq_of(r.value)
            assert 0 <= seq < workload.n, f"partition {p} offset {r.offset}: unknown message {seq}"
            assert seq not in seen, f"message {seq} read twice (again at partition {p} offset {r.offset})"
            seen.add(seq)
            assert seq > last_seq, f"partition {p} offset {r.offset}: message {seq} after {last_seq}"
            last_seq = seq
            assert r.value == workload.value(seq), f"message {seq}: value {r.value!r}"
            assert r.key == workload.key(seq), f"message {seq}: key {r.key!r}, expected {workload.key(seq)!r}"
            assert key_partition.setdefault(r.key, p) == p, f"key {r.key!r} in partitions {key_partition[r.key]} and {p}"
            if client_timestamps:
                assert r.timestamp == workload.timestamp(seq), f"message {seq}: timestamp {r.timestamp}"
            else:
                assert timestamp_window is not None
                lo, hi = timestamp_window
                assert lo <= r.timestamp <= hi, f"message {seq}: timestamp {r.timestamp} outside [{lo}, {hi}]"
                assert r.timestamp >= last_ts, f"partition {p} offset {r.offset}: timestamp went back"
                last_ts = r.timestamp
            if delivered is not None:
                assert delivered.get(seq) == (p, r.offset), (
                    f"message {seq} acknowledged at {delivered.get(seq)}, read at {(p, r.offset)}"
                )
    missing = workload.n - len(seen)
    assert missing == 0, f"{missing} of {workload.n} messages missing, e.g. {sorted(set(range(workload.n)) - seen)[:5]}"
    if delivered is not None:
        assert len(delivered) == workload.n
    return {p: by_partition.get(p, []) for p in range(partitions)}


def expected_offset_for_time(recs: list[Consumed], ts: int) -> int:
    """Kafka's answer to ListOffsets by timestamp: the first offset whose timestamp is >= ts, else -1."""
    best = None
    for r in recs:
        if r.timestamp >= ts and (best is None or r.offset < best):
            best = r.offset
    return -1 if best is None else best


def timestamp_probes(recs: list[Consumed]) -> list[int]:
    """Timestamps worth asking ListOffsets about for one partition: before, at, between and after records."""
    if not recs:
        return [0]
    ts = sorted(r.timestamp for r in recs)
    picks = {ts[0] - 1000, ts[0], ts[len(ts) // 3], ts[len(ts) // 2] + 1, ts[-1], ts[-1] + 1, ts[-1] + 3_600_000}
    return sorted(picks)


# --- confluent-kafka setup and read-back --------------------------------------------------------------


def create_topic(bootstrap: str, name: str, partitions: int = 3, configs: dict[str, str] | None = None) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})], operation_timeout=10)
    futures[name].result(timeout=DEFAULT_TIMEOUT_S)
    return name


def consume_partitions(
    bootstrap: str,
    topic: str,
    ends: dict[int, int],
    timeout_s: float = 60.0,
    starts: dict[int, int] | None = None,
) -> list[Consumed]:
    """Read ``[starts[p], ends[p])`` of each partition with assign() (confluent-kafka)."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "hw-readback",
        "enable.auto.commit": False,
        "auto.offset.reset": "error",
        "enable.partition.eof": False,
        "fetch.max.bytes": 16 * 1024 * 1024,
    })
    out: list[Consumed] = []
    try:
        starts = starts or {}
        consumer.assign([TopicPartition(topic, p, starts.get(p, 0)) for p in ends])
        remaining = {p: end for p, end in ends.items() if end > starts.get(p, 0)}
        deadline = time.monotonic() + timeout_s
        while remaining:
            if time.monotonic() > deadline:
                raise AssertionError(f"read-back of {topic} timed out; still waiting for {remaining}")
            for msg in consumer.consume(10_000, timeout=0.5):
                if msg.error():
                    raise KafkaException(msg.error())
                p, off = msg.partition(), msg.offset()
                if p not in remaining or off >= remaining[p]:
                    continue
                out.append(Consumed(p, off, msg.key(), msg.value(), msg.timestamp()[1]))
                if off == remaining[p] - 1:
                    del remaining[p]
    finally:
        consumer.close()
    return out


def watermarks(bootstrap: str, topic: str, partitions: Iterable[int]) -> dict[int, tuple[int, int]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "hw-watermarks"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
                for p in partitions}
    finally:
        consumer.close()


# --- raw protocol -----------------------------------------------------------------------------------


class ConnectionClosed(Exception):
    pass


def size_prefixed(body: bytes) -> bytes:
    """A request body as one Kafka frame: the 4-byte size, then the bytes."""
    return struct.pack(">i", len(body)) + body


def api_versions_probe(correlation_id: int) -> bytes:
    """A framed ApiVersions v0 with ``correlation_id``: answered unless the connection was closed first."""
    req = ApiVersionsRequest(version=0)
    req.with_header(correlation_id=correlation_id, client_id="probe")
    return bytes(req.encode(header=True, framed=True))


class RawConnection:
    """One blocking TCP connection speaking Kafka frames, with kafka-python's message classes."""

    def __init__(self, bootstrap: str, timeout_s: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def next_correlation_id(self) -> int:
        self._correlation += 1
        return self._correlation

    def encode(self, request: Any, correlation_id: int | None = None, client_id: str = "hw-test") -> bytes:
        cid = self.next_correlation_id() if correlation_id is None else correlation_id
        request.with_header(correlation_id=cid, client_id=client_id)
        return bytes(request.encode(header=True, framed=True))

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionClosed(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def recv_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._recv_exact(4))
        return self._recv_exact(size)

    def request(self, request: Any, response_cls: Any, version: int) -> Any:
        """Send one request and decode its response (matching the correlation id)."""
        cid = self.next_correlation_id()
        self.send_bytes(self.encode(request, cid))
        frame = self.recv_frame()
        (got,) = struct.unpack_from(">i", frame, 0)
        assert got == cid, f"correlation id {got}, expected {cid}"
        return response_cls.decode(frame, version=version, header=True)

    def closed_by_peer(self, timeout_s: float = 10.0) -> bool:
        """True when the broker closes this connection within ``timeout_s`` (reading past any answer)."""
        self.sock.settimeout(timeout_s)
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
        return False


# --- raw produce (idempotent batches built with kafka-python's record builder) -----------------------


def init_producer_id(conn: RawConnection) -> tuple[int, int]:
    version = 4
    resp = conn.request(
        InitProducerIdRequest(version=version, transactional_id=None, transaction_timeout_ms=60_000,
                              producer_id=-1, producer_epoch=-1),
        InitProducerIdResponse, version,
    )
    assert resp.error_code == 0, f"InitProducerId error {resp.error_code}"
    return resp.producer_id, resp.producer_epoch


def build_batch(records: list[tuple[bytes | None, bytes, int]], producer_id: int = -1, producer_epoch: int = -1,
                base_sequence: int = -1, compression: int = 0) -> bytes:
    """A RecordBatch v2 of (key, value, timestamp) records, offsets 0.. relative to the batch."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False,
                                        producer_id=producer_id, producer_epoch=producer_epoch,
                                        base_sequence=base_sequence, batch_size=16 * 1024 * 1024)
    for i, (key, value, ts) in enumerate(records):
        builder.append(i, timestamp=ts, key=key, value=value, headers=[])
    return bytes(builder.build())


PRODUCE_VERSION = 9


def produce_request(topic: str, partition: int, batch: bytes, acks: int = -1) -> Any:
    topic_cls = ProduceRequest.TopicProduceData
    return ProduceRequest(
        version=PRODUCE_VERSION, transactional_id=None, acks=acks, timeout_ms=10_000,
        topic_data=[topic_cls(name=topic, partition_data=[topic_cls.PartitionProduceData(index=partition,
                                                                                         records=batch)])],
    )


def decode_produce_response(frame: bytes) -> tuple[int, int]:
    """(error_code, base_offset) of the single partition in a ProduceResponse frame."""
    resp = ProduceResponse.decode(frame, version=PRODUCE_VERSION, header=True)
    (t,) = resp.responses
    (p,) = t.partition_responses
    return p.error_code, p.base_offset


def list_offset(conn: RawConnection, topic: str, partition: int, timestamp: int) -> tuple[int, int, int]:
    """(error_code, offset, timestamp) from ListOffsets v7 for one partition."""
    t_cls = ListOffsetsRequest.ListOffsetsTopic
    req = ListOffsetsRequest(version=7, replica_id=-1, isolation_level=0, topics=[
        t_cls(name=topic, partitions=[t_cls.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1,
                                                                  timestamp=timestamp)])])
    resp = conn.request(req, ListOffsetsResponse, 7)
    (p,) = resp.topics[0].partitions
    return p.error_code, p.offset, p.timestamp


def fetch_batches(conn: RawConnection, topic: str, partition: int = 0, offset: int = 0) -> list[DefaultRecordBatch]:
    """The record batches one Fetch v12 (up to 1 MiB, no wait) returns from ``offset``, parsed by
    kafka-python (``compression_type``, ``leader_epoch``, iteration over the records)."""
    t_cls = FetchRequest.FetchTopic
    req = FetchRequest(version=12, replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                       session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="", topics=[
                           t_cls(topic=topic, partitions=[t_cls.FetchPartition(
                               partition=partition, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                               log_start_offset=-1, partition_max_bytes=1 << 20)])])
    resp = conn.request(req, FetchResponse, 12)
    (p,) = resp.responses[0].partitions
    assert p.error_code == 0, f"Fetch {topic}-{partition}: error {p.error_code}"
    records = MemoryRecords(bytes(p.records or b""))
    out = []
    while (batch := records.next_batch()) is not None:
        out.append(batch)
    return out
