"""The native Fetch codec (``pylog._native.fetch_codec``) against its twin.

The generic codec is the reference: ``decode_request(frame, allow_trailing=True)``
for requests, and for responses the body encoder, response header and
``frame_parts`` exactly as the broker's Fetch handler used them.  For every
version 4-12 both decode the same frames (sample bodies, nulls, unicode, unknown
tagged fields, trailing bytes, truncations, mutations, fuzz) to equal values or
both refuse them with ``ProtocolError``, and both encode the same responses to
identical pieces: equal bytes, and the same FileRegion objects at the same places.
"""

from __future__ import annotations

import struct
from functools import partial
from typing import Any

import codec_twins as twins
import pytest
from codec_twins import CLIENT_IDS, INT8, INT16, INT32, INT64, LENGTH_PATTERNS, Frame
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_samples import sample_body

from pylog._native import fetch_codec
from pylog.net.framing import FileRegion, frame_parts
from pylog.protocol import ApiKey, ProtocolError, decode_request, encode_request
from pylog.protocol.headers import encode_response_header, response_header_version
from pylog.protocol.messages import body_encoder

decode_fetch_request = fetch_codec.decode_fetch_request
encode_fetch_response = fetch_codec.encode_fetch_response

VERSIONS = list(range(4, 13))
FLEXIBLE = [12]

Decoded = tuple[Any, ...]
Partition = tuple[int, int, int, int, int, Any, Any]
Topics = list[tuple[str, list[Partition]]]


# -- helpers: decoding -------------------------------------------------------------------


def generic_decode(frame: Frame) -> Decoded:
    """The generic codec's result in the native codec's shape."""
    header, body = decode_request(frame, allow_trailing=True)
    assert header.api_key == ApiKey.FETCH
    return (header.api_version, header.correlation_id, header.client_id,
            body.max_wait_ms, body.min_bytes, body.max_bytes, body.isolation_level,
            body.session_id, body.session_epoch,
            [(t.topic, [(p.partition, p.fetch_offset, p.partition_max_bytes,
                         p.current_leader_epoch)
                        for p in t.partitions])
             for t in body.topics],
            [(t.topic, list(t.partitions)) for t in body.forgotten_topics_data]
            if header.api_version >= 7 else [], body.replica_id)


def native_decode(frame: Frame) -> Decoded:
    got = decode_fetch_request(frame)
    assert type(got) is tuple and len(got) == 12
    topics, forgotten = got[9], got[10]
    assert type(forgotten) is list
    assert all(type(t) is tuple and type(t[0]) is str and type(t[1]) is list
               for t in forgotten)
    assert type(topics) is list
    for topic in topics:
        assert type(topic) is tuple and len(topic) == 2 and type(topic[0]) is str
        assert type(topic[1]) is list
        assert all(type(p) is tuple and len(p) == 4 for p in topic[1])
    return got


def assert_same_outcome(frame: Frame) -> Any:
    return twins.same_outcome(native_decode, generic_decode, frame)


# A Fetch request frame: (version, body, correlation_id=7, client_id="pylog", header_tags=None).
request_frame = partial(twins.request_frame, ApiKey.FETCH)


def body_dict(topics: list[tuple[str, list[tuple[int, ...]]]], **fields: Any
              ) -> dict[str, Any]:
    """A request body for the generic encoder from the native codec's topics shape
    (the current leader epoch may be left out: 77); the dropped fields get
    non-default values (they are read and dropped)."""
    body: dict[str, Any] = {
        "replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52428800,
        "isolation_level": 1, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": name, "partitions": [
            {"partition": p, "current_leader_epoch": epoch, "fetch_offset": offset,
             "last_fetched_epoch": 88, "log_start_offset": 99, "partition_max_bytes": limit}
            for p, offset, limit, epoch in ((*part, 77)[:4] for part in parts)]}
            for name, parts in topics],
        "forgotten_topics_data": [], "rack_id": "", "cluster_id": None}
    body.update(fields)
    return body


def small_body(version: int, seed: int = 3) -> Any:
    """A sample request with short strings (for the exhaustive malformed-input tests)."""
    body = sample_body(ApiKey.FETCH, version, "request", seed, null_chance=0.0)
    for i, topic in enumerate(body.topics):
        topic.topic = f"t{i}-é"
    for i, topic in enumerate(body.forgotten_topics_data):
        topic.topic = f"f{i}"
    body.rack_id = "r-ü"
    body.cluster_id = "cl"
    return body


