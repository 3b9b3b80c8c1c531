"""Kafka framing: every request and response is an int32 size, then that many bytes.

:class:`FrameBuffer` is the receive side of an ``asyncio.BufferedProtocol``: the
socket reads straight into its buffers, and each complete request comes out as
its own *writable* ``bytearray`` (the produce path stamps offsets into the
record batches in place, so the frame must be mutable and must not be copied
again).  Small frames are cut out of a shared staging buffer (one small copy);
a frame larger than what arrived so far gets a buffer of its exact size that the
socket fills directly, so a 1 MB produce request is never copied in Python.
After a large frame the next read asks for its size prefix alone: a producer
that sent one large request usually sends another, and its bytes then go
straight into their own buffer instead of through the staging buffer (the
64 KiB copy was 2% of the broker's CPU on 300 KB produce requests).

:class:`FileRegion` is the send side's placeholder for bytes that go from a
segment file to the socket with ``sendfile``: the protocol encoder takes it for
a ``records`` field, counts its length, and leaves it in the list of pieces.
"""

from __future__ import annotations

import os
import struct

from pylog.io import pagecache

try:
    from pylog._native.buffers import alloc_frame as _alloc_frame
except ImportError:  # no compiled extensions: zero-filled, otherwise the same
    _alloc_frame = bytearray

_SIZE = struct.Struct(">i")
STAGING_BYTES = 64 * 1024


class FrameTooLargeError(Exception):
    """A size prefix over ``socket.request.max.bytes`` (or negative)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"request of {size} bytes is larger than socket.request.max.bytes="
                         f"{limit} (or invalid)")
        self.size = size
        self.limit = limit


class FrameBuffer:
    """Receive buffers and frame splitting for one connection."""

    __slots__ = ("max_size", "_stage", "_view", "_start", "_end", "_frame", "_fill",
                 "_expect_large")

    def __init__(self, max_size: int) -> None:
        self.max_size = max_size
        self._stage = bytearray(STAGING_BYTES)
        self._view = memoryview(self._stage)
        self._start = 0  # first unconsumed byte in the staging buffer
        self._end = 0    # end of received bytes in the staging buffer
        self._frame: bytearray | None = None  # a large frame being filled directly
        self._fill = 0
        self._expect_large = False  # the last frame did not fit the staging buffer

    def get_buffer(self) -> memoryview:
        """Where the next bytes from the socket go."""
        frame = self._frame
        if frame is not None:
            return memoryview(frame)[self._fill:]
        if self._expect_large and self._start == self._end == 0:
            return self._view[:4]  # the size prefix; the frame then gets its own buffer
        if self._end == len(self._stage):
            # Move the partial header to the front; same-size slice assignment
            # never resizes, so the exported views stay valid.
            n = self._end - self._start
            self._stage[:n] = self._stage[self._start:self._end]
            self._start, self._end = 0, n
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> list[bytearray]:
        """Account for ``nbytes`` received; return the frames now complete, in
        order.  Raises FrameTooLargeError before allocating for a bad size."""
        frames: list[bytearray] = []
        if self._frame is not None:
            self._fill += nbytes
            if self._fill < len(self._frame):
                return frames
            frames.append(self._frame)
            self._expect_large = len(self._frame) >= STAGING_BYTES
            self._frame = None
            return frames
        self._end += nbytes
        stage, start, end = self._stage, self._start, self._end
        while end - start >= 4:
            size, = _SIZE.unpack_from(stage, start)
            if size < 0 or size > self.max_size:
                raise FrameTooLargeError(size, self.max_size)
            have = end - start - 4
            if have >= size:
                frames.append(stage[start + 4:start + 4 + size])  # bytearray: a copy
                start += 4 + size
                self._expect_large = False
                continue
            # Incomplete: give the rest its own buffer and let the socket fill it.
            frame = _alloc_frame(size)  # not zero-filled: the socket fills it all
            # Through a memoryview: a bytearray slice assigned from another
            # object's buffer is first copied into a temporary bytearray.
            memoryview(frame)[:have] = self._view[start + 4:end]
            self._frame, self._fill = frame, have
            start = end = 0
            break
        if start == end:
            start = end = 0
        self._start, self._end = start, end
        return frames


class FileRegion(bytes):
    """``length`` bytes of file ``fd`` from ``position``, to be sent with sendfile.

    A ``bytes`` subclass whose value is empty but whose ``len`` is the region's
    length: the generated encoders accept it wherever a ``records`` field goes,
    write the right size prefix and append the object itself to the pieces, and
    the connection sends it from the file.  ``source`` keeps the segment (and so
    its open file) alive until the bytes are on the socket.
    """

    fd: int
    position: int
    length: int
    source: object
    owned: bool  # fd is a dup this region closes (see ``pin``)

    def __new__(cls, fd: int, position: int, length: int, source: object = None,
                owned: bool = False) -> FileRegion:
        self = super().__new__(cls)
        self.fd = fd
        self.position = position
        self.length = length
        self.source = source
        self.owned = owned
        return self

    def pin(self) -> FileRegion:
        """A region on its own dup of the fd, for a send that waits: deleting
        the topic closes the segment's fd, and the number could be reused by
        another file before the send runs."""
        if self.owned:
            return self
        return FileRegion(os.dup(self.fd), self.position, self.length, self.source, True)

    def is_cached(self) -> bool:
        """Whether sending the region cannot block on the disk. A region of a
        live segment asks the segment (a cheap sampled check on its mapping);
        a pinned one (its segment may be closed by now) asks the kernel about
        the whole range through its own fd."""
        if not self.owned:
            check = getattr(self.source, "range_is_cached", None)
            if check is not None:
                return check(self.position, self.length)
        return pagecache.is_cached(self.fd, self.position, self.length)

    def release(self) -> None:
        if self.owned:
            self.owned = False
            os.close(self.fd)

    def __len__(self) -> int:
        return self.length

    def fileno(self) -> int:
        return self.fd

    def __repr__(self) -> str:
        return f"FileRegion(fd={self.fd}, position={self.position}, length={self.length})"


def frame_parts(parts: list) -> list:
    """Size-prefix a response given as pieces (bytes-likes and FileRegions),
    merging neighbouring byte pieces so each write is one call."""
    total = sum(map(len, parts))
    out: list = []
    run: list = [_SIZE.pack(total)]
    for piece in parts:
        if type(piece) is FileRegion:
            out.append(b"".join(run))
            out.append(piece)
            run = []
        else:
            run.append(piece)
    if run:
        out.append(b"".join(run))
    return out


def pin_parts(parts: list) -> list:
    """``parts`` with every FileRegion pinned (see FileRegion.pin)."""
    return [p.pin() if type(p) is FileRegion else p for p in parts]


def release_parts(parts: object) -> None:
    if type(parts) is list:
        for p in parts:
            if type(p) is FileRegion:
                p.release()
