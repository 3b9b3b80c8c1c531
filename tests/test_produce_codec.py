"""The native Produce codec (``pylog._native.produce_codec``) against its twin.

The generic codec (:mod:`pylog.protocol`: ``decode_request`` / ``encode_response``)
is the reference: for every version 3-11 both decode the same frames (sample
bodies, nulls, unicode, unknown tagged fields, trailing bytes, truncations,
mutations, fuzz) to equal values or both refuse them with ``ProtocolError``, and
both encode the same responses to identical bytes.
"""

from __future__ import annotations

import struct
from functools import partial
from typing import Any

import codec_twins as twins
import pytest
from codec_twins import CLIENT_IDS, INT16, INT32, INT64, LENGTH_PATTERNS, Frame
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_samples import sample_body

from pylog._native import produce_codec
from pylog.protocol import ApiKey, ProtocolError, decode_request, encode_request, encode_response

decode_produce_request = produce_codec.decode_produce_request
encode_produce_response = produce_codec.encode_produce_response

VERSIONS = list(range(3, 12))
FLEXIBLE = [v for v in VERSIONS if v >= 9]

Decoded = tuple[Any, ...]
Partition = tuple[int, int, int, int, int, str | None]
Responses = list[tuple[str, list[Partition]]]


# -- helpers -----------------------------------------------------------------------------


