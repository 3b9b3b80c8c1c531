"""DescribeTransactions (KIP-664): the coordinator's state of each transactional id.

As Kafka's TransactionCoordinator.handleDescribeTransactions: an empty id is
INVALID_REQUEST, an id the coordinator does not know (never used, or
expired) TRANSACTIONAL_ID_NOT_FOUND; a known one gets its state name,
timeout, start time (-1 when no transaction is open), producer id and epoch
and the partitions of its transaction, by topic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.DESCRIBE_TRANSACTIONS
VERSIONS = (0, 0)


def _state(node: NodeServices, transactional_id: str) -> dict[str, Any]:
    # INVALID_REQUEST for "", NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS
    # for an id of a partition not loaded here, TRANSACTIONAL_ID_NOT_FOUND.
    code, m = node.txns.describe(transactional_id)
    if m is None:
        return {"error_code": code, "transactional_id": transactional_id,
                "transaction_state": "", "transaction_timeout_ms": 0,
                "transaction_start_time_ms": 0, "producer_id": 0, "producer_epoch": 0,
                "topics": []}
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(m.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return {"error_code": 0, "transactional_id": transactional_id,
            "transaction_state": m.state.label, "transaction_timeout_ms": m.timeout_ms,
            "transaction_start_time_ms": m.start_ms, "producer_id": m.producer_id,
            "producer_epoch": m.producer_epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]}


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    return {"throttle_time_ms": 0,
            "transaction_states": [_state(node, t) for t in body.transactional_ids]}
