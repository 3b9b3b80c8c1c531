"""Compression codecs of record batches, by the codec id in the attributes.

Shared by the native codec and the pure-Python twin.  The broker stores
batches as received and never compresses; it decompresses each compressed
batch a client produces once, into a reused buffer of bounded size
(:func:`decompress_bounded`), to check the records inside.  All four codecs
come from ``cramjam``.

Formats, as Kafka's Java client writes and reads them:

- gzip (1): a standard gzip stream.
- snappy (2): the Java client writes xerial ``SnappyOutputStream`` framing (a
  16-byte header, then blocks of ``int32 length + raw snappy`` of at most
  32 KiB input each); librdkafka reads and writes the same; a raw snappy block
  is accepted too when decoding (what some other clients send).  We encode
  xerial framing: every reader (Java, librdkafka, kafka-python, aiokafka)
  accepts it.
- lz4 (3): the LZ4 frame format with independent blocks (Kafka >= 0.10, KIP-57);
  the Java reader refuses linked blocks, so we never write them.
- zstd (4): a zstd frame (several concatenated frames decode too).
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Callable

import cramjam

from pylog.errors import CodecError

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODECS = {name: codec for codec, name in NAMES.items()}

# The xerial header: marker -126, "SNAPPY", NUL, version 1, compatible version 1.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # uncompressed bytes per block, snappy-java's default

GZIP_LEVEL = 6  # java.util.zip's default
LZ4_LEVEL = 9  # Kafka's default lz4 level (KIP-390)
ZSTD_LEVEL = 3  # zstd's and Kafka's default level


def _snappy_compress(data) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for i in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[i:i + _XERIAL_BLOCK]))
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data) -> bytes:
    view = memoryview(data)
    # xerial framing is recognised by its 8-byte magic; version fields are not
    # checked (some producers write them little-endian).
    if len(view) < 16 or view[:8] != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    out = []
    pos, end = 16, len(view)
    while pos < end:
        if end - pos < 4:
            raise CodecError(f"snappy: truncated xerial block length at byte {pos}")
        (size,) = struct.unpack_from(">i", view, pos)
        pos += 4
        if size < 0 or size > end - pos:
            raise CodecError(f"snappy: xerial block of {size} bytes at byte {pos - 4} "
                             f"overruns the {end - pos} bytes left")
        out.append(bytes(cramjam.snappy.decompress_raw(view[pos:pos + size])))
        pos += size
    return b"".join(out)


def _lz4_compress(data) -> bytes:
    c = cramjam.lz4.Compressor(level=LZ4_LEVEL, content_checksum=False, block_linked=False)
    c.compress(data if type(data) is bytes else bytes(data))  # it takes bytes only
    return bytes(c.finish())


_COMPRESS: dict[int, Callable[[object], bytes]] = {
    GZIP: lambda d: bytes(cramjam.gzip.compress(d, level=GZIP_LEVEL)),
    SNAPPY: _snappy_compress,
    LZ4: _lz4_compress,
    ZSTD: lambda d: bytes(cramjam.zstd.compress(d, level=ZSTD_LEVEL)),
}

_DECOMPRESS: dict[int, Callable[[object], bytes]] = {
    GZIP: lambda d: bytes(cramjam.gzip.decompress(d)),
    SNAPPY: _snappy_decompress,
    LZ4: lambda d: bytes(cramjam.lz4.decompress(d)),
    ZSTD: lambda d: bytes(cramjam.zstd.decompress(d)),
}


def compress(codec: int, data) -> bytes:
    """Compress ``data`` (any bytes-like) with codec id ``codec`` (1..4)."""
    try:
        fn = _COMPRESS[codec]
    except KeyError:
        raise ValueError(f"unknown compression codec {codec!r}") from None
    return fn(data)


def decompress(codec: int, data) -> bytes:
    """Decompress ``data``; bytes that do not decode raise :class:`CodecError`."""
    try:
        fn = _DECOMPRESS[codec]
    except KeyError:
        raise CodecError(f"unknown compression codec {codec!r}") from None
    try:
        return fn(data)
    except CodecError:
        raise
    except Exception as exc:  # cramjam raises DecompressionError, ValueError, ...
        raise CodecError(f"{NAMES[codec]}: cannot decompress: {exc}") from exc


# -- bounded decompression (the produce path's check of compressed batches) ----
#
# The broker decompresses every compressed batch a client produces, as Kafka's
# LogValidator does, to check the records inside before it stores the batch.
# Kafka streams through the records; cramjam decompresses into one buffer, so
# the size is bounded first, from the codec's own framing, never trusted to
# the data: a few kilobytes of zstd can claim gigabytes.

INFLATE_LIMIT = 256 * 1024 * 1024  # bytes a produced batch may decompress to
_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_BLOCK_MAX = 128 * 1024  # a compressed zstd block regenerates at most this
_LZ4_MAGIC = 0x184D2204
_LZ4_BLOCK_MAX = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}


def _framed_bound(view: memoryview, name: str, magic: int, header: int,
                  frame: Callable[[memoryview, int], tuple[int, int]]) -> int:
    """Sum of ``frame(view, pos) -> (end, bound)`` over the data frames of a
    zstd or lz4 stream, past the skippable frames both formats have."""
    total, pos = 0, 0
    while pos < len(view):
        if len(view) - pos < header:
            raise CodecError(f"{name}: truncated frame at byte {pos}")
        (found,) = struct.unpack_from("<I", view, pos)
        if found & 0xFFFFFFF0 == 0x184D2A50:
            pos += 8 + struct.unpack_from("<I", view, pos + 4)[0]
            continue
        if found != magic:
            raise CodecError(f"{name}: bad frame magic 0x{found:08x} at byte {pos}")
        pos, bound = frame(view, pos)
        total += bound
    return total


def _zstd_frame(view: memoryview, pos: int) -> tuple[int, int]:
    """A zstd frame's end and bound: its declared content size, else the sum
    of its blocks' (raw and RLE blocks say their size, a compressed one
    regenerates at most 128 KiB)."""
    end = len(view)
    fhd = view[pos + 4]
    fcs_flag, single, has_checksum = fhd >> 6, fhd >> 5 & 1, fhd >> 2 & 1
    fcs_size = (1 if single else 0, 2, 4, 8)[fcs_flag]
    p = pos + 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3]
    if p + fcs_size > end:
        raise CodecError(f"zstd: truncated frame header at byte {pos}")
    declared = None
    if fcs_size:
        declared = int.from_bytes(view[p:p + fcs_size], "little")
        declared += 256 if fcs_size == 2 else 0
    p += fcs_size
    blocks = 0
    while True:
        if p + 3 > end:
            raise CodecError(f"zstd: truncated block header at byte {p}")
        header = int.from_bytes(view[p:p + 3], "little")
        last, kind, size = header & 1, header >> 1 & 3, header >> 3
        if kind == 3:
            raise CodecError(f"zstd: reserved block type at byte {p}")
        p += 3 + (1 if kind == 1 else size)
        blocks += _ZSTD_BLOCK_MAX if kind == 2 else size
        if last:
            break
    return p + 4 * has_checksum, min(declared, blocks) if declared is not None else blocks


def _lz4_frame(view: memoryview, pos: int) -> tuple[int, int]:
    """An lz4 frame's end and bound: its declared content size, else the sum
    of its blocks' (a stored block says its size, a compressed one fills at
    most the frame's block maximum)."""
    end = len(view)
    flg, bd = view[pos + 4], view[pos + 5]
    block_max = _LZ4_BLOCK_MAX.get(bd >> 4 & 7)
    if block_max is None:
        raise CodecError(f"lz4: bad block maximum size in byte 0x{bd:02x}")
    p = pos + 6
    declared = None
    if flg & 0x08:
        declared = int.from_bytes(view[p:p + 8], "little")
        p += 8
    p += 4 * (flg & 1) + 1  # dictionary id, header checksum
    block_checksum = 4 * (flg >> 4 & 1)
    blocks = 0
    while True:
        if p + 4 > end:
            raise CodecError(f"lz4: truncated block header at byte {p}")
        (size,) = struct.unpack_from("<I", view, p)
        p += 4
        if size == 0:  # end mark
            break
        stored, size = size >> 31, size & 0x7FFFFFFF
        blocks += size if stored else block_max
        p += size + block_checksum
    end_of_frame = p + 4 * (flg >> 2 & 1)
    return end_of_frame, min(declared, blocks) if declared is not None else blocks


