"""Broker configuration: Kafka's ``server.properties`` names, defaults and checks.

Values come from a properties file and ``--override key=value`` (overrides win),
as with ``kafka-server-start.sh``.  Every value is checked at load time; a key
pylog does not know, or a bad value, raises :class:`ConfigError` naming the key,
so a typo stops the broker instead of being silently ignored.  Settings that
Kafka has but that mean nothing to a single pylog node (thread counts, ZooKeeper,
KRaft quorum) are accepted and ignored, so a stock Kafka file loads.

Dynamic broker configs (Kafka's KIP-226, see pylog.server.dynamic_configs) are
two more layers over server.properties: the cluster-wide default and this
node's own values.  ``originals`` is what the file and overrides gave,
``static`` the static layer Kafka reads from them (node.id and broker.id
standing for each other); the parsed values, ``log_config`` and
``describe()`` are of all layers merged, per-broker over cluster default over
static, as Kafka builds its KafkaConfig from them.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pylog.log.config import (
    CACHE_DROP_BEHIND_BYTES,
    CACHE_DROP_IDLE_MS,
    JAVA_DOUBLE_MAX,
    LONG_MAX,
    CleanerConfig,
    LogConfig,
    ManagerConfig,
    bool_value,
    double_value,
    int_value,
)
from pylog.properties import PropertiesError
from pylog.properties import read_properties as _read_properties
from pylog.server.topic_configs import (
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    STATIC_BROKER_CONFIG,
)

INT_MAX = 2**31 - 1


class ConfigError(ValueError):
    """A server.properties key or value the broker cannot use."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener: ``PLAINTEXT://host:port``."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


# -- value parsers: (key, raw string) -> value, ConfigError on bad input ------

# Integers and booleans parse as the log's configs do (ValueError naming the
# key; BrokerConfig turns it into ConfigError).
_int = int_value
_bool = bool_value


def _str(key: str, raw: str) -> str:
    return raw.strip()


def _choice(*options: str) -> Callable[[str, str], str]:
    def parse(key: str, raw: str) -> str:
        value = raw.strip()
        if value not in options:
            raise ConfigError(f"invalid value {raw!r} for configuration {key}: "
                              f"must be one of {', '.join(options)}")
        return value
    return parse


def _listeners(key: str, raw: str) -> tuple[Endpoint, ...]:
    """NAME://host:port[,...]; the names' security protocols are checked
    with the other listener keys (BrokerConfig._check_listeners)."""
    out = []
    for item in (s.strip() for s in raw.split(",")):
        if not item:
            continue
        name, sep, rest = item.partition("://")
        host, colon, port = rest.rpartition(":")
        if (not sep or not colon or not port.isdigit() or int(port) > 65535
                or not _LISTENER_NAME.fullmatch(name)):
            raise ConfigError(f"invalid value {raw!r} for configuration {key}: "
                              "expected NAME://host:port[,...]")
        out.append(Endpoint(name.upper(), host.strip("[]"), int(port)))
    if not out:
        raise ConfigError(f"invalid value {raw!r} for configuration {key}: no listener")
    if len({e.name for e in out}) != len(out):
        raise ConfigError(f"invalid value {raw!r} for configuration {key}: "
                          "each listener name may appear once")
    return tuple(out)


_LISTENER_NAME = re.compile(r"[A-Za-z0-9_]+")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _protocol_map(key: str, raw: str) -> dict[str, str]:
    """listener.security.protocol.map: NAME:PROTOCOL[,...]."""
    out: dict[str, str] = {}
    for item in (s.strip() for s in raw.split(",")):
        if not item:
            continue
        name, sep, protocol = (part.strip() for part in item.partition(":"))
        if not sep or not _LISTENER_NAME.fullmatch(name) or protocol.upper() not in \
                SECURITY_PROTOCOLS:
            raise ConfigError(f"invalid value {raw!r} for configuration {key}: expected "
                              f"NAME:PROTOCOL[,...] with PROTOCOL one of "
                              f"{', '.join(SECURITY_PROTOCOLS)}")
        out[name.upper()] = protocol.upper()
    return out


