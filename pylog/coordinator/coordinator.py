"""The group coordinator: Kafka's classic GroupCoordinator on one asyncio loop.

A node coordinates the groups of the ``__consumer_offsets`` partitions it
leads: it loads a partition's groups and offsets when elected and drops them
when it resigns (:mod:`pylog.coordinator.ownership`); a request for a group of
another partition gets NOT_COORDINATOR, of one still loading
COORDINATOR_LOAD_IN_PROGRESS (Kafka's validateGroupStatus).  A single node
leads every partition.  The model is Kafka's: JoinGroup requests park
(futures) until the rebalance completes, i.e. every known member rejoined or
the rebalance timeout expired (the silent dynamic members are then dropped);
the first joiner leads and sends everyone's assignment in its SyncGroup, which
the coordinator hands out without reading it; a member that sends no SyncGroup
within the rebalance timeout is removed and the group rebalances again (Kafka's
pending sync, KAFKA-12890).  Sessions expire when a member sends nothing for
``session.timeout.ms``; a member parked in a JoinGroup or SyncGroup is kept
alive, as the request itself shows it is there.

Time: timers run on the loop's monotonic clock; timestamps written to the log
(commit times, state times) and offset expiry use ``time_ms`` (wall clock,
injectable for tests).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from pylog.coordinator import records as fmt
from pylog.coordinator.acked import after, then
from pylog.coordinator.group import Group, GroupState, Member
from pylog.coordinator.group_loader import LoadedGroups, read_groups
from pylog.coordinator.internal_topic import (
    REQUEST_TIMEOUT_MS,
    NotCoordinatorError,
    NotEnoughReplicasError,
)
from pylog.coordinator.offsets_store import (
    OFFSETS_TOPIC,
    OffsetsStore,
    Pending,
    supersede_pending,
)
from pylog.coordinator.ownership import Ownership, PartitionedCoordinator
from pylog.coordinator.records import OffsetAndMetadata
from pylog.log import RecordBatchTooLargeError
from pylog.protocol import ErrorCode
from pylog.protocol.errors import TopicError

if TYPE_CHECKING:
    from pylog.coordinator.internal_topic import InternalTopic, PartitionCount, Replication

log = logging.getLogger(__name__)

S = GroupState
E = ErrorCode
OFFSET_METADATA_MAX_BYTES = 4096  # Kafka's offset.metadata.max.bytes
# Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a new member's parked JoinGroup
# (it has no generation yet, so it cannot heartbeat) keeps it in the group this
# long at most; a client that went away without a LeaveGroup is then dropped
# instead of holding a long rebalance (say max.poll.interval.ms of hours) open.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
TopicPartition = tuple[str, int]
Commits = dict[TopicPartition, int]  # an offset commit's answer: each partition's error
T = TypeVar("T")
# What an append's error becomes in a coordinator's answer (Kafka's
# GroupMetadataManager: storeOffsets and storeGroup alike; a timeout differs).
_APPEND_ERRORS = {
    E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
    E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
}


@dataclass
class CoordinatorConfig:
    """The group settings of the broker config (Kafka's names and defaults)."""

    offsets_topic_num_partitions: int = 50
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600000
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    offsets_topic_segment_bytes: int = 104857600
    # The group's writes wait for the in-sync replicas (-1), at most this long.
    offsets_commit_required_acks: int = -1
    offsets_commit_timeout_ms: int = 5000

    @classmethod
    def from_broker(cls, cfg: Any) -> CoordinatorConfig:
        return cls(cfg["offsets.topic.num.partitions"], cfg["offsets.retention.minutes"],
                   cfg["offsets.retention.check.interval.ms"],
                   cfg["group.initial.rebalance.delay.ms"],
                   cfg["group.min.session.timeout.ms"], cfg["group.max.session.timeout.ms"],
                   cfg["offsets.topic.segment.bytes"], cfg["offsets.commit.required.acks"],
                   cfg["offsets.commit.timeout.ms"])


@dataclass
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    version: int


@dataclass
class JoinResult:
    error: int
    member_id: str
    generation: int = -1
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str = ""
    members: list[dict[str, Any]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass
class SyncResult:
    error: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol: str | None = None


@dataclass
class OffsetCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    commit_timestamp: int = -1  # OffsetCommit v1 only


def _applied(group: Group, write: asyncio.Future) -> None:
    if group.applying is write:  # the group's last write took effect: none left
        group.applying = None


def _java_length(text: str) -> int:
    """Java's String.length(): UTF-16 code units, what Kafka compares with
    offset.metadata.max.bytes despite the name."""
    return len(text.encode("utf-16-le")) // 2


class GroupCoordinator(PartitionedCoordinator[LoadedGroups]):
    def __init__(self, offsets_topic: InternalTopic, partition_count: PartitionCount,
                 config: CoordinatorConfig | None = None,
                 time_ms: Callable[[], int] | None = None) -> None:
        """``offsets_topic``: ``__consumer_offsets`` as the node gives it;
        ``partition_count``: the partition count of a topic (None: no such
        topic), which commits are checked against."""
        self.config = config or CoordinatorConfig()
        self.time_ms = time_ms or (lambda: time.time_ns() // 1_000_000)
        self.partition_count = partition_count
        self.store = OffsetsStore(offsets_topic, self.config.offsets_topic_num_partitions,
                                  self.time_ms,
                                  segment_bytes=self.config.offsets_topic_segment_bytes)
        self.ownership = Ownership(OFFSETS_TOPIC)
        self.groups: dict[str, Group] = {}  # of the partitions owned
        # Offsets committed in transactions not ended yet (TxnOffsetCommit):
        # (partition, producer id) -> the records, applied at the COMMIT marker.
        self.pending_txn: Pending = {}
        # Transaction markers written into a partition while it loads:
        # (producer id, commit), applied to what the load read (which stops
        # at the log end of its election, before them).
        self._markers_while_loading: dict[int, list[tuple[int, bool]]] = {}
        self._expiry_task: asyncio.Task | None = None
        self._running = False  # start() was called: loaded members get session timers

    # -- partitions: election and resignation --------------------------------------

    def _reader(self, partition: int,
                high_watermark: int | None) -> Callable[[], LoadedGroups]:
        events = self.store.reader(partition, high_watermark)
        return lambda: read_groups(partition, events())

    def _load_started(self, partition: int) -> None:
        self._markers_while_loading[partition] = []

    def _loaded(self, partition: int, found: LoadedGroups) -> None:
        """Kafka's onGroupLoaded, for every group of the partition."""
        for group_id, group in found.groups.items():
            self.groups[group_id] = group
            if self._running:
                for member in group.members.values():
                    self._heartbeat(group, member)
        self.pending_txn.update(found.pending)
        for producer_id, commit in self._markers_while_loading.pop(partition, []):
            self._txn_ended(partition, producer_id, commit)
        if found.groups:
            log.info("loaded %d groups from %s-%d", len(found.groups), OFFSETS_TOPIC, partition)

    def _unload(self, partition: int) -> int:
        self._markers_while_loading.pop(partition, None)
        for key in [k for k in self.pending_txn if k[0] == partition]:
            del self.pending_txn[key]
        doomed = [g for g in self.groups.values()
                  if self.store.partition_for(g.group_id) == partition]
        self._unload_groups(doomed, f"{OFFSETS_TOPIC}-{partition} was resigned")
        return len(doomed)

    def _unload_groups(self, groups: list[Group], reason: str) -> None:
        """Kafka's onGroupUnloaded: each group goes Dead, its parked JoinGroups
        and SyncGroups are answered NOT_COORDINATOR, its timers are cancelled
        (a late session expiry must not write a stale group), and it leaves
        the cache with its offsets.  Nothing is written."""
        now = self.time_ms()
        for group in groups:
            log.info("unloading group %s with generation %d: %s", group.group_id,
                     group.generation, reason)
            group.transition(S.DEAD, now)
            self._release(group, E.NOT_COORDINATOR)
            group.offsets.clear()
            if self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]

    def coordinator_error(self, group_id: str, create: bool = False) -> int:
        """NONE when this node coordinates ``group_id`` now, else
        NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS (Kafka's
        validateGroupStatus).  ``create``: ask for ``__consumer_offsets`` if
        it is missing, as the requests that may start a group do (a single
        node creates and leads it at once); COORDINATOR_NOT_AVAILABLE when it
        cannot be made."""
        if create:
            try:
                self.store.create_topic(group_id)
            except TopicError:  # could not be made (logged by the node)
                return E.COORDINATOR_NOT_AVAILABLE
        return self.ownership.error(self.store.partition_for(group_id))

    def find_partition(self, group_id: str) -> int | None:
        """FindCoordinator: the ``__consumer_offsets`` partition whose leader
        coordinates ``group_id``, the topic asked for when missing; None while
        it does not exist yet.  Raises ``TopicError`` when it cannot be made."""
        if not self.store.create_topic(group_id):
            return None
        return self.store.partition_for(group_id)

    # -- life cycle --------------------------------------------------------------

    def start(self) -> None:
        """On the loop: session timers for loaded members, the offset expiry task."""
        self._running = True
        for group in self.groups.values():
            for member in group.members.values():
                self._heartbeat(group, member)
        self._expiry_task = asyncio.get_running_loop().create_task(self._expire_forever())

    async def stop(self) -> None:
        self._running = False
        if self._expiry_task is not None:
            self._expiry_task.cancel()
            await asyncio.gather(self._expiry_task, return_exceptions=True)
        for group in self.groups.values():
            self._release(group, E.COORDINATOR_NOT_AVAILABLE)

    def _release(self, group: Group, error: int) -> None:
        """Cancel every timer of ``group`` and answer its parked JoinGroups and
        SyncGroups with ``error``."""
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
            group.rebalance_timer = None
        self._clear_pending_sync(group)
        for handle in group.pending_members.values():
            if handle is not None:
                handle.cancel()
        for member in group.members.values():
            if member.timer is not None:
                member.timer.cancel()
                member.timer = None
            self._finish_join(member, JoinResult(error, member.member_id))
            self._finish_sync(member, SyncResult(error))

    def unload_all(self) -> int:
        """``__consumer_offsets`` was deleted: every partition resigns, as
        Kafka's GroupCoordinator.onResignation does for each partition of the
        topic (KafkaApis.handleStopReplicaRequest with deletePartition, or
        BrokerMetadataPublisher for a deleted offsets topic).  Every group is
        unloaded (:meth:`_unload_groups`), whatever the partition count the
        deleted topic had.  Members then find their coordinator again, which
        re-creates the topic, and join afresh.  Returns how many groups were
        unloaded."""
        for partition in self.ownership.partitions():
            self.ownership.resign(partition)
        self._markers_while_loading.clear()
        self.pending_txn.clear()  # their records went with the topic
        groups = list(self.groups.values())
        self._unload_groups(groups, f"{OFFSETS_TOPIC} was deleted")
        self.groups.clear()
        return len(groups)

    async def _expire_forever(self) -> None:
        interval = self.config.offsets_retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.expire_offsets()
            except Exception:
                log.exception("offset expiration failed")

    # -- helpers -----------------------------------------------------------------

    @property
    def _loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    def _store(self, group: Group, entries: list[fmt.Entry],
               producer: tuple[int, int] | None = None, *, acks: int | None = None,
               offsets: bool = True) -> int | asyncio.Future[int]:
        """Append to the group's offsets partition (Kafka's appendForGroup:
        offsets.commit.required.acks, -1 unless set, so the in-sync replicas
        have it before it counts; the cleanup's tombstones pass ``acks`` 0).
        NONE or the error to answer, now, or a future of it when the write
        waits for followers.  ``producer``: (id, epoch) of the transaction
        the records belong to.  ``offsets``: offset records (storeOffsets'
        errors), else the group's metadata (storeGroup's)."""
        if acks is None:
            acks = self.config.offsets_commit_required_acks
        if acks not in (-1, 0, 1):  # as ReplicaManager.appendRecords
            return E.INVALID_REQUIRED_ACKS
        try:
            replication = self.store.append(group.group_id, entries, producer, acks=acks,
                                            timeout_ms=self.config.offsets_commit_timeout_ms)
        except RecordBatchTooLargeError:
            return E.INVALID_COMMIT_OFFSET_SIZE if offsets else E.UNKNOWN_SERVER_ERROR
        except NotEnoughReplicasError:
            return E.COORDINATOR_NOT_AVAILABLE
        except NotCoordinatorError:  # the partition's leadership moved meanwhile
            return E.NOT_COORDINATOR
        except OSError as exc:
            # The dir goes offline (pylog.log.dir_failure); Kafka's
            # GroupMetadataManager answers KAFKA_STORAGE_ERROR as NOT_COORDINATOR.
            self.store.storage_failed(
                f"Error while appending to {OFFSETS_TOPIC} for group {group.group_id}", exc)
            return E.NOT_COORDINATOR
        except Exception:
            log.exception("writing to %s failed for group %s", "__consumer_offsets",
                          group.group_id)
            return E.COORDINATOR_NOT_AVAILABLE
        if replication is None:
            return E.NONE
        if offsets:
            return then(replication, lambda code: _APPEND_ERRORS.get(code, code))
        return then(replication, lambda code: E.REBALANCE_IN_PROGRESS
                    if code == E.REQUEST_TIMED_OUT else _APPEND_ERRORS.get(code, code))

    def _write(self, group: Group, entries: list[fmt.Entry], step: Callable[[int], T],
               producer: tuple[int, int] | None = None, *, offsets: bool = True
               ) -> T | asyncio.Future[T]:
        """:meth:`_store`, then ``step(error)``, which changes what the write
        changes (Kafka's putCacheCallback): at once when the write has nobody
        to wait for, else once it has, and after the group's writes appended
        before it took effect.  ``step``'s result, or a future of it."""
        result = then(after(group.applying, self._store(group, entries, producer,
                                                        offsets=offsets)), step)
        if isinstance(result, asyncio.Future):
            group.applying = result
            result.add_done_callback(functools.partial(_applied, group))
        return result

    def _store_group(self, group: Group, step: Callable[[int], T],
                     assignments: dict[str, bytes] | None = None) -> T | asyncio.Future[T]:
        """The group's metadata as it is now (Kafka's storeGroup), then ``step``."""
        value = fmt.group_value(group.stored(assignments))
        return self._write(group, [(fmt.group_key(group.group_id), value)], step,
                           offsets=False)

    @staticmethod
    def _finish_join(member: Member, result: JoinResult) -> None:
        fut, member.join_future = member.join_future, None
        if fut is not None and not fut.done():
            fut.set_result(result)

    @staticmethod
    def _finish_sync(member: Member, result: SyncResult) -> None:
        fut, member.sync_future = member.sync_future, None
        if fut is not None and not fut.done():
            fut.set_result(result)

    def _join_result(self, group: Group, member: Member) -> JoinResult:
        leader = group.is_leader(member.member_id)
        members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                    "metadata": m.metadata(group.protocol)}
                   for m in group.members.values()] if leader else []
        return JoinResult(E.NONE, member.member_id, group.generation, group.protocol_type,
                          group.protocol, group.leader_id or "", members)

    # -- sessions ----------------------------------------------------------------

    def _heartbeat(self, group: Group, member: Member) -> None:
        """Any request from a member proves it alive: push its session deadline.

        Not for a new member (no JoinGroup answered yet): as in Kafka, it has
        NEW_MEMBER_JOIN_TIMEOUT_MS from joining, whatever it sends meanwhile."""
        if member.is_new:
            return
        self._expire_after(group, member, member.session_timeout_ms)

    def _expire_after(self, group: Group, member: Member, timeout_ms: int) -> None:
        loop = self._loop
        member.deadline = loop.time() + timeout_ms / 1000
        if member.timer is not None and member.timer.when() > member.deadline:
            # Only a deadline brought forward (a new member's join timeout giving
            # way to its session timeout) needs the timer moved now.
            member.timer.cancel()
            member.timer = None
        if member.timer is None:
            # One timer per member, moved forward lazily when it fires: a heartbeat
            # is an assignment, not a cancel + reschedule on the loop's heap.
            member.timer = loop.call_at(member.deadline, self._check_session, group, member)

    def _check_session(self, group: Group, member: Member) -> None:
        member.timer = None
        if self.groups.get(group.group_id) is not group or group.members.get(
                member.member_id) is not member:
            return
        loop = self._loop
        now = loop.time()
        if (member.awaiting_join and not member.is_new) or member.awaiting_sync:
            member.deadline = max(member.deadline, now + member.session_timeout_ms / 1000)
        if now < member.deadline:
            member.timer = loop.call_at(member.deadline, self._check_session, group, member)
            return
        if member.is_new:
            log.info("new member %s of group %s was not answered within %d ms, removing it",
                     member.member_id, group.group_id, NEW_MEMBER_JOIN_TIMEOUT_MS)
        else:
            log.info("member %s in group %s has failed (session timeout %d ms), removing it",
                     member.member_id, group.group_id, member.session_timeout_ms)
        self._remove_member_and_update_group(group, member)

    def _expire_pending(self, group: Group, member_id: str) -> None:
        if group.pending_members.pop(member_id, False) is False:
            return
        if group.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # -- pending SyncGroups ------------------------------------------------------

    def _schedule_pending_sync(self, group: Group) -> None:
        """Kafka's DelayedSync (KAFKA-12890): every member just answered owes a
        SyncGroup within the rebalance timeout; one that never sends it would
        otherwise hold the group in CompletingRebalance forever.  As in Kafka
        the deadline outlives the leader's SyncGroup (Stable): a follower that
        never syncs consumes nothing, and is dropped too."""
        self._clear_pending_sync(group)
        group.pending_sync = set(group.members)
        timeout_ms = max(m.rebalance_timeout_ms for m in group.members.values())
        group.sync_timer = self._loop.call_later(
            timeout_ms / 1000, self._expire_pending_sync, group, group.generation)

    @staticmethod
    def _clear_pending_sync(group: Group) -> None:
        group.pending_sync.clear()
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def _synced(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self._clear_pending_sync(group)  # everyone synced: no deadline left

    def _expire_pending_sync(self, group: Group, generation: int) -> None:
        """Kafka's onExpirePendingSync: drop who never synced, rebalance the rest."""
        group.sync_timer = None
        if (self.groups.get(group.group_id) is not group or group.generation != generation
                or group.state not in (S.COMPLETING_REBALANCE, S.STABLE)
                or not group.pending_sync):
            return
        missing = sorted(group.pending_sync)
        for member_id in missing:
            member = group.members.get(member_id)
            if member is not None:
                self._drop_member(group, member, E.UNKNOWN_MEMBER_ID)
        log.info("members %s of group %s sent no SyncGroup within the rebalance timeout, "
                 "removing them", missing, group.group_id)
        self._prepare_rebalance(group, f"removing {missing} on pending sync request expiration")

    # -- rebalancing -------------------------------------------------------------

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(S.COMPLETING_REBALANCE):
            # Assignments of the aborted generation must not be handed out.
            for m in group.members.values():
                m.assignment = b""
                self._finish_sync(m, SyncResult(E.REBALANCE_IN_PROGRESS))
        self._clear_pending_sync(group)  # the next generation sets its own deadline
        was_empty = group.is_(S.EMPTY)
        group.transition(S.PREPARING_REBALANCE, self.time_ms())
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
        timeout_ms = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        log.info("preparing to rebalance group %s in state PreparingRebalance with old "
                 "generation %d (reason: %s)", group.group_id, group.generation, reason)
        if was_empty:
            # Kafka's InitialDelayedJoin: let the rest of a starting group arrive
            # before the first generation, instead of one rebalance per joiner.
            delay = self.config.group_initial_rebalance_delay_ms
            group.in_initial_delay = True
            group.new_member_added = False
            group.initial_delay_remaining_ms = max(timeout_ms - delay, 0)
            group.rebalance_timer = self._loop.call_later(
                delay / 1000, self._initial_delay_expired, group)
        else:
            group.in_initial_delay = False
            group.rebalance_timer = self._loop.call_later(
                timeout_ms / 1000, self._rebalance_expired, group)
            self._try_complete_join(group)

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _initial_delay_expired(self, group: Group) -> None:
        group.rebalance_timer = None
        if self.groups.get(group.group_id) is not group or not group.is_(
                S.PREPARING_REBALANCE):
            return
        delay = self.config.group_initial_rebalance_delay_ms
        if group.new_member_added and group.initial_delay_remaining_ms > 0:
            group.new_member_added = False
            wait = min(delay, group.initial_delay_remaining_ms)
            group.initial_delay_remaining_ms = max(group.initial_delay_remaining_ms - delay, 0)
            group.rebalance_timer = self._loop.call_later(
                wait / 1000, self._initial_delay_expired, group)
            return
        group.in_initial_delay = False
        self._complete_join(group)

    def _rebalance_expired(self, group: Group) -> None:
        group.rebalance_timer = None
        if self.groups.get(group.group_id) is group:
            self._complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if (group.is_(S.PREPARING_REBALANCE) and not group.in_initial_delay
                and group.all_members_joined()):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """Kafka's onCompleteJoin: drop who did not rejoin, start the next generation,
        answer every parked JoinGroup (the member list to the leader only)."""
        if not group.is_(S.PREPARING_REBALANCE):
            return
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
            group.rebalance_timer = None
        for m in group.not_yet_rejoined():
            # Static members keep their place: they may come back within their session.
            if m.group_instance_id is None:
                self._drop_member(group, m, E.UNKNOWN_MEMBER_ID)
        leader = group.members.get(group.leader_id or "")
        if group.members and (leader is None or not leader.awaiting_join):
            joined = next((m for m in group.members.values() if m.awaiting_join), None)
            if joined is None:
                # Nobody rejoined: wait again; session expiry removes the silent ones.
                timeout_ms = max(m.rebalance_timeout_ms for m in group.members.values())
                group.rebalance_timer = self._loop.call_later(
                    timeout_ms / 1000, self._rebalance_expired, group)
                return
            group.leader_id = joined.member_id
        group.init_next_generation(self.time_ms())
        if group.is_(S.EMPTY):
            def stored(error: int) -> None:
                if error:
                    # As Kafka: nobody is in the group, so the previous
                    # generation coming back after a failover is harmless.
                    log.warning("failed to write empty metadata for group %s: %s",
                                group.group_id, E(error).name)

            self._store_group(group, stored)
            return
        log.info("stabilized group %s generation %d with %d members (protocol %s)",
                 group.group_id, group.generation, len(group.members), group.protocol)
        for m in group.members.values():
            if m.awaiting_join:
                result = self._join_result(group, m)
                m.is_new = False
                self._finish_join(m, result)
            self._heartbeat(group, m)
        self._schedule_pending_sync(group)

    def _drop_member(self, group: Group, member: Member, error: int) -> None:
        # A parked JoinGroup learns it is out with no member id (Kafka's
        # removeMemberAndUpdateGroup), so the client joins afresh.
        self._finish_join(member, JoinResult(error, ""))
        self._finish_sync(member, SyncResult(error))
        if member.timer is not None:
            member.timer.cancel()
            member.timer = None
        group.remove(member.member_id)

    def _remove_member_and_update_group(self, group: Group, member: Member) -> None:
        self._drop_member(group, member, E.UNKNOWN_MEMBER_ID)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"removing member {member.member_id}")
        elif group.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # -- JoinGroup ---------------------------------------------------------------

    def join_group(self, req: JoinRequest) -> JoinResult | asyncio.Future:
        if not req.group_id:
            return JoinResult(E.INVALID_GROUP_ID, req.member_id)
        error = self.coordinator_error(req.group_id, create=True)
        if error:
            return JoinResult(error, req.member_id)
        cfg = self.config
        if not (cfg.group_min_session_timeout_ms <= req.session_timeout_ms
                <= cfg.group_max_session_timeout_ms):
            return JoinResult(E.INVALID_SESSION_TIMEOUT, req.member_id)
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_id:
                return JoinResult(E.UNKNOWN_MEMBER_ID, req.member_id)
            group = self.groups[req.group_id] = Group(req.group_id,
                                                      current_state_timestamp=self.time_ms())
        if group.is_(S.DEAD):
            # Deleted meanwhile: the client finds the coordinator again.
            return JoinResult(E.COORDINATOR_NOT_AVAILABLE, req.member_id)
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            return JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
        if not req.member_id:
            result = self._join_new_member(group, req)
        else:
            result = self._join_known_member(group, req)
        if group.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(group)
        return result

    def _new_member(self, member_id: str, req: JoinRequest) -> Member:
        return Member(member_id, req.group_instance_id, req.client_id, req.client_host,
                      req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                      [(n, bytes(m)) for n, m in req.protocols], join_version=req.version)

    def _join_new_member(self, group: Group, req: JoinRequest) -> JoinResult | asyncio.Future:
        member_id = f"{req.group_instance_id or req.client_id}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            return self._join_static_member(group, member_id, req)
        if req.version >= 4:
            # KIP-394: hand out the id first, so a client that times out and retries
            # rejoins as the same member instead of leaving a ghost behind.
            group.pending_members[member_id] = self._loop.call_later(
                req.session_timeout_ms / 1000, self._expire_pending, group, member_id)
            return JoinResult(E.MEMBER_ID_REQUIRED, member_id)
        return self._add_member_and_rebalance(group, member_id, req)

    def _join_static_member(self, group: Group, member_id: str,
                            req: JoinRequest) -> JoinResult | asyncio.Future:
        instance_id = req.group_instance_id
        assert instance_id is not None
        old_id = group.static_members.get(instance_id)
        if old_id is None:
            return self._add_member_and_rebalance(group, member_id, req)
        old = group.members[old_id]
        new = self._new_member(member_id, req)
        group.replace_static_member(instance_id, old_id, new)
        # The previous incarnation, if it is still around, is fenced.
        self._finish_join(old, JoinResult(E.FENCED_INSTANCE_ID, old_id))
        self._finish_sync(old, SyncResult(E.FENCED_INSTANCE_ID))
        if old.timer is not None:
            old.timer.cancel()
        if group.is_(S.STABLE):
            if group.protocol in set(new.protocol_names()) and \
                    group.select_protocol() == group.protocol:
                def stored(error: int) -> JoinResult:
                    if error:
                        if group.members.get(member_id) is new and not group.is_(S.DEAD):
                            group.replace_static_member(instance_id, member_id, old)
                            old.timer = None  # cancelled above: its session resumes
                            self._heartbeat(group, old)
                        return JoinResult(error, "")
                    if group.members.get(member_id) is not new:
                        # Gone while its metadata was written (fenced, unloaded).
                        return JoinResult(E.UNKNOWN_MEMBER_ID, member_id)
                    self._heartbeat(group, new)
                    new.is_new = False
                    leader = group.is_leader(member_id)
                    if leader and req.version >= 9:
                        result = self._join_result(group, new)
                        result.skip_assignment = True
                        return result
                    # Before v9 a restarted leader is told the old id leads, so it
                    # does not run an assignment that nobody would receive.
                    return JoinResult(E.NONE, member_id, group.generation,
                                      group.protocol_type, group.protocol,
                                      old_id if leader else group.leader_id or "")

                return self._store_group(group, stored)
            return self._update_member_and_rebalance(group, new, req, "static member "
                                                     "rejoined with new protocols")
        return self._update_member_and_rebalance(group, new, req,
                                                 f"static member {instance_id} rejoined")

    def _add_member_and_rebalance(self, group: Group, member_id: str,
                                  req: JoinRequest) -> asyncio.Future:
        member = self._new_member(member_id, req)
        # Kept here: the rebalance may complete synchronously below, answering
        # the future and clearing member.join_future (_finish_join).
        fut = member.join_future = self._loop.create_future()
        handle = group.pending_members.pop(member_id, None)
        if handle is not None:
            handle.cancel()
        group.add(member)
        if group.in_initial_delay and group.generation == 0:
            # Only a brand-new group's start may be held back by more joiners
            # (Kafka's addMemberAndRebalance); a reused one waits one delay.
            group.new_member_added = True
        self._expire_after(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id}")
        return fut

    def _update_member_and_rebalance(self, group: Group, member: Member, req: JoinRequest,
                                     reason: str) -> asyncio.Future:
        member.protocols = [(n, bytes(m)) for n, m in req.protocols]
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.join_version = req.version
        # A retried JoinGroup replaces the parked one: answer the old so it frees.
        self._finish_join(member, JoinResult(E.REBALANCE_IN_PROGRESS, member.member_id))
        fut = member.join_future = self._loop.create_future()
        self._heartbeat(group, member)
        self._maybe_prepare_rebalance(group, reason)  # may answer fut already
        return fut

    def _join_known_member(self, group: Group, req: JoinRequest) -> JoinResult | asyncio.Future:
        member_id = req.member_id
        if member_id in group.pending_members:
            return self._add_member_and_rebalance(group, member_id, req)
        error = group.member_error(member_id, req.group_instance_id)
        if error:
            return JoinResult(error, member_id)
        member = group.members[member_id]
        if group.state in (S.EMPTY, S.DEAD):
            return JoinResult(E.UNKNOWN_MEMBER_ID, member_id)
        self._heartbeat(group, member)
        if group.is_(S.PREPARING_REBALANCE):
            return self._update_member_and_rebalance(group, member, req, "member rejoined")
        if group.is_(S.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                return self._join_result(group, member)  # a retry: same answer again
            return self._update_member_and_rebalance(group, member, req,
                                                     "member changed its protocols")
        # Stable: a follower rejoining unchanged gets the current generation back;
        # the leader rejoining, or any change, means a new assignment is wanted.
        if group.is_leader(member_id) or not member.matches(req.protocols):
            return self._update_member_and_rebalance(group, member, req,
                                                     "leader or changed member rejoined")
        return self._join_result(group, member)

    # -- SyncGroup ---------------------------------------------------------------

    def sync_group(self, group_id: str, generation: int, member_id: str,
                   instance_id: str | None, protocol_type: str | None,
                   protocol_name: str | None,
                   assignments: dict[str, bytes]) -> SyncResult | asyncio.Future:
        if not group_id:
            return SyncResult(E.INVALID_GROUP_ID)
        error = self.coordinator_error(group_id)
        if error == E.COORDINATOR_LOAD_IN_PROGRESS:
            # As Kafka: the rebalance in progress is lost with the old
            # coordinator, so the member rejoins (older clients do not know
            # COORDINATOR_LOAD_IN_PROGRESS here).
            return SyncResult(E.REBALANCE_IN_PROGRESS)
        if error:
            return SyncResult(error)
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(E.UNKNOWN_MEMBER_ID)
        if group.is_(S.DEAD):
            return SyncResult(E.COORDINATOR_NOT_AVAILABLE)
        error = group.member_error(member_id, instance_id)
        if error:
            return SyncResult(error)
        member = group.members[member_id]
        if generation != group.generation:
            return SyncResult(E.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol):
            return SyncResult(E.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_(S.EMPTY):
            return SyncResult(E.UNKNOWN_MEMBER_ID)
        if group.is_(S.PREPARING_REBALANCE):
            return SyncResult(E.REBALANCE_IN_PROGRESS)
        self._heartbeat(group, member)
        self._synced(group, member_id)
        if group.is_(S.STABLE):
            return self._sync_result(group, member.assignment)
        # CompletingRebalance: park until the leader's assignment arrives.
        self._finish_sync(member, SyncResult(E.REBALANCE_IN_PROGRESS))
        member.sync_future = fut = self._loop.create_future()
        if group.is_leader(member_id):
            full = {mid: assignments.get(mid, b"") for mid in group.members}
            self._store_group(group, functools.partial(self._assigned, group, group.generation,
                                                       full), full)
        return fut

    def _assigned(self, group: Group, generation: int, full: dict[str, bytes],
                  error: int) -> None:
        """The leader's assignment was written (Kafka's storeGroup callback in
        doSyncGroup): every member gets its part, unless the group moved on
        meanwhile (another rebalance, unloaded); or, when it was not
        written, the error, and the group rebalances."""
        if not group.is_(S.COMPLETING_REBALANCE) or group.generation != generation:
            return
        if error:
            for m in group.members.values():
                m.assignment = b""
                self._finish_sync(m, SyncResult(error))
            self._prepare_rebalance(group, "storing the assignment failed")
            return
        for m in group.members.values():
            m.assignment = full.get(m.member_id, b"")
            self._finish_sync(m, self._sync_result(group, m.assignment))
        group.transition(S.STABLE, self.time_ms())

    @staticmethod
    def _sync_result(group: Group, assignment: bytes) -> SyncResult:
        return SyncResult(E.NONE, assignment, group.protocol_type, group.protocol)

    # -- Heartbeat, LeaveGroup ---------------------------------------------------

    def heartbeat(self, group_id: str, generation: int, member_id: str,
                  instance_id: str | None) -> int:
        if not group_id:
            return E.INVALID_GROUP_ID
        error = self.coordinator_error(group_id)
        if error == E.COORDINATOR_LOAD_IN_PROGRESS:
            return E.NONE  # as Kafka: the group is still loading, answer blindly
        if error:
            return error
        group = self.groups.get(group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.is_(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        error = group.member_error(member_id, instance_id)
        if error:
            return error
        member = group.members[member_id]
        if generation != group.generation:
            return E.ILLEGAL_GENERATION
        if group.is_(S.EMPTY):
            return E.UNKNOWN_MEMBER_ID
        self._heartbeat(group, member)
        if group.is_(S.PREPARING_REBALANCE):
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def leave_group(self, group_id: str,
                    members: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """(top-level error, one error per leaving (member id, instance id)); as in
        Kafka, no member errors at all when the top-level one is set."""
        if not group_id:
            return E.INVALID_GROUP_ID, []
        error = self.coordinator_error(group_id)
        if error:
            return error, []
        group = self.groups.get(group_id)
        if group is None:
            return E.NONE, [E.UNKNOWN_MEMBER_ID] * len(members)
        if group.is_(S.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE, []
        errors = []
        for member_id, instance_id in members:
            if not member_id:
                # Administrative removal of a static member by its instance id.
                member_id = group.static_members.get(instance_id, "") \
                    if instance_id is not None else ""
                if not member_id:
                    errors.append(E.UNKNOWN_MEMBER_ID)
                    continue
            elif member_id not in group.pending_members:
                error = group.member_error(member_id, instance_id)
                if error:
                    errors.append(error)
                    continue
            if member_id in group.pending_members:
                handle = group.pending_members.pop(member_id)
                if handle is not None:
                    handle.cancel()
                if group.is_(S.PREPARING_REBALANCE):
                    self._try_complete_join(group)
                errors.append(E.NONE)
                continue
            member = group.members[member_id]
            log.info("member %s has left group %s", member_id, group_id)
            self._remove_member_and_update_group(group, member)
            errors.append(E.NONE)
        return E.NONE, errors

    # -- offsets -----------------------------------------------------------------

    def _split_known(self, commits: list[OffsetCommit]
                     ) -> tuple[list[OffsetCommit], dict[TopicPartition, int]]:
        """The commits of existing partitions, and UNKNOWN_TOPIC_OR_PARTITION
        for the others."""
        unknown: dict[TopicPartition, int] = {}
        known: list[OffsetCommit] = []
        for c in commits:
            count = self.partition_count(c.topic)
            if count is None or not 0 <= c.partition < count:
                unknown[(c.topic, c.partition)] = E.UNKNOWN_TOPIC_OR_PARTITION
            else:
                known.append(c)
        return known, unknown

    def commit_offsets(self, group_id: str, generation: int, member_id: str,
                       instance_id: str | None, commits: list[OffsetCommit],
                       retention_ms: int = -1) -> Commits | asyncio.Future[Commits]:
        # As KafkaApis.handleOffsetCommitRequest: partitions that do not exist
        # are answered UNKNOWN_TOPIC_OR_PARTITION before the group is asked
        # anything (who asks, which generation), and a request naming only
        # such partitions never reaches the group (nor creates it).
        known, unknown = self._split_known(commits)
        if not known:
            return unknown
        return then(self._commit_known(group_id, generation, member_id, instance_id, known,
                                       retention_ms), lambda errors: errors | unknown)

    def _commit_known(self, group_id: str, generation: int, member_id: str,
                      instance_id: str | None, commits: list[OffsetCommit],
                      retention_ms: int) -> Commits | asyncio.Future[Commits]:
        def all_(code: int) -> dict[TopicPartition, int]:
            return {(c.topic, c.partition): code for c in commits}

        # No group id check: Kafka accepts "" here, for backwards compatibility.
        error = self.coordinator_error(group_id, create=True)
        if error:
            return all_(error)
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                return all_(E.ILLEGAL_GENERATION)
            # A group that only stores offsets here (no group management).
            group = self.groups[group_id] = Group(group_id,
                                                  current_state_timestamp=self.time_ms())
        if group.is_(S.DEAD):
            return all_(E.COORDINATOR_NOT_AVAILABLE)
        if not (generation < 0 and group.is_(S.EMPTY)):
            # Who is asking comes first (Kafka's validateOffsetCommit): only a
            # member of the current generation learns that it must wait.
            error = group.member_error(member_id, instance_id)
            if error:
                return all_(error)
            member = group.members[member_id]
            if generation != group.generation:
                return all_(E.ILLEGAL_GENERATION)
            if group.is_(S.COMPLETING_REBALANCE):
                return all_(E.REBALANCE_IN_PROGRESS)
            self._heartbeat(group, member)
        return self._do_commit(group, commits, retention_ms)

    def commit_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                           generation: int, member_id: str, instance_id: str | None,
                           commits: list[OffsetCommit]) -> Commits | asyncio.Future[Commits]:
        """TxnOffsetCommit (Kafka's handleTxnCommitOffsets): the offsets are
        written to the group's partition in the producer's transaction and
        count once its COMMIT marker is written there (:meth:`complete_txn`).
        The caller has checked the producer against its transaction."""
        known, unknown = self._split_known(commits)
        if not known:
            return unknown
        error = self.coordinator_error(group_id, create=True)
        if error:
            return unknown | {(c.topic, c.partition): error for c in known}
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id,
                                                  current_state_timestamp=self.time_ms())
        # Kafka's doTxnCommitOffsets: who asks is checked only when named.
        error = E.NONE
        if group.is_(S.DEAD):
            error = E.COORDINATOR_NOT_AVAILABLE
        elif instance_id is not None and group.member_error(member_id, instance_id) \
                == E.FENCED_INSTANCE_ID:
            error = E.FENCED_INSTANCE_ID
        elif member_id and not group.has(member_id):
            error = E.UNKNOWN_MEMBER_ID
        elif generation >= 0 and generation != group.generation:
            error = E.ILLEGAL_GENERATION
        if error:
            return unknown | {(c.topic, c.partition): error for c in known}
        return then(self._do_commit(group, known, -1, (producer_id, producer_epoch)),
                    lambda errors: errors | unknown)

    def complete_txn(self, partition: int, producer_id: int, producer_epoch: int,
                     commit: bool, coordinator_epoch: int = 0,
                     timeout_ms: int = REQUEST_TIMEOUT_MS) -> Replication:
        """Write a transaction marker into ``__consumer_offsets``-``partition``
        (acks=-1, as WriteTxnMarkers) and, once the in-sync replicas have it,
        apply (COMMIT) or drop (ABORT) the offsets the producer's transaction
        committed there (Kafka's onTransactionCompleted, in the append's
        callback).  What is left to wait for: None (applied now), or a future
        of the outcome.  Raises what the append raises."""
        replication = self.store.append_marker(partition, producer_id, producer_epoch, commit,
                                               coordinator_epoch, timeout_ms)
        if replication is None:
            self._marker_written(partition, producer_id, commit)
            return None

        def replicated(code: int) -> int:
            if code == E.NONE:
                self._marker_written(partition, producer_id, commit)
            return code  # else not applied: the transaction coordinator writes it again

        return then(replication, replicated)

    def _marker_written(self, partition: int, producer_id: int, commit: bool) -> None:
        state = self.ownership.error(partition)
        if state == E.COORDINATOR_LOAD_IN_PROGRESS:
            # Its offsets are in what the load reads: applied when it is done.
            self._markers_while_loading.setdefault(partition, []).append(
                (producer_id, commit))
        elif state == E.NONE:
            self._txn_ended(partition, producer_id, commit)
        # Else the partition's groups are not loaded here: nothing to apply.

    def _txn_ended(self, partition: int, producer_id: int, commit: bool) -> None:
        entries = self.pending_txn.pop((partition, producer_id), [])
        if not commit:
            return
        for key_bytes, value in entries:
            key = fmt.parse_key(key_bytes)
            if not isinstance(key, fmt.OffsetKey) or value is None:
                continue
            group = self.groups.get(key.group)
            if group is None:
                group = self.groups[key.group] = Group(key.group,
                                                       current_state_timestamp=self.time_ms())
            group.offsets[(key.topic, key.partition)] = fmt.parse_offset_value(value)

    def pending_txn_offsets(self, group_id: str) -> set[TopicPartition]:
        """The partitions whose offsets in ``group_id`` an open transaction
        has committed (OffsetFetch's require_stable)."""
        if not self.pending_txn:
            return set()
        partition = self.store.partition_for(group_id)
        found: set[TopicPartition] = set()
        for (p, _), entries in self.pending_txn.items():
            if p != partition:
                continue
            for key_bytes, _ in entries:
                key = fmt.parse_key(key_bytes)
                if isinstance(key, fmt.OffsetKey) and key.group == group_id:
                    found.add((key.topic, key.partition))
        return found

    def _do_commit(self, group: Group, commits: list[OffsetCommit], retention_ms: int,
                   producer: tuple[int, int] | None = None) -> Commits | asyncio.Future[Commits]:
        """Kafka's storeOffsets: the offsets count (the cache has them) and
        the commit is answered once the write is in the in-sync replicas."""
        now = self.time_ms()
        errors: dict[TopicPartition, int] = {}
        entries: list[fmt.Entry] = []
        values: dict[TopicPartition, OffsetAndMetadata] = {}
        for c in commits:
            tp = (c.topic, c.partition)
            metadata = c.metadata or ""
            count = self.partition_count(c.topic)
            if count is None or not 0 <= c.partition < count:
                errors[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
            elif _java_length(metadata) > OFFSET_METADATA_MAX_BYTES:
                errors[tp] = E.OFFSET_METADATA_TOO_LARGE
            else:
                ts = c.commit_timestamp if c.commit_timestamp >= 0 else now
                value = OffsetAndMetadata(c.offset, c.leader_epoch, metadata, ts,
                                          ts + retention_ms if retention_ms >= 0 else None)
                values[tp] = value
                entries.append((fmt.offset_key(group.group_id, *tp), fmt.offset_value(value)))
        if not entries:
            return errors

        def stored(error: int) -> dict[TopicPartition, int]:
            # A group unloaded (or deleted) meanwhile keeps nothing (Kafka:
            # unless the group is Dead).
            if error == E.NONE and not group.is_(S.DEAD):
                partition = self.store.partition_for(group.group_id)
                if producer is None:
                    group.offsets.update(values)
                    if self.pending_txn:  # newer than any open transaction's value
                        supersede_pending(self.pending_txn, partition,
                                          {k for k, _ in entries})
                else:  # counted at the transaction's COMMIT marker
                    self.pending_txn.setdefault((partition, producer[0]), []).extend(entries)
            for tp in values:
                errors[tp] = error
            return errors

        return self._write(group, entries, stored, producer)

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None
                      ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets of the partitions asked for (None: not committed);
        every committed one when ``partitions`` is None."""
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None and not group.is_(S.DEAD) else {}
        if partitions is None:
            return dict(offsets)
        return {tp: offsets.get(tp) for tp in partitions}

    def _tombstone(self, group: Group, entries: list[fmt.Entry]) -> int:
        """Tombstones, as Kafka's cleanupGroupMetadata writes them: acks 0,
        nothing waited for (one lost with its leader is written again by the
        next cleanup), so always answered now."""
        error = self._store(group, entries, acks=0)
        assert isinstance(error, int)
        return error

    def _tombstone_offsets(self, group: Group, tps: list[TopicPartition]) -> int:
        if not tps:
            return E.NONE
        error = self._tombstone(group, [(fmt.offset_key(group.group_id, *tp), None)
                                        for tp in tps])
        if error == E.NONE:
            for tp in tps:
                group.offsets.pop(tp, None)
        return error

    def _maybe_remove_group(self, group: Group) -> None:
        """An Empty group without offsets is gone: Dead, and its metadata tombstoned."""
        if group.is_(S.EMPTY) and not group.offsets and not group.pending_members:
            group.transition(S.DEAD, self.time_ms())
            self._tombstone(group, [(fmt.group_key(group.group_id), None)])
            if self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]

    def expire_offsets(self, now_ms: int | None = None) -> int:
        """Kafka's cleanupGroupMetadata: drop offsets past offsets.retention.minutes.

        An Empty group's offsets expire counting from when it became empty; a
        group that only stores offsets counts from each commit; a Stable
        consumer group's offsets of topics nobody subscribes to any more count
        from their commit.  Returns the number of offsets removed.
        """
        now = self.time_ms() if now_ms is None else now_ms
        retention = self.config.offsets_retention_minutes * 60_000
        removed = 0
        for group in list(self.groups.values()):
            subscribed: set[str] | None = None
            if group.is_(S.EMPTY):
                since_empty = group.current_state_timestamp if group.protocol_type else -1

                def base(o: OffsetAndMetadata, since: int = since_empty) -> int:
                    return since if since >= 0 else o.commit_timestamp
            elif group.is_(S.STABLE) and (subscribed := group.subscribed_topics()) is not None:
                def base(o: OffsetAndMetadata) -> int:
                    return o.commit_timestamp
            else:
                continue
            expired = [tp for tp, o in group.offsets.items()
                       if (subscribed is None or tp[0] not in subscribed)
                       and (now >= o.expire_timestamp if o.expire_timestamp is not None
                            else now - base(o) >= retention)]
            if expired and self._tombstone_offsets(group, expired) == E.NONE:
                removed += len(expired)
                log.info("removed %d expired offsets of group %s", len(expired),
                         group.group_id)
            self._maybe_remove_group(group)
        return removed

    def remove_topic_offsets(self, topic: str) -> int:
        """A deleted topic's committed offsets go with it (tombstoned), as do
        the empty groups that held nothing else.  Returns how many were removed.

        For ``__consumer_offsets`` itself every group is unloaded instead
        (:meth:`unload_all`): writing tombstones would re-create the topic
        just deleted."""
        if topic == OFFSETS_TOPIC:
            return self.unload_all()
        removed = 0
        for group in list(self.groups.values()):
            doomed = [tp for tp in group.offsets if tp[0] == topic]
            if doomed and self._tombstone_offsets(group, doomed) == E.NONE:
                removed += len(doomed)
                self._maybe_remove_group(group)
        return removed

    # -- group administration ----------------------------------------------------

    def list_groups(self) -> list[Group]:
        return [g for g in self.groups.values() if not g.is_(S.DEAD)]

    def describe_group(self, group_id: str) -> Group | None:
        group = self.groups.get(group_id)
        return None if group is None or group.is_(S.DEAD) else group

    def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for group_id in group_ids:
            group = self.groups.get(group_id)
            error = self.coordinator_error(group_id)
            if error:
                out[group_id] = error
            elif group is None or group.is_(S.DEAD):
                out[group_id] = E.GROUP_ID_NOT_FOUND
            elif not group.is_(S.EMPTY):
                out[group_id] = E.NON_EMPTY_GROUP
            else:
                entries: list[fmt.Entry] = [(fmt.offset_key(group_id, *tp), None)
                                            for tp in group.offsets]
                entries.append((fmt.group_key(group_id), None))
                error = self._tombstone(group, entries)
                if error == E.NONE:
                    group.transition(S.DEAD, self.time_ms())
                    group.offsets.clear()
                    del self.groups[group_id]
                out[group_id] = error
        return out

    def delete_offsets(self, group_id: str, tps: list[TopicPartition]
                       ) -> tuple[int, dict[TopicPartition, int]]:
        if not group_id:
            return E.INVALID_GROUP_ID, {}  # unlike OffsetCommit, Kafka refuses ""
        error = self.coordinator_error(group_id)
        if error:
            return error, {}
        group = self.groups.get(group_id)
        if group is None or group.is_(S.DEAD):
            return E.GROUP_ID_NOT_FOUND, {}
        if group.is_(S.EMPTY) or group.protocol_type is None:
            subscribed: set[str] = set()
        elif group.protocol_type == "consumer":
            subscribed = group.subscribed_topics() or set()
        else:
            return E.NON_EMPTY_GROUP, {}
        errors = {tp: E.GROUP_SUBSCRIBED_TO_TOPIC for tp in tps if tp[0] in subscribed}
        doomed = [tp for tp in tps if tp not in errors]
        error = self._tombstone_offsets(group, [tp for tp in doomed if tp in group.offsets])
        if error:
            return error, {}
        errors.update({tp: E.NONE for tp in doomed})
        self._maybe_remove_group(group)
        return E.NONE, errors
