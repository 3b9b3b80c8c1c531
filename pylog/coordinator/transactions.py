"""The transaction coordinator: Kafka's TransactionCoordinator for one node.

Every partition of ``__transaction_state`` is led by this node, so this node
coordinates every transactional id (FindCoordinator names it).  The state
machine is Kafka's (KIP-98):

* **InitProducerId** with a transactional id gives a producer id and epoch:
  a new id gets a fresh producer id at epoch 0; a known one has its epoch
  bumped (a new producer id once the epoch is exhausted), which fences the
  producer that held it.  A transaction the old producer left open is
  aborted first, under a bumped epoch (Kafka's PrepareEpochFence).
* **AddPartitionsToTxn** / **AddOffsetsToTxn** put partitions in the
  transaction (Ongoing); the produce path lets a transactional batch into a
  partition only once it is in the transaction (Kafka 3.6's
  ``transaction.partition.verification.enable``).
* **EndTxn** writes PrepareCommit/PrepareAbort to the log, a COMMIT/ABORT
  marker into every partition of the transaction, then
  CompleteCommit/CompleteAbort.  On one node the markers are local appends,
  so EndTxn answers once all three steps are done (Kafka answers after the
  Prepare write and sends the markers after); a crash between the steps
  leaves a Prepare state that the next start completes
  (:meth:`TransactionCoordinator.complete_prepared`).
* A transaction open longer than its timeout is aborted under a bumped
  epoch (``transaction.abort.timed.out.transaction.cleanup.interval.ms``),
  and an id idle for ``transactional.id.expiration.ms`` is forgotten.

Every change is written to ``__transaction_state`` (:mod:`pylog.coordinator.txn_log`)
before it is answered or acted on; the state is read back at start.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pylog.coordinator.txn_log import (
    TxnMetadata,
    TxnState,
    TxnStore,
    parse_txn_key,
    parse_txn_value,
    txn_key,
    txn_value,
)
from pylog.protocol import ErrorCode

if TYPE_CHECKING:
    from pylog.server.config import BrokerConfig
    from pylog.server.producer_state import ProducerIds
    from pylog.server.topics import TopicRegistry

log = logging.getLogger(__name__)

E = ErrorCode
T = TxnState
TopicPartition = tuple[str, int]
# The coordinator epoch of every marker this node's coordinator writes: in
# Kafka the leader epoch of the __transaction_state partition, which on one
# node never moves.
COORDINATOR_EPOCH = 0
MAX_EPOCH = 32767  # Short.MaxValue: an epoch that reaches MAX_EPOCH - 1 takes a new id
# Writes a marker: (topic, partition, producer id, epoch, commit); a refusal
# (a fenced epoch, a partition deleted since) is logged by the writer and
# leaves nothing to retry on one node.
MarkerWriter = Callable[[str, int, int, int, bool], object]


@dataclass(frozen=True)
class TxnConfig:
    """Kafka's transaction coordinator settings (their defaults)."""

    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 604_800_000
    abort_interval_ms: int = 10_000
    remove_interval_ms: int = 3_600_000
    num_partitions: int = 50
    segment_bytes: int = 104_857_600

    @classmethod
    def from_broker(cls, cfg: BrokerConfig) -> TxnConfig:
        return cls(cfg["transaction.max.timeout.ms"], cfg["transactional.id.expiration.ms"],
                   cfg["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
                   cfg["transaction.remove.expired.transaction.cleanup.interval.ms"],
                   cfg["transaction.state.log.num.partitions"],
                   cfg["transaction.state.log.segment.bytes"])


class TransactionCoordinator:
    def __init__(self, topics: TopicRegistry, producer_ids: ProducerIds,
                 write_marker: MarkerWriter, config: TxnConfig | None = None,
                 time_ms: Callable[[], int] | None = None) -> None:
        self.config = config or TxnConfig()
        self.time_ms = time_ms or (lambda: time.time_ns() // 1_000_000)
        self.store = TxnStore(topics, self.config.num_partitions, self.time_ms,
                              segment_bytes=self.config.segment_bytes)
        self.producer_ids = producer_ids
        self.write_marker = write_marker
        self.txns: dict[str, TxnMetadata] = {}

    # -- state in the log ----------------------------------------------------------

    def load(self) -> None:
        """Every transactional id's last state, from ``__transaction_state``."""
        for partition, (_, _, key, value) in self.store.load():
            try:
                txn_id = parse_txn_key(key) if key is not None else None
                if txn_id is None:
                    continue
                if value is None:
                    self.txns.pop(txn_id, None)
                else:
                    self.txns[txn_id] = parse_txn_value(txn_id, value)
            except (ValueError, IndexError, UnicodeDecodeError) as exc:
                log.warning("skipping an unreadable record in %s-%d: %s",
                            self.store.TOPIC, partition, exc)
        if self.txns:
            log.info("loaded %d transactional ids from %s", len(self.txns), self.store.TOPIC)

    def complete_prepared(self) -> int:
        """Finish the transactions a crash left between Prepare and Complete:
        their markers (again: a marker for a transaction already ended in a
        partition changes nothing there), then the Complete state."""
        done = 0
        for m in list(self.txns.values()):
            if m.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT):
                commit = m.state == T.PREPARE_COMMIT
                log.info("completing the %s of transactional id %r after a restart",
                         "commit" if commit else "abort", m.transactional_id)
                self._write_markers(m, commit)
                self._persist(m, T.COMPLETE_COMMIT if commit else T.COMPLETE_ABORT,
                              partitions=set())
                done += 1
        return done

    def _persist(self, m: TxnMetadata, state: TxnState, *, partitions: set | None = None,
                 start_ms: int | None = None, producer: tuple[int, int] | None = None,
                 timeout_ms: int | None = None) -> None:
        """Write ``m`` as changed to the log, then change ``m`` (a failed
        write changes nothing: it raises)."""
        pid, epoch = producer if producer else (m.producer_id, m.producer_epoch)
        new = TxnMetadata(m.transactional_id, pid, epoch,
                          m.timeout_ms if timeout_ms is None else timeout_ms, state,
                          m.partitions if partitions is None else partitions, self.time_ms(),
                          m.start_ms if start_ms is None else start_ms)
        self.store.append(m.transactional_id, [(txn_key(m.transactional_id), txn_value(new))])
        if (pid, epoch) != (m.producer_id, m.producer_epoch):
            m.last_producer_id, m.last_producer_epoch = m.producer_id, m.producer_epoch
        m.producer_id, m.producer_epoch, m.timeout_ms = pid, epoch, new.timeout_ms
        m.state, m.partitions, m.update_ms, m.start_ms = (state, new.partitions, new.update_ms,
                                                          new.start_ms)
        self.txns[m.transactional_id] = m

    def _write_markers(self, m: TxnMetadata, commit: bool) -> None:
        for topic, partition in sorted(m.partitions):
            try:
                self.write_marker(topic, partition, m.producer_id, m.producer_epoch, commit)
            except Exception:  # one partition's failure must not keep the others waiting
                log.exception("writing the %s marker of transactional id %r to %s-%d failed",
                              "COMMIT" if commit else "ABORT", m.transactional_id, topic,
                              partition)

    def _end(self, m: TxnMetadata, commit: bool) -> None:
        """Prepare, markers, Complete (the caller checked the state)."""
        self._persist(m, T.PREPARE_COMMIT if commit else T.PREPARE_ABORT)
        self._write_markers(m, commit)
        self._persist(m, T.COMPLETE_COMMIT if commit else T.COMPLETE_ABORT, partitions=set())

    def _bumped(self, m: TxnMetadata) -> tuple[int, int]:
        if m.producer_epoch >= MAX_EPOCH - 1:
            return self.producer_ids.next_id(), 0
        return m.producer_id, m.producer_epoch + 1

    def _fence_and_abort(self, m: TxnMetadata) -> None:
        """Abort ``m``'s open transaction under a bumped epoch (Kafka's
        PrepareEpochFence): its producer can neither write nor end it."""
        if m.producer_epoch < MAX_EPOCH - 1:
            self._persist(m, m.state, producer=(m.producer_id, m.producer_epoch + 1))
        self._end(m, commit=False)

    # -- requests --------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int,
                         producer_id: int = -1, producer_epoch: int = -1
                         ) -> tuple[int, int, int]:
        """(error, producer id, epoch) for InitProducerId."""
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return E.INVALID_TRANSACTION_TIMEOUT, -1, -1
        m = self.txns.get(transactional_id)
        try:
            if m is None:
                m = TxnMetadata(transactional_id, self.producer_ids.next_id(), 0, timeout_ms)
                self._persist(m, T.EMPTY, partitions=set())
                return E.NONE, m.producer_id, m.producer_epoch
            if producer_id >= 0:  # KIP-360: a producer recovering its own id
                if (producer_id, producer_epoch) == (m.last_producer_id, m.last_producer_epoch) \
                        and m.state in (T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT):
                    return E.NONE, m.producer_id, m.producer_epoch  # a retry of the bump
                if (producer_id, producer_epoch) != (m.producer_id, m.producer_epoch):
                    return E.PRODUCER_FENCED, -1, -1
            if m.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT, T.PREPARE_EPOCH_FENCE):
                return E.CONCURRENT_TRANSACTIONS, -1, -1
            if m.state == T.ONGOING:
                self._fence_and_abort(m)
            self._persist(m, T.EMPTY, partitions=set(), start_ms=-1,
                          producer=self._bumped(m), timeout_ms=timeout_ms)
        except OSError as exc:
            return self._storage_error(exc), -1, -1
        return E.NONE, m.producer_id, m.producer_epoch

    def _check_producer(self, m: TxnMetadata | None, producer_id: int,
                        producer_epoch: int) -> int:
        if m is None or m.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if m.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED
        if m.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT, T.PREPARE_EPOCH_FENCE):
            return E.CONCURRENT_TRANSACTIONS
        return E.NONE

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition]) -> int:
        """Put ``partitions`` in the transaction (it is Ongoing from now)."""
        m = self.txns.get(transactional_id)
        error = self._check_producer(m, producer_id, producer_epoch)
        if error:
            return error
        assert m is not None
        wanted = set(partitions)
        if m.state == T.ONGOING and wanted <= m.partitions:
            return E.NONE
        start = m.start_ms if m.state == T.ONGOING else self.time_ms()
        try:
            self._persist(m, T.ONGOING, partitions=m.partitions | wanted, start_ms=start)
        except OSError as exc:
            return self._storage_error(exc)
        return E.NONE

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                commit: bool) -> int:
        m = self.txns.get(transactional_id)
        error = self._check_producer(m, producer_id, producer_epoch)
        if error:
            return error
        assert m is not None
        if m.state == T.ONGOING:
            try:
                self._end(m, commit)
            except OSError as exc:
                return self._storage_error(exc)
            return E.NONE
        if m.state == (T.COMPLETE_COMMIT if commit else T.COMPLETE_ABORT):
            return E.NONE  # a retry of the EndTxn that ended it
        return E.INVALID_TXN_STATE

    def verify(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
               topic: str, partition: int) -> int:
        """May a transactional batch of this producer go into ``topic``-``partition``?
        (Kafka 3.6's partition verification, asked of the local coordinator.)"""
        m = self.txns.get(transactional_id) if transactional_id is not None else None
        if m is None or m.producer_id != producer_id:
            return E.INVALID_TXN_STATE
        if producer_epoch != m.producer_epoch:
            # Kafka's verification: any other epoch than the coordinator's is
            # PRODUCER_FENCED, which the produce answer words as
            # INVALID_PRODUCER_EPOCH (AddPartitionsToTxnManager).  A newer one
            # let in would hold the partition's stable offset for good: the
            # coordinator's markers carry its own epoch, and would be refused.
            return E.INVALID_PRODUCER_EPOCH
        if m.state != T.ONGOING or (topic, partition) not in m.partitions:
            return E.INVALID_TXN_STATE
        return E.NONE

    def _storage_error(self, exc: OSError) -> int:
        logs = self.store.topics.logs
        logs.failures.fail(f"Error while appending to {self.store.TOPIC}", exc)
        return E.NOT_COORDINATOR

    # -- periodic work ----------------------------------------------------------------

    def abort_timed_out(self, now_ms: int | None = None) -> int:
        """Abort the transactions open past their timeout, fencing their
        producers (Kafka's abortTimedOutTransactions)."""
        now = self.time_ms() if now_ms is None else now_ms
        n = 0
        for m in list(self.txns.values()):
            if m.state == T.ONGOING and m.start_ms + m.timeout_ms < now:
                log.info("aborting the transaction of transactional id %r: open for more "
                         "than its timeout of %d ms", m.transactional_id, m.timeout_ms)
                try:
                    self._fence_and_abort(m)
                except OSError as exc:
                    self._storage_error(exc)
                    break
                n += 1
        return n

    def remove_expired(self, now_ms: int | None = None) -> int:
        """Forget the ids with no transaction open that were not used for
        ``transactional.id.expiration.ms`` (a tombstone in the log)."""
        now = self.time_ms() if now_ms is None else now_ms
        doomed = [m for m in self.txns.values()
                  if m.state in (T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT)
                  and m.update_ms + self.config.id_expiration_ms <= now]
        for m in doomed:
            try:
                self.store.append(m.transactional_id, [(txn_key(m.transactional_id), None)])
            except OSError as exc:
                self._storage_error(exc)
                break
            del self.txns[m.transactional_id]
        return len(doomed)
