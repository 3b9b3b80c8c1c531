"""ApiVersions: advertise exactly the APIs and versions this node implements."""

from __future__ import annotations

import re
import struct
from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode, encode_response

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.API_VERSIONS
VERSIONS = (0, 4)
# Kafka's ApiVersionsRequest.SOFTWARE_NAME_VERSION_PATTERN (KIP-511), for v3+.
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")
# The answer is the same for every request but its correlation id: encoded
# once per version and list (every client asks on every connection; encoding
# the list of ~60 keys cost some 30 us a time), then copied with the id put in.
_CORRELATION_ID = struct.Struct(">i")  # after the size prefix (header v0 always)
_encoded: dict[tuple[int, tuple], bytes] = {}


def _api_keys(node: NodeServices) -> list[dict[str, int]]:
    return [{"api_key": key, "min_version": lo, "max_version": hi}
            for key, (lo, hi) in sorted(node.api_versions.items())]


def _valid(version: int, body: Any) -> bool:
    return version < 3 or all(_SOFTWARE.fullmatch(s) for s in (
        body.client_software_name, body.client_software_version))


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any] | bytes:
    version = ctx.api_version
    if not _valid(version, body):
        # Kafka's getErrorResponse lists api keys only for UNSUPPORTED_VERSION.
        return {"error_code": ErrorCode.INVALID_REQUEST, "api_keys": [], "throttle_time_ms": 0}
    key = (version, tuple(node.api_versions.items()))
    encoded = _encoded.get(key)
    if encoded is None:
        encoded = _encoded[key] = encode_response(API_KEY, version, 0, {
            "error_code": 0, "api_keys": _api_keys(node), "throttle_time_ms": 0})
    out = bytearray(encoded)
    _CORRELATION_ID.pack_into(out, 4, ctx.correlation_id)
    return bytes(out)


def unsupported(node: NodeServices, correlation_id: int) -> bytes:
    """Kafka's answer to an ApiVersions version it does not know: a v0 response
    (which every client can read) with UNSUPPORTED_VERSION and the list, so the
    client can retry with a version both sides have."""
    return encode_response(API_KEY, 0, correlation_id, {
        "error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": _api_keys(node)})
