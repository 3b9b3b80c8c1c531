"""What this node knows of the cluster: brokers, the controller, topics and their partitions.

Metadata, DescribeCluster, FindCoordinator and the admin requests answer
from here.  Two sources, one face (:class:`MetadataCache`):

* :class:`LocalMetadataCache`, the embedded single node: the node is the
  whole cluster and its controller, and the topic registry in its log dir
  says which topics exist; every partition is led here, at its log's epoch.
* :class:`ClusterMetadataCache`, a node of a ZooKeeper-mode cluster: fed by
  the controller's UpdateMetadata requests (Kafka's ZkMetadataCache), which
  carry every live broker's endpoints and rack and every partition's leader,
  leader epoch, replicas, ISR and offline replicas, and the topic ids.

Readers take immutable snapshots (:class:`TopicInfo`, :class:`PartitionInfo`,
:class:`BrokerInfo`): an update replaces them, never changes one in place.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pylog.server.config import Endpoint
    from pylog.server.topics import TopicRegistry

NO_LEADER = -1


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None
    # Every listener of the broker: name -> (host, port).
    listeners: dict[str, tuple[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class PartitionInfo:
    index: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...] = ()
    zk_version: int = 0


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: tuple[PartitionInfo, ...]

    @property
    def count(self) -> int:
        return len(self.partitions)


class MetadataCache:
    """The face both sources share."""

    cluster_id: str

    @property
    def controller_id(self) -> int:
        raise NotImplementedError

    def brokers(self) -> list[BrokerInfo]:
        """The live brokers, by id."""
        raise NotImplementedError

    def broker(self, node_id: int) -> BrokerInfo | None:
        for b in self.brokers():
            if b.node_id == node_id:
                return b
        return None

    def topic_names(self) -> list[str]:
        raise NotImplementedError

    def topic(self, name: str) -> TopicInfo | None:
        raise NotImplementedError

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        raise NotImplementedError

    def partition(self, name: str, index: int) -> PartitionInfo | None:
        found = self.topic(name)
        if found is None or not 0 <= index < len(found.partitions):
            return None
        return found.partitions[index]


class LocalMetadataCache(MetadataCache):
    """The embedded single node: itself, and the topics of its registry."""

    def __init__(self, topics: TopicRegistry, node_id: int, cluster_id: str,
                 endpoint: Callable[[], Endpoint], rack: str | None = None) -> None:
        self._topics = topics
        self.node_id = node_id
        self.cluster_id = cluster_id
        self._endpoint = endpoint
        self._rack = rack

    @property
    def controller_id(self) -> int:
        return self.node_id

    def brokers(self) -> list[BrokerInfo]:
        ep = self._endpoint()
        return [BrokerInfo(self.node_id, ep.host, ep.port, self._rack,
                           {ep.name: (ep.host, ep.port)})]

    def topic_names(self) -> list[str]:
        return list(self._topics.topics)

    def _info(self, topic: Any) -> TopicInfo:
        me = (self.node_id,)
        logs = self._topics.logs
        parts = []
        for p in range(topic.partitions):
            lg = logs.get_log(topic.name, p)
            parts.append(PartitionInfo(p, self.node_id, lg.leader_epoch if lg else 0, me, me))
        return TopicInfo(topic.name, topic.topic_id, tuple(parts))

    def topic(self, name: str) -> TopicInfo | None:
        found = self._topics.get(name)
        return self._info(found) if found is not None else None

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        found = self._topics.by_id.get(topic_id)
        return self._info(found) if found is not None else None


class ClusterMetadataCache(MetadataCache):
    """A cluster node's view, as the controller's UpdateMetadata requests give it."""

    def __init__(self, node_id: int, cluster_id: str, listener_name: str) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        # Clients are answered with the endpoints of this listener (the one
        # they came in on: one client listener per node here).
        self.listener_name = listener_name
        self._controller_id = NO_LEADER
        self.controller_epoch = 0
        self._brokers: dict[int, BrokerInfo] = {}
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        # Bumped by every update: waiters (CreateTopics) poll it cheaply.
        self.version = 0

    @property
    def controller_id(self) -> int:
        return self._controller_id

    def brokers(self) -> list[BrokerInfo]:
        return [self._brokers[i] for i in sorted(self._brokers)]

    def broker(self, node_id: int) -> BrokerInfo | None:
        return self._brokers.get(node_id)

    def topic_names(self) -> list[str]:
        return list(self._topics)

    def topic(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    # -- updates (UpdateMetadata) ------------------------------------------------

    def update(self, controller_id: int, controller_epoch: int, brokers: list[BrokerInfo],
               partitions: list[tuple[str, uuid.UUID | None, PartitionInfo | None]],
               deleted: set[str] | None = None) -> None:
        """Apply one UpdateMetadata: the live brokers replace the old set;
        each (topic, id, partition state) replaces that partition's state
        (a None state: the partition is being deleted, Kafka's
        LeaderDuringDelete); topics in ``deleted`` go."""
        self._controller_id = controller_id
        self.controller_epoch = controller_epoch
        self._brokers = {b.node_id: b for b in brokers}
        changed: dict[str, dict[int, PartitionInfo]] = {}
        ids: dict[str, uuid.UUID] = {}
        gone = set(deleted or ())
        for name, topic_id, state in partitions:
            if state is None:
                gone.add(name)
                continue
            if topic_id is not None and topic_id.int:
                ids[name] = topic_id
            changed.setdefault(name, {})[state.index] = state
        for name in gone:
            old = self._topics.pop(name, None)
            if old is not None:
                self._by_id.pop(old.topic_id, None)
        for name, states in changed.items():
            old = self._topics.get(name)
            merged = {p.index: p for p in old.partitions} if old is not None else {}
            merged.update(states)
            if not merged or sorted(merged) != list(range(len(merged))):
                # A partition missing in between: wait for the rest (the
                # controller sends a topic's partitions together).
                merged = {i: p for i, p in merged.items() if i < _first_gap(merged)}
            topic_id = ids.get(name) or (old.topic_id if old is not None else uuid.UUID(int=0))
            info = TopicInfo(name, topic_id, tuple(merged[i] for i in sorted(merged)))
            if old is not None and old.topic_id != info.topic_id:
                self._by_id.pop(old.topic_id, None)
            self._topics[name] = info
            if info.topic_id.int:
                self._by_id[info.topic_id] = info
        self.version += 1


def _first_gap(indexes: dict[int, Any]) -> int:
    i = 0
    while i in indexes:
        i += 1
    return i
