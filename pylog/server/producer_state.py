"""Idempotent producers: producer ids, and per-partition sequence checks.

After Kafka's ``ProducerStateManager``: for each partition, each producer id
keeps its epoch and the metadata of its last 5 batches (the most a producer
has in flight with idempotence on).  A batch that repeats one of those (same
first and last sequence) is a retry whose first attempt was written: it gets
the original offset back and is not written again.  Only batch headers are
read (no per-record work).

Producer ids are handed out in blocks whose end is persisted before use, so a
restarted node never gives out an id twice.
"""

from __future__ import annotations

import collections
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from pylog.protocol import ErrorCode

MAX_BATCHES = 5
SEQ_MOD = 2**31
ID_BLOCK = 1000
ID_FILE = "pylog-producer-ids"

# Batch header: baseOffset(8) length(4) epoch(4) magic(1) crc(4) attributes(2)
# lastOffsetDelta(4) firstTs(8) maxTs(8) producerId(8) producerEpoch(2) baseSequence(4)
_LENGTH = struct.Struct(">i")
_DELTA = struct.Struct(">i")
_PRODUCER = struct.Struct(">qhi")
HEADER_SIZE = 61


@dataclass(frozen=True, slots=True)
class ProducerBatch:
    producer_id: int
    epoch: int
    first_seq: int
    last_seq: int


def producer_batch(records: memoryview) -> ProducerBatch | None:
    """The producer facts of a record set (None when not idempotent): id and
    epoch of the first batch, first sequence of the first batch, last sequence
    of the last batch.  Malformed headers return None; validation reports them."""
    n = len(records)
    if n < HEADER_SIZE:
        return None
    pid, epoch, first_seq = _PRODUCER.unpack_from(records, 43)
    if pid < 0:
        return None
    pos = 0
    last = 0
    while pos + HEADER_SIZE <= n:
        last = pos
        length, = _LENGTH.unpack_from(records, pos + 8)
        if length <= 0:
            break
        pos += 12 + length
    delta, = _DELTA.unpack_from(records, last + 23)
    _, _, last_base = _PRODUCER.unpack_from(records, last + 43)
    return ProducerBatch(pid, epoch, first_seq, (last_base + delta) % SEQ_MOD)


class _Entry:
    __slots__ = ("epoch", "batches")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        # (first_seq, last_seq, base_offset, log_append_time)
        self.batches: collections.deque[tuple[int, int, int, int]] = collections.deque(
            maxlen=MAX_BATCHES)


class PartitionProducers:
    """Sequence state of every producer writing to one partition."""

    def __init__(self) -> None:
        self.producers: dict[int, _Entry] = {}

    def check(self, batch: ProducerBatch) -> tuple[int, int, int] | ErrorCode | None:
        """None: append it.  (base offset, append time, 0): a duplicate already
        written.  An ErrorCode: refuse it."""
        entry = self.producers.get(batch.producer_id)
        if entry is None:
            # As Kafka 3.x: a producer with no state here (new, or its state lost
            # to a restart or retention) may start at any sequence.
            return None
        if batch.epoch < entry.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if batch.epoch > entry.epoch:
            # A bumped epoch restarts the sequence at 0.
            return None if batch.first_seq == 0 else ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        for first, last, base, append_time in entry.batches:
            if first == batch.first_seq and last == batch.last_seq:
                return (base, append_time, 0)
        last_seq = entry.batches[-1][1] if entry.batches else -1
        if batch.first_seq != (last_seq + 1) % SEQ_MOD:
            return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        return None

    def record(self, batch: ProducerBatch, base_offset: int, append_time: int) -> None:
        entry = self.producers.get(batch.producer_id)
        if entry is None or batch.epoch != entry.epoch:
            entry = self.producers[batch.producer_id] = _Entry(batch.epoch)
        entry.batches.append((batch.first_seq, batch.last_seq, base_offset, append_time))


class ProducerIds:
    """Allocates producer ids; persists the end of the current block first."""

    def __init__(self, log_dir: Path) -> None:
        self.path = Path(log_dir) / ID_FILE
        try:
            start = int(self.path.read_text().strip())
        except (OSError, ValueError):
            start = 0
        self._next = start
        self._block_end = start

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + ID_BLOCK
            tmp = self.path.with_name(ID_FILE + ".tmp")
            with open(tmp, "w") as f:
                f.write(f"{self._block_end}\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        pid = self._next
        self._next += 1
        return pid
