"""Kafka's znodes: their paths and the JSON in them (Kafka's ZkData, ZooKeeper mode).

One class per znode kind, each with ``path(...)``, ``encode(...) -> bytes`` and
``decode(...)``.  The bytes are the ones a Kafka 3.6 broker writes: compact JSON,
and the keys of an object in the order Kafka's Scala maps iterate them (so
``zookeeper-shell get`` shows the same text on a pylog cluster as on Kafka's).
Decoding is strict: bad JSON, a missing field, a wrong type or an unknown
version raise :class:`BadZnodeError` naming the znode, never a KeyError.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pylog.log.meta_properties import check_cluster_id
from pylog.zk.errors import BadZnodeError

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MAX = 2**63 - 1
# ZooKeeper's "any version" in a conditional write (Kafka's ZkVersion.MatchAnyVersion).
MATCH_ANY_VERSION = -1
# Kafka's ZkVersion.UnknownVersion: what a failed conditional update reports.
UNKNOWN_VERSION = -2

_MISSING: Any = object()


def _dumps(obj: Any) -> bytes:
    # Jackson's default output: no spaces, non-ASCII as UTF-8.
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _loads(path: str, data: bytes | None) -> Any:
    if data is None:
        raise BadZnodeError(path, "no data (null)")
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise BadZnodeError(path, "data is not UTF-8") from None
    except ValueError as exc:
        raise BadZnodeError(path, f"not JSON ({exc}): {data[:200]!r}") from None


def _type_name(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean",
            int: "integer", float: "number", type(None): "null"}.get(type(value), "value")


class _Obj:
    """A JSON object read field by field; each error names the znode and the field."""

    def __init__(self, path: str, value: Any, what: str = "the data") -> None:
        if not isinstance(value, dict):
            raise BadZnodeError(path, f"{what} is a JSON {_type_name(value)}, not an object")
        self.path = path
        self.d: dict[str, Any] = value

    def _present(self, key: str, default: Any) -> bool:
        """Whether ``key`` is there; a missing key without a default is an error."""
        if key in self.d:
            return True
        if default is _MISSING:
            raise BadZnodeError(self.path, f"field '{key}' is missing")
        return False

    def _bad(self, key: str, expected: str) -> BadZnodeError:
        value = self.d.get(key)
        return BadZnodeError(self.path, f"field '{key}' is a JSON {_type_name(value)} "
                                        f"({value!r:.80}), not {expected}")

    def integer(self, key: str, default: Any = _MISSING, lo: int = INT_MIN,
                hi: int = INT_MAX) -> Any:
        if not self._present(key, default):
            return default
        value = self.d[key]
        if type(value) is not int or not lo <= value <= hi:  # a bool is no integer here
            raise self._bad(key, f"an integer in [{lo}, {hi}]")
        return value

    def string(self, key: str, default: Any = _MISSING, nullable: bool = False) -> Any:
        if not self._present(key, default):
            return default
        value = self.d[key]
        if not (isinstance(value, str) or (value is None and nullable)):
            raise self._bad(key, "a string")
        return value

    def integers(self, key: str) -> list[int]:
        self._present(key, _MISSING)
        value = self.d[key]
        if not isinstance(value, list) or any(type(v) is not int or not INT_MIN <= v <= INT_MAX
                                              for v in value):
            raise self._bad(key, "an array of integers")
        return list(value)

    def obj(self, key: str, default: Any = _MISSING) -> Any:
        if not self._present(key, default):
            return default
        return _Obj(self.path, self.d[key], f"field '{key}'")

    def array(self, key: str) -> list[Any]:
        self._present(key, _MISSING)
        if not isinstance(self.d[key], list):
            raise self._bad(key, "an array")
        return self.d[key]

    def version(self, *supported: int, as_string: bool = False) -> int:
        self._present("version", _MISSING)
        value = self.d["version"]
        if as_string and isinstance(value, str) and value.isdigit():
            value = int(value)
        if type(value) is not int:
            raise self._bad("version", "an integer")
        if value not in supported:
            raise BadZnodeError(self.path, f"unsupported version {value} (known: "
                                           f"{', '.join(map(str, supported))})")
        return value


# -- the order Kafka's maps write their keys in -------------------------------------------

def _java_hash(text: str) -> int:
    units = text.encode("utf-16-be")  # Java's String.hashCode runs over UTF-16 units
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def scala_hashmap_order(keys: Sequence[str], table_size: int = 16) -> list[str]:
    """``keys`` in the order a Scala 2.13 ``mutable.HashMap`` (which Kafka's
    znode encoders fill) iterates them: by bucket, then by improved hash.
    ``table_size`` is the map's starting table; it doubles as Scala's does."""
    size = table_size
    for n in range(len(keys)):
        if n + 1 >= int(size * 0.75):
            size *= 2

    def improved(key: str) -> int:
        h = _java_hash(key)
        h ^= (h & 0xFFFFFFFF) >> 16
        return h

    ranked = sorted((improved(k) & (size - 1), improved(k), i, k) for i, k in enumerate(keys))
    return [k for *_, k in ranked]


def _ordered(obj: Mapping[str, Any], order: Iterable[str]) -> dict[str, Any]:
    return {k: obj[k] for k in order if k in obj}


def _int_key_map(path: str, o: _Obj, key: str) -> dict[int, list[int]]:
    """``{"0":[1,2],...}`` -> {0: [1, 2], ...}."""
    inner = o.obj(key)
    out: dict[int, list[int]] = {}
    for name in inner.d:
        if not re.fullmatch(r"-?\d{1,10}", name) or not INT_MIN <= int(name) <= INT_MAX:
            raise BadZnodeError(path, f"field '{key}' has key {name!r}, not a partition number")
        out[int(name)] = inner.integers(name)
    return out


def _int_key_json(value: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
    keys = scala_hashmap_order([str(p) for p in value])
    return {k: [int(r) for r in value[int(k)]] for k in keys}


# -- /cluster/id --------------------------------------------------------------------------

class ClusterIdZNode:
    @staticmethod
    def path() -> str:
        return "/cluster/id"

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        return _dumps({"version": "1", "id": cluster_id})  # Kafka writes the version as text

    @staticmethod
    def decode(data: bytes | None) -> str:
        o = _Obj(ClusterIdZNode.path(), _loads(ClusterIdZNode.path(), data))
        o.version(1, as_string=True)
        return o.string("id")


# -- /brokers/ids/<id> --------------------------------------------------------------------

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_ENDPOINT = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")
# Kafka's encoder fills a mutable.HashMap of 6 keys, then adds 3: this is its order.
_BROKER_KEYS = ("features", "listener_security_protocol_map", "endpoints", "rack",
                "jmx_port", "port", "host", "version", "timestamp")


class EndPoint(NamedTuple):
    listener_name: str
    security_protocol: str
    host: str
    port: int

    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


@dataclass
class BrokerInfo:
    """A broker's registration.  ``epoch`` is the znode's czxid (Kafka's broker
    epoch), set when read from ZooKeeper; ``version`` the JSON version read."""

    id: int
    endpoints: list[EndPoint]
    rack: str | None = None
    jmx_port: int = -1
    features: dict[str, Any] = field(default_factory=dict)
    version: int = 5
    timestamp_ms: int | None = None
    epoch: int = -1


class BrokerIdsZNode:
    @staticmethod
    def path() -> str:
        return "/brokers/ids"


class BrokerIdZNode:
    @staticmethod
    def path(broker_id: int) -> str:
        return f"/brokers/ids/{broker_id}"

    @staticmethod
    def encode(info: BrokerInfo, timestamp_ms: int) -> bytes:
        """Version 5 (Kafka 2.7+).  The top-level host/port are the first
        PLAINTEXT endpoint's, for old clients (null and -1 without one)."""
        plain = next((e for e in info.endpoints if e.security_protocol == "PLAINTEXT"), None)
        obj: dict[str, Any] = {
            "features": info.features,
            "listener_security_protocol_map": {e.listener_name: e.security_protocol
                                               for e in info.endpoints},
            "endpoints": [e.connection_string() for e in info.endpoints],
            "jmx_port": info.jmx_port,
            "port": plain.port if plain else -1,
            "host": plain.host if plain else None,
            "version": 5,
            "timestamp": str(timestamp_ms),
        }
        if info.rack is not None:  # Kafka leaves the key out when there is no rack
            obj["rack"] = info.rack
        return _dumps(_ordered(obj, _BROKER_KEYS))

    @staticmethod
    def decode(broker_id: int, data: bytes | None) -> BrokerInfo:
        path = BrokerIdZNode.path(broker_id)
        o = _Obj(path, _loads(path, data))
        version = o.version(1, 2, 3, 4, 5)
        jmx_port = o.integer("jmx_port")
        if version == 1:
            endpoints = [EndPoint("PLAINTEXT", "PLAINTEXT", o.string("host"), o.integer("port"))]
        else:
            protocols = {p: p for p in SECURITY_PROTOCOLS}
            if "listener_security_protocol_map" in o.d:
                m = o.obj("listener_security_protocol_map")
                protocols = {k: m.string(k) for k in m.d}
                bad = sorted(v for v in protocols.values() if v not in SECURITY_PROTOCOLS)
                if bad:
                    raise BadZnodeError(path, f"unknown security protocol {bad[0]!r}")
            endpoints = []
            for text in o.array("endpoints"):
                m_ = _ENDPOINT.match(text) if isinstance(text, str) else None
                if m_ is None or not INT_MIN <= int(m_.group(3)) <= INT_MAX:
                    raise BadZnodeError(path, f"endpoint {text!r} is not LISTENER://host:port")
                if m_.group(1) not in protocols:
                    raise BadZnodeError(path, f"endpoint {text!r}: listener {m_.group(1)!r} "
                                              "is not in listener_security_protocol_map")
                endpoints.append(EndPoint(m_.group(1), protocols[m_.group(1)], m_.group(2),
                                          int(m_.group(3))))
        features = o.obj("features", None)
        timestamp = o.string("timestamp", None, nullable=True)
        return BrokerInfo(
            id=broker_id, endpoints=endpoints, rack=o.string("rack", None, nullable=True),
            jmx_port=jmx_port, features=features.d if features else {}, version=version,
            timestamp_ms=int(timestamp) if timestamp and timestamp.isdigit() else None)


