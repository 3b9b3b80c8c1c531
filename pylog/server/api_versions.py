"""ApiVersions: advertise exactly the APIs and versions this node implements."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode, encode_response

if TYPE_CHECKING:
    from pylog.server.broker import Broker

API_KEY = ApiKey.API_VERSIONS
VERSIONS = (0, 4)


def _api_keys(broker: Broker) -> list[dict[str, int]]:
    return [{"api_key": key, "min_version": lo, "max_version": hi}
            for key, (lo, hi) in sorted(broker.router.versions.items())]


def handle(broker: Broker, header: Any, body: Any) -> dict[str, Any]:
    return {"error_code": 0, "api_keys": _api_keys(broker), "throttle_time_ms": 0}


def unsupported(broker: Broker, correlation_id: int) -> bytes:
    """Kafka's answer to an ApiVersions version it does not know: a v0 response
    (which every client can read) with UNSUPPORTED_VERSION and the list, so the
    client can retry with a version both sides have."""
    return encode_response(API_KEY, 0, correlation_id, {
        "error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": _api_keys(broker)})
