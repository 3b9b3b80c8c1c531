"""Kafka 3.6 topic-level configs (docs section 3.2): names, checks, defaults, sources.

Every name of the section is accepted, checked as Kafka's ``LogConfig``
checks it, stored with the topic and shown by DescribeConfigs.  Those that
mean something to one node are handed to :class:`~pylog.log.LogConfig`, which
the partition logs read (retention, segments, indexes, max.message.bytes,
message.timestamp.type, flush, preallocate, min.insync.replicas,
cleanup.policy); the rest (replication throttles, remote storage, compaction
lag, ...) are stored and shown, as they would be by a Kafka broker with that
feature idle.

A value's source follows Kafka: DYNAMIC_TOPIC_CONFIG when set on the topic,
STATIC_BROKER_CONFIG when the broker's synonym (``log.retention.ms`` for
``retention.ms``) is set in server.properties, else DEFAULT_CONFIG.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pylog.log.config import LONG_MAX, LogConfig

if TYPE_CHECKING:
    from pylog.server.config import BrokerConfig

INT_MAX = 2**31 - 1

# DescribeConfigs ConfigSource values
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
# DescribeConfigs v3+ config_type values
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = range(1, 10)


class ConfigValueError(ValueError):
    """A topic config name or value Kafka would refuse (INVALID_CONFIG)."""


def _int_range(lo: int, hi: int) -> Callable[[str, str], str]:
    def check(key: str, raw: str) -> str:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ConfigValueError(f"Invalid value {raw} for configuration {key}: "
                                   "Not a number of type "
                                   f"{'INT' if hi == INT_MAX else 'LONG'}") from None
        if not lo <= value <= hi:
            raise ConfigValueError(f"Invalid value {value} for configuration {key}: "
                                   f"Value must be at least {lo}" if value < lo else
                                   f"Invalid value {value} for configuration {key}: "
                                   f"Value must be no more than {hi}")
        return str(value)
    return check


def _double(lo: float, hi: float) -> Callable[[str, str], str]:
    def check(key: str, raw: str) -> str:
        try:
            value = float(raw.strip())
        except ValueError:
            raise ConfigValueError(f"Invalid value {raw} for configuration {key}: "
                                   "Not a number of type DOUBLE") from None
        if not lo <= value <= hi:
            raise ConfigValueError(f"Invalid value {value} for configuration {key}: "
                                   f"Value must be in [{lo}, {hi}]")
        return raw.strip()
    return check


def _bool(key: str, raw: str) -> str:
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise ConfigValueError(f"Invalid value {raw} for configuration {key}: "
                               "Expected value to be either true or false")
    return value


def _one_of(*options: str) -> Callable[[str, str], str]:
    def check(key: str, raw: str) -> str:
        value = raw.strip()
        if value not in options:
            raise ConfigValueError(f"Invalid value {raw} for configuration {key}: "
                                   f"String must be one of: {', '.join(options)}")
        return value
    return check


def _list_of(*options: str) -> Callable[[str, str], str]:
    def check(key: str, raw: str) -> str:
        items = [s.strip() for s in raw.split(",") if s.strip()]
        bad = [s for s in items if s not in options]
        if bad or not items:
            raise ConfigValueError(f"Invalid value {raw} for configuration {key}: "
                                   f"must be a non-empty list of {', '.join(options)}")
        return ",".join(items)
    return check


def _replicas(key: str, raw: str) -> str:
    # "*" or partition:broker pairs, as ThrottledReplicaListValidator checks.
    value = raw.strip()
    if value in ("", "*"):
        return value
    for item in value.split(","):
        part, colon, node = item.strip().partition(":")
        if not (colon and part.isdigit() and node.isdigit()):
            raise ConfigValueError(f"Invalid value {raw} for configuration {key}: must be "
                                   "the literal '*' or a list of replicas in the format "
                                   "[partitionId]:[brokerId],...")
    return value


def _string(key: str, raw: str) -> str:
    return raw.strip()


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    name: str
    check: Callable[[str, str], str]
    default: str
    config_type: int
    broker_key: str | None  # the server.properties synonym that gives the default
    documentation: str


def _def(name: str, check: Callable[[str, str], str], default: object, config_type: int,
         broker_key: str | None, doc: str) -> TopicConfigDef:
    return TopicConfigDef(name, check, str(default), config_type, broker_key, doc)


_LONG_NONNEG = _int_range(0, LONG_MAX)

#: The topic-level configs of Kafka 3.6, with their server default synonyms.
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in (
    _def("cleanup.policy", _list_of("delete", "compact"), "delete", LIST,
         "log.cleanup.policy", "The retention policy to use on log segments (stored; "
         "pylog does not compact)."),
    _def("compression.type", _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip",
                                     "producer"),
         "producer", STRING, "compression.type", "The final compression type for a topic: "
         "batches in another codec are re-encoded on append; 'producer' keeps theirs."),
    _def("delete.retention.ms", _LONG_NONNEG, 86_400_000, LONG,
         "log.cleaner.delete.retention.ms", "How long delete tombstones are retained."),
    _def("file.delete.delay.ms", _LONG_NONNEG, 60_000, LONG, "log.segment.delete.delay.ms",
         "The time to wait before deleting a file from the filesystem."),
    _def("flush.messages", _int_range(1, LONG_MAX), LONG_MAX, LONG,
         "log.flush.interval.messages", "Force an fsync after this many messages."),
    _def("flush.ms", _LONG_NONNEG, LONG_MAX, LONG, "log.flush.interval.ms",
         "Force an fsync when data is this old."),
    _def("follower.replication.throttled.replicas", _replicas, "", LIST,
         "follower.replication.throttled.replicas",
         "Replicas whose log replication is throttled on the follower side."),
    _def("index.interval.bytes", _int_range(0, INT_MAX), 4096, INT,
         "log.index.interval.bytes", "How often an offset index entry is added."),
    _def("leader.replication.throttled.replicas", _replicas, "", LIST,
         "leader.replication.throttled.replicas",
         "Replicas whose log replication is throttled on the leader side."),
    _def("local.retention.bytes", _int_range(-2, LONG_MAX), -2, LONG,
         "log.local.retention.bytes", "Local retention with tiered storage (stored)."),
    _def("local.retention.ms", _int_range(-2, LONG_MAX), -2, LONG, "log.local.retention.ms",
         "Local retention with tiered storage (stored)."),
    _def("max.compaction.lag.ms", _int_range(1, LONG_MAX), LONG_MAX, LONG,
         "log.cleaner.max.compaction.lag.ms", "The longest a message stays uncompacted."),
    _def("max.message.bytes", _int_range(0, INT_MAX), 1_048_588, INT, "message.max.bytes",
         "The largest record batch size allowed."),
    _def("message.downconversion.enable", _bool, "true", BOOLEAN,
         "log.message.downconversion.enable", "Whether old consumers get down-converted "
         "batches (stored; pylog serves magic 2 only)."),
    _def("message.format.version", _string, "3.0-IV1", STRING, "log.message.format.version",
         "Deprecated; ignored for inter-broker protocol 3.0 and later."),
    _def("message.timestamp.after.max.ms", _LONG_NONNEG, LONG_MAX, LONG,
         "log.message.timestamp.after.max.ms",
         "How far in the future a CreateTime timestamp may be."),
    _def("message.timestamp.before.max.ms", _LONG_NONNEG, LONG_MAX, LONG,
         "log.message.timestamp.before.max.ms",
         "How far in the past a CreateTime timestamp may be."),
    _def("message.timestamp.difference.max.ms", _LONG_NONNEG, LONG_MAX, LONG,
         "log.message.timestamp.difference.max.ms",
         "Deprecated: before/after.max.ms when those are not set."),
    _def("message.timestamp.type", _one_of("CreateTime", "LogAppendTime"), "CreateTime",
         STRING, "log.message.timestamp.type",
         "Whether record timestamps are the producer's or the append time."),
    _def("min.cleanable.dirty.ratio", _double(0.0, 1.0), "0.5", DOUBLE,
         "log.cleaner.min.cleanable.ratio", "When the log compactor cleans (stored)."),
    _def("min.compaction.lag.ms", _LONG_NONNEG, 0, LONG, "log.cleaner.min.compaction.lag.ms",
         "The least time a message stays uncompacted (stored)."),
    _def("min.insync.replicas", _int_range(1, INT_MAX), 1, INT, "min.insync.replicas",
         "The fewest in-sync replicas for acks=all."),
    _def("preallocate", _bool, "false", BOOLEAN, "log.preallocate",
         "Preallocate segment files."),
    _def("remote.storage.enable", _bool, "false", BOOLEAN, None,
         "Tiered storage (stored; pylog has no remote tier)."),
    _def("retention.bytes", _int_range(-1, LONG_MAX), -1, LONG, "log.retention.bytes",
         "The largest a partition may grow before old segments go (-1: no limit)."),
    _def("retention.ms", _int_range(-1, LONG_MAX), 604_800_000, LONG, "log.retention.ms",
         "How long segments are kept (-1: forever)."),
    _def("segment.bytes", _int_range(14, INT_MAX), 1_073_741_824, INT, "log.segment.bytes",
         "The segment file size."),
    _def("segment.index.bytes", _int_range(4, INT_MAX), 10_485_760, INT,
         "log.index.size.max.bytes", "The size of a segment's offset and time indexes."),
    _def("segment.jitter.ms", _LONG_NONNEG, 0, LONG, "log.roll.jitter.ms",
         "The most random jitter subtracted from segment.ms."),
    _def("segment.ms", _int_range(1, LONG_MAX), 604_800_000, LONG, "log.roll.ms",
         "Roll a segment after this long even when it is not full."),
    _def("unclean.leader.election.enable", _bool, "false", BOOLEAN,
         "unclean.leader.election.enable", "Out-of-ISR leaders (stored; one node)."),
)}

# Broker keys that feed the same topic config at lower precedence
# (Kafka: log.retention.ms > log.retention.minutes > log.retention.hours).
_LOWER_SYNONYMS: dict[str, tuple[str, ...]] = {
    "retention.ms": ("log.retention.minutes", "log.retention.hours"),
    "segment.ms": ("log.roll.hours",),
    "segment.jitter.ms": ("log.roll.jitter.hours",),
}
_SYNONYM_SCALE = {"log.retention.minutes": 60_000, "log.retention.hours": 3_600_000,
                  "log.roll.hours": 3_600_000, "log.roll.jitter.hours": 3_600_000}


def validate(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check every name and value; returns the normalised strings.  A
    :class:`ConfigValueError` names the first bad key."""
    out: dict[str, str] = {}
    for key, raw in configs.items():
        found = TOPIC_CONFIGS.get(key)
        if found is None:
            raise ConfigValueError(f"Unknown topic config name: {key}")
        if raw is None:
            raise ConfigValueError(f"Null value not supported for topic config: {key}")
        out[key] = found.check(key, raw)
    return out


