"""Page-cache control for log segments.

Kafka leaves caching to the kernel; pylog nudges it.  A rolled segment gets
its write-back started early (``writeback``) so a later fsync or memory
pressure does not find a gigabyte of dirty pages at once, and data no reader
needs is dropped (``drop_cache``) so it stops evicting the hot tail; what
falls far enough behind a log's end is written back and dropped as appends go
on (``drop_behind_in_background``, see :mod:`pylog.log.drop_behind`).  The
fetch path asks ``is_cached`` to decide whether a sendfile could block on disk.

Ranges: ``length`` 0 means "to the end of the file", as for the syscalls.
"""

from __future__ import annotations

import mmap
import os
import threading
from collections.abc import Callable
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


_executors: dict[str, ThreadPoolExecutor] = {}
_executors_lock = threading.Lock()


def _in_background(pool: str, fd: int, job: Callable[[int], None]) -> Future:
    """``job(dup of fd)`` on the worker thread of ``pool`` (one thread each).

    The dup keeps the file open even if the segment is closed or deleted
    before the worker gets to it; it is closed when the job ends.
    """
    with _executors_lock:
        executor = _executors.get(pool)
        if executor is None:
            executor = _executors[pool] = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=f"pylog-{pool}")
    own = os.dup(fd)

    def run() -> None:
        try:
            job(own)
        finally:
            os.close(own)

    return executor.submit(run)


def writeback_in_background(fd: int, offset: int = 0, length: int = 0) -> Future:
    """:func:`writeback` on a worker thread, on its own dup of ``fd``.

    Starting write-back of a rolled 1 GiB segment submits every dirty page for
    I/O and takes hundreds of milliseconds of the caller's time: on the event
    loop that stalled every connection.  Kafka likewise flushes a rolled
    segment from a background thread.
    """
    return _in_background("writeback", fd, lambda own: writeback(own, offset, length))


def write_back_and_drop(fd: int, offset: int, length: int) -> None:
    """Write back a range, wait for it, then evict it.

    ``POSIX_FADV_DONTNEED`` only evicts clean pages (it merely starts write-back
    of dirty ones), so the range is written and waited for first
    (``sync_file_range`` WAIT_BEFORE | WRITE | WAIT_AFTER: no metadata, not a
    durability point).  Pages mapped by a reader stay.
    """
    flags = (_native.SYNC_FILE_RANGE_WAIT_BEFORE | _native.SYNC_FILE_RANGE_WRITE
             | _native.SYNC_FILE_RANGE_WAIT_AFTER)
    _native.sync_file_range(fd, offset, length, flags)
    os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)


def drop_behind_in_background(fd: int, offset: int, length: int) -> Future:
    """:func:`write_back_and_drop` on its own worker thread (it waits for the
    disk), on a dup of ``fd``; see :mod:`pylog.log.drop_behind`."""
    return _in_background("drop-behind", fd,
                          lambda own: write_back_and_drop(own, offset, length))


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
