"""InitProducerId: producer ids for idempotent producers (transactions come later)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode

if TYPE_CHECKING:
    from pylog.server.broker import Broker

API_KEY = ApiKey.INIT_PRODUCER_ID
VERSIONS = (0, 4)
MAX_EPOCH = 32767


def handle(broker: Broker, header: Any, body: Any) -> dict[str, Any]:
    if body.transactional_id is not None:
        # No transaction coordinator yet: refuse clearly instead of pretending.
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return {"throttle_time_ms": 0, "error_code": code, "producer_id": -1,
                "producer_epoch": -1}
    pid, epoch = body.producer_id, body.producer_epoch
    if header.api_version >= 3 and pid >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        # KIP-360: an idempotent producer bumps its epoch to reset its sequences.
        return {"throttle_time_ms": 0, "error_code": 0, "producer_id": pid,
                "producer_epoch": epoch + 1}
    return {"throttle_time_ms": 0, "error_code": 0, "producer_id": broker.producer_ids.next_id(),
            "producer_epoch": 0}
