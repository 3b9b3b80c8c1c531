"""The shared harness of the native codecs' twin tests.

``test_fetch_codec`` and ``test_produce_codec`` check a native codec against the
generic one (:mod:`pylog.protocol`): both decode the same frames to equal values
or both refuse them with ``ProtocolError``.  The mechanics that do not depend on
the API live here: building request frames, and walking truncations, mutations,
byte flips and fuzz over them.  Each test file passes its own frames, decoders
and ``assert_same_outcome`` (a callable that decodes a frame with both codecs,
asserts the outcomes equal and returns the native one).

This is not a test module, so pytest does not rewrite its asserts: they carry
their own messages.
"""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pytest
from hypothesis import strategies as st
from protocol_samples import sample_body

from pylog.protocol import ProtocolError, encode_request, request_header_version
from pylog.protocol.types import uvarint

Frame = bytes | bytearray | memoryview
Decode = Callable[[Any], Any]
SameOutcome = Callable[[Frame], Any]
RequestFrame = Callable[..., bytes]

CLIENT_IDS = [None, "", "pylog", "clï-é∂-🚀", "c" * 300]
INT8 = (-2**7, 2**7 - 1)
INT16 = (-2**15, 2**15 - 1)
INT32 = (-2**31, 2**31 - 1)
INT64 = (-2**63, 2**63 - 1)

# Huge, negative, null and zero int16 / int32 / varint lengths.
LENGTH_PATTERNS = [b"\x7f\xff\xff\xff", b"\xff\xff\xff\xfe", b"\x80\x00\x00\x00", b"\xff\xfe",
                   b"\x7f\xff", b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\xff\x01", b"\x00",
                   b"\x01", b"\x80\x01", b"\xff\xff", b"\x00\x00\x00\x00"]


# -- the two codecs -------------------------------------------------------------------------


def outcome(decode: Decode, frame: Frame) -> Any:
    """The decoded value, or ProtocolError; any other exception propagates."""
    try:
        return decode(frame)
    except ProtocolError:
        return ProtocolError


def same_outcome(native_decode: Decode, generic_decode: Decode, frame: Frame) -> Any:
    """Both decoders' outcome for ``frame``, asserted equal; the native one."""
    native = outcome(native_decode, frame)
    generic = outcome(generic_decode, frame)
    assert native == generic, f"{bytes(frame).hex()}: native {native!r} != generic {generic!r}"
    return native


def peak_bytes(fn: Callable[[], Any], fails: bool = True) -> int:
    """The peak traced allocation while ``fn`` runs; it must raise ProtocolError
    when ``fails``, and must not when not."""
    tracemalloc.start()
    try:
        fn()
    except ProtocolError:
        if not fails:
            raise
    else:
        if fails:
            raise AssertionError("no ProtocolError")
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


# -- frames ---------------------------------------------------------------------------------


def tag_section(tags: dict[int, bytes]) -> bytes:
    return uvarint(len(tags)) + b"".join(
        uvarint(tag) + uvarint(len(data)) + data for tag, data in sorted(tags.items()))


def request_frame(api_key: int, version: int, body: Any, correlation_id: int = 7,
                  client_id: str | None = "pylog",
                  header_tags: dict[int, bytes] | None = None) -> bytes:
    """A request frame (no size prefix) from the generic encoder; in flexible
    versions the header's empty tag section is replaced by ``header_tags``."""
    frame = encode_request(api_key, version, body, correlation_id, client_id=client_id)
    if header_tags:
        assert request_header_version(api_key, version) >= 2, "header tags in a classic version"
        pos = 10 + (0 if client_id is None else len(client_id.encode()))
        assert frame[pos] == 0, f"no empty header tag section at {pos}"
        frame = frame[:pos] + tag_section(header_tags) + frame[pos + 1:]
    return frame


def small_request_frame(api_key: int, version: int, body: Any, topics: str, partitions: str,
                        tagged: bool = True) -> bytes:
    """``body``'s frame (correlation id -5, client id "cli-é"); in flexible versions
    and when ``tagged``, with unknown tagged fields in the header, the body, its
    first topic and the second topic's first partition (``body.<topics>[1].<partitions>``)."""
    header_tags = None
    if tagged and request_header_version(api_key, version) >= 2:
        body._unknown_tagged_fields = {3: b"body"}
        getattr(body, topics)[0]._unknown_tagged_fields = {1: b"", 200: b"tp"}
        getattr(getattr(body, topics)[1], partitions)[0]._unknown_tagged_fields = {
            7: b"\x00\x01"}
        header_tags = {0: b"h"}
    return request_frame(api_key, version, body, correlation_id=-5, client_id="cli-é",
                         header_tags=header_tags)


