"""One topic-partition as this node sees it (Kafka's ``Partition``).

The one owner of a partition's state on this node: who leads it and at which
leader epoch, its replicas and in-sync replicas, the local replica's log (None
when this node holds no replica), the idempotent and transactional producers
seen in it, and the fetches parked on it.  The replica manager
(:mod:`pylog.server.replica_manager`) makes, changes and drops these objects;
the request handlers read them.

On a single node every partition is led here, at the log's leader epoch.  In
a cluster the controller's LeaderAndIsr decides (ReplicaManager.
apply_leader_and_isr); a request for a partition this node does not lead is
answered NOT_LEADER_OR_FOLLOWER.

The leader's side of replication (Kafka's Partition and Replica): each
follower's log end offset, known from the offsets it fetches at, and when it
was last caught up; the high watermark, the smallest log end offset in the
ISR, moves as they fetch; a follower caught up to the high watermark joins
the ISR, one not caught up for ``replica.lag.time.max.ms`` leaves it
(the replica manager writes those changes to ZooKeeper).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, ClassVar

from pylog.protocol import ErrorCode

if TYPE_CHECKING:
    from pylog.log.log import Log
    from pylog.server.producer_state import PartitionProducers

NO_LEADER = -1


def isr_too_small(part: Partition) -> str:
    """Why an acks=all write to ``part`` is refused (Kafka's NotEnoughReplicas
    message): fewer in-sync replicas than its min.insync.replicas."""
    config = part.log.config if part.log is not None else None
    min_isr = config.min_insync_replicas if config is not None else "?"
    return (f"The size of the current ISR {part.isr} is insufficient to satisfy the min.isr "
            f"requirement of {min_isr} for partition {part.topic}-{part.index}")


class FollowerState:
    """What the leader knows of one follower (Kafka's Replica)."""

    __slots__ = ("leo", "last_caught_up_ms", "last_fetch_leader_leo", "last_fetch_ms")

    def __init__(self, now_ms: int, in_sync: bool) -> None:
        self.leo = -1  # unknown until it fetches
        # A member of the ISR counts as caught up when this node starts
        # leading, as in Kafka: it has replica.lag.time.max.ms to fetch.
        self.last_caught_up_ms = now_ms if in_sync else 0
        self.last_fetch_leader_leo = -1
        self.last_fetch_ms = 0


class Partition:
    __slots__ = ("topic", "index", "local_id", "log", "leader_id", "leader_epoch",
                 "partition_epoch", "controller_epoch", "replicas", "isr", "producers",
                 "snapshot_at", "waiters", "followers", "isr_pending")

    # Bumped by every notify() of any partition of the process.  A fetch that
    # read, found too little and parks (a task that starts later) compares it
    # to see whether something came between its read and its park: that
    # wakeup would be lost, and the fetch would sit out its max wait (a
    # follower's: an acks=all produce behind it waits replica.fetch.wait.max.ms).
    changes: ClassVar[int] = 0

    def __init__(self, topic: str, index: int, local_id: int, log: Log | None) -> None:
        self.topic = topic
        self.index = index
        self.local_id = local_id  # this node's id
        self.log = log
        self.leader_id = local_id if log is not None else NO_LEADER
        self.leader_epoch = log.leader_epoch if log is not None else -1
        # The partition state's version (ZooKeeper's znode version): changes
        # to replicas or ISR bump it (Kafka's partitionEpoch).
        self.partition_epoch = 0
        self.controller_epoch = 0
        self.replicas: list[int] = [local_id]
        self.isr: list[int] = [local_id]
        # Producer state (None: no producer seen since the log was opened).
        self.producers: PartitionProducers | None = None
        # Log end offset of the last producer snapshot written (None: none).
        self.snapshot_at: int | None = None
        # Fetches parked until data arrives, and acks=all produces until the
        # high watermark passes them (futures, woken by notify()).
        self.waiters: set[asyncio.Future] = set()
        # Leader: the other replicas' fetch state; an ISR change on its way
        # to ZooKeeper (one at a time).
        self.followers: dict[int, FollowerState] = {}
        self.isr_pending = False

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.index}, leader={self.leader_id}, "
                f"epoch={self.leader_epoch}, isr={self.isr})")

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_id and self.log is not None

    def not_leader_error(self) -> int:
        """What a client asking this node for the partition's leader gets:
        NOT_LEADER_OR_FOLLOWER when another node leads (or may lead soon),
        LEADER_NOT_AVAILABLE while nobody does."""
        return int(ErrorCode.LEADER_NOT_AVAILABLE if self.leader_id == NO_LEADER
                   else ErrorCode.NOT_LEADER_OR_FOLLOWER)

    # -- the leader's side of replication ------------------------------------------

    def reset_followers(self, now_ms: int) -> None:
        """This node starts leading: every other replica's state afresh."""
        self.followers = {r: FollowerState(now_ms, r in self.isr)
                          for r in self.replicas if r != self.local_id}
        if self.log is not None:
            self.log.hw_follows_leo = self.isr == [self.local_id]

    def update_follower(self, replica: int, fetch_offset: int, leader_leo: int,
                        now_ms: int) -> None:
        """A follower fetched at ``fetch_offset`` (its log end offset) while
        this log ended at ``leader_leo`` (Kafka's Replica.updateFetchState)."""
        st = self.followers.get(replica)
        if st is None:
            st = self.followers[replica] = FollowerState(now_ms, False)
        if fetch_offset >= leader_leo:
            st.last_caught_up_ms = now_ms
        elif fetch_offset >= st.last_fetch_leader_leo:
            st.last_caught_up_ms = st.last_fetch_ms
        st.leo = fetch_offset
        st.last_fetch_leader_leo = leader_leo
        st.last_fetch_ms = now_ms

    def maybe_advance_high_watermark(self) -> bool:
        """The high watermark to the smallest log end offset in the ISR (never
        back); True when it moved."""
        lg = self.log
        if lg is None:
            return False
        hw = lg.log_end_offset
        for r in self.isr:
            if r != self.local_id:
                st = self.followers.get(r)
                hw = min(hw, st.leo if st is not None and st.leo >= 0 else 0)
        if hw > lg.high_watermark:
            lg.high_watermark = hw
            return True
        return False

    def out_of_sync(self, now_ms: int, lag_ms: int) -> list[int]:
        """ISR members not caught up for ``lag_ms`` (Kafka's getOutOfSyncReplicas)."""
        return [r for r in self.isr if r != self.local_id
                and now_ms - self.followers.get(r, FollowerState(0, False)).last_caught_up_ms
                > lag_ms]

    def may_join_isr(self, replica: int) -> bool:
        """A follower out of the ISR that caught up to the high watermark, and
        to where this leader's epoch starts (Kafka's isFollowerInSync)."""
        st = self.followers.get(replica)
        lg = self.log
        if replica in self.isr or st is None or lg is None or replica not in self.replicas:
            return False
        epoch_start = next((start for epoch, start in reversed(lg.epochs.entries)
                            if epoch == self.leader_epoch), 0)
        return st.leo >= lg.high_watermark and st.leo >= epoch_start

    def notify(self) -> None:
        """Wake the fetches parked here (new data, a new leader, or it went away)."""
        Partition.changes += 1
        for fut in self.waiters:
            if not fut.done():
                fut.set_result(None)