def _names(key: str, raw: str) -> tuple[str, ...]:
    """A comma-separated list of listener names (upper case, as Kafka's ListenerName)."""
    names = tuple(s.strip().upper() for s in raw.split(",") if s.strip())
    for name in names:
        if not _LISTENER_NAME.fullmatch(name):
            raise ConfigError(f"invalid value {raw!r} for configuration {key}: "
                              f"{name!r} is not a listener name")
    return names


def _roles(key: str, raw: str) -> tuple[str, ...]:
    """process.roles: broker and/or controller (KRaft); empty: ZooKeeper mode."""
    roles = tuple(s.strip() for s in raw.split(",") if s.strip())
    for role in roles:
        if role not in ("broker", "controller"):
            raise ConfigError(f"invalid value {raw!r} for configuration {key}: unknown "
                              f"process role {role!r} (broker, controller)")
    if len(set(roles)) != len(roles):
        raise ConfigError(f"invalid value {raw!r} for configuration {key}: duplicate roles")
    return roles


def _dirs(key: str, raw: str) -> tuple[str, ...]:
    dirs = tuple(s.strip() for s in raw.split(",") if s.strip())
    if not dirs:
        raise ConfigError(f"invalid value {raw!r} for configuration {key}: no directory")
    if len(dirs) > 1:
        raise ConfigError(f"invalid value {raw!r} for configuration {key}: pylog runs one "
                          "log dir per node (JBOD is not supported)")
    return dirs


def parse_listener(url: str) -> tuple[str, int, str]:
    """``http://host:port/path`` -> (host, port, path); ValueError when malformed."""
    parts = urlsplit(url.strip())
    if parts.scheme != "http" or not parts.hostname or parts.port is None:
        raise ValueError(f"expected http://host:port/path, got {url!r}")
    return parts.hostname, parts.port, parts.path or "/metrics"


def _metrics_url(key: str, raw: str) -> str:
    """metrics.listener: empty (off) or http://host:port/path (pylog.server.metrics)."""
    value = raw.strip()
    if value:
        try:
            parse_listener(value)
        except ValueError as exc:
            raise ConfigError(f"invalid value {raw!r} for configuration {key}: {exc}") from None
    return value


def _ip_overrides(key: str, raw: str) -> dict[str, int]:
    """max.connections.per.ip.overrides: ``host:count[,host:count]`` (host: a
    name or an address; the listener resolves names when it starts)."""
    out: dict[str, int] = {}
    for item in (s.strip() for s in raw.split(",")):
        if not item:
            continue
        host, colon, count = item.rpartition(":")
        host = host.strip().strip("[]")
        if not colon or not host or not count.strip().isdigit():
            raise ConfigError(f"invalid value {raw!r} for configuration {key}: "
                              "expected host:count[,host:count]")
        out[host] = int(count)
    return out


def _zk_connect(key: str, raw: str) -> str:
    """zookeeper.connect: host:port[,host:port...][/chroot]."""
    value = raw.strip()
    hosts, slash, chroot = value.partition("/")
    for item in hosts.split(","):
        host, colon, port = item.strip().rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) <= 65535:
            raise ConfigError(f"invalid value {raw!r} for configuration {key}: expected "
                              "host:port[,host:port...][/chroot]")
    if slash and (not chroot or chroot.endswith("/") or "//" in chroot):
        raise ConfigError(f"invalid value {raw!r} for configuration {key}: bad chroot path "
                          f"/{chroot}")
    return value


_LONG = _int()
_POS = _int(1)
_NONNEG = _int(0)