def sample_request(api_key: int, version: int) -> bytes:
    """The generic encoder's frame of the sample request of seed 1."""
    return encode_request(api_key, version, sample_body(api_key, version, "request", 1), 1)


def with_version(frame: Frame, version: int) -> bytearray:
    """A copy of ``frame`` with its header's api_version replaced."""
    mutated = bytearray(frame)
    mutated[2:4] = version.to_bytes(2, "big", signed=True)
    return mutated


def fuzz_head(api_key: int, version: int, correlation_id: int) -> bytes:
    """A request header's fixed fields: api key, version, correlation id."""
    return (int(api_key).to_bytes(2, "big") + version.to_bytes(2, "big")
            + correlation_id.to_bytes(4, "big", signed=True))


def padded_views(frame: Frame) -> tuple[bytearray, list[memoryview]]:
    """``frame`` plus zero padding (trailing bytes, ignored), and views of it of
    another format and of another shape."""
    padded = bytearray(bytes(frame) + bytes(-len(frame) % 4))
    return padded, [memoryview(padded).cast("I"),
                    memoryview(padded).cast("B", (4, len(padded) // 4))]


# -- decoding -------------------------------------------------------------------------------


def check_samples(api_key: int, version: int, request_frame: RequestFrame,
                  native_decode: Decode, assert_same_outcome: SameOutcome) -> list[Any]:
    """Sample requests of seeds 0-11 (with varied client and correlation ids) decode
    alike, to their header's values, from bytes, bytearray and memoryview; their
    decoded values."""
    decoded = []
    for seed in range(12):
        body = sample_body(api_key, version, "request", seed)
        client_id = CLIENT_IDS[seed % len(CLIENT_IDS)]
        correlation_id = seed * 1_000_003 - 2**31
        frame = request_frame(version, body, correlation_id=correlation_id, client_id=client_id)
        got = assert_same_outcome(frame)
        assert got != ProtocolError, f"seed {seed} refused"
        assert got[:3] == (version, correlation_id, client_id), got[:3]
        for data in (bytearray(frame), memoryview(frame)):
            assert native_decode(data) == got, type(data)
        decoded.append(got)
    return decoded


def check_trailing_bytes_ignored(frame: bytes, native_decode: Decode,
                                 assert_same_outcome: SameOutcome) -> None:
    expected = native_decode(frame)
    for tail in (b"\x00", b"\xff" * 3, b"garbage\x80\x80", bytes(1000)):
        assert assert_same_outcome(frame + tail) == expected, tail


def check_every_truncation(frames: Iterable[bytes], assert_same_outcome: SameOutcome) -> None:
    """Each frame decodes; each of its proper prefixes is refused by both codecs."""
    for frame in frames:
        assert assert_same_outcome(frame) != ProtocolError, frame.hex()
        failures = 0
        for end in range(len(frame)):
            failures += assert_same_outcome(frame[:end]) == ProtocolError
        # like the generic codec: no prefix is a request
        assert failures == len(frame), (failures, len(frame))


def check_mutated_lengths(frame: bytes, patterns: Sequence[bytes],
                          assert_same_outcome: SameOutcome) -> None:
    """Each pattern written at every position after the header's fixed fields:
    both codecs decode the same values or both refuse, and both happen."""
    outcomes = set()
    for pos in range(8, len(frame)):
        for pattern in patterns:
            mutated = bytearray(frame)
            mutated[pos:pos + len(pattern)] = pattern
            del mutated[len(frame):]
            outcomes.add(assert_same_outcome(mutated) == ProtocolError)
    assert outcomes == {True, False}, outcomes


def check_random_byte_flips(frames: Sequence[bytes], seed: int,
                            assert_same_outcome: SameOutcome, rounds: int = 4000) -> None:
    """``rounds`` copies of the frames with 1-4 random bytes (after the header's
    fixed fields) replaced: some, not all, refused."""
    rng = random.Random(seed)
    refused = 0
    for _ in range(rounds):
        mutated = bytearray(rng.choice(frames))
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(8, len(mutated))] = rng.randrange(256)
        refused += assert_same_outcome(mutated) == ProtocolError
    assert 0 < refused < rounds, refused


def check_spliced_frame(frame_of_seed: Callable[[int], bytes], data: st.DataObject,
                        assert_same_outcome: SameOutcome) -> None:
    """A valid frame (of a drawn seed 0-3) with a random slice replaced by random bytes."""
    frame = frame_of_seed(data.draw(st.integers(0, 3)))
    start = data.draw(st.integers(8, len(frame)))
    end = data.draw(st.integers(start, min(len(frame), start + 8)))
    assert_same_outcome(frame[:start] + data.draw(st.binary(max_size=8)) + frame[end:])


def check_absurd_counts(frames: Iterable[bytes], classic: bytes, flexible: bytes,
                        decode: Decode, assert_same_outcome: SameOutcome) -> None:
    """Frames with absurd counts and lengths are refused without allocating for
    them; ``frames[0]`` claims more bytes than it has, ``classic`` and ``flexible``
    stop where a classic int32 and a flexible varint length come next."""
    frames = list(frames)
    for frame in frames:
        assert assert_same_outcome(frame) == ProtocolError, frame.hex()
        peak = peak_bytes(lambda f=frame: decode(f))
        assert peak < 64 * 1024, (peak, frame.hex())
    with pytest.raises(ProtocolError, match="longer than the bytes left"):
        decode(frames[0])
    with pytest.raises(ProtocolError, match="negative length"):
        decode(classic + (-2).to_bytes(4, "big", signed=True))
    with pytest.raises(ProtocolError, match="longer than 5 bytes"):
        decode(flexible + b"\xff\xff\xff\xff\xff\x01" + bytes(8))


def check_invalid_utf8(frame: Frame, field: str, bad: bytes, decode: Decode,
                       assert_same_outcome: SameOutcome) -> None:
    """``frame`` with the start of the string ``field`` replaced by ``bad``: refused."""
    mutated = bytearray(frame)
    pos = mutated.index(field.encode())
    mutated[pos:pos + len(bad)] = bad
    assert assert_same_outcome(mutated) == ProtocolError
    with pytest.raises(ProtocolError):
        decode(mutated)


def check_refused(frames: Iterable[Frame], assert_same_outcome: SameOutcome) -> None:
    for frame in frames:
        assert assert_same_outcome(frame) == ProtocolError, bytes(frame).hex()


def check_value_error(decode: Decode, frame: Frame, match: str) -> None:
    """A ValueError that is not a ProtocolError: the caller's mistake, not the frame's."""
    with pytest.raises(ValueError, match=match) as info:
        decode(frame)
    assert not isinstance(info.value, ProtocolError), info.value


def check_other_version(api_key: int, version: int, generic_max: int, template: bytes,
                        decode: Decode, generic_decode: Decode) -> None:
    """``decode`` takes no request of ``version``: a valid one where the generic
    codec has it (0 to ``generic_max``), else ``template`` with that version."""
    if 0 <= version <= generic_max:
        frame: Frame = sample_request(api_key, version)
        generic_decode(frame)  # a valid request, only not one the native codec takes
    else:
        frame = with_version(template, version)
    check_value_error(decode, frame, "no native codec")


# -- encoding -------------------------------------------------------------------------------


def topics_strategy(*partition_tail: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Up to 4 topics (a name, up to 4 partitions) in the native encoders' shape:
    a partition is index (int32), error code (int16), three int64s, then the tail."""
    return st.lists(st.tuples(st.text(max_size=20), st.lists(st.tuples(
        st.integers(*INT32), st.integers(*INT16), st.integers(*INT64), st.integers(*INT64),
        st.integers(*INT64), *partition_tail), max_size=4)), max_size=4)


def refuse_bad_partitions(good: tuple[Any, ...], ranges: Sequence[tuple[int, int]],
                          refuses: Callable[..., None]) -> None:
    """``refuses(exc, topics)`` for partitions of the wrong arity (ValueError) and
    for each field in ``ranges`` out of its range (OverflowError)."""
    for wrong in (good[:-1], (*good, None), ()):
        refuses(ValueError, [("t", [good, wrong])])
    for field, (lo, hi) in enumerate(ranges):
        for value in (lo - 1, hi + 1, 2**64):
            bad = list(good)
            bad[field] = value
            refuses(OverflowError, [("t", [good, tuple(bad)])])


def refuse_bad_shapes(good: tuple[Any, ...], refuses: Callable[..., None]) -> None:
    """``refuses(exc, topics)`` for topics lists of the wrong shapes and names."""
    for name in (b"t", 5, None):
        refuses(TypeError, [("ok", [good]), (name, [good])])
    refuses(TypeError, [("t", [list(good)])])
    refuses(TypeError, [("t", (good,))])
    refuses(TypeError, (("t", [good]),))
    refuses(ValueError, [("t", [good], "extra")])  # unpacking
    refuses(TypeError, [("t", ["not a tuple"])])
    refuses(UnicodeEncodeError, [("\ud800", [good])])
