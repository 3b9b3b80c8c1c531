"""Transactions in a partition's producer state, and the transaction log's record format.

The partition side of KIP-98 (Kafka's ProducerStateManager and transaction
index): the first offset of each open transaction (the last stable offset),
the aborted transactions a read_committed fetch is told about, fencing of
markers by epoch, and the snapshot round trip, including a crash that took
the tail of the log (a marker lost reopens its transaction).
"""

from __future__ import annotations

from pylog.coordinator.txn_log import (
    TxnMetadata,
    TxnState,
    parse_txn_key,
    parse_txn_value,
    txn_key,
    txn_value,
)
from pylog.protocol import ErrorCode
from pylog.records import read_batches
from pylog.records.markers import marker_batch, marker_of
from pylog.server.producer_state import PartitionProducers, ProducerBatch

T = 1_700_000_000_000


def _txn(p: PartitionProducers, pid: int, first_seq: int, offset: int, epoch: int = 0) -> None:
    batch = ProducerBatch(pid, epoch, first_seq, first_seq)
    assert p.check(batch, transactional=True) is None
    p.record(batch, offset, -1, T, transactional=True)


def test_open_transactions_hold_the_last_stable_offset() -> None:
    p = PartitionProducers()
    assert p.first_unstable_offset() is None
    _txn(p, 1, 0, 10)
    _txn(p, 2, 0, 11)
    _txn(p, 1, 1, 12)  # the same transaction: its first offset stays
    assert p.first_unstable_offset() == 10
    p.record_marker(1, 0, 13, True, 0, T)
    assert p.first_unstable_offset() == 11
    p.record_marker(2, 0, 14, False, 0, T)
    assert p.first_unstable_offset() is None
    assert p.aborted == [(2, 11, 14)]
    assert p.last_batches()[0][4:] == (0, -1)  # coordinator epoch, no open transaction


def test_aborted_transactions_a_fetch_is_told_about() -> None:
    p = PartitionProducers()
    for pid, first, marker in ((1, 0, 5), (2, 3, 8), (3, 20, 30)):
        _txn(p, pid, 0, first)
        p.record_marker(pid, 0, marker, False, 0, T)
    assert p.aborted_between(0, 10) == [(1, 0), (2, 3)]
    assert p.aborted_between(6, 25) == [(2, 3), (3, 20)]  # marker at or after the start
    assert p.aborted_between(9, 20) == []  # first offset below the end
    p.trim_aborted(6)
    assert p.aborted == [(2, 3, 8), (3, 20, 30)]


def test_a_plain_batch_inside_a_transaction_and_an_old_marker_are_refused() -> None:
    p = PartitionProducers()
    _txn(p, 1, 0, 0, epoch=2)
    assert p.check(ProducerBatch(1, 2, 1, 1)) == ErrorCode.INVALID_TXN_STATE
    assert p.check_marker(1, 1) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert p.check_marker(1, 3) is None
    # A bumped epoch's marker (the coordinator fencing the producer) ends it.
    p.record_marker(1, 3, 1, False, 0, T)
    assert p.producers[1].epoch == 3 and p.first_unstable_offset() is None
    assert p.check(ProducerBatch(1, 2, 1, 1), transactional=True) == \
        ErrorCode.INVALID_PRODUCER_EPOCH


def test_snapshot_round_trip_and_a_crash_that_took_the_marker() -> None:
    p = PartitionProducers()
    _txn(p, 1, 0, 0)
    p.record_marker(1, 0, 4, False, 0, T)
    _txn(p, 2, 0, 5)
    data = p.to_json(10)
    back = PartitionProducers.from_json(data, 10)
    assert back.aborted == [(1, 0, 4)] and back.first_unstable_offset() == 5
    # The log ends at 4 after a crash: the abort marker at 4 is gone, so the
    # transaction is open again; the one that started at 5 never was.
    cut = PartitionProducers.from_json(data, 4)
    assert cut.aborted == [] and cut.first_unstable_offset() == 0
    assert 2 not in cut.producers


def test_marker_batches_read_back() -> None:
    for commit in (True, False):
        raw = marker_batch(42, 7, commit, 3, T)
        (batch,) = list(read_batches(bytes(raw)))
        assert batch.is_control and batch.is_transactional
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 7, -1)
        assert marker_of(batch) == (commit, 3)


def test_transaction_log_records_round_trip() -> None:
    m = TxnMetadata("app-1", 1000, 4, 60000, TxnState.ONGOING,
                    {("b", 1), ("a", 0), ("a", 2)}, T + 5, T)
    back = parse_txn_value("app-1", txn_value(m))
    assert (back.producer_id, back.producer_epoch, back.timeout_ms, back.state,
            back.partitions, back.update_ms, back.start_ms) == (
        1000, 4, 60000, TxnState.ONGOING, {("a", 0), ("a", 2), ("b", 1)}, T + 5, T)
    assert parse_txn_key(txn_key("app-1")) == "app-1"
    empty = TxnMetadata("e", 1, 0, 1000, TxnState.EMPTY, set(), T, -1)
    raw = txn_value(empty)
    assert raw[17:21] == b"\xff\xff\xff\xff"  # Kafka writes no partitions when Empty
    assert parse_txn_value("e", raw).partitions == set()
