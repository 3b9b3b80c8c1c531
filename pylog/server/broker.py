"""A broker node: its log dir, topics, producer state, listener and periodic tasks.

Startup opens the log dir (recovering after an unclean stop; ``meta.properties``
with the cluster id and node id is written on first start, except in KRaft
mode, where ``pylog storage format`` must have written it), then listens.
Shutdown, as Kafka's controlled shutdown on one node: stop accepting, let the
requests already read finish, close the logs (flush, checkpoints, and the
clean-shutdown marker last).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from pylog.coordinator import CoordinatorConfig, GroupCoordinator
from pylog.coordinator.offsets_store import OFFSETS_TOPIC
from pylog.coordinator.transactions import TransactionCoordinator, TxnConfig
from pylog.coordinator.txn_log import TXN_TOPIC
from pylog.io.backend import get_backend
from pylog.log import LogManager, meta_properties
from pylog.net.listener import Listener
from pylog.net.request_queue import RequestQueue
from pylog.protocol import ErrorCode
from pylog.records.markers import marker_batch
from pylog.server import dynamic_configs, producer_state
from pylog.server.client_quotas import ClientQuotas
from pylog.server.config import BrokerConfig, Endpoint
from pylog.server.fetch_sessions import FetchSessionCache
from pylog.server.metrics import BrokerMetrics
from pylog.server.producer_state import PartitionProducers, ProducerBatch, ProducerIds
from pylog.server.requests import RequestRouter
from pylog.server.topic_configs import log_config
from pylog.server.topics import Topic, TopicRegistry, load_topic_configs

if TYPE_CHECKING:
    from pylog.log.log import Log

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
DRAIN_TIMEOUT_S = 5.0


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.log_dir = config.log_dir
        if config["process.roles"]:
            # KRaft: the operator formats the dir first, as Kafka requires.
            meta_properties.require(self.log_dir)
        # The dynamic broker configs saved by AlterConfigs: the logs open with
        # the topic defaults they give (pylog.server.dynamic_configs).
        dynamic_configs.load(config)
        default = config.log_config
        saved = load_topic_configs(self.log_dir)
        topic_configs = {name: log_config(props, default)
                         for name, props in saved.items() if props}
        self.logs = LogManager(self.log_dir, default, node_id=self.node_id,
                               backend=get_backend(config["io.backend"]),
                               topic_configs=topic_configs,
                               manager_config=config.manager_config,
                               cleaner_config=config.cleaner_config)
        self.logs.failures.on_offline = self._dir_offline
        self.cluster_id: str = self.logs.meta["cluster.id"]
        self.topics = TopicRegistry(self.logs, default)
        # Groups and committed offsets, rebuilt from __consumer_offsets.
        self.groups = GroupCoordinator(self.topics, CoordinatorConfig.from_broker(config))
        self.groups.load()
        for name in self.topics.finished_deletions:  # see delete_topic
            self.groups.remove_topic_offsets(name)
            self.topics.forget(name)
        self.producer_ids = ProducerIds(self.log_dir)
        self._producers: dict[TopicPartition, PartitionProducers] = {}
        # Log end offset of each partition's last producer snapshot; partitions
        # whose end has not moved since are not written again.
        self._snapshot_at: dict[TopicPartition, int] = {}
        now_ms = time.time_ns() // 1_000_000
        for tp, lg in self.logs.logs().items():
            # After the log recovery above: snapshot + replay of the tail,
            # less the producers already expired (Kafka's loadFromSnapshot
            # skips them; the next snapshot of the partition leaves them out).
            state = producer_state.load(lg)
            if state is not None:
                state.remove_expired(now_ms, config["producer.id.expiration.ms"])
                if state.producers or state.aborted:
                    self._producers[tp] = state
                lg.first_unstable_offset = state.first_unstable_offset()
        self._waiters: dict[TopicPartition, set[asyncio.Future]] = {}
        self.groups.store.on_txn_write = self._offsets_txn_written
        # Transactions: their state from __transaction_state, and those a
        # crash left half ended are ended now (markers need the producer
        # state above).
        self.txns = TransactionCoordinator(self.topics, self.producer_ids, self.write_marker,
                                           TxnConfig.from_broker(config))
        self.txns.load()
        self.txns.complete_prepared()
        self.verify_txn_partitions: bool = config["transaction.partition.verification.enable"]
        self.router = RequestRouter(self)
        # Disk work that must not stall the loop: fsyncs, cold-cache reads.
        self.executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="pylog-io")
        # Producer snapshot files: one thread, so they are written (and older
        # ones pruned) in the order they were taken.
        self.snapshot_executor = ThreadPoolExecutor(max_workers=1,
                                                    thread_name_prefix="pylog-snapshot")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self.groups.store.executor = self.executor
        listener = config.listeners[0]
        self.listener = Listener(
            listener.host, listener.port, self.router,
            max_request_bytes=config["socket.request.max.bytes"],
            idle_ms=config["connections.max.idle.ms"],
            send_buffer=config["socket.send.buffer.bytes"],
            receive_buffer=config["socket.receive.buffer.bytes"], executor=self.executor,
            max_connections=config["max.connections"],
            max_per_ip=config["max.connections.per.ip"],
            per_ip_overrides=config["max.connections.per.ip.overrides"],
            queue=RequestQueue(config["queued.max.requests"], config["queued.max.request.bytes"]))
        self.endpoint: Endpoint = config.advertised()
        self.fetch_max_bytes: int = config["fetch.max.bytes"]
        # Client quotas set by AlterClientQuotas (pylog.server.client_quotas).
        self.quotas = ClientQuotas(self.log_dir, config["quota.window.num"],
                                   config["quota.window.size.seconds"])
        self.fetch_sessions = FetchSessionCache(
            config["max.incremental.fetch.session.cache.slots"],
            lambda: int(time.monotonic() * 1000))
        # Prometheus page at metrics.listener; None when off, so each hook in the
        # request, produce and fetch paths costs one attribute test.
        self.metrics = BrokerMetrics.create(self)
        self.stopping = False
        self._tasks: list[asyncio.Task] = []

    # -- state used by the handlers ----------------------------------------------

    def auto_create(self, name: str) -> Topic:
        if name == OFFSETS_TOPIC or name == TXN_TOPIC:
            # As Kafka's AutoTopicCreationManager: the coordinator's partition
            # count and configs, not num.partitions.
            (self.groups.store if name == OFFSETS_TOPIC else self.txns.store).ensure_topic()
            return self.topics.get(name)
        return self.topics.create(name, self.config["num.partitions"])

    def delete_topic(self, name: str) -> Topic:
        topic = self.topics.delete(name)
        for p in range(topic.partitions):
            self._producers.pop((name, p), None)
            self._snapshot_at.pop((name, p), None)
            self.notify_append(name, p)  # parked fetches re-read and see it gone
        try:
            self.groups.remove_topic_offsets(name)  # as Kafka's handleDeletedPartitions
        finally:
            # The marker goes last: a crash before this point removes the
            # offsets at the next start (a new topic of this name must not
            # find the old one's commits).
            self.topics.forget(name)
        return topic

    def producer_state(self, topic: str, partition: int) -> PartitionProducers | None:
        """The producer state of a partition, read-only (None: no producer)."""
        return self._producers.get((topic, partition))

    def producers_of(self, topic: str, partition: int) -> PartitionProducers:
        found = self._producers.get((topic, partition))
        if found is None:
            found = self._producers[(topic, partition)] = PartitionProducers()
        return found

    def write_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                     commit: bool, coordinator_epoch: int = 0) -> ErrorCode | None:
        """A transaction's COMMIT or ABORT marker into one of its partitions
        (WriteTxnMarkers: from the coordinator, local, or from an admin
        aborting a hanging transaction): the producer's transaction there
        ends, the last stable offset moves, parked fetches wake.  The error
        when it is refused (no such partition, a fenced epoch); an append
        the disk refuses takes the dir offline and raises."""
        lg = self.logs.get_log(topic, partition)
        if lg is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # deleted since: nothing to end there
        state = self.producers_of(topic, partition)
        error = state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        if error is not None:
            log.warning("no %s marker for producer %d epoch %d in %s-%d: %s",
                        "COMMIT" if commit else "ABORT", producer_id, producer_epoch, topic,
                        partition, error.name)
            return error
        if topic == OFFSETS_TOPIC:  # its producer state follows (_offsets_txn_written)
            self.groups.complete_txn(partition, producer_id, producer_epoch, commit,
                                     coordinator_epoch)
            return None
        now = time.time_ns() // 1_000_000
        try:
            result = lg.append(marker_batch(producer_id, producer_epoch, commit,
                                            coordinator_epoch, now))
        except OSError as exc:  # as a produce append: the dir goes offline
            self.logs.failures.fail(f"Error while appending a transaction marker to "
                                    f"{topic}-{partition} in dir {self.logs.dir}", exc)
            raise
        state.record_marker(producer_id, producer_epoch, result.base_offset, commit,
                            coordinator_epoch, now)
        lg.first_unstable_offset = state.first_unstable_offset()
        self.notify_append(topic, partition)
        return None

    def _offsets_txn_written(self, partition: int, producer_id: int, producer_epoch: int,
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

    def add_waiter(self, keys: list[TopicPartition], fut: asyncio.Future) -> None:
        waiters = self._waiters
        for key in keys:
            found = waiters.get(key)
            if found is None:
                waiters[key] = {fut}
            else:
                found.add(fut)

    def remove_waiter(self, keys: list[TopicPartition], fut: asyncio.Future) -> None:
        for key in keys:
            found = self._waiters.get(key)
            if found is not None:
                found.discard(fut)
                if not found:
                    del self._waiters[key]

    def notify_append(self, topic: str, partition: int) -> None:
        """Wake the fetches parked on a partition (new data, or it went away)."""
        found = self._waiters.get((topic, partition))
        if found:
            for fut in found:
                if not fut.done():
                    fut.set_result(None)

    def _dir_offline(self, log_dir: str) -> None:
        """The log dir failed (pylog.log.dir_failure): it is this node's only
        one, so halt as Kafka's LogDirFailureHandler does, without a clean
        shutdown (the next start recovers, as after kill -9).  On the loop the
        halt waits for the callback in progress, so the request that hit the
        error is answered KAFKA_STORAGE_ERROR first."""
        log.critical("Halting broker because dir %s is offline", log_dir)
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(_halt)
        else:
            _halt()

    # -- life cycle ----------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        # As Kafka's UnifiedLog.roll: a producer snapshot at every new segment.
        self.logs.set_roll_listener(self._on_roll)
        port = await self.listener.start()
        self.endpoint = self.config.advertised(port)
        if self.metrics is not None:
            await self.metrics.start()
        self.groups.start()
        # Retention, flushes, checkpoints and cache dropping run on the log
        # manager's own thread (fsync and unlink block; the logs lock themselves).
        self.logs.start_scheduler()
        interval = self.config["log.flush.offset.checkpoint.interval.ms"]
        if interval > 0:
            self._tasks.append(asyncio.get_running_loop().create_task(
                self._snapshot_every(interval / 1000)))
        # Kafka's PeriodicProducerExpirationCheck and the transaction
        # coordinator's two periodic jobs (each first runs one interval in).
        txn = self.txns.config
        for job, every_ms in (
                (self.remove_expired_producers,
                 self.config["producer.id.expiration.check.interval.ms"]),
                (self.txns.abort_timed_out, txn.abort_interval_ms),
                (self.txns.remove_expired, txn.remove_interval_ms)):
            self._tasks.append(asyncio.get_running_loop().create_task(
                _every(job, every_ms / 1000)))

    def _snapshot_job(self, tp: TopicPartition, lg: Log, offset: int) -> Callable[[], None]:
        """The producer state of ``tp`` as of ``offset``, copied now (on the
        loop thread: the only writer of producer state and of appends, so
        state and offset agree); the returned job only writes the file."""
        self._snapshot_at[tp] = offset
        state = self._producers.get(tp) or PartitionProducers()
        state.trim_aborted(lg.log_start_offset)  # retention took those transactions
        data = state.to_json(offset)  # a frozen copy: fresh dicts and lists
        return lambda: self._write_snapshot(tp, lg, data, offset)

    def _snapshot_jobs(self) -> list[Callable[[], None]]:
        """Producer snapshots due (the periodic ones and the last at shutdown):
        the partitions whose log end moved since their last snapshot."""
        return [self._snapshot_job(tp, lg, lg.log_end_offset)
                for tp, lg in self.logs.logs().items()
                if self._snapshot_at.get(tp) != lg.log_end_offset]

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
            job = self._snapshot_job((lg.topic, lg.partition), lg, base_offset)
            self.snapshot_executor.submit(self._write_snapshots, [job])
            return
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._snapshot_latest, lg)
            except RuntimeError:  # the loop closed meanwhile: shutdown snapshots all
                pass

    def _snapshot_latest(self, lg: Log) -> None:
        tp = (lg.topic, lg.partition)
        if self.logs.get_log(*tp) is not lg or self.stopping:
            return
        job = self._snapshot_job(tp, lg, lg.log_end_offset)
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

    async def _snapshot_every(self, interval_s: float) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval_s)
            await loop.run_in_executor(self.snapshot_executor, self._write_snapshots,
                                       self._snapshot_jobs())

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Kafka's ``UnifiedLog.removeExpiredProducers`` on every partition (on
        the loop thread, the only one touching producer state): forget the
        producers idle for ``producer.id.expiration.ms`` (read each time: it
        is a dynamic config), drop the partitions left with none, and
        snapshot the partitions that changed at their log end now, so a
        restart does not bring the forgotten producers back.  Returns how
        many producers were forgotten."""
        if now_ms is None:
            now_ms = time.time_ns() // 1_000_000
        expiration_ms = self.config["producer.id.expiration.ms"]
        removed = 0
        jobs = []
        for tp, state in list(self._producers.items()):
            n = state.remove_expired(now_ms, expiration_ms)
            if not n:
                continue
            removed += n
            if not state.producers and not state.aborted:
                del self._producers[tp]
            self._snapshot_at.pop(tp, None)  # changed: the next snapshot writes it
            lg = self.logs.get_log(*tp)
            if lg is not None and not self.stopping:
                jobs.append(self._snapshot_job(tp, lg, lg.log_end_offset))
        if jobs:
            self.snapshot_executor.submit(self._write_snapshots, jobs)
        if removed:
            log.info("expired %d producer id(s) idle for %d ms or more", removed,
                     expiration_ms)
        return removed

    async def stop(self) -> None:
        """Stop accepting, answer what was read, then close the logs cleanly."""
        self.stopping = True
        self.listener.stop_accepting()
        if self.metrics is not None:
            await self.metrics.stop()
        for waiters in list(self._waiters.values()):
            for fut in list(waiters):
                if not fut.done():
                    fut.set_result(None)  # parked fetches answer now
        await self.groups.stop()  # parked joins and syncs answer now
        await self.listener.drain(DRAIN_TIMEOUT_S)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        loop = asyncio.get_running_loop()
        # Before the logs close: a clean start then needs no replay at all.
        await loop.run_in_executor(self.snapshot_executor, self._write_snapshots,
                                   self._snapshot_jobs())
        await loop.run_in_executor(self.executor, self.logs.close)
        self.snapshot_executor.shutdown(wait=True)
        self.executor.shutdown(wait=True)


async def _every(job: Callable[[], Any], interval_s: float) -> None:
    while True:
        await asyncio.sleep(interval_s)
        try:
            job()
        except Exception:  # never end a periodic job
            log.exception("%s failed", getattr(job, "__qualname__", job))


def _halt() -> None:
    """Kafka's ``Exit.halt(1)``: no shutdown hooks, only the log lines out."""
    logging.shutdown()
    os._exit(1)