def _records(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def generic_decode(frame: Frame) -> Decoded:
    """The generic codec's result in the native codec's shape (records as bytes)."""
    header, body = decode_request(frame, allow_trailing=True)
    assert header.api_key == ApiKey.PRODUCE
    return (header.api_version, header.correlation_id, header.client_id,
            body.transactional_id, body.acks, body.timeout_ms,
            [(t.name, [(p.index, _records(p.records)) for p in t.partition_data])
             for t in body.topic_data])


def native_decode(frame: Frame) -> Decoded:
    version, correlation_id, client_id, transactional_id, acks, timeout_ms, topics = (
        decode_produce_request(frame))
    return (version, correlation_id, client_id, transactional_id, acks, timeout_ms,
            [(name, [(index, _records(records)) for index, records in parts])
             for name, parts in topics])


def assert_same_outcome(frame: Frame) -> Any:
    return twins.same_outcome(native_decode, generic_decode, frame)


# A Produce request frame: (version, body, correlation_id=7, client_id="pylog", header_tags=None).
request_frame = partial(twins.request_frame, ApiKey.PRODUCE)


def small_frame(version: int, seed: int = 3, tagged: bool = True) -> bytes:
    """A sample request with short record sets (for the exhaustive malformed-input
    tests), unknown tagged fields at every level in flexible versions."""
    body = sample_body(ApiKey.PRODUCE, version, "request", seed, null_chance=0.0)
    body.transactional_id = "tx-é"
    for topic in body.topic_data:
        for part in topic.partition_data:
            part.records = part.records[:9]
    body.topic_data[0].partition_data[1].records = None
    return twins.small_request_frame(ApiKey.PRODUCE, version, body, "topic_data",
                                     "partition_data", tagged)


def generic_response(version: int, correlation_id: int, responses: Responses,
                     throttle_time_ms: int = 0) -> bytes:
    """The generic encoder's frame for the native encoder's arguments (no
    current_leader / record_errors / node_endpoints: their defaults are written)."""
    body = {"throttle_time_ms": throttle_time_ms, "responses": [
        {"name": name, "partition_responses": [
            {"index": p[0], "error_code": p[1], "base_offset": p[2],
             "log_append_time_ms": p[3], "log_start_offset": p[4], "error_message": p[5]}
            for p in parts]}
        for name, parts in responses]}
    return encode_response(ApiKey.PRODUCE, version, correlation_id, body)


def assert_same_encoding(version: int, correlation_id: int, responses: Responses,
                         throttle_time_ms: int = 0) -> bytes:
    native = encode_produce_response(version, correlation_id, responses, throttle_time_ms)
    assert type(native) is bytes
    assert native == generic_response(version, correlation_id, responses, throttle_time_ms)
    assert int.from_bytes(native[:4], "big") == len(native) - 4
    return native


def sample_responses(version: int, seed: int) -> tuple[Responses, int]:
    body = sample_body(ApiKey.PRODUCE, version, "response", seed)
    responses = [(t.name, [(p.index, p.error_code, p.base_offset, p.log_append_time_ms,
                            getattr(p, "log_start_offset", -1), getattr(p, "error_message", None))
                           for p in t.partition_responses])
                 for t in body.responses]
    return responses, body.throttle_time_ms


# -- decoding: equivalence ------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_decode_matches_generic_on_samples(version: int) -> None:
    twins.check_samples(ApiKey.PRODUCE, version, request_frame, native_decode,
                        assert_same_outcome)


def test_decode_samples_cover_nulls_and_unicode() -> None:
    """The sample bodies above do exercise null transactional ids and records and
    non-ASCII strings (else the equivalence test would prove less)."""
    seen: set[str] = set()
    for version in VERSIONS:
        for seed in range(12):
            body = sample_body(ApiKey.PRODUCE, version, "request", seed)
            if body.transactional_id is None:
                seen.add("null transactional id")
            elif not body.transactional_id.isascii():
                seen.add("unicode transactional id")
            for topic in body.topic_data:
                if not topic.name.isascii():
                    seen.add("unicode topic")
                if any(p.records is None for p in topic.partition_data):
                    seen.add("null records")
    assert seen == {"null transactional id", "unicode transactional id", "unicode topic",
                    "null records"}


@pytest.mark.parametrize("version", VERSIONS)
def test_decode_unicode_nulls_and_sizes(version: int) -> None:
    records = bytes(range(256)) * 3
    body = {"transactional_id": "tx-ü🙂-事务", "acks": -1, "timeout_ms": INT32[1], "topic_data": [
        {"name": "主题-🚀", "partition_data": [
            {"index": INT32[0], "records": None},
            {"index": INT32[1], "records": b""},
            {"index": 0, "records": records}]},
        {"name": "t" * 200, "partition_data": []},
        {"name": "", "partition_data": [{"index": 5, "records": b"x"}]},
    ]}
    for client_id in CLIENT_IDS:
        frame = request_frame(version, body, correlation_id=INT32[1], client_id=client_id)
        got = assert_same_outcome(frame)
        assert got == (version, INT32[1], client_id, "tx-ü🙂-事务", -1, INT32[1], [
            ("主题-🚀", [(INT32[0], None), (INT32[1], b""), (0, records)]),
            ("t" * 200, []), ("", [(5, b"x")])])
    body["transactional_id"] = None
    body["acks"] = 0
    got = assert_same_outcome(request_frame(version, body, client_id=None))
    assert got[2:5] == (None, None, 0)


@pytest.mark.parametrize("version", VERSIONS)
def test_decode_many_topics_and_partitions(version: int) -> None:
    """Counts of 128 and more take multi-byte compact lengths in flexible versions."""
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": f"topic-{t}", "partition_data": [
            {"index": p, "records": None if p % 3 else bytes([t % 256, p % 256])}
            for p in range(300 if t == 0 else 2)]}
        for t in range(150)]}
    got = assert_same_outcome(request_frame(version, body))
    assert len(got[6]) == 150 and len(got[6][0][1]) == 300


@pytest.mark.parametrize("version", FLEXIBLE)
def test_decode_skips_unknown_tagged_fields(version: int) -> None:
    body = sample_body(ApiKey.PRODUCE, version, "request", seed=5, null_chance=0.0)
    body._unknown_tagged_fields = {0: b"", 9: b"body-tag"}
    body.topic_data[0]._unknown_tagged_fields = {300: b"t" * 200}  # multi-byte tag and size
    body.topic_data[1]._unknown_tagged_fields = {1: b"x"}
    body.topic_data[0].partition_data[1]._unknown_tagged_fields = {2: b"p", 70000: b""}
    header_tags = {0: b"hdr", 1000: bytes(130)}
    for client_id in (None, "cli-é"):
        frame = request_frame(version, body, client_id=client_id, header_tags=header_tags)
        header, decoded = decode_request(frame, allow_trailing=True)  # the tags are really there
        assert header._unknown_tagged_fields == header_tags
        assert decoded._unknown_tagged_fields == body._unknown_tagged_fields
        assert decoded.topic_data[0]._unknown_tagged_fields == {300: b"t" * 200}
        assert decoded.topic_data[0].partition_data[1]._unknown_tagged_fields == {
            2: b"p", 70000: b""}
        plain = request_frame(version, sample_body(ApiKey.PRODUCE, version, "request", seed=5,
                                                   null_chance=0.0), client_id=client_id)
        assert len(frame) > len(plain)
        assert assert_same_outcome(frame) == native_decode(plain)


