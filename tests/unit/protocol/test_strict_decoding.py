"""Request bodies are decoded as strictly as Kafka decodes them (headwater/protocol/strict.py).

What Kafka does is the expected answer, taken from apache/kafka 3.9: ``RequestContext.parseRequest``
runs the readers ``MessageDataGenerator`` generates, which throw on a negative length of a
non-nullable field ("non-nullable field X was serialized as null"), on a string, bytes or unknown
tagged field longer than what remains (``ByteBufferAccessor.readArray``: "Error reading byte array
of N byte(s): only M byte(s) available") and on an array longer than what remains ("Tried to
allocate a collection of size N, but there are only M bytes remaining"); ``parseRequest`` wraps
them in ``InvalidRequestException`` and ``SocketServer`` closes the connection. Bytes left over
after the last field Kafka 3.9 ignores (``AbstractRequest.parseRequest`` does not look), and a real
client relies on it, so we ignore them too. Null in a nullable field Kafka reads as null, and so
must we.

The generative test builds a fully populated request for every API key and version we advertise
from kafka-python's schema classes (Kafka's JSON schemas), checks it decodes exactly as
kafka-python decodes it, then checks every prefix cut, overlong lengths and nulls, and that bytes
left over change nothing.
"""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest
from kafka.protocol.admin import CreateTopicsRequest, DescribeConfigsRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest
from request_samples import API_VERSIONS, CLIENT_ID, CORRELATION_ID, body_offset, framed, sample

from headwater.protocol.apis import API_SPECS, ApiKey, decode_request
from headwater.protocol.errors import KafkaError
from headwater.protocol.frame import MalformedFrameError, write_unsigned_varint


def header(key: int, version: int, correlation_id: int = 5, client_id: bytes = b"x") -> bytes:
    """Request header v1 (the non-flexible versions used by the hand-built frames)."""
    return struct.pack(">hhih", key, version, correlation_id, len(client_id)) + client_id


# --- the frames seen on a real broker -------------------------------------------------------------


def test_sasl_handshake_mechanism_longer_than_its_frame_is_refused() -> None:
    # The mechanism's length says 200; the frame carries the 13 bytes of SCRAM-SHA-512.
    with pytest.raises(MalformedFrameError, match="runs past the end of the frame"):
        decode_request(header(17, 1) + struct.pack(">h", 200) + b"SCRAM-SHA-512")
    ok = decode_request(header(17, 1) + struct.pack(">h", 13) + b"SCRAM-SHA-512")
    assert ok.body.mechanism == "SCRAM-SHA-512"


def test_sasl_authenticate_token_longer_than_its_frame_is_refused() -> None:
    # auth_bytes says 200 bytes; the frame carries a valid 19-byte PLAIN token.
    token = b"\0alice\0alice-secret"
    assert len(token) == 19
    for version in (0, 1):
        with pytest.raises(MalformedFrameError, match="runs past the end of the frame"):
            decode_request(header(36, version) + struct.pack(">i", 200) + token)
        assert decode_request(header(36, version) + struct.pack(">i", 19) + token).body.auth_bytes == token
    # v2 is flexible: header v2 and compact bytes (length + 1 as a varint), then an empty tag section.
    flexible = header(36, 2) + b"\x00"
    with pytest.raises(MalformedFrameError):
        decode_request(flexible + write_unsigned_varint(201) + token + b"\x00")
    assert decode_request(flexible + write_unsigned_varint(20) + token + b"\x00").body.auth_bytes == token


# --- one of each kind, by hand -------------------------------------------------------------------


def test_field_cut_short_is_refused() -> None:
    frame = framed(ProduceRequest(version=3, transactional_id=None, acks=1, timeout_ms=100, topic_data=[]))
    with pytest.raises(MalformedFrameError):
        decode_request(frame[:-2])  # inside the topic_data array length


def test_bytes_left_over_are_ignored_as_kafka_ignores_them() -> None:
    for req in (ApiVersionsRequest(version=0), MetadataRequest(version=12, topics=None, allow_auto_topic_creation=True,
                                                                 include_topic_authorized_operations=False)):
        frame = framed(req)
        assert decode_request(frame + b"\x07\x00").body == decode_request(frame).body


def test_non_nullable_string_sent_as_null_is_refused() -> None:
    with pytest.raises(MalformedFrameError, match="non-nullable field mechanism was serialized as null"):
        decode_request(header(17, 1) + struct.pack(">h", -1))
    # Kafka reads any negative length as null, not only -1.
    with pytest.raises(MalformedFrameError, match="non-nullable field mechanism was serialized as null"):
        decode_request(header(17, 1) + struct.pack(">h", -7))


def test_nullable_string_sent_as_null_decodes_as_null() -> None:
    frame = framed(ProduceRequest(version=9, transactional_id=None, acks=1, timeout_ms=100, topic_data=[]))
    assert decode_request(frame).body.transactional_id is None


