"""AlterConfigs (legacy): replace a resource's whole set of explicit configs.

Kafka's legacy API is not incremental: the configs in the request become the
topic's overrides (or the broker resource's dynamic configs, see
pylog.server.dynamic_configs) and every other one is removed.  The set is
validated whole first (INVALID_CONFIG naming the key), so a refused request
changes nothing.  As Kafka's ConfigAdminManager, a resource named twice in
one request is refused, and so is a null value.  BROKER_LOGGER resources
(type 8) are refused as Kafka refuses them: only IncrementalAlterConfigs
changes logger levels.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode
from pylog.server import dynamic_configs
from pylog.server.topics import TopicError

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.ALTER_CONFIGS
VERSIONS = (0, 2)
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8


def result(r: Any, code: int = 0, message: str | None = None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "resource_type": r.resource_type,
            "resource_name": r.resource_name}


def refuse_other(node: NodeServices, r: Any) -> dict[str, Any] | None:
    """The answer for a resource that is neither a topic nor a broker (None
    for those)."""
    if r.resource_type in (TOPIC, BROKER):
        return None
    return result(r, ErrorCode.INVALID_REQUEST, f"Unknown resource type {r.resource_type}")


def repeated(resources: list[Any]) -> set[tuple[int, str]]:
    """(type, name) of the resources that appear more than once."""
    seen = Counter((r.resource_type, r.resource_name) for r in resources)
    return {key for key, n in seen.items() if n > 1}


async def _alter(node: NodeServices, r: Any, validate_only: bool) -> dict[str, Any]:
    if r.resource_type == BROKER_LOGGER:
        return result(r, ErrorCode.INVALID_REQUEST, "AlterConfigs is deprecated and does not "
                      "support the resource type BROKER_LOGGER")
    refused = refuse_other(node, r)
    if refused is not None:
        return refused
    try:
        if r.resource_type == BROKER:
            dynamic_configs.check_request((c.name for c in r.configs),
                                          (c.name for c in r.configs if c.value is None))
            await dynamic_configs.replace(node, r.resource_name,
                                          {c.name: c.value for c in r.configs}, validate_only)
            return result(r)
        if node.admin.topic_configs(r.resource_name) is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"Topic {r.resource_name} does not exist")
        configs = node.admin.validate_configs({c.name: c.value for c in r.configs})
        if not validate_only:
            await node.admin.set_topic_configs(r.resource_name, configs)
    except (TopicError, dynamic_configs.DynamicConfigError) as exc:
        return result(r, exc.code, str(exc))
    return result(r)


async def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    twice = repeated(body.resources)
    return {"throttle_time_ms": 0, "responses": [
        result(r, ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
        if (r.resource_type, r.resource_name) in twice else
        await _alter(node, r, body.validate_only) for r in body.resources]}
