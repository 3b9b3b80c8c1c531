"""Bad bytes raise ProtocolError: quickly, without reading out of bounds or
allocating without bound."""

from __future__ import annotations

import random
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_samples import sample_body

from pylog.protocol import ApiKey, ProtocolError, decode_request, encode_request
from pylog.protocol.schema import MESSAGE_SCHEMAS

CASES = [(ApiKey.PRODUCE, 3), (ApiKey.PRODUCE, 9), (ApiKey.FETCH, 4), (ApiKey.FETCH, 12),
         (ApiKey.METADATA, 12)]


def _frame(api_key: int, version: int) -> bytes:
    body = sample_body(api_key, version, "request", seed=3, null_chance=0.0)
    return encode_request(api_key, version, body, correlation_id=17)


def _decodes_or_protocol_error(data: bytes | bytearray) -> None:
    try:
        decode_request(data)
    except ProtocolError:
        pass


@pytest.mark.parametrize("api_key,version", CASES)
def test_every_truncation_raises(api_key: int, version: int) -> None:
    frame = _frame(api_key, version)
    decode_request(frame)
    for end in range(len(frame)):
        with pytest.raises(ProtocolError):
            decode_request(frame[:end])


@pytest.mark.parametrize("api_key,version", CASES)
def test_mutated_lengths_fail_fast(api_key: int, version: int) -> None:
    """Overwrite every position with huge / negative int16, int32 and varint
    lengths: each decode either succeeds or raises ProtocolError, fast."""
    frame = _frame(api_key, version)
    patterns = [b"\x7f\xff\xff\xff", b"\xff\xff\xff\xfe", b"\x80\x00\x00\x00", b"\xff\xfe",
                b"\x7f\xff", b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\xff\x01", b"\x00"]
    started = time.perf_counter()
    for pos in range(8, len(frame)):
        for pattern in patterns:
            mutated = bytearray(frame)
            mutated[pos:pos + len(pattern)] = pattern
            _decodes_or_protocol_error(bytes(mutated[:len(frame)]))
    assert time.perf_counter() - started < 10


def test_absurd_array_counts_are_rejected_before_allocating() -> None:
    # Produce v3: transactional_id (null), acks, timeout, then the topic count.
    header = encode_request(ApiKey.PRODUCE, 3, {"topic_data": []}, 1)[:-4]
    for count in (2**31 - 1, 2**20, 1000):
        with pytest.raises(ProtocolError, match="longer than the bytes left"):
            decode_request(header + count.to_bytes(4, "big") + b"\x00" * 64)
    with pytest.raises(ProtocolError, match="negative length"):
        decode_request(header + (-2).to_bytes(4, "big", signed=True))
    # Produce v9 (flexible): a compact count of 2**32 - 2 elements from 5 bytes.
    flexible = encode_request(ApiKey.PRODUCE, 9, {"topic_data": []}, 1)[:-2]
    with pytest.raises(ProtocolError):
        decode_request(flexible + b"\xff\xff\xff\xff\x0f" + b"\x00" * 32)
    # A primitive array: Metadata v0 topic names, 2**31 - 1 of them.
    metadata = encode_request(ApiKey.METADATA, 0, {"topics": []}, 1)[:-4]
    with pytest.raises(ProtocolError):
        decode_request(metadata + b"\x7f\xff\xff\xff")


def test_invalid_utf8_is_a_protocol_error() -> None:
    frame = bytearray(encode_request(ApiKey.HEARTBEAT, 0,
                                     {"group_id": "grp", "member_id": "m"}, 1, client_id="c"))
    frame[frame.index(b"grp")] = 0xFF
    with pytest.raises(ProtocolError):
        decode_request(bytes(frame))


def test_random_byte_flips() -> None:
    rng = random.Random(1234)
    frames = [_frame(api_key, version) for api_key, version in CASES]
    started = time.perf_counter()
    for _ in range(5000):
        mutated = bytearray(rng.choice(frames))
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(8, len(mutated))] = rng.randrange(256)
        _decodes_or_protocol_error(mutated)
    assert time.perf_counter() - started < 10


REQUEST_VERSIONS = sorted((api_key, version) for (api_key, kind), schema in MESSAGE_SCHEMAS.items()
                          if kind == "request"
                          for version in range(schema.min_version, schema.max_version + 2))


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(REQUEST_VERSIONS), st.integers(-2**31, 2**31 - 1),
       st.binary(max_size=200))
def test_fuzz_decode_request(api_version: tuple[int, int], correlation_id: int,
                             tail: bytes) -> None:
    api_key, version = api_version
    head = (api_key.to_bytes(2, "big") + version.to_bytes(2, "big")
            + correlation_id.to_bytes(4, "big", signed=True))
    _decodes_or_protocol_error(head + tail)


@settings(max_examples=1000, deadline=None)
@given(st.binary(max_size=64))
def test_fuzz_arbitrary_bytes(data: bytes) -> None:
    _decodes_or_protocol_error(data)