def small_frame(version: int, seed: int = 3, tagged: bool = True) -> bytes:
    """``small_body``'s frame, with unknown tagged fields at every level in v12
    (and the known ClusterId tag in the request's own section)."""
    body = small_body(version, seed)
    if version >= 12 and tagged:
        body.forgotten_topics_data[1]._unknown_tagged_fields = {9: b"f"}
    elif version >= 12:
        body.cluster_id = None
    return twins.small_request_frame(ApiKey.FETCH, version, body, "topics", "partitions", tagged)


# -- helpers: encoding -------------------------------------------------------------------


def generic_response(version: int, correlation_id: int, error_code: int, session_id: int,
                     topics: Topics, throttle_time_ms: int = 0) -> Any:
    """The generic encoder's framed response for the native encoder's arguments,
    built as the broker's Fetch handler built it (body encoder, header,
    ``frame_parts``; a single piece unwrapped)."""
    body = {"throttle_time_ms": throttle_time_ms, "error_code": error_code,
            "session_id": session_id,
            "responses": [
                {"topic": name, "partitions": [
                    {"partition_index": p[0], "error_code": p[1], "high_watermark": p[2],
                     "last_stable_offset": p[3], "log_start_offset": p[4],
                     "aborted_transactions": None if p[5] is None else [
                         {"producer_id": a, "first_offset": b} for a, b in p[5]],
                     "preferred_read_replica": -1, "records": p[6]}
                    for p in parts]}
                for name, parts in topics]}
    pieces: list = [encode_response_header(correlation_id,
                                           response_header_version(ApiKey.FETCH, version))]
    body_encoder(ApiKey.FETCH, version, "response")(body, pieces.append)
    framed = frame_parts(pieces)
    return framed[0] if len(framed) == 1 else framed


def assert_same_encoding(version: int, correlation_id: int, error_code: int, session_id: int,
                         topics: Topics, throttle_time_ms: int = 0) -> Any:
    native = encode_fetch_response(version, correlation_id, error_code, session_id, topics,
                                   throttle_time_ms)
    generic = generic_response(version, correlation_id, error_code, session_id, topics,
                               throttle_time_ms)
    regions = [p[6] for _, parts in topics for p in parts if type(p[6]) is FileRegion]
    if type(generic) is bytes:
        assert type(native) is bytes
        assert native == generic
        assert not regions
        total = len(native)
    else:
        assert type(native) is list
        assert len(native) == len(generic)
        for mine, theirs in zip(native, generic, strict=True):
            if type(theirs) is FileRegion:
                assert mine is theirs
            else:
                assert type(mine) is bytes and mine == theirs
        assert [p for p in native if type(p) is FileRegion] == regions
        assert all(type(p) is bytes for p in native[::2])  # bytes, region, bytes, ...
        assert all(type(p) is FileRegion for p in native[1::2])
        total = sum(map(len, native))
        head = native[0]
    assert int.from_bytes((native if type(native) is bytes else head)[:4], "big") == total - 4
    return native


def region(length: int, position: int = 0) -> FileRegion:
    """A region of a dummy fd: nothing is ever sent from it."""
    return FileRegion(0, position, length, None)


def sample_topics(version: int, seed: int) -> Topics:
    """A sample response body in the native encoder's shape (records as sampled:
    bytes or None; tagged fields the broker never sets are not carried over)."""
    body = sample_body(ApiKey.FETCH, version, "response", seed)
    return [(t.topic, [(p.partition_index, p.error_code, p.high_watermark,
                        p.last_stable_offset, p.log_start_offset,
                        None if p.aborted_transactions is None else
                        [(a.producer_id, a.first_offset) for a in p.aborted_transactions],
                        p.records) for p in t.partitions])
            for t in body.responses]


# -- decoding: equivalence ------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_decode_matches_generic_on_samples(version: int) -> None:
    for got in twins.check_samples(ApiKey.FETCH, version, request_frame, native_decode,
                                   assert_same_outcome):
        if version < 7:
            assert got[7:9] == (0, -1)


def test_decode_samples_cover_nulls_and_unicode() -> None:
    """The sample bodies above do exercise null cluster ids, non-ASCII strings and
    forgotten topics (else the equivalence test would prove less)."""
    seen: set[str] = set()
    for version in VERSIONS:
        for seed in range(12):
            body = sample_body(ApiKey.FETCH, version, "request", seed)
            if version >= 12:
                seen.add("null cluster id" if body.cluster_id is None else "cluster id")
            if any(not t.topic.isascii() for t in body.topics):
                seen.add("unicode topic")
            if version >= 11 and not body.rack_id.isascii():
                seen.add("unicode rack id")
            if version >= 7 and body.forgotten_topics_data:
                seen.add("forgotten topics")
    assert seen == {"null cluster id", "cluster id", "unicode topic", "unicode rack id",
                    "forgotten topics"}


