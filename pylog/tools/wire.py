"""A minimal blocking Kafka client over pylog's own protocol codec.

For the few admin requests confluent-kafka does not expose (DescribeLogDirs):
connect, negotiate the version with ApiVersions, send one request, read one
response.  Not a general client: no pipelining, no retries.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from pylog.protocol import ApiKey, decode_response, encode_request, message_schema
from pylog.tools.common import CONNECT_TIMEOUT_S, ToolError, connect_any

_SIZE = struct.Struct(">i")
CLIENT_ID = "pylog-tools"


class WireClient:
    """One connection to one broker."""

    def __init__(self, addresses: list[tuple[str, int]], timeout: float = 10.0) -> None:
        # The connect is bounded apart from the requests: an address where
        # nothing listens is reported at once, whatever --timeout says.
        sock, self.address = connect_any(addresses, min(timeout, CONNECT_TIMEOUT_S))
        sock.settimeout(timeout)
        self.sock: socket.socket | None = sock
        self._correlation = 0
        try:
            self.versions = self._api_versions()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _recv_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(min(n, 1 << 20))
            if not chunk:
                raise ToolError(f"broker {self.address[0]}:{self.address[1]} closed the "
                                "connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def _roundtrip(self, api_key: int, version: int, body: Any) -> Any:
        self._correlation += 1
        frame = encode_request(api_key, version, body, self._correlation, CLIENT_ID,
                               framed=True)
        try:
            self.sock.sendall(frame)
            (size,) = _SIZE.unpack(self._recv_exact(4))
            payload = self._recv_exact(size)
        except OSError as exc:
            raise ToolError(f"request to {self.address[0]}:{self.address[1]} failed: "
                            f"{exc.strerror or exc}") from None
        correlation, response = decode_response(api_key, version, payload)
        if correlation != self._correlation:
            raise ToolError(f"response out of order ({correlation} != {self._correlation})")
        return response

    def _api_versions(self) -> dict[int, tuple[int, int]]:
        # v0 every broker answers; its list bounds what the others may use.
        resp = self._roundtrip(ApiKey.API_VERSIONS, 0, {})
        return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}

    def request(self, api_key: ApiKey, body: Any) -> Any:
        """Send at the highest version both sides have; returns the response body."""
        ours = message_schema(api_key, "request").valid_versions
        theirs = self.versions.get(int(api_key))
        if theirs is None or theirs[1] < ours[0] or theirs[0] > ours[1]:
            raise ToolError(f"the broker does not support {api_key.name} "
                            f"(api key {int(api_key)})")
        return self._roundtrip(api_key, min(ours[1], theirs[1]), body)
