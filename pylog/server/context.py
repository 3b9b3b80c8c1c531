"""What a request handler is given: the node's collaborators and the request's context.

Handlers (``handle(node, ctx, body)``, one module per API) receive
:class:`NodeServices`, the collaborators a request may need (the replica
manager, the metadata cache, the admin side of the metadata, the group and
transaction coordinators, quotas, fetch sessions, metrics), never the node
that owns their life cycle; and a :class:`RequestContext` for the request
itself (its header, the peer it came from, the principal).  Produce and Fetch,
which decode their frames natively, get ``handle_frame(node, frame)``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pylog.coordinator import GroupCoordinator
    from pylog.coordinator.transactions import TransactionCoordinator
    from pylog.log import LogManager
    from pylog.server.client_quotas import ClientQuotas
    from pylog.server.config import BrokerConfig
    from pylog.server.fetch_sessions import FetchSessionCache
    from pylog.server.metadata_cache import MetadataCache
    from pylog.server.producer_ids import ProducerIds
    from pylog.server.replica_manager import ReplicaManager
    from pylog.server.topic_admin import TopicAdmin
    from pylog.server.txn_verification import TxnVerifier
    from pylog.server.zk_node import ZkNode

ANONYMOUS = "User:ANONYMOUS"


@dataclass(eq=False)
class NodeServices:
    """The collaborators of one node, as request handlers use them."""

    config: BrokerConfig
    node_id: int
    replicas: ReplicaManager
    logs: LogManager
    metadata: MetadataCache
    admin: TopicAdmin
    groups: GroupCoordinator
    txns: TransactionCoordinator
    producer_ids: ProducerIds
    quotas: ClientQuotas
    fetch_sessions: FetchSessionCache
    executor: Executor  # disk work that must not stall the loop (cold reads)
    # The API versions this node serves (ApiVersions answers with them).
    api_versions: dict[int, tuple[int, int]]
    # Dynamic broker configs changed (AlterConfigs): the node applies them
    # to what it runs (listener quotas, log defaults, the cleaner).
    reconfigure: Callable[[BrokerConfig], None]
    # Saves dynamic broker config layers (default, this node's; None:
    # unchanged): the node's file, or a cluster's ZooKeeper.
    save_dynamic: Callable[[Any, Any], Awaitable[None]]
    # Prometheus counters (pylog.server.metrics.BrokerMetrics; not imported
    # here: it reads these services), None when metrics.listener is off.
    metrics: Any = None
    # This node's membership of a ZooKeeper-mode cluster; None for the
    # embedded single node.
    cluster: ZkNode | None = None
    fetch_max_bytes: int = 55 * 1024 * 1024
    verify_txn_partitions: bool = True
    # A cluster node's verification with transaction coordinators on other
    # nodes (None: the single node, or verification off).
    txn_verifier: TxnVerifier | None = None

    @property
    def stopping(self) -> bool:
        """Shutting down: parked requests answer now rather than wait."""
        return self.replicas.stopping


class RequestContext:
    """One request's header, the peer it came from and its principal.

    The header's fields are read through here (``ctx.api_version``); the
    peer is the (host, port) of the client's connection, as group members'
    client host records it."""

    __slots__ = ("header", "peer", "principal")

    def __init__(self, header: Any, peer: Any = None, principal: str = ANONYMOUS) -> None:
        self.header = header
        self.peer = peer
        self.principal = principal

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id

    @property
    def client_id(self) -> str | None:
        return self.header.client_id