@pytest.mark.parametrize("version", VERSIONS)
def test_decode_unicode_extremes_and_sizes(version: int) -> None:
    topics = [
        ("主题-🚀", [(INT32[0], INT64[0], INT32[0], INT32[1]),
                    (INT32[1], INT64[1], INT32[1], INT32[0]), (0, 0, 0, 0), (-1, -1, -1, -1)]),
        ("t" * 200, []),
        ("", [(5, 1, 2, 3)]),
    ]
    # CurrentLeaderEpoch is v9+: -1 (unknown) before.
    expected = topics if version >= 9 else [
        (name, [(*p[:3], -1) for p in parts]) for name, parts in topics]
    for client_id in CLIENT_IDS:
        for fields in ({"max_wait_ms": INT32[0], "min_bytes": INT32[1], "max_bytes": INT32[0],
                        "isolation_level": INT8[0], "session_id": INT32[1],
                        "session_epoch": INT32[0]},
                       {"max_wait_ms": INT32[1], "min_bytes": INT32[0], "max_bytes": INT32[1],
                        "isolation_level": INT8[1], "session_id": INT32[0],
                        "session_epoch": INT32[1], "rack_id": "rack-ü🙂",
                        "cluster_id": "集群"}):
            frame = request_frame(version, body_dict(topics, **fields), correlation_id=INT32[1],
                                  client_id=client_id)
            got = assert_same_outcome(frame)
            session = ((fields["session_id"], fields["session_epoch"]) if version >= 7
                       else (0, -1))
            assert got == (version, INT32[1], client_id, fields["max_wait_ms"],
                           fields["min_bytes"], fields["max_bytes"], fields["isolation_level"],
                           *session, expected, [], -1)


@pytest.mark.parametrize("version", VERSIONS)
def test_decode_empty_request(version: int) -> None:
    got = assert_same_outcome(request_frame(version, body_dict([]), client_id=None))
    assert got == (version, 7, None, 500, 1, 52428800, 1, 0, -1, [], [], -1)


@pytest.mark.parametrize("version", VERSIONS)
def test_decode_many_topics_and_partitions(version: int) -> None:
    """Counts of 128 and more take multi-byte compact lengths in flexible versions."""
    topics = [(f"topic-{t}", [(p, t * 1000 + p, p * 7, p if version >= 9 else -1)
                              for p in range(300 if t == 0 else 2)])
              for t in range(150)]
    forgotten = [{"topic": f"gone-{t}", "partitions": list(range(200 if t == 1 else 3))}
                 for t in range(130)]
    got = assert_same_outcome(request_frame(
        version, body_dict(topics, forgotten_topics_data=forgotten)))
    assert got[9] == topics
    assert got[10] == ([(f["topic"], f["partitions"]) for f in forgotten] if version >= 7 else [])


@pytest.mark.parametrize("version", FLEXIBLE)
def test_decode_skips_unknown_tagged_fields(version: int) -> None:
    body = small_body(version, seed=5)
    body._unknown_tagged_fields = {1: b"", 9: b"body-tag"}
    body.topics[0]._unknown_tagged_fields = {300: b"t" * 200}  # multi-byte tag and size
    body.topics[1]._unknown_tagged_fields = {1: b"x"}
    body.topics[0].partitions[1]._unknown_tagged_fields = {0: b"p" * 16, 70000: b""}
    body.forgotten_topics_data[0]._unknown_tagged_fields = {5: bytes(140)}
    header_tags = {0: b"hdr", 1000: bytes(130)}
    for client_id in (None, "cli-é"):
        for cluster_id in (None, "", "cluster-é", "c" * 300):
            body.cluster_id = cluster_id
            frame = request_frame(version, body, client_id=client_id, header_tags=header_tags)
            header, decoded = decode_request(frame, allow_trailing=True)  # really there
            assert header._unknown_tagged_fields == header_tags
            assert decoded._unknown_tagged_fields == body._unknown_tagged_fields
            assert decoded.cluster_id == cluster_id
            assert decoded.topics[0]._unknown_tagged_fields == {300: b"t" * 200}
            assert decoded.topics[0].partitions[1]._unknown_tagged_fields == {
                0: b"p" * 16, 70000: b""}
            assert decoded.forgotten_topics_data[0]._unknown_tagged_fields == {5: bytes(140)}
            plain = request_frame(version, small_body(version, seed=5), client_id=client_id)
            assert len(frame) > len(plain)
            assert assert_same_outcome(frame) == native_decode(plain)


def _with_request_tags(frame: bytes, tags: bytes) -> bytes:
    """A v12 frame (whose own tag section is empty) with that section replaced."""
    assert frame[-1] == 0
    return frame[:-1] + tags


