"""ListGroups: every live group with its protocol type (v4+: state, v5+: type filters)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey, ErrorCode

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.LIST_GROUPS
VERSIONS = (0, 5)
GROUP_TYPE = "classic"  # the only group protocol pylog runs


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    states = {s.lower() for s in body.states_filter or ()}
    types = {t.lower() for t in body.types_filter or ()}
    groups = []
    if not types or GROUP_TYPE in types:
        for g in node.groups.list_groups():
            if states and str(g.state).lower() not in states:
                continue
            groups.append({"group_id": g.group_id, "protocol_type": g.protocol_type or "",
                           "group_state": str(g.state), "group_type": GROUP_TYPE})
    # As Kafka's handleListGroups: the groups of the partitions loaded, and
    # COORDINATOR_LOAD_IN_PROGRESS while some partition is still loading.
    error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if node.groups.loading else 0
    return {"throttle_time_ms": 0, "error_code": error, "groups": groups}
