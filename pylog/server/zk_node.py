"""This node as a member of a ZooKeeper-mode cluster (Kafka's KafkaServer in ZK mode).

* **Joining**: the cluster id from ``/cluster/id`` (checked against the log
  dir's ``meta.properties``), the node id (configured, stored, or generated
  from ``/brokers/seqid``), then the ephemeral ``/brokers/ids/<id>`` with the
  node's endpoints and rack once its listener is bound.  Its creation zxid is
  the broker epoch that the controller's requests must carry.
* **The controller's requests**, applied here: LeaderAndIsr (logs made with
  the topic's configs, leadership and epochs set, coordinators told),
  UpdateMetadata (the metadata cache), StopReplica (partitions stopped or
  deleted).  Requests from an older controller epoch than one already seen,
  or for an older broker epoch, are refused as Kafka refuses them.
* **Config change notices** (``/config/changes``): topic configs reach the
  logs of every node.
* **ZooKeeper sessions**: a lost session is followed by a new one; the node
  registers again (a new broker epoch) and the controller election runs
  again.  While ZooKeeper is away the node goes on serving the partitions it
  leads.
* **Leaving**: controlled shutdown (ControlledShutdown to the controller, so
  leadership moves off this node first), then the session is closed and the
  registration goes with it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from pylog.controller.controller import Controller
from pylog.net.client import BrokerClient, BrokerUnavailable
from pylog.protocol import ApiKey, ErrorCode
from pylog.server.config import ConfigError
from pylog.server.metadata_cache import BrokerInfo as CachedBroker
from pylog.server.metadata_cache import ClusterMetadataCache, PartitionInfo
from pylog.server.topics import write_partition_metadata
from pylog.zk.client import KafkaZkClient, SessionEvent
from pylog.zk.errors import ZkError
from pylog.zk.znodes import BrokerInfo, EndPoint, LeaderIsrState

if TYPE_CHECKING:
    from pylog.log import LogConfig, LogManager
    from pylog.log.log import Log
    from pylog.server.config import BrokerConfig, Endpoint
    from pylog.server.partition import Partition
    from pylog.server.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

LEADER_DURING_DELETE = -2
# topic, partition, whether this node leads it now, the leader epoch (None: any)
LeadershipListener = Callable[[str, int, bool, "int | None"], None]


class ClusterMembershipError(Exception):
    """The node cannot join the cluster (wrong cluster id, id in use...)."""


def adopt_layers(config: BrokerConfig, default: Mapping[str, str],
                 mine: Mapping[str, str]) -> bool:
    """Put dynamic layers read from a cluster's ZooKeeper into ``config`` (at
    start, and when a change notice says they changed); values that do not
    pass are left out with an error in the log, as Kafka skips them.  True
    when taken."""
    try:
        config.adopt(config.with_dynamic(default, mine))
        return True
    except ConfigError as exc:
        log.error("ignoring the dynamic broker configs in ZooKeeper: %s", exc)
        return False


def load_dynamic_configs(zk: KafkaZkClient, config: BrokerConfig) -> None:
    """The dynamic broker configs of a cluster: ``/config/brokers/<default>``
    and this node's ``/config/brokers/<id>`` (at start, and again at each
    change notice for either)."""
    adopt_layers(config, zk.get_entity_config("brokers", "<default>"),
                 zk.get_entity_config("brokers", str(config.node_id)))


def connect(config: BrokerConfig) -> KafkaZkClient:
    """The node's ZooKeeper session (ZkConnectError after the connection timeout)."""
    session = config["zookeeper.session.timeout.ms"]
    return KafkaZkClient(config["zookeeper.connect"], session,
                         config["zookeeper.connection.timeout.ms"] or session,
                         config["zookeeper.max.in.flight.requests"]).start()


