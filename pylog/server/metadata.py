"""Metadata: the node, the cluster id, and topics with this node leading every partition.

A request naming a topic that does not exist creates it when
``auto.create.topics.enable`` and the request (v4+) allow it, as Kafka does;
otherwise the topic comes back with UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode
from pylog.server.topics import Topic, TopicError

if TYPE_CHECKING:
    from pylog.server.broker import Broker

API_KEY = ApiKey.METADATA
VERSIONS = (0, 12)
LEADER_EPOCH = 0


def _topic(broker: Broker, topic: Topic) -> dict[str, Any]:
    node = [broker.node_id]
    return {"error_code": 0, "name": topic.name, "topic_id": topic.topic_id,
            "is_internal": topic.name == "__consumer_offsets",  # Kafka's internal topic
            "partitions": [{"error_code": 0, "partition_index": p, "leader_id": broker.node_id,
                            "leader_epoch": LEADER_EPOCH, "replica_nodes": node,
                            "isr_nodes": node, "offline_replicas": []}
                           for p in range(topic.partitions)]}


def _error(name: str | None, code: int, topic_id: Any = None) -> dict[str, Any]:
    return {"error_code": code, "name": name, "topic_id": topic_id, "partitions": []}


def handle(broker: Broker, header: Any, body: Any) -> dict[str, Any]:
    version = header.api_version
    registry = broker.topics
    requested = body.topics
    if requested is None or (version == 0 and not requested):
        topics = [_topic(broker, t) for t in list(registry.topics.values())]
    else:
        allow_create = broker.config["auto.create.topics.enable"] and (
            version < 4 or body.allow_auto_topic_creation)
        topics = []
        for req in requested:
            name = req.name
            if name is None:  # v10+: by topic id
                found = registry.by_id.get(req.topic_id)
                topics.append(_topic(broker, found) if found else
                              _error(None, ErrorCode.UNKNOWN_TOPIC_ID, req.topic_id))
                continue
            found = registry.get(name)
            if found is None and allow_create:
                try:
                    found = broker.auto_create(name)
                except TopicError as exc:
                    topics.append(_error(name, exc.code))
                    continue
            topics.append(_topic(broker, found) if found else
                          _error(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    ep = broker.endpoint
    return {"throttle_time_ms": 0,
            "brokers": [{"node_id": broker.node_id, "host": ep.host, "port": ep.port,
                         "rack": None}],
            "cluster_id": broker.cluster_id, "controller_id": broker.node_id,
            "topics": topics}
