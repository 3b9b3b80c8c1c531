"""Record batch micro-benchmarks: pylog's native codec against kafka-python
and aiokafka, on one core.

- ``validate+stamp-*``: the produce path. Check every batch of 1 MiB of
  uncompressed batches (header, CRC32C, record count, and every field of
  every record, as Kafka's LogValidator) and stamp base offsets and the
  leader epoch in place. kafka-python does less with its own reader (no
  record walk): ``DefaultRecordBatch`` per batch, its header fields,
  ``validate_crc()`` (through the ``crc32c`` C package when installed) and
  ``struct.pack_into`` for the stamp. ``extra_info["GB/s"]``.
- ``record-read``: decode a batch of 10k records of 100 bytes and touch every
  key and value, against aiokafka's Cython reader (and its pure-Python
  one). ``extra_info["records/s"]``.

    pytest benchmarks/test_bench_records.py --benchmark-enable
    python benchmarks/report.py -k records
"""

from __future__ import annotations

import random
import struct

import pytest

from pylog._native import records as native
from pylog.records import pyrecords

kafka_records = pytest.importorskip("kafka.record.default_records")
aio_records = pytest.importorskip("aiokafka.record.default_records")
try:
    from aiokafka.record._crecords import default_records as aio_c
except ImportError:  # pragma: no cover
    aio_c = None

MiB = 1024 * 1024
T0 = 1_700_000_000_000


def make_batches(total: int, batch_bytes: int, value_size: int) -> bytes:
    rnd = random.Random(batch_bytes)
    out, size = [], 0
    while size < total:
        builder = native.BatchBuilder()
        n = 0
        while n * (value_size + 20) < batch_bytes:
            builder.append(T0 + n, b"key-%06d" % n, rnd.randbytes(value_size))
            n += 1
        out.append(builder.build())
        size += len(out[-1])
    return b"".join(out)


# name: (total bytes, bytes per batch, value size)
LAYOUTS = {
    "1x1MiB": (MiB, MiB, 1024),
    "16x64KiB": (MiB, 64 * 1024, 1024),
    "16x64KiB-100B-records": (MiB, 64 * 1024, 100),  # 10x more record lengths to walk
}


def pylog_validate_stamp(buf: bytearray) -> int:
    native.validate(buf)
    return native.stamp(buf, 1000, 7)


def kafka_python_validate_stamp(buf: bytearray) -> int:
    view = memoryview(buf)
    pos, offset = 0, 1000
    while pos < len(view):
        (length,) = struct.unpack_from(">i", view, pos + 8)
        batch = kafka_records.DefaultRecordBatch(view[pos:pos + length + 12])
        if batch.magic != 2 or not batch.validate_crc():
            raise ValueError("corrupt batch")
        if batch.last_offset_delta != batch.records_count - 1:
            raise ValueError("bad record count")
        struct.pack_into(">qii", view, pos, offset, length, 7)
        offset += batch.last_offset_delta + 1
        pos += length + 12
    return offset


def pure_validate_stamp(buf: bytearray) -> int:
    pyrecords.validate(buf)
    return pyrecords.stamp(buf, 1000, 7)


VALIDATORS = {
    "pylog": pylog_validate_stamp,
    "kafka-python": kafka_python_validate_stamp,
    "pylog-pure": pure_validate_stamp,
}


@pytest.mark.parametrize("impl", VALIDATORS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_validate_stamp(benchmark, layout: str, impl: str) -> None:
    total, batch_bytes, value_size = LAYOUTS[layout]
    buf = bytearray(make_batches(total, batch_bytes, value_size))
    benchmark.group = f"validate+stamp-{layout}"
    expected = 1000 + sum(i.last_offset_delta + 1 for i in native.validate(buf))
    assert benchmark(VALIDATORS[impl], buf) == expected
    if benchmark.stats is not None:
        benchmark.extra_info["GB/s"] = len(buf) / benchmark.stats.stats.median / 1e9


READ_RECORDS = 10_000
READ_VALUE = 100


@pytest.fixture(scope="module")
def read_batch() -> bytes:
    rnd = random.Random(7)
    return native.build_batch(
        (T0 + i, b"key-%06d" % i, rnd.randbytes(READ_VALUE)) for i in range(READ_RECORDS))


def pylog_read(buf: bytes) -> int:
    n = 0
    for batch in native.read_batches(buf):
        for r in batch.records():
            n += len(r.key) + len(r.value)
    return n


def aiokafka_c_read(buf: bytes) -> int:
    n = 0
    for r in aio_c.DefaultRecordBatch(buf):
        n += len(r.key) + len(r.value)
    return n


def aiokafka_py_read(buf: bytes) -> int:
    n = 0
    for r in aio_records._DefaultRecordBatchPy(buf):
        n += len(r.key) + len(r.value)
    return n


READERS = {"pylog": pylog_read, "aiokafka-py": aiokafka_py_read}
if aio_c is not None:
    READERS["aiokafka-c"] = aiokafka_c_read


@pytest.mark.parametrize("impl", READERS)
def test_record_read(benchmark, read_batch: bytes, impl: str) -> None:
    benchmark.group = "record-read"
    assert benchmark(READERS[impl], read_batch) == READ_RECORDS * (10 + READ_VALUE)
    if benchmark.stats is not None:
        benchmark.extra_info["records/s"] = READ_RECORDS / benchmark.stats.stats.median


# -- deep validation: the produce path's check of a compressed batch ----------
#
# ``deep-<codec>``: one batch of 1 MiB of 100-byte records, compressed.  pylog
# decompresses it into its scratch buffer and walks every record's fields in C
# (validate(deep=True), CRC32C included); the reference is the decompression
# alone, by cramjam into a new buffer, measured in the same run.  The ratio is
# what the check costs above inflating the bytes, which Kafka pays too.

DEEP_CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@pytest.fixture(scope="module")
def deep_batches() -> dict[str, bytes]:
    rnd = random.Random(7)
    recs = [(T0 + i, b"key-%06d" % i, rnd.randbytes(50) * 2) for i in range(MiB // 120)]
    return {name: native.build_batch(recs, compression=codec)
            for name, codec in DEEP_CODECS.items()}


def pylog_deep(buf: bytes) -> int:
    return native.validate_summary(buf, deep=True)[1]


def decompress_only(buf: bytes) -> int:
    from pylog.records import compression
    return len(compression.decompress(buf[22] & 7, memoryview(buf)[61:])) and 1


@pytest.mark.parametrize("impl", ["pylog", "decompress-only"])
@pytest.mark.parametrize("codec", DEEP_CODECS)
def test_deep_validate(benchmark, deep_batches, codec: str, impl: str) -> None:
    buf = deep_batches[codec]
    benchmark.group = f"deep-{codec}"
    fn = pylog_deep if impl == "pylog" else decompress_only
    expected = MiB // 120 if impl == "pylog" else 1
    assert benchmark(fn, buf) == expected
