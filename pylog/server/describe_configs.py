"""DescribeConfigs: topic configs (explicit, dynamic broker default,
server.properties, or Kafka's default) and broker configs, each with its source
and, when asked (v1+), its synonyms.

Broker resources as Kafka's ConfigHelper: this node's id gives every config
with the value it runs with, its synonyms from the highest precedence down
(DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG,
DEFAULT_CONFIG; within each, the key's synonyms log.retention.ms, .minutes,
.hours in that order, then cut to start at the key itself) and read_only
false only for the keys that may change dynamically; ``""`` gives the
cluster-wide dynamic defaults only, with only those synonyms.

BROKER_LOGGER resources (type 8, KIP-412): this node's loggers and their
levels, see pylog.server.broker_loggers.  Each request is logged at DEBUG on
this module's logger (as Kafka's kafka.request.logger does).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode
from pylog.server import broker_loggers, dynamic_configs, topic_configs
from pylog.server.config import KEYS

if TYPE_CHECKING:
    from pylog.server.config import BrokerConfig
    from pylog.server.context import NodeServices, RequestContext

log = logging.getLogger(__name__)

API_KEY = ApiKey.DESCRIBE_CONFIGS
VERSIONS = (0, 4)
TOPIC, BROKER = 2, 4
DYNAMIC_BROKER_CONFIG = topic_configs.DYNAMIC_BROKER_CONFIG
DYNAMIC_DEFAULT_BROKER_CONFIG = topic_configs.DYNAMIC_DEFAULT_BROKER_CONFIG
STATIC_BROKER_CONFIG = topic_configs.STATIC_BROKER_CONFIG
DEFAULT_CONFIG = topic_configs.DEFAULT_CONFIG
BOOLEAN, STRING, INT, LONG, LIST = (topic_configs.BOOLEAN, topic_configs.STRING,
                                    topic_configs.INT, topic_configs.LONG, topic_configs.LIST)

# The ConfigDef types of the broker keys pylog knows (KafkaConfig's; pylog's
# own keys typed the same way), returned as config_type from v3 on.
_BROKER_TYPES: dict[str, int] = {
    **dict.fromkeys(("listeners", "advertised.listeners", "log.dirs", "log.dir",
                     "log.message.timestamp.type", "compression.type", "io.backend",
                     "metrics.listener", "max.connections.per.ip.overrides",
                     "listener.security.protocol.map", "controller.listener.names",
                     "inter.broker.listener.name"), STRING),
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
                     "offsets.topic.segment.bytes", "offsets.commit.timeout.ms",
                     "group.min.session.timeout.ms", "group.max.session.timeout.ms",
                     "max.connections", "max.connections.per.ip",
                     "quota.window.num", "quota.window.size.seconds",
                     "replication.quota.window.num", "replication.quota.window.size.seconds",
                     "max.incremental.fetch.session.cache.slots",
                     "producer.id.expiration.ms",
                     "producer.id.expiration.check.interval.ms"), INT),
    **dict.fromkeys(("connections.max.idle.ms", "log.roll.ms", "log.roll.jitter.ms",
                     "log.retention.ms", "log.retention.bytes",
                     "log.retention.check.interval.ms", "log.flush.interval.messages",
                     "log.flush.interval.ms", "log.flush.scheduler.interval.ms",
                     "log.cache.drop.idle.ms", "log.cache.drop.behind.bytes",
                     "log.segment.delete.delay.ms",
                     "offsets.retention.check.interval.ms",
                     "log.message.timestamp.difference.max.ms",
                     "log.message.timestamp.before.max.ms",
                     "log.message.timestamp.after.max.ms", "queued.max.request.bytes"), LONG),
    **dict.fromkeys(("log.cleanup.policy", "process.roles"), LIST),
    # The transaction coordinator's (pylog.coordinator.transactions), as KafkaConfig's.
    **dict.fromkeys(("transaction.max.timeout.ms", "transactional.id.expiration.ms",
                     "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                     "transaction.remove.expired.transaction.cleanup.interval.ms",
                     "transaction.state.log.num.partitions",
                     "transaction.state.log.segment.bytes"), INT),
    "transaction.partition.verification.enable": BOOLEAN,
    # The log cleaner's keys (pylog.log.cleaner), typed as KafkaConfig's.
    "log.cleaner.enable": BOOLEAN,
    "log.cleaner.threads": INT,
    "log.cleaner.io.buffer.size": INT,
    **dict.fromkeys(("log.cleaner.dedupe.buffer.size", "log.cleaner.backoff.ms",
                     "log.cleaner.delete.retention.ms", "log.cleaner.min.compaction.lag.ms",
                     "log.cleaner.max.compaction.lag.ms"), LONG),
    **dict.fromkeys(("log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second",
                     "log.cleaner.min.cleanable.ratio"), topic_configs.DOUBLE),
    # The cluster's and replication's keys, as KafkaConfig types them.
    **dict.fromkeys(("zookeeper.connect", "broker.rack", "security.inter.broker.protocol"),
                    STRING),
    **dict.fromkeys(("broker.id.generation.enable", "controlled.shutdown.enable",
                     "unclean.leader.election.enable", "auto.leader.rebalance.enable"),
                    BOOLEAN),
    **dict.fromkeys(("zookeeper.session.timeout.ms", "zookeeper.connection.timeout.ms",
                     "zookeeper.max.in.flight.requests", "reserved.broker.max.id",
                     "controller.socket.timeout.ms", "controlled.shutdown.max.retries",
                     "transaction.state.log.min.isr", "num.replica.fetchers",
                     "replica.fetch.max.bytes", "replica.fetch.min.bytes",
                     "replica.fetch.wait.max.ms", "replica.fetch.backoff.ms",
                     "replica.fetch.response.max.bytes", "replica.socket.timeout.ms",
                     "leader.imbalance.per.broker.percentage"), INT),
    **dict.fromkeys(("offsets.topic.replication.factor",
                     "transaction.state.log.replication.factor",
                     "offsets.commit.required.acks"), topic_configs.SHORT),
    **dict.fromkeys(("controlled.shutdown.retry.backoff.ms", "replica.lag.time.max.ms",
                     "replica.high.watermark.checkpoint.interval.ms",
                     "leader.imbalance.check.interval.seconds",
                     "leader.replication.throttled.rate",
                     "follower.replication.throttled.rate"), LONG),
}


# Kafka's DynamicBrokerConfig.brokerConfigSynonyms: the keys that give one
# value, the most specific first.
_SYNONYM_GROUPS = (("log.roll.ms", "log.roll.hours"),
                   ("log.roll.jitter.ms", "log.roll.jitter.hours"),
                   ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
                   ("log.retention.ms", "log.retention.minutes", "log.retention.hours"))
_SYNONYMS = {key: group for group in _SYNONYM_GROUPS for key in group}
_DEFAULTS = {k: d for k, (_, d) in KEYS.items() if d is not None}


def _synonyms(config: BrokerConfig, name: str) -> list[dict[str, Any]]:
    """Kafka's ConfigHelper.configSynonyms of broker key ``name``."""
    names = _SYNONYMS.get(name, (name,))
    layers = ((DYNAMIC_BROKER_CONFIG, config.dynamic_broker),  # custom keys too
              (DYNAMIC_DEFAULT_BROKER_CONFIG, config.dynamic_default),
              (STATIC_BROKER_CONFIG, config.static), (DEFAULT_CONFIG, _DEFAULTS))
    out = [{"name": n, "value": values[n] if n in KEYS else None, "source": source}
           for source, values in layers for n in names if n in values]
    while out and out[0]["name"] != name:  # dropWhile(_.name != name)
        out.pop(0)
    return out


