"""DescribeCluster: the live brokers and the controller, from the metadata cache."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode
from pylog.server.metadata import CLUSTER_OPERATIONS, authorized_operations

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.DESCRIBE_CLUSTER
VERSIONS = (0, 1)
BROKER_ENDPOINT = 1


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    if ctx.api_version >= 1 and body.endpoint_type != BROKER_ENDPOINT:
        return {"error_code": ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                "error_message": "only broker endpoints are served",
                "endpoint_type": body.endpoint_type,
                "cluster_id": node.metadata.cluster_id}
    metadata = node.metadata
    return {"error_code": 0, "error_message": None, "endpoint_type": BROKER_ENDPOINT,
            "cluster_id": metadata.cluster_id, "controller_id": metadata.controller_id,
            "brokers": [{"broker_id": b.node_id, "host": b.host, "port": b.port,
                         "rack": b.rack} for b in metadata.brokers()],
            "cluster_authorized_operations": authorized_operations(
                body.include_cluster_authorized_operations, CLUSTER_OPERATIONS)}
