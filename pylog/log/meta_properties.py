"""``meta.properties``: which node and cluster a log dir belongs to (Kafka's MetaProperties).

KRaft's version 1 of the file: ``version=1``, ``node.id`` and ``cluster.id``,
a Java properties file.  ``pylog storage format`` writes it before a first
start (Kafka's quickstart); a KRaft node (``process.roles`` set) will not
start without it, as Kafka's KafkaRaftServer will not (:func:`require`).
Without ``process.roles`` (the embedded default, ZooKeeper mode) ``pylog
broker`` writes it into an empty dir on its first start.  Every later start
checks that the dir belongs to the configured node.

A cluster id is a Kafka ``Uuid`` as text: its 16 bytes in URL-safe base64
without padding (22 characters), as ``kafka-storage.sh random-uuid`` prints.
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from pylog.log.durable import write_atomically

META_PROPERTIES = "meta.properties"
VERSION = "1"
# Kafka's Uuid.ZERO_UUID and METADATA_TOPIC_ID: never handed out as ids.
_RESERVED = (bytes(16), bytes(15) + b"\x01")


def random_cluster_id() -> str:
    """A new Kafka Uuid string (Uuid.randomUuid: never a reserved one, never
    one whose text starts with '-', which a command line takes for an option)."""
    while True:
        raw = uuid.uuid4().bytes
        text = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        if raw not in _RESERVED and not text.startswith("-"):
            return text


def check_cluster_id(text: str) -> str:
    """``text`` if it is a Kafka Uuid string, else ValueError in Kafka's words."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError as exc:
        raise ValueError(f"Cluster ID string {text} does not appear to be a valid UUID: "
                         f"{exc}") from None
    if len(raw) != 16:
        raise ValueError(f"Cluster ID string {text} does not appear to be a valid UUID: "
                         f"Input string `{text}` decoded as {len(raw)} bytes, which is not "
                         "equal to the expected 16 bytes of a base64-encoded UUID")
    return text


def read(log_dir: Path) -> dict[str, str] | None:
    """The dir's meta.properties, None when it has none."""
    path = log_dir / META_PROPERTIES
    if not path.exists():
        return None
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def write(log_dir: Path, node_id: int, cluster_id: str) -> dict[str, str]:
    """Write a version-1 meta.properties (atomically); its properties."""
    meta = {"cluster.id": cluster_id, "node.id": str(node_id), "version": VERSION}
    text = "#\n" + "".join(f"{k}={v}\n" for k, v in meta.items())
    write_atomically(log_dir / META_PROPERTIES, text.encode())
    return meta


def require(log_dir: Path) -> dict[str, str]:
    """The dir's properties; ValueError in Kafka's words (BrokerMetadataCheckpoint's,
    with pylog's command) when it has none: a KRaft node's dir is formatted
    by the operator, never on the node's first start."""
    meta = read(log_dir)
    if meta is None:
        raise ValueError(f"No `meta.properties` found in {log_dir} (have you run "
                         "`pylog storage format` to format the directory?)")
    return meta


def ensure(log_dir: Path, node_id: int, cluster_id: str | None = None) -> dict[str, str]:
    """The dir's properties, written first when it has none (``cluster_id``,
    else a new one); ValueError when they belong to another node or cluster."""
    meta = read(log_dir)
    path = log_dir / META_PROPERTIES
    if meta is None:
        return write(log_dir, node_id, cluster_id or random_cluster_id())
    if "node.id" in meta and int(meta["node.id"]) != node_id:
        raise ValueError(f"{path} belongs to node.id={meta['node.id']}, not {node_id}")
    if cluster_id and meta.get("cluster.id") not in (None, cluster_id):
        raise ValueError(f"{path} belongs to cluster.id={meta['cluster.id']}, "
                         f"not {cluster_id}")
    return meta
