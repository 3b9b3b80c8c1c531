"""Per-log configuration: Kafka's topic configs, their defaults and checks.

:class:`ManagerConfig` holds the log manager's own broker settings (the
periodic-task intervals), including the pylog-specific ``log.cache.drop.idle.ms``.

Values come from topic configs (``segment.bytes``) or from the broker's
``server.properties`` defaults (``log.segment.bytes``, ``log.roll.hours``, ...),
both as strings.  A bad value raises ``ValueError`` naming the key, the value
and what is allowed, as Kafka's ``ConfigDef`` does.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("delete", "compact")


@dataclass(frozen=True)
class LogConfig:
    """One partition log's settings (Kafka 3.6 names and defaults)."""

    segment_bytes: int = 1024 * 1024 * 1024            # segment.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000             # segment.ms
    segment_jitter_ms: int = 0                         # segment.jitter.ms
    segment_index_bytes: int = 10 * 1024 * 1024        # segment.index.bytes
    index_interval_bytes: int = 4096                   # index.interval.bytes
    retention_ms: int = 7 * 24 * 3600 * 1000           # retention.ms (-1: forever)
    retention_bytes: int = -1                          # retention.bytes (-1: no limit)
    flush_messages: int = LONG_MAX                     # flush.messages
    flush_ms: int = LONG_MAX                           # flush.ms
    file_delete_delay_ms: int = 60_000                 # file.delete.delay.ms
    max_message_bytes: int = 1024 * 1024 + 12          # max.message.bytes
    message_timestamp_type: str = "CreateTime"         # message.timestamp.type
    message_timestamp_before_max_ms: int = LONG_MAX    # message.timestamp.before.max.ms
    message_timestamp_after_max_ms: int = LONG_MAX     # message.timestamp.after.max.ms
    message_timestamp_difference_max_ms: int = LONG_MAX  # (deprecated in 3.6)
    compression_type: str = "producer"                 # compression.type
    cleanup_policy: tuple[str, ...] = ("delete",)      # cleanup.policy
    preallocate: bool = False                          # preallocate
    min_insync_replicas: int = 1                       # min.insync.replicas
    # Compaction (cleanup.policy=compact; pylog.log.cleaner)
    delete_retention_ms: int = 24 * 3600 * 1000        # delete.retention.ms
    min_cleanable_dirty_ratio: float = 0.5             # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0                     # min.compaction.lag.ms
    max_compaction_lag_ms: int = LONG_MAX              # max.compaction.lag.ms
    extra: Mapping[str, str] = field(default_factory=dict, compare=False)

    def random_segment_jitter(self) -> int:
        """The roll jitter of a new segment, as Kafka's ``randomSegmentJitter``:
        drawn once per segment, uniformly from ``[0, min(segment.jitter.ms,
        segment.ms))``, so a segment rolls between ``segment.ms - jitter`` and
        ``segment.ms`` and never sooner than 1 ms of timestamps after its first."""
        if self.segment_jitter_ms <= 0:
            return 0
        return random.randrange(min(self.segment_jitter_ms, self.segment_ms))

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def flush_enabled(self) -> bool:
        return self.flush_messages != LONG_MAX or self.flush_ms != LONG_MAX

    @property
    def timestamp_window_ms(self) -> tuple[int, int] | None:
        """How far before and after the append time a CreateTime record's
        timestamp may be, or None for no limit: as Kafka 3.6's LogConfig, each
        of before/after falls back to the deprecated difference.max.ms."""
        if self.message_timestamp_type != "CreateTime":
            return None
        diff = self.message_timestamp_difference_max_ms
        before = self.message_timestamp_before_max_ms
        after = self.message_timestamp_after_max_ms
        before = diff if before == LONG_MAX else before
        after = diff if after == LONG_MAX else after
        if before == after == LONG_MAX:
            return None
        return before, after

    @property
    def max_index_entries(self) -> int:
        return self.segment_index_bytes // 8

    @classmethod
    def from_props(cls, props: Mapping[str, str] | None = None, *,
                   base: LogConfig | None = None, strict: bool = False) -> LogConfig:
        """Build from topic configs and/or broker ``log.*`` defaults.

        Topic names win over broker names; among broker names ``log.retention.ms``
        wins over ``.minutes`` over ``.hours`` and ``log.roll.ms`` over
        ``log.roll.hours``, as in Kafka.  Unknown keys are ignored (a
        server.properties holds many other settings) unless ``strict``.
        """
        props = dict(props or {})
        values: dict[str, Any] = {} if base is None else {
            f.name: getattr(base, f.name) for f in dataclasses.fields(cls)}
        used: set[str] = set()

        def take(names: tuple[str, ...], attr: str, conv: Callable[[str, str], Any]) -> None:
            # names: the most specific first; every given one is checked
            present = [n for n in names if n in props]
            for name in reversed(present):
                values[attr] = conv(name, props[name])
            used.update(present)

        take(("log.roll.hours",), "segment_ms", _scaled(3_600_000, 1))
        take(("log.roll.jitter.hours",), "segment_jitter_ms", _scaled(3_600_000, 0))
        take(("log.retention.hours",), "retention_ms", _scaled(3_600_000, -1))
        take(("log.retention.minutes",), "retention_ms", _scaled(60_000, -1))
        for attr, (topic_key, broker_key, conv) in _KEYS.items():
            take((topic_key, broker_key), attr, conv)
        unknown = sorted(set(props) - used - _BROKER_ONLY)
        if strict and unknown:
            raise ValueError(f"unknown log config {unknown[0]!r}; known: "
                             f"{', '.join(sorted(k for k, _, _ in _KEYS.values()))}")
        values["extra"] = {k: props[k] for k in unknown}
        return cls(**values)

    def to_props(self) -> dict[str, str]:
        """Topic-config view (names and string values), e.g. for DescribeConfigs."""
        out: dict[str, str] = {}
        for attr, (topic_key, _, _) in _KEYS.items():
            value = getattr(self, attr)
            if isinstance(value, tuple):
                out[topic_key] = ",".join(value)
            elif isinstance(value, bool):
                out[topic_key] = str(value).lower()
            else:
                out[topic_key] = str(value)
        return out


