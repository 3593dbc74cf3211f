"""Hostile bytes against a live broker: it answers or closes that one connection, and nothing else.

The decoder alone is fuzzed in tests/unit/protocol/test_frame.py; here the frames go over real
sockets to a real broker process. Each hypothesis example opens a connection and sends random
bytes, a mutated valid request (bytes flipped, cut, inserted, header fields changed) or an
unsupported API key/version as one complete frame, followed by a valid ApiVersions v0 probe. The
broker must, within a bounded time, either answer the probe (the bad frame was answered or was a
valid acks=0 produce) or close the connection; then a new connection must still get good
ApiVersions and Metadata answers. Throughout, a kafka-python producer in another thread keeps
producing with acks=all and every one of its messages must succeed and read back in order.
Oversized, negative and truncated frames and many half-sent frames are checked separately, and
ApiVersions with a version the broker does not know gets a v0 answer with error 35.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from hw_support import (
    ConnectionClosed,
    RawConnection,
    api_versions_probe,
    build_batch,
    consume_partitions,
    create_topic,
    produce_request,
    size_prefixed,
    wait_until,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import KafkaProducer
from kafka.protocol.admin import DescribeClusterRequest, DescribeConfigsRequest, DescribeLogDirsRequest
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.producer import InitProducerIdRequest

from headwater.admin.local import BrokerProcess

UNSUPPORTED_VERSION = 35
PROBE_CID = 0x7EADBEEF
OUTCOME_TIMEOUT_S = 10.0
MAX_REQUEST_BYTES = 1024 * 1024  # socket.request.max.bytes of the fuzzed broker


# --- the broker under fire and the well-behaved client beside it -----------------------------------


class SteadyProducer(threading.Thread):
    """A kafka-python producer (acks=all) sending numbered messages to partition 0 until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.stop_event = threading.Event()
        self.sent = 0
        self.offsets: list[int] = []
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=1,
                                     request_timeout_ms=15_000)
            try:
                while not self.stop_event.is_set():
                    futures = [producer.send(self.topic, partition=0, value=b"steady-%08d" % (self.sent + i))
                               for i in range(20)]
                    producer.flush(timeout=30)
                    self.offsets.extend(f.get(timeout=0).offset for f in futures)
                    self.sent += len(futures)
                    self.stop_event.wait(0.02)
            finally:
                producer.close(timeout=10)
        except BaseException as exc:  # reported by the test
            self.failure = exc


@pytest.fixture
def fuzz_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory({"socket.request.max.bytes": str(MAX_REQUEST_BYTES)})


@pytest.fixture
def steady_producer(fuzz_broker: BrokerProcess, topic_name: Callable[..., str]) -> Iterator[SteadyProducer]:
    topic = create_topic(fuzz_broker.bootstrap, topic_name("steady"), partitions=1)
    producer = SteadyProducer(fuzz_broker.bootstrap, topic)
    producer.start()
    try:
        wait_until(lambda: producer.sent >= 20 or producer.failure, what="the well-behaved producer to start")
        yield producer
        # It must keep working after whatever the test did.
        target = producer.sent + 100
        wait_until(lambda: producer.sent >= target or producer.failure or not producer.is_alive(),
                   what="100 more messages from the well-behaved producer")
    finally:
        producer.stop_event.set()
        producer.join(timeout=60)
    assert not producer.is_alive(), "the well-behaved producer hung"
    assert producer.failure is None, f"the well-behaved producer failed: {producer.failure!r}"
    assert producer.offsets == list(range(producer.sent))
    got = sorted(consume_partitions(fuzz_broker.bootstrap, topic, {0: producer.sent}), key=lambda c: c.offset)
    assert [c.value for c in got] == [b"steady-%08d" % i for i in range(producer.sent)]
    assert fuzz_broker.alive


def assert_broker_healthy(broker: BrokerProcess) -> None:
    """A new connection gets a good ApiVersions v3 and Metadata v12 answer."""
    assert broker.alive, f"broker died\n{broker.log_tail()}"
    with RawConnection(broker.bootstrap, timeout_s=OUTCOME_TIMEOUT_S) as conn:
        av = conn.request(ApiVersionsRequest(version=3, client_software_name="hw-test", client_software_version="1"),
                          ApiVersionsResponse, 3)
        assert av.error_code == 0
        assert {k.api_key for k in av.api_keys} >= {0, 1, 2, 3, 18}
        md = conn.request(MetadataRequest(version=12, topics=None), MetadataResponse, 12)
        assert [b.node_id for b in md.brokers] == [1]


