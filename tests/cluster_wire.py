"""What a ZooKeeper-mode cluster's nodes and its ZooKeeper say, asked one node
at a time over the wire (tests/kafka_wire.py's RawClient) or with kazoo: the
admin requests go to the node named, never routed to the controller as the
clients' admin APIs route them."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from broker_process import wait_for
from kafka_wire import RawClient
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from pylog.protocol import ApiKey, ErrorCode

# Liveness bounds (never speed thresholds): the controller's requests reach
# every node; a request that waits on the controller.
AGREE_TIMEOUT_S = 60
REQUEST_TIMEOUT_MS = 30_000
TOPIC_RESOURCE = 2
_SAME = object()  # agreed() without a wanted answer


def request(address: str, api_key: ApiKey, version: int, body: dict[str, Any]) -> Any:
    # The socket outlives the request's own timeout: an answer, not a hang, is checked.
    with RawClient(address, timeout=REQUEST_TIMEOUT_MS / 1000 + 30) as client:
        return client.request(api_key, version, body)


# -- what a node says -------------------------------------------------------------------


def metadata(address: str, topics: Sequence[str] | None = None) -> Any:
    """Metadata v9 (None: every topic), never auto-creating."""
    body = {"topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": False}
    return request(address, ApiKey.METADATA, 9, body)


def brokers(address: str) -> dict[int, tuple[str, int]]:
    """node id -> (host, port) in the node's Metadata."""
    return {b.node_id: (b.host, b.port) for b in metadata(address, []).brokers}


def partitions(address: str, topic: str) -> dict[int, tuple[int, int]] | None:
    """partition -> (error code, leader) in the node's Metadata; None when the
    node does not know the topic."""
    (t,) = metadata(address, [topic]).topics
    if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return None
    assert t.error_code == 0, t
    return {p.partition_index: (p.error_code, p.leader_id) for p in t.partitions}


def leaders(address: str, topic: str) -> dict[int, int]:
    """partition -> leader in the node's Metadata (-1: none); {} for an unknown topic."""
    found = partitions(address, topic) or {}
    return {p: leader for p, (_, leader) in found.items()}


def describe_cluster(address: str) -> tuple[int, list[int]]:
    """(controller id, node ids) in the node's DescribeCluster."""
    r = request(address, ApiKey.DESCRIBE_CLUSTER, 0,
                {"include_cluster_authorized_operations": False})
    assert r.error_code == 0, r
    return r.controller_id, sorted(b.broker_id for b in r.brokers)


def topic_configs(address: str, topic: str) -> dict[str, str | None]:
    """The topic's configs in the node's DescribeConfigs."""
    r = request(address, ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": TOPIC_RESOURCE, "resource_name": topic, "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False})
    (res,) = r.results
    assert res.error_code == 0, res
    return {c.name: c.value for c in res.configs}


def agreed(addresses: Sequence[str], ask: Any, want: Any = _SAME,
           timeout: float = AGREE_TIMEOUT_S, what: str = "every node to agree") -> Any:
    """``ask(address)``'s answer once every node gives ``want``; without
    ``want``, once every node gives the same answer (None meaning not yet)."""
    def same() -> tuple[Any] | None:
        answers = [ask(a) for a in addresses]
        first = answers[0] if want is _SAME else want
        if first is None or any(x != first for x in answers):
            return None
        return (first,)  # true even for an answer that is not (node 0, False)
    return wait_for(same, timeout, what, interval=0.2)[0]  # type: ignore[index]


def settled_leaders(addresses: Sequence[str], topic: str, count: int) -> dict[int, int]:
    """partition -> leader, once every node's Metadata shows the same ``count``
    partitions of ``topic``, each with a leader."""
    def ask(address: str) -> dict[int, int] | None:
        found = partitions(address, topic)
        if found is None or len(found) != count:
            return None
        if any(error or leader < 0 for error, leader in found.values()):
            return None
        return {p: leader for p, (_, leader) in found.items()}
    return agreed(addresses, ask, what=f"every node's Metadata of {topic}")


# -- admin requests to the node named -----------------------------------------------------


def create_topic(address: str, name: str, count: int,
                 configs: dict[str, str] | None = None) -> Any:
    """CreateTopics v4 (replication factor 1): the topic's result row."""
    r = request(address, ApiKey.CREATE_TOPICS, 4, {"topics": [
        {"name": name, "num_partitions": count, "replication_factor": 1, "assignments": [],
         "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
        "timeout_ms": REQUEST_TIMEOUT_MS, "validate_only": False})
    (row,) = r.topics
    return row


def create_topic_when_served(address: str, name: str, count: int,
                             timeout: float = AGREE_TIMEOUT_S) -> Any:
    """CreateTopics, again while the node answers that ZooKeeper is not
    available (its session not back yet after an outage)."""
    def created() -> Any:
        row = create_topic(address, name, count)
        return row if row.error_code != ErrorCode.UNKNOWN_SERVER_ERROR else None
    return wait_for(created, timeout, f"CreateTopics {name} to be served")


def create_partitions(address: str, name: str, count: int) -> Any:
    r = request(address, ApiKey.CREATE_PARTITIONS, 1, {"topics": [
        {"name": name, "count": count, "assignments": None}],
        "timeout_ms": REQUEST_TIMEOUT_MS, "validate_only": False})
    (row,) = r.results
    return row


def alter_topic_configs(address: str, name: str, configs: dict[str, str]) -> Any:
    """AlterConfigs v1: the topic's configs become exactly ``configs``."""
    r = request(address, ApiKey.ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": TOPIC_RESOURCE, "resource_name": name,
         "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
        "validate_only": False})
    (row,) = r.responses
    return row


def incremental_alter_topic_configs(address: str, name: str, set_: dict[str, str],
                                    delete: tuple[str, ...] = ()) -> Any:
    """IncrementalAlterConfigs v0: ``set_`` set, ``delete`` back to their defaults."""
    ops = [{"name": k, "config_operation": 0, "value": v} for k, v in set_.items()]
    ops += [{"name": k, "config_operation": 1, "value": None} for k in delete]
    r = request(address, ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, {"resources": [
        {"resource_type": TOPIC_RESOURCE, "resource_name": name, "configs": ops}],
        "validate_only": False})
    (row,) = r.responses
    return row


def delete_topic(address: str, name: str) -> Any:
    r = request(address, ApiKey.DELETE_TOPICS, 5, {"topic_names": [name],
                                                  "timeout_ms": REQUEST_TIMEOUT_MS})
    (row,) = r.responses
    return row


# -- ZooKeeper ----------------------------------------------------------------------------


@contextmanager
def zookeeper(connect: str) -> Iterator[KazooClient]:
    """A kazoo client on the cluster's ZooKeeper (``host:port[/chroot]``)."""
    client = KazooClient(hosts=connect)
    client.start(timeout=30)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def zk_controller(connect: str) -> int | None:
    """The node /controller names (None while there is none)."""
    with zookeeper(connect) as zk:
        try:
            data, _ = zk.get("/controller")
        except NoNodeError:
            return None
    return int(json.loads(data)["brokerid"])


def zk_broker_ids(connect: str) -> list[int]:
    with zookeeper(connect) as zk:
        return sorted(int(i) for i in zk.get_children("/brokers/ids"))
