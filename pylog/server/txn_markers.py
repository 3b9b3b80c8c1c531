"""Transaction markers on their way to the partitions of a transaction
(Kafka's TransactionMarkerChannelManager and its
TransactionMarkerRequestCompletionHandler): the transaction coordinator's
way to end a transaction everywhere it wrote.

A marker goes to its partition's leader: written here when that is this node
(always, on a single node), else sent in a WriteTxnMarkers request.  Either
way it is written as Kafka's handleWriteTxnMarkersRequest writes it, acks=-1
(``ReplicaManager.write_marker``): refused (NOT_ENOUGH_REPLICAS) while the
partition has fewer in-sync replicas than its min.insync.replicas, and done
once the in-sync replicas have it.  As Kafka's completion handler, a marker
is sent again, after ``RETRY_BACKOFF_S`` and to whoever leads then, on
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS,
NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT and KAFKA_STORAGE_ERROR,
and while its leader is unknown or cannot be reached; any other answer is
final: written, fenced (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED:
the coordinator then leaves the transaction to whoever fenced it), or refused
for good (logged).  A partition the metadata no longer has is done with (Kafka:
"likely deleted already").  The coordinator writes the transaction's Complete
state once every marker is done, and cancels the markers of the transactions
of a partition it resigns: a cancelled marker is not tried again.

A single node's markers are done at once (its partitions' ISR is itself),
with no task and no future, unless one is refused for a reason to retry.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, NamedTuple

from pylog.net.client import BrokerClient, BrokerUnavailable
from pylog.protocol import ApiKey, ErrorCode

if TYPE_CHECKING:
    from pylog.server.metadata_cache import MetadataCache
    from pylog.server.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.1
# Answers after which the marker is sent again (Kafka's "retriable errors").
_RETRY = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR})
# Final answers that end nothing wrong: the coordinator's epoch or the
# producer's moved on (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED),
# logged at INFO as Kafka does; any other refusal is a WARNING.
FENCED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})
_NOT_LEADER = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)


class Marker(NamedTuple):
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int

    def __str__(self) -> str:
        return (f"the {'COMMIT' if self.commit else 'ABORT'} marker of producer "
                f"{self.producer_id} in {self.topic}-{self.partition}")


class TxnMarkerChannel:
    def __init__(self, node_id: int, replicas: ReplicaManager, metadata: MetadataCache,
                 request_timeout_s: float) -> None:
        self.node_id = node_id
        self.replicas = replicas
        self.metadata = metadata
        self.client = BrokerClient(f"txn-markers-{node_id}",
                                   request_timeout_s=request_timeout_s)
        self.closed = False
        self._tasks: set[asyncio.Task] = set()

    def write(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
              commit: bool, coordinator_epoch: int) -> int | asyncio.Future[int]:
        """A MarkerWriter (pylog.coordinator.transactions): the final error
        code (0: written) of a marker written here and done with now, else a
        future of it, done once the marker is in its partition's in-sync
        replicas or refused for good."""
        marker = Marker(topic, partition, producer_id, producer_epoch, commit,
                        coordinator_epoch)
        first: int | asyncio.Future[int] | None = None
        part = self.replicas.get(topic, partition)
        if part is not None and part.is_leader:
            first = self._write_here(marker)
            if not isinstance(first, asyncio.Future) and first not in _RETRY:
                return first  # a refusal here was logged by write_marker
        loop = asyncio.get_running_loop()
        done: asyncio.Future[int] = loop.create_future()
        task = loop.create_task(self._deliver(marker, first, done))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return done

    def _write_here(self, marker: Marker) -> int | asyncio.Future[int]:
        return self.replicas.write_marker(*marker)

    async def _deliver(self, marker: Marker, first: int | asyncio.Future[int] | None,
                       done: asyncio.Future[int]) -> None:
        """Until the marker's answer is final, or the coordinator cancels
        ``done``; ``first``: the outcome of a first write here (None: none)."""
        error = await _outcome(marker, first) if isinstance(first, asyncio.Future) else first
        deleted = False
        last = None
        while (error is None or error in _RETRY) and not done.done() and not self.closed:
            if error is not None:
                if error != last:  # once per cause, not once per retry
                    log.info("%s: %s, sending it again", marker, ErrorCode(error).name)
                    last = error
                await asyncio.sleep(RETRY_BACKOFF_S)
            info = self.metadata.partition(marker.topic, marker.partition)
            if info is None:  # deleted: nothing left to end there
                error, deleted = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), True
                break
            error = await _outcome(marker, self._send(marker, info.leader))
        if done.done() or self.closed or error is None:
            return  # cancelled by the coordinator, or the node stops: not done
        if deleted:
            log.info("%s is not written: the partition is gone", marker)
        elif error:
            _refused(marker, error)
        done.set_result(error)

    async def _send(self, marker: Marker, leader: int) -> int:
        """One try at the partition's leader: its answer (NOT_LEADER_OR_FOLLOWER
        when there is none, or it cannot be reached)."""
        if leader == self.node_id:
            written = self._write_here(marker)
            return await written if isinstance(written, asyncio.Future) else written
        broker = self.metadata.broker(leader) if leader >= 0 else None
        if broker is None:
            return _NOT_LEADER
        body = {"markers": [{"producer_id": marker.producer_id,
                             "producer_epoch": marker.producer_epoch,
                             "transaction_result": marker.commit,
                             "coordinator_epoch": marker.coordinator_epoch,
                             "topics": [{"name": marker.topic,
                                         "partition_indexes": [marker.partition]}]}]}
        try:
            conn = self.client.connection(broker.node_id, broker.host, broker.port)
            r = await conn.request(ApiKey.WRITE_TXN_MARKERS, body)
        except BrokerUnavailable as exc:
            log.info("WriteTxnMarkers to broker %d: %s", broker.node_id, exc)
            return _NOT_LEADER
        return int(r.markers[0].topics[0].partitions[0].error_code)

    def close(self) -> None:
        self.closed = True
        self.client.close()


async def _outcome(marker: Marker, attempt: Awaitable[int]) -> int:
    """``attempt``'s error code; a failure of pylog's own is logged and final
    (UNKNOWN_SERVER_ERROR), so that the transaction is not held by it."""
    try:
        return await attempt
    except Exception:
        log.exception("writing %s failed", marker)
        return int(ErrorCode.UNKNOWN_SERVER_ERROR)


def _refused(marker: Marker, error: int) -> None:
    if error in FENCED:
        log.info("%s was refused: %s", marker, ErrorCode(error).name)
    else:
        log.warning("%s was refused: %s", marker, ErrorCode(error).name)
