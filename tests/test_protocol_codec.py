"""Round trips of every version of every API, headers, and the public API's errors."""

from __future__ import annotations

import uuid

import pytest
from protocol_samples import sample_body

from pylog.protocol import (
    ApiKey,
    ErrorCode,
    ProtocolError,
    RequestHeader,
    UnsupportedVersionError,
    decode_body,
    decode_request,
    decode_response,
    encode_body,
    encode_request,
    encode_response,
    error_name,
    message_class,
    request_header_version,
    response_header_version,
)
from pylog.protocol.headers import decode_request_header, encode_request_header
from pylog.protocol.schema import HEADER_FIELDS, MESSAGE_SCHEMAS

ALL_VERSIONS = [(api_key, kind, version)
                for (api_key, kind), schema in sorted(MESSAGE_SCHEMAS.items())
                for version in range(schema.min_version, schema.max_version + 1)]


@pytest.mark.parametrize("api_key,kind,version", ALL_VERSIONS)
def test_body_round_trip(api_key: int, kind: str, version: int) -> None:
    for seed, null_chance in ((0, 0.0), (1, 0.5), (2, 1.0)):
        body = sample_body(api_key, version, kind, seed, null_chance)
        data = encode_body(api_key, version, kind, body)
        back = decode_body(api_key, version, kind, data)
        assert back.to_dict() == body.to_dict()
        # dicts encode the same as objects; a re-encode gives the same bytes
        assert encode_body(api_key, version, kind, body.to_dict()) == data
        assert encode_body(api_key, version, kind, back) == data


@pytest.mark.parametrize("api_key,kind,version", ALL_VERSIONS)
def test_frame_round_trip(api_key: int, kind: str, version: int) -> None:
    body = sample_body(api_key, version, kind, seed=7)
    if kind == "request":
        frame = encode_request(api_key, version, body, correlation_id=-5, client_id="c-1")
        header, back = decode_request(frame)
        assert (header.api_key, header.api_version) == (api_key, version)
        expected_client = None if header.header_version == 0 else "c-1"
        assert (header.correlation_id, header.client_id) == (-5, expected_client)
        assert header.header_version == request_header_version(api_key, version)
    else:
        frame = encode_response(api_key, version, 77, body, framed=False)
        correlation_id, back = decode_response(api_key, version, frame)
        assert correlation_id == 77
    assert back.to_dict() == body.to_dict()


def test_defaults_fill_missing_fields_and_absent_versions() -> None:
    # Missing dict fields take the schema default; fields absent from a version
    # decode to their default.
    data = encode_body(ApiKey.METADATA, 12, "request", {"topics": None})
    body = decode_body(ApiKey.METADATA, 12, "request", data)
    assert body.allow_auto_topic_creation is True  # JSON default "true"
    assert body.topics is None
    old = decode_body(ApiKey.METADATA, 0, "request",
                      encode_body(ApiKey.METADATA, 0, "request", {"topics": [{"name": "t"}]}))
    assert old.allow_auto_topic_creation is True  # not in v0: default
    assert old.topics[0].topic_id == uuid.UUID(int=0)
    fetch = message_class(ApiKey.FETCH, "request")()
    assert (fetch.replica_id, fetch.max_wait_ms, fetch.isolation_level) == (-1, 0, 0)


