"""compression.type: batches re-encoded with the topic's codec keep their
records and producer fields, and read back the same with either reader."""

from __future__ import annotations

import pytest
from record_vectors import T0

from pylog.records import compression, pyrecords
from pylog.records.recompress import needs_recompression, recompress, target_codec

native = pytest.importorskip("pylog._native.records")

CODECS = [0, 1, 2, 3, 4]
RECORDS = [(T0 + i, b"k%d" % i if i % 3 else None, b"v" * (i * 13), [("h", b"x")] * (i % 2))
           for i in range(40)]


def rows(buf) -> list[tuple]:
    return [r.as_tuple() for r in native.iter_records(buf)]


@pytest.mark.parametrize("source", CODECS)
@pytest.mark.parametrize("target", CODECS)
def test_recompress_every_pair(source, target):
    kw = dict(producer_id=9, producer_epoch=2, base_sequence=40, base_offset=0,
              timestamp_type=0, is_transactional=False)
    one = native.build_batch(RECORDS, compression=source, **kw)
    buf = one + native.build_batch(RECORDS[:5], compression=source, **kw)
    assert needs_recompression(buf, target) == (source != target)
    out = recompress(buf, target)
    if source == target:
        assert bytes(out) == buf
    infos = native.validate(out, deep=True)
    assert [i.compression for i in infos] == [target, target]
    before = [i.as_dict() for i in native.validate(buf)]
    for a, b in zip(before, (i.as_dict() for i in infos), strict=True):
        for field in ("crc", "compression", "attributes", "size"):
            a.pop(field), b.pop(field)
        b["position"] = a["position"]
        assert a == b
    assert rows(out) == rows(buf)
    assert [r.as_tuple() for r in pyrecords.iter_records(bytes(out))] == rows(buf)


def test_target_codec_names():
    assert target_codec("producer") is None
    assert target_codec("uncompressed") == 0
    assert [target_codec(n) for n in ("gzip", "snappy", "lz4", "zstd")] == [1, 2, 3, 4]
    assert not needs_recompression(native.build_batch(RECORDS), None)


def test_recompress_keeps_other_attributes():
    buf = native.build_batch(RECORDS[:3], compression=4, timestamp_type=1)
    out = recompress(buf, 1)
    info = native.validate(out)[0]
    assert (info.compression, info.timestamp_type) == (1, 1)
    assert compression.decompress(1, bytes(out[61:])) == compression.decompress(4, buf[61:])
