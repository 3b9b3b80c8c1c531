"""Kafka 3.6 topic-level configs (docs section 3.2): names, checks, defaults, sources.

Every name of the section is accepted, checked as Kafka's ``LogConfig``
checks it, stored with the topic and shown by DescribeConfigs.  Those that
mean something to one node are handed to :class:`~pylog.log.LogConfig`, which
the partition logs read (retention, segments, indexes, max.message.bytes,
message.timestamp.type, flush, preallocate, min.insync.replicas,
cleanup.policy and the cleaner's delete.retention.ms, min.cleanable.dirty.ratio
and compaction lags); the rest (replication throttles, remote storage, ...)
are stored and shown, as they would be by a Kafka broker with that
feature idle.

A value's source follows Kafka: DYNAMIC_TOPIC_CONFIG when set on the topic,
then the broker's synonym (``log.retention.ms`` for ``retention.ms``) as a
dynamic per-broker config, a dynamic cluster-wide default, or in
server.properties (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
STATIC_BROKER_CONFIG), else DEFAULT_CONFIG.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from pylog.log.config import LONG_MAX, LogConfig

INT_MAX = 2**31 - 1

# DescribeConfigs ConfigSource values
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
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
    # Kafka 3.6's ValidList takes an empty list too (no policy at all).
    def check(key: str, raw: str) -> str:
        items = [s.strip() for s in raw.split(",") if s.strip()]
        bad = [s for s in items if s not in options]
        if bad:
            raise ConfigValueError(f"Invalid value {raw} for configuration {key}: "
                                   f"must be a list of {', '.join(options)}")
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


# MetadataVersion strings: 0.8.0, 0.10.0-IV1, 2.8, 3.6-IV2, 3.0.1, ...
_METADATA_VERSION = re.compile(r"\d+\.\d+(\.\d+)?(-IV\d+)?")


def _metadata_version(key: str, raw: str) -> str:
    # Deprecated and ignored since 3.0, but Kafka still parses it
    # (MetadataVersionValidator): an unparsable value is refused.
    value = raw.strip()
    if not _METADATA_VERSION.fullmatch(value):
        raise ConfigValueError(f"Invalid value {raw} for configuration {key}: "
                               f"Version {value} is not a valid version")
    return value


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
         "log.cleanup.policy", "The retention policy to use on log segments: delete "
         "(retention), compact (the log cleaner keeps the latest record of each key), or both."),
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
         None, "Replicas whose log replication is throttled on the follower side."),
    _def("index.interval.bytes", _int_range(0, INT_MAX), 4096, INT,
         "log.index.interval.bytes", "How often an offset index entry is added."),
    _def("leader.replication.throttled.replicas", _replicas, "", LIST,
         None, "Replicas whose log replication is throttled on the leader side."),
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
    _def("message.format.version", _metadata_version, "3.0-IV1", STRING,
         "log.message.format.version",
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
         "log.cleaner.min.cleanable.ratio", "How dirty a log gets before the cleaner compacts it."),
    _def("min.compaction.lag.ms", _LONG_NONNEG, 0, LONG, "log.cleaner.min.compaction.lag.ms",
         "The least time a message stays uncompacted."),
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
         "unclean.leader.election.enable",
         "Out-of-ISR replicas may lead when no in-sync one lives (the controller's)."),
)}

# Topic configs whose broker key has lower-precedence synonyms in Kafka
# (ServerTopicConfigSynonyms): log.retention.ms > .minutes > .hours, each
# with the factor from its own unit to the topic config's milliseconds.
_SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    "retention.ms": (("log.retention.ms", 1), ("log.retention.minutes", 60_000),
                     ("log.retention.hours", 3_600_000)),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", 3_600_000)),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", 3_600_000)),
}
# Kafka's defaults of those broker keys, in their own units.  The .ms and
# .minutes keys have none (null), so DescribeConfigs lists the hours default.
_SYNONYM_DEFAULTS = {"log.retention.hours": "168", "log.roll.hours": "168",
                     "log.roll.jitter.hours": "0"}
MIN_LAG, MAX_LAG = "min.compaction.lag.ms", "max.compaction.lag.ms"


def validate(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check every name and value, then the combination; returns the
    normalised strings.  A :class:`ConfigValueError` names the first bad key."""
    out: dict[str, str] = {}
    for key, raw in configs.items():
        found = TOPIC_CONFIGS.get(key)
        if found is None:
            raise ConfigValueError(f"Unknown topic config name: {key}")
        if raw is None:
            raise ConfigValueError(f"Null value not supported for topic config: {key}")
        out[key] = found.check(key, raw)
    _check_compaction_lag(out)
    return out