def _create_topics_v5(topics: Any) -> bytes:
    return framed(CreateTopicsRequest(version=5, topics=topics, timeout_ms=1000, validate_only=False))


def test_compact_array_length_zero_where_not_nullable_is_refused() -> None:
    # kafka-python's encoder writes a None array as compact length 0 (null) whatever the schema says.
    frame = _create_topics_v5(None)
    assert frame[body_offset(frame)] == 0
    with pytest.raises(MalformedFrameError, match="non-nullable field topics was serialized as null"):
        decode_request(frame)
    decode_request(_create_topics_v5([]))


def test_compact_array_length_zero_where_nullable_decodes_as_null() -> None:
    frame = framed(MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False,
                                   include_topic_authorized_operations=False))
    assert decode_request(frame).body.topics is None


def test_array_length_below_minus_one() -> None:
    """kafka-python reads -2 as an empty array; Kafka reads every negative length as null."""
    frame = bytearray(framed(CreateTopicsRequest(version=4, topics=[], timeout_ms=1000, validate_only=False)))
    at = body_offset(bytes(frame))
    assert frame[at : at + 4] == b"\x00\x00\x00\x00"
    frame[at : at + 4] = struct.pack(">i", -2)
    with pytest.raises(MalformedFrameError, match="non-nullable field topics was serialized as null"):
        decode_request(bytes(frame))
    nullable = bytearray(framed(MetadataRequest(version=1, topics=[])))
    at = body_offset(bytes(nullable))
    nullable[at : at + 4] = struct.pack(">i", -2)
    assert decode_request(bytes(nullable)).body.topics is None


def test_null_element_of_string_array_is_refused() -> None:
    """Elements of an array of strings are never nullable, even where the array itself is."""
    resource = DescribeConfigsRequest.DescribeConfigsResource
    frame = framed(DescribeConfigsRequest(version=1, resources=[resource(resource_type=2, resource_name="t",
                                                                         configuration_keys=[None])],
                                          include_synonyms=False))
    with pytest.raises(MalformedFrameError, match=r"non-nullable field resources\[\]\.configuration_keys\[\]"):
        decode_request(frame)


def test_varints_of_more_than_five_bytes_are_refused() -> None:
    """Kafka's ByteUtils.readUnsignedVarint reads at most 5 bytes ("Varint is too long"); a longer
    encoding of the same number is refused, a 5-byte one is not."""
    token = b"\0alice\0alice-secret"
    flexible = header(36, 2) + b"\x00"
    five = b"\x94\x80\x80\x80\x00"  # 20 (the compact length of 19 bytes) in 5 bytes
    assert decode_request(flexible + five + token + b"\x00").body.auth_bytes == token
    with pytest.raises(MalformedFrameError, match="varint longer than 5 bytes"):
        decode_request(flexible + b"\x94\x80\x80\x80\x80\x00" + token + b"\x00")


def test_array_longer_than_its_frame_is_refused() -> None:
    frame = bytearray(_create_topics_v5([]))
    at = body_offset(bytes(frame))
    frame[at : at + 1] = write_unsigned_varint(1_000_001)
    with pytest.raises(MalformedFrameError):
        decode_request(bytes(frame))


def test_librdkafkas_null_topic_array_in_metadata_is_read_as_kafka_reads_it() -> None:
    """librdkafka 2.16 writes Metadata v9+'s null topic array as a varint 0 in the four bytes it
    reserved for an int32 count, leaving three zeros (rd_kafka_MetadataRequest0, "v9+: keep 0").
    Kafka reads the zeros as the next fields and ignores the three bytes left over, which is why
    confluent-kafka can list all topics. Captured from confluent-kafka 2.16.1 (AdminClient.list_topics)."""
    frame = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")
    req = decode_request(frame)
    assert (req.version, req.client_id, req.body.topics) == (12, "rdkafka", None)
    assert (req.body.allow_auto_topic_creation, req.body.include_topic_authorized_operations) == (False, False)


def _fetch_v12(**tags: Any) -> FetchRequest:
    return FetchRequest(version=12, replica_id=-1, max_wait_ms=1, min_bytes=1, max_bytes=1, isolation_level=0,
                        session_id=0, session_epoch=-1, topics=[], forgotten_topics_data=[], rack_id="", **tags)


def test_known_tagged_field_decodes_and_must_fill_its_size() -> None:
    frame = framed(_fetch_v12(cluster_id="the-cluster"))
    assert frame.endswith(b"\x01\x00\x0c\x0cthe-cluster")  # one tag: 0, size 12, compact string of 11
    assert decode_request(frame).body.cluster_id == "the-cluster"
    longer = frame[:-13] + b"\x0d" + frame[-12:] + b"\x00"  # size 13 for the same 12-byte value (+1 filler)
    with pytest.raises(MalformedFrameError, match="tagged field cluster_id was sent as 13 bytes"):
        decode_request(longer)
    past = frame[:-13] + b"\x0e" + frame[-12:]  # size 14, one byte more than the frame has
    with pytest.raises(MalformedFrameError, match="runs past"):
        decode_request(past)


