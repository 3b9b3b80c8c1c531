"""CreatePartitions: grow a topic (partitions can only be added, never removed)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode
from pylog.server.create_topics import MAX_PARTITIONS_PER_REQUEST
from pylog.server.topics import TopicError

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.CREATE_PARTITIONS
VERSIONS = (0, 3)


async def _grow(node: NodeServices, t: Any, validate_only: bool, budget: int) -> int:
    """Grow (or just check) one topic; the number of partitions it adds."""
    info = node.metadata.topic(t.name)
    if info is None:
        raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         f"The topic '{t.name}' does not exist.")
    if t.count < info.count:
        raise TopicError(ErrorCode.INVALID_PARTITIONS,
                         f"Topic currently has {info.count} partitions, which is higher "
                         f"than the requested {t.count}.")
    if t.count == info.count:
        raise TopicError(ErrorCode.INVALID_PARTITIONS,
                         f"Topic already has {info.count} partitions.")
    if t.assignments is not None:
        if len(t.assignments) != t.count - info.count:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Increasing the number of partitions by "
                             f"{t.count - info.count} but {len(t.assignments)} "
                             "assignments provided.")
    added = t.count - info.count
    if added > budget:
        # Kafka's controller bounds the records one request may write
        # (MAX_RECORDS_PER_USER_OP); growing a topic to 2**31-1 partitions
        # would otherwise register that count before making the first log
        # and leave the node unable to start again.
        raise TopicError(ErrorCode.POLICY_VIOLATION,
                         "Excessively large number of partitions per request.")
    await node.admin.create_partitions(
        t.name, t.count, None if t.assignments is None else
        [list(a.broker_ids) for a in t.assignments], validate_only)
    return added


async def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    results = []
    # As Kafka's ControllerApis: a name given twice gets one INVALID_REQUEST
    # and is not grown at all.
    names = [t.name for t in body.topics]
    duplicates = {n for n in names if names.count(n) > 1}
    for name in dict.fromkeys(n for n in names if n in duplicates):
        results.append({"name": name, "error_code": ErrorCode.INVALID_REQUEST,
                        "error_message": "Duplicate topic name."})
    budget = MAX_PARTITIONS_PER_REQUEST
    for t in body.topics:
        if t.name in duplicates:
            continue
        try:
            budget -= await _grow(node, t, body.validate_only, budget)
        except TopicError as exc:
            results.append({"name": t.name, "error_code": exc.code, "error_message": str(exc)})
            continue
        results.append({"name": t.name, "error_code": 0, "error_message": None})
    return {"throttle_time_ms": 0, "results": results}