def test_records_decode_as_zero_copy_views() -> None:
    records = bytes(range(256)) * 64
    body = {"acks": -1, "timeout_ms": 100, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": records}]}]}
    frame = bytearray(encode_request(ApiKey.PRODUCE, 9, body, 1))
    _header, req = decode_request(frame)
    view = req.topic_data[0].partition_data[0].records
    assert isinstance(view, memoryview) and view == records
    frame[-4] ^= 0xFF  # the view shares the caller's buffer (3 empty tag sections follow)
    assert view[-1] == frame[-4] != records[-1]


def test_unknown_tagged_fields_are_kept_and_written_back() -> None:
    known = encode_body(ApiKey.HEARTBEAT, 4, "request",
                        {"group_id": "g", "generation_id": 1, "member_id": "m"})
    # replace the empty tagged section with two unknown tags (out of order)
    extra = known[:-1] + bytes([2, 9, 1, 0xAA, 5, 2, 0xBB, 0xCC])
    body = decode_body(ApiKey.HEARTBEAT, 4, "request", extra)
    assert body._unknown_tagged_fields == {9: b"\xaa", 5: b"\xbb\xcc"}
    assert encode_body(ApiKey.HEARTBEAT, 4, "request", body) == (
        known[:-1] + bytes([2, 5, 2, 0xBB, 0xCC, 9, 1, 0xAA]))


def test_known_tagged_field_written_only_when_not_default() -> None:
    base = {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}
    plain = encode_body(ApiKey.API_VERSIONS, 3, "response", base)
    assert plain.endswith(b"\x00")
    tagged = encode_body(ApiKey.API_VERSIONS, 3, "response",
                         {**base, "finalized_features_epoch": 5})
    assert tagged != plain
    assert decode_body(ApiKey.API_VERSIONS, 3, "response", tagged).finalized_features_epoch == 5


@pytest.mark.parametrize("header_version", [0, 1, 2])
def test_request_header_round_trip(header_version: int) -> None:
    for client_id in ("client", None, "é" * 300):
        data = encode_request_header(3, 12, 123456, client_id, header_version)
        header, pos = decode_request_header(memoryview(data), header_version)
        assert pos == len(data)
        expected_client = client_id if header_version >= 1 else None
        assert header == RequestHeader(3, 12, 123456, expected_client, header_version)


def test_header_fields_match_the_schema() -> None:
    names = [f.name for f in HEADER_FIELDS["RequestHeader"]]
    assert names == ["request_api_key", "request_api_version", "correlation_id", "client_id"]
    assert [f.name for f in HEADER_FIELDS["ResponseHeader"]] == ["correlation_id"]


def test_header_versions() -> None:
    assert request_header_version(ApiKey.CONTROLLED_SHUTDOWN, 0) == 0
    assert request_header_version(ApiKey.CONTROLLED_SHUTDOWN, 1) == 1
    assert request_header_version(ApiKey.PRODUCE, 8) == 1
    assert request_header_version(ApiKey.PRODUCE, 9) == 2
    assert response_header_version(ApiKey.PRODUCE, 8) == 0
    assert response_header_version(ApiKey.PRODUCE, 9) == 1
    for version in range(5):
        assert response_header_version(ApiKey.API_VERSIONS, version) == 0
    assert request_header_version(ApiKey.API_VERSIONS, 3) == 2


def test_api_versions_response_uses_header_v0() -> None:
    body = {"error_code": 0, "api_keys": [{"api_key": 0, "min_version": 0, "max_version": 9}]}
    frame = encode_response(ApiKey.API_VERSIONS, 3, 42, body, framed=False)
    assert frame[:4] == b"\x00\x00\x00\x2a"
    assert frame[4:6] == b"\x00\x00"  # error code right after the v0 header
    correlation_id, back = decode_response(ApiKey.API_VERSIONS, 3, frame)
    assert correlation_id == 42 and back.api_keys[0].max_version == 9


def test_framed_encodings_carry_their_size() -> None:
    frame = encode_request(ApiKey.HEARTBEAT, 4, {"group_id": "g"}, 1, framed=True)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    header, _ = decode_request(frame[4:])
    assert header.api_key == ApiKey.HEARTBEAT


def test_unsupported_version_carries_the_header() -> None:
    max_version = MESSAGE_SCHEMAS[(ApiKey.API_VERSIONS, "request")].max_version
    frame = encode_request_header(ApiKey.API_VERSIONS, max_version + 1, 9, "new-client", 2)
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(frame + b"\x00\x00\x00")
    err = info.value
    assert isinstance(err, ProtocolError)
    assert (err.api_key, err.api_version) == (ApiKey.API_VERSIONS, max_version + 1)
    assert err.header.correlation_id == 9 and err.header.client_id == "new-client"
    for (api_key, kind), schema in MESSAGE_SCHEMAS.items():
        with pytest.raises(UnsupportedVersionError):
            encode_body(api_key, schema.max_version + 1, kind, {})


def test_unknown_api_key() -> None:
    frame = encode_request_header(999, 0, 1, "c", 1)
    with pytest.raises(ProtocolError) as info:
        decode_request(frame)
    assert not isinstance(info.value, UnsupportedVersionError)
    with pytest.raises(ProtocolError):
        encode_request(999, 0, {}, 1)


def test_encode_errors_are_protocol_errors() -> None:
    with pytest.raises(ProtocolError):
        encode_body(ApiKey.HEARTBEAT, 0, "request", {"generation_id": 2**40})
    with pytest.raises(ProtocolError):
        encode_body(ApiKey.HEARTBEAT, 0, "request", {"no_such_field": 1})
    with pytest.raises(ProtocolError):
        encode_body(ApiKey.HEARTBEAT, 0, "request", {"group_id": None})  # not nullable
    with pytest.raises(ProtocolError):
        decode_body(ApiKey.HEARTBEAT, 0, "request", b"\x00\x01\xff\x00\x00\x00\x00\x00\x00")


def test_trailing_bytes_are_rejected_unless_allowed() -> None:
    frame = encode_request(ApiKey.HEARTBEAT, 4, {"group_id": "g"}, 1)
    with pytest.raises(ProtocolError):
        decode_request(frame + b"\x00")
    # As Kafka's broker does: known fields are read, the rest is ignored.
    header, body = decode_request(frame + b"\x00\x01\x02", allow_trailing=True)
    assert header.correlation_id == 1 and body.group_id == "g"


def test_error_codes() -> None:
    assert ErrorCode.UNSUPPORTED_VERSION == 35
    assert ErrorCode.NONE == 0 and ErrorCode.UNKNOWN_SERVER_ERROR == -1
    assert error_name(3) == "UNKNOWN_TOPIC_OR_PARTITION"
    assert error_name(12345) == "UNKNOWN_12345"


def test_api_key_names() -> None:
    assert ApiKey.PRODUCE == 0 and ApiKey.API_VERSIONS == 18
    assert ApiKey.SASL_HANDSHAKE == 17 and ApiKey.LEADER_AND_ISR == 4
    assert ApiKey.DESCRIBE_TOPIC_PARTITIONS == 75


def test_varint_primitives() -> None:
    from pylog.protocol import types as t

    for value in (0, 1, 127, 128, 300, 2**21, 2**32 - 1):
        data = t.uvarint(value)
        assert t.read_uvarint(memoryview(data), 0) == (value, len(data))
    for value in (0, -1, 1, -64, 64, -2**31, 2**31 - 1):
        data = t.varint(value)
        assert t.read_varint(memoryview(data), 0) == (value, len(data))
    with pytest.raises(ProtocolError):
        t.read_uvarint(memoryview(b"\xff\xff\xff\xff\xff\x01"), 0)
    with pytest.raises(ProtocolError):
        t.uvarint(-1)
