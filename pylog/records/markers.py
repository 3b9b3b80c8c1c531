"""Transaction markers: the control batches that end a transaction in a partition.

A marker (Kafka's ``EndTransactionMarker``) is a batch with the control and
transactional attribute bits set, the producer's id and epoch, no sequence,
and one record: key = version (int16, 0) + type (int16: 0 ABORT, 1 COMMIT),
value = version (int16, 0) + coordinator epoch (int32).  Consumers never see
it as a record; a read_committed consumer uses it to end the skipping of an
aborted transaction's batches.
"""

from __future__ import annotations

import struct

from pylog.records import BatchBuilder

ABORT = 0
COMMIT = 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


def marker_batch(producer_id: int, producer_epoch: int, commit: bool,
                 coordinator_epoch: int, timestamp_ms: int) -> bytearray:
    """A COMMIT or ABORT marker batch, base offset 0 (the log stamps it)."""
    builder = BatchBuilder(producer_id=producer_id, producer_epoch=producer_epoch,
                           base_sequence=-1, is_transactional=True, is_control=True)
    builder.append(timestamp_ms, _KEY.pack(0, COMMIT if commit else ABORT),
                   _VALUE.pack(0, coordinator_epoch))
    return bytearray(builder.build())


def marker_of(batch: object) -> tuple[bool, int] | None:
    """(commit, coordinator epoch) of a control batch read back (a Batch of
    :func:`pylog.records.read_batches`); None for a control record of
    another type or one too short to read."""
    for record in batch.records():  # type: ignore[attr-defined]
        key, value = record.key, record.value
        if key is None or len(key) < 4:
            return None
        kind = _KEY.unpack_from(key)[1]
        if kind not in (ABORT, COMMIT):
            return None
        epoch = _VALUE.unpack_from(value)[1] if value is not None and len(value) >= 6 else -1
        return kind == COMMIT, epoch
    return None
