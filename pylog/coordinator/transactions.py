"""The transaction coordinator: Kafka's TransactionCoordinator.

A node coordinates the transactional ids of the ``__transaction_state``
partitions it leads: it loads a partition's transactions when elected (and
completes those it finds between Prepare and Complete), drops them when it
resigns (:mod:`pylog.coordinator.ownership`; Kafka's TransactionStateManager
loadTransactionsForTxnTopicPartition / removeTransactionsForTxnTopicPartition).
A request for an id of another partition gets NOT_COORDINATOR, of one still
loading COORDINATOR_LOAD_IN_PROGRESS.  A single node leads every partition.
The state machine is Kafka's (KIP-98):

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
  leaves a Prepare state that the next election of its partition completes
  (:meth:`TransactionCoordinator.complete_prepared`).  Markers carry the
  partition's coordinator epoch (its leader epoch at the election).
* A transaction open longer than its timeout is aborted under a bumped
  epoch (``transaction.abort.timed.out.transaction.cleanup.interval.ms``),
  and an id idle for ``transactional.id.expiration.ms`` is forgotten.

Every change is written to ``__transaction_state`` (:mod:`pylog.coordinator.txn_log`)
before it is answered or acted on; the state is read back at each election.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pylog.coordinator.internal_topic import NotCoordinatorError
from pylog.coordinator.ownership import Ownership, PartitionedCoordinator
from pylog.coordinator.txn_log import (
    TXN_TOPIC,
    TxnMetadata,
    TxnState,
    TxnStore,
    parse_txn_key,
    parse_txn_value,
    txn_key,
    txn_value,
)
from pylog.protocol import ErrorCode
from pylog.protocol.errors import TopicError

if TYPE_CHECKING:
    from pylog.coordinator.internal_topic import InternalTopic
    from pylog.coordinator.offsets_store import Event

log = logging.getLogger(__name__)

E = ErrorCode
T = TxnState
TopicPartition = tuple[str, int]
MAX_EPOCH = 32767  # Short.MaxValue: an epoch that reaches MAX_EPOCH - 1 takes a new id
# Writes a marker: (topic, partition, producer id, epoch, commit, coordinator
# epoch).  Written here and now: None or the refusal's error code (a fenced
# epoch, a partition deleted since), logged by the writer, nothing to retry.
# Sent to another node (a cluster's WriteTxnMarkers): a future, done once that
# partition's leader has it; the writer retries until then.
MarkerWriter = Callable[[str, int, int, int, bool, int], object]
# Transactional ids of one partition as read from its log (None: removed).
LoadedTxns = dict[str, "TxnMetadata | None"]


class ProducerIdSource(Protocol):
    """Where new producer ids come from (the node: a file, or blocks of ids
    handed out by ZooKeeper in a cluster)."""

    def next_id(self) -> int: ...


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
    def from_broker(cls, cfg: Any) -> TxnConfig:
        return cls(cfg["transaction.max.timeout.ms"], cfg["transactional.id.expiration.ms"],
                   cfg["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
                   cfg["transaction.remove.expired.transaction.cleanup.interval.ms"],
                   cfg["transaction.state.log.num.partitions"],
                   cfg["transaction.state.log.segment.bytes"])


def read_txns(partition: int, events: Iterator[Event]) -> LoadedTxns:
    """Every transactional id's last state in one partition's records (safe
    on any thread)."""
    found: LoadedTxns = {}
    for _, _, key, value in events:
        try:
            txn_id = parse_txn_key(key) if key is not None else None
            if txn_id is None:
                continue
            found[txn_id] = None if value is None else parse_txn_value(txn_id, value)
        except (ValueError, IndexError, UnicodeDecodeError) as exc:
            log.warning("skipping an unreadable record in %s-%d: %s", TXN_TOPIC, partition,
                        exc)
    return found


class TransactionCoordinator(PartitionedCoordinator[LoadedTxns]):
    def __init__(self, txn_topic: InternalTopic, producer_ids: ProducerIdSource,
                 write_marker: MarkerWriter, config: TxnConfig | None = None,
                 time_ms: Callable[[], int] | None = None) -> None:
        self.config = config or TxnConfig()
        self.time_ms = time_ms or (lambda: time.time_ns() // 1_000_000)
        self.store = TxnStore(txn_topic, self.config.num_partitions, self.time_ms,
                              segment_bytes=self.config.segment_bytes)
        self.ownership = Ownership(TXN_TOPIC)
        self.producer_ids = producer_ids
        self.write_marker = write_marker
        self.txns: dict[str, TxnMetadata] = {}  # of the partitions owned

    # -- partitions: election and resignation ----------------------------------------

    def _reader(self, partition: int, high_watermark: int | None) -> Callable[[], LoadedTxns]:
        events = self.store.reader(partition, high_watermark)
        return lambda: read_txns(partition, events())

    def _loaded(self, partition: int, found: LoadedTxns) -> None:
        loaded = {txn_id: m for txn_id, m in found.items() if m is not None}
        self.txns.update(loaded)
        if loaded:
            log.info("loaded %d transactional ids from %s-%d", len(loaded), TXN_TOPIC,
                     partition)
        self.complete_prepared(partition)

    def _unload(self, partition: int) -> int:
        doomed = [t for t in self.txns if self.store.partition_for(t) == partition]
        for txn_id in doomed:
            del self.txns[txn_id]
        if doomed:
            log.info("unloaded %d transactional ids of %s-%d", len(doomed), TXN_TOPIC,
                     partition)
        return len(doomed)

    def coordinator_error(self, transactional_id: str, create: bool = False) -> int:
        """NONE when this node coordinates ``transactional_id`` now, else
        NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS.  ``create``: ask for
        ``__transaction_state`` if it is missing (InitProducerId, the first
        use of a transactional id); COORDINATOR_NOT_AVAILABLE when it cannot
        be made."""
        if create:
            try:
                self.store.create_topic(transactional_id)
            except TopicError:  # could not be made (logged by the node)
                return E.COORDINATOR_NOT_AVAILABLE
        return self.ownership.error(self.store.partition_for(transactional_id))

    def find_partition(self, transactional_id: str) -> int | None:
        """FindCoordinator: the ``__transaction_state`` partition whose leader
        coordinates ``transactional_id``, the topic asked for when missing;
        None while it does not exist yet.  Raises ``TopicError`` when it
        cannot be made."""
        if not self.store.create_topic(transactional_id):
            return None
        return self.store.partition_for(transactional_id)

    def complete_prepared(self, partition: int | None = None) -> int:
        """Finish the transactions (of ``partition``; None: of every one
        owned) that a crash or a change of coordinator left between Prepare
        and Complete: their markers (again: a marker for a transaction already
        ended in a partition changes nothing there), then the Complete state."""
        done = 0
        for m in list(self.txns.values()):
            if m.state not in (T.PREPARE_COMMIT, T.PREPARE_ABORT) or (
                    partition is not None
                    and self.store.partition_for(m.transactional_id) != partition):
                continue
            commit = m.state == T.PREPARE_COMMIT
            log.info("completing the %s of transactional id %r found at the election of "
                     "its partition", "commit" if commit else "abort", m.transactional_id)
            try:
                self._complete(m, commit, self._write_markers(m, commit))
            except NotCoordinatorError:
                continue  # resigned meanwhile: the next coordinator completes it
            except OSError as exc:
                self._storage_error(exc)
                break
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

    def _write_markers(self, m: TxnMetadata, commit: bool) -> list[asyncio.Future]:
        """Every partition's marker; the futures of those sent to other nodes."""
        epoch = self.ownership.epoch(self.store.partition_for(m.transactional_id))
        pending = []
        for topic, partition in sorted(m.partitions):
            try:
                sent = self.write_marker(topic, partition, m.producer_id, m.producer_epoch,
                                         commit, epoch)
                if isinstance(sent, asyncio.Future):
                    pending.append(sent)
            except Exception:  # one partition's failure must not keep the others waiting
                log.exception("writing the %s marker of transactional id %r to %s-%d failed",
                              "COMMIT" if commit else "ABORT", m.transactional_id, topic,
                              partition)
        return pending

    def _end(self, m: TxnMetadata, commit: bool) -> None:
        """Prepare, markers, Complete (the caller checked the state)."""
        self._persist(m, T.PREPARE_COMMIT if commit else T.PREPARE_ABORT)
        self._complete(m, commit, self._write_markers(m, commit))

    def _complete(self, m: TxnMetadata, commit: bool, pending: list[asyncio.Future]) -> None:
        """The Complete state, once every marker is written: at once when they
        all were here, else when the other nodes acknowledged theirs (Kafka's
        TransactionMarkerChannelManager; meanwhile the id is in its Prepare
        state and new requests for it get CONCURRENT_TRANSACTIONS)."""
        if not pending:
            self._persist(m, T.COMPLETE_COMMIT if commit else T.COMPLETE_ABORT,
                          partitions=set())
            return
        prepared = (m.producer_id, m.producer_epoch, m.state)
        asyncio.get_running_loop().create_task(self._complete_later(m, commit, pending,
                                                                    prepared))

    async def _complete_later(self, m: TxnMetadata, commit: bool,
                              pending: list[asyncio.Future], prepared: tuple) -> None:
        await asyncio.gather(*pending, return_exceptions=True)
        if (m.producer_id, m.producer_epoch, m.state) != prepared:
            return  # taken over meanwhile (a new coordinator, a reload)
        if self.coordinator_error(m.transactional_id):
            return  # resigned: the next coordinator completes it
        try:
            self._persist(m, T.COMPLETE_COMMIT if commit else T.COMPLETE_ABORT,
                          partitions=set())
        except NotCoordinatorError:
            pass
        except OSError as exc:
            self._storage_error(exc)

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
        error = self.coordinator_error(transactional_id, create=True)
        if error:
            return error, -1, -1
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
        except (OSError, NotCoordinatorError) as exc:
            return self._write_error(exc), -1, -1
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
        error = self.coordinator_error(transactional_id)
        if error:
            return error
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
        except (OSError, NotCoordinatorError) as exc:
            return self._write_error(exc)
        return E.NONE

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                commit: bool) -> int:
        error = self.coordinator_error(transactional_id)
        if error:
            return error
        m = self.txns.get(transactional_id)
        error = self._check_producer(m, producer_id, producer_epoch)
        if error:
            return error
        assert m is not None
        if m.state == T.ONGOING:
            try:
                self._end(m, commit)
            except (OSError, NotCoordinatorError) as exc:
                return self._write_error(exc)
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

    def describe(self, transactional_id: str) -> tuple[int, TxnMetadata | None]:
        """DescribeTransactions of one id (Kafka's handleDescribeTransactions):
        (error, its state)."""
        if not transactional_id:
            return E.INVALID_REQUEST, None
        error = self.coordinator_error(transactional_id)
        if error:
            return error, None
        m = self.txns.get(transactional_id)
        return (E.NONE, m) if m is not None else (E.TRANSACTIONAL_ID_NOT_FOUND, None)

    def list_states(self) -> tuple[int, list[TxnMetadata]]:
        """ListTransactions: the ids of the partitions owned; none, and
        COORDINATOR_LOAD_IN_PROGRESS, while a partition loads (as Kafka's
        listTransactionStates)."""
        if self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS, []
        return E.NONE, list(self.txns.values())

    def _storage_error(self, exc: OSError) -> int:
        self.store.storage_failed(f"Error while appending to {self.store.TOPIC}", exc)
        return E.NOT_COORDINATOR

    def _write_error(self, exc: OSError | NotCoordinatorError) -> int:
        """A write to the log failed: the dir goes offline, or the partition's
        leadership moved; both NOT_COORDINATOR to the client, as in Kafka."""
        if isinstance(exc, OSError):
            return self._storage_error(exc)
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
                except NotCoordinatorError:
                    continue  # resigned meanwhile: the next coordinator aborts it
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
        removed = 0
        for m in doomed:
            try:
                self.store.append(m.transactional_id, [(txn_key(m.transactional_id), None)])
            except NotCoordinatorError:
                continue  # resigned meanwhile
            except OSError as exc:
                self._storage_error(exc)
                break
            del self.txns[m.transactional_id]
            removed += 1
        return removed