@pytest.mark.parametrize("tags,accepted", [
    (b"\x01\x00\x01\x00", True),                     # ClusterId null
    (b"\x01\x00\x01\x01", True),                     # ClusterId ""
    (b"\x01\x00\x03\x03ab", True),                   # ClusterId "ab"
    (b"\x02\x00\x03\x03ab\x00\x01\x00", True),       # twice: the last one wins
    (b"\x02\x05\x00\x00\x03\x03ab", True),           # after an unknown tag
    (b"\x01\x00\x04\x03ab", False),                  # field longer than the string
    (b"\x01\x00\x02\x03ab", False),                  # field shorter than the string
    (b"\x01\x00\x00\x03ab", False),                  # empty field
    (b"\x01\x00\x02\x00\x00", False),                # null, then a stray byte
    (b"\x01\x00\x03\x03\xff\xfe", False),            # invalid UTF-8
    (b"\x01\x00\x06\xff\xff\xff\xff\x0f\x00", False),  # absurd string length
    (b"\x01\x00\x01", False),                        # truncated
    (b"\x01\x80\x00\x03\x03ab", True),               # tag 0 as a two-byte varint
    (b"\x01\x80\x80\x80\x80\x10\x01\x00", True),     # tag 2**32: not ClusterId
])
def test_decode_cluster_id_tag(tags: bytes, accepted: bool) -> None:
    frame = _with_request_tags(request_frame(12, body_dict([("t", [(0, 1, 2)])])), tags)
    got = assert_same_outcome(frame)
    assert (got != ProtocolError) == accepted
    if accepted:
        assert got[9] == [("t", [(0, 1, 2, 77)])]


@pytest.mark.parametrize("version", VERSIONS)
def test_trailing_bytes_are_ignored(version: int) -> None:
    twins.check_trailing_bytes_ignored(small_frame(version), native_decode, assert_same_outcome)


def test_decode_other_buffers() -> None:
    frame = small_frame(12)
    expected = native_decode(frame)
    # A slice of a larger buffer (after a size prefix).
    buf = bytearray(len(frame).to_bytes(4, "big") + frame)
    assert native_decode(memoryview(buf)[4:]) == expected
    # Views of other formats and shapes: their bytes (trailing bytes are ignored).
    for view in twins.padded_views(frame)[1]:
        assert native_decode(view) == expected == generic_decode(view)
    # A non-contiguous view: its bytes.  (The generic codec raises BufferError here.)
    spread = bytearray(2 * len(frame))
    spread[::2] = frame
    assert native_decode(memoryview(spread)[::2]) == expected


# -- decoding: malformed input --------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_every_truncation(version: int) -> None:
    twins.check_every_truncation((small_frame(version), small_frame(version, seed=8, tagged=False)),
                                 assert_same_outcome)


PATTERNS = [*LENGTH_PATTERNS, b"\x02", b"\x00\x00\x00\x01"]  # and small lengths


@pytest.mark.parametrize("version", VERSIONS)
def test_mutated_lengths(version: int) -> None:
    """Huge, negative, null, zero and small int16 / int32 / varint lengths written
    at every position: both codecs decode the same values or both refuse."""
    twins.check_mutated_lengths(small_frame(version), PATTERNS, assert_same_outcome)


def test_random_byte_flips() -> None:
    frames = [small_frame(v, seed) for v in VERSIONS for seed in (1, 2)]
    twins.check_random_byte_flips(frames, 20240612, assert_same_outcome)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(VERSIONS), st.integers(*INT32), st.binary(max_size=160))
def test_fuzz_same_outcome(version: int, correlation_id: int, tail: bytes) -> None:
    assert_same_outcome(twins.fuzz_head(ApiKey.FETCH, version, correlation_id) + tail)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(VERSIONS), st.data())
def test_fuzz_spliced_frames(version: int, data: st.DataObject) -> None:
    """A valid frame with a random slice replaced by random bytes."""
    twins.check_spliced_frame(lambda seed: small_frame(version, seed=seed), data,
                              assert_same_outcome)


