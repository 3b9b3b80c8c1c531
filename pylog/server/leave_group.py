"""LeaveGroup: members leave (v3+: several at once, static ones by instance id)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.LEAVE_GROUP
VERSIONS = (0, 5)


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    if ctx.api_version < 3:
        top, errors = node.groups.leave_group(body.group_id, [(body.member_id, None)])
        # Kafka's LeaveGroupResponse before v3: the top-level error, else the
        # first member error.
        return {"throttle_time_ms": 0,
                "error_code": top or next((e for e in errors if e), 0)}
    leaving = [(m.member_id, m.group_instance_id) for m in body.members]
    top, errors = node.groups.leave_group(body.group_id, leaving)
    # A top-level error (INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE) comes
    # without member results, as in Kafka.
    return {"throttle_time_ms": 0, "error_code": top, "members": [
        {"member_id": mid, "group_instance_id": iid, "error_code": err}
        for (mid, iid), err in zip(leaving, errors, strict=True)] if not top else []}
