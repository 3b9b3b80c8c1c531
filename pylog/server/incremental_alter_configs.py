"""IncrementalAlterConfigs: SET, DELETE, APPEND, SUBTRACT single topic or
broker configs.

The operations of one resource are applied to a copy of the topic's
overrides (or of the broker resource's dynamic configs, see
pylog.server.dynamic_configs), the result is validated whole, and only then
stored: a refused request leaves the resource as it was.  APPEND/SUBTRACT
apply to list configs (cleanup.policy, the throttled replica lists,
log.cleanup.policy), as in Kafka.  BROKER_LOGGER resources (type 8) set or
unset this node's logger levels, see pylog.server.broker_loggers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode
from pylog.server import broker_loggers, dynamic_configs, topic_configs
from pylog.server.alter_configs import BROKER, refuse_other, repeated, result
from pylog.server.topics import TopicError

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS
VERSIONS = (0, 1)
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _apply(current: dict[str, str], op: Any) -> None:
    name, value, kind = op.name, op.value, op.config_operation
    if kind == DELETE:
        # Kafka validates the resulting config, not the key deleted: removing
        # a key that is not set, even one no topic config has, changes nothing.
        current.pop(name, None)
        return
    found = topic_configs.TOPIC_CONFIGS.get(name)
    if found is None:
        raise TopicError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
    if kind == SET:
        if value is None:
            raise TopicError(ErrorCode.INVALID_CONFIG,
                             f"Null value not supported for topic config: {name}")
        current[name] = value
    elif kind in (APPEND, SUBTRACT):
        if found.config_type != topic_configs.LIST:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Config value append is not allowed "
                             f"for config key: {name}")
        items = [s for s in current.get(name, found.default).split(",") if s]
        current[name] = _list_op(items, value, kind)
    else:
        raise TopicError(ErrorCode.INVALID_REQUEST, f"unknown config operation {kind}")


def _list_op(items: list[str], value: str | None, kind: int) -> str:
    given = [s.strip() for s in (value or "").split(",") if s.strip()]
    if kind == APPEND:
        items = items + [s for s in given if s not in items]
    else:
        items = [s for s in items if s not in given]
    return ",".join(items)


def _apply_broker(current: dict[str, str], op: Any) -> None:
    """As Kafka's ConfigAdminManager.prepareIncrementalConfigs on the
    resource's dynamic configs (APPEND/SUBTRACT start from the key's default)."""
    name, value, kind = op.name, op.value, op.config_operation
    if kind == SET:
        current[name] = value
    elif kind == DELETE:
        current.pop(name, None)
    elif kind in (APPEND, SUBTRACT):
        if name not in dynamic_configs.LIST_KEYS:
            verb = "append" if kind == APPEND else "subtract"
            raise dynamic_configs.DynamicConfigError(
                ErrorCode.INVALID_CONFIG,
                f"Config value {verb} is not allowed for config key: {name}")
        old = current.get(name, dynamic_configs.LIST_KEYS[name])
        current[name] = _list_op([s for s in old.split(",") if s], value, kind)
    else:
        raise dynamic_configs.DynamicConfigError(ErrorCode.INVALID_REQUEST,
                                                 f"Unknown operations type {kind}")


async def _alter_broker(node: NodeServices, r: Any, validate_only: bool) -> None:
    dynamic_configs.check_request(
        (op.name for op in r.configs),
        (op.name for op in r.configs if op.config_operation != DELETE and op.value is None))
    per_broker = dynamic_configs.check_name(r.resource_name, node.node_id)
    updated = dynamic_configs.current(node.config, per_broker)
    for op in r.configs:
        _apply_broker(updated, op)
    await dynamic_configs.replace(node, r.resource_name, updated, validate_only)


async def _alter(node: NodeServices, r: Any, validate_only: bool) -> dict[str, Any]:
    if r.resource_type == broker_loggers.BROKER_LOGGER:
        try:
            broker_loggers.alter(r, node.node_id, validate_only)
        except dynamic_configs.DynamicConfigError as exc:
            return result(r, exc.code, str(exc))
        return result(r)
    refused = refuse_other(node, r)
    if refused is not None:
        return refused
    if r.resource_type == BROKER:
        try:
            await _alter_broker(node, r, validate_only)
        except dynamic_configs.DynamicConfigError as exc:
            return result(r, exc.code, str(exc))
        return result(r)
    try:
        current = node.admin.topic_configs(r.resource_name)
        if current is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"Topic {r.resource_name} does not exist")
        names = [op.name for op in r.configs]
        if len(set(names)) != len(names):
            raise TopicError(ErrorCode.INVALID_REQUEST,
                             "Error due to duplicate config keys")
        updated = dict(current)
        for op in r.configs:
            _apply(updated, op)
        configs = node.admin.validate_configs(updated)
        if not validate_only:
            await node.admin.set_topic_configs(r.resource_name, configs)
    except TopicError as exc:
        return result(r, exc.code, str(exc))
    return result(r)


async def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    twice = repeated(body.resources)
    return {"throttle_time_ms": 0, "responses": [
        result(r, ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
        if (r.resource_type, r.resource_name) in twice else
        await _alter(node, r, body.validate_only) for r in body.resources]}
