"""The partitions this node holds a replica of (Kafka's ``ReplicaManager``).

Owns the :class:`~pylog.server.partition.Partition` objects over the log
manager's logs: which partitions this node leads, each one's producer state
(loaded at start, snapshotted as Kafka's ``ProducerStateManager`` does), the
fetches parked on each, and the transaction markers written into them.  The
produce, fetch and transaction paths reach a partition through here; the
controller's LeaderAndIsr and StopReplica change them through here.

Threads: partitions and producer state are changed on the event loop only
(the appends happen there too, so a producer snapshot taken on the loop
matches its offset); snapshot files are written by one thread of their own,
in the order they were taken.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from pylog.coordinator.internal_topic import (
    REQUEST_TIMEOUT_MS,
    NotCoordinatorError,
    NotEnoughReplicasError,
)
from pylog.coordinator.offsets_store import OFFSETS_TOPIC
from pylog.log.errors import LogClosedError
from pylog.protocol import ErrorCode
from pylog.records.markers import marker_batch
from pylog.server import producer_state
from pylog.server.partition import NO_LEADER, Partition, isr_too_small
from pylog.server.producer_state import PartitionProducers, ProducerBatch

if TYPE_CHECKING:
    from pylog.log import LogManager
    from pylog.log.log import Log
    from pylog.server.replica_fetcher import ReplicaFetchers
    from pylog.server.replication_quota import ReplicationThrottles

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
_UNKNOWN = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
_NOT_LEADER = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
_NOT_ENOUGH_REPLICAS = int(ErrorCode.NOT_ENOUGH_REPLICAS)
_STORAGE_ERROR = int(ErrorCode.KAFKA_STORAGE_ERROR)
# (partition, the new ISR) -> written to ZooKeeper?
IsrWriter = Callable[[Partition, list[int]], Awaitable[bool]]
# (partition, producer id, producer epoch, commit, coordinator epoch,
# timeout ms) -> what its replication still waits for (Replication)
OffsetsMarker = Callable[[int, int, int, bool, int, int], "asyncio.Future[int] | None"]
# A partition an acks=all write waits on: (partition, the offset its high
# watermark must reach).
Waiting = tuple[Partition, int]


class ReplicaManager:
    def __init__(self, logs: LogManager, node_id: int,
                 producer_id_expiration_ms: Callable[[], int], *,
                 lead_local_logs: bool = True) -> None:
        self.logs = logs
        self.node_id = node_id
        # The embedded single node leads every partition it has a log of; a
        # cluster node leads none until the controller's LeaderAndIsr says so.
        self.lead_local_logs = lead_local_logs
        # Read on each use: producer.id.expiration.ms is a dynamic config.
        self._expiration_ms = producer_id_expiration_ms
        self._partitions: dict[TopicPartition, Partition] = {}
        # A marker for __consumer_offsets is the group coordinator's to write
        # (its pending transactional offsets complete with it): set by the node.
        self.offsets_marker: OffsetsMarker | None = None
        # A cluster: the follower fetchers (pylog.server.replica_fetcher) and
        # the writer of ISR changes to ZooKeeper (pylog.server.zk_node).
        self.fetchers: ReplicaFetchers | None = None
        self.isr_writer: IsrWriter | None = None
        self.throttles: ReplicationThrottles | None = None  # reassignment throttles
        # A cluster: whether the metadata knows a partition this node holds
        # no replica of (NOT_LEADER_OR_FOLLOWER then, not UNKNOWN_...).
        self.known: Callable[[str, int], bool] | None = None
        # Counted for the metrics (Kafka's IsrShrinksPerSec, IsrExpandsPerSec).
        self.isr_shrinks = 0
        self.isr_expands = 0
        # Producer snapshot files: one thread, so they are written (and older
        # ones pruned) in the order they were taken.
        self.snapshot_executor = ThreadPoolExecutor(max_workers=1,
                                                    thread_name_prefix="pylog-snapshot")
        self.stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        now_ms = time.time_ns() // 1_000_000
        for tp, lg in self.logs.logs().items():
            # After the log recovery: snapshot + replay of the tail, less the
            # producers already expired (Kafka's loadFromSnapshot skips them;
            # the next snapshot of the partition leaves them out).
            part = self._partition(tp, lg)
            if lead_local_logs:
                # The single node is every partition's whole ISR: everything
                # its log holds is committed, whatever the checkpoint says.
                lg.high_watermark = lg.log_end_offset
            state = producer_state.load(lg)
            if state is not None:
                state.remove_expired(now_ms, self._expiration_ms())
                if state.producers or state.aborted:
                    part.producers = state
                lg.first_unstable_offset = state.first_unstable_offset()

    # -- partitions ----------------------------------------------------------

    def _partition(self, tp: TopicPartition, lg: Log) -> Partition:
        part = self._partitions[tp] = Partition(tp[0], tp[1], self.node_id, lg)
        if not self.lead_local_logs:
            part.leader_id = NO_LEADER
        return part

    def get(self, topic: str, index: int) -> Partition | None:
        """The partition, if this node holds a replica of it (a log made
        since the last call, by topic creation, is picked up here)."""
        found = self._partitions.get((topic, index))
        if found is not None and found.log is not None and not found.log.closed:
            return found
        lg = self.logs.get_log(topic, index)
        if lg is None:
            if found is not None:  # its log went (deleted)
                del self._partitions[(topic, index)]
            return None
        if found is not None and found.log is not lg:  # re-created: a new partition
            found.notify()
        return self._partition((topic, index), lg)

    def partitions(self) -> list[Partition]:
        """Every partition with a local log."""
        for tp in self.logs.logs():
            self.get(*tp)
        return [p for p in self._partitions.values() if p.log is not None]

    def _missing(self, topic: str, index: int) -> int:
        """No replica here: Kafka's getPartitionOrError, NOT_LEADER_OR_FOLLOWER
        for a partition the cluster's metadata knows (it lives elsewhere),
        UNKNOWN_TOPIC_OR_PARTITION otherwise."""
        known = self.known
        return _NOT_LEADER if known is not None and known(topic, index) else _UNKNOWN

    def leader_partition(self, topic: str, index: int) -> Partition | int:
        """A partition this node leads, else the error code (as :meth:`leader_log`)."""
        part = self._partitions.get((topic, index)) or self.get(topic, index)
        if part is None:
            return self._missing(topic, index)
        if not part.is_leader:
            return part.not_leader_error()
        return part

    def leader_log(self, topic: str, index: int) -> Log | int:
        """The log of a partition this node leads, else the error code to
        answer (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER), a plain
        int: callers on the produce and fetch paths test ``type(x) is int``."""
        part = self._partitions.get((topic, index)) or self.get(topic, index)
        if part is None:
            return self._missing(topic, index)
        if not part.is_leader:
            return part.not_leader_error()
        return part.log  # type: ignore[return-value]

    def remove_topic(self, name: str, partitions: int) -> None:
        """A deleted topic's partitions: forgotten, their parked fetches woken
        (they re-read and see it gone)."""
        for p in range(partitions):
            part = self._partitions.pop((name, p), None)
            if part is not None:
                part.log = None
                part.notify()

    # -- the controller's requests (a cluster) ----------------------------------------

    def apply_leader_and_isr(self, topic: str, index: int, leader: int, leader_epoch: int,
                             isr: list[int], replicas: list[int], partition_epoch: int,
                             controller_epoch: int, make_log: Callable[[], Log]) -> int:
        """One partition of a LeaderAndIsr (Kafka's makeLeaders/makeFollowers):
        its log made if this node has none (``make_log``), then who leads at
        which epoch.  An epoch older than the one applied already is refused
        (STALE_CONTROLLER_EPOCH, as Kafka answers it); the error code, 0 when
        applied.  The caller tells the coordinators and fetchers."""
        part = self._partitions.get((topic, index)) or self.get(topic, index)
        if part is not None and leader_epoch < part.leader_epoch:
            log.warning("ignoring LeaderAndIsr for %s-%d at leader epoch %d: %d applied "
                        "already", topic, index, leader_epoch, part.leader_epoch)
            return int(ErrorCode.STALE_CONTROLLER_EPOCH)
        if part is not None and leader_epoch == part.leader_epoch \
                and partition_epoch < part.partition_epoch:
            # The same epoch from a controller that read the state before
            # this leader changed the ISR: taken, it would put back an older
            # ISR (a high watermark that leaves out a replica ZooKeeper has
            # in the ISR, which may then lead without the records acknowledged
            # meanwhile).  Kafka ignores a LeaderAndIsr that is not newer.
            log.info("ignoring LeaderAndIsr for %s-%d at leader epoch %d: partition epoch "
                     "%d, %d applied already", topic, index, leader_epoch, partition_epoch,
                     part.partition_epoch)
            return int(ErrorCode.STALE_CONTROLLER_EPOCH)
        if part is None:
            part = self._partition((topic, index), make_log())
        lg = part.log
        assert lg is not None
        was_leader = part.leader_id == self.node_id
        new_epoch = leader_epoch != part.leader_epoch
        part.leader_id = leader
        part.leader_epoch = lg.leader_epoch = leader_epoch
        part.isr, part.replicas = list(isr), list(replicas)
        part.partition_epoch = partition_epoch
        part.controller_epoch = controller_epoch
        if leader == self.node_id:
            # Kafka's makeLeader: the new epoch starts at the log end; the
            # followers' states start afresh; no fetching from anyone.
            lg.epochs.assign(leader_epoch, lg.log_end_offset)
            if new_epoch or not was_leader:
                part.reset_followers(time.monotonic_ns() // 1_000_000)
            else:
                lg.hw_follows_leo = part.isr == [self.node_id]
            if lg.hw_follows_leo:
                lg.high_watermark = lg.log_end_offset
            if self.fetchers is not None:
                self.fetchers.unfollow((topic, index))
        else:
            part.followers = {}
            lg.hw_follows_leo = False
            if self.fetchers is not None and leader >= 0:
                self.fetchers.follow(part, leader)
        part.notify()  # parked fetches and produces re-check: fenced or led elsewhere now
        return 0

    def stop_replica(self, topic: str, index: int, delete: bool) -> None:
        """StopReplica: this node serves the partition no more; with ``delete``
        its log goes too (topic deletion, a moved replica), else it stays on
        disk for a later LeaderAndIsr."""
        part = self._partitions.get((topic, index))
        if part is not None:
            part.leader_id = NO_LEADER
            part.notify()
        if self.fetchers is not None:
            self.fetchers.unfollow((topic, index))
        if delete:
            self._partitions.pop((topic, index), None)
            if self.logs.get_log(topic, index) is not None:
                self.logs.delete_log(topic, index)

    # -- replication: the leader's side ------------------------------------------------

    def follower_fetched(self, part: Partition, replica: int, fetch_offset: int,
                         leader_leo: int) -> None:
        """A follower fetched ``part`` at ``fetch_offset`` (its log end): its
        state, the ISR (it may join) and the high watermark follow."""
        part.update_follower(replica, fetch_offset, leader_leo, time.monotonic_ns() // 1_000_000)
        if part.may_join_isr(replica):
            self._change_isr(part, part.isr + [replica], expand=True)
        if part.maybe_advance_high_watermark():
            part.notify()

    def _change_isr(self, part: Partition, new_isr: list[int], expand: bool) -> None:
        if part.isr_pending or self.isr_writer is None or self._loop is None:
            return
        part.isr_pending = True
        self._loop.create_task(self._write_isr(part, new_isr, expand,
                                               (part.leader_epoch, part.partition_epoch)))

    async def _write_isr(self, part: Partition, new_isr: list[int], expand: bool,
                         decided_at: tuple[int, int]) -> None:
        """Kafka's Partition.expandIsr/shrinkIsr in ZooKeeper mode: the state
        znode by compare-and-set on its version, then a change notice for the
        controller; on a conflict nothing changes here (a LeaderAndIsr with
        the winner's state follows).  ``decided_at``: the leader epoch and
        partition epoch the new ISR was worked out under; a LeaderAndIsr
        applied since (this task starts later) makes it void: written on the
        new state's version it would go through, putting replicas that are
        not in sync into another leader's ISR."""
        try:
            if not part.is_leader or (part.leader_epoch, part.partition_epoch) != decided_at:
                return
            if not await self.isr_writer(part, new_isr):  # type: ignore[misc]
                return
            if not part.is_leader or part.leader_epoch != decided_at[0]:
                return  # led elsewhere meanwhile: the LeaderAndIsr said so
            log.info("%s %s-%d's ISR: %s -> %s", "expanding" if expand else "shrinking",
                     part.topic, part.index, part.isr, new_isr)
            part.isr = new_isr
            if expand:
                self.isr_expands += 1
            else:
                self.isr_shrinks += 1
            lg = part.log
            if lg is not None:
                lg.hw_follows_leo = new_isr == [self.node_id]
                if lg.hw_follows_leo:
                    lg.high_watermark = lg.log_end_offset
            part.maybe_advance_high_watermark()
            part.notify()
        except Exception:
            log.exception("changing the ISR of %s-%d failed", part.topic, part.index)
        finally:
            part.isr_pending = False

    def shrink_isrs(self, lag_ms: int) -> int:
        """Kafka's maybeShrinkIsr on every partition led here: followers not
        caught up for ``lag_ms`` leave the ISR.  How many partitions shrink."""
        now = time.monotonic_ns() // 1_000_000
        count = 0
        for part in list(self._partitions.values()):
            if part.is_leader and len(part.isr) > 1:
                out = part.out_of_sync(now, lag_ms)
                if out:
                    self._change_isr(part, [r for r in part.isr if r not in out], expand=False)
                    count += 1
        return count

    async def replicated(self, waiting: list[Waiting], timeout_ms: int
                         ) -> dict[TopicPartition, tuple[int, str | None]]:
        """acks=all (Kafka's DelayedProduce), for a produce and for the
        coordinators' writes alike: until every partition's high watermark
        reaches its offset (the in-sync replicas have the write), at most
        ``timeout_ms`` or until the node stops.  The partitions that did not
        make it, with their error and message: NOT_LEADER_OR_FOLLOWER (this
        node stopped leading meanwhile), REQUEST_TIMED_OUT, or
        NOT_ENOUGH_REPLICAS_AFTER_APPEND (made it with fewer in-sync replicas
        than min.insync.replicas); empty when all did."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000
        pending = list(waiting)
        while pending:
            pending = [(p, offset) for p, offset in pending
                       if p.is_leader and p.log is not None and p.log.high_watermark < offset]
            if not pending or deadline <= loop.time() or self.stopping:
                break
            woken = loop.create_future()
            timer = loop.call_at(deadline, _wake, woken)
            keys = [(p.topic, p.index) for p, _ in pending]
            self.add_waiter(keys, woken)
            try:
                await woken
            finally:
                timer.cancel()
                self.remove_waiter(keys, woken)
        outcome: dict[TopicPartition, tuple[int, str | None]] = {}
        for part, offset in waiting:
            if not part.is_leader or part.log is None:
                outcome[(part.topic, part.index)] = (_NOT_LEADER, None)
            elif part.log.high_watermark < offset:
                outcome[(part.topic, part.index)] = (int(ErrorCode.REQUEST_TIMED_OUT), None)
            elif len(part.isr) < part.log.config.min_insync_replicas:
                outcome[(part.topic, part.index)] = (
                    int(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND), isr_too_small(part))
        return outcome

    def replication(self, part: Partition, end_offset: int, timeout_ms: int
                    ) -> asyncio.Future[int] | None:
        """What an acks=-1 write of this node's that ends at ``end_offset``
        still waits for (a coordinator's, a marker): None when nothing, the
        partition's ISR being this node alone (its high watermark follows its
        log end: the single node); else a future of its outcome, NONE or the
        error :meth:`replicated` gives."""
        if part.log is None or part.log.hw_follows_leo:
            return None
        return asyncio.get_running_loop().create_task(
            self._replicated_code([(part, end_offset)], timeout_ms))

    async def _replicated_code(self, waiting: list[Waiting], timeout_ms: int) -> int:
        outcome = await self.replicated(waiting, timeout_ms)
        return next(iter(outcome.values()))[0] if outcome else 0

    def led(self) -> list[Partition]:
        return [p for p in self._partitions.values() if p.is_leader]

    # -- producer state --------------------------------------------------------

    def producer_state(self, topic: str, index: int) -> PartitionProducers | None:
        """The producer state of a partition, read-only (None: no producer)."""
        part = self._partitions.get((topic, index))
        return part.producers if part is not None else None

    def producers_of(self, topic: str, index: int) -> PartitionProducers:
        part = self._partitions.get((topic, index)) or self.get(topic, index)
        if part is None:
            raise KeyError(f"{topic}-{index} has no replica here")
        found = part.producers
        if found is None:
            found = part.producers = PartitionProducers()
        return found

    def write_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                     commit: bool, coordinator_epoch: int = 0,
                     timeout_ms: int = REQUEST_TIMEOUT_MS) -> int | asyncio.Future[int]:
        """A transaction's COMMIT or ABORT marker into one of its partitions
        (WriteTxnMarkers: from the coordinator, local, or from an admin
        aborting a hanging transaction): the producer's transaction there
        ends, the last stable offset moves, parked fetches wake.  Written as
        Kafka's handleWriteTxnMarkersRequest appends it, acks=-1: refused
        with NOT_ENOUGH_REPLICAS while the partition has fewer in-sync
        replicas than its min.insync.replicas, and done once they have it.
        NONE (0) or the refusal's error code now (no such partition, not the
        leader, a fenced epoch, KAFKA_STORAGE_ERROR: the dir went offline);
        or, with followers in the ISR, a future of the outcome once the high
        watermark passes the marker (an error of :meth:`replicated`, at most
        ``timeout_ms``).  A marker in ``__consumer_offsets`` is the group
        coordinator's to write, which applies the transaction's offsets once
        it is replicated."""
        part = self.leader_partition(topic, partition)
        if isinstance(part, int):
            return part  # deleted since, or led elsewhere now
        lg = part.log
        if lg is None:
            return _UNKNOWN
        if len(part.isr) < lg.config.min_insync_replicas:
            return _NOT_ENOUGH_REPLICAS  # Partition.appendRecordsToLeader: before the append
        state = self.producers_of(topic, partition)
        error = state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        if error is not None:
            log.warning("no %s marker for producer %d epoch %d in %s-%d: %s",
                        "COMMIT" if commit else "ABORT", producer_id, producer_epoch, topic,
                        partition, error.name)
            return int(error)
        now = time.time_ns() // 1_000_000
        try:
            if topic == OFFSETS_TOPIC and self.offsets_marker is not None:
                # Its producer state follows (offsets_txn_written).
                replication = self.offsets_marker(partition, producer_id, producer_epoch,
                                                  commit, coordinator_epoch, timeout_ms)
                return 0 if replication is None else replication
            result = lg.append(marker_batch(producer_id, producer_epoch, commit,
                                            coordinator_epoch, now))
        except NotEnoughReplicasError:
            return _NOT_ENOUGH_REPLICAS
        except NotCoordinatorError:
            return _NOT_LEADER
        except LogClosedError:  # the node is stopping
            return _STORAGE_ERROR
        except OSError as exc:  # as a produce append: the dir goes offline
            self.logs.failures.fail(f"Error while appending a transaction marker to "
                                    f"{topic}-{partition} in dir {self.logs.dir}", exc)
            return _STORAGE_ERROR
        state.record_marker(producer_id, producer_epoch, result.base_offset, commit,
                            coordinator_epoch, now)
        lg.first_unstable_offset = state.first_unstable_offset()
        self.notify_append(topic, partition)
        replication = self.replication(part, result.last_offset + 1, timeout_ms)
        return 0 if replication is None else replication

    def offsets_txn_written(self, partition: int, producer_id: int, producer_epoch: int,
                            offset: int, commit: bool | None,
                            coordinator_epoch: int = 0) -> None:
        """The group coordinator wrote a TxnOffsetCommit batch (``commit``
        None) or a marker into ``__consumer_offsets``-``partition``: its
        producer state and last stable offset follow, as a produced
        partition's do (what a restart's replay of the log rebuilds)."""
        state = self.producers_of(OFFSETS_TOPIC, partition)
        now = time.time_ns() // 1_000_000
        if commit is None:  # the coordinator's own batch: no sequence (-1)
            state.record(ProducerBatch(producer_id, producer_epoch, -1, -1), offset, -1, now,
                         transactional=True)
        else:
            state.record_marker(producer_id, producer_epoch, offset, commit,
                                coordinator_epoch, now)
        lg = self.logs.get_log(OFFSETS_TOPIC, partition)
        if lg is not None:
            lg.first_unstable_offset = state.first_unstable_offset()

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Kafka's ``UnifiedLog.removeExpiredProducers`` on every partition (on
        the loop thread, the only one touching producer state): forget the
        producers idle for ``producer.id.expiration.ms``, drop the state of
        partitions left with none, and snapshot the partitions that changed
        at their log end now, so a restart does not bring the forgotten
        producers back.  Returns how many producers were forgotten."""
        if now_ms is None:
            now_ms = time.time_ns() // 1_000_000
        expiration_ms = self._expiration_ms()
        removed = 0
        jobs = []
        for part in list(self._partitions.values()):
            state = part.producers
            if state is None:
                continue
            n = state.remove_expired(now_ms, expiration_ms)
            if not n:
                continue
            removed += n
            if not state.producers and not state.aborted:
                part.producers = None
            part.snapshot_at = None  # changed: the next snapshot writes it
            lg = part.log
            if lg is not None and not lg.closed and not self.stopping:
                jobs.append(self._snapshot_job(part, lg, lg.log_end_offset))
        if jobs:
            self.snapshot_executor.submit(self._write_snapshots, jobs)
        if removed:
            log.info("expired %d producer id(s) idle for %d ms or more", removed,
                     expiration_ms)
        return removed

    # -- parked fetches --------------------------------------------------------

    def add_waiter(self, keys: Iterable[TopicPartition], fut: asyncio.Future) -> None:
        """Park a fetch on these partitions (those with no replica here are
        skipped: nothing will be appended to them)."""
        for topic, index in keys:
            part = self._partitions.get((topic, index)) or self.get(topic, index)
            if part is not None:
                part.waiters.add(fut)

    def remove_waiter(self, keys: Iterable[TopicPartition], fut: asyncio.Future) -> None:
        for key in keys:
            part = self._partitions.get(key)
            if part is not None:
                part.waiters.discard(fut)

    def notify_append(self, topic: str, partition: int) -> None:
        """Wake the fetches parked on a partition (new data, or it went away)."""
        part = self._partitions.get((topic, partition))
        if part is not None:
            part.notify()  # counted even with nobody parked (Partition.changes)

    def wake_all(self) -> None:
        """Every parked fetch answers now (shutdown)."""
        for part in list(self._partitions.values()):
            part.notify()

    # -- producer snapshots ----------------------------------------------------

    def start(self) -> None:
        """On the event loop: rolls snapshot producer state (Kafka's
        UnifiedLog.roll), jobs and the shutdown snapshot hand over to it."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self.logs.set_roll_listener(self._on_roll)

    def _snapshot_job(self, part: Partition, lg: Log, offset: int) -> Callable[[], None]:
        """The producer state of ``part`` as of ``offset``, copied now (on the
        loop thread: the only writer of producer state and of appends, so
        state and offset agree); the returned job only writes the file."""
        part.snapshot_at = offset
        state = part.producers or PartitionProducers()
        state.trim_aborted(lg.log_start_offset)  # retention took those transactions
        data = state.to_json(offset)  # a frozen copy: fresh dicts and lists
        tp = (part.topic, part.index)
        return lambda: self._write_snapshot(tp, lg, data, offset)

    def snapshot_jobs(self) -> list[Callable[[], None]]:
        """Producer snapshots due (the periodic ones and the last at shutdown):
        the partitions whose log end moved since their last snapshot."""
        jobs = []
        for part in self.partitions():
            lg = part.log
            if lg is not None and part.snapshot_at != lg.log_end_offset:
                jobs.append(self._snapshot_job(part, lg, lg.log_end_offset))
        return jobs

    def _on_roll(self, lg: Log, base_offset: int) -> None:
        """A segment rolled (called under the log's lock): snapshot the
        producer state at the new segment's base, as Kafka's roll does, so a
        restart replays at most the active segment.  On the loop thread (an
        append rolled) the state is exactly that of ``base_offset``: every
        batch below it was recorded, the one being appended is not yet.  A
        roll on another thread (retention rolling an expired active segment)
        hands over to the loop, which snapshots at its log end then.  The file
        is written and fsynced on the snapshot thread, never here."""
        if threading.get_ident() == self._loop_thread:
            part = self.get(lg.topic, lg.partition)
            if part is not None and part.log is lg:
                job = self._snapshot_job(part, lg, base_offset)
                self.snapshot_executor.submit(self._write_snapshots, [job])
            return
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._snapshot_latest, lg)
            except RuntimeError:  # the loop closed meanwhile: shutdown snapshots all
                pass

    def _snapshot_latest(self, lg: Log) -> None:
        part = self.get(lg.topic, lg.partition)
        if part is None or part.log is not lg or self.stopping:
            return
        job = self._snapshot_job(part, lg, lg.log_end_offset)
        self.snapshot_executor.submit(self._write_snapshots, [job])

    def _write_snapshot(self, tp: TopicPartition, lg: Log, data: dict[str, Any],
                        offset: int) -> None:
        if self.logs.get_log(*tp) is not lg:  # deleted (or re-created) meanwhile
            return
        try:
            producer_state.write_snapshot(lg, data, offset)
        except OSError as exc:
            if self.logs.get_log(*tp) is not lg or lg.closed:
                raise  # it went away during the write: skipped
            # As Kafka (takeSnapshot under maybeHandleIOException): a dir that
            # refuses the snapshot goes offline, and with it this node.
            self.logs.failures.fail(f"Error while writing producer snapshot for "
                                    f"{tp[0]}-{tp[1]} in dir {self.logs.dir}", exc)

    def _write_snapshots(self, jobs: list[Callable[[], None]]) -> None:
        for job in jobs:
            try:
                job()
            except (OSError, ValueError) as exc:  # e.g. the topic was deleted meanwhile
                log.info("producer snapshot skipped: %s", exc)

    async def snapshot_every(self, interval_s: float) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval_s)
            await loop.run_in_executor(self.snapshot_executor, self._write_snapshots,
                                       self.snapshot_jobs())

    async def close(self) -> None:
        """The last producer snapshots (before the logs close: a clean start
        then needs no replay at all)."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self.snapshot_executor, self._write_snapshots,
                                   self.snapshot_jobs())
        self.snapshot_executor.shutdown(wait=True)


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)
