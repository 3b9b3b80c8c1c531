"""The transaction coordinator in process (no broker): its log, read back, and
the completion of a transaction a crash left between Prepare and Complete."""

from __future__ import annotations

from pathlib import Path

from local_node import LocalNode, Markers

from pylog.coordinator.transactions import TransactionCoordinator, TxnConfig
from pylog.coordinator.txn_log import TxnState
from pylog.protocol import ErrorCode


def _coordinator(path: Path, markers: Markers, now: list[int]) -> TransactionCoordinator:
    """A node's transaction coordinator, every partition of its topic loaded."""
    c = LocalNode(path).txns(markers, TxnConfig(num_partitions=3, id_expiration_ms=1000),
                             lambda: now[0])
    return c


def _crash(c: TransactionCoordinator) -> None:
    """The process holding the log dir dies: no clean close, and the kernel
    drops its lock on the dir."""
    c.store.topic.topics.logs.dir_lock.release()


def test_state_is_read_back_and_a_prepared_commit_completed(tmp_path: Path) -> None:
    markers, now = Markers(), [1_000]
    c = _coordinator(tmp_path, markers, now)
    code, pid, epoch = c.init_producer_id("app", 60_000)
    assert (code, epoch) == (0, 0)
    assert c.add_partitions("app", pid, 0, [("t", 0), ("t", 1)]) == 0
    assert c.txns["app"].state == TxnState.ONGOING
    # A crash after PrepareCommit was written, before the markers.
    m = c.txns["app"]
    c._persist(m, TxnState.PREPARE_COMMIT)
    assert c.add_partitions("app", pid, 0, [("t", 2)]) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert c.store.topic.partition_count() == 3

    _crash(c)
    # Loading its partition at the next start finds PrepareCommit: the
    # markers are written again and the commit completed.
    again = _coordinator(tmp_path, markers, now)
    back = again.txns["app"]
    assert (back.producer_id, back.producer_epoch, back.state, back.partitions) == (
        pid, 0, TxnState.COMPLETE_COMMIT, set())
    assert markers.written == [("t", 0, pid, 0, True), ("t", 1, pid, 0, True)]
    assert again.complete_prepared() == 0
    _crash(again)
    assert _coordinator(tmp_path, markers, now).txns["app"].state == TxnState.COMPLETE_COMMIT


def test_bumps_fencing_and_expiry(tmp_path: Path) -> None:
    markers, now = Markers(), [1_000]
    c = _coordinator(tmp_path, markers, now)
    _, pid, _ = c.init_producer_id("app", 60_000)
    assert c.add_partitions("app", pid, 0, [("t", 0)]) == 0
    # A new producer: the open transaction is aborted under a bumped epoch,
    # and the new producer gets the epoch after that.
    assert c.init_producer_id("app", 60_000) == (0, pid, 2)
    assert markers.written == [("t", 0, pid, 1, False)]
    assert c.end_txn("app", pid, 0, True) == ErrorCode.PRODUCER_FENCED
    # KIP-360: the producer that got epoch 2 asks again with it: a new bump...
    assert c.init_producer_id("app", 60_000, pid, 2) == (0, pid, 3)
    # ...and the same request retried gets the same answer; an older pair is fenced.
    assert c.init_producer_id("app", 60_000, pid, 2) == (0, pid, 3)
    assert c.init_producer_id("app", 60_000, pid, 0)[0] == ErrorCode.PRODUCER_FENCED
    # Timed out: aborted and fenced by the periodic job.
    assert c.add_partitions("app", pid, 3, [("t", 1)]) == 0
    now[0] += 60_001
    assert c.abort_timed_out() == 1
    assert c.txns["app"].state == TxnState.COMPLETE_ABORT and c.txns["app"].producer_epoch == 4
    # Idle past transactional.id.expiration.ms: forgotten, in the log too.
    now[0] += 1_000
    assert c.remove_expired() == 1 and "app" not in c.txns
    _crash(c)
    assert "app" not in _coordinator(tmp_path, markers, now).txns