def _entry(config: BrokerConfig, name: str, value: str | None, per_broker: bool,
           synonyms: bool) -> dict[str, Any]:
    chain = _synonyms(config, name)
    if not per_broker:
        chain = [s for s in chain if s["source"] == DYNAMIC_DEFAULT_BROKER_CONFIG]
    known = name in KEYS  # Kafka: a key of no known type may be a secret
    source = chain[0]["source"] if chain else DEFAULT_CONFIG
    return {"name": name, "value": value if known else None,
            "read_only": name not in dynamic_configs.DYNAMIC_KEYS,
            "is_default": source == DEFAULT_CONFIG, "config_source": source,
            "is_sensitive": not known, "synonyms": chain if synonyms else [],
            "config_type": _BROKER_TYPES.get(name, 0), "documentation": None}


def _broker_entries(config: BrokerConfig, per_broker: bool, keys: Any,
                    synonyms: bool) -> list[dict[str, Any]]:
    if per_broker:
        # Custom (unknown) dynamic keys are part of the broker's config too.
        values = {**config.dynamic_default, **config.dynamic_broker, **config.describe()}
    else:
        values = dict(config.dynamic_default)
    wanted = set(keys) if keys is not None else None
    return [_entry(config, k, v, per_broker, synonyms) for k, v in sorted(values.items())
            if wanted is None or k in wanted]


