"""GetTelemetrySubscriptions (KIP-714): an empty subscription.

librdkafka 2.5+ asks for one when the broker advertises it; an empty
``requested_metrics`` tells the client to push nothing.  The instance id is
the client's own when it has one, else a fresh one, as Kafka hands out.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.GET_TELEMETRY_SUBSCRIPTIONS
VERSIONS = (0, 0)
ZERO_UUID = uuid.UUID(int=0)
PUSH_INTERVAL_MS = 300_000


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    instance = body.client_instance_id
    if instance is None or instance == ZERO_UUID:
        instance = uuid.uuid4()
    return {"throttle_time_ms": 0, "error_code": 0, "client_instance_id": instance,
            "subscription_id": 0, "accepted_compression_types": [],
            "push_interval_ms": PUSH_INTERVAL_MS, "telemetry_max_bytes": 0,
            "delta_temporality": True, "requested_metrics": []}
