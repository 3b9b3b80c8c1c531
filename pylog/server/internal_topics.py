"""The internal topics as a node gives them to its coordinators.

``__consumer_offsets`` and ``__transaction_state``: the coordinators reach
them through :class:`~pylog.coordinator.internal_topic.InternalTopic`; this
is that protocol over the node's topics and replica manager.

* :class:`LocalInternalTopic`, the single node, the whole cluster: it creates
  a topic at once and leads every partition, so its coordinators own every
  partition, loaded at start (before anything is served) and from the moment
  one is created, whoever creates it (a coordinator on first use, a client's
  Metadata or CreateTopics, CreatePartitions).
* :class:`ClusterInternalTopic`, a cluster node: the topic is created through
  ZooKeeper and the controller (the first FindCoordinator finds it missing
  and answers COORDINATOR_NOT_AVAILABLE meanwhile, as Kafka), and a
  coordinator owns just the partitions LeaderAndIsr makes this node lead:
  loaded from the log when it starts leading one, dropped when it stops.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from concurrent.futures import Executor, Future
from typing import TYPE_CHECKING

from pylog.coordinator.internal_topic import NotCoordinatorError, NotEnoughReplicasError
from pylog.log.errors import LogClosedError
from pylog.server.partition import isr_too_small

if TYPE_CHECKING:
    from pylog.coordinator.internal_topic import PartitionCount, Replication
    from pylog.coordinator.ownership import PartitionedCoordinator
    from pylog.log import Log
    from pylog.log.dir_failure import LogDirFailureChannel
    from pylog.server.metadata_cache import MetadataCache
    from pylog.server.replica_manager import ReplicaManager
    from pylog.server.topic_admin import TopicAdmin
    from pylog.server.topics import TopicRegistry

log = logging.getLogger(__name__)


def leader_append(replicas: ReplicaManager, topic: str, partition: int, records: bytearray,
                  acks: int, timeout_ms: int) -> tuple[int, Replication]:
    """A coordinator's append (InternalTopic.append), as a produce's: the
    min.insync.replicas check before it with acks -1, the follower fetches
    parked on the partition woken after it, and with acks -1 the wait for
    the high watermark (ReplicaManager.replicated) -- none on a partition
    whose ISR is this node alone (the single node), whose high watermark
    follows its log end."""
    part = replicas.leader_partition(topic, partition)
    if isinstance(part, int) or part.log is None:
        raise NotCoordinatorError(f"{topic}-{partition} is not led by this node")
    lg = part.log
    if acks == -1 and len(part.isr) < lg.config.min_insync_replicas:
        raise NotEnoughReplicasError(isr_too_small(part))
    result = lg.append(records)
    replicas.notify_append(topic, partition)
    if acks != -1:
        return result.base_offset, None
    return result.base_offset, replicas.replication(part, result.last_offset + 1, timeout_ms)


class LocalInternalTopic:
    """An internal topic of the single node."""

    def __init__(self, name: str, topics: TopicRegistry, replicas: ReplicaManager,
                 executor: Executor | None = None) -> None:
        self.name = name
        self.topics = topics
        self.replicas = replicas
        # Where the partitions' logs are made after the topic is created (the
        # node's I/O threads); None: at once, on the caller's thread.
        self.executor = executor
        self.coordinator: PartitionedCoordinator | None = None

    # -- InternalTopic ---------------------------------------------------------------

    def partition_count(self) -> int | None:
        found = self.topics.get(self.name)
        return found.partitions if found is not None else None

    def ensure_created(self, partitions: int, configs: Mapping[str, str],
                       needed: int | None = None) -> None:
        """Create the topic now.  On the caller's thread (the event loop)
        only the ``needed`` partition's log is made: all 50 cost ~0.1 s of
        file creation, a stall every connection would feel, and a first one
        that cannot be made (out of descriptors) undoes the topic whole.  The
        others are made on :attr:`executor` (or by :meth:`leader_log` when
        one is needed sooner); a restart makes any still missing.  None:
        every log at once."""
        if self.topics.get(self.name) is not None:
            return
        log.info("creating %s with %d partitions", self.name, partitions)
        if needed is None:
            self.topics.create(self.name, partitions, dict(configs))
            return
        self.topics.create(self.name, partitions, dict(configs), only=(needed,))
        if self.executor is None:
            self._create_logs()
        else:
            self.executor.submit(self._create_logs).add_done_callback(self._log_failure)

    def leader_log(self, partition: int) -> Log | None:
        """The partition's log (made now if the executor has not yet), when
        this node leads it, which one node always does while it exists."""
        if self.topics.ensure_partition(self.name, partition) is None:
            return None  # no such partition (the topic was deleted)
        found = self.replicas.leader_log(self.name, partition)
        return None if isinstance(found, int) else found

    def append(self, partition: int, records: bytearray, acks: int,
               timeout_ms: int) -> tuple[int, Replication]:
        if self.topics.ensure_partition(self.name, partition) is None:  # made now if missing
            raise NotCoordinatorError(f"{self.name}-{partition} does not exist")
        return leader_append(self.replicas, self.name, partition, records, acks, timeout_ms)

    def storage_failed(self, message: str, exc: OSError) -> None:
        self.topics.logs.failures.fail(message, exc)

    # -- the logs made off the loop ------------------------------------------------------

    def _create_logs(self) -> None:
        count = self.partition_count() or 0
        for p in range(count):
            try:
                if self.topics.ensure_partition(self.name, p) is None:
                    return  # the topic was deleted meanwhile
            except LogClosedError:
                return  # the node is shutting down: the next start makes the rest

    def _log_failure(self, fut: Future) -> None:
        exc = fut.exception()
        if exc is not None:
            log.error("creating the partitions of %s failed", self.name, exc_info=exc)

    # -- leadership ----------------------------------------------------------------------

    def lead(self, coordinator: PartitionedCoordinator) -> None:
        """``coordinator`` keeps its state in this topic: it owns every
        partition there is now, loaded at once (the node's start), and every
        partition made later (:meth:`created`)."""
        self.coordinator = coordinator
        self.elect(range(self.partition_count() or 0))

    def elect(self, partitions: Iterable[int], *, created: bool = False) -> None:
        """The coordinator loads ``partitions`` now, at their leader epoch;
        ``created``: partitions just made, with nothing to read."""
        if self.coordinator is None:
            return
        for p in partitions:
            part = self.replicas.get(self.name, p)
            epoch = part.leader_epoch if part is not None else 0
            self.coordinator.load_partition(p, epoch, 0 if created else None)


def elect_on_creation(topics: TopicRegistry, internal: Iterable[LocalInternalTopic]) -> None:
    """Whoever creates an internal topic or adds to its partitions, its
    coordinator owns the new partitions from then on."""
    by_name = {t.name: t for t in internal}

    def created(name: str, partitions: range) -> None:
        found = by_name.get(name)
        if found is not None:
            found.elect(partitions, created=True)

    topics.on_created = created


def registry_partition_count(topics: TopicRegistry) -> PartitionCount:
    """A topic's partition count as the node's registry has it."""
    def count(name: str) -> int | None:
        found = topics.get(name)
        return found.partitions if found is not None else None

    return count


class ClusterInternalTopic:
    """An internal topic of a cluster node."""

    def __init__(self, name: str, metadata: MetadataCache, admin: TopicAdmin,
                 replicas: ReplicaManager, failures: LogDirFailureChannel) -> None:
        self.name = name
        self.metadata = metadata
        self.admin = admin
        self.replicas = replicas
        self.failures = failures
        self.coordinator: PartitionedCoordinator | None = None

    def partition_count(self) -> int | None:
        found = self.metadata.topic(self.name)
        return found.count if found is not None else None

    def ensure_created(self, partitions: int, configs: Mapping[str, str],
                       needed: int | None = None) -> None:
        """Ask for the topic (Kafka's AutoTopicCreationManager): written to
        ZooKeeper off the loop with the coordinator's partition count,
        replication factor and configs; it exists once the controller made it."""
        if self.partition_count() is None:
            self.admin.auto_create(self.name)

    def leader_log(self, partition: int) -> Log | None:
        found = self.replicas.leader_log(self.name, partition)
        return None if isinstance(found, int) else found

    def append(self, partition: int, records: bytearray, acks: int,
               timeout_ms: int) -> tuple[int, Replication]:
        return leader_append(self.replicas, self.name, partition, records, acks, timeout_ms)

    def storage_failed(self, message: str, exc: OSError) -> None:
        self.failures.fail(message, exc)

    def lead(self, coordinator: PartitionedCoordinator) -> None:
        """``coordinator`` keeps its state here; it owns nothing until this
        node is made a leader (:meth:`leadership`)."""
        self.coordinator = coordinator

    def leadership(self, partition: int, leads: bool, epoch: int | None) -> None:
        """LeaderAndIsr or StopReplica for one of the topic's partitions
        (Kafka's onLeadershipChange): the coordinator loads it from the log,
        or drops what it held of it."""
        if self.coordinator is None:
            return
        if leads:
            self.coordinator.on_elected(partition, epoch or 0)
        else:
            self.coordinator.on_resigned(partition, epoch)


def metadata_partition_count(metadata: MetadataCache) -> PartitionCount:
    """A topic's partition count as the node's metadata has it."""
    def count(name: str) -> int | None:
        found = metadata.topic(name)
        return found.count if found is not None else None

    return count
