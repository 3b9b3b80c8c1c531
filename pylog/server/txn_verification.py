"""Transaction verification with a remote coordinator (Kafka's
AddPartitionsToTxnManager, KIP-890 part 1), for the produce path.

A leader about to append the first transactional batch of a producer's
transaction to a partition asks the transaction's coordinator whether the
partition is in that transaction.  When the coordinator is this node, the
produce path asks it directly; when it is another node of the cluster, it is
asked here, with a verify-only AddPartitionsToTxn (v4) to that node.  Only
the first batch of a transaction in each partition is asked about: once one
is written, the transaction is open there (see
:meth:`pylog.server.producer_state.PartitionProducers.start_verification`).

Answers are per partition: NONE (verified), or the error the produce
response gives, worded as Kafka's ReplicaManager words it: the coordinator's
retriable errors and a broken connection become NOT_ENOUGH_REPLICAS (which
every client retries without a metadata refresh), PRODUCER_FENCED becomes
INVALID_PRODUCER_EPOCH.  A coordinator that does not serve v4 is not asked
(as Kafka: the partition counts as verified).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from pylog.coordinator.txn_log import TXN_TOPIC
from pylog.net.client import BrokerClient, BrokerUnavailable
from pylog.protocol import ApiKey, ErrorCode

if TYPE_CHECKING:
    from pylog.server.metadata_cache import MetadataCache

log = logging.getLogger(__name__)

VERIFY_VERSION = 4
TopicPartition = tuple[str, int]
# What a produce answer says for each coordinator answer other than NONE.
_RETRIABLE = frozenset({ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NETWORK_EXCEPTION,
                        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                        ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})


def produce_error(code: int) -> tuple[int, str | None]:
    """The produce answer (error, message) for a verification's answer."""
    if code in _RETRIABLE:
        return (ErrorCode.NOT_ENOUGH_REPLICAS, "Unable to verify the partition has been "
                f"added to the transaction. Underlying error: {ErrorCode(code).name}")
    if code == ErrorCode.INVALID_TXN_STATE:
        return (code, "Partition was not added to the transaction")
    if code == ErrorCode.PRODUCER_FENCED:
        return (ErrorCode.INVALID_PRODUCER_EPOCH, None)
    return (code, None)


class TxnVerifier:
    """Sends verify-only AddPartitionsToTxn to the coordinators of other nodes."""

    def __init__(self, node_id: int, metadata: MetadataCache,
                 txn_partition_for: Callable[[str], int], request_timeout_s: float) -> None:
        self.node_id = node_id
        self.metadata = metadata
        self.txn_partition_for = txn_partition_for
        self.client = BrokerClient(f"txn-verification-{node_id}",
                                   request_timeout_s=request_timeout_s)

    def coordinator(self, transactional_id: str) -> int:
        """The node coordinating ``transactional_id`` now, as this node's
        metadata says (-1: none known)."""
        info = self.metadata.partition(TXN_TOPIC, self.txn_partition_for(transactional_id))
        return -1 if info is None else info.leader

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's answer from the coordinator (an ErrorCode, NONE
        when it is in the producer's ongoing transaction)."""
        wanted = list(partitions)
        leader = self.coordinator(transactional_id)
        broker = self.metadata.broker(leader) if leader >= 0 else None
        if broker is None:
            return dict.fromkeys(wanted, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        by_topic: dict[str, list[int]] = {}
        for topic, p in wanted:
            by_topic.setdefault(topic, []).append(p)
        body = {"transactions": [{
            "transactional_id": transactional_id, "producer_id": producer_id,
            "producer_epoch": producer_epoch, "verify_only": True,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}]}
        conn = self.client.connection(broker.node_id, broker.host, broker.port)
        try:
            await conn.ensure_connected()
            version = conn.version(ApiKey.ADD_PARTITIONS_TO_TXN)
            if version < VERIFY_VERSION:
                log.warning("node %d does not serve AddPartitionsToTxn v%d: %s not verified",
                            broker.node_id, VERIFY_VERSION, transactional_id)
                return dict.fromkeys(wanted, ErrorCode.NONE)
            r = await conn.request(ApiKey.ADD_PARTITIONS_TO_TXN, body, VERIFY_VERSION)
        except BrokerUnavailable as exc:
            log.info("verifying %s with node %d: %s", transactional_id, broker.node_id, exc)
            return dict.fromkeys(wanted, ErrorCode.NETWORK_EXCEPTION)
        if r.error_code:
            return dict.fromkeys(wanted, r.error_code)
        answers: dict[TopicPartition, int] = {}
        for txn in r.results_by_transaction:
            for topic in txn.topic_results:
                for p in topic.results_by_partition:
                    answers[(topic.name, p.partition_index)] = p.partition_error_code
        # A partition the answer left out was not verified.
        return {tp: answers.get(tp, ErrorCode.INVALID_TXN_STATE) for tp in wanted}

    def close(self) -> None:
        self.client.close()