def _broker_id(name: str, node_id: int) -> str | None:
    """None for this broker or the default, else Kafka's error message."""
    if not name:
        return None
    try:
        given = int(name)
    except ValueError:
        return f"Broker id must be an integer, but it is: {name}"
    if given != node_id:
        return f"Unexpected broker id, expected {node_id} or empty string, but received {name}"
    return None


def _resource(node: NodeServices, r: Any, version: int, body: Any,
              explicit_configs: dict[str, dict[str, str] | None]) -> dict[str, Any]:
    out = {"resource_type": r.resource_type, "resource_name": r.resource_name,
           "error_code": 0, "error_message": None, "configs": []}
    if r.resource_type == TOPIC:
        explicit = explicit_configs.get(r.resource_name)
        if explicit is None:
            out.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       error_message=f"Topic {r.resource_name} does not exist")
            return out
        out["configs"] = topic_configs.describe(
            explicit, node.config, r.configuration_keys,
            synonyms=version >= 1 and body.include_synonyms,
            documentation=version >= 3 and body.include_documentation)
    elif r.resource_type == BROKER:
        refused = _broker_id(r.resource_name, node.node_id)
        if refused is not None:
            out.update(error_code=ErrorCode.INVALID_REQUEST, error_message=refused)
            return out
        out["configs"] = _broker_entries(node.config, r.resource_name != "",
                                         r.configuration_keys,
                                         version >= 1 and body.include_synonyms)
    elif r.resource_type == broker_loggers.BROKER_LOGGER:
        try:
            out["configs"] = broker_loggers.describe(r.resource_name, node.node_id,
                                                     r.configuration_keys)
        except dynamic_configs.DynamicConfigError as exc:
            out.update(error_code=exc.code, error_message=str(exc))
    else:
        out.update(error_code=ErrorCode.INVALID_REQUEST,
                   error_message=f"Unsupported resource type: {r.resource_type}")
    return out


async def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    v = ctx.api_version
    if log.isEnabledFor(logging.DEBUG):
        log.debug("DescribeConfigs v%d of %s", v,
                  ", ".join(f"{r.resource_type}:{r.resource_name}" for r in body.resources))
    # Topics' configs as the store has them now (a cluster's ZooKeeper, as
    # Kafka's ZooKeeper mode reads them), not as this node last heard.
    topics = {r.resource_name for r in body.resources if r.resource_type == TOPIC}
    configs = {name: await node.admin.read_topic_configs(name) for name in topics}
    return {"throttle_time_ms": 0,
            "results": [_resource(node, r, v, body, configs) for r in body.resources]}
