"""A minimal raw Kafka client for tests: frames over a plain socket."""

from __future__ import annotations

import socket
import struct
from typing import Any

from pylog.protocol import ApiKey, decode_response, encode_request


class RawClient:
    def __init__(self, bootstrap: str, timeout: float = 10, rcvbuf: int | None = None,
                 client_id: str | None = "pylog") -> None:
        self.client_id = client_id  # the request header's
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.socket()
        if rcvbuf is not None:  # before connecting, so the window is sized by it
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect((host, int(port)))
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, api_key: int, version: int, body: Any) -> int:
        self.correlation_id += 1
        self.send_raw(encode_request(api_key, version, body, self.correlation_id,
                                     self.client_id, framed=True))
        return self.correlation_id

    def recv_frame(self) -> bytes:
        size, = struct.unpack(">i", self._recv_exact(4))
        return self._recv_exact(size)

    def _recv_exact(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            out += chunk
        return bytes(out)

    def recv(self, api_key: int, version: int) -> tuple[int, Any]:
        return decode_response(api_key, version, self.recv_frame())

    def request(self, api_key: int, version: int, body: Any) -> Any:
        cid = self.send(api_key, version, body)
        got, response = self.recv(api_key, version)
        assert got == cid
        return response

    def is_closed(self, timeout: float = 5) -> bool:
        """True when the broker closed the connection (EOF or reset)."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False


def produce_body(topic: str, partition: int, records: bytes, acks: int = -1) -> dict:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": partition, "records": records}]}]}


def latest_offset(client: RawClient, topic: str, partition: int = 0) -> int:
    r = client.request(ApiKey.LIST_OFFSETS, 1, {"replica_id": -1, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "timestamp": -1}]}]})
    return r.topics[0].partitions[0].offset
