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
  CompleteCommit/CompleteAbort once every marker is in its partition's
  in-sync replicas (acks=-1, as Kafka's WriteTxnMarkers; a marker refused
  for a reason to retry, too few in-sync replicas among them, is sent again
  until it is written: :mod:`pylog.server.txn_markers`).  EndTxn answers
  once the Prepare state is written and the markers are on their way, as
  Kafka's; on one node the markers are done at once, so it answers after
  the Complete write.  A marker fenced by a newer producer epoch or
  coordinator leaves the transaction to them (no Complete here, as Kafka).
  A crash between the steps leaves a Prepare state that the next election
  of its partition completes
  (:meth:`TransactionCoordinator.complete_prepared`).  Markers carry the
  partition's coordinator epoch (its leader epoch at the election).  A
  Complete write that fails is tried again until it is written (Kafka's
  txnLogAppendRetryQueue).
* A transaction open longer than its timeout is aborted under a bumped
  epoch (``transaction.abort.timed.out.transaction.cleanup.interval.ms``),
  and an id idle for ``transactional.id.expiration.ms`` is forgotten.

Every change is written to ``__transaction_state`` (:mod:`pylog.coordinator.txn_log`)
before it is answered or acted on; the state is read back at each election.
As Kafka's appendTransactionToLog, a write is acks=-1: refused while the
partition has fewer in-sync replicas than its min.insync.replicas
(transaction.state.log.min.isr in a cluster), and the state changes only
once the in-sync replicas have it, meanwhile the id is pending and requests
for it get CONCURRENT_TRANSACTIONS (:mod:`pylog.coordinator.acked`: at once
on a single node).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from pylog.coordinator.acked import then
from pylog.coordinator.internal_topic import (
    REQUEST_TIMEOUT_MS,
    NotCoordinatorError,
    NotEnoughReplicasError,
)
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
from pylog.log import RecordBatchTooLargeError
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
# epoch) -> its final outcome, None or 0 when written, else the refusal's
# error code (a fenced epoch, a partition deleted since), logged by the
# writer; now, or as a future once the partition's in-sync replicas have it
# (pylog.server.txn_markers: the writer retries until then).  A future the
# coordinator cancels is not tried any more.
MarkerWriter = Callable[[str, int, int, int, bool, int], "int | None | asyncio.Future[int]"]
# Transactional ids of one partition as read from its log (None: removed).
LoadedTxns = dict[str, "TxnMetadata | None"]
# A write's answer: the error code now, or a future of it.
Acked: TypeAlias = "int | asyncio.Future[int]"
# What an append's error becomes in the coordinator's answer (Kafka's
# appendTransactionToLog: a timeout too lets the client retry).
_APPEND_ERRORS = {
    E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
    E.REQUEST_TIMED_OUT: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
    E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
    E.MESSAGE_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
    E.RECORD_LIST_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
}
# Between tries of a Complete state the log refused.
RETRY_BACKOFF_S = 0.1
# Marker outcomes after which the transaction is not completed (Kafka's
# TransactionMarkerRequestCompletionHandler cancels it): the producer's epoch
# or the coordinator's moved on, the transaction is theirs to end.
_FENCED = frozenset({E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED})


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
        self._tasks: set[asyncio.Task] = set()  # completions in the background
        # The markers of a transactional id still on their way, cancelled when
        # its partition resigns (Kafka's removeMarkersForTxnTopicPartition).
        self._markers: dict[str, list[asyncio.Future]] = {}

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
            for marker in self._markers.pop(txn_id, ()):
                marker.cancel()
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
            if m.pending:
                continue
            commit = m.state == T.PREPARE_COMMIT
            log.info("completing the %s of transactional id %r found at the election of "
                     "its partition", "commit" if commit else "abort", m.transactional_id)
            code = self._complete(m, commit, self._write_markers(m, commit))
            if code == E.NOT_COORDINATOR:
                continue  # resigned meanwhile: the next coordinator completes it
            done += 1
        return done

    def _persist(self, m: TxnMetadata, state: TxnState, *, partitions: set | None = None,
                 start_ms: int | None = None, producer: tuple[int, int] | None = None,
                 timeout_ms: int | None = None) -> Acked:
        """Write ``m`` as changed to the log, then change ``m`` (Kafka's
        appendTransactionToLog and its callback): NONE, or the error to
        answer with ``m`` unchanged, now or -- the write waiting for the
        in-sync replicas, ``m`` pending meanwhile -- as a future."""
        pid, epoch = producer if producer else (m.producer_id, m.producer_epoch)
        new = TxnMetadata(m.transactional_id, pid, epoch,
                          m.timeout_ms if timeout_ms is None else timeout_ms, state,
                          m.partitions if partitions is None else partitions, self.time_ms(),
                          m.start_ms if start_ms is None else start_ms)
        txn_id = m.transactional_id
        try:
            replication = self.store.append(txn_id, [(txn_key(txn_id), txn_value(new))],
                                            timeout_ms=new.timeout_ms)
        except NotEnoughReplicasError:
            return E.COORDINATOR_NOT_AVAILABLE
        except NotCoordinatorError:  # the partition's leadership moved meanwhile
            return E.NOT_COORDINATOR
        except RecordBatchTooLargeError:
            return E.UNKNOWN_SERVER_ERROR
        except OSError as exc:
            return self._storage_error(exc)
        if replication is None:
            self._apply(m, new)
            return E.NONE
        created = self.txns.get(txn_id) is not m
        # A new id is known at once, pending, so a second InitProducerId
        # waits for this one instead of making another.
        self.txns.setdefault(txn_id, m)
        m.pending = True

        def replicated(code: int) -> int:
            m.pending = False
            code = _APPEND_ERRORS.get(code, code)
            if code == E.NONE and self.txns.get(txn_id) is not m:
                code = E.NOT_COORDINATOR  # its partition resigned (or reloaded) meanwhile
            if code == E.NONE:
                self._apply(m, new)
            elif created and self.txns.get(txn_id) is m:
                del self.txns[txn_id]
            return code

        return then(replication, replicated)

    def _apply(self, m: TxnMetadata, new: TxnMetadata) -> None:
        """``m`` takes the state ``new`` written to the log."""
        if (new.producer_id, new.producer_epoch) != (m.producer_id, m.producer_epoch):
            m.last_producer_id, m.last_producer_epoch = m.producer_id, m.producer_epoch
        m.producer_id, m.producer_epoch, m.timeout_ms = (new.producer_id, new.producer_epoch,
                                                         new.timeout_ms)
        m.state, m.partitions, m.update_ms, m.start_ms = (new.state, new.partitions,
                                                          new.update_ms, new.start_ms)
        self.txns[m.transactional_id] = m

    def _write_markers(self, m: TxnMetadata, commit: bool) -> list[asyncio.Future] | None:
        """Every partition's marker: the futures of those not done yet, or
        None when one was fenced (then none is waited for)."""
        epoch = self.ownership.epoch(self.store.partition_for(m.transactional_id))
        pending = []
        fenced = None
        for topic, partition in sorted(m.partitions):
            try:
                sent = self.write_marker(topic, partition, m.producer_id, m.producer_epoch,
                                         commit, epoch)
            except Exception:  # one partition's failure must not keep the others waiting
                log.exception("writing the %s marker of transactional id %r to %s-%d failed",
                              "COMMIT" if commit else "ABORT", m.transactional_id, topic,
                              partition)
                continue
            if isinstance(sent, asyncio.Future):
                pending.append(sent)
                sent.add_done_callback(functools.partial(
                    self._marker_done, m, (m.producer_id, m.producer_epoch, m.state),
                    (topic, partition)))
            elif sent in _FENCED:
                fenced = sent
            else:
                m.partitions.discard((topic, partition))
        if fenced is not None:
            self._fenced(m, commit, fenced, pending)
            return None
        if pending:
            self._markers[m.transactional_id] = pending
        return pending

    @staticmethod
    def _marker_done(m: TxnMetadata, prepared: tuple, tp: TopicPartition,
                     marker: asyncio.Future) -> None:
        """A partition whose marker is done leaves the transaction's
        partitions (Kafka's removePartition: DescribeTransactions of a
        Prepare state names those still waiting).  The log's Prepare state
        keeps them all, for a coordinator that completes it after a failover."""
        if marker.cancelled() or marker.exception() is not None or marker.result() in _FENCED:
            return
        if (m.producer_id, m.producer_epoch, m.state) == prepared:
            m.partitions.discard(tp)

    def _fenced(self, m: TxnMetadata, commit: bool, error: int,
                pending: list[asyncio.Future]) -> None:
        log.info("a %s marker of transactional id %r was refused (%s): its transaction is "
                 "left in %s to the newer producer epoch or coordinator", "COMMIT" if commit
                 else "ABORT", m.transactional_id, E(error).name, m.state.name)
        for marker in pending:
            marker.cancel()

    def _end(self, m: TxnMetadata, commit: bool) -> Acked:
        """Prepare, markers, Complete (the caller checked the state): the
        error of the Prepare write, or NONE once it is written and the
        markers and Complete follow it."""
        def prepared(code: int) -> Acked:
            if code:
                return code
            return self._complete(m, commit, self._write_markers(m, commit))

        return then(self._persist(m, T.PREPARE_COMMIT if commit else T.PREPARE_ABORT),
                    prepared)

    def _complete(self, m: TxnMetadata, commit: bool,
                  pending: list[asyncio.Future] | None) -> Acked:
        """The Complete state, once every marker is written and in its
        partition's in-sync replicas: at once when they all were (a single
        node), else when the last is (Kafka's TransactionMarkerChannelManager;
        meanwhile the id is in its Prepare state and new requests for it get
        CONCURRENT_TRANSACTIONS); never when a marker was fenced (``pending``
        None).  NONE, or NOT_COORDINATOR when the partition resigned (the next
        coordinator completes it); a write refused otherwise is tried again
        later."""
        if pending is None:
            return E.NONE
        prepared = (m.producer_id, m.producer_epoch, m.state)
        if pending:
            self._background(self._complete_later(m, commit, pending, prepared))
            return E.NONE

        def written(code: int) -> int:
            if code in (E.NONE, E.NOT_COORDINATOR):
                return code
            log.warning("writing the Complete state of transactional id %r failed (%s): "
                        "trying again", m.transactional_id, E(code).name)
            self._background(self._complete_later(m, commit, [], prepared))
            return E.NONE

        return then(self._persist(m, T.COMPLETE_COMMIT if commit else T.COMPLETE_ABORT,
                                  partitions=set()), written)

    def _background(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _complete_later(self, m: TxnMetadata, commit: bool,
                              pending: list[asyncio.Future], prepared: tuple) -> None:
        outcomes = await asyncio.gather(*pending, return_exceptions=True)
        if pending and self._markers.get(m.transactional_id) is pending:
            del self._markers[m.transactional_id]
        fenced = [e for e in outcomes if isinstance(e, int) and e in _FENCED]
        if fenced:
            self._fenced(m, commit, fenced[0], pending)
            return
        while True:
            if (m.producer_id, m.producer_epoch, m.state) != prepared:
                return  # taken over meanwhile (a new coordinator, a reload)
            if self.coordinator_error(m.transactional_id) or \
                    self.txns.get(m.transactional_id) is not m:
                return  # resigned: the next coordinator completes it
            code = self._persist(m, T.COMPLETE_COMMIT if commit else T.COMPLETE_ABORT,
                                 partitions=set())
            if isinstance(code, asyncio.Future):
                code = await code
            if code in (E.NONE, E.NOT_COORDINATOR):
                return
            await asyncio.sleep(RETRY_BACKOFF_S)

    def _bumped(self, m: TxnMetadata) -> tuple[int, int]:
        if m.producer_epoch >= MAX_EPOCH - 1:
            return self.producer_ids.next_id(), 0
        return m.producer_id, m.producer_epoch + 1

    def _fence_and_abort(self, m: TxnMetadata) -> Acked:
        """Abort ``m``'s open transaction under a bumped epoch (Kafka's
        PrepareEpochFence): its producer can neither write nor end it."""
        fenced: Acked = E.NONE
        if m.producer_epoch < MAX_EPOCH - 1:
            fenced = self._persist(m, m.state, producer=(m.producer_id, m.producer_epoch + 1))
        return then(fenced, lambda code: code or self._end(m, commit=False))

    # -- requests --------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int,
                         producer_id: int = -1, producer_epoch: int = -1
                         ) -> tuple[int, int, int] | asyncio.Future[tuple[int, int, int]]:
        """(error, producer id, epoch) for InitProducerId, or a future of it."""
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return E.INVALID_TRANSACTION_TIMEOUT, -1, -1
        error = self.coordinator_error(transactional_id, create=True)
        if error:
            return error, -1, -1
        m = self.txns.get(transactional_id)
        if m is None:
            m = TxnMetadata(transactional_id, self.producer_ids.next_id(), 0, timeout_ms)
            return then(self._persist(m, T.EMPTY, partitions=set()),
                        functools.partial(_init_answer, m))
        if m.pending:
            return E.CONCURRENT_TRANSACTIONS, -1, -1
        if producer_id >= 0:  # KIP-360: a producer recovering its own id
            if (producer_id, producer_epoch) == (m.last_producer_id, m.last_producer_epoch) \
                    and m.state in (T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT):
                return E.NONE, m.producer_id, m.producer_epoch  # a retry of the bump
            if (producer_id, producer_epoch) != (m.producer_id, m.producer_epoch):
                return E.PRODUCER_FENCED, -1, -1
        if m.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT, T.PREPARE_EPOCH_FENCE):
            return E.CONCURRENT_TRANSACTIONS, -1, -1
        ended = self._fence_and_abort(m) if m.state == T.ONGOING else E.NONE

        def bump(code: int) -> tuple[int, int, int] | asyncio.Future[tuple[int, int, int]]:
            if code:
                return code, -1, -1
            return then(self._persist(m, T.EMPTY, partitions=set(), start_ms=-1,
                                      producer=self._bumped(m), timeout_ms=timeout_ms),
                        functools.partial(_init_answer, m))

        return then(ended, bump)

    def _check_producer(self, m: TxnMetadata | None, producer_id: int,
                        producer_epoch: int) -> int:
        if m is None or m.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if m.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED
        if m.pending or m.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT, T.PREPARE_EPOCH_FENCE):
            return E.CONCURRENT_TRANSACTIONS
        return E.NONE

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition]) -> Acked:
        """Put ``partitions`` in the transaction (it is Ongoing from now): the
        error, or a future of it."""
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
        return self._persist(m, T.ONGOING, partitions=m.partitions | wanted, start_ms=start)

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                commit: bool) -> Acked:
        """EndTxn: the error, or a future of it (answered once the Prepare
        state is in the log's in-sync replicas)."""
        error = self.coordinator_error(transactional_id)
        if error:
            return error
        m = self.txns.get(transactional_id)
        error = self._check_producer(m, producer_id, producer_epoch)
        if error:
            return error
        assert m is not None
        if m.state == T.ONGOING:
            return self._end(m, commit)
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
        """The disk refused a write: the dir goes offline, NOT_COORDINATOR to
        the client, as in Kafka."""
        self.store.storage_failed(f"Error while appending to {self.store.TOPIC}", exc)
        return E.NOT_COORDINATOR

    # -- periodic work ----------------------------------------------------------------

    def abort_timed_out(self, now_ms: int | None = None) -> int:
        """Abort the transactions open past their timeout, fencing their
        producers (Kafka's abortTimedOutTransactions)."""
        now = self.time_ms() if now_ms is None else now_ms
        n = 0
        for m in list(self.txns.values()):
            if m.state == T.ONGOING and not m.pending and m.start_ms + m.timeout_ms < now:
                log.info("aborting the transaction of transactional id %r: open for more "
                         "than its timeout of %d ms", m.transactional_id, m.timeout_ms)
                code = self._fence_and_abort(m)
                if not isinstance(code, asyncio.Future) and code:
                    # Resigned meanwhile (the next coordinator aborts it), or
                    # the log refused: the next round tries again.
                    continue
                n += 1
        return n

    def remove_expired(self, now_ms: int | None = None) -> int:
        """Forget the ids with no transaction open that were not used for
        ``transactional.id.expiration.ms`` (a tombstone in the log)."""
        now = self.time_ms() if now_ms is None else now_ms
        doomed = [m for m in self.txns.values()
                  if m.state in (T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT)
                  and not m.pending and m.update_ms + self.config.id_expiration_ms <= now]
        removed = 0
        for m in doomed:
            try:
                replication = self.store.append(m.transactional_id,
                                                [(txn_key(m.transactional_id), None)],
                                                timeout_ms=REQUEST_TIMEOUT_MS)
            except (NotCoordinatorError, NotEnoughReplicasError):
                continue  # resigned meanwhile, or too few in-sync replicas: later
            except OSError as exc:
                self._storage_error(exc)
                break
            removed += 1
            if replication is None:
                del self.txns[m.transactional_id]
            else:  # forgotten once the in-sync replicas have the tombstone
                m.pending = True
                replication.add_done_callback(functools.partial(self._expired, m))
        return removed

    def _expired(self, m: TxnMetadata, replication: asyncio.Future[int]) -> None:
        m.pending = False
        if not replication.cancelled() and replication.result() == E.NONE \
                and self.txns.get(m.transactional_id) is m:
            del self.txns[m.transactional_id]


def _init_answer(m: TxnMetadata, code: int) -> tuple[int, int, int]:
    """InitProducerId's answer once ``m``'s new state is written (or not)."""
    return (code, -1, -1) if code else (E.NONE, m.producer_id, m.producer_epoch)
