"""``__consumer_offsets``: where groups and committed offsets are written and read back.

The topic is compacted (the last value of a key is the truth) and is created
on first use (FindCoordinator, a commit, a join), not at startup, as Kafka
creates it: a broker without groups pays nothing.  A group's records all go to
one partition, ``abs(javaHash(group)) % offsets.topic.num.partitions``, whose
leader is the group's coordinator.  The node creates the topic and says which
partitions it leads (:class:`~pylog.coordinator.internal_topic.InternalTopic`).

Loading reads one partition from its log start up to where it ended when its
leadership began, keeping the last value per key; a null value (tombstone)
removes the key.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from typing import TYPE_CHECKING

from pylog.coordinator import records as fmt
from pylog.coordinator.internal_topic import (
    REQUEST_TIMEOUT_MS,
    InternalTopic,
    NotCoordinatorError,
    Replication,
)
from pylog.log.errors import OffsetOutOfRangeError
from pylog.records import BatchBuilder, read_batches
from pylog.records.markers import marker_batch, marker_of

if TYPE_CHECKING:
    from pylog.log import Log

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
# Kafka's offsetsTopicConfigs: compacted, 100 MiB segments
# (offsets.topic.segment.bytes gives the segment size it is created with), the
# producer's compression; no min.insync.replicas of its own (the broker's).
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "104857600",
                         "compression.type": "producer"}
# The smallest segment.bytes a topic takes (Kafka's LogConfig: the v0 record
# overhead); offsets.topic.segment.bytes only has to be at least 1.
_MIN_SEGMENT_BYTES = 14
_READ_CHUNK = 1 << 20
# How long a write waits for the in-sync replicas unless told otherwise:
# offsets.commit.timeout.ms's default.
DEFAULT_TIMEOUT_MS = 5000

Entry = tuple[bytes, bytes | None]  # key, value (None: tombstone)
# What a partition holds, in order: (producer id, marker, key, value).  A plain
# record has producer id -1 and marker None; a record of a transaction its
# producer's id; a transaction marker True (commit) or False (abort), with no
# key or value.
Event = tuple[int, "bool | None", "bytes | None", "bytes | None"]


class OffsetsStore:
    """A compacted internal topic of keyed records, loaded back partition by
    partition (``__consumer_offsets`` here; the transaction log subclasses it)."""

    TOPIC = OFFSETS_TOPIC
    TOPIC_CONFIGS = OFFSETS_TOPIC_CONFIGS

    def __init__(self, topic: InternalTopic, num_partitions: int,
                 time_ms: Callable[[], int] | None = None, *,
                 segment_bytes: int = 104857600) -> None:
        self.topic = topic
        # The topic's configs when it is created (offsets.topic.segment.bytes).
        self.topic_configs = dict(self.TOPIC_CONFIGS,
                                  **{"segment.bytes": str(max(segment_bytes,
                                                              _MIN_SEGMENT_BYTES))})
        self.time_ms = time_ms or (lambda: time.time_ns() // 1_000_000)
        self.configured_partitions = num_partitions  # offsets.topic.num.partitions
        # Where partitions are read when loaded (the node's I/O threads);
        # None: the event loop's default executor.
        self.executor: Executor | None = None
        # Told of each transactional batch (commit None) and marker (commit
        # True/False) written: (partition, producer id, epoch, offset,
        # commit, coordinator epoch); the broker keeps the partition's
        # producer state with it.
        self.on_txn_write: Callable[[int, int, int, int, bool | None, int], None] | None = None

    @property
    def num_partitions(self) -> int:
        """The topic's partition count once it exists, however it was created
        (a client's Metadata or CreateTopics may come first), else the
        configured one: Kafka's getGroupMetadataTopicPartitionCount.  The
        group -> partition mapping must follow the topic that holds it."""
        count = self.topic.partition_count()
        return count if count is not None else self.configured_partitions

    def partition_for(self, key: str) -> int:
        return fmt.partition_for(key, self.num_partitions)

    def create_topic(self, key: str | None = None) -> bool:
        """Have the topic created if it is missing, as Kafka creates it on
        first use; True once it exists.  ``key``: the group or transactional
        id it is first used for, whose partition a single node makes at once
        (None: every partition at once).  A cluster node only asks the
        controller: False until the topic appears.  Raises ``TopicError``
        when it cannot be made."""
        if self.topic.partition_count() is None:
            self.topic.ensure_created(self.configured_partitions, self.topic_configs,
                                      None if key is None else self.partition_for(key))
        return self.topic.partition_count() is not None

    def _append(self, partition: int, records: bytearray, acks: int,
                timeout_ms: int) -> tuple[int, Replication]:
        if self.topic.partition_count() is None:
            self.topic.ensure_created(self.configured_partitions, self.topic_configs,
                                      partition)
        return self.topic.append(partition, records, acks, timeout_ms)

    def storage_failed(self, message: str, exc: OSError) -> None:
        self.topic.storage_failed(message, exc)

    def append(self, key: str, entries: list[Entry],
               producer: tuple[int, int] | None = None, *, acks: int = -1,
               timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Replication:
        """Write one batch of records to ``key``'s partition (a group id, a
        transactional id) with ``acks`` (Kafka's coordinators: -1); what is
        left to wait for, the in-sync replicas' copy (None: nothing, at most
        ``timeout_ms``).  ``producer``: (id, epoch) of the transaction the
        records belong to (TxnOffsetCommit).  Raises what Log.append raises,
        NotCoordinatorError when this node does not lead the partition and
        NotEnoughReplicasError when it has too few in-sync replicas (the
        coordinators map them to error codes)."""
        now = self.time_ms()
        builder = BatchBuilder() if producer is None else BatchBuilder(
            producer_id=producer[0], producer_epoch=producer[1], base_sequence=-1,
            is_transactional=True)
        for k, value in entries:
            builder.append(now, k, value)
        partition = self.partition_for(key)
        offset, replication = self._append(partition, bytearray(builder.build()), acks,
                                           timeout_ms)
        if producer is not None and self.on_txn_write is not None:
            self.on_txn_write(partition, producer[0], producer[1], offset, None, 0)
        return replication

    def append_marker(self, partition: int, producer_id: int, producer_epoch: int,
                      commit: bool, coordinator_epoch: int = 0,
                      timeout_ms: int = REQUEST_TIMEOUT_MS) -> Replication:
        """A transaction marker in ``partition``, written as Kafka's
        WriteTxnMarkers writes one (acks=-1): what is left to wait for, the
        in-sync replicas' copy (None: nothing).  Raises as :meth:`append`."""
        offset, replication = self._append(partition, marker_batch(
            producer_id, producer_epoch, commit, coordinator_epoch, self.time_ms()), -1,
            timeout_ms)
        if self.on_txn_write is not None:
            self.on_txn_write(partition, producer_id, producer_epoch, offset, commit,
                              coordinator_epoch)
        return replication

    # -- loading -----------------------------------------------------------------

    def reader(self, partition: int,
               high_watermark: int | None = None) -> Callable[[], Iterator[Event]]:
        """On the loop, at an election: a function that reads ``partition``
        from its log start up to its log end now (or ``high_watermark``, which
        a cluster's leader gives: what is above it may yet be truncated),
        safe to run on another thread.  Nothing to read at 0 (a partition
        just created): its log is not even looked up."""
        if high_watermark == 0:
            return lambda: iter(())
        found = self.topic.leader_log(partition)
        if found is None:
            raise NotCoordinatorError(f"{self.TOPIC}-{partition} is not led by this node")
        end = found.log_end_offset
        if high_watermark is not None:
            end = min(end, high_watermark)
        return lambda: read_partition(found, end)


