"""InitProducerId: producer ids for idempotent producers (transactions come later)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode

if TYPE_CHECKING:
    from pylog.server.broker import Broker

log = logging.getLogger(__name__)

API_KEY = ApiKey.INIT_PRODUCER_ID
VERSIONS = (0, 4)


def handle(broker: Broker, header: Any, body: Any) -> dict[str, Any]:
    if body.transactional_id is not None:
        # No transaction coordinator yet: refuse at once (a fatal error for
        # every client, so none retries until its transaction timeout) rather
        # than pretend.  The response has no message field: the broker's log
        # says why, since the code alone reads like a missing ACL.
        log.warning("InitProducerId for transactional.id %r refused with "
                    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED: pylog has no transactions "
                    "(idempotent producers without a transactional.id work)",
                    body.transactional_id)
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return {"throttle_time_ms": 0, "error_code": code, "producer_id": -1,
                "producer_epoch": -1}
    if (body.producer_id < 0) != (body.producer_epoch < 0):
        # As KafkaApis: an id without an epoch, or an epoch without an id.
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST,
                "producer_id": -1, "producer_epoch": -1}
    # As Kafka's TransactionCoordinator for a null transactional id: a new id,
    # always; the one a client names (KIP-360 bump) is not handed back, since
    # this broker cannot tell that the client owns it.
    return {"throttle_time_ms": 0, "error_code": 0, "producer_id": broker.producer_ids.next_id(),
            "producer_epoch": 0}
