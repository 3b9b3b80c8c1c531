"""Primitive wire types: the helpers the compiled codecs and the headers call.

The compiled codecs inline the common cases (fixed-size runs through one
``struct.Struct``, one-byte varints); what is here is the rest: multi-byte
varints, uuids, byte lengths, tagged-field sections, bounds errors. Decoders work
on a 1-D ``memoryview`` of unsigned bytes with an integer cursor ``pos`` and the
buffer length ``n``; encoders append ``bytes``-like pieces to a list that is joined
once.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any, NoReturn

from pylog.errors import ProtocolError

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
UINT16 = struct.Struct(">H")
INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")
INT64 = struct.Struct(">q")
FLOAT64 = struct.Struct(">d")

STRUCT_CODES = {
    "bool": "?", "int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
    "int64": "q", "float64": "d", "uuid": "16s",
}

ZERO_UUID = uuid.UUID(int=0)
# One-byte unsigned varints, the usual compact length / count / tag encoding.
UVARINT_1 = tuple(bytes((i,)) for i in range(128))

NULL_INT16 = b"\xff\xff"
NULL_INT32 = b"\xff\xff\xff\xff"
NULL_COMPACT = b"\x00"
TAGS_NONE = b"\x00"
NULL_STRUCT = b"\xff"
PRESENT_STRUCT = b"\x01"

# Errors a decoder may hit on bad input besides its own ProtocolErrors; the
# public entry points turn them into ProtocolError.
DECODE_ERRORS = (struct.error, IndexError, UnicodeDecodeError, ValueError, OverflowError)
ENCODE_ERRORS = (struct.error, AttributeError, TypeError, ValueError, OverflowError,
                 UnicodeEncodeError)


def fail(message: str) -> NoReturn:
    raise ProtocolError(message)


def uvarint_tail(buf: memoryview, pos: int, first: int) -> tuple[int, int]:
    """Finish an unsigned varint whose first byte (``first``, at ``pos - 1``) had
    the continuation bit set. At most 5 bytes, as Kafka's 32-bit varints."""
    value = first & 0x7F
    shift = 7
    while True:
        b = buf[pos]  # IndexError past the end: truncated
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift >= 35:
            fail("unsigned varint longer than 5 bytes")


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b & 0x80:
        return uvarint_tail(buf, pos + 1, b)
    return b, pos + 1


def uvarint(value: int) -> bytes:
    if 0 <= value < 128:
        return UVARINT_1[value]
    if value < 0 or value > 0xFFFFFFFF:
        fail(f"unsigned varint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint(value: int) -> bytes:
    """Zig-zag signed varint (32-bit)."""
    if not -0x80000000 <= value <= 0x7FFFFFFF:
        fail(f"varint out of range: {value}")
    return uvarint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def read_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    raw, pos = read_uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def uuid_from_bytes(raw: bytes) -> uuid.UUID:
    return uuid.UUID(bytes=raw)


def uuid_to_bytes(value: Any) -> bytes:
    """A uuid field's 16 bytes from a ``uuid.UUID``, 16 raw bytes, a UUID string, or
    None (the zero UUID)."""
    if isinstance(value, uuid.UUID):
        return value.bytes
    if value is None:
        return bytes(16)
    if isinstance(value, (bytes, bytearray, memoryview)) and len(value) == 16:
        return bytes(value)
    if isinstance(value, str):
        return uuid.UUID(value).bytes
    fail(f"not a uuid: {value!r}")


def as_bytes_piece(value: Any) -> tuple[Any, int]:
    """A bytes-like value ready to append to the output, and its length in bytes.

    memoryviews of other formats or shapes are cast to plain bytes views, so that
    ``len`` of every piece is its size."""
    if type(value) is memoryview and (value.format != "B" or value.ndim != 1):
        value = value.cast("B") if value.c_contiguous else memoryview(value.tobytes())
    elif not isinstance(value, (bytes, bytearray, memoryview)):
        try:
            value = memoryview(value).cast("B")
        except TypeError:
            fail(f"not bytes-like: {type(value).__name__}")
    return value, len(value)


def write_tagged(ap: Any, tags: list[tuple[int, bytes]], unknown: dict[int, bytes] | None) -> None:
    """Write a tagged-field section: count, then (tag, size, data) sorted by tag."""
    if unknown:
        merged = dict(unknown)
        merged.update(tags)
        tags = sorted(merged.items())
    ap(uvarint(len(tags)))
    for tag, data in tags:
        ap(uvarint(tag))
        ap(uvarint(len(data)))
        ap(data)


def as_memoryview(buf: Any) -> memoryview:
    """A 1-D unsigned-byte view of any bytes-like input (no copy when possible)."""
    mv = buf if type(buf) is memoryview else memoryview(buf)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B") if mv.c_contiguous else memoryview(mv.tobytes())
    return mv