def test_absurd_counts_are_rejected_before_allocating() -> None:
    classic = encode_request(ApiKey.FETCH, 4, body_dict([]), 1)[:-4]  # up to the topic count
    flexible = encode_request(ApiKey.FETCH, 12, body_dict([]), 1)[:-4]  # count, [], "", tags
    topic4 = classic + b"\x00\x00\x00\x01" + b"\x00\x01t"  # one topic "t"; then its count
    topic12 = flexible + b"\x02" + b"\x02t"
    v7 = encode_request(ApiKey.FETCH, 7, body_dict([]), 1)[:-4]  # up to the forgotten count
    frames = [
        classic + (2**31 - 1).to_bytes(4, "big") + bytes(64),
        classic + (2**20).to_bytes(4, "big") + bytes(64),
        topic4 + (2**31 - 1).to_bytes(4, "big") + bytes(64),
        topic4 + (2**26).to_bytes(4, "big") + bytes(64),
        flexible + b"\xff\xff\xff\xff\x0f" + bytes(32),
        topic12 + b"\xff\xff\xff\xff\x0f" + bytes(32),
        v7 + (2**31 - 1).to_bytes(4, "big") + bytes(64),
        v7 + b"\x00\x00\x00\x01" + b"\x00\x01f" + (2**30).to_bytes(4, "big") + bytes(64),
        # A tag section claiming 2**32 - 1 fields, and one field of 2**32 - 1 bytes.
        flexible + b"\x01\x01\x01" + b"\xff\xff\xff\xff\x0f" + bytes(32),
        flexible + b"\x01\x01\x01" + b"\x01" + b"\x05" + b"\xff\xff\xff\xff\x0f" + bytes(32),
    ]
    twins.check_absurd_counts(frames, classic, flexible, decode_fetch_request,
                              assert_same_outcome)