# name -> (parser, default as Kafka writes it; None: unset)
KEYS: dict[str, tuple[Callable[[str, str], Any], str | None]] = {
    "listeners": (_listeners, "PLAINTEXT://127.0.0.1:9092"),
    "advertised.listeners": (_listeners, None),
    "listener.security.protocol.map": (_protocol_map, "PLAINTEXT:PLAINTEXT,SSL:SSL,"
                                       "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"),
    # KRaft: a combined node (broker,controller) names its controller listener
    # here; pylog keeps the cluster's metadata in its log dir and does not
    # open that listener (see BrokerConfig._check_listeners).
    "process.roles": (_roles, ""),
    "controller.listener.names": (_names, ""),
    "inter.broker.listener.name": (_names, None),
    "node.id": (_int(0, INT_MAX), "0"),
    # The same id under its ZooKeeper-mode name (see _populate_synonyms).
    "broker.id": (_int(0, INT_MAX), "0"),
    "log.dirs": (_dirs, "./pylog-data"),
    "log.dir": (_dirs, None),
    "num.partitions": (_int(1, INT_MAX), "1"),
    "default.replication.factor": (_int(1, 32767), "1"),
    "auto.create.topics.enable": (_bool, "true"),
    "delete.topic.enable": (_bool, "true"),
    "message.max.bytes": (_int(0, INT_MAX), "1048588"),
    "socket.request.max.bytes": (_int(1, INT_MAX), "104857600"),
    # Kafka's default is 102400 for both; pylog's is -1 (the kernel's TCP
    # buffer auto-tuning, up to net.ipv4.tcp_rmem/tcp_wmem max): a fixed 100 KiB
    # receive window makes each 1 MB produce request ~10 recv calls and pushes
    # the client's transmit work into the broker's ACKs; a 100 KiB send buffer
    # splits each fetch's sendfile into many async rounds.  Measured on
    # loopback: ~25% less broker CPU per GB produced.
    "socket.send.buffer.bytes": (_int(-1, INT_MAX), "-1"),
    "socket.receive.buffer.bytes": (_int(-1, INT_MAX), "-1"),
    # KIP-541: the most record bytes one fetch response returns, whatever the
    # request's max_bytes (the first batch found still goes whole, KIP-74).
    "fetch.max.bytes": (_int(1024, INT_MAX), "57671680"),
    "connections.max.idle.ms": (_LONG, "600000"),
    # The node's request queue (pylog.net.request_queue): requests held behind
    # their connection's earlier ones, and bytes of requests not yet handled
    # (-1 or 0: no bound, as Kafka's memory pool).
    "queued.max.requests": (_int(1, INT_MAX), "500"),
    "queued.max.request.bytes": (_LONG, "-1"),
    # KIP-227: incremental fetch sessions kept (0: none, every fetch is full).
    "max.incremental.fetch.session.cache.slots": (_int(0, INT_MAX), "1000"),
    # Kafka's connection quotas (pylog.net.listener): a connection past them is
    # closed as soon as it is accepted.
    "max.connections": (_int(0, INT_MAX), str(INT_MAX)),
    "max.connections.per.ip": (_int(0, INT_MAX), str(INT_MAX)),
    "max.connections.per.ip.overrides": (_ip_overrides, ""),
    # Client quotas (pylog.server.client_quotas): the rates are measured over
    # this many samples of this many seconds each.
    "quota.window.num": (_int(1, INT_MAX), "11"),
    "quota.window.size.seconds": (_int(1, INT_MAX), "1"),
    # Replication throttles (pylog.server.replication_quota): the same, for
    # the replication rates.
    "replication.quota.window.num": (_int(1, INT_MAX), "11"),
    "replication.quota.window.size.seconds": (_int(1, INT_MAX), "1"),
    "log.segment.bytes": (_int(14, INT_MAX), "1073741824"),
    "log.roll.hours": (_int(1, INT_MAX), "168"),
    "log.roll.ms": (_POS, None),
    "log.roll.jitter.hours": (_int(0, INT_MAX), "0"),
    "log.roll.jitter.ms": (_NONNEG, None),
    "log.retention.hours": (_int(-1, INT_MAX), "168"),
    "log.retention.minutes": (_int(-1, INT_MAX), None),
    "log.retention.ms": (_int(-1), None),
    "log.retention.bytes": (_int(-1), "-1"),
    "log.retention.check.interval.ms": (_POS, "300000"),
    "log.flush.interval.messages": (_POS, str(LONG_MAX)),
    "log.flush.interval.ms": (_NONNEG, None),
    "log.flush.scheduler.interval.ms": (_POS, str(LONG_MAX)),
    "log.flush.offset.checkpoint.interval.ms": (_int(0, INT_MAX), "60000"),
    "log.flush.start.offset.checkpoint.interval.ms": (_int(0, INT_MAX), "60000"),
    # pylog: drop idle, flushed segments from the page cache after this long (-1: never).
    CACHE_DROP_IDLE_MS: (_int(-1), "600000"),
    # pylog: each partition's newest bytes kept in the page cache; data further
    # behind is written back and evicted as appends go on (-1: never).
    CACHE_DROP_BEHIND_BYTES: (_int(-1), "-1"),
    "log.index.interval.bytes": (_int(0, INT_MAX), "4096"),
    "log.index.size.max.bytes": (_int(4, INT_MAX), "10485760"),
    "log.segment.delete.delay.ms": (_NONNEG, "60000"),
    "log.message.timestamp.type": (_choice("CreateTime", "LogAppendTime"), "CreateTime"),
    # KIP-937 (3.6): how far from the broker's clock a CreateTime timestamp may be.
    "log.message.timestamp.difference.max.ms": (_NONNEG, str(LONG_MAX)),
    "log.message.timestamp.before.max.ms": (_NONNEG, str(LONG_MAX)),
    "log.message.timestamp.after.max.ms": (_NONNEG, str(LONG_MAX)),
    "compression.type": (_choice("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
                         "producer"),
    "log.cleanup.policy": (_str, "delete"),
    # The log cleaner (pylog.log.cleaner): compaction of cleanup.policy=compact logs.
    "log.cleaner.enable": (_bool, "true"),
    "log.cleaner.threads": (_int(0, INT_MAX), "1"),
    "log.cleaner.dedupe.buffer.size": (_NONNEG, "134217728"),
    "log.cleaner.io.buffer.size": (_int(0, INT_MAX), "524288"),
    "log.cleaner.io.buffer.load.factor": (double_value(0.01, 1.0), "0.9"),
    "log.cleaner.backoff.ms": (_NONNEG, "15000"),
    "log.cleaner.io.max.bytes.per.second": (double_value(1.0, JAVA_DOUBLE_MAX),
                                            "1.7976931348623157E308"),
    "log.cleaner.delete.retention.ms": (_NONNEG, "86400000"),
    "log.cleaner.min.cleanable.ratio": (double_value(0.0, 1.0), "0.5"),
    "log.cleaner.min.compaction.lag.ms": (_NONNEG, "0"),
    "log.cleaner.max.compaction.lag.ms": (_POS, str(LONG_MAX)),
    "log.preallocate": (_bool, "false"),
    "min.insync.replicas": (_int(1, INT_MAX), "1"),
    "io.backend": (_choice("posix", "io_uring"), "posix"),
    # Prometheus text at this URL, e.g. http://127.0.0.1:9404/metrics; empty: off.
    "metrics.listener": (_metrics_url, ""),
    # Idempotent producers (pylog.server.producer_state), Kafka's names and
    # defaults: a producer id with no batch for this long is forgotten
    # (dynamic, cluster-wide, KIP-854); the check runs at this interval.
    "producer.id.expiration.ms": (_int(1, INT_MAX), "86400000"),
    "producer.id.expiration.check.interval.ms": (_int(1, INT_MAX), "600000"),
    # Transactions (pylog.coordinator.transactions); Kafka's names and defaults.
    "transaction.max.timeout.ms": (_int(1, INT_MAX), "900000"),
    "transactional.id.expiration.ms": (_int(1, INT_MAX), "604800000"),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (_int(1, INT_MAX), "10000"),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (_int(1, INT_MAX), "3600000"),
    "transaction.state.log.num.partitions": (_int(1, INT_MAX), "50"),
    "transaction.state.log.segment.bytes": (_int(1, INT_MAX), "104857600"),
    "transaction.partition.verification.enable": (_bool, "true"),
    # Consumer groups (pylog.coordinator); Kafka's defaults.
    "offsets.topic.num.partitions": (_int(1, INT_MAX), "50"),
    # Segment size of __consumer_offsets (compacted): Kafka's default, 100 MiB.
    "offsets.topic.segment.bytes": (_int(1, INT_MAX), "104857600"),
    # The group coordinator's writes: acks=-1 (in the in-sync replicas before
    # they count and are answered), waited for at most this long.
    "offsets.commit.required.acks": (_int(-32768, 32767), "-1"),
    "offsets.commit.timeout.ms": (_int(1, INT_MAX), "5000"),
    "offsets.retention.minutes": (_int(1, INT_MAX), "10080"),
    "offsets.retention.check.interval.ms": (_POS, "600000"),
    "group.initial.rebalance.delay.ms": (_int(0, INT_MAX), "3000"),
    "group.min.session.timeout.ms": (_int(0, INT_MAX), "6000"),
    "group.max.session.timeout.ms": (_int(0, INT_MAX), "1800000"),
    # A cluster (DESIGN.md section 1): metadata in ZooKeeper, Kafka's names and
    # defaults.  Unset zookeeper.connect: the embedded single node.
    "zookeeper.connect": (_zk_connect, None),
    "zookeeper.session.timeout.ms": (_int(1, INT_MAX), "18000"),
    "zookeeper.connection.timeout.ms": (_int(1, INT_MAX), None),  # unset: the session's
    "zookeeper.max.in.flight.requests": (_int(1, INT_MAX), "10"),
    "broker.id.generation.enable": (_bool, "true"),
    "reserved.broker.max.id": (_int(0, INT_MAX), "1000"),
    "broker.rack": (_str, None),
    "security.inter.broker.protocol": (_choice(*SECURITY_PROTOCOLS), "PLAINTEXT"),
    "controller.socket.timeout.ms": (_int(1, INT_MAX), "30000"),
    "controlled.shutdown.enable": (_bool, "true"),
    "controlled.shutdown.max.retries": (_int(0, INT_MAX), "3"),
    "controlled.shutdown.retry.backoff.ms": (_NONNEG, "5000"),
    "offsets.topic.replication.factor": (_int(1, 32767), "3"),
    "transaction.state.log.replication.factor": (_int(1, 32767), "3"),
    "transaction.state.log.min.isr": (_int(1, INT_MAX), "2"),
    # Replication (pylog.server.replica_fetcher), Kafka's names and defaults.
    "num.replica.fetchers": (_int(1, INT_MAX), "1"),
    "replica.lag.time.max.ms": (_LONG, "30000"),
    "replica.fetch.max.bytes": (_int(0, INT_MAX), "1048576"),
    "replica.fetch.min.bytes": (_int(1, INT_MAX), "1"),
    "replica.fetch.wait.max.ms": (_int(0, INT_MAX), "500"),
    "replica.fetch.backoff.ms": (_int(0, INT_MAX), "1000"),
    "replica.fetch.response.max.bytes": (_int(0, INT_MAX), "10485760"),
    "replica.socket.timeout.ms": (_int(1, INT_MAX), "30000"),
    "replica.high.watermark.checkpoint.interval.ms": (_POS, "5000"),
    "unclean.leader.election.enable": (_bool, "false"),
    "auto.leader.rebalance.enable": (_bool, "true"),
    "leader.imbalance.per.broker.percentage": (_int(0, 100), "10"),
    "leader.imbalance.check.interval.seconds": (_int(1, INT_MAX), "300"),
    "leader.replication.throttled.rate": (_int(0), str(LONG_MAX)),
    "follower.replication.throttled.rate": (_int(0), str(LONG_MAX)),
}

# Kafka settings with no effect on a single pylog node; accepted so that a stock
# server.properties loads.  (Replication comes later.)
IGNORED = frozenset({
    "num.network.threads", "num.io.threads", "num.recovery.threads.per.data.dir",
    "background.threads",
    "controller.quorum.voters", "controller.quorum.bootstrap.servers",
    "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr",
    "metadata.log.dir",
})


def _populate_synonyms(props: Mapping[str, str]) -> dict[str, str]:
    """Kafka's KafkaConfig.populateSynonyms: node.id and broker.id name one
    id, so the one given stands for the other too (DescribeConfigs shows both
    as STATIC_BROKER_CONFIG with the node's id)."""
    out = dict(props)
    if "broker.id" not in out and "node.id" in out:
        out["broker.id"] = out["node.id"]
    elif "node.id" not in out and "broker.id" in out:
        out["node.id"] = out["broker.id"]
    return out


def read_properties(text: str, source: str = "properties") -> dict[str, str]:
    """pylog.properties.read_properties, a malformed line being a ConfigError."""
    try:
        return _read_properties(text, source)
    except PropertiesError as exc:
        raise ConfigError(str(exc)) from None


class BrokerConfig:
    """Checked broker settings; ``cfg["log.segment.bytes"]`` gives the parsed value."""

    def __init__(self, props: Mapping[str, str] | None = None, *,
                 dynamic_default: Mapping[str, str] | None = None,
                 dynamic_broker: Mapping[str, str] | None = None) -> None:
        self.originals = dict(props or {})
        # The static layer as Kafka reads it (server.properties and --override,
        # node.id and broker.id standing for each other).
        self.static = _populate_synonyms(self.originals)
        # Kafka's DYNAMIC_DEFAULT_BROKER_CONFIG and DYNAMIC_BROKER_CONFIG layers
        # (checked by pylog.server.dynamic_configs; names pylog does not know
        # are kept there, as Kafka keeps custom configs, and have no effect).
        self.dynamic_default = dict(dynamic_default or {})
        self.dynamic_broker = dict(dynamic_broker or {})
        unknown = sorted(k for k in self.originals if k not in KEYS and k not in IGNORED)
        if unknown:
            raise ConfigError(f"unknown configuration {unknown[0]!r}")
        merged = self.merged()
        self._values: dict[str, Any] = {}
        for key, (parse, default) in KEYS.items():
            raw = merged.get(key, default)
            try:
                self._values[key] = None if raw is None else parse(key, raw)
            except ValueError as exc:  # the parsers name the key
                raise ConfigError(str(exc)) from None
        # Kafka's aliases: broker.id for node.id, log.dir when log.dirs is unset.
        if "broker.id" in self.originals:
            if "node.id" in self.originals and self["node.id"] != self["broker.id"]:
                raise ConfigError("node.id and broker.id disagree")
            self._values["node.id"] = self["broker.id"]
        if "log.dir" in self.originals and "log.dirs" not in self.originals:
            self._values["log.dirs"] = self["log.dir"]
        if not -1 <= self["offsets.commit.required.acks"] <= \
                self["offsets.topic.replication.factor"]:  # KafkaConfig.validateValues
            raise ConfigError("offsets.commit.required.acks must be greater or equal -1 and "
                              "less or equal to offsets.topic.replication.factor")
        self._client_listeners = self._check_listeners()
        try:
            self.log_config = LogConfig.from_props(self._log_props())
            # The log manager's periodic work (retention, flushes, checkpoints,
            # cache dropping) takes Kafka's broker keys as they were given.
            self.manager_config = ManagerConfig.from_props(self.originals)
            # The cleaner's keys may be dynamic (Kafka's LogCleaner is
            # BrokerReconfigurable): every layer counts.
            self.cleaner_config = CleanerConfig.from_props(merged)
        except ValueError as exc:  # LogConfig/ManagerConfig name the key themselves
            raise ConfigError(str(exc)) from None

    @classmethod
    def load(cls, path: str | Path | None = None,
             overrides: Iterable[str] = ()) -> BrokerConfig:
        """From a properties file (optional) and ``key=value`` overrides."""
        props: dict[str, str] = {}
        if path is not None:
            try:
                text = Path(path).read_text()
            except OSError as exc:
                raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
            props.update(read_properties(text, str(path)))
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"override {item!r} is not key=value")
            props[key.strip()] = value.strip()
        return cls(props)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def _log_props(self) -> dict[str, str]:
        # Only what was set explicitly: LogConfig applies Kafka's precedence
        # (ms over minutes over hours) among the names that are present, in
        # whichever layer each was set (as KafkaConfig over the merged props).
        merged = self.merged()
        names = [k for k in merged if k.startswith("log.") or k in
                 ("message.max.bytes", "min.insync.replicas", "compression.type")]
        return {k: merged[k] for k in names if k in KEYS}

    # -- dynamic layers ------------------------------------------------------

    def merged(self) -> dict[str, str]:
        """Every explicitly set key known to pylog: per-broker dynamic over
        cluster-wide dynamic over server.properties."""
        out = dict(self.static)
        for layer in (self.dynamic_default, self.dynamic_broker):
            out.update((k, v) for k, v in layer.items() if k in KEYS)
        return out

    def layers(self) -> tuple[tuple[int, Mapping[str, str]], ...]:
        """(ConfigSource, values) from the highest precedence down, as Kafka's
        ConfigHelper lists synonyms; DEFAULT_CONFIG comes after these.  Only
        keys pylog knows (custom dynamic keys have no effect)."""
        def known(values: Mapping[str, str]) -> dict[str, str]:
            return {k: v for k, v in values.items() if k in KEYS}
        return ((DYNAMIC_BROKER_CONFIG, known(self.dynamic_broker)),
                (DYNAMIC_DEFAULT_BROKER_CONFIG, known(self.dynamic_default)),
                (STATIC_BROKER_CONFIG, self.static))

    def with_dynamic(self, dynamic_default: Mapping[str, str],
                     dynamic_broker: Mapping[str, str]) -> BrokerConfig:
        """This static config under other dynamic layers; ConfigError naming
        the key when a value, or the combination, is refused."""
        return BrokerConfig(self.originals, dynamic_default=dynamic_default,
                            dynamic_broker=dynamic_broker)

    def adopt(self, other: BrokerConfig) -> None:
        """Take ``other``'s dynamic layers and the values they give (the
        running broker's config object is shared by every handler)."""
        self.dynamic_default = dict(other.dynamic_default)
        self.dynamic_broker = dict(other.dynamic_broker)
        self._values = dict(other._values)
        self.log_config = other.log_config
        self.cleaner_config = other.cleaner_config

    # -- derived settings ----------------------------------------------------

    @property
    def node_id(self) -> int:
        return self["node.id"]

    def set_node_id(self, node_id: int) -> None:
        """The id a cluster node found for itself (stored in meta.properties,
        or generated from ZooKeeper's /brokers/seqid) when none was set."""
        self._values["node.id"] = self._values["broker.id"] = node_id

    @property
    def log_dir(self) -> Path:
        return Path(self["log.dirs"][0]).expanduser().resolve()

    def _check_listeners(self) -> tuple[Endpoint, ...]:
        """The listeners clients use, after Kafka's checks of the listener
        keys together (KafkaConfig.validateValues) and pylog's own limits:
        one client listener, PLAINTEXT.  A KRaft combined node's controller
        listeners (``controller.listener.names``) are accepted and not
        opened: the node keeps the metadata itself."""
        roles = self["process.roles"]
        if roles and "broker" not in roles:
            raise ConfigError("invalid value for configuration process.roles: pylog nodes "
                              "are brokers (a controller-only node has nothing to run here)")
        controllers = set(self["controller.listener.names"])
        if roles and not controllers:
            raise ConfigError("controller.listener.names must contain at least one value "
                              "when running in KRaft mode (process.roles is set)")
        protocols = self["listener.security.protocol.map"]
        explicit_map = "listener.security.protocol.map" in self.originals
        clients = []
        for ep in self["listeners"]:
            if ep.name in controllers:
                if "controller" not in roles:
                    raise ConfigError(f"controller.listener.names: listener {ep.name} is in "
                                      "listeners, but process.roles has no controller role")
                continue
            protocol = protocols.get(ep.name)
            if protocol is None:
                raise ConfigError(f"listeners: no security protocol defined for listener "
                                  f"{ep.name} (listener.security.protocol.map)")
            if protocol != "PLAINTEXT":
                raise ConfigError(f"listeners: listener {ep.name} uses {protocol}; pylog "
                                  "serves PLAINTEXT only (no TLS or SASL)")
            clients.append(ep)
        if "controller" in roles and not controllers & {ep.name for ep in self["listeners"]}:
            raise ConfigError("controller.listener.names must contain at least one value "
                              "appearing in the 'listeners' configuration when running the "
                              "KRaft controller role")
        for name in controllers:
            if name not in protocols and explicit_map and name not in SECURITY_PROTOCOLS:
                raise ConfigError(f"listener.security.protocol.map: no security protocol "
                                  f"defined for controller listener {name}")
        if not clients:
            raise ConfigError("listeners: no listener for clients (only the controller's)")
        if len(clients) > 1:
            raise ConfigError(f"listeners: pylog serves one client listener, got "
                              f"{', '.join(str(e) for e in clients)}")
        names = {ep.name for ep in clients}
        for ep in self["advertised.listeners"] or ():
            if ep.name in controllers:
                # Kafka 3.6 refuses it; 3.9+ (KIP-853) advertises the
                # controller to other controllers, as Kafka 4.0's stock
                # server.properties does.  Clients are never told of it.
                continue
            if ep.name not in names:
                raise ConfigError(f"advertised.listeners: listener {ep.name} is not one "
                                  "of the listeners")
        ibl = self["inter.broker.listener.name"]
        if ibl and ibl[0] not in names:
            raise ConfigError(f"inter.broker.listener.name: {ibl[0]} is not a client "
                              "listener in listeners")
        return tuple(clients)

    @property
    def listeners(self) -> tuple[Endpoint, ...]:
        """The listener clients connect to (never a controller listener)."""
        return self._client_listeners

    @property
    def controller_listeners(self) -> tuple[Endpoint, ...]:
        names = set(self["controller.listener.names"])
        return tuple(ep for ep in self["listeners"] if ep.name in names)

    def advertised(self, bound_port: int | None = None) -> Endpoint:
        """The endpoint clients are told to use: advertised.listeners (less a
        controller's), else the listener (wildcard host -> this host's name,
        port 0 -> the bound port)."""
        names = {ep.name for ep in self.listeners}
        adv = [ep for ep in self["advertised.listeners"] or () if ep.name in names]
        if adv:
            return adv[0]
        ep = self.listeners[0]
        host = ep.host if ep.host not in ("", "0.0.0.0", "::") else socket.getfqdn()
        port = bound_port if ep.port == 0 and bound_port else ep.port
        return Endpoint(ep.name, host, port)

    def describe(self) -> dict[str, str | None]:
        """Every known key with its effective value as a string (DescribeConfigs)."""
        merged = self.merged()
        return {key: merged.get(key, default) for key, (_, default) in KEYS.items()}