class BrokerSequenceIdZNode:
    """``/brokers/seqid``: its data version numbers generated broker ids."""

    @staticmethod
    def path() -> str:
        return "/brokers/seqid"


# -- /brokers/topics/<t> and its partitions' state ----------------------------------------

@dataclass
class TopicAssignment:
    """A topic's replica assignment: partition -> replicas, the replicas being
    added and removed by a reassignment, and the topic id (Kafka's Uuid text).
    ``zk_version`` is the znode's data version when read (for compare-and-set)."""

    topic: str
    partitions: dict[int, list[int]]
    topic_id: str | None = None
    adding_replicas: dict[int, list[int]] = field(default_factory=dict)
    removing_replicas: dict[int, list[int]] = field(default_factory=dict)
    zk_version: int = -1


class TopicsZNode:
    @staticmethod
    def path() -> str:
        return "/brokers/topics"


class TopicZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"/brokers/topics/{topic}"

    @staticmethod
    def encode(a: TopicAssignment) -> bytes:
        obj: dict[str, Any] = {
            "version": 3,
            "partitions": _int_key_json(a.partitions),
            "adding_replicas": _int_key_json({p: r for p, r in a.adding_replicas.items() if r}),
            "removing_replicas": _int_key_json({p: r for p, r in a.removing_replicas.items()
                                                if r}),
        }
        if a.topic_id is not None:
            obj["topic_id"] = a.topic_id
        # Kafka's mutable.HashMap starts with a table of 8 for these four keys.
        return _dumps(_ordered(obj, scala_hashmap_order(list(obj), 8)))

    @staticmethod
    def decode(topic: str, data: bytes | None) -> TopicAssignment:
        path = TopicZNode.path(topic)
        o = _Obj(path, _loads(path, data))
        o.version(1, 2, 3)
        topic_id = o.string("topic_id", None)
        if topic_id is not None:
            try:
                check_cluster_id(topic_id)  # the same Uuid text as a cluster id
            except ValueError:
                raise BadZnodeError(path, f"topic_id {topic_id!r} is not a Kafka Uuid") from None
        adding = _int_key_map(path, o, "adding_replicas") if "adding_replicas" in o.d else {}
        removing = (_int_key_map(path, o, "removing_replicas")
                    if "removing_replicas" in o.d else {})
        return TopicAssignment(topic, _int_key_map(path, o, "partitions"), topic_id,
                               adding, removing)


class TopicPartitionsZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"/brokers/topics/{topic}/partitions"


class TopicPartitionZNode:
    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"/brokers/topics/{topic}/partitions/{partition}"


# Kafka's LeaderRecoveryState values.
RECOVERED, RECOVERING = 0, 1
# Kafka's immutable.HashMap order of the partition state's keys.
_STATE_KEYS = ("controller_epoch", "leader", "version", "leader_recovery_state",
               "leader_epoch", "isr")


@dataclass
class LeaderIsrState:
    """A partition's leader, ISR and epochs (Kafka's LeaderIsrAndControllerEpoch).
    ``zk_version`` is the state znode's data version when read (Kafka's
    partition epoch), the version a compare-and-set update names."""

    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    leader_recovery_state: int = RECOVERED
    zk_version: int = -1


class TopicPartitionStateZNode:
    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"/brokers/topics/{topic}/partitions/{partition}/state"

    @staticmethod
    def encode(s: LeaderIsrState) -> bytes:
        obj: dict[str, Any] = {"version": 1, "leader": s.leader, "leader_epoch": s.leader_epoch,
                               "controller_epoch": s.controller_epoch, "isr": list(s.isr)}
        if s.leader_recovery_state != RECOVERED:  # Kafka writes it only when not RECOVERED
            obj["leader_recovery_state"] = s.leader_recovery_state
        return _dumps(_ordered(obj, _STATE_KEYS))

    @staticmethod
    def decode(topic: str, partition: int, data: bytes | None, zk_version: int = -1
               ) -> LeaderIsrState:
        path = TopicPartitionStateZNode.path(topic, partition)
        o = _Obj(path, _loads(path, data))
        o.version(1)
        return LeaderIsrState(o.integer("leader"), o.integer("leader_epoch"), o.integers("isr"),
                              o.integer("controller_epoch"),
                              o.integer("leader_recovery_state", RECOVERED, RECOVERED, RECOVERING),
                              zk_version)


