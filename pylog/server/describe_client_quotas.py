"""DescribeClientQuotas: the configured client quotas a filter matches
(:mod:`pylog.server.client_quotas`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey
from pylog.server.client_quotas import QuotaError

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.DESCRIBE_CLIENT_QUOTAS
VERSIONS = (0, 1)


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    components = [(c.entity_type, c.match_type, c.match) for c in body.components]
    try:
        found = node.quotas.store.describe(components, body.strict)
    except QuotaError as exc:
        return {"throttle_time_ms": 0, "error_code": exc.code, "error_message": str(exc),
                "entries": None}
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "entries": [
        {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
         "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
        for entity, values in found]}