def join_ids(zk: KafkaZkClient, config: BrokerConfig,
             meta: dict[str, str] | None) -> tuple[str, int]:
    """(cluster id, node id) for this node: Kafka's getOrGenerateClusterId and
    getOrGenerateBrokerId, checked against the log dir's meta.properties."""
    stored_cluster = meta.get("cluster.id") if meta else None
    cluster_id = zk.create_or_get_cluster_id(stored_cluster)
    if stored_cluster is not None and stored_cluster != cluster_id:
        raise ClusterMembershipError(
            f"The Cluster ID {cluster_id} doesn't match stored clusterId Some({stored_cluster}) "
            f"in meta.properties. The broker is trying to join the wrong cluster. Configured "
            f"zookeeper.connect may be wrong.")
    configured = "node.id" in config.originals or "broker.id" in config.originals
    stored_id = meta.get("node.id", meta.get("broker.id")) if meta else None
    if configured:
        node_id = config.node_id
        if stored_id is not None and int(stored_id) != node_id:
            raise ClusterMembershipError(
                f"Configured broker.id {node_id} doesn't match stored broker.id "
                f"Some({stored_id}) in meta.properties. If you moved your data, make sure "
                f"your configured broker.id matches. If you intend to create a new broker, "
                f"you should remove all data in your data directories (log.dirs).")
    elif stored_id is not None:
        node_id = int(stored_id)
    elif config["broker.id.generation.enable"]:
        node_id = zk.generate_broker_id(config["reserved.broker.max.id"])
    else:
        raise ClusterMembershipError("broker.id is not set and broker.id.generation.enable "
                                     "is false")
    return cluster_id, node_id