def _snappy_bound(view: memoryview) -> int:
    """Exact: every raw snappy block starts with its uncompressed length."""
    if len(view) < 16 or view[:8] != _XERIAL_MAGIC:
        return cramjam.snappy.decompress_raw_len(view)
    total, pos, end = 0, 16, len(view)
    while pos < end:
        if end - pos < 4:
            raise CodecError(f"snappy: truncated xerial block length at byte {pos}")
        (size,) = struct.unpack_from(">i", view, pos)
        if size < 0 or size > end - pos - 4:
            raise CodecError(f"snappy: xerial block of {size} bytes at byte {pos} "
                             f"overruns the {end - pos - 4} bytes left")
        total += cramjam.snappy.decompress_raw_len(view[pos + 4:pos + 4 + size])
        pos += 4 + size
    return total


def _gzip_bound(view: memoryview) -> int:
    """ISIZE, the trailer's uncompressed size (mod 2**32) of the last member:
    Kafka's clients write one member (several are read by _gzip_members)."""
    if len(view) < 18:
        raise CodecError(f"gzip: {len(view)} bytes cannot hold a gzip stream")
    return struct.unpack_from("<I", view, len(view) - 4)[0]


_BOUND: dict[int, Callable[[memoryview], int]] = {
    GZIP: _gzip_bound, SNAPPY: _snappy_bound,
    LZ4: lambda v: _framed_bound(v, "lz4", _LZ4_MAGIC, 7, _lz4_frame),
    ZSTD: lambda v: _framed_bound(v, "zstd", _ZSTD_MAGIC, 8, _zstd_frame)}


