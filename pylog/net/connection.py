"""One client connection: read frames, hand them to the request handler, answer in order.

Kafka clients pipeline requests on a connection and match responses by order as
much as by correlation id, so responses leave strictly in request order even
when a later request (a produce) finishes before an earlier one (a fetch parked
until data arrives).  Each request takes a slot in a queue; a slot is sent once
it and every slot before it are done.

A handler returns, or returns an awaitable of: ``None`` (no response: acks=0),
``bytes`` (a whole framed response), or a list of pieces from
:func:`~pylog.net.framing.frame_parts` in which :class:`FileRegion` pieces are
sent from their file with ``sendfile`` so record bytes never enter Python.

While a request is in progress asynchronously (a fetch parked until data
arrives, a read from a cold segment, a group join), the requests read after it
wait, undispatched, until it is done: Kafka mutes a connection the same way (one
request at a time per connection).  Without that, one client pipelining
hundreds of fetches parked hundreds of waiters, and every append woke them all.

The answers to the requests of one read leave in one write (up to CORK_BYTES
at a time): 60 pipelined ListOffsets cost one send(2) instead of 60, which
was two thirds of the broker's time per small request.

Once the transport is closing (our close, the peer's reset, a failed write) no
further request is started: the rest of a pipelined batch is dropped with the
connection, and an awaitable a handler returned is closed, not left unawaited.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pylog.io import pagecache
from pylog.net.framing import (
    FileRegion,
    FrameBuffer,
    FrameTooLargeError,
    pin_parts,
    release_parts,
)
from pylog.net.request_queue import RequestQueue

log = logging.getLogger(__name__)

# Stop reading a connection that has this many requests waiting: held behind
# one in progress, or answered and waiting for their turn to be sent (the
# node's RequestQueue bounds held requests over all connections).
MAX_QUEUED = 100
# ... or this many bytes of requests held (read, not started).  Kafka reads
# nothing more from a muted connection; without a byte bound a client that
# parks a fetch (or stops reading) could pipeline MAX_QUEUED requests of
# socket.request.max.bytes each into the node's memory.  Past it, at most one
# more request is read.
MAX_HELD_BYTES = 1 << 20
# Responses answered in one read of the socket leave in one write, up to this
# many bytes (then the transport's flow control sees them, as before).
CORK_BYTES = 64 * 1024
# What handlers answer most requests with; never awaitable.
_PLAIN = (bytes, bytearray, list)


class CloseConnection(Exception):
    """Raised by a handler to drop the connection (bad request, as Kafka does)."""


class Throttled:
    """What a handler returns (or its awaitable gives) for a client over its
    quota: the response (None for acks=0), sent at once, and how long the
    connection then reads nothing (Kafka mutes the channel, KIP-219)."""

    __slots__ = ("result", "ms")

    def __init__(self, result: Any, ms: int) -> None:
        self.result = result
        self.ms = ms


Handler = Callable[["Connection", bytearray], Any]


class _Slot:
    __slots__ = ("done", "result")

    def __init__(self) -> None:
        self.done = False
        self.result: Any = None


class Connection(asyncio.BufferedProtocol):
    def __init__(self, handler: Handler, max_request_bytes: int, idle_ms: int,
                 on_close: Callable[[Connection], None] | None = None,
                 executor: Any = None,
                 admit: Callable[[Connection], bool] | None = None,
                 queue: RequestQueue | None = None) -> None:
        self.handler = handler
        # queued.max.requests / queued.max.request.bytes, shared by the node
        self.queue = queue if queue is not None else RequestQueue()
        self.frames = FrameBuffer(max_request_bytes, self.queue)
        self.idle_s = idle_ms / 1000 if idle_ms >= 0 else None
        self.on_close = on_close
        self.executor = executor  # for page-cache misses; None: the loop's default
        self.admit = admit  # the listener's connection quotas; False: close at once
        self.quota_key: str | None = None  # what the listener counted this connection as
        self.transport: asyncio.Transport | None = None
        self.peer: Any = None
        self.closed = False
        self._lost = False  # connection_lost ran
        self._loop = asyncio.get_event_loop()
        self._slots: collections.deque[_Slot] = collections.deque()
        self._held: collections.deque[bytearray] = collections.deque()  # read, not started
        self._held_bytes = 0
        self._in_progress = False    # a request's handler returned an awaitable
        self._sending = False        # an async sendfile owns the socket
        self._read_paused = False
        self._write_paused = False
        self._sock_fd = -1
        self._watch_fd = -1  # a dup of the socket's fd, to wait for it to be writable
        self._last_active = time.monotonic()
        self._pending_seen = 0  # the transport's write buffer at the last idle check
        self._idle_timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task] = set()
        self._inflight: list = []  # pinned pieces of the response being sent async
        # While requests are dispatched from one read (or one drain of held
        # requests), their plain responses gather here and leave in one write
        # when the batch ends: a client pipelining N small requests (a
        # consumer's ListOffsets per partition, heartbeats behind a commit)
        # costs one send instead of N, and sees every answer at once.
        # None outside a batch.
        self._cork: list | None = None
        self._cork_bytes = 0
        # A client quota's throttle: until the timer fires, no request is read
        # or started (Kafka's muted channel); responses already made still go.
        self._throttle_timer: asyncio.TimerHandle | None = None

    # -- asyncio callbacks ---------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.peer = transport.get_extra_info("peername")
        sock = transport.get_extra_info("socket")
        self._sock_fd = sock.fileno() if sock is not None else -1
        if self.admit is not None and not self.admit(self):
            self.close()
            return
        if self.idle_s is not None:
            self._idle_timer = self._loop.call_later(self.idle_s, self._check_idle)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._last_active = time.monotonic()
        try:
            frames = self.frames.buffer_updated(nbytes)
        except FrameTooLargeError as exc:
            # Kafka closes before allocating anything for the request.
            log.warning("closing connection from %s: %s", self.peer, exc)
            self.close()
            return
        corked = len(frames) > 1 and self._start_cork()
        try:
            for i, frame in enumerate(frames):
                if self._closing():
                    # A write failed on the way (the peer reset): the transport
                    # is going away and connection_lost will cancel every task.
                    self.queue.release(sum(map(len, frames[i:])))
                    return
                if self._must_hold():
                    # Behind a request in progress, a client that does not read
                    # its responses, or a full queue: keep the frame (bytes
                    # read, nothing built for it) until the connection drains.
                    self._held.append(frame)
                    self._held_bytes += len(frame)
                    self.queue.hold()
                else:
                    self._dispatch(frame)
        finally:
            if corked:
                self._end_cork()
        if self._held or self.frames.blocked:
            self._update_reading()

    def eof_received(self) -> bool:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._lost = True
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        if self._throttle_timer is not None:
            self._throttle_timer.cancel()
        for task in list(self._tasks):
            task.cancel()
        release_parts(self._inflight)
        for slot in self._slots:
            release_parts(slot.result)
        self._slots.clear()
        self.queue.forget(self)
        self.queue.release(self._held_bytes, len(self._held))
        self._held.clear()
        self._held_bytes = 0
        self.frames.discard()
        if self._watch_fd >= 0:
            self._loop.remove_writer(self._watch_fd)
            os.close(self._watch_fd)
            self._watch_fd = -1
        if self.on_close is not None:
            self.on_close(self)

    def queue_filled(self) -> None:
        """The node's queue just filled (RequestQueue.hold)."""
        if not self._lost:
            self._update_reading()

    def queue_drained(self) -> None:
        """The node's queue has room again (RequestQueue.release)."""
        if self._lost:
            return
        if not self.frames.unblock():
            self.queue.wait(self)
            return
        self._update_reading()

    def pause_writing(self) -> None:
        # The client is not reading its responses: stop reading its requests.
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._start_held()

    # -- requests --------------------------------------------------------------

    def _dispatch(self, frame: bytearray) -> None:
        try:
            result = self.handler(self, frame)
        except CloseConnection as exc:
            log.info("closing connection from %s: %s", self.peer, exc)
            self.close()
            return
        except Exception:
            log.exception("request handler failed; closing connection from %s", self.peer)
            self.close()
            return
        finally:
            # Handled: what the handler still needs of it, it has parsed (a
            # produce has appended its records), as Kafka releases a request's
            # buffer once its API has handled it.
            self.queue.release(len(frame))
        if type(result) is Throttled:
            self.throttle(result.ms)
            result = result.result
        # Plain answers first: inspect.isawaitable is an ABC check (0.2 us
        # against 0.02 for the type test, timeit), paid by every request.
        if type(result) not in _PLAIN and result is not None and inspect.isawaitable(result):
            if self._closing():
                _discard(result)
                return
            slot = _Slot()
            self._slots.append(slot)
            self._in_progress = True
            task = self._loop.create_task(self._await(slot, result))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            # Cancelled before its first step (the loop's shutdown cancels
            # every task), _await never runs and never awaits ``result``.
            task.add_done_callback(lambda t: t.cancelled() and _discard(result))
            self._update_reading()
        elif result is None:
            return  # nothing to send, nothing to wait for (acks=0)
        elif not self._slots and not self._sending:
            self._send(result)
        else:
            slot = _Slot()
            slot.done, slot.result = True, _pin(result)
            self._slots.append(slot)
            self._update_reading()

    async def _await(self, slot: _Slot, pending: Awaitable) -> None:
        try:
            result = await pending
        except CloseConnection as exc:
            log.info("closing connection from %s: %s", self.peer, exc)
            self.close()
            return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("request handler failed; closing connection from %s", self.peer)
            self.close()
            return
        if self._closing():
            return  # connection_lost drops the queue
        if type(result) is Throttled:
            self.throttle(result.ms)
            result = result.result
        # Sent now unless an earlier response is still pending: then it waits.
        slot.result = _pin(result) if slot is not self._slots[0] or self._sending else result
        slot.done = True
        self._in_progress = False
        self._pump()
        self._start_held()

    def _must_hold(self) -> bool:
        """Whether a request read now must wait undispatched: one is in
        progress, the client is not reading its responses (the transport
        paused us, or a sendfile is waiting for the socket), or MAX_QUEUED
        answers already wait to be sent.  Each
        dispatched request builds its response (and pins a dup of a segment
        fd for fetches), so without this a client that pipelines requests
        and never reads makes the node hold every response of a whole
        64 KiB read of requests."""
        return (self._in_progress or self._write_paused or self._sending
                or self._throttle_timer is not None or len(self._slots) >= MAX_QUEUED)

    def throttle(self, ms: int) -> None:
        """Read and start nothing more for ``ms`` (a client over its quota);
        a later throttle that ends later extends it."""
        if ms <= 0 or self._lost:
            return
        when = self._loop.time() + ms / 1000
        timer = self._throttle_timer
        if timer is not None:
            if timer.when() >= when:
                return
            timer.cancel()
        self._throttle_timer = self._loop.call_at(when, self._unthrottle)
        self._update_reading()

    def _unthrottle(self) -> None:
        self._throttle_timer = None
        if not self._lost:
            self._start_held()  # and reads again (_update_reading)

    def _start_held(self) -> None:
        """Dispatch the requests held behind the one that just finished, in
        order, until one of them is in progress in turn (or the connection
        must hold again, see _must_hold)."""
        held = self._held
        corked = self._start_cork()
        try:
            while held and not self._must_hold() and not self._closing():
                frame = held.popleft()
                self._held_bytes -= len(frame)
                self.queue.requests -= 1
                self._dispatch(frame)
        finally:
            if corked:
                self._end_cork()
        self._update_reading()

    def _pump(self) -> None:
        """Send every finished response at the head of the queue."""
        slots = self._slots
        corked = self._start_cork()
        try:
            while slots and slots[0].done and not self._sending and not self._closing():
                result = slots.popleft().result
                if result is not None:
                    self._send(result)
            if self._held and not self._in_progress:
                self._start_held()  # calls _update_reading
            else:
                self._update_reading()
        finally:
            if corked:
                self._end_cork()

    def _update_reading(self) -> None:
        if self.transport is None or self.closed:
            return
        should_pause = (self._write_paused or self._held_bytes >= MAX_HELD_BYTES
                        or self._throttle_timer is not None
                        or len(self._slots) + len(self._held) >= MAX_QUEUED)
        queue = self.queue
        if self._must_hold():
            queue.holders.add(self)
            if not should_pause and queue.full():
                should_pause = True  # no room for the request it would hold next
                queue.wait(self)
        else:
            queue.holders.discard(self)
        if not should_pause and self.frames.blocked:
            should_pause = True  # no memory for the frame that is waiting
            queue.wait(self)
        if should_pause and not self._read_paused:
            self._read_paused = True
            self.transport.pause_reading()
        elif not should_pause and self._read_paused:
            self._read_paused = False
            self.transport.resume_reading()

    # -- responses -------------------------------------------------------------

    def _start_cork(self) -> bool:
        """Start gathering plain responses; False when a batch is already
        gathering them (its owner flushes)."""
        if self._cork is not None:
            return False
        self._cork = []
        return True

    def _write_cork(self) -> None:
        """Write what the batch gathered so far, in one call; it goes on gathering."""
        cork = self._cork
        if cork:
            self._cork = []
            self._cork_bytes = 0
            if not self._closing():  # a failed write: the transport is going away
                self.transport.write(cork[0] if len(cork) == 1 else b"".join(cork))

    def _end_cork(self) -> None:
        self._write_cork()
        self._cork = None

    def _send(self, result: Any) -> None:
        transport = self.transport
        cork = self._cork
        if type(result) is not list:
            if cork is None:
                transport.write(result)
                return
            cork.append(result)
            self._cork_bytes += len(result)
            if self._cork_bytes >= CORK_BYTES:
                # Past this the transport's flow control must see the bytes
                # (pause_writing holds the next requests), as without the cork.
                self._write_cork()
            return
        # Whatever was gathered goes first: a sendfile writes to the socket
        # directly, past the transport.
        self._write_cork()
        try:
            self._send_parts(result)
        finally:
            if not self._sending:
                release_parts(result)

    def _send_parts(self, result: list) -> None:
        transport = self.transport
        for i, piece in enumerate(result):
            if type(piece) is not FileRegion:
                transport.write(piece)
                continue
            sent = self._try_sendfile(piece)
            if self._closing():
                return  # the socket failed: the caller releases the pieces
            if sent < piece.length:
                # The socket is full or the data is not cached: finish the
                # response asynchronously; later responses wait their turn.
                self._sending = True
                rest = self._inflight = pin_parts(result[i:])
                release_parts(result[:i])
                task = self._loop.create_task(self._send_rest(rest[0], sent, rest[1:]))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                return

    def _try_sendfile(self, region: FileRegion) -> int:
        """sendfile on the loop when it cannot block: nothing queued in the
        transport, and every page of the region in the page cache."""
        if self.transport.get_write_buffer_size() or self._sock_fd < 0:
            return 0
        if not region.is_cached():
            return 0
        try:
            return _sendfile_some(self._sock_fd, region.fd, region.position, region.length)
        except OSError as exc:  # EPIPE, ECONNRESET: the peer is gone
            log.info("send to %s failed: %s", self.peer, exc)
            self.close()
            return 0

    async def _send_rest(self, region: FileRegion, sent: int, rest: list) -> None:
        try:
            pieces = [(region, sent), *((p, 0) for p in rest)]
            for piece, done in pieces:
                if self.closed:
                    return
                if type(piece) is not FileRegion:
                    self.transport.write(piece)
                    continue
                offset, count = piece.position + done, piece.length - done
                if not pagecache.is_cached(piece.fd, offset, count):
                    # Read the pages in off the loop; the send itself then
                    # finds them cached and does not stall other connections.
                    await self._loop.run_in_executor(self.executor, _warm, piece.fd,
                                                     offset, count)
                await self._sendfile(piece.fd, offset, count)
        except (ConnectionError, OSError, RuntimeError) as exc:
            log.info("send to %s failed: %s", self.peer, exc)
            self.close()
            return
        finally:
            self._sending = False
            region.release()
            release_parts(rest)
        self._pump()

    async def _sendfile(self, fd: int, offset: int, count: int) -> None:
        """sendfile(2) ``count`` bytes of ``fd`` to the socket, after everything
        the transport holds, waiting whenever the socket is full.

        Written against the socket rather than ``loop.sendfile``: that one
        exists only on asyncio's own selector loop, and the broker runs on
        uvloop too.
        """
        while self.transport.get_write_buffer_size():  # earlier pieces go first
            await self._writable()
        while True:
            n = _sendfile_some(self._sock_fd, fd, offset, count)
            if n:
                self._last_active = time.monotonic()  # the peer is reading
            offset += n
            count -= n
            if count == 0:
                return
            await self._writable()

    async def _writable(self) -> None:
        """Until the socket can take more bytes (ConnectionError if the
        connection closed meanwhile).  Watched through a dup of its fd: a loop
        refuses a second watcher on a transport's own fd."""
        if self._watch_fd < 0:
            self._watch_fd = os.dup(self._sock_fd)
        fd, loop = self._watch_fd, self._loop
        ready = loop.create_future()
        loop.add_writer(fd, lambda: ready.done() or ready.set_result(None))
        try:
            await ready
        finally:
            if fd == self._watch_fd:  # not closed (and maybe reused) by connection_lost
                loop.remove_writer(fd)
        if self._closing():
            raise ConnectionError("connection closed")

    # -- life cycle --------------------------------------------------------------

    def _check_idle(self) -> None:
        """connections.max.idle.ms: close a connection that neither sent a byte
        nor took one for that long, as Kafka's selector does (any read or
        write counts as activity there).  A request in progress (a parked
        fetch, a group join) is the node's to finish, not the client's
        idleness.  A client that stopped reading its answers (a response
        queued in the transport or half sent by sendfile, requests held behind
        it) is idle too, and so is one that left a close of ours waiting for
        it to read: the connection is aborted, dropping what it did not take
        -- a graceful close would wait for that peer forever."""
        if self._lost:
            return
        now = time.monotonic()
        pending = self.transport.get_write_buffer_size()
        if pending != self._pending_seen:  # the peer took bytes (or we wrote some)
            self._pending_seen = pending
            self._last_active = now
        idle = now - self._last_active
        if idle >= self.idle_s and not self._in_progress:
            if pending or self._sending or self.closed:
                log.info("closing idle connection from %s: it stopped reading", self.peer)
                self.abort()
                return
            log.info("closing idle connection from %s", self.peer)
            self.close()
            # Should the close still wait on the peer an idle period from now: abort.
            self._last_active, idle = now, 0.0
        self._idle_timer = self._loop.call_later(max(self.idle_s - idle, 0.05), self._check_idle)

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            # The answers to the requests before the one that closes (a
            # malformed frame, a failed acks=0 produce) still go out first.
            self._write_cork()
            self.closed = True
            self.transport.close()

    def abort(self) -> None:
        """Close now, dropping whatever the peer has not read yet."""
        if self.transport is not None and not self._lost:
            if self._cork:
                self._cork, self._cork_bytes = [], 0
            self.closed = True
            self.transport.abort()

    def _closing(self) -> bool:
        """Closed, or the transport is on its way out (a failed write closes
        it before connection_lost runs): no request may start any more."""
        return self.closed or self.transport is None or self.transport.is_closing()

    @property
    def busy(self) -> bool:
        return bool(self._slots) or self._sending or bool(self._held)

    async def drain(self, timeout: float) -> None:
        """Wait until every request read so far is answered (graceful shutdown)."""
        deadline = self._loop.time() + timeout
        while self.busy and not self._closing() and self._loop.time() < deadline:
            await asyncio.sleep(0.01)