def test_large_frames_are_not_copied() -> None:
    """Unknown tagged fields are skipped in place: a frame of megabytes of
    them decodes without allocating their size."""
    body = body_dict([("t", [(0, 1, 2)])], forgotten_topics_data=[
        {"topic": "gone", "partitions": [1, 2]}])
    body["_unknown_tagged_fields"] = {12345: bytes(2 << 20)}
    frame = bytearray(request_frame(12, body))
    assert len(frame) > 1 << 20
    expected = generic_decode(frame)
    assert native_decode(frame) == expected
    peak = twins.peak_bytes(lambda: decode_fetch_request(frame), fails=False)
    assert peak < 64 * 1024


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("field", ["client", "topic", "forgotten", "rack", "cluster"])
@pytest.mark.parametrize("bad", [b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xe2\x82"])
def test_invalid_utf8_is_a_protocol_error(version: int, field: str, bad: bytes) -> None:
    if (field == "forgotten" and version < 7 or field == "rack" and version < 11
            or field == "cluster" and version < 12):
        return
    body = body_dict([("topic", [(0, 1, 2)])], rack_id="rack", cluster_id="cluster",
                     forgotten_topics_data=[{"topic": "forgotten", "partitions": [1]}])
    twins.check_invalid_utf8(request_frame(version, body, client_id="client"), field, bad,
                             decode_fetch_request, assert_same_outcome)


@pytest.mark.parametrize("version", VERSIONS)
def test_null_strings_are_protocol_errors(version: int) -> None:
    """Topic names (and forgotten topics' names, and the rack id) are not nullable."""
    null = b"\x00" if version >= 12 else b"\xff\xff"
    body = body_dict([("topic", [(0, 1, 2)])], rack_id="rack",
                     forgotten_topics_data=[{"topic": "forgotten", "partitions": [1]}])
    for field in ("topic", "forgotten", "rack"):
        frame = request_frame(version, body)
        pos = frame.find(field.encode())
        if pos < 0:
            continue
        prefix = 1 if version >= 12 else 2
        mutated = frame[:pos - prefix] + null + frame[pos + len(field):]
        assert assert_same_outcome(mutated) == ProtocolError
        with pytest.raises(ProtocolError, match="null in non-nullable"):
            decode_fetch_request(mutated)


def test_short_frames_are_protocol_errors() -> None:
    twins.check_refused((b"", b"\x00", b"\x00\x01\x00\x04\x00\x00\x00", b"\x00\x01\x00\x04",
                         b"\x00\x01\x00\x04\x00\x00\x00\x01",
                         b"\x00\x01\x00\x0c\x00\x00\x00\x01\xff"), assert_same_outcome)


@pytest.mark.parametrize("api_key,version", [(ApiKey.PRODUCE, 4), (ApiKey.PRODUCE, 9),
                                             (ApiKey.METADATA, 12), (ApiKey.API_VERSIONS, 3)])
def test_other_apis_are_value_errors(api_key: int, version: int) -> None:
    twins.check_value_error(decode_fetch_request, twins.sample_request(api_key, version),
                            "not a Fetch request")


@pytest.mark.parametrize("version", [0, 1, 2, 3, 13, 17, 0x7FFF, -1])
def test_other_versions_are_value_errors(version: int) -> None:
    twins.check_other_version(ApiKey.FETCH, version, 17, small_frame(11),
                              decode_fetch_request, generic_decode)


def test_non_buffers_are_type_errors() -> None:
    for frame in ("string", 5, None):
        with pytest.raises(TypeError):
            decode_fetch_request(frame)


# -- encoding -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_encode_matches_generic_on_samples(version: int) -> None:
    for seed in range(12):
        topics = sample_topics(version, seed)
        assert_same_encoding(version, seed * 7919 - 2**31, seed % 3, seed * 13, topics)


def test_encode_samples_cover_nulls() -> None:
    seen = set()
    for version in VERSIONS:
        for seed in range(12):
            for _, parts in sample_topics(version, seed):
                for p in parts:
                    seen.add("null aborted" if p[5] is None else "aborted")
                    seen.add("null records" if p[6] is None else "records")
    assert seen == {"null aborted", "aborted", "null records", "records"}


@pytest.mark.parametrize("version", VERSIONS)
def test_encode_records_kinds(version: int) -> None:
    """Records of every kind, mixed: null, bytes (copied), bytearray and memoryviews
    (copied, as their bytes), regions (left as their own pieces)."""
    raw = bytes(range(256)) * 3
    padded = bytearray(raw + bytes(-len(raw) % 4))
    kinds: list[Any] = [None, b"", raw, bytearray(b"ba"), memoryview(raw)[5:300],
                        memoryview(padded).cast("I"),
                        memoryview(padded).cast("B", (4, len(padded) // 4)),
                        bytearray()]
    parts: list[Partition] = [(i, 0, 100, 90, 0, None, r) for i, r in enumerate(kinds)]
    assert type(assert_same_encoding(version, 1, 0, 0, [("t", parts)])) is bytes
    regions = [region(1000, 4096), region(1), region(0), region(2**20, 7)]
    mixed: list[Partition] = [
        (0, 0, 1, 1, 0, None, regions[0]),
        (1, 0, 1, 1, 0, [], b"inline"),
        (2, 0, 1, 1, 0, [(1, 2)], regions[1]),
        (3, 0, 1, 1, 0, None, None),
    ]
    got = assert_same_encoding(version, 2, 0, 0, [("a", mixed), ("b", []),
                                                  ("c", [(9, 0, 5, 5, 5, None, regions[2]),
                                                         (8, 0, 5, 5, 5, None, regions[3])])])
    assert got[1::2] == regions and all(a is b for a, b in zip(got[1::2], regions, strict=True))


@pytest.mark.parametrize("version", VERSIONS)
def test_encode_region_last(version: int) -> None:
    """In v4-11 nothing follows the last partition's records: a response that
    ends with a region has no last byte piece (frame_parts makes none)."""
    last = region(500)
    got = assert_same_encoding(version, 3, 0, 0, [("t", [(0, 0, 1, 1, 0, None, last)])])
    assert len(got) == (3 if version >= 12 else 2) and got[1] is last
    if version >= 12:
        assert got[2] == b"\x00\x00\x00"  # partition, topic and response tags
    one = region(7)
    got = assert_same_encoding(version, 3, 0, 0, [("t", [(0, 0, 1, 1, 0, None, one)]),
                                                  ("u", [(0, 0, 1, 1, 0, None, None)])])
    assert got[1] is one and len(got) == 3


@pytest.mark.parametrize("version", VERSIONS)
def test_encode_aborted_transactions(version: int) -> None:
    for aborted in (None, [], [(1, 2)], [(INT64[0], INT64[1]), (0, 0), (-1, 5)],
                    [(p, p * 10) for p in range(200)]):
        parts: list[Partition] = [(0, 0, 10, 5, 0, aborted, b"r"),
                                  (1, 0, 10, 5, 0, aborted, region(10))]
        assert_same_encoding(version, 4, 0, 0, [("t", parts)])


@pytest.mark.parametrize("version", VERSIONS)
def test_encode_extremes_and_errors(version: int) -> None:
    extremes: list[Partition] = [
        (INT32[0], INT16[0], INT64[0], INT64[0], INT64[0], None, None),
        (INT32[1], INT16[1], INT64[1], INT64[1], INT64[1], [], b""),
        (-1, -1, -1, -1, -1, None, region(3)),
        (0, 0, 0, 0, 0, [(INT64[1], INT64[0])], b"x"),
    ]
    for correlation_id in (0, INT32[0], INT32[1]):
        for error_code in (0, 70, INT16[0], INT16[1]):
            for session_id in (0, INT32[0], INT32[1]):
                assert_same_encoding(version, correlation_id, error_code, session_id,
                                     [("主题-🚀", extremes), ("", [])])
                assert_same_encoding(version, correlation_id, error_code, session_id, [])
    for throttle_time_ms in (1, 250, INT32[1]):  # a client quota's throttle (the field is v1+)
        assert_same_encoding(version, 5, 0, 7, [("t", extremes)], throttle_time_ms)
    with pytest.raises(OverflowError):
        encode_fetch_response(version, 1, 0, 0, [], INT32[1] + 1)


@pytest.mark.parametrize("version", VERSIONS)
def test_encode_shapes(version: int) -> None:
    assert_same_encoding(version, 1, 0, 0, [])
    assert_same_encoding(version, 1, 0, 0, [("t", [])])
    many_topics: Topics = [(f"topic-{t}", [(p, t % 7, t * 1000 + p, -1, 0, None,
                                            region(p + 1) if p % 2 else b"")
                                           for p in range(3)]) for t in range(150)]
    assert_same_encoding(version, 2, 0, 0, many_topics)
    many_parts: Topics = [("t" * 300, [(p, 0, p, p, p, [] if p % 3 else None,
                                        region(p) if p % 2 else None) for p in range(400)])]
    assert_same_encoding(version, 3, 0, 0, many_parts)


@pytest.mark.parametrize("version", VERSIONS)
def test_encode_long_values(version: int) -> None:
    """Lengths that take multi-byte varints in v12 (records up to 2**28 and more)."""
    for length in (127, 128, 16383, 16384, 2**21, 2**28, 2**30):
        assert_same_encoding(version, 1, 0, 0, [("t", [(0, 0, 1, 1, 0, None, region(length))])])
    assert_same_encoding(version, 1, 0, 0, [("t", [(0, 0, 1, 1, 0, None, bytes(70000))])])
    if version >= 12:
        assert_same_encoding(version, 1, 0, 0, [("n" * 40000, [])])


records_strategy = (st.none() | st.binary(max_size=40) | st.binary(max_size=40).map(bytearray)
                    | st.integers(0, 2**24).map(region))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(VERSIONS), st.integers(*INT32), st.integers(*INT16), st.integers(*INT32),
       twins.topics_strategy(
           st.none() | st.lists(st.tuples(st.integers(*INT64), st.integers(*INT64)), max_size=3),
           records_strategy))
def test_fuzz_encode(version: int, correlation_id: int, error_code: int, session_id: int,
                     topics: Topics) -> None:
    assert_same_encoding(version, correlation_id, error_code, session_id, topics)


def test_shared_values() -> None:
    """The broker hands the same list (aborted transactions) and regions to many
    partitions; nothing is consumed or changed."""
    aborted: list = []
    shared = region(9)
    parts: list[Partition] = [(p, 0, 1, 1, 0, aborted, shared) for p in range(3)]
    topics = [("t", parts)]
    for version in VERSIONS:
        got = assert_same_encoding(version, 1, 0, 0, topics)
        assert got[1] is got[3] is got[5] is shared
    assert topics == [("t", parts)] and aborted == []


GOOD: Partition = (0, 0, 0, -1, -1, None, None)


@pytest.mark.parametrize("version", VERSIONS)
def test_encode_refuses_bad_input(version: int) -> None:
    def refuses(exc: type[BaseException], topics: Any, correlation_id: Any = 1,
                error_code: Any = 0, session_id: Any = 0) -> None:
        with pytest.raises(exc):
            encode_fetch_response(version, correlation_id, error_code, session_id, topics)

    twins.refuse_bad_partitions(GOOD, [INT32, INT16, INT64, INT64, INT64], refuses)
    for value in (INT64[0] - 1, INT64[1] + 1):
        refuses(OverflowError, [("t", [(*GOOD[:5], [(0, value)], None)])])
        refuses(OverflowError, [("t", [(*GOOD[:5], [(value, 0)], None)])])
    for value in (INT32[0] - 1, INT32[1] + 1):
        refuses(OverflowError, [("t", [GOOD])], correlation_id=value)
        refuses(OverflowError, [("t", [GOOD])], session_id=value)
    for value in (INT16[0] - 1, INT16[1] + 1):
        refuses(OverflowError, [("t", [GOOD])], error_code=value)
    for float_at in range(5):
        bad = list(GOOD)
        bad[float_at] = 1.5
        refuses(TypeError, [("t", [tuple(bad)])])
    refuses(TypeError, [("t", [(*GOOD[:5], [(1.5, 0)], None)])])
    refuses(TypeError, [("t", [GOOD])], correlation_id=1.5)
    refuses(TypeError, [("t", [GOOD])], error_code="1")
    refuses(TypeError, [("t", [GOOD])], session_id=None)
    twins.refuse_bad_shapes(GOOD, refuses)
    refuses(TypeError, [["t", [GOOD]]])
    refuses(TypeError, [("t", [None])])
    refuses(TypeError, [None])
    refuses(TypeError, [("t", [(*GOOD[:5], ((1, 2),), None)])])  # aborted: a list
    refuses(TypeError, [("t", [(*GOOD[:5], [[1, 2]], None)])])   # of tuples
    refuses(ValueError, [("t", [(*GOOD[:5], [(1, 2, 3)], None)])])
    refuses(TypeError, [("t", [(*GOOD[:6], 5)])])  # records: no len()


@pytest.mark.parametrize("version", [-1, 0, 1, 3, 13, 100])
def test_encode_other_versions_are_value_errors(version: int) -> None:
    with pytest.raises(ValueError, match="no native codec"):
        encode_fetch_response(version, 1, 0, 0, [("t", [GOOD])])


def test_encode_refuses_input_changed_by_a_region() -> None:
    """A region whose ``len`` changes the response while it is encoded: refused,
    never a write out of bounds or an inconsistent frame."""
    class Meddler(FileRegion):
        def __new__(cls, action: Any) -> Meddler:
            self = super().__new__(cls, 0, 0, 10)
            self.action = action  # type: ignore[attr-defined]
            return self

        def __len__(self) -> int:
            self.action()  # type: ignore[attr-defined]
            return 10

    def refused(version: int, topics: Topics) -> None:
        with pytest.raises(RuntimeError, match="changed"):
            encode_fetch_response(version, 1, 0, 0, topics)

    for version in (4, 11, 12):
        grown: list[Partition] = [GOOD]
        grow = Meddler(lambda parts=grown: parts.extend([GOOD] * 20))
        refused(version, [("a", grown), ("b", [(*GOOD[:6], grow)])])
        shrunk: list[Partition] = [GOOD] * 5
        shrink = Meddler(lambda parts=shrunk: parts.clear())
        refused(version, [("a", shrunk), ("b", [(*GOOD[:6], shrink)])])
        swapped: list[Partition] = []
        swap = Meddler(lambda parts=swapped: parts.__setitem__(0, (*GOOD[:6], region(10))))
        swapped += [(*GOOD[:6], swap), (*GOOD[:6], region(3))]
        refused(version, [("a", swapped)])


# -- inputs both encoders refuse -------------------------------------------------------
# Each test first asserts that the generic encoder refuses the input, then the native one.


def generic_refuses(version: int, topics: Any, correlation_id: Any = 1) -> bool:
    try:
        generic_response(version, correlation_id, 0, 0, topics)
    except (ProtocolError, struct.error):  # the handler's path does not wrap struct.error
        return True
    return False


@pytest.mark.parametrize("version", [v for v in VERSIONS if v < 12])
def test_encode_refuses_classic_names_over_int16(version: int) -> None:
    topics: Topics = [("n" * 40000, [GOOD])]
    assert generic_refuses(version, topics)
    with pytest.raises(ProtocolError):
        encode_fetch_response(version, 1, 0, 0, topics)


@pytest.mark.parametrize("version", VERSIONS)
def test_encode_refuses_frames_over_2_gib(version: int) -> None:
    for records in ([region(2**31)], [region(2**31 - 10)], [region(2**30)] * 2,
                    [region(2**31 - 100), b"x" * 100]):
        topics: Topics = [("t", [(p, 0, 0, 0, 0, None, r) for p, r in enumerate(records)])]
        assert generic_refuses(version, topics)
        with pytest.raises(ProtocolError):
            encode_fetch_response(version, 1, 0, 0, topics)
    # The largest frame there is: both encode it.  (Its length prefix takes 5
    # bytes in v12, where the null one took 1.)
    size = 2**31 - 1 + 4 - len(encode_fetch_response(version, 1, 0, 0, [("t", [GOOD])]))
    size -= 4 if version >= 12 else 0
    assert_same_encoding(version, 1, 0, 0, [("t", [(*GOOD[:6], region(size))])])


def test_encode_refuses_regions_past_a_varint() -> None:
    topics: Topics = [("t", [(*GOOD[:6], region(2**32 - 1))])]
    assert generic_refuses(12, topics)
    with pytest.raises(ProtocolError):
        encode_fetch_response(12, 1, 0, 0, topics)


@pytest.mark.parametrize("where", ["index", "high_watermark", "correlation_id"])
def test_encode_refuses_non_integers(where: str) -> None:
    part: Any = ((1.5, *GOOD[1:]) if where == "index" else
                 (*GOOD[:2], 2.5, *GOOD[3:]) if where == "high_watermark" else GOOD)
    correlation_id: Any = 1.5 if where == "correlation_id" else 1
    assert generic_refuses(12, [("t", [part])], correlation_id)
    with pytest.raises(TypeError):
        encode_fetch_response(12, correlation_id, 0, 0, [("t", [part])])
