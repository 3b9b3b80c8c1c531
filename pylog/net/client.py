"""The one outbound client of a node: requests to other brokers, on the generated codec.

Kafka's ``NetworkClient`` as brokers use it among themselves (the
controller's channel to every broker, replica fetchers, transaction markers):
one connection per destination, requests pipelined with their correlation
ids, each response handed to the request's future.  A connection that fails
fails every request in flight on it with :class:`BrokerUnavailable`; the next
request connects again (callers decide about retries and back-off, as
Kafka's callers do).  Versions are chosen once per connection from the
destination's ApiVersions: the highest both sides serve.

Everything runs on the node's event loop.  ``request()`` takes a body as the
encoders do (a dict or a message object) and returns the decoded response.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import Any

from pylog.errors import ProtocolError
from pylog.protocol import ApiKey, decode_response, encode_request, message_schema

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
# Responses bigger than this are a protocol error, not an allocation (a
# replica fetch response is bounded by replica.fetch.response.max.bytes).
MAX_RESPONSE_BYTES = 1 << 30


class BrokerUnavailable(ConnectionError):
    """The destination could not be reached, or the connection broke."""


def _our_versions() -> dict[int, tuple[int, int]]:
    """The versions the generated codec can encode, per api key."""
    out = {}
    for key in ApiKey:
        try:
            schema = message_schema(int(key), "request")
        except ProtocolError:
            continue
        out[int(key)] = (schema.min_version, schema.max_version)
    return out


class BrokerConnection:
    """One connection to one broker, opened on first use."""

    def __init__(self, host: str, port: int, client_id: str, *,
                 connect_timeout_s: float = 10.0, request_timeout_s: float = 30.0) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.connect_timeout_s = connect_timeout_s
        self.request_timeout_s = request_timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._reading: asyncio.Task | None = None
        self._connecting: asyncio.Future | None = None
        self._pending: dict[int, tuple[int, int, asyncio.Future]] = {}
        self._correlation = 0
        self.versions: dict[int, tuple[int, int]] = {}
        self.closed = False

    def __repr__(self) -> str:
        return f"BrokerConnection({self.host}:{self.port})"

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def _connect(self) -> None:
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                reader, writer = await asyncio.open_connection(self.host, self.port)
        except (TimeoutError, OSError) as exc:
            raise BrokerUnavailable(f"cannot connect to {self.host}:{self.port}: "
                                    f"{exc or 'timed out'}") from None
        self._reader, self._writer = reader, writer
        self._reading = asyncio.get_running_loop().create_task(self._read_forever(reader))
        # The versions both sides serve, from the destination's ApiVersions v0.
        response = await self._send(ApiKey.API_VERSIONS, 0, {})
        if response.error_code:
            self._fail(BrokerUnavailable(f"ApiVersions error {response.error_code} from "
                                         f"{self.host}:{self.port}"))
            raise BrokerUnavailable(f"{self.host}:{self.port} refused ApiVersions")
        ours = _our_versions()
        self.versions = {}
        for k in response.api_keys:
            mine = ours.get(k.api_key)
            if mine is not None:
                lo, hi = max(mine[0], k.min_version), min(mine[1], k.max_version)
                if lo <= hi:
                    self.versions[k.api_key] = (lo, hi)

    async def ensure_connected(self) -> None:
        if self.closed:
            raise BrokerUnavailable(f"connection to {self.host}:{self.port} is closed")
        if self.connected:
            return
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._connect())
        connecting = self._connecting
        try:
            await asyncio.shield(connecting)
        finally:
            if connecting.done():
                self._connecting = None

    def version(self, api_key: int, wanted: int | None = None) -> int:
        """The version to send ``api_key`` at: ``wanted`` if both sides serve
        it, else the highest both serve."""
        lo, hi = self.versions.get(int(api_key), (-1, -1))
        if hi < 0:
            raise BrokerUnavailable(f"{self.host}:{self.port} does not serve api key {api_key}")
        if wanted is not None:
            if not lo <= wanted <= hi:
                raise BrokerUnavailable(f"{self.host}:{self.port} does not serve api key "
                                        f"{api_key} v{wanted}")
            return wanted
        return hi

    async def request(self, api_key: int, body: Any, version: int | None = None,
                      timeout_s: float | None = None) -> Any:
        """Send one request, await its decoded response."""
        await self.ensure_connected()
        return await self._send(api_key, self.version(api_key, version), body, timeout_s)

    async def _send(self, api_key: int, version: int, body: Any,
                    timeout_s: float | None = None) -> Any:
        writer = self._writer
        if writer is None or writer.is_closing():
            raise BrokerUnavailable(f"not connected to {self.host}:{self.port}")
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        cid = self._correlation
        fut = asyncio.get_running_loop().create_future()
        self._pending[cid] = (int(api_key), version, fut)
        writer.write(encode_request(api_key, version, body, cid, self.client_id, framed=True))
        try:
            # asyncio.timeout, not wait_for: CPython 3.11's wait_for returns the
            # response when a cancellation comes with it (gh-86296), and a
            # replica fetcher so cancelled at a node's stop fetched on for ever.
            async with asyncio.timeout(timeout_s or self.request_timeout_s):
                return await fut
        except TimeoutError:
            # As Kafka's NetworkClient: a request that timed out takes its
            # connection down (the response may still come, out of order
            # with what the caller assumes).
            self._fail(BrokerUnavailable(f"request to {self.host}:{self.port} timed out"))
            raise BrokerUnavailable(f"request {ApiKey(api_key).name} to {self.host}:"
                                    f"{self.port} timed out") from None
        finally:
            self._pending.pop(cid, None)

    async def _read_forever(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                size, = _SIZE.unpack(await reader.readexactly(4))
                if not 4 <= size <= MAX_RESPONSE_BYTES:
                    raise ProtocolError(f"response size {size}")
                frame = await reader.readexactly(size)
                cid, = _SIZE.unpack_from(frame)
                found = self._pending.get(cid)
                if found is None:
                    continue  # a request that timed out meanwhile
                api_key, version, fut = found
                if fut.done():
                    continue
                try:
                    _, response = decode_response(api_key, version, frame)
                except ProtocolError as exc:
                    fut.set_exception(exc)
                    continue
                fut.set_result(response)
        except (asyncio.IncompleteReadError, OSError, ProtocolError) as exc:
            self._fail(BrokerUnavailable(f"connection to {self.host}:{self.port} broke: "
                                         f"{exc}"))
        except asyncio.CancelledError:
            self._fail(BrokerUnavailable(f"connection to {self.host}:{self.port} closed"))
            raise

    def _fail(self, exc: BaseException) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
        reading, self._reading = self._reading, None
        if reading is not None and reading is not asyncio.current_task():
            reading.cancel()
        pending, self._pending = self._pending, {}
        for _, _, fut in pending.values():
            if not fut.done():
                fut.set_exception(exc)

    def close(self) -> None:
        self.closed = True
        self._fail(BrokerUnavailable(f"connection to {self.host}:{self.port} closed"))


class BrokerClient:
    """Connections to the other brokers by node id, their addresses given as
    they change (UpdateMetadata, the controller's broker list)."""

    def __init__(self, client_id: str, *, connect_timeout_s: float = 10.0,
                 request_timeout_s: float = 30.0) -> None:
        self.client_id = client_id
        self.connect_timeout_s = connect_timeout_s
        self.request_timeout_s = request_timeout_s
        self._connections: dict[int, BrokerConnection] = {}

    def connection(self, node_id: int, host: str, port: int) -> BrokerConnection:
        """The connection to ``node_id`` at ``host:port`` (a new one when the
        address changed)."""
        found = self._connections.get(node_id)
        if found is not None and (found.host, found.port) == (host, port) and not found.closed:
            return found
        if found is not None:
            found.close()
        found = self._connections[node_id] = BrokerConnection(
            host, port, self.client_id, connect_timeout_s=self.connect_timeout_s,
            request_timeout_s=self.request_timeout_s)
        return found

    def forget(self, node_id: int) -> None:
        found = self._connections.pop(node_id, None)
        if found is not None:
            found.close()

    def close(self) -> None:
        for node_id in list(self._connections):
            self.forget(node_id)
