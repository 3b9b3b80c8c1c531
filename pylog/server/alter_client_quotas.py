"""AlterClientQuotas: set or remove client quotas, saved before the answer
(:mod:`pylog.server.client_quotas`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey

if TYPE_CHECKING:
    from pylog.server.context import NodeServices, RequestContext

API_KEY = ApiKey.ALTER_CLIENT_QUOTAS
VERSIONS = (0, 1)


def handle(node: NodeServices, ctx: RequestContext, body: Any) -> dict[str, Any]:
    entries = [([(e.entity_type, e.entity_name) for e in entry.entity],
                [(op.key, op.value, op.remove) for op in entry.ops])
               for entry in body.entries]
    results = node.quotas.store.alter(entries, body.validate_only)
    return {"throttle_time_ms": 0, "entries": [
        {"error_code": code, "error_message": message,
         "entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name}
                    for e in entry.entity]}
        for entry, (code, message) in zip(body.entries, results, strict=True)]}