@pytest.mark.parametrize("version", VERSIONS)
def test_trailing_bytes_are_ignored(version: int) -> None:
    twins.check_trailing_bytes_ignored(small_frame(version), native_decode, assert_same_outcome)


# -- decoding: the records views ------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_records_alias_the_frame(version: int) -> None:
    frame = bytearray(small_frame(version))
    topics = decode_produce_request(frame)[6]
    views = [records for _, parts in topics for _, records in parts if records is not None]
    assert views
    for records in views:
        assert type(records) is memoryview
        assert records.format == "B" and records.ndim == 1 and records.itemsize == 1
        assert records.obj is frame and not records.readonly
        before = bytes(frame)
        records[0] ^= 0xFF
        changed = [i for i in range(len(frame)) if frame[i] != before[i]]
        assert len(changed) == 1 and frame[changed[0]] == records[0]
    # The generic codec finds the same bytes at the same places.
    assert native_decode(frame) == generic_decode(frame)


def test_records_views_of_other_buffers() -> None:
    frame = small_frame(9)
    expected = native_decode(frame)
    # Read-only bytes: read-only views.
    topics = decode_produce_request(frame)[6]
    assert all(r.readonly and r.obj is frame for _, parts in topics for _, r in parts if r)
    # A slice of a larger buffer (after a size prefix): views into that buffer.
    buf = bytearray(len(frame).to_bytes(4, "big") + frame)
    topics = decode_produce_request(memoryview(buf)[4:])[6]
    records = next(r for _, parts in topics for _, r in parts if r)
    before = bytes(buf)
    records[0] ^= 0x55
    assert sum(a != b for a, b in zip(buf, before, strict=True)) == 1
    # A view of another format and shape: 1-D unsigned byte views all the same.
    padded, views = twins.padded_views(frame)  # trailing bytes are ignored
    for view in views:
        topics = decode_produce_request(view)[6]
        records = [r for _, parts in topics for _, r in parts if r is not None]
        assert all(r.format == "B" and r.ndim == 1 for r in records)
        assert native_decode(view) == expected == generic_decode(view)
        records[0][0] ^= 1
        assert native_decode(padded) != expected
        records[0][0] ^= 1


# -- decoding: malformed input --------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_every_truncation(version: int) -> None:
    twins.check_every_truncation((small_frame(version), small_frame(version, seed=8, tagged=False)),
                                 assert_same_outcome)


@pytest.mark.parametrize("version", VERSIONS)
def test_mutated_lengths(version: int) -> None:
    """Huge, negative, null and zero int16 / int32 / varint lengths written at
    every position: both codecs decode the same values or both refuse."""
    twins.check_mutated_lengths(small_frame(version), LENGTH_PATTERNS, assert_same_outcome)


def test_random_byte_flips() -> None:
    frames = [small_frame(v, seed) for v in VERSIONS for seed in (1, 2)]
    twins.check_random_byte_flips(frames, 20240611, assert_same_outcome)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(VERSIONS), st.integers(*INT32), st.binary(max_size=120))
def test_fuzz_same_outcome(version: int, correlation_id: int, tail: bytes) -> None:
    assert_same_outcome(twins.fuzz_head(ApiKey.PRODUCE, version, correlation_id) + tail)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(VERSIONS), st.data())
def test_fuzz_spliced_frames(version: int, data: st.DataObject) -> None:
    """A valid frame with a random slice replaced by random bytes."""
    twins.check_spliced_frame(lambda seed: small_frame(version, seed=seed), data,
                              assert_same_outcome)


