"""Answers for requests this node decodes but does not implement (key or version).

Kafka's brokers answer an API they know at a version they do not serve with
that API's error response, UNSUPPORTED_VERSION in its error codes, rather
than dropping the connection: the client sees a clean error for that request
and its other requests go on.  The response is built from the API's schema
at the request's version:

* a top-level ``error_code`` (most APIs) carries the error alone;
* otherwise the error goes into each entry of the response's arrays, which
  mirror the request's arrays entry by entry (topics, then partitions), with
  the identifying fields (names, ids, partition indexes) copied across, as
  Kafka's ``getErrorResponse`` does for Produce, ListOffsets, DeleteRecords...

Only frames that do not decode at all, and api keys Kafka never defined,
close the connection (see :mod:`pylog.server.requests`).
"""

from __future__ import annotations

from typing import Any

from pylog.protocol import ErrorCode, encode_response, message_schema
from pylog.protocol.schema import Field

# Response field name -> request attribute names that identify the same entry.
_SAME = {
    "name": ("name", "topic", "topic_name", "group_id", "resource_name", "transactional_id"),
    "topic": ("topic", "name"),
    "topic_id": ("topic_id",),
    "partition_index": ("partition_index", "partition", "index"),
    "partition": ("partition", "partition_index", "index"),
    "index": ("index", "partition_index", "partition"),
    "group_id": ("group_id",),
    "resource_type": ("resource_type",),
    "resource_name": ("resource_name",),
    "member_id": ("member_id",),
}
_INTS = {"int8", "int16", "int32", "int64"}


def _request_arrays(obj: Any) -> list[tuple[str, list]]:
    """The (attribute, list) arrays of a decoded request struct, in field order."""
    if obj is None or isinstance(obj, int):
        return []
    out = []
    for name in getattr(obj, "__slots__", ()):
        value = getattr(obj, name, None)
        if isinstance(value, list):
            out.append((name, value))
    return out


def _names_entries(f: Field, items: list) -> bool:
    """Whether the response array ``f`` identifies the request's ``items``."""
    if not items:
        return True
    first = items[0]
    for sub in f.fields or ():
        for candidate in _SAME.get(sub.name, ()):
            if isinstance(first, int) or getattr(first, candidate, None) is not None:
                return True
    return False


def _fill(fields: tuple[Field, ...], version: int, req: Any, code: int,
          used: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    arrays = [a for a in _request_arrays(req) if a[0] not in used]
    for f in fields:
        if not f.present(version):
            continue
        if f.name == "error_code":
            out["error_code"] = code
        elif f.is_array:
            # Pair with the request array of the same name, else the next unused
            # one whose entries the response entries name (topics <- topic_data).
            match = next((a for a in arrays if a[0] == f.name), None)
            if match is None and arrays and _names_entries(f, arrays[0][1]):
                match = arrays[0]
            if match is None:
                out[f.name] = []
                continue
            arrays.remove(match)
            if f.is_struct:
                out[f.name] = [_fill(f.fields or (), version, item, code, set())
                               for item in match[1]]
            elif f.element_type in _INTS and all(isinstance(i, int) for i in match[1]):
                out[f.name] = []  # e.g. old_style_offsets: nothing to mirror
            else:
                out[f.name] = []
        elif f.element_type in _INTS and isinstance(req, int) and f.name in (
                "partition_index", "partition", "index"):
            out[f.name] = req  # request partitions given as a plain []int32
        elif req is not None:
            for candidate in _SAME.get(f.name, ()):
                value = getattr(req, candidate, None)
                if value is not None:
                    out[f.name] = value
                    break
    return out


def error_body(api_key: int, version: int, body: Any,
               code: int = ErrorCode.UNSUPPORTED_VERSION) -> dict[str, Any]:
    """A response body of ``api_key`` v``version`` carrying ``code``."""
    schema = message_schema(api_key, "response")
    return _fill(schema.fields, version, body, code, set())


def respond(header: Any, body: Any) -> bytes:
    key, version = header.api_key, header.api_version
    return encode_response(key, version, header.correlation_id, error_body(key, version, body))
