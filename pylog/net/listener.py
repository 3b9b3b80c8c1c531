"""The node's listening socket and the set of live connections.

Connection quotas are Kafka's ``max.connections.per.ip`` (with
``max.connections.per.ip.overrides``) and ``max.connections``: a connection
past them is closed as soon as it is accepted, before anything is read from
it.  (Kafka closes one over the per-ip limit the same way; over the
broker-wide one its acceptor stops accepting until a slot frees, which an
asyncio server cannot do: pylog closes it too, and the client reconnects after
its backoff.)  The quotas may change while the node runs (dynamic broker
configs): new limits apply to connections made after, counting the ones open.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from typing import Any

from pylog.net.connection import Connection, Handler
from pylog.net.request_queue import RequestQueue

log = logging.getLogger(__name__)

INT_MAX = 2**31 - 1  # Kafka's default for the connection quotas: none


class Listener:
    """Accepts clients on one endpoint; each connection gets a :class:`Connection`."""

    def __init__(self, host: str, port: int, handler: Handler, *, max_request_bytes: int,
                 idle_ms: int, send_buffer: int = -1, receive_buffer: int = -1,
                 executor: Any = None, max_connections: int = INT_MAX,
                 max_per_ip: int = INT_MAX, per_ip_overrides: dict[str, int] | None = None,
                 queue: RequestQueue | None = None) -> None:
        self.host = host
        self.port = port
        self.handler = handler
        self.max_request_bytes = max_request_bytes
        self.idle_ms = idle_ms
        self.send_buffer = send_buffer
        self.receive_buffer = receive_buffer
        self.executor = executor
        self.connections: set[Connection] = set()
        self.queue = queue if queue is not None else RequestQueue()
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.per_ip_overrides = dict(per_ip_overrides or {})
        self._per_ip: dict[str, int] = {}  # open connections by address (with quotas on)
        self._counted = 0
        self._quotas = False  # any quota set: count connections and check each new one
        self._server: asyncio.base_events.Server | None = None
        self._quota_task: asyncio.Task | None = None
        self._set_quotas(max_connections, max_per_ip, self.per_ip_overrides)

    def _protocol(self) -> Connection:
        conn = Connection(self.handler, self.max_request_bytes, self.idle_ms,
                          on_close=self._closed, executor=self.executor,
                          admit=self._admit if self._quotas else None, queue=self.queue)
        self.connections.add(conn)
        return conn

    def set_quotas(self, max_connections: int, max_per_ip: int,
                   per_ip_overrides: dict[str, int]) -> asyncio.Task | None:
        """New connection quotas (a dynamic config change): they apply to the
        connections made from now on, and count the ones already open.  At
        once, unless the overrides name hosts: then once they are resolved,
        by the task returned."""
        try:
            overrides = {str(ipaddress.ip_address(h)): n for h, n in per_ip_overrides.items()}
        except ValueError:
            # Held here: the loop keeps only a weak reference to a task.
            self._quota_task = asyncio.get_running_loop().create_task(
                self._resolve_quotas(max_connections, max_per_ip, per_ip_overrides))
            return self._quota_task
        self._set_quotas(max_connections, max_per_ip, overrides)
        return None

    async def _resolve_quotas(self, max_connections: int, max_per_ip: int,
                              per_ip_overrides: dict[str, int]) -> None:
        try:
            overrides = await _resolve(asyncio.get_running_loop(), per_ip_overrides)
        except OSError as exc:
            log.error("max.connections.per.ip.overrides %s: %s; the quotas stay as they were",
                      per_ip_overrides, exc)
            return
        self._set_quotas(max_connections, max_per_ip, overrides)

    def _set_quotas(self, max_connections: int, max_per_ip: int,
                    overrides: dict[str, int]) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.per_ip_overrides = dict(overrides)
        quotas = (max_connections < INT_MAX or max_per_ip < INT_MAX or bool(overrides))
        if quotas == self._quotas:
            return
        self._quotas = quotas
        # No quota: nothing to count.  Quotas from now on: count what is open.
        self._per_ip.clear()
        self._counted = 0
        for conn in self.connections:
            conn.quota_key = None
            if quotas and not conn.closed and conn.peer is not None:
                self._count(conn)

    def _admit(self, conn: Connection) -> bool:
        """Whether a new connection is within the quotas (it is counted if so)."""
        if not self._quotas:
            return True  # made before the quotas were lifted
        ip = conn.peer[0] if isinstance(conn.peer, tuple) else str(conn.peer)
        count = self._per_ip.get(ip, 0)
        limit = self.per_ip_overrides.get(ip, self.max_per_ip)
        if count >= limit:
            log.info("closing connection from %s: max.connections.per.ip=%d reached for %s",
                     conn.peer, limit, ip)
            return False
        if self._counted >= self.max_connections:
            log.info("closing connection from %s: max.connections=%d reached", conn.peer,
                     self.max_connections)
            return False
        self._count(conn)
        return True

    def _count(self, conn: Connection) -> None:
        ip = conn.peer[0] if isinstance(conn.peer, tuple) else str(conn.peer)
        self._per_ip[ip] = self._per_ip.get(ip, 0) + 1
        self._counted += 1
        conn.quota_key = ip

    def _closed(self, conn: Connection) -> None:
        self.connections.discard(conn)
        ip = conn.quota_key
        if ip is not None:
            conn.quota_key = None
            self._counted -= 1
            left = self._per_ip[ip] - 1
            if left:
                self._per_ip[ip] = left
            else:
                del self._per_ip[ip]

    async def start(self) -> int:
        """Bind and listen; returns the bound port (useful with port 0)."""
        loop = asyncio.get_running_loop()
        self.per_ip_overrides = await _resolve(loop, self.per_ip_overrides)
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


async def _resolve(loop: asyncio.AbstractEventLoop, overrides: dict[str, int]) -> dict[str, int]:
    """max.connections.per.ip.overrides by address: host names resolved (to
    every address they have), as Kafka resolves them when it reads the config."""
    out: dict[str, int] = {}
    for host, count in overrides.items():
        try:
            out[str(ipaddress.ip_address(host))] = count
            continue
        except ValueError:
            pass
        for *_, addr in await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM):
            out[addr[0]] = count
    return out
