"""Dynamic broker configs (Kafka's KIP-226): AlterConfigs and
IncrementalAlterConfigs on the BROKER resource.

Two layers sit over server.properties, as in Kafka: the cluster-wide default
(resource name ``""``, DYNAMIC_DEFAULT_BROKER_CONFIG) and this node's own
values (resource name = its node id, DYNAMIC_BROKER_CONFIG).  Precedence is
per-broker, cluster default, static, Kafka default.

Which keys may change: those Kafka 3.6 lists as dynamically updatable
(docs 3.1.1, "Updating Default Topic Configuration") that pylog has, i.e.
the defaults of the topic configs, the connection quotas,
``producer.id.expiration.ms`` and the log cleaner's six.  They apply at once:
every topic without its own override follows the new default, through the
same path a topic config change takes (``LogManager.update_topic_config``);
new connection quotas apply to the connections made after (the listener
counts the ones open); the producer id expiration check reads its value each
time it runs; the log cleaner restarts its threads with the new settings
(``log.cleaner.threads`` may at most halve or double, as in Kafka).  A key
pylog knows but cannot change while running (listeners, thread counts,
...) is refused as Kafka refuses a read-only key: INVALID_REQUEST
``Cannot update these configs dynamically: Set(...)``.  A name pylog does
not know is kept, as Kafka keeps custom configs, and has no effect.

The layers are saved in ``<log.dir>/pylog-dynamic-configs.json`` (next to
``pylog-topics.json`` and ``meta.properties``), written atomically (tmp +
fsync + rename) before the change is acknowledged, so it survives a crash.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from pylog.log.durable import write_atomically
from pylog.protocol import ErrorCode
from pylog.server import topic_configs
from pylog.server.config import IGNORED, KEYS, BrokerConfig, ConfigError

if TYPE_CHECKING:
    from pylog.log import LogManager
    from pylog.server.context import NodeServices
    from pylog.server.topics import TopicRegistry

log = logging.getLogger(__name__)

FILE = "pylog-dynamic-configs.json"

#: Kafka's dynamically updatable keys (cluster-wide, so also per-broker) that
#: pylog applies while running: the broker defaults of the topic configs,
#: the connection quotas and producer.id.expiration.ms.
DYNAMIC_KEYS = frozenset({
    "log.segment.bytes", "log.roll.ms", "log.roll.hours", "log.roll.jitter.ms",
    "log.roll.jitter.hours", "log.index.size.max.bytes", "log.flush.interval.messages",
    "log.flush.interval.ms", "log.retention.bytes", "log.retention.ms",
    "log.retention.minutes", "log.retention.hours", "log.index.interval.bytes",
    "log.cleanup.policy", "log.segment.delete.delay.ms", "min.insync.replicas",
    "message.max.bytes", "compression.type", "log.preallocate",
    "log.message.timestamp.type", "log.message.timestamp.difference.max.ms",
    "log.message.timestamp.before.max.ms", "log.message.timestamp.after.max.ms",
    # Kafka's DynamicConnectionQuota: new limits count the connections open.
    "max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
    # Kafka's DynamicProducerStateManagerConfig (KIP-854): read at each check.
    "producer.id.expiration.ms",
    # Kafka's LogCleaner.ReconfigurableConfigs (docs 3.1.1, "Updating Log
    # Cleaner Configs"): the threads restart with them (LogCleaner.reconfigure).
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size",
    "log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms",
    # Replication (Kafka's DynamicReplicationConfig and the controller's
    # unclean election, re-run when it changes).
    "unclean.leader.election.enable", "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
})
assert DYNAMIC_KEYS <= KEYS.keys()

#: Broker keys whose Kafka ConfigDef type is LIST (APPEND/SUBTRACT apply).
LIST_KEYS = {"log.cleanup.policy": "delete"}

# The Kafka-worded value checks of the topic configs, by their broker synonym.
_TOPIC_CHECKS = {d.broker_key: d.check for d in topic_configs.TOPIC_CONFIGS.values()
                 if d.broker_key in DYNAMIC_KEYS}


class DynamicConfigError(Exception):
    """A broker config change refused with a Kafka error code."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


# -- persistence ------------------------------------------------------------------


def load(config: BrokerConfig) -> None:
    """Put the saved dynamic layers into ``config`` (at start, before the logs
    open).  Values that no longer pass (a hand-edited file) are left out with
    an error in the log, as Kafka skips invalid dynamic configs at start."""
    path = config.log_dir / FILE
    if not path.exists():
        return
    saved = json.loads(path.read_text())
    default = dict(saved.get("cluster_default", {}))
    mine = dict(saved.get("brokers", {}).get(str(config.node_id), {}))
    try:
        config.adopt(config.with_dynamic(default, mine))
    except ConfigError as exc:
        log.error("ignoring the dynamic broker configs in %s: %s", path, exc)


def _save(config: BrokerConfig, default: Mapping[str, str], mine: Mapping[str, str]) -> None:
    path = config.log_dir / FILE
    brokers = {}
    if path.exists():
        brokers = dict(json.loads(path.read_text()).get("brokers", {}))
    brokers[str(config.node_id)] = dict(mine)
    write_atomically(path, json.dumps({"version": 1, "cluster_default": dict(default),
                                       "brokers": brokers}, indent=1, sort_keys=True).encode())