def test_absurd_counts_are_rejected_before_allocating() -> None:
    classic = encode_request(ApiKey.PRODUCE, 3, {"topic_data": []}, 1)[:-4]  # up to the count
    flexible = encode_request(ApiKey.PRODUCE, 9, {"topic_data": []}, 1)[:-2]
    topic3 = classic + b"\x00\x00\x00\x01" + b"\x00\x01t"  # one topic "t"; then its count
    topic9 = flexible + b"\x02" + b"\x02t"
    frames = [
        classic + (2**31 - 1).to_bytes(4, "big") + bytes(64),
        classic + (2**20).to_bytes(4, "big") + bytes(64),
        topic3 + (2**31 - 1).to_bytes(4, "big") + bytes(64),
        topic3 + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x00" + b"\x7f\xff\xff\xff" + bytes(64),
        flexible + b"\xff\xff\xff\xff\x0f" + bytes(32),
        topic9 + b"\xff\xff\xff\xff\x0f" + bytes(32),
        topic9 + b"\x02" + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff\x0f" + bytes(32),
        # A tag section claiming 2**32 - 1 fields, and one field of 2**32 - 1 bytes.
        flexible + b"\x01" + b"\xff\xff\xff\xff\x0f" + bytes(32),
        flexible + b"\x01" + b"\x01" + b"\x00" + b"\xff\xff\xff\xff\x0f" + bytes(32),
    ]
    twins.check_absurd_counts(frames, classic, flexible, decode_produce_request,
                              assert_same_outcome)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("field", ["client", "transactional", "topic"])
