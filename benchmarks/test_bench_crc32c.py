"""CRC32C micro-benchmarks: pylog against the `crc32c` and `google-crc32c` packages.

Each size is its own group (``crc32c-16KiB``...), so pytest-benchmark's table
compares the three implementations side by side.  Every benchmark also checks
its result against the reference, so a fast wrong answer cannot win.

    pytest benchmarks/test_bench_crc32c.py --benchmark-enable
"""

from __future__ import annotations

import random
from collections.abc import Callable

import crc32c as ref
import google_crc32c
import pytest

from pylog._native import crc32c as native

SIZES = {"1KiB": 1024, "16KiB": 16 * 1024, "1MiB": 1024 * 1024}

IMPLEMENTATIONS: dict[str, Callable[[bytes], int]] = {
    "pylog": native.crc32c,  # the best tier this CPU has (native.IMPLEMENTATION)
    "crc32c": ref.crc32c,
    "google_crc32c": google_crc32c.value,
}
if native.AVX512:
    # Where the default is the AVX-512 tier, also time the SSE4.2 3-way tier
    # that CPUs without AVX-512 get.
    IMPLEMENTATIONS["pylog-sse42"] = native.crc32c_sse42


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("size", SIZES)
def test_crc32c(benchmark, size: str, impl: str) -> None:
    benchmark.group = f"crc32c-{size}"
    data = random.Random(size).randbytes(SIZES[size])
    result = benchmark(IMPLEMENTATIONS[impl], data)
    assert result == ref.crc32c(data)
