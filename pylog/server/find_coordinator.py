"""FindCoordinator: a single node coordinates every group and transactional id."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey

if TYPE_CHECKING:
    from pylog.server.broker import Broker

API_KEY = ApiKey.FIND_COORDINATOR
VERSIONS = (0, 4)


GROUP_KEY_TYPE = 0


def _coordinator(broker: Broker, key: str, key_type: int) -> dict[str, Any]:
    """A group's coordinator is the leader of its ``__consumer_offsets`` partition
    (``abs(javaHash(group)) % offsets.topic.num.partitions``), created here on
    first use as Kafka does (that partition's log at once, the others' off the
    loop: see ``OffsetsStore.ensure_group``); every partition's leader is this node."""
    if key_type == GROUP_KEY_TYPE:
        broker.groups.store.ensure_group(key)
    ep = broker.endpoint
    return {"key": key, "node_id": broker.node_id, "host": ep.host, "port": ep.port,
            "error_code": 0, "error_message": None}


def handle(broker: Broker, header: Any, body: Any) -> dict[str, Any]:
    if header.api_version < 4:
        found = _coordinator(broker, body.key, body.key_type)
        del found["key"]
        return found
    return {"coordinators": [_coordinator(broker, key, body.key_type)
                             for key in body.coordinator_keys]}
