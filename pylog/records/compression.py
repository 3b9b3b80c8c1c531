"""Compression codecs of record batches, by the codec id in the attributes.

Shared by the native codec and the pure-Python twin; compression is never on
the broker's hot path (it stores batches as received), only in readers, tools
and tests.  All four codecs come from ``cramjam``.

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
    c.compress(data)
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
