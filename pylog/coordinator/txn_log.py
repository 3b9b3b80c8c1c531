"""``__transaction_state``: the transaction coordinator's log, in Kafka's record format.

One record per change of a transactional id's state, key and value as
Kafka's ``TransactionLog`` writes them (version 0), so the topic reads the
same as Kafka's:

* key: version (int16, 0), transactional id (string);
* value: version (int16, 0), producer id (int64), producer epoch (int16),
  transaction timeout ms (int32), state (int8), the partitions in the
  transaction (nullable array of topic + int32 partition ids; null when
  Empty), last update time ms (int64), transaction start time ms (int64).

The topic is compacted and created on first use (the first InitProducerId
with a transactional id), as Kafka does, with
``transaction.state.log.num.partitions`` partitions and
``transaction.state.log.segment.bytes`` segments; an id's records go to
partition ``abs(javaHash(id)) % partitions``.  A null value removes the id
(transactional.id.expiration.ms).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum

from pylog.coordinator.offsets_store import OffsetsStore
from pylog.coordinator.records import Reader

TXN_TOPIC = "__transaction_state"
# Kafka's transactionTopicConfigs.  min.insync.replicas is
# transaction.state.log.min.isr in a cluster (the node sets it when it asks
# for the topic); the single node's one replica is its whole ISR.
TXN_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "104857600",
                     "unclean.leader.election.enable": "false", "compression.type": "uncompressed",
                     "min.insync.replicas": "1"}
_I16 = struct.Struct(">h")
_VALUE_HEAD = struct.Struct(">hqhib")
_TIMES = struct.Struct(">qq")


class TxnState(IntEnum):
    """Kafka's TransactionState ids (what the log stores)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def label(self) -> str:
        """The name DescribeTransactions and ListTransactions use."""
        return _LABELS[self]


_LABELS = {TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing",
           TxnState.PREPARE_COMMIT: "PrepareCommit", TxnState.PREPARE_ABORT: "PrepareAbort",
           TxnState.COMPLETE_COMMIT: "CompleteCommit", TxnState.COMPLETE_ABORT: "CompleteAbort",
           TxnState.DEAD: "Dead", TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence"}
STATE_NAMES = {label: state for state, label in _LABELS.items()}


@dataclass
class TxnMetadata:
    """One transactional id's state (Kafka's TransactionMetadata)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    update_ms: int = -1
    start_ms: int = -1
    # KIP-360: the id and epoch before the last bump, so a producer that
    # retries its InitProducerId gets the same answer (memory only, as Kafka).
    last_producer_id: int = -1
    last_producer_epoch: int = -1
    # A write of its next state is waiting for the log's in-sync replicas
    # (Kafka's pendingState): requests for it wait (CONCURRENT_TRANSACTIONS).
    pending: bool = False


def txn_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode()
    return _I16.pack(0) + _I16.pack(len(raw)) + raw


def txn_value(m: TxnMetadata) -> bytes:
    out = bytearray(_VALUE_HEAD.pack(0, m.producer_id, m.producer_epoch, m.timeout_ms,
                                     int(m.state)))
    if m.state == TxnState.EMPTY:
        out += struct.pack(">i", -1)
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(m.partitions):
            by_topic.setdefault(topic, []).append(partition)
        out += struct.pack(">i", len(by_topic))
        for topic, ids in by_topic.items():
            raw = topic.encode()
            out += _I16.pack(len(raw)) + raw + struct.pack(f">i{len(ids)}i", len(ids), *ids)
    out += _TIMES.pack(m.update_ms, m.start_ms)
    return bytes(out)


def parse_txn_key(data: bytes) -> str | None:
    """The transactional id of a key; None for a key of another version."""
    r = Reader(data)
    if r.i16() != 0:
        return None
    return r.string()


def parse_txn_value(transactional_id: str, data: bytes) -> TxnMetadata:
    r = Reader(data)
    version = r.i16()
    if version != 0:
        raise ValueError(f"unknown transaction log value version {version}")
    pid, epoch, timeout = r.i64(), r.i16(), r.i32()
    state = TxnState(r.i8())
    partitions: set[tuple[str, int]] = set()
    n = r.i32()
    for _ in range(max(n, 0)):
        topic = r.string() or ""
        for _ in range(r.i32()):
            partitions.add((topic, r.i32()))
    update_ms, start_ms = r.i64(), r.i64()
    return TxnMetadata(transactional_id, pid, epoch, timeout, state, partitions,
                       update_ms, start_ms)


class TxnStore(OffsetsStore):
    """``__transaction_state`` (the offsets store's machinery, another topic)."""

    TOPIC = TXN_TOPIC
    TOPIC_CONFIGS = TXN_TOPIC_CONFIGS
