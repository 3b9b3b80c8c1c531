"""A minimal blocking Kafka client over pylog's own protocol codec.

For the admin requests confluent-kafka does not expose (DescribeLogDirs,
AlterPartitionReassignments, ...): connect, negotiate the version with
ApiVersions, send one request, read one response (:class:`WireClient`).  Not
a general client: no pipelining, no retries.  :class:`ClusterClient` adds what
Kafka's AdminClient does for the tools: requests to a given broker (a broker's
own configs) or to the active controller (elections, reassignments), found in
the cluster's metadata and found again when the controller moves.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from pylog.protocol import ApiKey, ErrorCode, decode_response, encode_request, message_schema
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


# How often a request the controller refused (NOT_CONTROLLER: it moved, or the
# metadata named none yet) is retried, with the metadata read again between.
_CONTROLLER_BACKOFF_S = 0.5
_NOT_CONTROLLER = int(ErrorCode.NOT_CONTROLLER)


def _has_not_controller(body: Any) -> bool:
    """Whether a response carries NOT_CONTROLLER anywhere (a ZooKeeper-mode
    broker that is not the controller answers it per partition)."""
    if isinstance(body, list):
        return any(_has_not_controller(x) for x in body)
    fields = getattr(body, "__slots__", None) or getattr(body, "__dict__", {})
    for name in fields:
        value = getattr(body, name, None)
        if name == "error_code" and value == _NOT_CONTROLLER:
            return True
        if isinstance(value, list) and _has_not_controller(value):
            return True
    return False


class ClusterClient:
    """WireClients to the brokers of one cluster: the bootstrap broker, the
    others by node id at the addresses its metadata gives, and the controller."""

    def __init__(self, bootstrap: list[tuple[str, int]], timeout: float = 10.0) -> None:
        self.timeout = timeout
        self._bootstrap_addresses = bootstrap
        self.bootstrap = WireClient(bootstrap, timeout)
        self._clients: dict[int, WireClient] = {}
        self._brokers: dict[int, Any] = {}
        self.controller_id = -1

    def close(self) -> None:
        self.bootstrap.close()
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def __enter__(self) -> ClusterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def metadata(self, topics: list[str] | None = None) -> Any:
        """A Metadata response (every topic when ``topics`` is None); the
        brokers and the controller it names are remembered."""
        resp = self.bootstrap.request(ApiKey.METADATA, {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False})
        self._brokers = {b.node_id: b for b in resp.brokers}
        self.controller_id = resp.controller_id
        return resp

    def brokers(self) -> dict[int, Any]:
        """node id -> the broker's Metadata entry (host, port, rack), live ones."""
        if not self._brokers:
            self.metadata([])
        return dict(self._brokers)

    def client(self, node_id: int) -> WireClient:
        """A connection to broker ``node_id`` (a ToolError when the cluster has none)."""
        found = self._clients.get(node_id)
        if found is not None:
            return found
        broker = self.brokers().get(node_id)
        if broker is None:
            raise ToolError(f"broker {node_id} is not in the cluster's metadata")
        address = (broker.host, broker.port)
        if address == self.bootstrap.address:
            return self.bootstrap
        # A lone broker may advertise a name that does not resolve here; the
        # bootstrap address is then the same node.
        fallback = self._bootstrap_addresses if len(self._brokers) == 1 else []
        client = self._clients[node_id] = WireClient([address, *fallback], self.timeout)
        return client

    def request_controller(self, api_key: ApiKey, body: Any,
                           refused: Callable[[Any], bool] = _has_not_controller) -> Any:
        """Send to the active controller, as Kafka's AdminClient does; while it
        answers NOT_CONTROLLER (``refused``) or none is known, the metadata is
        read again and the request resent, up to the client's timeout."""
        deadline = time.monotonic() + self.timeout
        while True:
            self.metadata([])
            if self.controller_id >= 0:
                resp = self.client(self.controller_id).request(api_key, body)
                if not refused(resp):
                    return resp
                stale = self._clients.pop(self.controller_id, None)
                if stale is not None:
                    stale.close()
            if time.monotonic() >= deadline:
                raise ToolError(f"Timed out waiting for the controller to answer "
                                f"{api_key.name} (it moved, or no broker is the controller)")
            time.sleep(_CONTROLLER_BACKOFF_S)
