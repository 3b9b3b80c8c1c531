"""DeleteGroups: remove empty groups and their offsets (NON_EMPTY_GROUP otherwise)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.DELETE_GROUPS
VERSIONS = (0, 2)


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    results = node.groups.delete_groups(list(body.groups_names))
    return {"throttle_time_ms": 0, "results": [
        {"group_id": g, "error_code": code} for g, code in results.items()]}
