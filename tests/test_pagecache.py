"""Page-cache helpers on a real file: residency, write-back, dropping."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from log_helpers import fs_type

from pylog.io import pagecache as pc

SIZE = 4 << 20  # 1024 pages of 4 KiB


@pytest.fixture
def fd(tmp_path: Path) -> Iterator[int]:
    f = os.open(tmp_path / "seg.log", os.O_RDWR | os.O_CREAT, 0o644)
    os.write(f, os.urandom(SIZE))
    os.fsync(f)
    yield f
    os.close(f)



def test_written_file_is_cached(fd: int) -> None:
    assert pc.cached_fraction(fd) == 1.0
    assert pc.is_cached(fd, 0, SIZE)
    assert pc.resident_pages(fd) == (SIZE // pc.PAGE_SIZE, SIZE // pc.PAGE_SIZE)


def test_drop_then_read_back(fd: int, tmp_path: Path) -> None:
    pc.drop_cache(fd)
    dropped = pc.cached_fraction(fd)
    fstype = fs_type(tmp_path)
    if dropped > 0.5:
        # tmpfs/ramfs pages are the file itself, and some overlay setups ignore
        # FADV_DONTNEED: only this assertion depends on a disk-backed fs.
        pytest.skip(f"{fstype} at {tmp_path} keeps pages after POSIX_FADV_DONTNEED "
                    f"(cached fraction {dropped:.2f})")
    assert dropped < 0.1
    assert not pc.is_cached(fd, 0, SIZE)
    os.pread(fd, SIZE // 2, 0)
    assert pc.cached_fraction(fd, 0, SIZE // 2) == 1.0
    assert pc.is_cached(fd, 0, SIZE // 2)
    os.pread(fd, SIZE, 0)
    assert pc.cached_fraction(fd) == 1.0


def test_drop_a_range_only(fd: int) -> None:
    pc.drop_cache(fd, 0, SIZE // 2)
    if pc.cached_fraction(fd, 0, SIZE // 2) > 0.5:
        pytest.skip("this filesystem keeps pages after POSIX_FADV_DONTNEED")
    assert pc.cached_fraction(fd, SIZE // 2, SIZE // 2) == 1.0
    assert 0.4 < pc.cached_fraction(fd) < 0.6


def test_writeback_starts_without_waiting(fd: int) -> None:
    os.pwrite(fd, b"x" * 65536, 0)  # dirty pages
    pc.writeback(fd)
    pc.writeback(fd, 4096, 8192)
    os.fdatasync(fd)
    assert pc.cached_fraction(fd) == 1.0  # write-back does not evict


def test_background_writeback_outlives_the_callers_fd(tmp_path: Path) -> None:
    # The log rolls a segment and may close it (topic deleted) before the
    # worker runs: the worker writes back through its own dup of the fd.
    path = tmp_path / "rolled"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    os.pwrite(fd, b"y" * 65536, 0)
    done = pc.writeback_in_background(fd)
    os.close(fd)
    assert done.result(timeout=30) is None
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        assert os.pread(fd, 65536, 0) == b"y" * 65536
    finally:
        os.close(fd)


def test_background_writeback_of_a_bad_fd_raises_at_once() -> None:
    with pytest.raises(OSError):
        pc.writeback_in_background(987654)


def test_unaligned_and_partial_ranges(fd: int) -> None:
    # 2 bytes straddling a page boundary touch two pages.
    assert pc.resident_pages(fd, pc.PAGE_SIZE - 1, 2) == (2, 2)
    assert pc.resident_pages(fd, 10, 1) == (1, 1)


def test_empty_and_past_eof_ranges(fd: int, tmp_path: Path) -> None:
    assert pc.resident_pages(fd, SIZE + 100, 10) == (0, 0)
    assert pc.cached_fraction(fd, SIZE + 100, 10) == 1.0  # nothing to read from disk
    assert pc.is_cached(fd, SIZE, 0)
    # A range running past EOF is clamped to the file.
    assert pc.resident_pages(fd, SIZE - 4096, 1 << 30) == (1, 1)
    empty = os.open(tmp_path / "empty", os.O_RDWR | os.O_CREAT)
    try:
        assert pc.cached_fraction(empty) == 1.0
    finally:
        os.close(empty)


def test_negative_range_rejected(fd: int) -> None:
    with pytest.raises(ValueError):
        pc.cached_fraction(fd, -1, 10)


def test_bad_fd_raises() -> None:
    with pytest.raises(OSError):
        pc.writeback(987654)