# -- /controller, /controller_epoch -------------------------------------------------------

class ControllerZNode:
    @staticmethod
    def path() -> str:
        return "/controller"

    @staticmethod
    def encode(broker_id: int, timestamp_ms: int) -> bytes:
        # Kafka 3.6 writes version 2 with kraftControllerEpoch -1 (a ZooKeeper controller).
        return _dumps({"version": 2, "brokerid": broker_id, "timestamp": str(timestamp_ms),
                       "kraftControllerEpoch": -1})

    @staticmethod
    def decode(data: bytes | None) -> int:
        """The controller's broker id, from version 1 or 2, or the bare integer
        Kafka 0.8 wrote."""
        path = ControllerZNode.path()
        value = _loads(path, data)
        if type(value) is int and INT_MIN <= value <= INT_MAX:
            return value
        o = _Obj(path, value)
        o.version(1, 2)
        return o.integer("brokerid")


class ControllerEpochZNode:
    @staticmethod
    def path() -> str:
        return "/controller_epoch"

    @staticmethod
    def encode(epoch: int) -> bytes:
        return str(epoch).encode()

    @staticmethod
    def decode(data: bytes | None) -> int:
        text = (data or b"").decode("ascii", "replace")
        if not re.fullmatch(r"[+-]?\d{1,10}", text) or not INT_MIN <= int(text) <= INT_MAX:
            raise BadZnodeError(ControllerEpochZNode.path(),
                                f"{text[:40]!r} is not a decimal integer")
        return int(text)


