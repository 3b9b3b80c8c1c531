"""DescribeConfigs: topic configs (explicit or the broker default) and broker configs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode

if TYPE_CHECKING:
    from pylog.server.broker import Broker

API_KEY = ApiKey.DESCRIBE_CONFIGS
VERSIONS = (0, 4)
TOPIC, BROKER = 2, 4
# ConfigSource values
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5


def _entries(values: dict[str, str | None], explicit: set[str], source: int,
             keys: Any) -> list[dict[str, Any]]:
    wanted = set(keys) if keys is not None else None
    return [{"name": k, "value": v, "read_only": source != DYNAMIC_TOPIC_CONFIG,
             "is_default": k not in explicit,
             "config_source": source if k in explicit else DEFAULT_CONFIG,
             "is_sensitive": False, "synonyms": [], "config_type": 0, "documentation": None}
            for k, v in sorted(values.items()) if wanted is None or k in wanted]


def _resource(broker: Broker, r: Any) -> dict[str, Any]:
    out = {"resource_type": r.resource_type, "resource_name": r.resource_name,
           "error_code": 0, "error_message": None, "configs": []}
    if r.resource_type == TOPIC:
        topic = broker.topics.get(r.resource_name)
        if topic is None:
            out.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       error_message=f"Topic {r.resource_name} does not exist")
            return out
        values = broker.topics.log_config(topic.configs).to_props()
        out["configs"] = _entries(values, set(topic.configs), DYNAMIC_TOPIC_CONFIG,
                                  r.configuration_keys)
    elif r.resource_type == BROKER:
        if r.resource_name not in ("", str(broker.node_id)):
            out.update(error_code=ErrorCode.INVALID_REQUEST,
                       error_message=f"unknown broker {r.resource_name}")
            return out
        values = broker.config.describe()
        out["configs"] = _entries(values, set(broker.config.originals), STATIC_BROKER_CONFIG,
                                  r.configuration_keys)
    else:
        out.update(error_code=ErrorCode.INVALID_REQUEST,
                   error_message=f"unsupported resource type {r.resource_type}")
    return out


def handle(broker: Broker, header: Any, body: Any) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "results": [_resource(broker, r) for r in body.resources]}
