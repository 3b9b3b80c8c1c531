"""AddPartitionsToTxn: partitions join a producer's transaction (v0-3, the clients' versions).

As Kafka's KafkaApis.handleAddPartitionToTxnRequest: a partition this node
does not host is UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED,
none added; else the coordinator's one answer for every partition
(:mod:`pylog.coordinator.transactions`).  v4+ (KIP-890, the brokers' batched
verification) is not served: on one node the produce path asks the
coordinator directly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
VERSIONS = (0, 3)


def old_fenced(code: int, version: int, first_new: int = 2) -> int:
    """Kafka's compatibility step: clients before ``first_new`` do not know
    PRODUCER_FENCED and get INVALID_PRODUCER_EPOCH instead."""
    if version < first_new and code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    wanted = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
    missing = {tp for tp in wanted if node.metadata.partition(*tp) is None}
    if missing:
        codes = {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in missing
                 else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in wanted}
    else:
        code = node.txns.add_partitions(
            body.v3_and_below_transactional_id, body.v3_and_below_producer_id,
            body.v3_and_below_producer_epoch, wanted)
        code = old_fenced(code, ctx.api_version)
        codes = dict.fromkeys(wanted, code)
    by_topic: dict[str, list[dict[str, int]]] = {}
    for (topic, p), code in codes.items():
        by_topic.setdefault(topic, []).append({"partition_index": p,
                                               "partition_error_code": code})
    return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
        {"name": topic, "results_by_partition": parts} for topic, parts in by_topic.items()]}