def test_unknown_tagged_field_is_kept_and_must_fit_in_the_frame() -> None:
    frame = framed(_fetch_v12())
    assert frame.endswith(b"\x00")
    with_tag = frame[:-1] + b"\x01\x63\x03abc"  # tag 99, 3 bytes
    assert decode_request(with_tag).body.unknown_tags == {"_99": b"abc"}
    with pytest.raises(MalformedFrameError, match="tagged field 99 of 200 bytes runs past the frame"):
        decode_request(frame[:-1] + b"\x01\x63" + write_unsigned_varint(200) + b"abc")
    with pytest.raises(MalformedFrameError):  # a varint longer than 5 bytes (Kafka: "Varint is too long")
        decode_request(frame[:-1] + b"\x01\x63\x83\x80\x80\x80\x80\x00abc")


# --- every API key and version -----------------------------------------------------------------------


def _refused(frame: bytes) -> bool:
    try:
        decode_request(frame)
    except MalformedFrameError:
        return True
    return False


@pytest.mark.parametrize(("key", "version"), API_VERSIONS, ids=[f"{k.name}-v{v}" for k, v in API_VERSIONS])
def test_every_api_version_is_decoded_strictly(key: ApiKey, version: int) -> None:
    spec = API_SPECS[key]
    s = sample(key, version)
    frame = s.frame

    # The full request decodes, and exactly as kafka-python decodes it.
    got = decode_request(frame)
    assert (got.version, got.correlation_id, got.client_id) == (version, CORRELATION_ID, CLIENT_ID)
    assert got.body == spec.request.decode(frame[s.body_offset :], version=version)
    for marker in s.markers:
        assert frame.count(marker.text) == 1, marker

    # (a) Every strict prefix, so also every cut inside a length field. A cut before the api key and
    # version are whole reads as an unsupported version; the broker closes on that too.
    for cut in range(len(frame)):
        if cut < 4:
            with pytest.raises(KafkaError):
                decode_request(frame[:cut])
        else:
            assert _refused(frame[:cut]), f"prefix of {cut} of {len(frame)} bytes was accepted"

    # (b) 1..8 bytes after the last field: ignored, as Kafka ignores them.
    rng = random.Random(f"{key}-{version}")
    for n in range(1, 9):
        assert decode_request(frame + rng.randbytes(n)).body == got.body, f"{n} trailing bytes changed the request"

    # (c) Each string or bytes length made to run past the frame.
    for marker in s.markers:
        for extra in s.past_end(marker):
            assert _refused(s.overlong(marker, extra)), f"{marker.path} with its length +{extra} was accepted"

    # (d) Each field that can be null on the wire sent as null: refused unless the schema makes it
    # nullable at this version, in which case it reads as null.
    for path, nullable in s.nullables:
        null_frame = s.with_null(path)
        if nullable:
            decode_request(null_frame)
        else:
            with pytest.raises(MalformedFrameError, match="was serialized as null"):
                decode_request(null_frame)


def test_the_generative_test_covers_every_kind_of_field() -> None:
    kinds: set[str] = set()
    flexible: set[bool] = set()
    nullable: set[bool] = set()
    for key, version in API_VERSIONS:
        s = sample(key, version)
        kinds |= {m.kind for m in s.markers}
        flexible.add(s.flexible)
        nullable |= {n for _, n in s.nullables}
    assert kinds == {"string", "bytes"} and flexible == nullable == {True, False}
    assert len(API_VERSIONS) > 200


def test_malformed_samples_are_all_refused() -> None:
    """The sample the live-broker test sends is refused here first."""
    rng = random.Random(7)
    for key, version in API_VERSIONS:
        for label, frame in sample(key, version).malformed(rng):
            assert _refused(frame), f"{key.name} v{version}: {label}"


def test_produce_records_are_a_view_of_the_frame_other_bytes_are_copies() -> None:
    """Kafka's generated ProduceRequestData reads a partition's records with ``readRecords``, a
    MemoryRecords over a slice of the request's buffer (no copy); the leader assigns offsets in
    those bytes and writes them. So do we: the records are a writable view of the frame."""
    batch = bytes(range(61)) * 2
    P = ProduceRequest.TopicProduceData.PartitionProduceData
    req = ProduceRequest(version=9, transactional_id=None, acks=-1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[P(index=0, records=batch)])])
    req.with_header(correlation_id=7, client_id="c")
    frame = bytearray(req.encode(header=True, framed=False))
    records = decode_request(frame).body.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and not records.readonly and records.obj is frame
    assert records == batch
    records[0] = 0xFF
    assert frame[frame.index(batch[1:]) - 1] == 0xFF
    # A byte field of another request (SASL's token) is still a bytes object of its own.
    token = b"\0alice\0alice-secret"
    auth = decode_request(bytearray(header(36, 1) + struct.pack(">i", len(token)) + token)).body.auth_bytes
    assert type(auth) is bytes and auth == token