def int_value(lo: int = -LONG_MAX - 1, hi: int = LONG_MAX) -> Callable[[str, str], int]:
    """A parser of an integer config value in [lo, hi]: (key, raw) -> int,
    ValueError naming the key (shared by topic, log manager and broker configs)."""
    return _number(int, lo, hi)


def double_value(lo: float, hi: float) -> Callable[[str, str], float]:
    """A parser of a floating-point config value in [lo, hi] (Java's double)."""
    return _number(float, lo, hi)


def _number(kind: Callable[[str], Any], lo: Any, hi: Any) -> Callable[[str, str], Any]:
    def conv(key: str, raw: str) -> Any:
        try:
            value = kind(str(raw).strip())
        except ValueError:
            raise ValueError(f"invalid value {raw!r} for configuration {key}: "
                             "not a number") from None
        if not lo <= value <= hi:
            raise ValueError(f"invalid value {value} for configuration {key}: "
                             f"value must be in [{lo}, {hi}]")
        return value
    return conv


def _scaled(unit_ms: int, lo: int) -> Callable[[str, str], int]:
    check = int_value(lo)

    def conv(key: str, raw: str) -> int:
        value = check(key, raw)
        return value if value < 0 else value * unit_ms
    return conv


def _choice(options: tuple[str, ...]) -> Callable[[str, str], str]:
    def conv(key: str, raw: str) -> str:
        value = str(raw).strip()
        if value not in options:
            raise ValueError(f"invalid value {raw!r} for configuration {key}: "
                             f"must be one of {', '.join(options)}")
        return value
    return conv


def _policy(key: str, raw: str) -> tuple[str, ...]:
    # Kafka 3.6's ValidList takes an empty list: neither delete nor compact.
    parts = tuple(p.strip() for p in str(raw).split(",") if p.strip())
    if any(p not in CLEANUP_POLICIES for p in parts):
        raise ValueError(f"invalid value {raw!r} for configuration {key}: "
                         f"must be a list of {', '.join(CLEANUP_POLICIES)}")
    return parts