# -- /config/<type>/<name> and /config/changes --------------------------------------------

CONFIG_TYPES = ("topics", "clients", "users", "brokers", "ips")  # Kafka's ConfigType.all
DEFAULT_ENTITY = "<default>"  # Kafka's ConfigEntityName.Default


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: a user or client id as a znode name
    (URL-encoded, ``*`` and space percent-encoded too)."""
    return urllib.parse.quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    """Kafka's Sanitizer.desanitize (URLDecoder.decode)."""
    return urllib.parse.unquote_plus(name)


class ConfigEntityTypeZNode:
    @staticmethod
    def path(entity_type: str) -> str:
        return f"/config/{entity_type}"


class ConfigEntityZNode:
    @staticmethod
    def path(entity_type: str, name: str) -> str:
        return f"/config/{entity_type}/{name}"

    @staticmethod
    def encode(config: Mapping[str, str]) -> bytes:
        return _dumps({"version": 1, "config": {str(k): str(v) for k, v in config.items()}})

    @staticmethod
    def decode(entity_type: str, name: str, data: bytes | None) -> dict[str, str]:
        if not data:  # a node created without data holds no overrides (as in Kafka)
            return {}
        path = ConfigEntityZNode.path(entity_type, name)
        o = _Obj(path, _loads(path, data))
        o.version(1)
        config = o.obj("config")
        return {k: config.string(k) for k in config.d}


class ConfigChangesZNode:
    """``/config/changes``: sequential notices ``config_change_<10 digits>``."""

    PREFIX = "config_change_"

    @staticmethod
    def path() -> str:
        return "/config/changes"

    @staticmethod
    def create_path() -> str:
        return f"/config/changes/{ConfigChangesZNode.PREFIX}"

    @staticmethod
    def encode(entity_path: str) -> bytes:
        """``entity_path``: ``<type>/<sanitized name>``, e.g. ``topics/t``."""
        return _dumps({"version": 2, "entity_path": entity_path})

    @staticmethod
    def decode(name: str, data: bytes | None) -> str:
        """The entity path, from version 2 or Kafka's older version 1."""
        path = f"{ConfigChangesZNode.path()}/{name}"
        o = _Obj(path, _loads(path, data))
        if o.version(1, 2) == 1:
            return f"{o.string('entity_type')}/{o.string('entity_name')}"
        entity_path = o.string("entity_path")
        if entity_path.split("/", 1)[0] not in CONFIG_TYPES or "/" not in entity_path:
            raise BadZnodeError(path, f"entity_path {entity_path!r} is not <type>/<name>")
        return entity_path


class ConfigChange(NamedTuple):
    """A config change notice: znode name, its sequence number, the entity
    path it names (``topics/t``) and when it was made (ms)."""

    name: str
    sequence: int
    entity_path: str
    ctime_ms: int


def sequence_number(name: str, prefix: str) -> int:
    """The number of a sequential znode ``<prefix><10 digits>`` (-1 if not one)."""
    digits = name[len(prefix):] if name.startswith(prefix) else ""
    return int(digits) if digits.isdigit() else -1


# -- /admin -------------------------------------------------------------------------------

TopicPartition = tuple[str, int]


def _partition_list(path: str, o: _Obj) -> list[TopicPartition]:
    out = []
    for i, item in enumerate(o.array("partitions")):
        p = _Obj(path, item, f"partitions[{i}]")
        out.append((p.string("topic"), p.integer("partition")))
    return out


def _partition_json(partitions: Iterable[TopicPartition]) -> list[dict[str, Any]]:
    return [{"topic": t, "partition": p} for t, p in partitions]


class DeleteTopicsZNode:
    @staticmethod
    def path() -> str:
        return "/admin/delete_topics"


class DeleteTopicZNode:
    """``/admin/delete_topics/<t>``: a request to delete topic t (no data)."""

    @staticmethod
    def path(topic: str) -> str:
        return f"/admin/delete_topics/{topic}"


