"""What a coordinator needs of its node: its internal topic, and which topics exist.

The group coordinator keeps its state in ``__consumer_offsets``, the
transaction coordinator in ``__transaction_state``.  Who leads each partition
of those topics, how the topics get created and where their logs live is the
node's business, not the coordinators': a single node creates a topic at once
and leads every partition, a cluster node asks the controller and leads the
partitions LeaderAndIsr gives it.  The coordinators see only this protocol
(the node implements it: ``pylog.server.internal_topics`` for the single node).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol, TypeAlias

if TYPE_CHECKING:
    from pylog.log import Log

# A topic's partition count, None when the node knows no such topic (the
# group coordinator refuses offsets of partitions that do not exist).
PartitionCount = Callable[[str], "int | None"]


class NotCoordinatorError(Exception):
    """A write to a partition this node does not lead (any more): the
    request that caused it is answered NOT_COORDINATOR."""


# What an append still waits for: None when nothing (one node, acks 0 or 1,
# an ISR of this node alone), else a future of the outcome once the in-sync
# replicas have it: NONE, or the error Kafka's DelayedProduce gives
# (NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER).
Replication: TypeAlias = "asyncio.Future[int] | None"
# Kafka's request.timeout.ms (the broker's, 30 s): how long a write with no
# timeout of its own waits for the in-sync replicas -- a transaction marker
# (WriteTxnMarkers), the tombstone of an expired transactional id.
REQUEST_TIMEOUT_MS = 30_000


class NotEnoughReplicasError(Exception):
    """An acks=-1 write to a partition with fewer in-sync replicas than its
    min.insync.replicas: refused before anything was appended (Kafka's
    NOT_ENOUGH_REPLICAS; each coordinator maps it to its own error)."""


class InternalTopic(Protocol):
    """One internal topic as its coordinator reaches it through the node."""

    name: str

    def partition_count(self) -> int | None:
        """The topic's partition count once it exists; None before."""
        ...

    def ensure_created(self, partitions: int, configs: Mapping[str, str],
                       needed: int | None = None) -> None:
        """Have the topic created if it does not exist.  A single node creates
        it before returning: the log of partition ``needed`` at once and the
        others off the event loop (all at once when None); a cluster node
        asks the controller and the topic appears later (callers see
        :meth:`partition_count` still None).  Raises ``TopicError`` when it
        cannot be made."""
        ...

    def leader_log(self, partition: int) -> Log | None:
        """The log of ``partition`` when this node leads it; None otherwise."""
        ...

    def append(self, partition: int, records: bytearray, acks: int,
               timeout_ms: int) -> tuple[int, Replication]:
        """Append ``records`` to ``partition`` as its leader, as Kafka's
        ReplicaManager.appendRecords does for a coordinator: its base offset,
        and with ``acks`` -1 the wait for the in-sync replicas (at most
        ``timeout_ms``).  Raises NotCoordinatorError when this node does not
        lead the partition, NotEnoughReplicasError (acks -1 only), and what
        Log.append raises."""
        ...

    def storage_failed(self, message: str, exc: OSError) -> None:
        """A write to the topic failed on disk: the node takes the log dir
        offline, as it does for any append the disk refuses."""
        ...
