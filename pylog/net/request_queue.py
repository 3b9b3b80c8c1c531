"""The node's bound on requests read and not yet handled, over all connections.

Kafka's two settings for it:

- ``queued.max.requests`` (default 500): requests read and waiting for a
  handler.  In pylog a request read from a connection is handled at once
  unless an earlier request of the same connection is still in progress (a
  parked fetch, a join) or its answers are not being read: those *held*
  requests are the queue.  When it fills, every connection that would hold one
  more stops reading; the others keep being served, as their requests never
  wait.  A connection that is reading when it fills may add what that one
  read brought.  Kafka's network threads stop reading altogether, but pylog has no
  queue in front of a handler to protect.
- ``queued.max.request.bytes`` (default -1, no bound): bytes of requests
  read (or being read) and not yet handled, Kafka's memory pool.  While it is
  exhausted, no connection starts reading a request that needs a buffer of
  its own (one larger than what has arrived of it); the bytes stay in the
  kernel.  As Kafka's pool (not strict), a request is let in while anything
  is left, so the bound is overshot by at most one request.

Counting is plain integer arithmetic on the event loop's thread; connections
that stopped reading for the queue register here and are woken when it
drains.
"""

from __future__ import annotations

from typing import Protocol

UNBOUNDED = 1 << 62


class _Waiter(Protocol):
    def queue_drained(self) -> None: ...

    def queue_filled(self) -> None: ...


class RequestQueue:
    """Held requests and request bytes of every connection of the node."""

    __slots__ = ("max_requests", "max_bytes", "requests", "bytes", "holders", "_waiting")

    def __init__(self, max_requests: int = 500, max_bytes: int = -1) -> None:
        self.max_requests = max_requests
        # Kafka: a pool only for a positive size (MemoryPool.NONE otherwise).
        self.max_bytes = max_bytes if max_bytes > 0 else UNBOUNDED
        self.requests = 0  # held: read, waiting behind their connection's earlier ones
        self.bytes = 0     # of every request read or being read, until it is handled
        # Connections whose next request would be held (one in progress, or
        # not writable): when the queue fills they all stop reading, not just
        # the one that filled it.
        self.holders: set[_Waiter] = set()
        self._waiting: dict[_Waiter, None] = {}  # in the order they stopped

    @property
    def bounded_bytes(self) -> bool:
        return self.max_bytes < UNBOUNDED

    def full(self) -> bool:
        """No room for one more held request."""
        return self.requests >= self.max_requests or self.bytes >= self.max_bytes

    def out_of_memory(self) -> bool:
        """No request may get a buffer of its own now."""
        return self.bytes >= self.max_bytes

    def hold(self) -> None:
        """One more request held."""
        self.requests += 1
        if self.requests == self.max_requests:
            for conn in list(self.holders):
                conn.queue_filled()

    def wait(self, conn: _Waiter) -> None:
        """``conn`` stopped reading for the queue: wake it when there is room."""
        self._waiting[conn] = None

    def forget(self, conn: _Waiter) -> None:
        self._waiting.pop(conn, None)
        self.holders.discard(conn)

    def release(self, nbytes: int, requests: int = 0) -> None:
        """``nbytes`` of requests handled (or dropped), ``requests`` of them held."""
        self.bytes -= nbytes
        self.requests -= requests
        if self._waiting and (self.bytes < self.max_bytes or self.requests < self.max_requests):
            # Each one checks what it waits for, and waits again if it must.
            waiting, self._waiting = self._waiting, {}
            for conn in waiting:
                conn.queue_drained()
