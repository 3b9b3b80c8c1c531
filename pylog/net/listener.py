"""The node's listening socket and the set of live connections."""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

from pylog.net.connection import Connection, Handler

log = logging.getLogger(__name__)


class Listener:
    """Accepts clients on one endpoint; each connection gets a :class:`Connection`."""

    def __init__(self, host: str, port: int, handler: Handler, *, max_request_bytes: int,
                 idle_ms: int, send_buffer: int = -1, receive_buffer: int = -1,
                 executor: Any = None) -> None:
        self.host = host
        self.port = port
        self.handler = handler
        self.max_request_bytes = max_request_bytes
        self.idle_ms = idle_ms
        self.send_buffer = send_buffer
        self.receive_buffer = receive_buffer
        self.executor = executor
        self.connections: set[Connection] = set()
        self._server: asyncio.base_events.Server | None = None

    def _protocol(self) -> Connection:
        conn = Connection(self.handler, self.max_request_bytes, self.idle_ms,
                          on_close=self.connections.discard, executor=self.executor)
        self.connections.add(conn)
        return conn

    async def start(self) -> int:
        """Bind and listen; returns the bound port (useful with port 0)."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._protocol, self.host or None, self.port, reuse_address=True, backlog=1024)
        for sock in self._server.sockets:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # -1 leaves the kernel's auto-tuning alone, as in Kafka.
            if self.send_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer)
            if self.receive_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    def stop_accepting(self) -> None:
        if self._server is not None:
            self._server.close()

    async def drain(self, timeout: float) -> None:
        """Let in-flight requests finish, then close every connection."""
        conns = list(self.connections)
        if conns:
            await asyncio.gather(*(c.drain(timeout) for c in conns), return_exceptions=True)
        for conn in list(self.connections):
            conn.close()
        if self._server is not None:
            await self._server.wait_closed()
