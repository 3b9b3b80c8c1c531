"""Encode and decode whole Kafka requests and responses (header + body).

Frames are given and returned without the 4-byte size prefix unless ``framed``
says otherwise. Decoders accept bytes, bytearray or memoryview and never copy
``records`` fields: those come back as memoryview slices of the input. Any bad
input raises ``ProtocolError`` (``UnsupportedVersionError`` for a version the API
does not have, carrying the decoded header).
"""

from __future__ import annotations

from typing import Any

from pylog.errors import ProtocolError
from pylog.protocol import types as t
from pylog.protocol.errors import UnsupportedVersionError
from pylog.protocol.headers import (
    REQUEST_HEADER_START,
    RequestHeader,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
    read_unknown_tags,
    request_header_version,
    response_header_version,
)
from pylog.protocol.messages import body_decoder, body_encoder, message_schema

_header_start = REQUEST_HEADER_START.unpack_from
_int16 = t.INT16.unpack_from
_new = object.__new__

# (api key, version) -> (header version, body decoder or None if unsupported)
_request_decoders: dict[tuple[int, int], tuple[int, Any]] = {}


def _request_decoder(api_key: int, version: int) -> tuple[int, Any]:
    entry = _request_decoders.get((api_key, version))
    if entry is None:
        header_version = request_header_version(api_key, version)  # unknown key: raises
        if message_schema(api_key, "request").supports(version):
            entry = _request_decoders[(api_key, version)] = (
                header_version, body_decoder(api_key, version, "request"))
        else:
            entry = (header_version, None)
    return entry


def decode_request(buf: bytes | bytearray | memoryview,
                   allow_trailing: bool = False) -> tuple[RequestHeader, Any]:
    """Decode a request frame (without its size prefix) into (header, body).

    Bytes after the last field are an error unless ``allow_trailing``: Kafka's
    broker reads the fields it knows and ignores the rest of the frame, and
    librdkafka 2.x relies on it (its Metadata v12 requests end with 3 extra
    bytes), so the broker decodes with ``allow_trailing=True``.
    """
    mv = t.as_memoryview(buf)
    n = len(mv)
    if n < 8:
        raise ProtocolError(f"request of {n} bytes is shorter than a request header")
    api_key, version, correlation_id = _header_start(mv, 0)
    entry = _request_decoders.get((api_key, version))
    header_version, decoder = entry if entry is not None else _request_decoder(api_key, version)
    try:
        if header_version == 0:
            header, pos = decode_request_header(mv, 0)
        else:
            # Header v1/v2 inlined: it is on the path of every request.
            length, = _int16(mv, 8)
            pos = 10
            if length >= 0:
                end = pos + length
                if end > n:
                    t.fail("client id longer than the bytes left")
                client_id = str(mv[pos:end], "utf-8")
                pos = end
            elif length == -1:
                client_id = None
            else:
                t.fail(f"negative client id length {length}")
            unknown = None
            if header_version == 2:
                if mv[pos]:
                    unknown, pos = read_unknown_tags(mv, pos)
                else:
                    pos += 1
            header = _new(RequestHeader)
            header.api_key = api_key
            header.api_version = version
            header.correlation_id = correlation_id
            header.client_id = client_id
            header.header_version = header_version
            header._unknown_tagged_fields = unknown
        if decoder is not None:
            body, pos = decoder(mv, pos, n)
    except ProtocolError:
        raise
    except t.DECODE_ERRORS as exc:
        raise ProtocolError(f"malformed request (api key {api_key} v{version}): {exc}") from None
    if decoder is None:
        raise UnsupportedVersionError(api_key, version, header)
    if pos != n and not allow_trailing:
        raise ProtocolError(f"{n - pos} bytes after the end of request "
                            f"(api key {api_key} v{version})")
    return header, body


def decode_body(api_key: int, version: int, kind: str,
                buf: bytes | bytearray | memoryview) -> Any:
    """Decode a request or response body (no header) of a known api and version."""
    decoder = body_decoder(api_key, version, kind)
    mv = t.as_memoryview(buf)
    try:
        body, pos = decoder(mv, 0, len(mv))
    except ProtocolError:
        raise
    except t.DECODE_ERRORS as exc:
        raise ProtocolError(f"malformed {kind} (api key {api_key} v{version}): {exc}") from None
    if pos != len(mv):
        raise ProtocolError(f"{len(mv) - pos} bytes after the end of {kind} "
                            f"(api key {api_key} v{version})")
    return body


def decode_response(api_key: int, version: int,
                    buf: bytes | bytearray | memoryview) -> tuple[int, Any]:
    """Decode a response frame (without its size prefix) into (correlation id, body)."""
    decoder = body_decoder(api_key, version, "response")
    mv = t.as_memoryview(buf)
    n = len(mv)
    try:
        correlation_id, pos = decode_response_header(mv, response_header_version(api_key, version))
        body, pos = decoder(mv, pos, n)
    except ProtocolError:
        raise
    except t.DECODE_ERRORS as exc:
        raise ProtocolError(f"malformed response (api key {api_key} v{version}): {exc}") from None
    if pos != n:
        raise ProtocolError(f"{n - pos} bytes after the end of response "
                            f"(api key {api_key} v{version})")
    return correlation_id, body


def _encode(encoder: Any, body: Any, parts: list[Any], what: str) -> None:
    try:
        encoder(body, parts.append)
    except ProtocolError:
        raise
    except t.ENCODE_ERRORS as exc:
        raise ProtocolError(f"cannot encode {what}: {exc}") from None


def _join(parts: list[Any], framed: bool) -> bytes:
    if framed:
        parts[0] = t.INT32.pack(sum(map(len, parts)))
    return b"".join(parts)


def encode_body(api_key: int, version: int, kind: str, body: Any) -> bytes:
    """Encode a request or response body (no header); ``body`` is a message object,
    a dict, or any object with the fields as attributes."""
    parts: list[Any] = []
    _encode(body_encoder(api_key, version, kind), body, parts, f"{kind} {api_key} v{version}")
    return b"".join(parts)


def encode_request(api_key: int, version: int, body: Any, correlation_id: int,
                   client_id: str | None = "pylog", framed: bool = False) -> bytes:
    """Header + body of a request; with ``framed`` the int32 size prefix too."""
    encoder = body_encoder(api_key, version, "request")
    header = encode_request_header(api_key, version, correlation_id, client_id,
                                   request_header_version(api_key, version))
    parts: list[Any] = [b"", header] if framed else [header]
    _encode(encoder, body, parts, f"request {api_key} v{version}")
    return _join(parts, framed)


def encode_response_parts(api_key: int, version: int, correlation_id: int,
                          body: Any) -> list[Any]:
    """Header + body of a response as the encoder's pieces, unjoined and
    unframed: a FileRegion in a records field stays a piece of its own (for
    :func:`pylog.net.framing.frame_parts` and sendfile)."""
    encoder = body_encoder(api_key, version, "response")
    parts: list[Any] = [encode_response_header(correlation_id,
                                               response_header_version(api_key, version))]
    _encode(encoder, body, parts, f"response {api_key} v{version}")
    return parts


def encode_response(api_key: int, version: int, correlation_id: int, body: Any,
                    framed: bool = True) -> bytes:
    """Header + body of a response; with ``framed`` (the default) the size prefix too."""
    encoder = body_encoder(api_key, version, "response")
    header = encode_response_header(correlation_id, response_header_version(api_key, version))
    parts: list[Any] = [b"", header] if framed else [header]
    _encode(encoder, body, parts, f"response {api_key} v{version}")
    return _join(parts, framed)
