"""CreateAcls: SECURITY_DISABLED for each creation, no authorizer being configured.

Kafka 3.6 ``AclApis.handleCreateAcls`` with no authorizer answers
``CreateAclsRequest.getErrorResponse(SecurityDisabledException("No Authorizer
is configured."))``: one result per creation, in order, each with that code
and message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey
from pylog.server.acls import NO_AUTHORIZER, SECURITY_DISABLED, refuse_unknown

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.CREATE_ACLS
VERSIONS = (0, 3)


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    refuse_unknown("CreatableAcls", [code for c in body.creations for code in (
        c.resource_type, c.resource_pattern_type, c.operation, c.permission_type)])
    return {"throttle_time_ms": 0, "results": [
        {"error_code": SECURITY_DISABLED, "error_message": NO_AUTHORIZER}
        for _ in body.creations]}
