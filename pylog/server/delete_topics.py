"""DeleteTopics: by name (v0-5) or by name or id (v6)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode
from pylog.server.topics import TopicError

if TYPE_CHECKING:
    from pylog.server.broker import Broker

API_KEY = ApiKey.DELETE_TOPICS
VERSIONS = (0, 6)


def _delete(broker: Broker, name: str | None, topic_id: Any) -> dict[str, Any]:
    if name is None:
        found = broker.topics.by_id.get(topic_id)
        if found is None:
            return {"name": None, "topic_id": topic_id, "error_code": ErrorCode.UNKNOWN_TOPIC_ID,
                    "error_message": "This server does not host this topic ID."}
        name = found.name
    if not broker.config["delete.topic.enable"]:
        return {"name": name, "topic_id": topic_id,
                "error_code": ErrorCode.TOPIC_DELETION_DISABLED,
                "error_message": "Topic deletion is disabled."}
    try:
        topic = broker.delete_topic(name)
    except TopicError as exc:
        return {"name": name, "topic_id": topic_id, "error_code": exc.code,
                "error_message": str(exc)}
    return {"name": name, "topic_id": topic.topic_id, "error_code": 0, "error_message": None}


def handle(broker: Broker, header: Any, body: Any) -> dict[str, Any]:
    if header.api_version >= 6:
        results = [_delete(broker, t.name, t.topic_id) for t in body.topics]
    else:
        results = [_delete(broker, name, None) for name in body.topic_names]
    return {"throttle_time_ms": 0, "responses": results}
