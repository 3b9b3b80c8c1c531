"""Topic changes in a ZooKeeper-mode cluster, from any node (Kafka's AdminZkClient).

CreateTopics writes the topic znode (assignment and topic id) and its config
znode in one transaction; CreatePartitions rewrites the assignment by
compare-and-set; DeleteTopics creates ``/admin/delete_topics/<t>``; a topic
config change rewrites ``/config/topics/<t>`` and posts a change notice that
every node follows.  The controller carries the topic changes out; the
request is answered once this node's metadata shows them (or its
``timeout_ms`` passed: REQUEST_TIMED_OUT, the change goes on, as in Kafka).

ZooKeeper is called on the given executor, never on the event loop: while
ZooKeeper is away an admin request fails with a clear error (after
``zookeeper.connection.timeout.ms`` at most) and produce and fetch go on.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Callable
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any

from pylog.controller.assignment import AssignmentError, assign_replicas, check_assignment
from pylog.protocol import ErrorCode
from pylog.protocol.uuids import parse_uuid
from pylog.server.topic_admin import NewTopic, TopicAdmin
from pylog.server.topics import TopicError, validate_name
from pylog.zk.errors import TopicExistsError, ZkError

if TYPE_CHECKING:
    from pylog.server.metadata_cache import ClusterMetadataCache, TopicInfo
    from pylog.zk.client import KafkaZkClient

log = logging.getLogger(__name__)


class ZkTopicAdmin(TopicAdmin):
    def __init__(self, zk: KafkaZkClient, metadata: ClusterMetadataCache, executor: Executor,
                 topic_configs: dict[str, dict[str, str]], *, num_partitions: int,
                 default_replication_factor: int,
                 internal_topic: Callable[[str], tuple[int, int, dict[str, str]] | None]
                 ) -> None:
        self.zk = zk
        self.metadata = metadata
        self.executor = executor
        # Every topic's explicit configs, kept by the config change notices
        # (pylog.server.zk_node): what DescribeConfigs answers.
        self.configs = topic_configs
        self.num_partitions = num_partitions
        self.default_replication_factor = default_replication_factor
        # __consumer_offsets / __transaction_state: (partitions, replication
        # factor, configs) as their coordinators make them; None for others.
        self.internal_topic = internal_topic
        self._creating: set[str] = set()
        self.changed = asyncio.Event()  # set by the metadata cache's updates

    async def _zk(self, fn: Callable[..., Any], *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self.executor, functools.partial(fn, *args))
        except TopicExistsError:
            raise
        except ZkError as exc:
            raise TopicError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             f"ZooKeeper is not available: {exc}") from None

    def topic_configs(self, name: str) -> dict[str, str] | None:
        if self.metadata.topic(name) is None and name not in self.configs:
            return None
        return dict(self.configs.get(name, {}))

    async def read_topic_configs(self, name: str) -> dict[str, str] | None:
        """From ZooKeeper (Kafka's fetchEntityConfig), so a change made through
        another node shows at once; what this node last heard while
        ZooKeeper is away."""
        try:
            exists = await self._zk(self.zk.topic_exists, name)
            if not exists:
                return None
            found = await self._zk(self.zk.get_entity_config, "topics", name)
        except TopicError:
            return self.topic_configs(name)
        self.configs[name] = dict(found)
        return dict(found)

    def _live(self) -> dict[int, str | None]:
        return {b.node_id: b.rack for b in self.metadata.brokers()}

    def _assignment(self, topic: NewTopic) -> dict[int, list[int]]:
        live = self._live()
        try:
            if topic.assignment is not None:
                check_assignment(topic.assignment, set(live))
                return topic.assignment
            return assign_replicas(live, topic.partitions, topic.replication_factor)
        except AssignmentError as exc:
            raise TopicError(exc.code, str(exc)) from None

    def _check_name(self, name: str) -> None:
        validate_name(name)
        if self.metadata.topic(name) is not None:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if "." in name or "_" in name:  # Kafka: '.' and '_' collide in metric names
            key = name.replace(".", "_")
            for other in self.metadata.topic_names():
                if other.replace(".", "_") == key and other != name:
                    raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                     f"Topic '{name}' collides with existing topic: {other}")

    async def create_topic(self, topic: NewTopic, validate_only: bool) -> uuid.UUID | None:
        self._check_name(topic.name)
        if topic.partitions < 1:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             "Number of partitions must be larger than 0.")
        configs = self.validate_configs(topic.configs)
        assignment = self._assignment(topic)
        if validate_only:
            if await self._zk(self.zk.topic_exists, topic.name):
                raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS,
                                 f"Topic '{topic.name}' already exists.")
            return None
        try:
            created = await self._zk(self.zk.create_topic, topic.name, assignment, configs)
        except TopicExistsError as exc:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, str(exc)) from None
        self.configs[topic.name] = configs
        return parse_uuid(created.topic_id)

    def _ready(self, name: str) -> bool:
        info = self.metadata.topic(name)
        return info is not None and info.count > 0 and all(p.leader >= 0 for p in info.partitions)

    async def _wait(self, done: Callable[[], bool], timeout_ms: int) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000
        while not done():
            left = deadline - loop.time()
            if left <= 0:
                return False
            self.changed.clear()
            try:
                async with asyncio.timeout(left):
                    await self.changed.wait()
            except TimeoutError:
                return done()
        return True

    async def await_created(self, names: list[str], timeout_ms: int) -> dict[str, TopicError]:
        await self._wait(lambda: all(self._ready(n) for n in names), timeout_ms)
        return {n: TopicError(ErrorCode.REQUEST_TIMED_OUT,
                              f"Timed out waiting for the leaders of {n}'s partitions")
                for n in names if not self._ready(n)}

    async def delete_topic(self, name: str) -> uuid.UUID:
        info = self.metadata.topic(name)
        if info is None or not await self._zk(self.zk.topic_exists, name):
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             "This server does not host this topic-partition.")
        await self._zk(self.zk.request_topic_deletion, name)
        return info.topic_id

    async def await_deleted(self, names: list[str], timeout_ms: int) -> dict[str, TopicError]:
        await self._wait(lambda: all(self.metadata.topic(n) is None for n in names), timeout_ms)
        return {n: TopicError(ErrorCode.REQUEST_TIMED_OUT, f"Timed out deleting {n}")
                for n in names if self.metadata.topic(n) is not None}

    async def create_partitions(self, name: str, total: int,
                                assignment: list[list[int]] | None,
                                validate_only: bool) -> None:
        current = await self._zk(self.zk.get_topic_assignment, name)
        if current is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"The topic '{name}' does not exist.")
        first = len(current.partitions)
        rf = len(current.partitions.get(0, [])) or 1
        try:
            if assignment is not None:
                added = {first + i: list(r) for i, r in enumerate(assignment)}
                check_assignment(added, set(self._live()), first)
            else:
                added = assign_replicas(self._live(), total - first, rf, first_partition=first)
        except AssignmentError as exc:
            raise TopicError(exc.code, str(exc)) from None
        if validate_only:
            return
        current.partitions.update(added)
        cas = await self._zk(self.zk.set_topic_assignment, current)
        if not cas.succeeded:
            raise TopicError(ErrorCode.REASSIGNMENT_IN_PROGRESS,
                             f"The assignment of {name} changed meanwhile: try again")
        await self._wait(lambda: (self.metadata.topic(name) is not None
                                  and self.metadata.topic(name).count >= total), 30_000)

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        await self._zk(self.zk.set_entity_config, "topics", name, configs)
        self.configs[name] = dict(configs)

    def auto_create(self, name: str) -> TopicInfo | None:
        """Metadata's auto-creation: asks ZooKeeper for the topic (off the
        loop) and answers None now; the client's next Metadata finds it."""
        found = self.metadata.topic(name)
        if found is not None:
            return found
        validate_name(name)
        if name not in self._creating:
            self._creating.add(name)
            spec = self.internal_topic(name)
            if spec is not None:
                partitions, rf, configs = spec
            else:
                partitions, rf, configs = (self.num_partitions,
                                           self.default_replication_factor, {})
            task = asyncio.get_running_loop().create_task(
                self._auto_create(NewTopic(name, partitions, rf, None, configs)))
            task.add_done_callback(lambda _: self._creating.discard(name))
        return None

    async def _auto_create(self, topic: NewTopic) -> None:
        try:
            await self.create_topic(topic, validate_only=False)
        except TopicError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                log.warning("auto-creating %s failed: %s", topic.name, exc)
