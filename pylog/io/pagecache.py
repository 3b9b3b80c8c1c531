"""Page-cache control for log segments.

Kafka leaves caching to the kernel; pylog nudges it.  A rolled segment gets
its write-back started early (``writeback``) so a later fsync or memory
pressure does not find a gigabyte of dirty pages at once, and data no reader
needs is dropped (``drop_cache``) so it stops evicting the hot tail.  The
fetch path asks ``is_cached`` to decide whether a sendfile could block on disk.

Ranges: ``length`` 0 means "to the end of the file", as for the syscalls.
"""

from __future__ import annotations

import mmap
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from pylog._native import pagecache as _native

PAGE_SIZE: int = _native.PAGE_SIZE


def writeback(fd: int, offset: int = 0, length: int = 0) -> None:
    """Start write-back of dirty pages in the range and return without waiting.

    Not a durability point (no metadata, no wait): ``fdatasync`` is.
    """
    _native.sync_file_range(fd, offset, length, _native.SYNC_FILE_RANGE_WRITE)


def reserve(fd: int, offset: int, length: int) -> bool:
    """Allocate the file's disk blocks for the range without changing its size
    (fallocate with FALLOC_FL_KEEP_SIZE): appends into them then skip the
    filesystem's per-block allocation work.  False where the filesystem cannot
    or the disk is full; ``ftruncate`` to the current size gives them back."""
    return _native.reserve(fd, offset, length)


_background: ThreadPoolExecutor | None = None
_background_lock = threading.Lock()


def writeback_in_background(fd: int, offset: int = 0, length: int = 0) -> Future:
    """:func:`writeback` on a worker thread, on its own dup of ``fd``.

    Starting write-back of a rolled 1 GiB segment submits every dirty page for
    I/O and takes hundreds of milliseconds of the caller's time: on the event
    loop that stalled every connection.  Kafka likewise flushes a rolled
    segment from a background thread.  The dup keeps the file open even if
    the segment is closed or deleted before the worker gets to it.
    """
    global _background
    with _background_lock:
        if _background is None:
            _background = ThreadPoolExecutor(max_workers=1,
                                             thread_name_prefix="pylog-writeback")
    own = os.dup(fd)

    def run() -> None:
        try:
            writeback(own, offset, length)
        finally:
            os.close(own)

    return _background.submit(run)


def drop_cache(fd: int, offset: int = 0, length: int = 0) -> None:
    """Ask the kernel to evict the range's clean pages from the page cache.

    Dirty pages are not dropped: call ``writeback``/``fdatasync`` first.
    """
    os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)


def _clamp(fd: int, offset: int, length: int) -> tuple[int, int]:
    size = os.fstat(fd).st_size
    if offset < 0 or length < 0:
        raise ValueError("offset and length must be >= 0")
    end = size if length == 0 else min(size, offset + length)
    return offset, max(0, end - offset)


def resident_pages(fd: int, offset: int = 0, length: int = 0) -> tuple[int, int]:
    """(resident, total) pages of the range, clamped to the file's size."""
    offset, length = _clamp(fd, offset, length)
    return _native.resident_pages(fd, offset, length)


def cached_fraction(fd: int, offset: int = 0, length: int = 0) -> float:
    """Share of the range's pages that are in the page cache, 0.0 to 1.0.

    An empty range (length past EOF, empty file) reads nothing from disk,
    so it counts as fully cached: 1.0.
    """
    resident, total = resident_pages(fd, offset, length)
    return resident / total if total else 1.0


def mapped_all_resident(mapping: mmap.mmap, offset: int, length: int) -> bool:
    """Whether every page of a range of an existing file mapping is cached
    (no mmap per call: cheap enough for each partition of each fetch)."""
    return _native.mapped_all_resident(mapping, offset, length)


def is_cached(fd: int, offset: int = 0, length: int = 0) -> bool:
    """True when reading the range will not touch the disk (every page resident)."""
    resident, total = resident_pages(fd, offset, length)
    return resident == total