class ZkNode:
    def __init__(self, config: BrokerConfig, zk: KafkaZkClient, node_id: int,
                 logs: LogManager, replicas: ReplicaManager, metadata: ClusterMetadataCache,
                 topic_configs: dict[str, dict[str, str]],
                 log_config: Callable[[dict[str, str]], LogConfig]) -> None:
        self.config = config
        self.zk = zk
        self.node_id = node_id
        self.logs = logs
        self.replicas = replicas
        self.metadata = metadata
        self.topic_configs = topic_configs
        self.log_config = log_config
        self.broker_epoch = -1
        self.controller_epoch = -1  # the newest controller epoch seen
        # The node's blocking ZooKeeper calls (registration, config reads).
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pylog-zk")
        listener = config["inter.broker.listener.name"]
        self.listener = listener[0] if listener else config.listeners[0].name
        self.controller = Controller(
            node_id, zk, listener=self.listener,
            delete_topic_enable=config["delete.topic.enable"],
            unclean_election=self._unclean_enabled,
            request_timeout_s=config["controller.socket.timeout.ms"] / 1000)
        self.on_leadership: LeadershipListener | None = None
        self.on_metadata: Callable[[], None] | None = None
        # Dynamic broker configs changed (a change notice): the node applies them.
        self.on_broker_configs: Callable[[BrokerConfig], None] | None = None
        self._endpoint: Endpoint | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watches: list[Any] = []
        self.stopping = False

    def _unclean_enabled(self, topic: str) -> bool:
        value = self.topic_configs.get(topic, {}).get("unclean.leader.election.enable")
        if value is not None:
            return value.strip().lower() == "true"
        return bool(self.config["unclean.leader.election.enable"])

    async def _zk(self, fn: Callable[..., Any], *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(fn, *args))

    # -- life cycle --------------------------------------------------------------------

    def _registration(self) -> BrokerInfo:
        ep = self._endpoint
        assert ep is not None
        protocols = self.config["listener.security.protocol.map"]
        return BrokerInfo(self.node_id, [EndPoint(ep.name, protocols.get(ep.name, "PLAINTEXT"),
                                                  ep.host, ep.port)],
                          rack=self.config["broker.rack"])

    async def start(self, endpoint: Endpoint) -> None:
        """Register (the listener is bound), then take part in the controller
        election and follow the config change notices."""
        self._loop = asyncio.get_running_loop()
        self._endpoint = endpoint
        self.broker_epoch = await self._zk(self.zk.register_broker, self._registration())
        log.info("node %d registered in ZooKeeper (broker epoch %d)", self.node_id,
                 self.broker_epoch)
        self.zk.add_state_listener(self._on_session_event)
        last = await self._zk(self._last_config_change)
        self._watches.append(await self._zk(self.zk.watch_config_changes,
                                            self._on_config_changes, last))
        await self.controller.start()

    def _last_config_change(self) -> int:
        changes = self.zk.get_config_changes()
        return changes[-1].sequence if changes else -1

    def _on_session_event(self, event: SessionEvent) -> None:
        # The ZooKeeper event thread: a new session needs a new registration.
        if event is SessionEvent.SESSION_ESTABLISHED and not self.stopping:
            try:
                self.broker_epoch = self.zk.register_broker(self._registration())
                log.warning("node %d registered again after a ZooKeeper session expiry "
                            "(broker epoch %d)", self.node_id, self.broker_epoch)
            except ZkError as exc:
                log.error("node %d could not register again: %s", self.node_id, exc)

    async def controlled_shutdown(self) -> None:
        """The first step of stopping: leadership moves off this node."""
        self.stopping = True
        # Nothing to move when this node leads no partition with another
        # replica (Kafka asks all the same; the answer would be empty).
        if self.config["controlled.shutdown.enable"] and any(
                p.is_leader and len(p.replicas) > 1 for p in self.replicas.partitions()):
            await self._controlled_shutdown()

    async def close(self) -> None:
        """The last step of stopping: out of the cluster (the session closes,
        the registration goes with it)."""
        self.stopping = True
        for w in self._watches:
            w.cancel()
        await self.controller.stop()
        self.zk.remove_state_listener(self._on_session_event)
        await self._zk(self.zk.close)
        self.executor.shutdown(wait=False)

    async def _controlled_shutdown(self) -> None:
        """Kafka's KafkaServer.controlledShutdown: ask the controller to move
        leadership off this node, retried controlled.shutdown.max.retries
        times; on failure the node stops anyway (unclean)."""
        retries = self.config["controlled.shutdown.max.retries"]
        backoff = self.config["controlled.shutdown.retry.backoff.ms"] / 1000
        client = BrokerClient(f"broker-{self.node_id}-shutdown",
                              request_timeout_s=self.config["controller.socket.timeout.ms"]
                              / 1000)
        try:
            for attempt in range(retries + 1):
                controller = self.metadata.broker(self.metadata.controller_id)
                if self.controller.active:
                    error, remaining = await self.controller.controlled_shutdown(
                        self.node_id, self.broker_epoch)
                elif controller is not None:
                    try:
                        conn = client.connection(controller.node_id, controller.host,
                                                 controller.port)
                        r = await conn.request(ApiKey.CONTROLLED_SHUTDOWN,
                                               {"broker_id": self.node_id,
                                                "broker_epoch": self.broker_epoch})
                        error, remaining = r.error_code, r.remaining_partitions
                    except BrokerUnavailable as exc:
                        error, remaining = ErrorCode.NETWORK_EXCEPTION, [exc]
                else:
                    error, remaining = ErrorCode.NOT_CONTROLLER, []
                if error == 0 and not remaining:
                    log.info("controlled shutdown of node %d succeeded", self.node_id)
                    return
                log.warning("controlled shutdown of node %d: %s, %d partition(s) left "
                            "(attempt %d of %d)", self.node_id, ErrorCode(error).name
                            if error else "NONE", len(remaining), attempt + 1, retries + 1)
                await asyncio.sleep(backoff)
            log.warning("proceeding to do an unclean shutdown as all the controlled shutdown "
                        "attempts failed")
        finally:
            client.close()

    # -- ISR changes (the leaders') ------------------------------------------------------

    async def write_isr(self, part: Partition, new_isr: list[int]) -> bool:
        """Kafka's ZooKeeper-mode ISR update by a leader: the partition's state
        znode by compare-and-set on the version this node last saw, then an
        ISR change notice for the controller to pass on.  False when the
        state moved on meanwhile (the controller's LeaderAndIsr will say how)
        or ZooKeeper cannot be reached (the change is tried again later)."""
        state = LeaderIsrState(part.leader_id, part.leader_epoch, list(new_isr),
                               part.controller_epoch, zk_version=part.partition_epoch)
        try:
            cas = await self._zk(self.zk.update_partition_state, part.topic, part.index,
                                 state, part.partition_epoch)
            if not cas.succeeded:
                log.info("ISR change of %s-%d not written: its state changed meanwhile",
                         part.topic, part.index)
                return False
            part.partition_epoch = cas.version
            await self._zk(self.zk.propagate_isr_changes, [(part.topic, part.index)])
            return True
        except ZkError as exc:
            log.warning("ISR change of %s-%d not written: %s", part.topic, part.index, exc)
            return False

    # -- config change notices ---------------------------------------------------------

    async def save_dynamic(self, default: Any, mine: Any) -> None:
        """AlterConfigs of the BROKER resource: the layer written to ZooKeeper
        (with a change notice every node follows, this one too)."""
        if default is not None:
            await self._zk(self.zk.set_entity_config, "brokers", "<default>", dict(default))
        if mine is not None:
            await self._zk(self.zk.set_entity_config, "brokers", str(self.node_id), dict(mine))

    def _on_config_changes(self, changes: list[Any]) -> None:
        # The ZooKeeper event thread.
        for change in changes:
            kind, _, name = change.entity_path.partition("/")
            if kind == "brokers" and name in ("<default>", str(self.node_id)):
                try:
                    default = self.zk.get_entity_config("brokers", "<default>")
                    mine = self.zk.get_entity_config("brokers", str(self.node_id))
                except ZkError as exc:
                    log.error("could not read the dynamic broker configs: %s", exc)
                    continue
                loop = self._loop
                if loop is not None and not loop.is_closed():
                    loop.call_soon_threadsafe(self._broker_configs_changed, default, mine)
            elif kind == "topics":
                try:
                    configs = self.zk.get_entity_config("topics", name)
                except ZkError as exc:
                    log.error("could not read the configs of topic %s: %s", name, exc)
                    continue
                loop = self._loop
                if loop is not None and not loop.is_closed():
                    loop.call_soon_threadsafe(self._topic_configs_changed, name, configs)

    def _broker_configs_changed(self, default: dict[str, str], mine: dict[str, str]) -> None:
        if adopt_layers(self.config, default, mine) and self.on_broker_configs is not None:
            self.on_broker_configs(self.config)
        if self.controller.active:  # unclean.leader.election.enable may have changed
            self.controller.topic_config_changed(None)

    def _topic_configs_changed(self, name: str, configs: dict[str, str]) -> None:
        self.topic_configs[name] = configs
        if self.controller.active:  # unclean.leader.election.enable may have changed
            self.controller.topic_config_changed(name)
        try:
            config = self.log_config(configs)
        except ValueError as exc:  # a hand-written znode: keep what runs
            log.error("ignoring the new configs of topic %s: %s", name, exc)
            return
        self.logs.update_topic_config(name, config)

    # -- the controller's requests -------------------------------------------------------

    def _check_epochs(self, controller_epoch: int, broker_epoch: int) -> int:
        if controller_epoch < self.controller_epoch:
            return int(ErrorCode.STALE_CONTROLLER_EPOCH)
        if broker_epoch not in (-1, self.broker_epoch) and broker_epoch < self.broker_epoch:
            return int(ErrorCode.STALE_BROKER_EPOCH)
        self.controller_epoch = controller_epoch
        return 0

    async def leader_and_isr(self, body: Any, version: int) -> dict[str, Any]:
        error = self._check_epochs(body.controller_epoch, body.broker_epoch)
        states = [(t.topic_name, t.topic_id, p) for t in body.topic_states
                  for p in t.partition_states]
        if error:
            return _leader_and_isr_response(version, error, states, {})
        # Configs of topics this node has no log of yet (read off the loop).
        missing = {name for name, _, p in states
                   if name not in self.topic_configs
                   and self.logs.get_log(name, p.partition_index) is None}
        for name in missing:
            try:
                self.topic_configs[name] = await self._zk(self.zk.get_entity_config, "topics",
                                                          name)
            except ZkError as exc:
                log.error("LeaderAndIsr: cannot read the configs of %s: %s", name, exc)
        errors: dict[tuple[str, int], int] = {}
        for name, topic_id, p in states:
            index = p.partition_index

            def make_log(name: str = name, index: int = index,
                         topic_id: uuid.UUID = topic_id) -> Log:
                lg = self.logs.get_or_create_log(
                    name, index, self.log_config(self.topic_configs.get(name, {})))
                if topic_id is not None and topic_id.int:
                    write_partition_metadata(lg.dir, topic_id)
                return lg

            try:
                code = self.replicas.apply_leader_and_isr(
                    name, index, p.leader, p.leader_epoch, list(p.isr), list(p.replicas),
                    p.partition_epoch, p.controller_epoch, make_log)
            except OSError as exc:
                log.error("LeaderAndIsr: cannot make %s-%d: %s", name, index, exc)
                code = int(ErrorCode.KAFKA_STORAGE_ERROR)
            errors[(name, index)] = code
            if code == 0 and self.on_leadership is not None:
                self.on_leadership(name, index, p.leader == self.node_id, p.leader_epoch)
        return _leader_and_isr_response(version, 0, states, errors)

    def update_metadata(self, body: Any) -> int:
        error = self._check_epochs(body.controller_epoch, body.broker_epoch)
        if error:
            return error
        brokers = []
        for b in body.live_brokers:
            listeners = {e.listener: (e.host, e.port) for e in b.endpoints}
            mine = listeners.get(self.metadata.listener_name)
            if mine is None and b.endpoints:
                mine = (b.endpoints[0].host, b.endpoints[0].port)
            if mine is not None:
                brokers.append(CachedBroker(b.id, mine[0], mine[1], b.rack, listeners))
        partitions: list[tuple[str, uuid.UUID | None, PartitionInfo | None]] = []
        live = {b.id for b in body.live_brokers}
        for t in body.topic_states:
            for p in t.partition_states:
                if p.leader == LEADER_DURING_DELETE:
                    partitions.append((t.topic_name, t.topic_id, None))
                    continue
                leader = p.leader if p.leader in live else -1
                partitions.append((t.topic_name, t.topic_id, PartitionInfo(
                    p.partition_index, leader, p.leader_epoch, tuple(p.replicas), tuple(p.isr),
                    tuple(p.offline_replicas), p.zk_version)))
        self.metadata.update(body.controller_id, body.controller_epoch, brokers, partitions)
        if self.on_metadata is not None:
            self.on_metadata()
        return 0

    def stop_replica(self, body: Any) -> dict[str, Any]:
        error = self._check_epochs(body.controller_epoch, body.broker_epoch)
        rows = []
        for t in body.topic_states:
            for p in t.partition_states:
                code = error
                if not error:
                    try:
                        self.replicas.stop_replica(t.topic_name, p.partition_index,
                                                   p.delete_partition)
                        if self.on_leadership is not None:  # (-2: being deleted)
                            self.on_leadership(t.topic_name, p.partition_index, False,
                                               p.leader_epoch if p.leader_epoch >= 0 else None)
                        if p.delete_partition:
                            self.topic_configs.pop(t.topic_name, None)
                    except OSError as exc:
                        log.error("StopReplica: cannot delete %s-%d: %s", t.topic_name,
                                  p.partition_index, exc)
                        code = int(ErrorCode.KAFKA_STORAGE_ERROR)
                rows.append({"topic_name": t.topic_name, "partition_index": p.partition_index,
                             "error_code": code})
        return {"error_code": error, "partition_errors": rows}


def _leader_and_isr_response(version: int, error: int, states: list[tuple[str, Any, Any]],
                             errors: dict[tuple[str, int], int]) -> dict[str, Any]:
    if version >= 5:
        topics: dict[str, dict[str, Any]] = {}
        for name, topic_id, p in states:
            row = topics.setdefault(name, {"topic_id": topic_id, "partition_errors": []})
            row["partition_errors"].append({"partition_index": p.partition_index,
                                            "error_code": error or errors.get(
                                                (name, p.partition_index), 0)})
        return {"error_code": error, "topics": list(topics.values())}
    return {"error_code": error, "partition_errors": [
        {"topic_name": name, "partition_index": p.partition_index,
         "error_code": error or errors.get((name, p.partition_index), 0)}
        for name, _, p in states]}
