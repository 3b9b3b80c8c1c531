"""Request and response headers, and which header version goes with which request.

RequestHeader v0: api key, api version, correlation id (only ControlledShutdown v0);
v1: + client id (nullable string, always with an int16 length, even in flexible
requests, so any broker can read it); v2: + tagged fields. ResponseHeader v0:
correlation id; v1: + tagged fields. Flexible requests use header v2 (else v1);
flexible responses use header v1 (else v0), except ApiVersions responses, which
always use v0 so that a client that sent a version the broker does not know can
still read the error.
"""

from __future__ import annotations

import struct
from typing import Any

from pylog.protocol import types as t
from pylog.protocol.messages import message_schema

API_VERSIONS = 18
CONTROLLED_SHUTDOWN = 7

REQUEST_HEADER_START = struct.Struct(">hhi")  # api key, api version, correlation id


class RequestHeader:
    """A decoded request header. ``unknown_tagged_fields``: None or {tag: bytes}."""

    __slots__ = ("api_key", "api_version", "correlation_id", "client_id", "header_version",
                 "_unknown_tagged_fields")

    def __init__(self, api_key: int, api_version: int, correlation_id: int,
                 client_id: str | None = None, header_version: int = 1,
                 _unknown_tagged_fields: dict[int, bytes] | None = None) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.header_version = header_version
        self._unknown_tagged_fields = _unknown_tagged_fields

    def to_dict(self) -> dict[str, Any]:
        return {s: getattr(self, s) for s in self.__slots__}

    def __eq__(self, other: object) -> bool:
        if type(other) is not RequestHeader:
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items())
        return f"RequestHeader({inner})"


def request_header_version(api_key: int, version: int) -> int:
    """Header version of a request; answers for versions past the valid range too
    (by the flexible-versions rule), so a too-new request's header can be read."""
    if api_key == CONTROLLED_SHUTDOWN and version == 0:
        return 0
    return 2 if message_schema(api_key, "request").is_flexible(version) else 1


def response_header_version(api_key: int, version: int) -> int:
    if api_key == API_VERSIONS:
        return 0
    return 1 if message_schema(api_key, "response").is_flexible(version) else 0


def decode_request_header(buf: memoryview, header_version: int) -> tuple[RequestHeader, int]:
    """Decode a request header at the start of ``buf``; returns it and the body's offset.
    Raises struct.error/IndexError/UnicodeDecodeError/ProtocolError on bad input."""
    n = len(buf)
    api_key, api_version, correlation_id = REQUEST_HEADER_START.unpack_from(buf, 0)
    pos = 8
    client_id = None
    unknown = None
    if header_version >= 1:
        length, = t.INT16.unpack_from(buf, pos)
        pos += 2
        if length >= 0:
            end = pos + length
            if end > n:
                t.fail("client id longer than the bytes left")
            client_id = str(buf[pos:end], "utf-8")
            pos = end
        elif length != -1:
            t.fail(f"negative client id length {length}")
    if header_version >= 2:
        unknown, pos = read_unknown_tags(buf, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, header_version,
                         unknown), pos


def read_unknown_tags(buf: memoryview, pos: int) -> tuple[dict[int, bytes] | None, int]:
    """A tagged-field section where no tag is known: {tag: bytes} or None."""
    count, pos = t.read_uvarint(buf, pos)
    unknown = None
    for _ in range(count):
        tag, pos = t.read_uvarint(buf, pos)
        size, pos = t.read_uvarint(buf, pos)
        end = pos + size
        if end > len(buf):
            t.fail("tagged field longer than the bytes left")
        if unknown is None:
            unknown = {}
        unknown[tag] = bytes(buf[pos:end])
        pos = end
    return unknown, pos


def encode_request_header(api_key: int, api_version: int, correlation_id: int,
                          client_id: str | None, header_version: int) -> bytes:
    start = REQUEST_HEADER_START.pack(api_key, api_version, correlation_id)
    if header_version == 0:
        return start
    if client_id is None:
        client = t.NULL_INT16
    else:
        raw = client_id.encode()
        client = t.INT16.pack(len(raw)) + raw
    if header_version == 1:
        return start + client
    return start + client + t.TAGS_NONE


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    if header_version == 0:
        return t.INT32.pack(correlation_id)
    return t.INT32.pack(correlation_id) + t.TAGS_NONE


def decode_response_header(buf: memoryview, header_version: int) -> tuple[int, int]:
    """(correlation id, body offset); tagged fields of the header are skipped."""
    correlation_id, = t.INT32.unpack_from(buf, 0)
    pos = 4
    if header_version >= 1:
        _unknown, pos = read_unknown_tags(buf, pos)
    return correlation_id, pos

