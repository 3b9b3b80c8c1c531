"""FindCoordinator: a single node coordinates every group and transactional id."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey

if TYPE_CHECKING:
    from pylog.server.broker import Broker

API_KEY = ApiKey.FIND_COORDINATOR
VERSIONS = (0, 4)


def handle(broker: Broker, header: Any, body: Any) -> dict[str, Any]:
    ep = broker.endpoint
    if header.api_version < 4:
        return {"error_code": 0, "error_message": None, "node_id": broker.node_id,
                "host": ep.host, "port": ep.port}
    return {"coordinators": [
        {"key": key, "node_id": broker.node_id, "host": ep.host, "port": ep.port,
         "error_code": 0, "error_message": None} for key in body.coordinator_keys]}
