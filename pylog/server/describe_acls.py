"""DescribeAcls: SECURITY_DISABLED, no authorizer being configured.

Kafka 3.6 ``AclApis.handleDescribeAcls`` with no authorizer: a top-level
SECURITY_DISABLED, "No Authorizer is configured on the broker", no resources.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey
from pylog.server.acls import SECURITY_DISABLED, refuse_unknown

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.DESCRIBE_ACLS
VERSIONS = (0, 3)


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    refuse_unknown("DescribeAclsRequest", (body.resource_type_filter, body.pattern_type_filter,
                                           body.operation, body.permission_type))
    return {"throttle_time_ms": 0, "error_code": SECURITY_DISABLED,
            "error_message": "No Authorizer is configured on the broker", "resources": []}
