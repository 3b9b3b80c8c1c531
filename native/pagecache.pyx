"""Page-cache syscalls the ``os`` module lacks: sync_file_range(2), mincore(2),
fallocate(2) with FALLOC_FL_KEEP_SIZE.

Both run without the GIL: write-back of a large range and the residency scan
of a 1 GiB segment (a quarter million pages) must not stall the event loop.
"""

from libc.errno cimport ENOSPC, ENOSYS, EOPNOTSUPP, errno
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc

cdef extern from *:
    """
    #include <fcntl.h>
    #include <sys/mman.h>
    #include <unistd.h>
    """
    int c_sync_file_range "sync_file_range" (int fd, int64_t offset, int64_t nbytes,
                                             unsigned int flags) nogil
    int c_fallocate "fallocate" (int fd, int mode, int64_t offset, int64_t length) nogil
    int FALLOC_FL_KEEP_SIZE
    int SYNC_FILE_RANGE_WAIT_BEFORE_C "SYNC_FILE_RANGE_WAIT_BEFORE"
    int SYNC_FILE_RANGE_WRITE_C "SYNC_FILE_RANGE_WRITE"
    int SYNC_FILE_RANGE_WAIT_AFTER_C "SYNC_FILE_RANGE_WAIT_AFTER"
    void *mmap(void *addr, size_t length, int prot, int flags, int fd, int64_t offset) nogil
    int munmap(void *addr, size_t length) nogil
    int mincore(void *addr, size_t length, unsigned char *vec) nogil
    long sysconf(int name) nogil
    int _SC_PAGESIZE
    int PROT_READ
    int MAP_SHARED
    void *MAP_FAILED

SYNC_FILE_RANGE_WAIT_BEFORE: int = SYNC_FILE_RANGE_WAIT_BEFORE_C
SYNC_FILE_RANGE_WRITE: int = SYNC_FILE_RANGE_WRITE_C
SYNC_FILE_RANGE_WAIT_AFTER: int = SYNC_FILE_RANGE_WAIT_AFTER_C
PAGE_SIZE: int = sysconf(_SC_PAGESIZE)


cdef _raise(int err, str what):
    import os
    raise OSError(err, f"{what}: {os.strerror(err)}")


def sync_file_range(int fd, int64_t offset, int64_t nbytes, unsigned int flags):
    """sync_file_range(2); ``nbytes`` 0 means through the end of the file."""
    cdef int rc
    with nogil:
        rc = c_sync_file_range(fd, offset, nbytes, flags)
    if rc != 0:
        _raise(errno, "sync_file_range")


def reserve(int fd, int64_t offset, int64_t length):
    """Allocate disk blocks for ``[offset, offset + length)`` without changing
    the file size (fallocate(2) with FALLOC_FL_KEEP_SIZE).

    Writes into blocks allocated ahead skip the filesystem's per-block
    delayed-allocation work (ext4: ~30% of the CPU of a page-cache append).
    Returns False where the filesystem cannot (EOPNOTSUPP, ENOSYS) or the disk
    is full (ENOSPC: the write itself reports that); raises on other errors.
    """
    cdef int rc
    with nogil:
        rc = c_fallocate(fd, FALLOC_FL_KEEP_SIZE, offset, length)
    if rc == 0:
        return True
    if errno in (EOPNOTSUPP, ENOSYS, ENOSPC):
        return False
    _raise(errno, "fallocate")


def resident_pages(int fd, int64_t offset, int64_t length):
    """(resident, total) pages of the file range ``[offset, offset + length)``.

    The caller clamps the range to the file size: mincore(2) on pages past
    EOF says nothing useful.  Maps the range read-only (nothing is touched,
    so nothing is faulted in), asks mincore, unmaps.
    """
    cdef int64_t page = PAGE_SIZE
    cdef int64_t start = offset - offset % page
    cdef size_t span = <size_t>(offset + length - start)
    cdef size_t npages = (span + page - 1) // page
    cdef void *addr
    cdef unsigned char *vec
    cdef size_t i, resident = 0
    cdef int rc = 0, err = 0
    if length <= 0:
        return 0, 0
    vec = <unsigned char *>malloc(npages)
    if vec == NULL:
        raise MemoryError()
    with nogil:
        addr = mmap(NULL, span, PROT_READ, MAP_SHARED, fd, start)
        if addr == MAP_FAILED:
            rc = -1
            err = errno
        else:
            rc = mincore(addr, span, vec)
            err = errno
            munmap(addr, span)
            if rc == 0:
                for i in range(npages):
                    resident += vec[i] & 1
    free(vec)
    if rc != 0:
        _raise(err, "mmap/mincore")
    return resident, npages



def mapped_all_resident(mapping, int64_t offset, int64_t length, int probes=3) -> bool:
    """Whether the pages of ``[offset, offset + length)`` of an existing
    page-aligned mapping (an ``mmap.mmap``) are in the page cache.

    The fetch path asks this for each partition of each fetch, so it must be
    cheap: no mmap/munmap per call, and mincore costs ~70 ns a page (the
    kernel looks each one up), ~18 us for 1 MiB. So beyond ``probes`` pages
    it samples: the first and last page and evenly spaced ones between
    (``probes`` <= 0 checks every page). Data goes cold a segment region at a
    time (eviction, restart), which a sample sees; a miss costs one blocking
    read, not a wrong answer. The range is clamped to the mapping.
    """
    cdef const unsigned char[::1] view = mapping
    cdef int64_t page = PAGE_SIZE
    cdef int64_t size = view.shape[0]
    cdef int64_t start, end, npages, i, k, step
    cdef const unsigned char *base
    cdef unsigned char vec[256]
    cdef int rc = 0, err = 0
    cdef bint all_in = True
    if offset < 0:
        offset = 0
    end = min(offset + length, size)
    if end <= offset:
        return True
    base = &view[0]
    start = offset - offset % page
    npages = (end - start + page - 1) // page
    with nogil:
        if probes <= 0 or npages <= probes:
            # Whole range, 256 pages per call.
            i = 0
            while all_in and i < npages:
                k = min(npages - i, 256)
                rc = mincore(<void *>(base + start + i * page), <size_t>(k * page), vec)
                if rc != 0:
                    err = errno
                    break
                for step in range(k):
                    if not (vec[step] & 1):
                        all_in = False
                        break
                i += k
        else:
            for k in range(probes):
                i = k * (npages - 1) // (probes - 1) if probes > 1 else 0
                rc = mincore(<void *>(base + start + i * page), <size_t>page, vec)
                if rc != 0:
                    err = errno
                    break
                if not (vec[0] & 1):
                    all_in = False
                    break
    if rc != 0:
        _raise(err, "mincore")
    return all_in
