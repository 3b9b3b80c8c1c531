"""Idempotent producers: per-partition sequence checks (the ids they carry
are handed out by :mod:`pylog.server.producer_ids`).

After Kafka's ``ProducerStateManager``: for each partition, each producer id
keeps its epoch and the metadata of its last 5 batches (the most a producer
has in flight with idempotence on).  A batch that repeats one of those (same
first and last sequence) is a retry whose first attempt was written: it gets
the original offset back and is not written again.  Only batch headers are
read (no per-record work).

Surviving a restart (Kafka's ``<offset>.snapshot`` files, simplified):

* At every segment roll (at the new segment's base, as Kafka's
  ``UnifiedLog.roll``), at every offset checkpoint and at clean shutdown the
  broker writes, per partition, ``<partition dir>/<offset, 20 digits>.snapshot``:
  JSON with that offset and each producer's epoch, last timestamp and
  remembered batches.  It
  is written to a ``.tmp`` name, fsynced and renamed, so a crash leaves whole
  files; older snapshots stay while their offset is a segment base still in
  the log, the others are removed (:func:`write_snapshot`).
* On start, :func:`load` reads the newest snapshot.  After a clean shutdown
  it covers the whole log.  After an unclean stop the log was recovered
  (truncated to its last whole, valid batch) before this runs, so two cases:
  - the snapshot offset is <= the log end: the batches written after the
    snapshot are replayed from the log itself (``_replay``: batch headers
    read by ``MappedSegment``, no record decoding), so every acknowledged
    idempotent batch is known again and its retry is still deduplicated;
  - the snapshot is past the log end (it was taken before unflushed data
    was lost in the crash): entries for batches at or after the log end are
    dropped, since those batches no longer exist.
* No snapshot at all (first start with this code, or a snapshot lost) means
  a replay of the whole log.  Replay reads only the segments that follow
  the snapshot offset, so after a roll snapshot it reads the active segment
  at most.

Producer id expiration (Kafka's ``producer.id.expiration.ms``, KIP-854): each
entry keeps the max timestamp of the producer's last batch (Kafka's
``ProducerStateEntry.lastTimestamp``: the append time of a LogAppendTime
batch, the header's maxTimestamp of a CreateTime one, so a client's clock
counts as in Kafka).  :meth:`PartitionProducers.remove_expired` drops the
entries with ``now - last timestamp >= producer.id.expiration.ms``
(``ProducerStateManager.isProducerExpired``; no transaction is ever open
here); the broker runs it every ``producer.id.expiration.check.interval.ms``
on its event loop.  A producer forgotten so is then an unknown producer: it
may start again at any sequence.  The partitions it changed are snapshotted
at once, so a restart does not bring the forgotten producers back.  As
Kafka's ``loadFromSnapshot`` skips expired entries, the broker drops those
:func:`load` returns that have expired by the time it starts (a node down
longer than ``producer.id.expiration.ms`` forgets its producers at once,
not one check interval later).  Snapshots are
version 2 (the timestamp per producer); version-1 snapshots still load (see
``from_json``).  As before, the state outlives the batches it names (log
start, retention): only expiration forgets a producer.
"""

from __future__ import annotations

import bisect
import collections
import itertools
import json
import logging
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pylog.log.durable import write_atomically
from pylog.log.errors import LogClosedError, OffsetOutOfRangeError
from pylog.protocol import ErrorCode
from pylog.records import read_batches
from pylog.records.markers import marker_of

if TYPE_CHECKING:
    from pylog.log.log import Log

log = logging.getLogger(__name__)

MAX_BATCHES = 5
SEQ_MOD = 2**31

# Batch header: baseOffset(8) length(4) epoch(4) magic(1) crc(4) attributes(2)
# lastOffsetDelta(4) firstTs(8) maxTs(8) producerId(8) producerEpoch(2) baseSequence(4)
_LENGTH = struct.Struct(">i")
_DELTA = struct.Struct(">i")
_PRODUCER = struct.Struct(">qhi")
_INT64 = struct.Struct(">q")
HEADER_SIZE = 61
MAX_TIMESTAMP_AT = 35  # maxTimestamp in the batch header
SNAPSHOT_SUFFIX = ".snapshot"
# 3: transactions (txn_first, coordinator_epoch, aborted); 2 (still read): each
# producer's last_timestamp; 1 (still read): without
SNAPSHOT_VERSION = 3
LOG_APPEND_TIME_FLAG = 0x08  # batch attributes bit 3: timestamp type LogAppendTime
_TXN_FLAG = 0x10
_CONTROL_FLAG = 0x20


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