def bool_value(key: str, raw: str) -> bool:
    value = str(raw).strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"invalid value {raw!r} for configuration {key}: "
                         "must be true or false")
    return value == "true"


# attribute -> (topic config name, broker default name, converter)
_KEYS: dict[str, tuple[str, str, Callable[[str, str], Any]]] = {
    "segment_bytes": ("segment.bytes", "log.segment.bytes", int_value(14, INT_MAX)),
    "segment_ms": ("segment.ms", "log.roll.ms", int_value(1)),
    "segment_jitter_ms": ("segment.jitter.ms", "log.roll.jitter.ms", int_value(0)),
    "segment_index_bytes": ("segment.index.bytes", "log.index.size.max.bytes",
                            int_value(4, INT_MAX)),
    "index_interval_bytes": ("index.interval.bytes", "log.index.interval.bytes",
                             int_value(0, INT_MAX)),
    "retention_ms": ("retention.ms", "log.retention.ms", int_value(-1)),
    "retention_bytes": ("retention.bytes", "log.retention.bytes", int_value(-1)),
    "flush_messages": ("flush.messages", "log.flush.interval.messages", int_value(1)),
    "flush_ms": ("flush.ms", "log.flush.interval.ms", int_value(0)),
    "file_delete_delay_ms": ("file.delete.delay.ms", "log.segment.delete.delay.ms",
                             int_value(0)),
    "max_message_bytes": ("max.message.bytes", "message.max.bytes", int_value(0, INT_MAX)),
    "message_timestamp_type": ("message.timestamp.type", "log.message.timestamp.type",
                               _choice(TIMESTAMP_TYPES)),
    "message_timestamp_before_max_ms": ("message.timestamp.before.max.ms",
                                        "log.message.timestamp.before.max.ms", int_value(0)),
    "message_timestamp_after_max_ms": ("message.timestamp.after.max.ms",
                                       "log.message.timestamp.after.max.ms", int_value(0)),
    "message_timestamp_difference_max_ms": ("message.timestamp.difference.max.ms",
                                            "log.message.timestamp.difference.max.ms",
                                            int_value(0)),
    "compression_type": ("compression.type", "compression.type",
                         _choice(("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"))),
    "cleanup_policy": ("cleanup.policy", "log.cleanup.policy", _policy),
    "preallocate": ("preallocate", "log.preallocate", bool_value),
    "min_insync_replicas": ("min.insync.replicas", "min.insync.replicas", int_value(1, INT_MAX)),
    "delete_retention_ms": ("delete.retention.ms", "log.cleaner.delete.retention.ms",
                            int_value(0)),
    "min_cleanable_dirty_ratio": ("min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio",
                                  double_value(0.0, 1.0)),
    "min_compaction_lag_ms": ("min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms",
                              int_value(0)),
    "max_compaction_lag_ms": ("max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms",
                              int_value(1)),
}

# Broker settings of the log manager itself, not per-log; accepted silently.
# (ManagerConfig reads the interval ones; the log.cache.drop.* keys are pylog's own.)
_BROKER_ONLY = {"log.retention.check.interval.ms", "log.flush.scheduler.interval.ms",
                "log.dir", "log.dirs", "log.flush.offset.checkpoint.interval.ms",
                "log.flush.start.offset.checkpoint.interval.ms", "log.cache.drop.idle.ms",
                "log.cache.drop.behind.bytes",
                "log.cleaner.enable", "log.cleaner.threads", "log.cleaner.dedupe.buffer.size",
                "log.cleaner.io.buffer.size", "log.cleaner.io.buffer.load.factor",
                "log.cleaner.backoff.ms", "log.cleaner.io.max.bytes.per.second"}


# -- the log manager's own settings ---------------------------------------------