def log_config(configs: Mapping[str, str], base: LogConfig) -> LogConfig:
    """The LogConfig a partition log runs with: the broker defaults (``base``)
    with the topic's explicit configs over them.  Names LogConfig does not
    model are kept in its ``extra`` (not strict: they were validated above)."""
    if not configs:
        return base
    return LogConfig.from_props(configs, base=base)


def _broker_value(broker: BrokerConfig, key: str) -> tuple[str, str] | None:
    """(broker key, value as the topic config's unit) when server.properties sets it."""
    d = TOPIC_CONFIGS[key]
    originals = broker.originals
    if d.broker_key is not None and d.broker_key in originals:
        return d.broker_key, originals[d.broker_key]
    for synonym in _LOWER_SYNONYMS.get(key, ()):
        if synonym in originals:
            raw = originals[synonym]
            try:
                return synonym, str(int(raw) * _SYNONYM_SCALE[synonym])
            except ValueError:
                return synonym, raw
    return None


def describe(explicit: Mapping[str, str], broker: BrokerConfig, keys: object = None,
             synonyms: bool = False, documentation: bool = False) -> list[dict[str, object]]:
    """DescribeConfigs entries of one topic, each with its source."""
    wanted = set(keys) if keys is not None else None  # type: ignore[arg-type]
    out: list[dict[str, object]] = []
    for name, d in TOPIC_CONFIGS.items():
        if wanted is not None and name not in wanted:
            continue
        chain: list[dict[str, object]] = []
        if name in explicit:
            chain.append({"name": name, "value": explicit[name], "source": DYNAMIC_TOPIC_CONFIG})
        static = _broker_value(broker, name)
        if static is not None:
            chain.append({"name": static[0], "value": static[1], "source": STATIC_BROKER_CONFIG})
        chain.append({"name": d.broker_key or name, "value": d.default, "source": DEFAULT_CONFIG})
        top = chain[0]
        out.append({"name": name, "value": top["value"], "read_only": False,
                    "is_default": top["source"] == DEFAULT_CONFIG,
                    "config_source": top["source"], "is_sensitive": False,
                    "synonyms": chain if synonyms else [], "config_type": d.config_type,
                    "documentation": d.documentation if documentation else None})
    return out