def max_timestamp(records: memoryview | bytes) -> int:
    """The maxTimestamp of the first batch header in ``records`` (the one
    batch of a produce request, read once it is validated: the log sets it
    to the records' largest, as Kafka's LogValidator)."""
    return _INT64.unpack_from(records, MAX_TIMESTAMP_AT)[0]


class _Entry:
    __slots__ = ("epoch", "batches", "last_timestamp", "txn_first", "coordinator_epoch")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        # Max timestamp of the last batch (Kafka's lastTimestamp): what
        # expiration is measured from.
        self.last_timestamp = -1
        # Offset of the producer's first batch in its open transaction here
        # (Kafka's currentTxnFirstOffset); -1: none open.
        self.txn_first = -1
        # Of the last transaction marker written for this producer (-1: none).
        self.coordinator_epoch = -1
        # (first_seq, last_seq, base_offset, log_append_time)
        self.batches: collections.deque[tuple[int, int, int, int]] = collections.deque(
            maxlen=MAX_BATCHES)


def _last_offset(aborted: tuple[int, int, int]) -> int:
    return aborted[2]


class PartitionProducers:
    """Sequence and transaction state of every producer writing to one partition."""

    def __init__(self) -> None:
        self.producers: dict[int, _Entry] = {}
        # producer id -> first offset of its open transaction (the entries'
        # txn_first, kept apart so the first unstable offset is cheap).
        self.ongoing: dict[int, int] = {}
        # Aborted transactions (producer id, first offset, marker offset), in
        # marker order: what a read_committed fetch is told to skip (Kafka's
        # transaction index, kept with the producer snapshots here).
        self.aborted: list[tuple[int, int, int]] = []
        # producer id -> the guard of a transaction verification in flight
        # with a remote coordinator (Kafka's VerificationGuard): a marker
        # written meanwhile drops it, so a batch verified for a transaction
        # that has since ended is not let in to start one nobody ends.
        self.verifying: dict[int, object] = {}

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction (the last stable
        offset is the lower of it and the high watermark); None: none open."""
        return min(self.ongoing.values()) if self.ongoing else None

    def aborted_between(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions a fetch
        from ``start`` that reads below ``end`` may meet (Kafka's
        collectAbortedTxns: last offset >= start, first offset < end)."""
        aborted = self.aborted
        # In marker order, so by last offset: those ending before the fetch
        # are skipped by bisection (a long-lived partition piles them up).
        i = bisect.bisect_left(aborted, start, key=_last_offset)
        return [(pid, first) for pid, first, _ in itertools.islice(aborted, i, None)
                if first < end]

    def trim_aborted(self, log_start: int) -> None:
        """Forget the aborted transactions wholly below the log start."""
        if self.aborted and self.aborted[0][2] < log_start:
            self.aborted = [a for a in self.aborted if a[2] >= log_start]

    def start_verification(self, producer_id: int) -> object | None:
        """Before asking a remote coordinator whether this producer's
        transaction holds the partition: the guard to hand to
        :meth:`still_verified` after the answer; None when it needs no asking
        (its transaction is already open here, as Kafka's
        maybeStartTransactionVerification)."""
        if producer_id in self.ongoing:
            return None
        return self.verifying.setdefault(producer_id, object())

    def still_verified(self, producer_id: int, guard: object) -> bool:
        """No marker for this producer was written since ``guard`` was taken."""
        return producer_id in self.ongoing or self.verifying.get(producer_id) is guard

    def check(self, batch: ProducerBatch,
              transactional: bool = False) -> tuple[int, int, int] | ErrorCode | None:
        """None: append it.  (base offset, append time, 0): a duplicate already
        written.  An ErrorCode: refuse it."""
        entry = self.producers.get(batch.producer_id)
        if entry is None:
            # As Kafka 3.x: a producer with no state here (new, or its state lost
            # to a restart or retention) may start at any sequence.
            return None
        if batch.epoch < entry.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if entry.txn_first >= 0 and not transactional:
            # ProducerAppendInfo: "Expected transactional write from producer".
            return ErrorCode.INVALID_TXN_STATE
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

    def record(self, batch: ProducerBatch, base_offset: int, append_time: int,
               max_timestamp: int, transactional: bool = False) -> None:
        """A batch written at ``base_offset``: ``append_time`` is the log
        append time (-1 for CreateTime), ``max_timestamp`` the batch's max
        timestamp (equal to ``append_time`` for LogAppendTime);
        ``transactional``: it opens the producer's transaction here, or
        belongs to the one open."""
        pid = batch.producer_id
        entry = self.producers.get(pid)
        if entry is None or batch.epoch != entry.epoch:
            old = entry
            entry = self.producers[pid] = _Entry(batch.epoch)
            if old is not None:  # a new epoch restarts sequences, not the transaction
                entry.txn_first, entry.coordinator_epoch = old.txn_first, old.coordinator_epoch
        entry.batches.append((batch.first_seq, batch.last_seq, base_offset, append_time))
        entry.last_timestamp = max_timestamp
        if transactional and entry.txn_first < 0:
            entry.txn_first = self.ongoing[pid] = base_offset
            self.verifying.pop(pid, None)

    def check_marker(self, producer_id: int, epoch: int,
                     coordinator_epoch: int = 0) -> ErrorCode | None:
        """A transaction marker may be written for this producer and epoch
        (Kafka's appendEndTxnMarker: an older epoch is fenced, and so is an
        older coordinator epoch than the last marker's)."""
        entry = self.producers.get(producer_id)
        if entry is not None and epoch < entry.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if entry is not None and coordinator_epoch < entry.coordinator_epoch:
            return ErrorCode.TRANSACTION_COORDINATOR_FENCED
        return None

    def record_marker(self, producer_id: int, epoch: int, offset: int, commit: bool,
                      coordinator_epoch: int, timestamp: int) -> None:
        """A COMMIT or ABORT marker written at ``offset``: the producer's open
        transaction here, if any, ends (an aborted one is remembered)."""
        entry = self.producers.get(producer_id)
        if entry is None or epoch > entry.epoch:
            old = entry
            entry = self.producers[producer_id] = _Entry(epoch)
            if old is not None:
                entry.txn_first = old.txn_first
        first = entry.txn_first
        if first >= 0:
            if not commit:
                self.aborted.append((producer_id, first, offset))
            entry.txn_first = -1
            self.ongoing.pop(producer_id, None)
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        self.verifying.pop(producer_id, None)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Kafka's ``ProducerStateManager.removeExpiredProducers``: forget each
        producer whose last batch's max timestamp is ``expiration_ms`` or more
        before ``now_ms`` and that has no transaction open here; returns how
        many were forgotten."""
        expired = [pid for pid, e in self.producers.items()
                   if now_ms - e.last_timestamp >= expiration_ms and e.txn_first < 0]
        for pid in expired:
            del self.producers[pid]
            self.verifying.pop(pid, None)  # (a refused verification's guard)
        return len(expired)

    def last_batches(self) -> list[tuple[int, int, int, int, int, int]]:
        """Read-only, for DescribeProducers: (producer id, epoch, last sequence,
        max timestamp, coordinator epoch, open transaction's first offset) of
        each producer, by producer id; -1 as last sequence for a producer
        without batches (one a marker made known)."""
        return [(pid, e.epoch, e.batches[-1][1] if e.batches else -1, e.last_timestamp,
                 e.coordinator_epoch, e.txn_first)
                for pid, e in sorted(self.producers.items())]

    # -- snapshots ---------------------------------------------------------

    def to_json(self, offset: int) -> dict[str, Any]:
        return {"version": SNAPSHOT_VERSION, "offset": offset, "producers": {
            str(pid): {"epoch": e.epoch, "last_timestamp": e.last_timestamp,
                       "batches": [list(b) for b in e.batches], "txn_first": e.txn_first,
                       "coordinator_epoch": e.coordinator_epoch}
            for pid, e in self.producers.items()},
            "aborted": [list(a) for a in self.aborted]}

    @classmethod
    def from_json(cls, data: dict[str, Any], log_end: int,
                  lg: Log | None = None, snapshot_time: int = -1) -> PartitionProducers:
        """State from a snapshot, less the batches at or past ``log_end``.

        A version-1 snapshot has no ``last_timestamp``; it is taken as pylog
        answered DescribeProducers with it before: the log append time kept
        with a LogAppendTime batch, else the maxTimestamp in the header of the
        last batch, read from ``lg``; when that batch is no longer in the log,
        ``snapshot_time`` (the snapshot file's time: the producer is then
        forgotten no sooner than expiration after the snapshot was written)."""
        out = cls()
        reopened: dict[int, int] = {}  # aborts whose marker the crash took
        for pid, first, last in data.get("aborted", ()):
            if last < log_end:
                out.aborted.append((pid, first, last))
            elif first < log_end:
                reopened[pid] = first
        for pid, raw in data.get("producers", {}).items():
            entry = _Entry(int(raw["epoch"]))
            for first, last, base, append_time in raw["batches"]:
                if base < log_end:
                    entry.batches.append((first, last, base, append_time))
            txn_first = reopened.pop(int(pid), int(raw.get("txn_first", -1)))
            if txn_first >= log_end:
                txn_first = -1
            if not entry.batches and txn_first < 0:
                continue
            entry.txn_first = txn_first
            entry.coordinator_epoch = int(raw.get("coordinator_epoch", -1))
            if txn_first >= 0:
                out.ongoing[int(pid)] = txn_first
            stamp = raw.get("last_timestamp")
            if stamp is None:  # version 1
                _, _, base, append_time = entry.batches[-1]
                stamp = append_time if append_time >= 0 else (
                    _header_max_timestamp(lg, base, int(pid)) if lg is not None else -1)
                if stamp < 0:
                    stamp = snapshot_time
            entry.last_timestamp = int(stamp)
            out.producers[int(pid)] = entry
        return out


def _header_max_timestamp(lg: Log, base_offset: int, producer_id: int) -> int:
    """The maxTimestamp in the header of producer ``producer_id``'s batch at
    ``base_offset``; -1 when that batch is no longer in the log.  Startup
    only (version-1 snapshots)."""
    try:
        found = lg.read(base_offset, HEADER_SIZE)
        if found.first_offset != base_offset or found.length < HEADER_SIZE:
            return -1
        header = os.pread(found.fd, HEADER_SIZE, found.position)
    except (OffsetOutOfRangeError, LogClosedError, OSError):
        return -1
    if len(header) < HEADER_SIZE or _INT64.unpack_from(header, 43)[0] != producer_id:
        return -1
    return _INT64.unpack_from(header, MAX_TIMESTAMP_AT)[0]


def _snapshots(directory: Path) -> list[tuple[int, Path]]:
    found = []
    for path in directory.glob("*" + SNAPSHOT_SUFFIX):
        stem = path.name[:-len(SNAPSHOT_SUFFIX)]
        if stem.isdigit():
            found.append((int(stem), path))
    return sorted(found)


def write_snapshot(lg: Log, data: dict[str, Any], offset: int) -> None:
    """Write ``<offset>.snapshot`` (``PartitionProducers.to_json(offset)``)
    atomically, then prune as Kafka does: an older snapshot is kept while its
    offset is a segment base still in the log (the fallback when a crash cuts
    the log below a newer one), any other older one goes."""
    directory = lg.dir
    write_atomically(directory / f"{offset:020d}{SNAPSHOT_SUFFIX}",
                     json.dumps(data, separators=(",", ":")).encode())
    keep = {s.base_offset for s in lg.segments}
    for old, old_path in _snapshots(directory):
        if old < offset and old not in keep:
            old_path.unlink(missing_ok=True)


def _replay(lg: Log, producers: PartitionProducers, start: int) -> int:
    """Feed ``producers`` the idempotent batches of ``lg`` from offset ``start``
    on; returns how many were read.  Startup only: one header per batch."""
    from pylog.log.mapped_reader import MappedSegment

    count = 0
    segments = lg.segments
    for i, segment in enumerate(segments):
        nxt = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if (nxt is not None and nxt <= start) or segment.size == 0:
            continue
        mapped = MappedSegment(segment.log_path, max_bytes=segment.size)
        try:
            for _, b in mapped.batches():
                if b.last_offset < start or b.producer_id < 0:
                    continue
                if b.is_control:  # a transaction marker ends the producer's transaction
                    marker = marker_of(b)
                    if marker is not None:
                        producers.record_marker(b.producer_id, b.producer_epoch, b.base_offset,
                                                marker[0], marker[1], b.max_timestamp)
                    continue
                last = (b.base_sequence + b.last_offset_delta) % SEQ_MOD
                append_time = b.max_timestamp if b.attributes & LOG_APPEND_TIME_FLAG else -1
                producers.record(ProducerBatch(b.producer_id, b.producer_epoch,
                                               b.base_sequence, last), b.base_offset,
                                 append_time, b.max_timestamp, b.is_transactional)
                count += 1
            if mapped.error is not None:  # recovery truncated torn tails already
                log.warning("producer state replay stopped early: %s", mapped.error)
        finally:
            mapped.close()
    return count


def follow_batches(producers: PartitionProducers, view: Any, positions: list[int]) -> None:
    """A follower appended the leader's batches at ``positions`` of ``view``:
    their producers recorded as the leader recorded them (header fields only,
    as :func:`_replay`), so that after a leader change the new leader knows
    every idempotent batch and a retry is not written twice."""
    for pos in positions:
        pid, = _INT64.unpack_from(view, pos + 43)
        if pid < 0:
            continue
        attributes, delta = struct.unpack_from(">hi", view, pos + 21)
        base_offset, = _INT64.unpack_from(view, pos)
        max_ts, = _INT64.unpack_from(view, pos + MAX_TIMESTAMP_AT)
        _, epoch, base_seq = _PRODUCER.unpack_from(view, pos + 43)
        if attributes & _CONTROL_FLAG:  # a transaction marker (rare: decoded)
            size = 12 + _LENGTH.unpack_from(view, pos + 8)[0]
            for batch in read_batches(bytes(view[pos:pos + size])):
                marker = marker_of(batch)
                if marker is not None:
                    producers.record_marker(pid, epoch, base_offset, marker[0], marker[1],
                                            max_ts)
            continue
        append_time = max_ts if attributes & LOG_APPEND_TIME_FLAG else -1
        producers.record(ProducerBatch(pid, epoch, base_seq, (base_seq + delta) % SEQ_MOD),
                         base_offset, append_time, max_ts, bool(attributes & _TXN_FLAG))


def load(lg: Log) -> PartitionProducers | None:
    """The producer state of a partition after a (re)start: the newest snapshot
    plus a replay of the log after it (see the module notes).  None when the
    partition has no idempotent producers."""
    end = lg.log_end_offset
    producers = PartitionProducers()
    start = lg.log_start_offset
    snaps = _snapshots(lg.dir)
    for offset, path in reversed(snaps):
        if offset > end:
            # Taken before a crash cut the log below it (Kafka deletes such
            # snapshots on truncation): reused later, its entries for lost
            # batches would stand in for the batches written at those offsets
            # since, which no replay would ever read.  Use an older one.
            log.warning("producer snapshot %s is past the log end %d: deleting it", path, end)
            path.unlink(missing_ok=True)
            continue
        try:
            data = json.loads(path.read_text())
            snapshot_time = path.stat().st_mtime_ns // 1_000_000
        except (OSError, ValueError) as exc:
            log.warning("unreadable producer snapshot %s (%s): trying an older one", path, exc)
            continue
        producers = PartitionProducers.from_json(data, end, lg, snapshot_time)
        start = max(min(offset, end), lg.log_start_offset)
        break
    if start < end:
        replayed = _replay(lg, producers, start)
        log.info("%s: producer state from offset %d, %d batches replayed", lg.dir.name,
                 start, replayed)
    producers.trim_aborted(lg.log_start_offset)
    return producers if producers.producers or producers.aborted else None
