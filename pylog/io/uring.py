"""The io_uring I/O backend, through pyuring 0.3.0.

pyuring's own methods submit one SQE per ``io_uring_enter`` (``write_async``)
or copy ``bytes`` into ctypes arrays (``writev``).  To batch for real, this
module fills SQEs itself: ``io_uring_get_sqe`` hands back a slot of the
mapped submission ring, we write the 64-byte kernel ABI struct into it, and
one ``io_uring_submit_and_wait`` submits every SQE of a call and waits for
them.  The SQE layout is the kernel's (stable ABI); the only pyuring internals
used are the liburing handle (``UringCtx._ctx``, a ``struct io_uring *``) and
its ``CDLL`` (``UringCtx._lib``), checked at construction so another pyuring
falls back to posix instead of misbehaving.

``sendfile`` stays ``os.sendfile``: io_uring has no sendfile opcode, and
splice through a pipe would cost two SQEs and a pipe per fetch for nothing.
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import struct
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyuring

from pylog.io.posix import IOV_MAX, Buffer, write_fully

# struct io_uring_sqe (include/uapi/linux/io_uring.h): opcode, flags, ioprio,
# fd, off, addr, len, op flags, user_data, buf_index, personality,
# splice_fd_in, addr3, pad.
_SQE = struct.Struct("<BBHiQQIIQHHiQQ")
assert _SQE.size == 64

_OP_WRITE = pyuring.IORING_OP_WRITE
_OP_WRITEV = pyuring.IORING_OP_WRITEV
_OP_READ = pyuring.IORING_OP_READ
_OP_FSYNC = pyuring.IORING_OP_FSYNC
_FSYNC_DATASYNC = pyuring.IORING_FSYNC_DATASYNC
# Chained SQEs run in order and a short write cancels the rest (-ECANCELED):
# the same prefix semantics as one big pwritev.
_IOSQE_IO_LINK = pyuring.IOSQE_IO_LINK

# CPython keeps a bytes object's data at a fixed offset from the object: measure
# it once rather than assume it, then a bytes buffer's address is id() + offset.
_probe = b"pylog"
_BYTES_DATA_OFFSET = ctypes.cast(ctypes.c_char_p(_probe), ctypes.c_void_p).value - id(_probe)


# SQEs per linked chain (the ring has 256 entries by default); a longer
# buffer list is written in several calls.
_MAX_CHAIN_SQES = 64
_MAX_CHAIN_BUFFERS = _MAX_CHAIN_SQES * IOV_MAX


class UringUnavailable(RuntimeError):
    """io_uring cannot serve this process (kernel, opcode or pyuring build)."""


def _address(buf: Buffer) -> tuple[int, int, Any]:
    """(address, length, object to keep alive) of a contiguous buffer."""
    if type(buf) is bytes:
        return id(buf) + _BYTES_DATA_OFFSET, len(buf), buf
    mv = memoryview(buf)
    if not mv.c_contiguous:
        raise ValueError("io_uring buffers must be contiguous")
    n = mv.nbytes
    if n == 0:
        return 0, 0, None
    if not mv.readonly:
        arr = ctypes.c_char.from_buffer(mv)
        return ctypes.addressof(arr), n, (mv, arr)
    # Read-only and not bytes (a slice of bytes, a mapped file): numpy reads
    # the address through the buffer protocol without copying.
    a = np.frombuffer(mv.cast("B"), dtype=np.uint8)
    return a.__array_interface__["data"][0], n, a


class UringCompletion:
    """Handle of a submitted operation: ``done()`` polls, ``result()`` waits."""

    __slots__ = ("_backend", "_id", "_res")

    def __init__(self, backend: UringBackend, op_id: int) -> None:
        self._backend = backend
        self._id = op_id
        self._res: int | None = None

    def done(self) -> bool:
        if self._res is None:
            self._res = self._backend._take(self._id, block=False)
        return self._res is not None

    def result(self) -> int:
        """The operation's result; raises OSError when the kernel reported one."""
        if self._res is None:
            self._res = self._backend._take(self._id, block=True)
        if self._res < 0:
            raise OSError(-self._res, os.strerror(-self._res))
        return self._res


