"""PushTelemetry (KIP-714): accepted and dropped (the subscription asks for nothing)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.PUSH_TELEMETRY
VERSIONS = (0, 0)


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": 0}
