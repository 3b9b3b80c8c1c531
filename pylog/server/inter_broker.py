"""What the embedded single node answers to the inter-broker APIs
(LeaderAndIsr, UpdateMetadata, StopReplica): it is no member of a cluster,
so no controller can be its own; Kafka's answer to a request from a
controller it does not follow is STALE_CONTROLLER_EPOCH."""

from __future__ import annotations

from typing import Any

from pylog.protocol import ApiKey, ErrorCode


def not_in_a_cluster(api_key: int, body: Any) -> dict[str, Any]:
    code = ErrorCode.STALE_CONTROLLER_EPOCH
    if api_key == ApiKey.LEADER_AND_ISR:
        return {"error_code": code, "partition_errors": [], "topics": []}
    if api_key == ApiKey.STOP_REPLICA:
        return {"error_code": code, "partition_errors": []}
    return {"error_code": code}
