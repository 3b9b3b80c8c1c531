"""DeleteAcls: SECURITY_DISABLED for each filter, no authorizer being configured.

Kafka 3.6 ``AclApis.handleDeleteAcls`` with no authorizer answers
``DeleteAclsRequest.getErrorResponse(SecurityDisabledException("No Authorizer
is configured."))``: one filter result per filter, in order, each with that
code and message and no matching ACLs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey
from pylog.server.acls import NO_AUTHORIZER, SECURITY_DISABLED, refuse_unknown

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.DELETE_ACLS
VERSIONS = (0, 3)


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    refuse_unknown("Filters", [code for f in body.filters for code in (
        f.resource_type_filter, f.pattern_type_filter, f.operation, f.permission_type)])
    return {"throttle_time_ms": 0, "filter_results": [
        {"error_code": SECURITY_DISABLED, "error_message": NO_AUTHORIZER, "matching_acls": []}
        for _ in body.filters]}