#: pylog-specific (not a Kafka setting): see :class:`ManagerConfig`.
CACHE_DROP_IDLE_MS = "log.cache.drop.idle.ms"
#: pylog-specific (not a Kafka setting): see :class:`ManagerConfig`.
CACHE_DROP_BEHIND_BYTES = "log.cache.drop.behind.bytes"


@dataclass(frozen=True)
class ManagerConfig:
    """Settings of the log manager's periodic work (broker-level, not per log).

    Kafka 3.6 broker config names and defaults, plus one pylog-specific key:

    * ``log.retention.check.interval.ms`` (300000, >= 1): how often retention
      looks for deletable segments.
    * ``log.flush.scheduler.interval.ms`` (Long.MaxValue, >= 1): how often
      logs are checked against their ``flush.ms``.  Kafka's default is
      Long.MaxValue, i.e. never: with it, only ``flush.messages`` (on append),
      rolled segments (flushed soon after a roll, as Kafka does asynchronously)
      and shutdown flush.
    * ``log.flush.offset.checkpoint.interval.ms`` (60000, >= 0): how often
      the recovery points are written to ``recovery-point-offset-checkpoint``
      (0: only at topic deletion and shutdown).
    * ``log.flush.start.offset.checkpoint.interval.ms`` (60000, >= 0): the
      same for ``log-start-offset-checkpoint``.
    * ``replica.high.watermark.checkpoint.interval.ms`` (5000, >= 1): the
      same for ``replication-offset-checkpoint`` (the high watermarks).
    * ``log.cache.drop.idle.ms`` (600000, -1 or >= 0) -- **pylog-specific, not
      a Kafka setting**: inactive segments that are flushed and were not read
      for this long get ``POSIX_FADV_DONTNEED`` so they stop taking page cache
      from the hot tail; checked every ``log.retention.check.interval.ms``;
      -1 disables dropping.
    * ``log.cache.drop.behind.bytes`` (-1, -1 or >= 0) -- **pylog-specific,
      not a Kafka setting**: each partition keeps this many of its newest bytes
      in the page cache; data further behind its end is written back and
      evicted as appends go on, so new appends reuse those pages instead of
      growing the cache (see :mod:`pylog.log.drop_behind`).  -1, the default,
      leaves the cache to the kernel, as Kafka does; 8388608 (eight of a
      consumer's 1 MiB ``max.partition.fetch.bytes`` fetches of lag served
      from memory) suits a VM whose host backs memory on first touch.
    """

    retention_check_interval_ms: int = 300_000           # log.retention.check.interval.ms
    flush_scheduler_interval_ms: int = LONG_MAX          # log.flush.scheduler.interval.ms
    flush_offset_checkpoint_interval_ms: int = 60_000    # log.flush.offset.checkpoint.interval.ms
    flush_start_offset_checkpoint_interval_ms: int = 60_000
    cache_drop_idle_ms: int = 600_000                    # log.cache.drop.idle.ms (pylog)
    cache_drop_behind_bytes: int = -1                    # log.cache.drop.behind.bytes (pylog)
    hw_checkpoint_interval_ms: int = 5_000  # replica.high.watermark.checkpoint.interval.ms

    def __post_init__(self) -> None:
        for attr, (key, conv) in _MANAGER_KEYS.items():
            value = getattr(self, attr)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"invalid value {value!r} for configuration {key}: "
                                 "not an integer")
            conv(key, str(value))

    @classmethod
    def from_props(cls, props: Mapping[str, str] | None = None) -> ManagerConfig:
        """From broker properties (strings); other keys are ignored.  A bad
        value raises ``ValueError`` naming the key."""
        props = props or {}
        values = {attr: conv(key, props[key])
                  for attr, (key, conv) in _MANAGER_KEYS.items() if key in props}
        return cls(**values)

    def to_props(self) -> dict[str, str]:
        return {key: str(getattr(self, attr)) for attr, (key, _) in _MANAGER_KEYS.items()}


