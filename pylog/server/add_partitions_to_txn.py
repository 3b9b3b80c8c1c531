"""AddPartitionsToTxn: partitions join a producer's transaction.

v0-3, the clients' versions, as Kafka's KafkaApis.handleAddPartitionToTxnRequest:
a partition this node does not know is UNKNOWN_TOPIC_OR_PARTITION and the
others OPERATION_NOT_ATTEMPTED, none added; else the coordinator's one answer
for every partition (:mod:`pylog.coordinator.transactions`).

v4 (KIP-890), the brokers' batched version: several transactions in one
request, each either added or, with ``verify_only``, only checked (is each
partition in the producer's ongoing transaction?), which is what a leader
asks before the first transactional batch of a producer lands in a
partition whose transaction this node coordinates
(:mod:`pylog.server.txn_verification`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
VERSIONS = (0, 4)
FIRST_BATCHED = 4


def old_fenced(code: int, version: int, first_new: int = 2) -> int:
    """Kafka's compatibility step: clients before ``first_new`` do not know
    PRODUCER_FENCED and get INVALID_PRODUCER_EPOCH instead."""
    if version < first_new and code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    if ctx.api_version >= FIRST_BATCHED:
        return {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": [
            {"transactional_id": txn.transactional_id,
             "topic_results": _by_topic(_transaction(node, txn))}
            for txn in body.transactions]}
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
    return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _by_topic(codes)}


def _transaction(node: NodeServices, txn: Any) -> dict[tuple[str, int], int]:
    """One transaction of a v4 request: each partition's answer."""
    wanted = [(t.name, p) for t in txn.topics for p in t.partitions]
    txn_id = txn.transactional_id
    if not txn_id:
        return dict.fromkeys(wanted, ErrorCode.INVALID_REQUEST)
    if not txn.verify_only:
        return dict.fromkeys(wanted, node.txns.add_partitions(
            txn_id, txn.producer_id, txn.producer_epoch, wanted))
    error = node.txns.coordinator_error(txn_id)
    if error:
        return dict.fromkeys(wanted, error)
    out = {}
    for topic, p in wanted:
        code = node.txns.verify(txn_id, txn.producer_id, txn.producer_epoch, topic, p)
        # On the wire, as Kafka's coordinator: another epoch is fenced.
        out[(topic, p)] = (ErrorCode.PRODUCER_FENCED if code == ErrorCode.INVALID_PRODUCER_EPOCH
                           else code)
    return out


def _by_topic(codes: dict[tuple[str, int], int]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, int]]] = {}
    for (topic, p), code in codes.items():
        by_topic.setdefault(topic, []).append({"partition_index": p,
                                               "partition_error_code": code})
    return [{"name": topic, "results_by_partition": parts} for topic, parts in by_topic.items()]
