"""Log cleaner micro-benchmarks: one compaction pass over 4 MiB of batches.

A pass maps every key of the dirty part to its latest offset, then rewrites
the batches keeping the latest record of each key (``native/cleaner.pyx``:
``OffsetMap.add_batches`` + ``RecordFilter.run``).  References, in the same
run:

- ``copy``: ``bytes()`` of the same buffer, the floor (a pass copies what it
  keeps and reads all of it);
- ``kafka-python``: the same pass in Python on kafka-python's record reader
  and batch builder (a dict of key -> offset, then per-record filtering), what
  a cleaner written on a client library would cost.

``extra_info["MB/s"]`` is input bytes per second.

    pytest benchmarks/test_bench_cleaner.py --benchmark-enable
    python benchmarks/report.py -k cleaner
"""

from __future__ import annotations

import random

import pytest
from pylog._native.cleaner import OffsetMap, RecordFilter

from pylog._native import records as native

kafka_records = pytest.importorskip("kafka.record.default_records")

MiB = 1024 * 1024
T0 = 1_700_000_000_000
TOTAL = 4 * MiB
RECORDS_PER_BATCH = 100

# name: (value size, distinct keys, codec)
LAYOUTS = {
    "100B-1k-keys": (100, 1000, 0),
    "1KiB-100k-keys": (1024, 100_000, 0),
    "100B-1k-keys-lz4": (100, 1000, 3),
}


def make_log(value_size: int, keys: int, codec: int) -> bytes:
    rnd = random.Random(value_size + keys)
    out, size, offset = [], 0, 0
    while size < TOTAL:
        builder = native.BatchBuilder(compression=codec, base_offset=offset)
        for i in range(RECORDS_PER_BATCH):
            builder.append(T0 + offset + i, b"key-%07d" % rnd.randrange(keys),
                           rnd.randbytes(value_size))
        out.append(builder.build())
        size += len(out[-1])
        offset += RECORDS_PER_BATCH
    return b"".join(out)


def pylog_pass(buf: bytes) -> int:
    offsets = OffsetMap(128 * MiB)
    offsets.add_batches(buf, 0, len(buf))
    records = RecordFilter()
    records.run(offsets, buf, 0, len(buf), T0, T0 + 86_400_000)  # delete.retention.ms: 1 day
    return len(records.take())


def copy_pass(buf: bytes) -> int:
    return len(bytearray(buf))


def kafka_python_pass(buf: bytes) -> int:
    view = memoryview(buf)
    batches = []
    pos = 0
    while pos < len(view):
        length = int.from_bytes(view[pos + 8:pos + 12], "big")
        batches.append(kafka_records.DefaultRecordBatch(bytes(view[pos:pos + length + 12])))
        pos += length + 12
    latest: dict[bytes, int] = {}
    decoded = [(batch, list(batch)) for batch in batches]  # a batch iterates once
    for _, records in decoded:
        for r in records:
            latest[r.key] = r.offset
    out = 0
    for batch, records in decoded:
        kept = [r for r in records if latest[r.key] == r.offset]
        if not kept:
            continue
        builder = kafka_records.DefaultRecordBatchBuilder(
            2, batch.compression_type, False, -1, -1, -1, 1 << 30)
        for r in kept:
            builder.append(r.offset - batch.base_offset, r.timestamp, r.key, r.value, [])
        out += len(builder.build())
    return out


PASSES = {"pylog": pylog_pass, "copy": copy_pass, "kafka-python": kafka_python_pass}


@pytest.mark.parametrize("impl", PASSES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_compaction_pass(benchmark, layout: str, impl: str) -> None:
    buf = make_log(*LAYOUTS[layout])
    benchmark.group = f"cleaner-{layout}"
    assert benchmark(PASSES[impl], buf) > 0
    if benchmark.stats is not None:
        benchmark.extra_info["MB/s"] = len(buf) / benchmark.stats.stats.median / 1e6
