"""pylog._native.crc32c against the `crc32c` package as the reference."""

from __future__ import annotations

import array
import mmap
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import crc32c as ref
import numpy as np
import pytest

from pylog._native import crc32c as native

CrcFn = Callable[..., int]

hw_only = pytest.mark.skipif(
    not native.HARDWARE, reason="CPU lacks SSE4.2 + PCLMULQDQ; only the portable path runs"
)
avx512_only = pytest.mark.skipif(
    not native.AVX512, reason="CPU lacks AVX-512 VPCLMULQDQ; that tier cannot run here"
)

# Every implementation by name, for the exhaustive sweeps.
IMPLS = [
    pytest.param(native.crc32c_sw, id="sw"),
    pytest.param(native.crc32c_sse42, id="sse42", marks=hw_only),
    pytest.param(native.crc32c_avx512, id="avx512", marks=avx512_only),
]
# ... plus the dispatcher and the best-hardware entry point.
PATHS = [
    pytest.param(native.crc32c, id="dispatch"),
    pytest.param(native.crc32c_hw, id="hw", marks=hw_only),
    *IMPLS,
]

RNG = random.Random(0x1CEB00DA)
DATA = RNG.randbytes(4096 + 64)


def test_implementation_matches_hardware_flags() -> None:
    assert isinstance(native.HARDWARE, bool)
    assert isinstance(native.AVX512, bool)
    assert native.HARDWARE or not native.AVX512
    expected = "avx512-vpclmul" if native.AVX512 else "sse4.2-3way" if native.HARDWARE else None
    assert native.IMPLEMENTATION == (expected or "sw-slice8")


@pytest.mark.skipif(native.HARDWARE, reason="CPU has hardware CRC32C")
def test_hw_raises_without_hardware() -> None:
    with pytest.raises(RuntimeError):
        native.crc32c_hw(b"abc")
    with pytest.raises(RuntimeError):
        native.crc32c_sse42(b"abc")


@pytest.mark.skipif(native.AVX512, reason="CPU has AVX-512 VPCLMULQDQ")
def test_avx512_raises_without_it() -> None:
    with pytest.raises(RuntimeError):
        native.crc32c_avx512(b"abc")


@pytest.mark.parametrize("fn", PATHS)
def test_check_value(fn: CrcFn) -> None:
    assert fn(b"123456789") == 0xE3069283
    assert fn(b"") == 0
    assert fn(b"", 0xDEADBEEF) == 0xDEADBEEF


@pytest.mark.parametrize("fn", IMPLS)
def test_every_length_every_offset(fn: CrcFn) -> None:
    view = memoryview(DATA)
    for offset in range(16):
        for n in range(4097):
            chunk = view[offset : offset + n]
            assert fn(chunk) == ref.crc32c(chunk), (offset, n)


@pytest.mark.parametrize("fn", IMPLS)
def test_block_boundaries(fn: CrcFn) -> None:
    # Around the 3-way threshold, the AVX-512 threshold and its 256-byte
    # turns, the largest 3-way block (3 x 8 KiB) and the GIL release
    # threshold (64 KiB).
    big = RNG.randbytes(70_000)
    view = memoryview(big)
    for centre in (192, 512, 768, 3 * 8192, 2 * 3 * 8192, 65536):
        for n in range(centre - 40, centre + 41):
            for offset in (0, 1, 7):
                chunk = view[offset : offset + n]
                assert fn(chunk) == ref.crc32c(chunk), (offset, n)


@pytest.mark.parametrize("fn", PATHS)
def test_chaining_with_start_values(fn: CrcFn) -> None:
    data = RNG.randbytes(100_000)
    for start in (0, 1, 0xFFFFFFFF, RNG.getrandbits(32)):
        whole = fn(data, start)
        assert whole == ref.crc32c(data, start)
        for cut in (0, 1, 13, 4096, 50_001, len(data)):
            assert fn(data[cut:], fn(data[:cut], start)) == whole


