"""Transaction markers for partitions led by other nodes (Kafka's
TransactionMarkerChannelManager), a cluster's transaction coordinator's way
to end a transaction everywhere it wrote.

A marker for a partition this node leads is written here at once.  One led
elsewhere goes to its leader in a WriteTxnMarkers request, retried (after
``RETRY_BACKOFF_S``) while the leader is unknown, away, changing
(NOT_LEADER_OR_FOLLOWER, ...) or short of in-sync replicas, until it is
written or the partition is gone; the coordinator writes the transaction's
Complete state once every marker is.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from pylog.net.client import BrokerClient, BrokerUnavailable
from pylog.protocol import ApiKey, ErrorCode

if TYPE_CHECKING:
    from pylog.server.metadata_cache import MetadataCache
    from pylog.server.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.1
# Answers after which the marker is sent again (the leader moved, or cannot
# take it yet); any other is final (written, or refused for good: logged).
_RETRY = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
                    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR,
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})


class TxnMarkerChannel:
    def __init__(self, node_id: int, replicas: ReplicaManager, metadata: MetadataCache,
                 request_timeout_s: float) -> None:
        self.node_id = node_id
        self.replicas = replicas
        self.metadata = metadata
        self.client = BrokerClient(f"txn-markers-{node_id}",
                                   request_timeout_s=request_timeout_s)

    def write(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
              commit: bool, coordinator_epoch: int) -> object:
        """A MarkerWriter (pylog.coordinator.transactions): the error code of a
        marker written here, or a future of one sent to the leader."""
        part = self.replicas.get(topic, partition)
        if part is not None and part.is_leader:
            return self.replicas.write_marker(topic, partition, producer_id, producer_epoch,
                                              commit, coordinator_epoch)
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        loop.create_task(self._send(topic, partition, producer_id, producer_epoch, commit,
                                    coordinator_epoch, done))
        return done

    async def _send(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                    commit: bool, coordinator_epoch: int, done: asyncio.Future) -> None:
        body = {"markers": [{"producer_id": producer_id, "producer_epoch": producer_epoch,
                             "transaction_result": commit, "coordinator_epoch":
                             coordinator_epoch, "topics": [{"name": topic,
                                                            "partition_indexes": [partition]}]}]}
        error: int = ErrorCode.NONE
        while True:
            info = self.metadata.partition(topic, partition)
            if info is None:  # deleted: nothing left to end there
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                break
            if info.leader == self.node_id:
                part = self.replicas.get(topic, partition)
                if part is not None and part.is_leader:
                    error = self.replicas.write_marker(topic, partition, producer_id,
                                                       producer_epoch, commit,
                                                       coordinator_epoch) or ErrorCode.NONE
                    if error not in _RETRY:
                        break
            else:
                broker = self.metadata.broker(info.leader)
                if broker is not None:
                    try:
                        conn = self.client.connection(broker.node_id, broker.host, broker.port)
                        r = await conn.request(ApiKey.WRITE_TXN_MARKERS, body)
                        error = r.markers[0].topics[0].partitions[0].error_code
                        if error not in _RETRY:
                            break
                    except BrokerUnavailable as exc:
                        log.info("WriteTxnMarkers to broker %d: %s", broker.node_id, exc)
            await asyncio.sleep(RETRY_BACKOFF_S)
        if error:
            log.warning("the %s marker of producer %d in %s-%d was refused: %s",
                        "COMMIT" if commit else "ABORT", producer_id, topic, partition,
                        ErrorCode(error).name)
        if not done.done():
            done.set_result(error)

    def close(self) -> None:
        self.client.close()
