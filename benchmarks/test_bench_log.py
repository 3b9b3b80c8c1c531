"""Log micro-benchmarks (pytest-benchmark), pylog against a plain reference.

    pytest benchmarks/test_bench_log.py --benchmark-enable

Groups: ``log-append-16KiB`` (``Log.append`` vs ``os.write`` of the same
bytes in the same directory) and ``log-offset-lookup`` (the native index
search vs ``bisect`` over a Python list of the same offsets).
"""

from __future__ import annotations

import bisect
import itertools
import os
import random

import numpy as np
import pytest

from pylog.log import Log, LogConfig
from pylog.log.offset_index import OffsetIndex
from pylog.records import build_batch

ENTRIES = 262_144


@pytest.fixture(scope="module")
def batch16k() -> bytearray:
    value = random.Random(16).randbytes(1008)
    return bytearray(build_batch([(1_700_000_000_000, b"k", value)] * 16))


def test_append_16k_pylog(benchmark, tmp_path, batch16k):
    benchmark.group = "log-append-16KiB"
    lg = Log.open(tmp_path / "bench-0", LogConfig(segment_bytes=256 << 20))
    benchmark(lg.append, batch16k)
    assert lg.log_end_offset > 0
    lg.close_handlers()


def test_append_16k_os_write(benchmark, tmp_path, batch16k):
    benchmark.group = "log-append-16KiB"
    fd = os.open(tmp_path / "raw.bin", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        benchmark(os.write, fd, batch16k)
    finally:
        os.close(fd)


@pytest.fixture(scope="module")
def index_file(tmp_path_factory):
    arr = np.empty(ENTRIES, dtype=[("rel", ">i4"), ("pos", ">i4")])
    arr["rel"] = np.arange(ENTRIES) * 4
    arr["pos"] = np.arange(ENTRIES) * 4096
    path = tmp_path_factory.mktemp("idx") / f"{0:020d}.index"
    path.write_bytes(arr.tobytes())
    idx = OffsetIndex(path, 0, ENTRIES * 8)
    yield idx
    idx.close()


def test_offset_lookup_pylog(benchmark, index_file):
    benchmark.group = "log-offset-lookup"
    targets = itertools.cycle([random.Random(3).randrange(ENTRIES * 4) for _ in range(100_000)])
    result = benchmark(lambda: index_file.lookup(next(targets)))
    assert result.position % 4096 == 0


def test_offset_lookup_bisect_list(benchmark):
    benchmark.group = "log-offset-lookup"
    offsets = list(range(0, ENTRIES * 4, 4))
    positions = [i * 4096 for i in range(ENTRIES)]
    targets = itertools.cycle([random.Random(3).randrange(ENTRIES * 4) for _ in range(100_000)])

    def lookup() -> int:
        return positions[bisect.bisect_right(offsets, next(targets)) - 1]

    assert benchmark(lookup) % 4096 == 0
