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

import asyncio
from typing import TYPE_CHECKING, Any

from pylog.coordinator.acked import answer, then
from pylog.protocol import ApiKey, ErrorCode

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
VERSIONS = (0, 4)
FIRST_BATCHED = 4
Codes = dict[tuple[str, int], int]  # each partition's answer


def old_fenced(code: int, version: int, first_new: int = 2) -> int:
    """Kafka's compatibility step: clients before ``first_new`` do not know
    PRODUCER_FENCED and get INVALID_PRODUCER_EPOCH instead."""
    if version < first_new and code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> Any:
    """The answer, or (a cluster's coordinator waiting for its log's in-sync
    replicas) an awaitable of it."""
    if ctx.api_version >= FIRST_BATCHED:
        results = [(txn.transactional_id, _transaction(node, txn)) for txn in body.transactions]
        if any(isinstance(codes, asyncio.Future) for _, codes in results):
            return _batched_later(results)
        return _batched(results)  # type: ignore[arg-type]
    wanted = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
    missing = {tp for tp in wanted if node.metadata.partition(*tp) is None}
    if missing:
        return _v3({tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in missing
                    else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in wanted})
    return answer(node.txns.add_partitions(
        body.v3_and_below_transactional_id, body.v3_and_below_producer_id,
        body.v3_and_below_producer_epoch, wanted),
        lambda code: _v3(dict.fromkeys(wanted, old_fenced(code, ctx.api_version))))


def _v3(codes: Codes) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _by_topic(codes)}


def _batched(results: list[tuple[str, Codes]]) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": [
        {"transactional_id": txn_id, "topic_results": _by_topic(codes)}
        for txn_id, codes in results]}


async def _batched_later(results: list[tuple[str, Codes | asyncio.Future[Codes]]]
                         ) -> dict[str, Any]:
    return _batched([(txn_id, await asyncio.shield(codes)
                      if isinstance(codes, asyncio.Future) else codes)
                     for txn_id, codes in results])


def _transaction(node: NodeServices, txn: Any) -> Codes | asyncio.Future[Codes]:
    """One transaction of a v4 request: each partition's answer (a future of
    them while the coordinator's write waits for the in-sync replicas)."""
    wanted = [(t.name, p) for t in txn.topics for p in t.partitions]
    txn_id = txn.transactional_id
    if not txn_id:
        return dict.fromkeys(wanted, ErrorCode.INVALID_REQUEST)
    if not txn.verify_only:
        return then(node.txns.add_partitions(txn_id, txn.producer_id, txn.producer_epoch,
                                             wanted),
                    lambda code: dict.fromkeys(wanted, code))
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


def _by_topic(codes: Codes) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, int]]] = {}
    for (topic, p), code in codes.items():
        by_topic.setdefault(topic, []).append({"partition_index": p,
                                               "partition_error_code": code})
    return [{"name": topic, "results_by_partition": parts} for topic, parts in by_topic.items()]
