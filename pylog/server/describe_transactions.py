"""DescribeTransactions (KIP-664): no transactional id has state here.

As Kafka's TransactionCoordinator.handleDescribeTransactions on the
coordinator of every transaction log partition (FindCoordinator names this
node for every transactional id): an empty id is INVALID_REQUEST, any other
id has no metadata (pylog has no transactions: InitProducerId refuses
transactional ids), so TRANSACTIONAL_ID_NOT_FOUND.  Only the id and the error
are set, the other fields keep the generated message's defaults: state "",
timeout 0, start time 0, producer id 0, epoch 0, no topics.  Ids are answered
one by one in the request's order, duplicates included.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode

if TYPE_CHECKING:
    from pylog.server.broker import Broker

API_KEY = ApiKey.DESCRIBE_TRANSACTIONS
VERSIONS = (0, 0)


def _state(transactional_id: str) -> dict[str, Any]:
    code = (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND if transactional_id
            else ErrorCode.INVALID_REQUEST)
    return {"error_code": code, "transactional_id": transactional_id, "transaction_state": "",
            "transaction_timeout_ms": 0, "transaction_start_time_ms": 0, "producer_id": 0,
            "producer_epoch": 0, "topics": []}


def handle(broker: Broker, header: Any, body: Any) -> dict[str, Any]:
    return {"throttle_time_ms": 0,
            "transaction_states": [_state(t) for t in body.transactional_ids]}