def send_and_judge(broker: BrokerProcess, payload: bytes) -> str:
    """Send ``payload`` then a probe; 'answered' when the probe is answered, 'closed' when the broker closes."""
    with RawConnection(broker.bootstrap, timeout_s=OUTCOME_TIMEOUT_S) as conn:
        try:
            conn.send_bytes(payload + api_versions_probe(PROBE_CID))
        except (BrokenPipeError, ConnectionResetError):
            return "closed"
        deadline = time.monotonic() + OUTCOME_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                data = conn.recv_frame()
            except (ConnectionClosed, ConnectionResetError):
                return "closed"
            except TimeoutError:
                break
            (cid,) = struct.unpack_from(">i", data, 0)
            if cid == PROBE_CID:
                resp = ApiVersionsResponse.decode(data, version=0, header=True)
                assert resp.error_code == 0
                return "answered"
        raise AssertionError(f"no answer and no close within {OUTCOME_TIMEOUT_S:.0f} s for {payload[:64]!r}...")


# --- seeds for mutation ----------------------------------------------------------------------------


def seed_frames(topic: str) -> list[bytes]:
    """Valid request frame bodies (no size prefix) over many APIs and versions."""
    reqs: list[object] = []
    reqs += [ApiVersionsRequest(version=v) for v in range(3)]
    reqs += [ApiVersionsRequest(version=v, client_software_name="fuzz", client_software_version="0.1") for v in (3, 4)]
    reqs += [MetadataRequest(version=v, topics=[MetadataRequest.MetadataRequestTopic(name=topic)]) for v in range(13)]
    reqs += [MetadataRequest(version=v, topics=None) for v in (1, 9, 12)]
    lo = ListOffsetsRequest.ListOffsetsTopic
    reqs += [ListOffsetsRequest(version=v, replica_id=-1, topics=[lo(name=topic, partitions=[
        lo.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-2)])]) for v in (1, 5, 7, 9)]
    reqs += [ListOffsetsRequest(version=0, replica_id=-1, topics=[lo(name=topic, partitions=[
        lo.ListOffsetsPartition(partition_index=0, timestamp=-2, max_num_offsets=3)])])]
    batch = build_batch([(b"k", b"fuzz-value", int(time.time() * 1000))])
    reqs += [produce_request(topic, 0, batch, acks=1)]
    reqs += [InitProducerIdRequest(version=v, transactional_id=None, transaction_timeout_ms=1000) for v in (0, 4)]
    reqs += [DescribeClusterRequest(version=0)]
    dc = DescribeConfigsRequest.DescribeConfigsResource
    reqs += [DescribeConfigsRequest(version=v, resources=[dc(resource_type=2, resource_name=topic,
                                                            configuration_keys=None)]) for v in (1, 4)]
    reqs += [DescribeLogDirsRequest(version=v, topics=None) for v in (1, 4)]
    out = []
    for i, req in enumerate(reqs):
        req.with_header(correlation_id=1000 + i, client_id="fuzz")  # type: ignore[attr-defined]
        out.append(bytes(req.encode(header=True, framed=False)))  # type: ignore[attr-defined]
    return out


