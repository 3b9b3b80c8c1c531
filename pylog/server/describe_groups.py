"""DescribeGroups: state, protocol and members (with assignments once Stable).

As in Kafka, an unknown group is described as Dead rather than refused, and
member metadata and assignments are only shown in Stable, the one state in
which they belong to the current generation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.coordinator import GroupState
from pylog.protocol import ApiKey
from pylog.server.metadata import GROUP_OPERATIONS

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.DESCRIBE_GROUPS
VERSIONS = (0, 5)


def _describe(node: NodeServices, group_id: str) -> dict[str, Any]:
    error = node.groups.coordinator_error(group_id)
    if error:  # as Kafka's handleDescribeGroup: the error and an empty summary
        return {"error_code": error, "group_id": group_id, "group_state": "",
                "protocol_type": "", "protocol_data": "", "members": []}
    group = node.groups.describe_group(group_id)
    if group is None:
        return {"error_code": 0, "group_id": group_id, "group_state": "Dead",
                "protocol_type": "", "protocol_data": "", "members": []}
    stable = group.is_(GroupState.STABLE)
    return {"error_code": 0, "group_id": group_id, "group_state": str(group.state),
            "protocol_type": group.protocol_type or "",
            "protocol_data": (group.protocol or "") if stable else "",
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "client_id": m.client_id, "client_host": m.client_host,
                         "member_metadata": m.metadata(group.protocol) if stable else b"",
                         "member_assignment": m.assignment if stable else b""}
                        for m in group.members.values()]}


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    groups = [_describe(node, g) for g in body.groups]
    if body.include_authorized_operations:  # v3+; otherwise the field's Int.MinValue
        for g in groups:
            if g["error_code"] == 0:  # as Kafka: not for a group it failed to describe
                g["authorized_operations"] = GROUP_OPERATIONS
    return {"throttle_time_ms": 0, "groups": groups}
