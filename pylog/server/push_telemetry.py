"""PushTelemetry (KIP-714): accepted and dropped (the subscription asks for nothing)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey

if TYPE_CHECKING:
    from pylog.server.broker import Broker

API_KEY = ApiKey.PUSH_TELEMETRY
VERSIONS = (0, 0)


def handle(broker: Broker, header: Any, body: Any) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": 0}
