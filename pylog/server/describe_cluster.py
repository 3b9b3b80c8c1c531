"""DescribeCluster: this node is the whole cluster and its controller."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode
from pylog.server.metadata import CLUSTER_OPERATIONS, authorized_operations

if TYPE_CHECKING:
    from pylog.server.broker import Broker

API_KEY = ApiKey.DESCRIBE_CLUSTER
VERSIONS = (0, 1)
BROKER_ENDPOINT = 1


def handle(broker: Broker, header: Any, body: Any) -> dict[str, Any]:
    if header.api_version >= 1 and body.endpoint_type != BROKER_ENDPOINT:
        return {"error_code": ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                "error_message": "only broker endpoints are served",
                "endpoint_type": body.endpoint_type, "cluster_id": broker.cluster_id}
    ep = broker.endpoint
    return {"error_code": 0, "error_message": None, "endpoint_type": BROKER_ENDPOINT,
            "cluster_id": broker.cluster_id, "controller_id": broker.node_id,
            "brokers": [{"broker_id": broker.node_id, "host": ep.host, "port": ep.port,
                         "rack": None}],
            "cluster_authorized_operations": authorized_operations(
                body.include_cluster_authorized_operations, CLUSTER_OPERATIONS)}
