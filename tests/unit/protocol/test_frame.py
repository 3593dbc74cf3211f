from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from headwater.protocol.apis import (
    API_SPECS,
    ApiKey,
    api_versions_unsupported,
    decode_request,
    encode_response,
)
from headwater.protocol.errors import ErrorCode, KafkaError
from headwater.protocol.frame import (
    MalformedFrameError,
    parse_request_header,
    read_unsigned_varint,
    write_unsigned_varint,
)


@given(st.integers(0, 2**32 - 1))
def test_varint_roundtrip(value: int) -> None:
    encoded = write_unsigned_varint(value)
    assert read_unsigned_varint(encoded, 0) == (value, len(encoded))


def _frame(req: object, correlation_id: int = 9, client_id: str = "tests") -> bytes:
    req.with_header(correlation_id=correlation_id, client_id=client_id)  # type: ignore[attr-defined]
    return bytes(req.encode(header=True))  # type: ignore[attr-defined]


@pytest.mark.parametrize("version", range(0, 5))
def test_api_versions_request_decodes(version: int) -> None:
    kwargs = {"client_software_name": "x", "client_software_version": "1"} if version >= 3 else {}
    req = decode_request(_frame(ApiVersionsRequest(version=version, **kwargs)))
    assert req.spec.key == ApiKey.API_VERSIONS
    assert (req.version, req.correlation_id, req.client_id) == (version, 9, "tests")


@pytest.mark.parametrize("version", [1, 4, 9, 12])
def test_metadata_request_header_versions(version: int) -> None:
    topics = [MetadataRequest.MetadataRequestTopic(name="a")]
    frame = _frame(MetadataRequest(version=version, topics=topics, allow_auto_topic_creation=False,
                                   include_topic_authorized_operations=False, include_cluster_authorized_operations=False))
    header = parse_request_header(frame, API_SPECS[ApiKey.METADATA].is_flexible(version))
    assert header.client_id == "tests"
    req = decode_request(frame)
    assert [t.name for t in req.body.topics] == ["a"]


def test_unknown_key_and_version_are_unsupported() -> None:
    frame = bytearray(_frame(MetadataRequest(version=1, topics=[])))
    frame[0:2] = (999).to_bytes(2, "big")
    with pytest.raises(KafkaError) as err:
        decode_request(frame)
    assert err.value.code == ErrorCode.UNSUPPORTED_VERSION
    frame = bytearray(_frame(MetadataRequest(version=1, topics=[])))
    frame[2:4] = (77).to_bytes(2, "big")
    with pytest.raises(KafkaError):
        decode_request(frame)


def test_unsupported_api_versions_answer_is_v0_with_ranges() -> None:
    from kafka.protocol.metadata import ApiVersionsResponse

    raw = api_versions_unsupported(42)
    assert int.from_bytes(raw[4:8], "big") == 42
    resp = ApiVersionsResponse.decode(raw[8:], version=0)
    assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert {k.api_key for k in resp.api_keys} == set(API_SPECS)


def test_api_versions_v3_response_has_no_default_tags() -> None:
    """kcat's librdkafka 2.0.2 cannot parse an ApiVersions v3 response with three or more tags."""
    frame = _frame(ApiVersionsRequest(version=3, client_software_name="x", client_software_version="1"))
    req = decode_request(frame)
    from headwater.protocol.apis import advertised_versions

    raw = encode_response(req, req.response(error_code=0, api_keys=advertised_versions(req.spec.response), throttle_time_ms=0))
    # v3 body ends with throttle_time_ms then the tag section: an empty one is a single 0 byte.
    assert raw[-1:] == b"\x00"
    assert raw[-5:-1] == b"\x00\x00\x00\x00"


@given(st.binary(max_size=200))
def test_decoder_never_crashes_on_garbage(data: bytes) -> None:
    with contextlib.suppress(KafkaError, ValueError, MalformedFrameError):
        decode_request(data)


@given(st.data())
def test_decoder_survives_mutated_real_requests(data: st.DataObject) -> None:
    frame = bytearray(_frame(MetadataRequest(version=data.draw(st.integers(0, 12)),
                                             topics=[MetadataRequest.MetadataRequestTopic(name="abc")],
                                             allow_auto_topic_creation=True, include_topic_authorized_operations=False,
                                             include_cluster_authorized_operations=False)))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(frame) - 1))
        frame[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(frame)))
    with contextlib.suppress(KafkaError, ValueError, MalformedFrameError):
        decode_request(bytes(frame[:cut]))