class ReassignPartitionsZNode:
    @staticmethod
    def path() -> str:
        return "/admin/reassign_partitions"

    @staticmethod
    def encode(reassignment: Mapping[TopicPartition, Sequence[int]]) -> bytes:
        return _dumps({"version": 1, "partitions": [
            {"topic": t, "partition": p, "replicas": list(r)}
            for (t, p), r in reassignment.items()]})

    @staticmethod
    def decode(data: bytes | None) -> dict[TopicPartition, list[int]]:
        path = ReassignPartitionsZNode.path()
        o = _Obj(path, _loads(path, data))
        o.version(1)
        out: dict[TopicPartition, list[int]] = {}
        for i, item in enumerate(o.array("partitions")):
            p = _Obj(path, item, f"partitions[{i}]")
            out[(p.string("topic"), p.integer("partition"))] = p.integers("replicas")
        return out


class PreferredReplicaElectionZNode:
    @staticmethod
    def path() -> str:
        return "/admin/preferred_replica_election"

    @staticmethod
    def encode(partitions: Iterable[TopicPartition]) -> bytes:
        return _dumps({"version": 1, "partitions": _partition_json(partitions)})

    @staticmethod
    def decode(data: bytes | None) -> set[TopicPartition]:
        path = PreferredReplicaElectionZNode.path()
        o = _Obj(path, _loads(path, data))
        o.version(1)
        return set(_partition_list(path, o))


# -- /isr_change_notification -------------------------------------------------------------

class IsrChangeNotificationZNode:
    PREFIX = "isr_change_"

    @staticmethod
    def path() -> str:
        return "/isr_change_notification"

    @staticmethod
    def create_path() -> str:
        return f"/isr_change_notification/{IsrChangeNotificationZNode.PREFIX}"

    @staticmethod
    def encode(partitions: Iterable[TopicPartition]) -> bytes:
        return _dumps({"version": 1, "partitions": _partition_json(partitions)})

    @staticmethod
    def decode(name: str, data: bytes | None) -> list[TopicPartition]:
        path = f"{IsrChangeNotificationZNode.path()}/{name}"
        o = _Obj(path, _loads(path, data))
        o.version(1)
        return _partition_list(path, o)


# -- /latest_producer_id_block ------------------------------------------------------------

PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE


class ProducerIdBlock(NamedTuple):
    """Producer ids ``first .. last`` (inclusive) handed to ``broker``."""

    broker: int
    first: int
    last: int


class ProducerIdBlockZNode:
    @staticmethod
    def path() -> str:
        return "/latest_producer_id_block"

    @staticmethod
    def encode(block: ProducerIdBlock) -> bytes:
        return _dumps({"version": 1, "broker": block.broker, "block_start": str(block.first),
                       "block_end": str(block.last)})

    @staticmethod
    def decode(data: bytes | None) -> ProducerIdBlock:
        path = ProducerIdBlockZNode.path()
        o = _Obj(path, _loads(path, data))
        o.version(1)
        bounds = []
        for key in ("block_start", "block_end"):
            text = o.string(key)
            if not text.isdigit() or int(text) > LONG_MAX:
                raise BadZnodeError(path, f"field '{key}' is {text!r:.40}, not a producer id")
            bounds.append(int(text))
        if bounds[1] < bounds[0]:
            raise BadZnodeError(path, f"block_end {bounds[1]} is below block_start {bounds[0]}")
        return ProducerIdBlock(o.integer("broker"), bounds[0], bounds[1])


# -- what a Kafka broker creates at startup -----------------------------------------------

# Kafka's ZkData.PersistentZkPaths, in its order.
PERSISTENT_PATHS = (
    "/consumers",
    "/brokers/ids",
    "/brokers/topics",
    "/config/changes",
    "/admin/delete_topics",
    "/brokers/seqid",
    "/isr_change_notification",
    "/latest_producer_id_block",
    "/log_dir_event_notification",
    *(ConfigEntityTypeZNode.path(t) for t in CONFIG_TYPES),
)