@pytest.mark.parametrize("bad", [b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xe2\x82"])
def test_invalid_utf8_is_a_protocol_error(version: int, field: str, bad: bytes) -> None:
    body = {"transactional_id": "transactional", "acks": 1, "timeout_ms": 5, "topic_data": [
        {"name": "topic", "partition_data": [{"index": 0, "records": b"r"}]}]}
    twins.check_invalid_utf8(request_frame(version, body, client_id="client"), field, bad,
                             decode_produce_request, assert_same_outcome)


def test_short_frames_are_protocol_errors() -> None:
    twins.check_refused((b"", b"\x00", b"\x00\x00\x00\x09\x00\x00\x00", b"\x00\x01\x00\x04"),
                        assert_same_outcome)


@pytest.mark.parametrize("api_key,version", [(ApiKey.FETCH, 4), (ApiKey.FETCH, 12),
                                             (ApiKey.METADATA, 12), (ApiKey.API_VERSIONS, 3)])
def test_other_apis_are_value_errors(api_key: int, version: int) -> None:
    twins.check_value_error(decode_produce_request, twins.sample_request(api_key, version),
                            "not a Produce request")


@pytest.mark.parametrize("version", [0, 1, 2, 12, 13, 0x7FFF, -1])
def test_other_versions_are_value_errors(version: int) -> None:
    twins.check_other_version(ApiKey.PRODUCE, version, 2, small_frame(11),
                              decode_produce_request, generic_decode)


# -- encoding -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_encode_matches_generic_on_samples(version: int) -> None:
    for seed in range(12):
        responses, throttle_time_ms = sample_responses(version, seed)
        assert_same_encoding(version, seed * 7919 - 2**31, responses, throttle_time_ms)


@pytest.mark.parametrize("version", VERSIONS)
def test_encode_messages_and_extremes(version: int) -> None:
    messages = [None, "", "é∂🙂 unicode message", "m" * 200, "\x00nul"]
    parts: list[Partition] = [(i, 0, 0, -1, -1, m) for i, m in enumerate(messages)]
    extremes: list[Partition] = [
        (INT32[0], INT16[0], INT64[0], INT64[0], INT64[0], None),
        (INT32[1], INT16[1], INT64[1], INT64[1], INT64[1], "max"),
        (-1, -1, -1, -1, -1, ""),
        (0, 0, 0, 0, 0, None),
    ]
    for correlation_id in (0, INT32[0], INT32[1]):
        for throttle in (0, 1, INT32[0], INT32[1]):
            assert_same_encoding(version, correlation_id, [("topic", parts)], throttle)
            assert_same_encoding(version, correlation_id, [("主题-🚀", extremes), ("", [])],
                                 throttle)


@pytest.mark.parametrize("version", VERSIONS)
def test_encode_shapes(version: int) -> None:
    assert_same_encoding(version, 1, [])
    assert_same_encoding(version, 1, [("t", [])])
    many_topics: Responses = [(f"topic-{t}", [(p, t % 7, t * 1000 + p, -1, 0, None)
                                              for p in range(3)]) for t in range(150)]
    assert_same_encoding(version, 2, many_topics, 100)
    many_parts: Responses = [("t" * 300, [(p, 0, p, p, p, "e" if p % 2 else None)
                                          for p in range(400)])]
    assert_same_encoding(version, 3, many_parts, 5)


@pytest.mark.parametrize("version", FLEXIBLE)
def test_encode_long_strings_flexible(version: int) -> None:
    assert_same_encoding(version, 1, [("n" * 40000, [(0, 1, 2, 3, 4, "m" * 70000)])])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(VERSIONS), st.integers(*INT32), st.integers(*INT32),
       twins.topics_strategy(st.none() | st.text(max_size=40)))
def test_fuzz_encode(version: int, correlation_id: int, throttle_time_ms: int,
                     responses: Responses) -> None:
    assert_same_encoding(version, correlation_id, responses, throttle_time_ms)


GOOD: Partition = (0, 0, 0, -1, -1, None)


@pytest.mark.parametrize("version", VERSIONS)
def test_encode_refuses_bad_input(version: int) -> None:
    def refuses(exc: type[BaseException], responses: Any, correlation_id: Any = 1,
                throttle: Any = 0) -> None:
        with pytest.raises(exc):
            encode_produce_response(version, correlation_id, responses, throttle)

    twins.refuse_bad_partitions(GOOD, [INT32, INT16, INT64, INT64] + [INT64] * (version >= 5),
                                refuses)
    for value in (INT32[0] - 1, INT32[1] + 1):
        refuses(OverflowError, [("t", [GOOD])], correlation_id=value)
        refuses(OverflowError, [("t", [GOOD])], throttle=value)
    if version >= 8:
        for message in (b"m", 5):
            refuses(TypeError, [("t", [(*GOOD[:5], message)])])
    twins.refuse_bad_shapes(GOOD, refuses)
    refuses(TypeError, [("t", [GOOD])], correlation_id="1")


@pytest.mark.parametrize("version", [-1, 0, 1, 2, 12, 100])
def test_encode_other_versions_are_value_errors(version: int) -> None:
    with pytest.raises(ValueError, match="no native codec"):
        encode_produce_response(version, 1, [("t", [GOOD])])


# -- inputs both encoders refuse -------------------------------------------------------
# Each test first asserts that the generic encoder refuses the input, then the native one.


def generic_refuses(version: int, correlation_id: Any, responses: Any) -> bool:
    try:
        generic_response(version, correlation_id, responses)
    except (ProtocolError, struct.error):  # the header's correlation id: a bare struct.error
        return True
    return False


@pytest.mark.parametrize("version,where", [(v, "name") for v in VERSIONS if v < 9]
                         + [(8, "error_message")])
def test_encode_refuses_classic_strings_over_int16(version: int, where: str) -> None:
    long = "n" * 40000
    responses: Responses = ([(long, [GOOD])] if where == "name"
                            else [("t", [(*GOOD[:5], long)])])
    assert generic_refuses(version, 1, responses)
    # Found by these tests: the native encoder once wrapped the int16 length.
    with pytest.raises(ProtocolError):
        encode_produce_response(version, 1, responses)


@pytest.mark.parametrize("where", ["index", "base_offset", "correlation_id"])
def test_encode_refuses_non_integers(where: str) -> None:
    part: Partition = (1.5, 0, 0, -1, -1, None) if where == "index" else (  # type: ignore[assignment]
        (0, 0, 2.5, -1, -1, None) if where == "base_offset" else GOOD)
    correlation_id: Any = 1.5 if where == "correlation_id" else 1
    assert generic_refuses(11, correlation_id, [("t", [part])])
    # Found by these tests: the native encoder once truncated floats.
    with pytest.raises(TypeError):
        encode_produce_response(11, correlation_id, [("t", [part])])
