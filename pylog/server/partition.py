"""One topic-partition as this node sees it (Kafka's ``Partition``).

The one owner of a partition's state on this node: who leads it and at which
leader epoch, its replicas and in-sync replicas, the local replica's log (None
when this node holds no replica), the idempotent and transactional producers
seen in it, and the fetches parked on it.  The replica manager
(:mod:`pylog.server.replica_manager`) makes, changes and drops these objects;
the request handlers read them.

On a single node every partition is led here, at the log's leader epoch.  In
a cluster the controller's LeaderAndIsr decides (see ``become_leader`` /
``become_follower``); a request for a partition this node does not lead is
answered NOT_LEADER_OR_FOLLOWER with the leader it knows.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from pylog.protocol import ErrorCode

if TYPE_CHECKING:
    from pylog.log.log import Log
    from pylog.server.producer_state import PartitionProducers

NO_LEADER = -1


class Partition:
    __slots__ = ("topic", "index", "local_id", "log", "leader_id", "leader_epoch",
                 "partition_epoch", "controller_epoch", "replicas", "isr", "producers",
                 "snapshot_at", "waiters")

    def __init__(self, topic: str, index: int, local_id: int, log: Log | None) -> None:
        self.topic = topic
        self.index = index
        self.local_id = local_id  # this node's id
        self.log = log
        self.leader_id = local_id if log is not None else NO_LEADER
        self.leader_epoch = log.leader_epoch if log is not None else -1
        # The partition state's version (ZooKeeper's znode version): changes
        # to replicas or ISR bump it (Kafka's partitionEpoch).
        self.partition_epoch = 0
        self.controller_epoch = 0
        self.replicas: list[int] = [local_id]
        self.isr: list[int] = [local_id]
        # Producer state (None: no producer seen since the log was opened).
        self.producers: PartitionProducers | None = None
        # Log end offset of the last producer snapshot written (None: none).
        self.snapshot_at: int | None = None
        # Fetches parked until data arrives (futures, woken by notify()).
        self.waiters: set[asyncio.Future] = set()

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.index}, leader={self.leader_id}, "
                f"epoch={self.leader_epoch}, isr={self.isr})")

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_id and self.log is not None

    def not_leader_error(self) -> int:
        """What a client asking this node for the partition's leader gets:
        NOT_LEADER_OR_FOLLOWER when another node leads (or may lead soon),
        LEADER_NOT_AVAILABLE while nobody does."""
        return int(ErrorCode.LEADER_NOT_AVAILABLE if self.leader_id == NO_LEADER
                   else ErrorCode.NOT_LEADER_OR_FOLLOWER)

    def notify(self) -> None:
        """Wake the fetches parked here (new data, a new leader, or it went away)."""
        for fut in self.waiters:
            if not fut.done():
                fut.set_result(None)