@st.composite
def hostile_frame(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    kind = draw(st.sampled_from(["random", "mutated", "mutated", "header"]))
    if kind == "random":
        return draw(st.binary(min_size=0, max_size=300))
    body = bytearray(draw(st.sampled_from(seeds)))
    if kind == "header":
        # Valid body, other API key / version: unknown keys, versions out of range, negative ones.
        key = draw(st.sampled_from([-1, 4, 5, 6, 7, 17, 24, 36, 50, 67, 75, 76, 1000, 32767]) | st.integers(-32768, 32767))
        version = draw(st.integers(-32768, 32767) | st.sampled_from([-1, 0, 14, 17, 100]))
        struct.pack_into(">hh", body, 0, key, version)
        return bytes(body)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "cut", "insert", "delete"]))
        if not body:
            break
        at = draw(st.integers(0, len(body) - 1))
        if op == "flip":
            body[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            body[at] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
        elif op == "cut":
            del body[at:]
        elif op == "insert":
            body[at:at] = draw(st.binary(min_size=1, max_size=8))
        else:
            del body[at : at + draw(st.integers(1, 8))]
    return bytes(body)


# --- tests -------------------------------------------------------------------------------------------


def test_random_and_mutated_frames(fuzz_broker: BrokerProcess, steady_producer: SteadyProducer,
                                   topic_name: Callable[..., str]) -> None:
    topic = create_topic(fuzz_broker.bootstrap, topic_name("fuzz"), partitions=1)
    seeds = seed_frames(topic)
    for seed in seeds:  # every seed itself is answered
        assert send_and_judge(fuzz_broker, size_prefixed(seed)) == "answered", seed[:16]
    outcomes: dict[str, int] = {"answered": 0, "closed": 0}

    @settings(max_examples=600, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(body=hostile_frame(seeds))
    def run(body: bytes) -> None:
        outcomes[send_and_judge(fuzz_broker, size_prefixed(body))] += 1
        assert_broker_healthy(fuzz_broker)

    run()
    assert sum(outcomes.values()) >= 100, outcomes
    assert outcomes["closed"] > 0 and outcomes["answered"] > 0, outcomes
    assert steady_producer.is_alive() and steady_producer.failure is None


@pytest.mark.parametrize(
    ("key", "version"),
    [(9999, 0), (-1, 0), (32767, 0), (-32768, 3), (0, 2), (0, 13), (1, 18), (3, 14), (2, 12), (19, 1)],
)
def test_unknown_key_or_unsupported_version_closes_only_that_connection(
    broker: BrokerProcess, key: int, version: int
) -> None:
    body = struct.pack(">hhi", key, version, 42) + struct.pack(">h", 4) + b"fuzz" + b"\x00" * 16
    with RawConnection(broker.bootstrap) as bystander:
        assert send_and_judge(broker, size_prefixed(body)) == "closed"
        # An unrelated connection opened before is untouched.
        resp = bystander.request(ApiVersionsRequest(version=0), ApiVersionsResponse, 0)
        assert resp.error_code == 0
    assert_broker_healthy(broker)


@pytest.mark.parametrize("version", [5, 6, 127, 32767, -1, -32768])
def test_api_versions_with_unknown_version_gets_v0_error_35(broker: BrokerProcess, version: int) -> None:
    req = ApiVersionsRequest(version=3, client_software_name="future-client", client_software_version="9.9")
    with RawConnection(broker.bootstrap) as conn:
        data = bytearray(conn.encode(req, correlation_id=77))
        struct.pack_into(">h", data, 6, version)  # after the size and the api key
        conn.send_bytes(bytes(data))
        answer = conn.recv_frame()
        assert struct.unpack_from(">i", answer, 0) == (77,)
        resp = ApiVersionsResponse.decode(answer, version=0, header=True)
        assert resp.error_code == UNSUPPORTED_VERSION
        ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        assert ranges[18][0] == 0 and ranges[18][1] >= 3 and ranges[18][1] != version
        # The connection stays open: the client retries with a version the broker knows.
        retry = conn.request(ApiVersionsRequest(version=ranges[18][1], client_software_name="future-client",
                                                client_software_version="9.9"), ApiVersionsResponse, ranges[18][1])
        assert retry.error_code == 0
        assert {k.api_key: (k.min_version, k.max_version) for k in retry.api_keys} == ranges


@pytest.mark.parametrize(
    "prefix",
    [MAX_REQUEST_BYTES + 1, 2**31 - 1, -1, -(2**31)],
    ids=["max-plus-1", "int32-max", "minus-1", "int32-min"],
)
def test_oversized_or_negative_frame_size_closes_connection(fuzz_broker: BrokerProcess, prefix: int) -> None:
    with RawConnection(fuzz_broker.bootstrap, timeout_s=OUTCOME_TIMEOUT_S) as conn:
        conn.send_bytes(struct.pack(">i", prefix) + b"\x00\x12\x00\x00\x00\x00\x00\x01")
        assert conn.closed_by_peer(OUTCOME_TIMEOUT_S)
    assert_broker_healthy(fuzz_broker)


def test_short_frames_close_connection(fuzz_broker: BrokerProcess) -> None:
    for body in [b"", b"\x00", b"\x00\x12", b"\x00\x12\x00\x03", b"\x00\x12\x00\x00\x00\x00\x00"]:
        assert send_and_judge(fuzz_broker, size_prefixed(body)) == "closed", body
    assert_broker_healthy(fuzz_broker)


def test_half_sent_frames_do_not_block_others(fuzz_broker: BrokerProcess, steady_producer: SteadyProducer) -> None:
    """Clients that stop in the middle of a frame (small, or bigger than the read buffer) hold only
    their own connection; closing them mid-frame leaves the broker fine."""
    seed = seed_frames("half-sent")[0]
    stalled = []
    try:
        for i in range(30):
            s = socket.create_connection(("127.0.0.1", fuzz_broker.port), timeout=OUTCOME_TIMEOUT_S)
            stalled.append(s)
            if i % 3 == 0:
                s.sendall(size_prefixed(seed)[: 2 + i % 7])  # inside the size prefix or the header
            elif i % 3 == 1:
                s.sendall(struct.pack(">i", 512 * 1024) + b"\x00\x00\x00\x09" + b"\x00" * 1000)  # a large frame, begun
            else:
                s.sendall(size_prefixed(seed)[:-1])  # all but the last byte
        assert_broker_healthy(fuzz_broker)
        sent_before = steady_producer.sent
        deadline = time.monotonic() + OUTCOME_TIMEOUT_S
        while steady_producer.sent <= sent_before and time.monotonic() < deadline:
            time.sleep(0.02)
        assert steady_producer.sent > sent_before, "the well-behaved producer stalled"
    finally:
        for s in stalled:
            s.close()
    assert_broker_healthy(fuzz_broker)
