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
import functools
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pylog.coordinator import CoordinatorConfig, GroupCoordinator
from pylog.coordinator.offsets_store import OFFSETS_TOPIC, OffsetsStore
from pylog.coordinator.transactions import TransactionCoordinator, TxnConfig
from pylog.coordinator.txn_log import TXN_TOPIC
from pylog.io.backend import get_backend
from pylog.log import LogManager, meta_properties
from pylog.net.listener import Listener
from pylog.net.request_queue import RequestQueue
from pylog.server import dynamic_configs, zk_node
from pylog.server.client_quotas import ClientQuotas
from pylog.server.config import BrokerConfig, Endpoint
from pylog.server.context import NodeServices
from pylog.server.fetch_sessions import FetchSessionCache
from pylog.server.internal_topics import (
    ClusterInternalTopic,
    LocalInternalTopic,
    elect_on_creation,
    metadata_partition_count,
    registry_partition_count,
)
from pylog.server.metadata_cache import (
    ClusterMetadataCache,
    LocalMetadataCache,
    MetadataCache,
    TopicInfo,
)
from pylog.server.metrics import BrokerMetrics
from pylog.server.producer_ids import BlockProducerIds, ProducerIds
from pylog.server.replica_fetcher import ReplicaFetchers
from pylog.server.replica_manager import ReplicaManager
from pylog.server.replication_quota import ReplicationThrottles
from pylog.server.requests import RequestRouter, served_versions
from pylog.server.topic_admin import LocalTopicAdmin, TopicAdmin
from pylog.server.topic_configs import log_config
from pylog.server.topics import Topic, TopicRegistry, load_topic_configs
from pylog.server.txn_markers import TxnMarkerChannel
from pylog.server.txn_verification import TxnVerifier
from pylog.server.zk_node import ZkNode
from pylog.server.zk_topic_admin import ZkTopicAdmin
from pylog.zk.client import KafkaZkClient

log = logging.getLogger(__name__)

