"""DeleteTopics: by name (v0-5) or by name or id (v6).

As Kafka's ControllerApis.deleteTopics: with deletion disabled the whole
request is refused; an entry naming both a name and an id, or neither, a name
or id given twice, and a name whose topic is also given by id are refused
with INVALID_REQUEST, and such a topic is not deleted.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode
from pylog.server.topics import TopicError

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext
    from pylog.server.metadata_cache import TopicInfo

API_KEY = ApiKey.DELETE_TOPICS
VERSIONS = (0, 6)
ZERO_ID = uuid.UUID(int=0)
# TOPIC_DELETION_DISABLED came with v3; older clients are told INVALID_REQUEST.
FIRST_VERSION_KNOWING_DISABLED = 3

Wanted = tuple[str | None, uuid.UUID]  # an entry: (name or None, id or ZERO_ID)


def _row(name: str | None, topic_id: uuid.UUID | None, code: int,
         message: str | None) -> dict[str, Any]:
    return {"name": name, "topic_id": topic_id, "error_code": code, "error_message": message}


def _invalid(name: str | None, topic_id: uuid.UUID, message: str) -> dict[str, Any]:
    return _row(name, topic_id, ErrorCode.INVALID_REQUEST, message)


async def _delete(node: NodeServices, name: str, topic_id: uuid.UUID) -> dict[str, Any]:
    try:
        deleted = await node.admin.delete_topic(name)
    except TopicError as exc:
        return _row(name, topic_id, exc.code, str(exc))
    return _row(name, deleted, 0, None)


async def _by_id(node: NodeServices, topic_id: uuid.UUID, ids: Counter, names: Counter,
                 found: TopicInfo | None) -> dict[str, Any] | None:
    if ids[topic_id] > 1:
        return _invalid(None, topic_id, "Duplicate topic id.")
    if found is None:
        return _row(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID,
                    "This server does not host this topic ID.")
    if names[found.name] == 1:  # also given by name: that entry's row says so
        return None
    return await _delete(node, found.name, topic_id)


async def _by_name(node: NodeServices, name: str, names: Counter,
             ids_found: dict[str, uuid.UUID]) -> dict[str, Any]:
    if names[name] > 1:
        return _invalid(name, ZERO_ID, "Duplicate topic name.")
    if name in ids_found:
        return _invalid(name, ids_found[name],
                        "The provided topic name maps to an ID that was already supplied.")
    return await _delete(node, name, ZERO_ID)


async def _results(node: NodeServices, wanted: list[Wanted]) -> list[dict[str, Any]]:
    """One row per distinct entry, in the request's order (Kafka shuffles them)."""
    names = Counter(n for n, i in wanted if n is not None and i == ZERO_ID)
    ids = Counter(i for n, i in wanted if n is None and i != ZERO_ID)
    found = {i: node.metadata.topic_by_id(i) for i in ids}
    ids_found = {t.name: i for i, t in found.items() if t is not None}
    results: list[dict[str, Any]] = []
    seen: set[Wanted] = set()
    for name, topic_id in wanted:
        if name is None and topic_id == ZERO_ID:
            results.append(_invalid(None, ZERO_ID, "Neither topic name nor id were specified."))
        elif name is not None and topic_id != ZERO_ID:
            results.append(_invalid(name, topic_id,
                                    "You may not specify both topic name and topic id."))
        elif (name, topic_id) not in seen:
            seen.add((name, topic_id))
            row = (await _by_name(node, name, names, ids_found) if name is not None else
                   await _by_id(node, topic_id, ids, names, found.get(topic_id)))
            if row is not None:
                results.append(row)
    return results


async def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    version = ctx.api_version
    wanted: list[Wanted] = ([(t.name, t.topic_id) for t in body.topics] if version >= 6
                            else [(name, ZERO_ID) for name in body.topic_names])
    if not node.config["delete.topic.enable"]:
        code = (ErrorCode.TOPIC_DELETION_DISABLED if version >= FIRST_VERSION_KNOWING_DISABLED
                else ErrorCode.INVALID_REQUEST)
        return {"throttle_time_ms": 0, "responses": [
            _row(name, topic_id, code, "Topic deletion is disabled.")
            for name, topic_id in wanted]}
    rows = await _results(node, wanted)
    # A cluster: answered once this node's metadata no longer has them, or
    # timeout_ms passed (REQUEST_TIMED_OUT; the deletion goes on).
    late = await node.admin.await_deleted(
        [r["name"] for r in rows if r["error_code"] == 0 and r["name"]], body.timeout_ms)
    for r in rows:
        exc = late.get(r["name"])
        if exc is not None:
            r.update(error_code=exc.code, error_message=str(exc))
    return {"throttle_time_ms": 0, "responses": rows}
