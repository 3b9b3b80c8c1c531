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
Every frame's bytes count against the node's
:class:`~pylog.net.request_queue.RequestQueue` until the connection hands the
frame back; a frame that needs its own buffer while that is exhausted waits
(``blocked``) with the connection not reading.

The staging buffer is shared by every connection of a thread (the event
loop's): a protocol's ``get_buffer`` and ``buffer_updated`` always come in
pairs, with nothing of another connection in between, and every frame leaves
it as a copy or in a buffer of its own.  What a connection keeps between
reads is at most 3 bytes of a size prefix (or, blocked, what arrived of the
waiting frame, at most the staging buffer's size).  A buffer per connection made each
idle connection cost 64 KiB: 5000 connections took 330 MB of the node's
memory, which it kept after they closed.

:class:`FileRegion` is the send side's placeholder for bytes that go from a
segment file to the socket with ``sendfile``: the protocol encoder takes it for
a ``records`` field, counts its length, and leaves it in the list of pieces.
"""

from __future__ import annotations

import os
import struct
import threading

from pylog.io import pagecache
from pylog.net.request_queue import RequestQueue

try:
    from pylog._native.buffers import alloc_frame as _alloc_frame
except ImportError:  # no compiled extensions: zero-filled, otherwise the same
    _alloc_frame = bytearray

_SIZE = struct.Struct(">i")
STAGING_BYTES = 64 * 1024
_EMPTY = b""


class _Staging(threading.local):
    """The staging buffer of the current thread (one per event loop)."""

    def __init__(self) -> None:
        self.buffer = bytearray(STAGING_BYTES)
        self.view = memoryview(self.buffer)


_staging = _Staging()


class FrameTooLargeError(Exception):
    """A size prefix over ``socket.request.max.bytes`` (or negative)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"request of {size} bytes is larger than socket.request.max.bytes="
                         f"{limit} (or invalid)")
        self.size = size
        self.limit = limit


class FrameBuffer:
    """Receive buffers and frame splitting for one connection."""

    __slots__ = ("max_size", "queue", "blocked", "_stage", "_view", "_rest", "_frame",
                 "_fill", "_expect_large")

    def __init__(self, max_size: int, queue: RequestQueue | None = None) -> None:
        self.max_size = max_size
        # Every frame's bytes are counted here from the moment it has a buffer
        # until the connection hands it back (RequestQueue.release).
        self.queue = queue if queue is not None else RequestQueue()
        # The queue's bytes ran out when a frame needed a buffer of its own:
        # its start waits in _rest, and the connection stops reading (unblock).
        self.blocked = False
        staging = _staging  # this thread's: the loop's, where connections are made
        self._stage = staging.buffer
        self._view = staging.view
        self._rest = _EMPTY  # the start of a size prefix (< 4 bytes) read so far
        self._frame: bytearray | None = None  # a large frame being filled directly
        self._fill = 0
        self._expect_large = False  # the last frame did not fit the staging buffer

    def get_buffer(self) -> memoryview:
        """Where the next bytes from the socket go."""
        frame = self._frame
        if frame is None and self.blocked:
            # The connection stops reading while blocked; should a read come
            # anyway, take it (over the bound) rather than offer no room.
            self.unblock(force=True)
            frame = self._frame
        if frame is not None:
            return memoryview(frame)[self._fill:]
        rest = self._rest
        if not rest:
            if self._expect_large:
                return self._view[:4]  # the size prefix; the frame then gets its own buffer
            return self._view
        # Same-size slice assignment never resizes, so exported views stay valid.
        n = len(rest)
        self._stage[:n] = rest
        return self._view[n:]

    def buffer_updated(self, nbytes: int) -> list[bytearray]:
        """Account for ``nbytes`` received; return the frames now complete, in
        order.  Raises FrameTooLargeError before allocating for a bad size."""
        frames: list[bytearray] = []
        queue = self.queue
        if self._frame is not None:
            self._fill += nbytes
            if self._fill < len(self._frame):
                return frames
            frames.append(self._frame)
            self._expect_large = len(self._frame) >= STAGING_BYTES
            self._frame = None
            return frames
        stage, start, end = self._stage, 0, len(self._rest) + nbytes
        while end - start >= 4:
            size, = _SIZE.unpack_from(stage, start)
            if size < 0 or size > self.max_size:
                raise FrameTooLargeError(size, self.max_size)
            have = end - start - 4
            if have >= size:
                frames.append(stage[start + 4:start + 4 + size])  # bytearray: a copy
                queue.bytes += size
                start += 4 + size
                self._expect_large = False
                continue
            if queue.bytes >= queue.max_bytes:
                # No memory for it now: keep what came (at most the staging
                # buffer) and read no more until the queue drains.
                self.blocked = True
                break
            self._start_frame(size, self._view[start + 4:end])
            start = end
            break
        self._rest = bytes(stage[start:end]) if start < end else _EMPTY
        return frames

    def _start_frame(self, size: int, have: memoryview) -> None:
        """Give an incomplete frame its own buffer; the socket fills the rest."""
        frame = _alloc_frame(size)  # not zero-filled: the socket fills it all
        # Through a memoryview: a bytearray slice assigned from another
        # object's buffer is first copied into a temporary bytearray.
        memoryview(frame)[:len(have)] = have
        self._frame, self._fill = frame, len(have)
        self.queue.bytes += size

    def unblock(self, force: bool = False) -> bool:
        """After the queue drained: start the frame that was waiting for a
        buffer, if there is room now; whether reading may go on."""
        if not self.blocked:
            return True
        if self.queue.out_of_memory() and not force:
            return False
        rest = self._rest
        size, = _SIZE.unpack_from(rest, 0)
        self._start_frame(size, memoryview(rest)[4:])
        self._rest = _EMPTY
        self.blocked = False
        return True

    def discard(self) -> None:
        """The connection is gone: give back the frame being filled."""
        frame, self._frame = self._frame, None
        if frame is not None:
            self.queue.release(len(frame))


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