class UringBackend:
    """Batched writes, fdatasync and cold reads through one io_uring ring.

    Thread-safe: a lock guards the ring; waits for slow completions (fsync)
    happen outside the lock, so another thread keeps writing meanwhile.
    """

    name = "io_uring"

    def __init__(self, entries: int = 256) -> None:
        if entries < _MAX_CHAIN_SQES:
            raise ValueError(f"entries must be >= {_MAX_CHAIN_SQES}")
        self._ctx = pyuring.UringCtx(entries=entries, single_thread_check=False)
        try:
            ring = getattr(self._ctx, "_ctx", None)
            lib = getattr(self._ctx, "_lib", None)
            if not ring or lib is None or not hasattr(lib, "io_uring_get_sqe"):
                raise UringUnavailable(
                    f"pyuring {pyuring.__version__} does not expose the liburing ring")
            for op, name in ((_OP_WRITE, "WRITE"), (_OP_WRITEV, "WRITEV"), (_OP_READ, "READ"),
                             (_OP_FSYNC, "FSYNC")):
                if not self._ctx.probe_opcode_supported(op):
                    raise UringUnavailable(f"kernel lacks IORING_OP_{name}")
        except BaseException:
            self._ctx.close()
            raise
        self._ring = ctypes.c_void_p(ring)
        self._get_sqe = lib.io_uring_get_sqe
        self._get_sqe.argtypes = [ctypes.c_void_p]
        self._get_sqe.restype = ctypes.c_void_p
        self._submit = lib.io_uring_submit
        self._submit.argtypes = [ctypes.c_void_p]
        self._submit.restype = ctypes.c_int
        self._submit_and_wait = lib.io_uring_submit_and_wait
        self._submit_and_wait.argtypes = [ctypes.c_void_p, ctypes.c_uint]
        self._submit_and_wait.restype = ctypes.c_int
        self._peek = lib.uring_peek_completion  # peek + cqe_seen, never blocks
        self._cqe_data = ctypes.c_uint64()
        self._cqe_res = ctypes.c_int()
        self._cqe_args = (ctypes.byref(self._cqe_data), ctypes.byref(self._cqe_res))
        self._lock = threading.Lock()
        self._next_id = 1
        self._keep: dict[int, Any] = {}    # op id -> memory the kernel may still touch
        self._done: dict[int, int] = {}    # op id -> cqe.res, not yet claimed
        self._closed = False

    # -- ring plumbing (call with the lock held) ----------------------------

    def _queue(self, opcode: int, fd: int, offset: int, addr: int, length: int,
               op_flags: int, sqe_flags: int, keep: Any) -> int:
        if self._closed:  # liburing would dereference the freed ring
            raise OSError(errno.EBADF, "io_uring backend is closed")
        sqe = self._get_sqe(self._ring)
        if not sqe:  # submission ring full: hand the queued SQEs to the kernel
            self._check(self._submit(self._ring), "io_uring_submit")
            sqe = self._get_sqe(self._ring)
            if not sqe:
                raise OSError(errno.EBUSY, "io_uring submission queue full")
        op_id = self._next_id
        self._next_id += 1
        ctypes.memmove(sqe, _SQE.pack(opcode, sqe_flags, 0, fd, offset, addr, length,
                                      op_flags, op_id, 0, 0, 0, 0, 0), 64)
        self._keep[op_id] = keep
        return op_id

    def _drain(self, want: set[int] | None = None) -> None:
        """Move ready completions to ``_done``; stop early once ``want`` is in."""
        peek, args, ring, done = self._peek, self._cqe_args, self._ring, self._done
        while peek(ring, *args) > 0:
            op_id = self._cqe_data.value
            done[op_id] = self._cqe_res.value
            self._keep.pop(op_id, None)
            if want is not None:
                want.discard(op_id)
                if not want:
                    return  # saves the empty peek (a ctypes call) on the hot path

    @staticmethod
    def _check(ret: int, what: str) -> int:
        if ret < 0:
            raise OSError(-ret, f"{what}: {os.strerror(-ret)}")
        return ret

    def _take(self, op_id: int, block: bool) -> int | None:
        """Claim one operation's result, waiting for it when ``block``."""
        poller = None
        while True:
            with self._lock:
                if op_id not in self._done:
                    self._drain()
                if op_id in self._done:
                    return self._done.pop(op_id)
            if not block:
                return None
            # The ring fd turns readable when a CQE is posted.  Another thread
            # may drain ours between the check and the poll: the short timeout
            # bounds that lost wake-up instead of a condition variable.
            if poller is None:  # one per waiter: poll objects are not thread-safe
                poller = select.poll()
                poller.register(self._ctx.ring_fd, select.POLLIN)
            poller.poll(1)

    def _run(self, ops: list[tuple]) -> list[int]:
        """Queue ``ops`` as one linked chain, submit and wait once, return results."""
        with self._lock:
            ids = []
            last = len(ops) - 1
            for i, (opcode, fd, off, addr, n, op_flags, keep) in enumerate(ops):
                link = _IOSQE_IO_LINK if i < last else 0
                ids.append(self._queue(opcode, fd, off, addr, n, op_flags, link, keep))
            self._check(self._submit_and_wait(self._ring, len(ids)),
                        "io_uring_submit_and_wait")
            self._drain(set(ids))
            done = self._done
            if all(i in done for i in ids):
                return [done.pop(i) for i in ids]
        return [self._take(i, block=True) for i in ids]  # type: ignore[misc]

    # -- IOBackend ----------------------------------------------------------

    def _write(self, fd: int, buffers: Sequence[Buffer], offset: int) -> tuple[int, int]:
        """(bytes written, bytes asked): one linked chain of SQEs for all buffers."""
        if len(buffers) == 1:  # the common append: one WRITE, no iovec array
            addr, size, keep = _address(buffers[0])
            if size == 0:
                return 0, 0
            ops = [(_OP_WRITE, fd, offset, addr, size, 0, keep)]
            sizes = [size]
        else:
            ops, sizes = [], []
            pos = offset
            # One WRITEV SQE per IOV_MAX buffers.
            for start in range(0, len(buffers), IOV_MAX):
                flat: list[int] = []
                keep = []
                size = 0
                for b in buffers[start:start + IOV_MAX]:
                    addr, n, k = _address(b)
                    flat += (addr, n)
                    keep.append(k)
                    size += n
                iov = struct.pack(f"<{len(flat)}Q", *flat)
                keep.append(iov)
                ops.append((_OP_WRITEV, fd, pos, id(iov) + _BYTES_DATA_OFFSET,
                            len(flat) // 2, 0, keep))
                sizes.append(size)
                pos += size
        asked = sum(sizes)
        written = 0
        for res, size in zip(self._run(ops), sizes, strict=True):
            if res == -errno.ECANCELED:
                break  # an earlier SQE of the chain came up short
            if res < 0:
                if written:
                    break  # report the prefix, as pwritev would
                raise OSError(-res, f"io_uring write: {os.strerror(-res)}")
            written += res
            if res < size:
                break
        return written, asked

    def pwritev(self, fd: int, buffers: Sequence[Buffer], offset: int) -> int:
        if not buffers:
            return 0
        if len(buffers) > _MAX_CHAIN_BUFFERS:
            # A chain must fit the submission ring; the rest is a short write.
            buffers = buffers[:_MAX_CHAIN_BUFFERS]
        return self._write(fd, buffers, offset)[0]

    def write_all(self, fd: int, buffers: Sequence[Buffer], offset: int) -> None:
        write_fully(self.pwritev, fd, buffers, offset)

    def fdatasync(self, fd: int) -> None:
        self.fdatasync_async(fd).result()

    def fdatasync_async(self, fd: int) -> UringCompletion:
        """Start IORING_OP_FSYNC(DATASYNC) and return at once; ``.result()`` waits."""
        with self._lock:
            op_id = self._queue(_OP_FSYNC, fd, 0, 0, 0, _FSYNC_DATASYNC, 0, None)
            self._check(self._submit(self._ring), "io_uring_submit")
        return UringCompletion(self, op_id)

    def pread_into(self, fd: int, buf: Buffer, offset: int) -> int:
        mv = memoryview(buf)
        if mv.readonly:
            raise TypeError("pread_into needs a writable buffer")
        addr, n, keep = _address(mv)
        if n == 0:
            return 0
        (res,) = self._run([(_OP_READ, fd, offset, addr, n, 0, keep)])
        return self._check(res, "io_uring read")

    def sendfile(self, out_fd: int, in_fd: int, offset: int, count: int) -> int:
        return os.sendfile(out_fd, in_fd, offset, count)

    @property
    def ring_fd(self) -> int:
        """Readable when completions are waiting: register it with an event loop."""
        return self._ctx.ring_fd

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._keep:  # in-flight ops still own memory: let them finish
                self._check(self._submit_and_wait(self._ring, len(self._keep)),
                            "io_uring_submit_and_wait")
                self._drain()
            self._ctx.close()

    def __enter__(self) -> UringBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