def _check_compaction_lag(configs: Mapping[str, str]) -> None:
    # Kafka's LogConfig.validateValues checks the topic's overrides over the
    # broker defaults; here over Kafka's own defaults (a topic setting only one
    # of the two is not checked against a log.cleaner.*.lag.ms in server.properties).
    lo = int(configs.get(MIN_LAG, TOPIC_CONFIGS[MIN_LAG].default))
    hi = int(configs.get(MAX_LAG, TOPIC_CONFIGS[MAX_LAG].default))
    if lo > hi:
        raise ConfigValueError(f"conflict topic config setting {MIN_LAG} ({lo}) > "
                               f"{MAX_LAG} ({hi})")


def log_config(configs: Mapping[str, str], base: LogConfig) -> LogConfig:
    """The LogConfig a partition log runs with: the broker defaults (``base``)
    with the topic's explicit configs over them.  Names LogConfig does not
    model are kept in its ``extra`` (not strict: they were validated above)."""
    if not configs:
        return base
    return LogConfig.from_props(configs, base=base)


def _broker_synonyms(d: TopicConfigDef) -> tuple[tuple[str, int], ...]:
    """The broker keys that give ``d`` its default, most specific first."""
    if d.name in _SYNONYMS:
        return _SYNONYMS[d.name]
    return () if d.broker_key is None else ((d.broker_key, 1),)


def _broker_default(d: TopicConfigDef, key: str) -> str | None:
    """Kafka's default of broker key ``key`` in its own unit (None: no default)."""
    return _SYNONYM_DEFAULTS.get(key) if d.name in _SYNONYMS else d.default


def _in_topic_unit(raw: str, factor: int) -> str:
    # As Kafka's KafkaConfig.logRetentionTimeMillis: a negative value is not
    # scaled (-1: unlimited).
    try:
        value = int(raw)
    except ValueError:
        return raw
    return str(value if value < 0 else value * factor)


class BrokerLayers(Protocol):
    """What a topic's config description reads of the broker's
    (pylog.server.config.BrokerConfig, not imported: it imports this module)."""

    def merged(self) -> Mapping[str, str]: ...

    def layers(self) -> Iterable[tuple[int, Mapping[str, str]]]: ...


def _effective(d: TopicConfigDef, explicit: Mapping[str, str], broker: BrokerLayers) -> str:
    """The value the topic runs with, in the topic config's own unit."""
    if d.name in explicit:
        return explicit[d.name]
    merged = broker.merged()  # ms over minutes over hours whatever their layers
    for key, factor in _broker_synonyms(d):
        if key in merged:
            return _in_topic_unit(merged[key], factor)
    return d.default


def _synonym_chain(d: TopicConfigDef, explicit: Mapping[str, str],
                   broker: BrokerLayers) -> list[dict[str, object]]:
    """Kafka's synonym list (ConfigHelper.configSynonyms), highest precedence
    first: the topic's override, the broker keys set dynamically for this
    broker, as cluster-wide defaults, in server.properties, then the broker
    keys' defaults; each under its own name and in its own unit
    (log.retention.hours=1, not 3600000)."""
    chain: list[dict[str, object]] = []
    if d.name in explicit:
        chain.append({"name": d.name, "value": explicit[d.name],
                      "source": DYNAMIC_TOPIC_CONFIG})
    keys = [key for key, _ in _broker_synonyms(d)]
    for source, values in broker.layers():
        chain += [{"name": key, "value": values[key], "source": source}
                  for key in keys if key in values]
    for key in keys:
        default = _broker_default(d, key)
        if default is not None:
            chain.append({"name": key, "value": default, "source": DEFAULT_CONFIG})
    return chain


def describe(explicit: Mapping[str, str], broker: BrokerLayers, keys: object = None,
             synonyms: bool = False, documentation: bool = False) -> list[dict[str, object]]:
    """DescribeConfigs entries of one topic, each with its source."""
    wanted = set(keys) if keys is not None else None  # type: ignore[arg-type]
    out: list[dict[str, object]] = []
    for name, d in TOPIC_CONFIGS.items():
        if wanted is not None and name not in wanted:
            continue
        chain = _synonym_chain(d, explicit, broker)
        source = chain[0]["source"] if chain else DEFAULT_CONFIG
        out.append({"name": name, "value": _effective(d, explicit, broker), "read_only": False,
                    "is_default": source == DEFAULT_CONFIG,
                    "config_source": source, "is_sensitive": False,
                    "synonyms": chain if synonyms else [], "config_type": d.config_type,
                    "documentation": d.documentation if documentation else None})
    return out
