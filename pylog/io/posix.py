"""The default I/O backend: one plain syscall per call through ``os``.

``os.pwritev`` and ``os.preadv`` release the GIL for the syscall, so the
event loop thread and a flusher thread do not serialise on each other.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

# Anything with the buffer protocol: bytes, bytearray, memoryview, mmap, numpy.
Buffer = bytes | bytearray | memoryview

# The kernel refuses more iovecs than this in one call (EINVAL).
IOV_MAX: int = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024


def remaining(buffers: Sequence[Buffer], written: int) -> list[memoryview]:
    """The part of ``buffers`` after the first ``written`` bytes (for short writes)."""
    out: list[memoryview] = []
    for b in buffers:
        mv = memoryview(b).cast("B")
        if written >= mv.nbytes:
            written -= mv.nbytes
            continue
        out.append(mv[written:] if written else mv)
        written = 0
    return out


_BYTES_TYPES = (bytes, bytearray)  # len() is the byte size; cheaper than a memoryview


def write_fully(pwritev: Callable[[int, Sequence[Buffer], int], int], fd: int,
                buffers: Sequence[Buffer], offset: int) -> None:
    """Call ``pwritev`` until every byte of ``buffers`` is written (short writes)."""
    total = sum(len(b) if type(b) in _BYTES_TYPES else memoryview(b).nbytes
                for b in buffers)
    while total > 0:
        n = pwritev(fd, buffers, offset)
        if n <= 0:
            # A regular file only writes 0 bytes when the disk is full.
            raise OSError(f"write of {total} bytes at offset {offset} wrote {n}")
        total -= n
        if total:
            offset += n
            buffers = remaining(buffers, n)


class PosixBackend:
    """pwritev / fdatasync / preadv / sendfile, straight to the kernel."""

    name = "posix"

    def pwritev(self, fd: int, buffers: Sequence[Buffer], offset: int) -> int:
        if len(buffers) > IOV_MAX:
            buffers = buffers[:IOV_MAX]  # a short write; write_all sends the rest
        return os.pwritev(fd, buffers, offset)

    def write_all(self, fd: int, buffers: Sequence[Buffer], offset: int) -> None:
        write_fully(self.pwritev, fd, buffers, offset)

    def fdatasync(self, fd: int) -> None:
        os.fdatasync(fd)

    def pread_into(self, fd: int, buf: Buffer, offset: int) -> int:
        return os.preadv(fd, [buf], offset)

    def sendfile(self, out_fd: int, in_fd: int, offset: int, count: int) -> int:
        return os.sendfile(out_fd, in_fd, offset, count)

    def close(self) -> None:
        pass

    def __enter__(self) -> PosixBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