@pytest.mark.parametrize("fn", PATHS)
@pytest.mark.parametrize("size", [1024 * 1024 + 13, 5 * 1024 * 1024 + 7])
def test_large_buffers(fn: CrcFn, size: int) -> None:
    data = RNG.randbytes(size + 3)
    chunk = memoryview(data)[3:]  # unaligned start, odd tail
    assert fn(chunk) == ref.crc32c(chunk)
    assert fn(chunk, 0x12345678) == ref.crc32c(chunk, 0x12345678)


def test_buffer_types(tmp_path: Path) -> None:
    data = RNG.randbytes(200_003)
    expected = ref.crc32c(data)
    assert native.crc32c(data) == expected
    assert native.crc32c(bytearray(data)) == expected
    assert native.crc32c(memoryview(data)) == expected
    assert native.crc32c(memoryview(bytearray(data)).toreadonly()) == expected
    assert native.crc32c(memoryview(data)[5:-5]) == ref.crc32c(data[5:-5])

    words = array.array("I", data[: len(data) // 4 * 4])
    assert native.crc32c(words) == ref.crc32c(words.tobytes())

    arr = np.frombuffer(data[:200_000], dtype=np.uint8).reshape(400, 500).copy()
    assert native.crc32c(arr) == ref.crc32c(arr.tobytes())
    ints = arr.view(np.int32)
    assert native.crc32c(ints) == ref.crc32c(ints.tobytes())
    assert native.crc32c(arr[10:20]) == ref.crc32c(arr[10:20].tobytes())  # contiguous rows

    path = tmp_path / "blob"
    path.write_bytes(data)
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        assert native.crc32c(m) == expected  # read-only buffer
    with path.open("r+b") as f, mmap.mmap(f.fileno(), 0) as m:
        assert native.crc32c(m) == expected


def test_non_contiguous_buffers_are_refused() -> None:
    with pytest.raises(BufferError, match="C-contiguous"):
        native.crc32c(memoryview(bytearray(100))[::2])
    with pytest.raises(BufferError, match="C-contiguous"):
        native.crc32c(np.zeros((10, 10), dtype=np.uint8)[:, 2])


@pytest.mark.parametrize("fn", PATHS)
@pytest.mark.parametrize("bad", ["abc", 5, None, 1.5, [1, 2]])
def test_non_buffers_are_type_errors(fn: CrcFn, bad: object) -> None:
    with pytest.raises(TypeError):
        fn(bad)


@pytest.mark.parametrize("fn", PATHS)
def test_start_value_range(fn: CrcFn) -> None:
    assert fn(b"x", 0xFFFFFFFF) == ref.crc32c(b"x", 0xFFFFFFFF)
    assert fn(b"x", np.uint32(7)) == ref.crc32c(b"x", 7)  # __index__ is enough
    assert fn(b"x", value=True) == ref.crc32c(b"x", 1)
    for bad in (-1, 2**32, 2**70):
        with pytest.raises(OverflowError):
            fn(b"x", bad)
    for bad in (1.0, "1", None, b"1"):
        with pytest.raises(TypeError):
            fn(b"x", bad)


def test_threads_compute_concurrently_and_correctly() -> None:
    buffers = [RNG.randbytes(2 * 1024 * 1024 + i) for i in range(8)]
    expected = [ref.crc32c(b) for b in buffers]
    with ThreadPoolExecutor(max_workers=2) as pool:
        for fn in (native.crc32c, native.crc32c_sw):
            assert list(pool.map(fn, buffers)) == expected


def test_large_calls_release_the_gil() -> None:
    # While a worker is inside one long call (the slow portable path over
    # 32 MiB, tens of milliseconds), this thread must keep running Python.
    # Holding the GIL would freeze it for the whole call; a switch landing
    # just before the call could only make this pass wrongly, never fail.
    data = bytes(32 * 1024 * 1024)
    window: list[float] = []
    result: list[int] = []

    def worker() -> None:
        window.append(time.perf_counter())
        result.append(native.crc32c_sw(data))
        window.append(time.perf_counter())

    ticks: list[float] = []
    thread = threading.Thread(target=worker)
    thread.start()
    while thread.is_alive():
        ticks.append(time.perf_counter())
    thread.join()
    assert result == [ref.crc32c(data)]
    start, end = window
    assert sum(start < t < end for t in ticks) > 10