# -- checks ---------------------------------------------------------------------


def check_node_id(name: str, node_id: int) -> None:
    """Kafka's ConfigAdminManager.validateResourceNameIsCurrentNodeId: ``name``
    must be this node's id."""
    try:
        given = int(name)
    except ValueError:
        raise DynamicConfigError(ErrorCode.INVALID_REQUEST,
                                 f"Node id must be an integer, but it is: {name}") from None
    if given != node_id:
        raise DynamicConfigError(ErrorCode.INVALID_REQUEST,
                                 f"Unexpected broker id, expected {node_id}, but received {name}")


def check_name(name: str, node_id: int) -> bool:
    """Whether ``name`` is this broker (True) or the cluster default ("",
    False); a DynamicConfigError otherwise."""
    if not name:
        return False
    check_node_id(name, node_id)
    return True


def check_request(names: Iterable[str], null_names: Iterable[str]) -> None:
    """Kafka's preprocessing of one resource: no key twice, no null value."""
    names = list(names)
    if len(set(names)) != len(names):
        raise DynamicConfigError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = list(null_names)
    if nulls:
        raise DynamicConfigError(ErrorCode.INVALID_REQUEST,
                                 "Null value not supported for : " + ", ".join(nulls))


def _scala_set(names: list[str]) -> str:
    # Scala's Set.toString, as in Kafka's message (HashSet past four items).
    return f"{'Set' if len(names) <= 4 else 'HashSet'}({', '.join(names)})"


def current(config: BrokerConfig, per_broker: bool) -> dict[str, str]:
    return dict(config.dynamic_broker if per_broker else config.dynamic_default)


def validate(config: BrokerConfig, name: str, per_broker: bool,
             props: Mapping[str, str]) -> BrokerConfig:
    """The broker config with ``props`` as the whole dynamic set of the
    resource; refused as Kafka's DynamicBrokerConfig.validate refuses."""
    fixed = [k for k in props if k not in DYNAMIC_KEYS and (k in KEYS or k in IGNORED)]
    if fixed:
        raise DynamicConfigError(ErrorCode.INVALID_REQUEST,
                                 f"Cannot update these configs dynamically: {_scala_set(fixed)}")
    prefix = f"Invalid config value for resource ConfigResource(type=BROKER, name='{name}'): "
    clean = {}
    try:
        for key, raw in props.items():
            check = _TOPIC_CHECKS.get(key)
            clean[key] = check(key, raw) if check is not None else raw.strip()
            if key in KEYS:
                # Each value on its own, as Kafka parses every one it is
                # given: the broker's own value may hide a default's.
                KEYS[key][0](key, clean[key])
        default = config.dynamic_default if per_broker else clean
        mine = clean if per_broker else config.dynamic_broker
        candidate = config.with_dynamic(default, mine)
        _check_cleaner_threads(config.cleaner_config.threads, candidate.cleaner_config.threads)
        return candidate
    except ValueError as exc:  # ConfigError and ConfigValueError name the key
        raise DynamicConfigError(ErrorCode.INVALID_CONFIG, prefix + str(exc)) from None


def _check_cleaner_threads(current: int, new: int) -> None:
    """Kafka's LogCleaner.validateReconfiguration, with its words (Kafka
    wraps them in "Invalid dynamic configuration")."""
    if new == current:
        return
    if new < 1:
        why = "Log cleaner threads should be at least 1"
    elif new < current // 2:
        why = f"Log cleaner threads cannot be reduced to less than half the current value {current}"
    elif new > current * 2:
        why = ("Log cleaner threads cannot be increased to more than double the current value "
               f"{current}")
    else:
        return
    raise ValueError(f"Invalid dynamic configuration: {why}")


# -- the change itself ----------------------------------------------------------------


async def replace(node: NodeServices, name: str, props: Mapping[str, str],
                  validate_only: bool) -> None:
    """Make ``props`` the whole dynamic set of BROKER resource ``name``:
    checked, saved (this node's file, or a cluster's ZooKeeper, where every
    node follows the change notice), then in effect on everything the node
    runs."""
    per_broker = check_name(name, node.node_id)
    candidate = validate(node.config, name, per_broker, props)
    if validate_only:
        return
    await node.save_dynamic(candidate.dynamic_default if not per_broker else None,
                            candidate.dynamic_broker if per_broker else None)
    node.config.adopt(candidate)
    node.reconfigure(node.config)


def save(config: BrokerConfig, default: Mapping[str, str] | None,
         mine: Mapping[str, str] | None) -> None:
    """The single node's store of its dynamic layers (the file); None: unchanged."""
    _save(config, config.dynamic_default if default is None else default,
          config.dynamic_broker if mine is None else mine)




def push_defaults(config: BrokerConfig, logs: LogManager, topics: TopicRegistry,
                  explicit: Mapping[str, Mapping[str, str]]) -> None:
    """The new broker defaults to the logs: topics follow them where they have
    no override of their own (their LogConfig is the defaults with the
    topic's ``explicit`` configs over them); partitions created later start
    with them."""
    default = config.log_config
    logs.default_config = default
    topics.default_config = default
    for name, configs in list(explicit.items()):
        topic_config = topics.log_config(dict(configs))
        if topic_config != logs.config_for(name):
            logs.update_topic_config(name, topic_config)
