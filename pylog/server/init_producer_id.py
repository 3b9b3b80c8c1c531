"""InitProducerId: producer ids for idempotent and transactional producers.

Without a transactional id, a new producer id at epoch 0, always.  With one,
the transaction coordinator's answer (:mod:`pylog.coordinator.transactions`):
the id's producer id with its epoch bumped, fencing the producer that held
it (and aborting a transaction it left open).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode
from pylog.server.add_partitions_to_txn import old_fenced
from pylog.server.producer_ids import ProducerIdsUnavailable

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.INIT_PRODUCER_ID
VERSIONS = (0, 4)


def _answer(code: int, producer_id: int = -1, epoch: int = -1) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": code, "producer_id": producer_id,
            "producer_epoch": epoch}


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> Any:
    if (body.producer_id < 0) != (body.producer_epoch < 0):
        # As KafkaApis: an id without an epoch, or an epoch without an id.
        return _answer(ErrorCode.INVALID_REQUEST)
    txn_id = body.transactional_id
    if txn_id is not None:
        if not txn_id:  # TransactionCoordinator.handleInitProducerId
            return _answer(ErrorCode.INVALID_REQUEST)
        try:
            result = node.txns.init_producer_id(
                txn_id, body.transaction_timeout_ms, body.producer_id, body.producer_epoch)
        except ProducerIdsUnavailable:
            return _answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if isinstance(result, asyncio.Future):  # the log's in-sync replicas are waited for
            return _later(result, ctx.api_version)
        code, pid, epoch = result
        return _answer(old_fenced(code, ctx.api_version, 4), pid, epoch)
    # As Kafka's TransactionCoordinator for a null transactional id: a new id,
    # always; the one a client names (KIP-360 bump) is not handed back, since
    # this broker cannot tell that the client owns it.
    try:
        return _answer(ErrorCode.NONE, node.producer_ids.next_id(), 0)
    except ProducerIdsUnavailable:  # a cluster's ZooKeeper is away: the client retries
        return _answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)


async def _later(result: asyncio.Future[tuple[int, int, int]], version: int
                 ) -> dict[str, Any]:
    try:
        code, pid, epoch = await asyncio.shield(result)
    except ProducerIdsUnavailable:  # a new id was wanted after the wait
        return _answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return _answer(old_fenced(code, version, 4), pid, epoch)
