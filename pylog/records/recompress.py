"""A topic's ``compression.type``: batches re-encoded with the topic's codec.

Kafka's LogValidator rebuilds a produced batch whose codec is not the topic's
(unless the topic says ``producer``), keeping its producer id, epoch, sequence,
timestamps and attributes.  The records section of a v2 batch does not depend
on the codec, so re-encoding is: decompress the section (if compressed),
compress it with the target codec (if any), and write a new batch header
around it with the codec bits, the batch length and the CRC32C updated.  One
codec call per batch, no per-record Python; this is the only produce path that
builds new batch bytes, and it runs only for topics that ask for it.
"""

from __future__ import annotations

import struct

from pylog.records.compression import CODECS, compress, decompress_bounded
from pylog.records.pyrecords import HEADER_SIZE

try:
    from pylog._native.crc32c import crc32c
except ImportError:  # extension not built
    from pylog.records.pyrecords import crc32c

_OFF_LENGTH = 8
_OFF_CRC = 17
_OFF_ATTRIBUTES = 21
_CODEC_MASK = 0x07
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")


def target_codec(compression_type: str) -> int | None:
    """The codec id a topic's ``compression.type`` asks for; None for
    ``producer`` (keep the producer's)."""
    if compression_type == "producer":
        return None
    return 0 if compression_type == "uncompressed" else CODECS[compression_type]


def needs_recompression(buf, codec: int | None) -> bool:
    """Whether any batch in ``buf`` (already validated) has another codec."""
    if codec is None:
        return False
    view = memoryview(buf)
    pos = 0
    while pos + HEADER_SIZE <= len(view):
        if _U16.unpack_from(view, pos + _OFF_ATTRIBUTES)[0] & _CODEC_MASK != codec:
            return True
        pos += _I32.unpack_from(view, pos + _OFF_LENGTH)[0] + 12
    return False


def recompress(buf, codec: int) -> bytearray:
    """Every batch in ``buf`` (already validated, deep) re-encoded with
    ``codec`` (0: none); batches already in it are copied unchanged."""
    view = memoryview(buf)
    out = bytearray()
    pos = 0
    while pos < len(view):
        size = _I32.unpack_from(view, pos + _OFF_LENGTH)[0] + 12
        batch = view[pos:pos + size]
        attributes = _U16.unpack_from(batch, _OFF_ATTRIBUTES)[0]
        source = attributes & _CODEC_MASK
        if source == codec:
            out += batch
        else:
            section = batch[HEADER_SIZE:]
            if source:
                section = decompress_bounded(source, section)
            payload = compress(codec, section) if codec else bytes(section)
            start = len(out)
            out += batch[:HEADER_SIZE]
            out += payload
            _I32.pack_into(out, start + _OFF_LENGTH, HEADER_SIZE - 12 + len(payload))
            _U16.pack_into(out, start + _OFF_ATTRIBUTES, attributes & ~_CODEC_MASK | codec)
            with memoryview(out) as whole:  # released before out grows again
                crc = crc32c(whole[start + _OFF_ATTRIBUTES:])
            _U32.pack_into(out, start + _OFF_CRC, crc)
        pos += size
    return out
