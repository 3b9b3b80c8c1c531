"""Topics in ZooKeeper: assignments, partition states, deletion requests,
reassignments, preferred leader elections and ISR change notices (the topic
half of Kafka's KafkaZkClient).

The controller's reads of many topics or partitions at once leave out a
znode whose data does not decode, logging it (as a watch skips such data):
one znode written by hand must not stop the controller's work on every other
topic, nor a new controller's start.  A read of one topic raises
BadZnodeError instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from kazoo.protocol.states import ZnodeStat

from pylog.log.meta_properties import random_cluster_id
from pylog.zk.connection import Watch
from pylog.zk.errors import (
    BadVersionError,
    BadZnodeError,
    NodeExistsError,
    NoNodeError,
    TopicExistsError,
)
from pylog.zk.ops import Cas, Op, ZkOps, log
from pylog.zk.znodes import (
    ConfigEntityZNode,
    DeleteTopicsZNode,
    DeleteTopicZNode,
    IsrChangeNotificationZNode,
    LeaderIsrState,
    PreferredReplicaElectionZNode,
    ReassignPartitionsZNode,
    TopicAssignment,
    TopicPartition,
    TopicPartitionStateZNode,
    TopicPartitionsZNode,
    TopicPartitionZNode,
    TopicsZNode,
    TopicZNode,
)

Fence = int | None  # a controller epoch zkVersion (see pylog.zk.ops)


class TopicOps(ZkOps):
    # -- assignments --------------------------------------------------------------------

    def create_topic(self, topic: str, assignment: Mapping[int, Sequence[int]],
                     configs: Mapping[str, str] | None = None,
                     topic_id: str | None = None) -> TopicAssignment:
        """Write a new topic's assignment (with a new topic id unless given)
        and its config overrides, together in one transaction.
        TopicExistsError if the topic exists or is being deleted."""
        if self.path_exists(DeleteTopicZNode.path(topic)):
            raise TopicExistsError(f"Topic '{topic}' is marked for deletion.")
        created = TopicAssignment(topic, {p: list(r) for p, r in assignment.items()},
                                  topic_id or random_cluster_id(), zk_version=0)
        config_path = ConfigEntityZNode.path("topics", topic)
        config_data = ConfigEntityZNode.encode(configs or {})
        while True:
            # A config znode left by an earlier topic of that name is overwritten
            # (Kafka's setOrCreateEntityConfigs), at the version read.
            stat = self.exists(config_path)
            config_op = (Op("create", config_path, config_data) if stat is None
                         else Op("set", config_path, config_data, stat.version))
            try:
                self.write("create topic", [Op("create", TopicZNode.path(topic),
                                               TopicZNode.encode(created)), config_op])
                return created
            except NodeExistsError as exc:
                if exc.path == TopicZNode.path(topic):
                    raise TopicExistsError(f"Topic '{topic}' already exists.") from None
            except NoNodeError as exc:
                if exc.path != config_path:
                    raise
            except BadVersionError:  # only the config op names a version
                pass
            # The config znode came or went meanwhile: read it again.

    def topic_exists(self, topic: str) -> bool:
        return self.path_exists(TopicZNode.path(topic))

    def get_topic_assignment(self, topic: str) -> TopicAssignment | None:
        """The topic's assignment; None if it is missing, BadZnodeError if malformed."""
        return self._topic_assignments([topic], skip_malformed=False).get(topic)

    def get_topic_assignments(self, topics: Iterable[str] | None = None
                              ) -> dict[str, TopicAssignment]:
        """The assignments of ``topics`` (default: all), missing and malformed
        ones left out (the latter logged)."""
        names = self.get_all_topics() if topics is None else set(topics)
        return self._topic_assignments(sorted(names), skip_malformed=True)

    def _topic_assignments(self, names: list[str], skip_malformed: bool
                           ) -> dict[str, TopicAssignment]:
        out = {}
        for topic, got in zip(names, self.get_data_many([TopicZNode.path(t) for t in names]),
                              strict=True):
            if got is None:
                continue
            try:
                out[topic] = TopicZNode.decode(topic, got[0])
            except BadZnodeError as exc:
                if not skip_malformed:
                    raise
                log.error("ignoring topic %s: %s", topic, exc)
                continue
            out[topic].zk_version = got[1].version
        return out

    def get_all_topics(self) -> set[str]:
        return set(self.get_children(TopicsZNode.path()))

    def watch_topics(self, callback: Callable[[set[str]], None]) -> Watch:
        """``callback(all topic names)`` now and whenever a topic comes or goes."""
        return self.watch_children(TopicsZNode.path(), lambda names: callback(set(names)))

    def watch_topic(self, topic: str, callback: Callable[[TopicAssignment | None], None]
                    ) -> Watch:
        """``callback(assignment)`` now and when it changes (partitions added,
        a reassignment); None while the topic is missing."""
        def decode(data: bytes | None, stat: ZnodeStat) -> TopicAssignment:
            a = TopicZNode.decode(topic, data)
            a.zk_version = stat.version
            return a

        return self.watch_data(TopicZNode.path(topic), decode, callback)

    def set_topic_assignment(self, assignment: TopicAssignment, expected_version: int | None = None,
                             controller_epoch_zk_version: Fence = None) -> Cas:
        """Compare-and-set the assignment at ``expected_version`` (default: the
        ``zk_version`` it was read at; -1 for any)."""
        version = assignment.zk_version if expected_version is None else expected_version
        cas = self.conditional_update(TopicZNode.path(assignment.topic),
                                      TopicZNode.encode(assignment), version,
                                      controller_epoch_zk_version)
        if cas.succeeded:
            assignment.zk_version = cas.version
        return cas

    def get_partitions(self, topic: str) -> list[int]:
        """The partitions that have a state znode's parent (may lag the assignment)."""
        return sorted(int(p) for p in self.get_children(TopicPartitionsZNode.path(topic))
                      if p.isdigit())

    # -- partition states ---------------------------------------------------------------

    def create_partition_state(self, topic: str, partition: int, state: LeaderIsrState,
                               controller_epoch_zk_version: Fence = None) -> int:
        """Create the state znode (and its parents); its version (0).
        NodeExistsError if it exists."""
        fence = controller_epoch_zk_version
        for path in (TopicPartitionsZNode.path(topic), TopicPartitionZNode.path(topic, partition)):
            try:
                self.create(path, None, controller_epoch_zk_version=fence)
            except NodeExistsError:
                pass
        self.create(TopicPartitionStateZNode.path(topic, partition),
                    TopicPartitionStateZNode.encode(state), controller_epoch_zk_version=fence)
        state.zk_version = 0
        return 0

    def get_partition_state(self, topic: str, partition: int) -> LeaderIsrState | None:
        """The partition's state; None if missing or malformed (logged): the
        controller reads it again after a failed compare-and-set."""
        return self.get_partition_states([(topic, partition)]).get((topic, partition))

    def get_partition_states(self, partitions: Iterable[TopicPartition]
                             ) -> dict[TopicPartition, LeaderIsrState]:
        """States (with their zk_version) of ``partitions``; missing and
        malformed ones left out (the latter logged)."""
        tps = list(partitions)
        got = self.get_data_many([TopicPartitionStateZNode.path(t, p) for t, p in tps])
        out = {}
        for (t, p), g in zip(tps, got, strict=True):
            if g is None:
                continue
            try:
                out[(t, p)] = TopicPartitionStateZNode.decode(t, p, g[0], g[1].version)
            except BadZnodeError as exc:
                log.error("ignoring the state of %s-%d: %s", t, p, exc)
        return out

    def update_partition_state(self, topic: str, partition: int, state: LeaderIsrState,
                               expected_version: int | None = None,
                               controller_epoch_zk_version: Fence = None) -> Cas:
        """Compare-and-set the state at ``expected_version`` (default: the
        state's zk_version).  On success the state's zk_version is the new one;
        a conflict (or a missing znode) is ``Cas(False, -2)``: read and retry."""
        version = state.zk_version if expected_version is None else expected_version
        cas = self.conditional_update(TopicPartitionStateZNode.path(topic, partition),
                                      TopicPartitionStateZNode.encode(state), version,
                                      controller_epoch_zk_version)
        if cas.succeeded:
            state.zk_version = cas.version
        return cas

    def update_partition_states(self, updates: Sequence[tuple[TopicPartition, LeaderIsrState]],
                                controller_epoch_zk_version: Fence = None) -> list[Cas]:
        """update_partition_state of several partitions (each at its state's
        zk_version), pipelined; on success a state's zk_version is the new one."""
        cases = self.conditional_update_many(
            [(TopicPartitionStateZNode.path(*tp), TopicPartitionStateZNode.encode(state),
              state.zk_version) for tp, state in updates], controller_epoch_zk_version)
        for (_, state), cas in zip(updates, cases, strict=True):
            if cas.succeeded:
                state.zk_version = cas.version
        return cases

    def delete_partition_state(self, topic: str, partition: int,
                               controller_epoch_zk_version: Fence = None) -> bool:
        return self.delete_recursive(TopicPartitionZNode.path(topic, partition),
                                     controller_epoch_zk_version)

    # -- topic deletion -----------------------------------------------------------------

    def request_topic_deletion(self, topic: str) -> bool:
        """Create /admin/delete_topics/<t>; False if it was already requested."""
        try:
            self.create_recursive(DeleteTopicZNode.path(topic))
            return True
        except NodeExistsError:
            return False

    def is_topic_marked_for_deletion(self, topic: str) -> bool:
        return self.path_exists(DeleteTopicZNode.path(topic))

    def get_topic_deletions(self) -> list[str]:
        return self.get_children(DeleteTopicsZNode.path())

    def watch_topic_deletions(self, callback: Callable[[list[str]], None]) -> Watch:
        return self.watch_children(DeleteTopicsZNode.path(), callback)

    def remove_topic_deletions(self, topics: Iterable[str],
                               controller_epoch_zk_version: Fence = None) -> None:
        for topic in topics:
            self.delete(DeleteTopicZNode.path(topic), controller_epoch_zk_version)

    def delete_topic_znodes(self, topic: str, controller_epoch_zk_version: Fence = None) -> None:
        """A deleted topic's znodes: its assignment and states, and its configs."""
        self.delete_recursive(TopicZNode.path(topic), controller_epoch_zk_version)
        self.delete(ConfigEntityZNode.path("topics", topic), controller_epoch_zk_version)

    # -- reassignments (the znode Kafka's tools wrote before KIP-455) --------------------

    def get_partition_reassignment(self) -> dict[TopicPartition, list[int]]:
        got = self.get_data(ReassignPartitionsZNode.path())
        return ReassignPartitionsZNode.decode(got[0]) if got else {}

    def create_partition_reassignment(self, reassignment: Mapping[TopicPartition, Sequence[int]]
                                      ) -> None:
        """NodeExistsError while one is in progress."""
        self.create_recursive(ReassignPartitionsZNode.path(),
                              ReassignPartitionsZNode.encode(reassignment))

    def set_partition_reassignment(self, reassignment: Mapping[TopicPartition, Sequence[int]],
                                   controller_epoch_zk_version: Fence = None) -> None:
        self.set_or_create(ReassignPartitionsZNode.path(),
                           ReassignPartitionsZNode.encode(reassignment),
                           controller_epoch_zk_version)

    def delete_partition_reassignment(self, controller_epoch_zk_version: Fence = None) -> bool:
        return self.delete(ReassignPartitionsZNode.path(), controller_epoch_zk_version)

    def reassignment_in_progress(self) -> bool:
        return self.path_exists(ReassignPartitionsZNode.path())

    def watch_partition_reassignment(
            self, callback: Callable[[dict[TopicPartition, list[int]] | None], None]) -> Watch:
        return self.watch_data(ReassignPartitionsZNode.path(),
                               lambda data, _: ReassignPartitionsZNode.decode(data), callback)

    # -- preferred replica election -----------------------------------------------------

    def create_preferred_replica_election(self, partitions: Iterable[TopicPartition]) -> None:
        """NodeExistsError while one is in progress."""
        self.create_recursive(PreferredReplicaElectionZNode.path(),
                              PreferredReplicaElectionZNode.encode(partitions))

    def get_preferred_replica_election(self) -> set[TopicPartition]:
        got = self.get_data(PreferredReplicaElectionZNode.path())
        return PreferredReplicaElectionZNode.decode(got[0]) if got else set()

    def delete_preferred_replica_election(self, controller_epoch_zk_version: Fence = None) -> bool:
        return self.delete(PreferredReplicaElectionZNode.path(), controller_epoch_zk_version)

    def watch_preferred_replica_election(
            self, callback: Callable[[set[TopicPartition] | None], None]) -> Watch:
        return self.watch_data(PreferredReplicaElectionZNode.path(),
                               lambda data, _: PreferredReplicaElectionZNode.decode(data),
                               callback)

    # -- ISR change notifications -------------------------------------------------------

    def propagate_isr_changes(self, partitions: Iterable[TopicPartition]) -> str:
        """A leader's notice that these partitions' ISR changed; the znode's name."""
        path = self.create(IsrChangeNotificationZNode.create_path(),
                           IsrChangeNotificationZNode.encode(partitions), sequence=True)
        return path.rsplit("/", 1)[1]

    def get_isr_change_notifications(self) -> list[str]:
        """The pending notices' names, oldest first."""
        return self.get_children(IsrChangeNotificationZNode.path())

    def get_partitions_from_isr_changes(self, names: Sequence[str]) -> list[TopicPartition]:
        """The partitions named by these notices (one gone meanwhile is skipped)."""
        root = IsrChangeNotificationZNode.path()
        out: list[TopicPartition] = []
        for name, got in zip(names, self.get_data_many([f"{root}/{n}" for n in names]),
                             strict=True):
            if got is not None:
                out.extend(IsrChangeNotificationZNode.decode(name, got[0]))
        return out

    def delete_isr_change_notifications(self, names: Iterable[str] | None = None,
                                        controller_epoch_zk_version: Fence = None) -> None:
        """Delete these notices (default: all)."""
        root = IsrChangeNotificationZNode.path()
        for name in self.get_isr_change_notifications() if names is None else names:
            self.delete(f"{root}/{name}", controller_epoch_zk_version)

    def watch_isr_change_notifications(self, callback: Callable[[list[str]], None]) -> Watch:
        """``callback(pending notice names)`` now and when notices come or go."""
        return self.watch_children(IsrChangeNotificationZNode.path(), callback)
