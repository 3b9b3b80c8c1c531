"""Topic changes the admin requests ask for: create, grow, delete, reconfigure.

One face, two metadata stores (DESIGN.md section 1):

* :class:`LocalTopicAdmin`, the embedded single node: the topic registry in
  its log dir, changed at once, every replica here;
* :class:`ZkTopicAdmin` (:mod:`pylog.server.zk_topic_admin`), a cluster
  node: the change is written to ZooKeeper from any node (the topic znode,
  its config znode and a change notice, a deletion request), the controller
  carries it out, and the request is answered once this node's metadata
  shows it done (CreateTopics' and DeleteTopics' ``timeout_ms``).

The handlers keep Kafka's request-level checks (duplicates, counts, the
order of the answers); names, configs and existence are checked here.
Changes are coroutines: a cluster's go to ZooKeeper off the event loop.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pylog.protocol import ErrorCode
from pylog.server import topic_configs
from pylog.server.topics import TopicError

if TYPE_CHECKING:
    from pylog.log import LogConfig
    from pylog.server.metadata_cache import TopicInfo
    from pylog.server.topics import Topic, TopicRegistry


@dataclass
class NewTopic:
    name: str
    partitions: int
    replication_factor: int
    # partition -> replicas, as the client gave them (None: the node assigns)
    assignment: dict[int, list[int]] | None = None
    configs: dict[str, str] = field(default_factory=dict)


class TopicAdmin:
    """What both stores share: config checks, and the face handlers use."""

    def validate_configs(self, configs: Mapping[str, str | None]) -> dict[str, str]:
        """Normalised topic configs; TopicError INVALID_CONFIG naming the bad key."""
        try:
            return topic_configs.validate(configs)
        except topic_configs.ConfigValueError as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None

    def topic_configs(self, name: str) -> dict[str, str] | None:
        """A topic's explicit configs; None when there is no such topic."""
        raise NotImplementedError

    async def read_topic_configs(self, name: str) -> dict[str, str] | None:
        """:meth:`topic_configs` as the store has them now (DescribeConfigs)."""
        return self.topic_configs(name)

    async def create_topic(self, topic: NewTopic, validate_only: bool) -> uuid.UUID | None:
        """Create (or, ``validate_only``, only check) a topic; its id (None
        when only checked).  TopicError with Kafka's code when refused."""
        raise NotImplementedError

    async def await_created(self, names: list[str], timeout_ms: int) -> dict[str, TopicError]:
        """Wait until the topics just created have a leader for every
        partition here; the ones that did not within ``timeout_ms``."""
        return {}

    async def delete_topic(self, name: str) -> uuid.UUID:
        """Delete a topic (UNKNOWN_TOPIC_OR_PARTITION if none); its id."""
        raise NotImplementedError

    async def await_deleted(self, names: list[str], timeout_ms: int) -> dict[str, TopicError]:
        return {}

    async def create_partitions(self, name: str, total: int,
                                assignment: list[list[int]] | None,
                                validate_only: bool) -> None:
        """Grow ``name`` to ``total`` partitions (the caller checked the count)."""
        raise NotImplementedError

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Make ``configs`` (validated) the topic's explicit configs."""
        raise NotImplementedError

    def auto_create(self, name: str) -> TopicInfo | None:
        """Metadata's auto-creation: the topic, or None while it is being made."""
        raise NotImplementedError


class LocalTopicAdmin(TopicAdmin):
    """The embedded single node: its topic registry, every replica on this node."""

    def __init__(self, registry: TopicRegistry, node_id: int,
                 auto_create: Callable[[str], TopicInfo | None],
                 delete_topic: Callable[[str], Topic]) -> None:
        self.registry = registry
        self.node_id = node_id
        self._auto_create = auto_create
        self._delete_topic = delete_topic

    def log_config(self, configs: dict[str, str]) -> LogConfig:
        return self.registry.log_config(configs)

    def topic_configs(self, name: str) -> dict[str, str] | None:
        found = self.registry.get(name)
        return dict(found.configs) if found is not None else None

    def _check_replicas(self, topic: NewTopic) -> None:
        if topic.assignment is not None:
            for replicas in topic.assignment.values():
                if list(replicas) != [self.node_id]:
                    raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"only node {self.node_id} exists")
        elif topic.replication_factor != 1:
            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Replication factor: {topic.replication_factor} larger than "
                             "available brokers: 1.")

    async def create_topic(self, topic: NewTopic, validate_only: bool) -> uuid.UUID | None:
        self._check_replicas(topic)
        self.registry.check_create(topic.name, topic.partitions, topic.configs)
        configs = self.validate_configs(topic.configs)
        if validate_only:
            return None
        return self.registry.create(topic.name, topic.partitions, configs).topic_id

    async def delete_topic(self, name: str) -> uuid.UUID:
        return self._delete_topic(name).topic_id

    async def create_partitions(self, name: str, total: int,
                                assignment: list[list[int]] | None,
                                validate_only: bool) -> None:
        for replicas in assignment or ():
            if list(replicas) != [self.node_id]:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"only node {self.node_id} exists")
        if not validate_only:
            self.registry.add_partitions(name, total)

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self.registry.set_configs(name, configs)

    def auto_create(self, name: str) -> TopicInfo | None:
        return self._auto_create(name)
