"""AlterConfigs (legacy): replace a topic's whole set of explicit configs.

Kafka's legacy API is not incremental: the configs in the request become the
topic's overrides and every other override is removed.  The set is validated
whole first (INVALID_CONFIG naming the key), so a refused request changes
nothing.  Broker configs are static on a pylog node (server.properties).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode
from pylog.server.topics import TopicError

if TYPE_CHECKING:
    from pylog.server.broker import Broker

API_KEY = ApiKey.ALTER_CONFIGS
VERSIONS = (0, 2)
TOPIC, BROKER = 2, 4


def result(r: Any, code: int = 0, message: str | None = None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "resource_type": r.resource_type,
            "resource_name": r.resource_name}


def refuse_other(broker: Broker, r: Any) -> dict[str, Any] | None:
    """The answer for a resource that is not a topic (None for topics)."""
    if r.resource_type == TOPIC:
        return None
    if r.resource_type == BROKER:
        return result(r, ErrorCode.INVALID_REQUEST,
                      "pylog broker configs are static (server.properties); "
                      "restart the broker to change them")
    return result(r, ErrorCode.INVALID_REQUEST, f"unsupported resource type {r.resource_type}")


def _alter(broker: Broker, r: Any, validate_only: bool) -> dict[str, Any]:
    refused = refuse_other(broker, r)
    if refused is not None:
        return refused
    try:
        if broker.topics.get(r.resource_name) is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"Topic {r.resource_name} does not exist")
        configs = broker.topics.validate_configs({c.name: c.value for c in r.configs})
        if not validate_only:
            broker.topics.set_configs(r.resource_name, configs)
    except TopicError as exc:
        return result(r, exc.code, str(exc))
    return result(r)


def handle(broker: Broker, header: Any, body: Any) -> dict[str, Any]:
    return {"throttle_time_ms": 0,
            "responses": [_alter(broker, r, body.validate_only) for r in body.resources]}
