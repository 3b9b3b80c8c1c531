"""Varints: edge values, properties, every truncation, over-long input, and
agreement with kafka-python's encoder/decoder."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pylog.errors import VarintError

v = pytest.importorskip("pylog._native.varint")

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
UINT32 = (0, 2**32 - 1)


def edges(lo: int, hi: int) -> list[int]:
    vals = {0, 1, -1, lo, hi, lo + 1, hi - 1}
    for k in range(64):
        vals.update({2**k - 1, 2**k, 2**k + 1, -(2**k), -(2**k) - 1, -(2**k) + 1})
    return sorted(x for x in vals if lo <= x <= hi)


KINDS = {
    "varint": (v.encode_varint, v.decode_varint, v.size_of_varint, INT32, 5),
    "varlong": (v.encode_varlong, v.decode_varlong, v.size_of_varlong, INT64, 10),
    "uvarint": (v.encode_uvarint, v.decode_uvarint, v.size_of_uvarint, UINT32, 5),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_round_trip_edges(kind):
    enc, dec, size, (lo, hi), max_len = KINDS[kind]
    for x in edges(lo, hi):
        data = enc(x)
        assert 1 <= len(data) <= max_len
        assert size(x) == len(data)
        assert dec(data) == (x, len(data))
        assert dec(b"\x00\x00" + data + b"\xff", 2) == (x, 2 + len(data))
        assert dec(bytearray(data)) == dec(memoryview(data)) == (x, len(data))


def test_known_encodings():
    assert v.encode_varint(0) == b"\x00"
    assert v.encode_varint(-1) == b"\x01"
    assert v.encode_varint(1) == b"\x02"
    assert v.encode_varint(-64) == b"\x7f"
    assert v.encode_varint(64) == b"\x80\x01"
    assert v.encode_varint(2**31 - 1) == b"\xfe\xff\xff\xff\x0f"
    assert v.encode_varint(-(2**31)) == b"\xff\xff\xff\xff\x0f"
    assert v.encode_varlong(-(2**63)) == b"\xff" * 9 + b"\x01"
    assert v.encode_uvarint(300) == b"\xac\x02"
    assert v.encode_uvarint(2**32 - 1) == b"\xff\xff\xff\xff\x0f"


@given(st.integers(*INT32))
def test_varint_property(x):
    assert v.decode_varint(v.encode_varint(x)) == (x, v.size_of_varint(x))
    # A varint is the varlong of the same value (zig-zag keeps small values small).
    assert v.encode_varint(x) == v.encode_varlong(x)


@given(st.integers(*INT64))
def test_varlong_property(x):
    assert v.decode_varlong(v.encode_varlong(x)) == (x, v.size_of_varlong(x))


@given(st.integers(*UINT32), st.binary(max_size=8))
def test_uvarint_property(x, tail):
    data = v.encode_uvarint(x)
    assert v.decode_uvarint(data + tail) == (x, len(data))


@pytest.mark.parametrize("kind", list(KINDS))
def test_truncated_at_every_cut(kind):
    enc, dec, _, (lo, hi), _ = KINDS[kind]
    for x in (lo, hi, 2**20 if hi > 2**20 else hi):
        data = enc(x)
        for cut in range(len(data)):
            with pytest.raises(VarintError, match="truncated"):
                dec(data[:cut])
            with pytest.raises(VarintError, match="truncated"):
                dec(b"\x00" + data[:cut], 1)


@pytest.mark.parametrize("kind", list(KINDS))
def test_too_long(kind):
    _, dec, _, _, max_len = KINDS[kind]
    for data in (b"\xff" * max_len + b"\x01", b"\x80" * max_len + b"\x00",
                 b"\xff" * 11 + b"\x01", b"\xff" * 20):
        with pytest.raises(VarintError, match="too long"):
            dec(data)
    # The last byte may not carry bits beyond the width either.
    last = b"\x10" if max_len == 5 else b"\x02"
    with pytest.raises(VarintError, match="too long"):
        dec(b"\x80" * (max_len - 1) + last)


@pytest.mark.parametrize("kind", list(KINDS))
def test_out_of_range(kind):
    enc, _, size, (lo, hi), _ = KINDS[kind]
    for bad in (lo - 1, hi + 1, 2**200):
        with pytest.raises((OverflowError, ValueError)):
            enc(bad)
        with pytest.raises((OverflowError, ValueError)):
            size(bad)


def test_positions():
    for bad in (-1, 2, 100):
        with pytest.raises((IndexError, VarintError)):
            v.decode_varint(b"\x01", bad)
    with pytest.raises(VarintError, match="truncated"):
        v.decode_varint(b"\x01", 1)
    with pytest.raises(TypeError):
        v.decode_varint("not bytes")


# -- cross-check with kafka-python (its varints are 64-bit zig-zag) ------------

kutil = pytest.importorskip("kafka.record.util")


def kafka_encode(x: int) -> bytes:
    out = bytearray()
    kutil.encode_varint(x, out.append)
    return bytes(out)


@pytest.mark.parametrize("x", edges(*INT64))
def test_matches_kafka_python(x):
    data = kafka_encode(x)
    assert v.encode_varlong(x) == data
    assert v.decode_varlong(data) == kutil.decode_varint(data, 0)
    assert kutil.size_of_varint(x) == v.size_of_varlong(x)
    if INT32[0] <= x <= INT32[1]:
        assert v.encode_varint(x) == data
        assert v.decode_varint(data) == (x, len(data))


@given(st.integers(*INT64))
def test_matches_kafka_python_property(x):
    data = kafka_encode(x)
    assert v.encode_varlong(x) == data
    assert v.decode_varlong(data)[0] == kutil.decode_varint(data, 0)[0] == x