def read_partition(found: Log, end: int) -> Iterator[Event]:
    """Every record and transaction marker of a log below offset ``end``,
    oldest first."""
    offset = found.log_start_offset
    while offset < end:
        try:
            chunk = found.read(offset, _READ_CHUNK, max_offset=end)
        except OffsetOutOfRangeError as exc:
            if offset < exc.log_start_offset:
                # Records deleted below it meanwhile (DeleteRecords): what
                # is left starts at the new log start.
                offset = exc.log_start_offset
                continue
            break  # truncated below it meanwhile: nothing more to read
        if chunk.length <= 0:
            break
        data = os.pread(chunk.fd, chunk.length, chunk.position)
        last = offset - 1
        for batch in read_batches(data):
            last = batch.base_offset + batch.last_offset_delta
            if last < offset or batch.base_offset >= end:
                continue
            if batch.is_control:
                marker = marker_of(batch) if batch.is_transactional else None
                if marker is not None:
                    yield batch.producer_id, marker[0], None, None
                continue
            pid = batch.producer_id if batch.is_transactional else -1
            for record in batch.records():
                if offset <= record.offset < end and record.key is not None:
                    yield pid, None, record.key, record.value
        if last < offset:
            break
        offset = last + 1


Pending = dict[tuple[int, int], list[Entry]]  # (partition, producer id) -> its records


def supersede_pending(pending: Pending, partition: int, keys: set[bytes]) -> None:
    """Plain values of ``keys`` were written to ``partition``: the pending
    transactional records of those keys, written before them, will not count
    at their COMMIT marker (Kafka materializes a transactional offset only
    over an older one: CommitRecordMetadataAndOffset.olderThan)."""
    for (p, _), entries in pending.items():
        if p == partition and any(k in keys for k, _ in entries):
            entries[:] = [e for e in entries if e[0] not in keys]


def committed_entries(events: Iterator[tuple[int, Event]],
                      pending: Pending) -> Iterator[tuple[int, Entry]]:
    """(partition, entry) of the records that count, in log order: the plain
    ones, and a transaction's once its COMMIT marker is read (at the marker's
    place, as Kafka's loaders apply them, and only where no plain value of
    the key came between); an aborted transaction's records are dropped, and
    those of a transaction still open are left in ``pending`` (a marker
    written later applies or drops them)."""
    for partition, (pid, marker, key, value) in events:
        if marker is not None:
            done = pending.pop((partition, pid), [])
            if marker:
                for entry in done:
                    yield partition, entry
        elif pid >= 0:
            pending.setdefault((partition, pid), []).append((key, value))
        else:
            if pending and value is not None:
                supersede_pending(pending, partition, {key})
            yield partition, (key, value)
