"""ListPartitionReassignments: nothing is ever being reassigned on one node.

As Kafka 3.6's controller (``ReplicationControlManager.listPartitionReassignments``,
``QuorumController.listPartitionReassignments``): only partitions with a
reassignment in progress are listed, and named topics or partitions that do
not exist are skipped without an error -- so the answer is always an empty
list, error code 0 and a null message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.LIST_PARTITION_REASSIGNMENTS
VERSIONS = (0, 0)


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "topics": []}