DRAIN_TIMEOUT_S = 5.0


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.log_dir = config.log_dir
        if config["process.roles"]:
            # KRaft: the operator formats the dir first, as Kafka requires.
            meta_properties.require(self.log_dir)
        # A cluster (zookeeper.connect): its id and this node's from ZooKeeper,
        # and every topic's explicit configs (the logs open with them).
        self.zk: KafkaZkClient | None = None
        cluster_id = None
        if config["zookeeper.connect"]:
            self.zk = zk_node.connect(config)
            try:
                cluster_id, node_id = zk_node.join_ids(self.zk, config,
                                                       meta_properties.read(self.log_dir))
                config.set_node_id(node_id)
                self.node_id = node_id
                saved = self.zk.get_entity_configs("topics")
            except BaseException:
                self.zk.close()
                raise
        else:
            saved = load_topic_configs(self.log_dir)
        # The dynamic broker configs saved by AlterConfigs: the logs open with
        # the topic defaults they give (pylog.server.dynamic_configs).
        if self.zk is None:
            dynamic_configs.load(config)
        else:
            zk_node.load_dynamic_configs(self.zk, config)
        default = config.log_config
        topic_configs = {name: log_config(props, default)
                         for name, props in saved.items() if props}
        self.logs = LogManager(self.log_dir, default, node_id=self.node_id,
                               cluster_id=cluster_id,
                               backend=get_backend(config["io.backend"]),
                               topic_configs=topic_configs,
                               manager_config=config.manager_config,
                               cleaner_config=config.cleaner_config)
        self.logs.failures.on_offline = self._dir_offline
        self.cluster_id: str = self.logs.meta["cluster.id"]
        self.topics = TopicRegistry(self.logs, default)
        # Disk work that must not stall the loop: fsyncs, cold-cache reads.
        self.executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="pylog-io")
        self._loop: asyncio.AbstractEventLoop | None = None
        # The partitions and their producer state (after the log recovery).
        self.replicas = ReplicaManager(self.logs, self.node_id,
                                       lambda: self.config["producer.id.expiration.ms"],
                                       lead_local_logs=self.zk is None)
        self.endpoint: Endpoint = config.advertised()
        # What this node knows of the cluster, and how topics change: its own
        # registry alone, or ZooKeeper and the controller.
        self.cluster: ZkNode | None = None
        if self.zk is None:
            self.metadata: MetadataCache = LocalMetadataCache(
                self.topics, self.node_id, self.cluster_id, lambda: self.endpoint,
                config["broker.rack"])
            self.admin: TopicAdmin = LocalTopicAdmin(self.topics, self.node_id,
                                                     self.auto_create, self.delete_topic)
            # The coordinators own every partition of their internal topics,
            # all led here: those there are now, loaded below, and any made
            # later (pylog.server.internal_topics).
            offsets_topic: LocalInternalTopic | ClusterInternalTopic = LocalInternalTopic(
                OFFSETS_TOPIC, self.topics, self.replicas, self.executor)
            txn_topic: LocalInternalTopic | ClusterInternalTopic = LocalInternalTopic(
                TXN_TOPIC, self.topics, self.replicas, self.executor)
            elect_on_creation(self.topics, (offsets_topic, txn_topic))
            partition_count = registry_partition_count(self.topics)
        else:
            metadata = ClusterMetadataCache(self.node_id, self.cluster_id,
                                            config.listeners[0].name)
            self.cluster = ZkNode(config, self.zk, self.node_id, self.logs, self.replicas,
                                  metadata, saved, self.topics.log_config)
            admin = ZkTopicAdmin(self.zk, metadata, self.cluster.executor, saved,
                                 num_partitions=config["num.partitions"],
                                 default_replication_factor=config["default.replication.factor"],
                                 internal_topic=self._internal_topic)
            self.cluster.on_metadata = admin.changed.set
            self.cluster.on_broker_configs = self._reconfigure
            self.metadata, self.admin = metadata, admin
            # Replication: followers fetch, leaders write their ISR changes.
            self.replicas.fetchers = ReplicaFetchers(self.node_id, config, metadata,
                                                     self.logs.failures.fail)
            self.replicas.isr_writer = self.cluster.write_isr
            self.replicas.known = lambda t, p: metadata.partition(t, p) is not None
            self.replicas.throttles = self.replicas.fetchers.throttles = ReplicationThrottles(
                self.node_id, config, self.cluster.topic_configs)
            # The coordinators own the partitions of their internal topics this
            # node leads, as LeaderAndIsr says (pylog.server.internal_topics).
            offsets_topic = ClusterInternalTopic(OFFSETS_TOPIC, metadata, admin,
                                                 self.replicas, self.logs.failures)
            txn_topic = ClusterInternalTopic(TXN_TOPIC, metadata, admin, self.replicas,
                                             self.logs.failures)
            self.cluster.on_leadership = functools.partial(
                _coordinators_follow, {OFFSETS_TOPIC: offsets_topic, TXN_TOPIC: txn_topic})
            partition_count = metadata_partition_count(metadata)
        # Groups and committed offsets, rebuilt from __consumer_offsets.
        self.groups = GroupCoordinator(offsets_topic, partition_count,
                                       CoordinatorConfig.from_broker(config))
        self.groups.store.executor = self.executor
        self.replicas.offsets_marker = self.groups.complete_txn
        self.groups.store.on_txn_write = self.replicas.offsets_txn_written
        offsets_topic.lead(self.groups)
        for name in self.topics.finished_deletions:  # see delete_topic
            self.groups.remove_topic_offsets(name)
            self.topics.forget(name)
        # Producer ids: from a file of this node's, or from ZooKeeper's blocks
        # (unique across the cluster).
        self.producer_ids: ProducerIds | BlockProducerIds = ProducerIds(self.log_dir)
        if self.zk is not None:
            self.producer_ids = BlockProducerIds(
                functools.partial(_producer_id_block, self.zk, self.node_id))
            self.producer_ids.start()
        # Transactions: their state from __transaction_state, and those a
        # crash left half ended are ended as each partition loads (markers
        # need the producer state above).
        # Markers: written here when this node leads the partition (on one
        # node, always), else sent to its leader; retried until written.
        self.markers = TxnMarkerChannel(self.node_id, self.replicas, self.metadata,
                                        config["controller.socket.timeout.ms"] / 1000)
        self.txns = TransactionCoordinator(txn_topic, self.producer_ids, self.markers.write,
                                           TxnConfig.from_broker(config))
        self.txns.store.executor = self.executor
        txn_topic.lead(self.txns)
        # Transactions coordinated on another node: verified there before
        # their first batch lands in a partition led here.
        self.txn_verifier: TxnVerifier | None = None
        if self.zk is not None and config["transaction.partition.verification.enable"]:
            self.txn_verifier = TxnVerifier(self.node_id, self.metadata,
                                            self.txns.store.partition_for,
                                            config["controller.socket.timeout.ms"] / 1000)
        # Client quotas set by AlterClientQuotas (pylog.server.client_quotas).
        self.quotas = ClientQuotas(self.log_dir, config["quota.window.num"],
                                   config["quota.window.size.seconds"])
        self.fetch_sessions = FetchSessionCache(
            config["max.incremental.fetch.session.cache.slots"],
            lambda: int(time.monotonic() * 1000))
        # What the request handlers get (pylog.server.context), not this node.
        self.services = NodeServices(
            config=config, node_id=self.node_id, replicas=self.replicas, logs=self.logs,
            admin=self.admin, groups=self.groups, txns=self.txns,
            producer_ids=self.producer_ids, quotas=self.quotas,
            fetch_sessions=self.fetch_sessions, executor=self.executor,
            metadata=self.metadata, api_versions=served_versions(),
            reconfigure=self._reconfigure, save_dynamic=self._save_dynamic,
            fetch_max_bytes=config["fetch.max.bytes"],
            verify_txn_partitions=config["transaction.partition.verification.enable"],
            txn_verifier=self.txn_verifier, cluster=self.cluster)
        self.router = RequestRouter(self.services)
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
        # Prometheus page at metrics.listener; None when off, so each hook in the
        # request, produce and fetch paths costs one attribute test.
        self.metrics = self.services.metrics = BrokerMetrics.create(self.services, self.listener)
        self.stopping = False
        self._tasks: list[asyncio.Task] = []

    # -- state used by the handlers ----------------------------------------------

    def auto_create(self, name: str) -> TopicInfo | None:
        if name == OFFSETS_TOPIC or name == TXN_TOPIC:
            # As Kafka's AutoTopicCreationManager: the coordinator's partition
            # count and configs, not num.partitions.
            (self.groups.store if name == OFFSETS_TOPIC else self.txns.store).create_topic()
        else:
            self.topics.create(name, self.config["num.partitions"])
        return self.metadata.topic(name)

    def _internal_topic(self, name: str) -> tuple[int, int, dict[str, str]] | None:
        """(partitions, replication factor, configs) of an internal topic, as
        its coordinator makes it in a cluster; None for another topic."""
        if name == OFFSETS_TOPIC:
            store: OffsetsStore = self.groups.store
            rf = self.config["offsets.topic.replication.factor"]
            configs = dict(store.topic_configs)
        elif name == TXN_TOPIC:
            store = self.txns.store
            rf = self.config["transaction.state.log.replication.factor"]
            # Kafka's transactionTopicConfigs: the log's writes (acks=-1) need
            # this many in-sync replicas.  (The single node's replica is the
            # whole ISR: its topic keeps min.insync.replicas=1.)
            configs = dict(store.topic_configs, **{
                "min.insync.replicas": str(self.config["transaction.state.log.min.isr"])})
        else:
            return None
        return store.configured_partitions, rf, configs

    def delete_topic(self, name: str) -> Topic:
        topic = self.topics.delete(name)
        self.replicas.remove_topic(name, topic.partitions)
        try:
            self.groups.remove_topic_offsets(name)  # as Kafka's handleDeletedPartitions
        finally:
            # The marker goes last: a crash before this point removes the
            # offsets at the next start (a new topic of this name must not
            # find the old one's commits).
            self.topics.forget(name)
        return topic

    def _check_imbalance(self) -> None:
        cluster = self.cluster
        if (cluster is not None and cluster.controller.active
                and self.config["auto.leader.rebalance.enable"]):
            cluster.controller.check_imbalance(
                self.config["leader.imbalance.per.broker.percentage"])

    def _explicit_configs(self) -> dict[str, dict[str, str]]:
        """Every topic's explicit configs (the registry's, or ZooKeeper's)."""
        if self.cluster is not None:
            return self.cluster.topic_configs
        return {name: t.configs for name, t in self.topics.topics.items()}

    async def _save_dynamic(self, default: Any, mine: Any) -> None:
        if self.cluster is None:
            dynamic_configs.save(self.config, default, mine)
        else:
            await self.cluster.save_dynamic(default, mine)

    def _reconfigure(self, config: BrokerConfig) -> None:
        """Dynamic broker configs changed (pylog.server.dynamic_configs): the
        log defaults, the listener's connection quotas, the cleaner."""
        dynamic_configs.push_defaults(config, self.logs, self.topics, self._explicit_configs())
        self.listener.set_quotas(config["max.connections"], config["max.connections.per.ip"],
                                 config["max.connections.per.ip.overrides"])
        self.logs.cleaner.reconfigure(config.cleaner_config)  # nothing when unchanged

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
        # As Kafka's UnifiedLog.roll: a producer snapshot at every new segment.
        self.replicas.start()
        port = await self.listener.start()
        self.endpoint = self.config.advertised(port)
        if self.cluster is not None:  # registered once the listener is bound
            await self.cluster.start(self.endpoint)
            # Kafka's isr-expiration task: followers not caught up for
            # replica.lag.time.max.ms leave the ISR (checked twice as often).
            lag_ms = self.config["replica.lag.time.max.ms"]
            self._tasks.append(asyncio.get_running_loop().create_task(_every(
                lambda: self.replicas.shrink_isrs(self.config["replica.lag.time.max.ms"]),
                lag_ms / 2000)))
            # The controller's auto leader rebalance (preferred leaders back).
            self._tasks.append(asyncio.get_running_loop().create_task(_every(
                self._check_imbalance, self.config["leader.imbalance.check.interval.seconds"])))
        if self.metrics is not None:
            await self.metrics.start()
        self.groups.start()
        # Retention, flushes, checkpoints and cache dropping run on the log
        # manager's own thread (fsync and unlink block; the logs lock themselves).
        self.logs.start_scheduler()
        interval = self.config["log.flush.offset.checkpoint.interval.ms"]
        if interval > 0:
            self._tasks.append(asyncio.get_running_loop().create_task(
                self.replicas.snapshot_every(interval / 1000)))
        # Kafka's PeriodicProducerExpirationCheck and the transaction
        # coordinator's two periodic jobs (each first runs one interval in).
        txn = self.txns.config
        for job, every_ms in (
                (self.replicas.remove_expired_producers,
                 self.config["producer.id.expiration.check.interval.ms"]),
                (self.txns.abort_timed_out, txn.abort_interval_ms),
                (self.txns.remove_expired, txn.remove_interval_ms)):
            self._tasks.append(asyncio.get_running_loop().create_task(
                _every(job, every_ms / 1000)))

    async def stop(self) -> None:
        """Stop accepting, answer what was read, then close the logs cleanly.
        In a cluster, leadership moves off this node first (controlled
        shutdown, while it still serves), and it leaves ZooKeeper last."""
        if self.cluster is not None:
            await self.cluster.controlled_shutdown()
        self.stopping = self.replicas.stopping = True
        self.listener.stop_accepting()
        if self.metrics is not None:
            await self.metrics.stop()
        self.replicas.wake_all()  # parked fetches answer now
        if self.replicas.fetchers is not None:
            await self.replicas.fetchers.close()
        self.markers.close()
        if self.txn_verifier is not None:
            self.txn_verifier.close()
        await self.groups.stop()  # parked joins and syncs answer now
        await self.listener.drain(DRAIN_TIMEOUT_S)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        # Before the logs close: a clean start then needs no replay at all.
        await self.replicas.close()
        await asyncio.get_running_loop().run_in_executor(self.executor, self.logs.close)
        self.executor.shutdown(wait=True)
        if isinstance(self.producer_ids, BlockProducerIds):
            self.producer_ids.close()
        if self.cluster is not None:
            await self.cluster.close()


async def _every(job: Callable[[], Any], interval_s: float) -> None:
    while True:
        await asyncio.sleep(interval_s)
        try:
            job()
        except Exception:  # never end a periodic job
            log.exception("%s failed", getattr(job, "__qualname__", job))


def _producer_id_block(zk: KafkaZkClient, node_id: int) -> tuple[int, int]:
    block = zk.allocate_producer_id_block(node_id)
    return block.first, block.last


def _coordinators_follow(topics: dict[str, ClusterInternalTopic], topic: str, partition: int,
                         leads: bool, epoch: int | None) -> None:
    """A cluster node's LeaderAndIsr (or StopReplica) for an internal topic's
    partition: its coordinator loads or drops the partition's state."""
    found = topics.get(topic)
    if found is not None:
        found.leadership(partition, leads, epoch)


def _halt() -> None:
    """Kafka's ``Exit.halt(1)``: no shutdown hooks, only the log lines out."""
    logging.shutdown()
    os._exit(1)