_MANAGER_KEYS: dict[str, tuple[str, Callable[[str, str], int]]] = {
    "retention_check_interval_ms": ("log.retention.check.interval.ms", int_value(1)),
    "flush_scheduler_interval_ms": ("log.flush.scheduler.interval.ms", int_value(1)),
    "flush_offset_checkpoint_interval_ms": ("log.flush.offset.checkpoint.interval.ms",
                                            int_value(0, INT_MAX)),
    "flush_start_offset_checkpoint_interval_ms": (
        "log.flush.start.offset.checkpoint.interval.ms", int_value(0, INT_MAX)),
    "cache_drop_idle_ms": (CACHE_DROP_IDLE_MS, int_value(-1)),
    "cache_drop_behind_bytes": (CACHE_DROP_BEHIND_BYTES, int_value(-1)),
    "hw_checkpoint_interval_ms": ("replica.high.watermark.checkpoint.interval.ms",
                                  int_value(1)),
}


# -- the log cleaner's own settings ---------------------------------------------

JAVA_DOUBLE_MAX = 1.7976931348623157e308


@dataclass(frozen=True)
class CleanerConfig:
    """The log cleaner's broker settings (Kafka 3.6 names and defaults);
    the per-topic ones (``delete.retention.ms``, ``min.cleanable.dirty.ratio``,
    the compaction lags) are in :class:`LogConfig`.

    * ``log.cleaner.enable`` (true): run the cleaner at all.
    * ``log.cleaner.threads`` (1, >= 0): logs cleaned at the same time.
    * ``log.cleaner.dedupe.buffer.size`` (128 MiB): memory for the offset
      maps, shared by the threads (24 bytes a key, see ``native/cleaner.pyx``).
    * ``log.cleaner.io.buffer.size`` (512 KiB): bytes read and written per step.
    * ``log.cleaner.io.buffer.load.factor`` (0.9): how full an offset map gets.
    * ``log.cleaner.backoff.ms`` (15000): the wait when no log needs cleaning.
    * ``log.cleaner.io.max.bytes.per.second`` (unbounded): read plus write
      throttle of all cleaner threads together.
    """

    enable: bool = True
    threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    io_buffer_size: int = 512 * 1024
    io_buffer_load_factor: float = 0.9
    backoff_ms: int = 15_000
    io_max_bytes_per_second: float = JAVA_DOUBLE_MAX

    def __post_init__(self) -> None:
        if self.threads > 0 and self.dedupe_buffer_size / self.threads <= 1024 * 1024:
            # Kafka's LogCleaner refuses to start so, with these words.
            raise ValueError("invalid value for configuration log.cleaner.dedupe.buffer.size: "
                             "log.cleaner.dedupe.buffer.size must be at least 1MB per "
                             "cleaner thread.")

    @classmethod
    def from_props(cls, props: Mapping[str, str] | None = None) -> CleanerConfig:
        """From broker properties (strings); other keys are ignored.  A bad
        value raises ``ValueError`` naming the key."""
        props = props or {}
        return cls(**{attr: conv(key, props[key])
                      for attr, (key, conv) in CLEANER_KEYS.items() if key in props})

    @property
    def map_memory(self) -> int:
        """Each thread's offset map budget (Kafka: the buffer over the threads,
        at most 2 GiB)."""
        return min(self.dedupe_buffer_size // max(self.threads, 1), INT_MAX)


CLEANER_KEYS: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "enable": ("log.cleaner.enable", bool_value),
    "threads": ("log.cleaner.threads", int_value(0, INT_MAX)),
    "dedupe_buffer_size": ("log.cleaner.dedupe.buffer.size", int_value(0)),
    "io_buffer_size": ("log.cleaner.io.buffer.size", int_value(0, INT_MAX)),
    "io_buffer_load_factor": ("log.cleaner.io.buffer.load.factor", double_value(0.01, 1.0)),
    "backoff_ms": ("log.cleaner.backoff.ms", int_value(0)),
    "io_max_bytes_per_second": ("log.cleaner.io.max.bytes.per.second",
                                double_value(1.0, JAVA_DOUBLE_MAX)),
}