def _discard(pending: Any) -> None:
    """Close an awaitable that will never be awaited (a coroutine that never
    ran would warn "never awaited"); one that ran to its end ignores this."""
    close = getattr(pending, "close", None)
    if close is not None:
        close()


def _sendfile_some(sock_fd: int, fd: int, offset: int, count: int) -> int:
    """sendfile(2) ``count`` bytes of ``fd`` from ``offset`` until they are all
    sent or the socket is full: how many went.  A file that ends first (it was
    truncated meanwhile) raises ConnectionError."""
    sent = 0
    try:
        while sent < count:
            n = os.sendfile(sock_fd, fd, offset + sent, count - sent)
            if n == 0:
                raise ConnectionError(f"file ended {count - sent} bytes before the region did")
            sent += n
    except (BlockingIOError, InterruptedError):
        pass
    return sent


def _pin(result: Any) -> Any:
    return pin_parts(result) if type(result) is list else result


_devnull_fd = -1


def _warm(fd: int, offset: int, count: int) -> None:
    """Bring a file range into the page cache without copying it into Python:
    sendfile it to /dev/null (in a worker thread)."""
    global _devnull_fd
    if _devnull_fd < 0:
        _devnull_fd = os.open(os.devnull, os.O_WRONLY)
    end = offset + count
    try:
        while offset < end:
            n = os.sendfile(_devnull_fd, fd, offset, end - offset)
            if n <= 0:
                break
            offset += n
    except OSError:
        # Kernels without sendfile to /dev/null: fadvise is the best effort left.
        os.posix_fadvise(fd, offset, end - offset, os.POSIX_FADV_WILLNEED)
