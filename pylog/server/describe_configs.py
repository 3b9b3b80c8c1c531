"""DescribeConfigs: topic configs (explicit, server.properties, or Kafka's default) and
broker configs, each with its source and, when asked (v1+), its synonyms."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode
from pylog.server import topic_configs

if TYPE_CHECKING:
    from pylog.server.broker import Broker

API_KEY = ApiKey.DESCRIBE_CONFIGS
VERSIONS = (0, 4)
TOPIC, BROKER = 2, 4
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = (topic_configs.STATIC_BROKER_CONFIG,
                                        topic_configs.DEFAULT_CONFIG)
BOOLEAN, STRING, INT, LONG, LIST = (topic_configs.BOOLEAN, topic_configs.STRING,
                                    topic_configs.INT, topic_configs.LONG, topic_configs.LIST)

# The ConfigDef types of the broker keys pylog knows (KafkaConfig's; pylog's
# own keys typed the same way), returned as config_type from v3 on.
_BROKER_TYPES: dict[str, int] = {
    **dict.fromkeys(("listeners", "advertised.listeners", "log.dirs", "log.dir",
                     "log.message.timestamp.type", "compression.type", "io.backend",
                     "metrics.listener", "max.connections.per.ip.overrides"), STRING),
    **dict.fromkeys(("auto.create.topics.enable", "delete.topic.enable",
                     "log.preallocate"), BOOLEAN),
    **dict.fromkeys(("node.id", "broker.id", "num.partitions", "default.replication.factor",
                     "message.max.bytes", "socket.request.max.bytes",
                     "socket.send.buffer.bytes", "socket.receive.buffer.bytes",
                     "fetch.max.bytes", "queued.max.requests", "log.segment.bytes",
                     "log.roll.hours", "log.roll.jitter.hours", "log.retention.hours",
                     "log.retention.minutes", "log.flush.offset.checkpoint.interval.ms",
                     "log.flush.start.offset.checkpoint.interval.ms",
                     "log.index.interval.bytes", "log.index.size.max.bytes",
                     "min.insync.replicas", "offsets.topic.num.partitions",
                     "offsets.retention.minutes", "group.initial.rebalance.delay.ms",
                     "group.min.session.timeout.ms", "group.max.session.timeout.ms",
                     "max.connections", "max.connections.per.ip"), INT),
    **dict.fromkeys(("connections.max.idle.ms", "log.roll.ms", "log.roll.jitter.ms",
                     "log.retention.ms", "log.retention.bytes",
                     "log.retention.check.interval.ms", "log.flush.interval.messages",
                     "log.flush.interval.ms", "log.flush.scheduler.interval.ms",
                     "log.cache.drop.idle.ms", "log.segment.delete.delay.ms",
                     "offsets.retention.check.interval.ms"), LONG),
    "log.cleanup.policy": LIST,
}


def _entries(values: dict[str, str | None], explicit: set[str], source: int,
             keys: Any, synonyms: bool) -> list[dict[str, Any]]:
    wanted = set(keys) if keys is not None else None
    out = []
    for k, v in sorted(values.items()):
        if wanted is not None and k not in wanted:
            continue
        src = source if k in explicit else DEFAULT_CONFIG
        out.append({"name": k, "value": v, "read_only": True, "is_default": k not in explicit,
                    "config_source": src, "is_sensitive": False,
                    "synonyms": [{"name": k, "value": v, "source": src}] if synonyms else [],
                    "config_type": _BROKER_TYPES.get(k, 0), "documentation": None})
    return out


def _resource(broker: Broker, r: Any, version: int, body: Any) -> dict[str, Any]:
    out = {"resource_type": r.resource_type, "resource_name": r.resource_name,
           "error_code": 0, "error_message": None, "configs": []}
    if r.resource_type == TOPIC:
        topic = broker.topics.get(r.resource_name)
        if topic is None:
            out.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       error_message=f"Topic {r.resource_name} does not exist")
            return out
        out["configs"] = topic_configs.describe(
            topic.configs, broker.config, r.configuration_keys,
            synonyms=version >= 1 and body.include_synonyms,
            documentation=version >= 3 and body.include_documentation)
    elif r.resource_type == BROKER:
        if r.resource_name not in ("", str(broker.node_id)):
            out.update(error_code=ErrorCode.INVALID_REQUEST,
                       error_message=f"unknown broker {r.resource_name}")
            return out
        values = broker.config.describe()
        out["configs"] = _entries(values, set(broker.config.originals), STATIC_BROKER_CONFIG,
                                  r.configuration_keys, version >= 1 and body.include_synonyms)
    else:
        out.update(error_code=ErrorCode.INVALID_REQUEST,
                   error_message=f"unsupported resource type {r.resource_type}")
    return out


def handle(broker: Broker, header: Any, body: Any) -> dict[str, Any]:
    v = header.api_version
    return {"throttle_time_ms": 0,
            "results": [_resource(broker, r, v, body) for r in body.resources]}