def inflated_bound(codec: int, data) -> int:
    """An upper bound of what ``data`` decompresses to, read from its framing
    (exact for snappy and for frames that declare their size); malformed
    framing raises :class:`CodecError`."""
    view = memoryview(data).cast("B")
    try:
        return _BOUND[codec](view)
    except CodecError:
        raise
    except KeyError:
        raise CodecError(f"unknown compression codec {codec!r}") from None
    except Exception as exc:  # struct.error, cramjam's errors on a bad preamble
        raise CodecError(f"{NAMES[codec]}: cannot decompress: {exc}") from exc


def _snappy_decompress_into(view: memoryview, out: memoryview) -> int:
    if len(view) < 16 or view[:8] != _XERIAL_MAGIC:
        return cramjam.snappy.decompress_raw_into(view, out)
    pos, end, n = 16, len(view), 0
    while pos < end:  # the framing was checked by _snappy_bound
        (size,) = struct.unpack_from(">i", view, pos)
        n += cramjam.snappy.decompress_raw_into(view[pos + 4:pos + 4 + size], out[n:])
        pos += 4 + size
    return n


_DECOMPRESS_INTO: dict[int, Callable[[memoryview, memoryview], int]] = {
    GZIP: cramjam.gzip.decompress_into,
    SNAPPY: _snappy_decompress_into,
    LZ4: cramjam.lz4.decompress_into,
    ZSTD: cramjam.zstd.decompress_into,
}


def _gzip_members(view: memoryview, limit: int) -> bytearray:
    """Every member of a multi-member gzip stream (Java's GZIPInputStream reads
    them all), stepwise so that no more than ``limit`` bytes are ever held."""
    out = bytearray()
    data: bytes | memoryview = view
    while len(data):
        d = zlib.decompressobj(wbits=31)
        out += d.decompress(data, limit - len(out) + 1)
        if len(out) > limit:
            raise CodecError(f"gzip: does not decompress within {limit} bytes")
        if not d.eof:
            raise CodecError("gzip: cannot decompress: truncated stream")
        data = d.unused_data
    return out


class _Scratch(threading.local):
    buf: bytearray = bytearray()


_scratch = _Scratch()
_SCRATCH_KEEP = 16 * 1024 * 1024  # larger buffers are let go after use


def decompress_bounded(codec: int, data, limit: int = INFLATE_LIMIT) -> memoryview:
    """Decompress ``data`` into this thread's scratch buffer and return a view of
    the result, valid until the next call on this thread.  Data that does not
    decode, or decodes to more than ``limit`` bytes, raises :class:`CodecError`;
    nothing of size ``limit`` is allocated unless the framing promises it."""
    view = memoryview(data).cast("B")
    bound = inflated_bound(codec, view)
    if bound > limit and codec in (GZIP, SNAPPY):  # their bounds are sizes
        raise CodecError(f"{NAMES[codec]}: does not decompress within {limit} bytes")
    size = min(bound, limit)
    buf = _scratch.buf
    if len(buf) < size:
        buf = bytearray(size)
    try:
        n = _DECOMPRESS_INTO[codec](view, memoryview(buf)[:size])
    except Exception as exc:  # cramjam's DecompressionError: corrupt, or too big
        if codec == GZIP:  # ISIZE is the last member's only
            try:
                return memoryview(_gzip_members(view, limit))
            except zlib.error as err:
                raise CodecError(f"gzip: cannot decompress: {err}") from err
        if bound > limit:
            raise CodecError(f"{NAMES[codec]}: does not decompress within "
                             f"{limit} bytes") from exc
        raise CodecError(f"{NAMES[codec]}: cannot decompress: {exc}") from exc
    finally:
        _scratch.buf = buf if len(buf) <= _SCRATCH_KEEP else bytearray()
    return memoryview(buf)[:n]
