"""One classic consumer group: members, generation and state (Kafka's GroupMetadata).

States and their allowed predecessors, as in Kafka:

    Empty               <- PreparingRebalance
    PreparingRebalance  <- Stable, CompletingRebalance, Empty
    CompletingRebalance <- PreparingRebalance
    Stable              <- CompletingRebalance
    Dead                <- Stable, PreparingRebalance, CompletingRebalance, Empty, Dead

The coordinator drives the transitions; this module holds the bookkeeping
(who is in, who has rejoined, which protocol wins) and knows nothing of time
or of the offsets topic.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from pylog.coordinator.consumer_protocol import subscription_topics
from pylog.coordinator.records import OffsetAndMetadata, StoredGroup, StoredMember
from pylog.protocol import ErrorCode


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


S = GroupState
_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
    S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.DEAD: frozenset({S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.EMPTY,
                       S.DEAD}),
}


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # in the member's order of preference
    assignment: bytes = b""
    # A parked JoinGroup / SyncGroup, answered when the rebalance gets there.
    join_future: asyncio.Future | None = None
    sync_future: asyncio.Future | None = None
    # Set by the JoinGroup/SyncGroup handlers: the version decides the response shape.
    join_version: int = 0
    is_new: bool = True  # joined but no JoinGroup answered yet (Kafka's isNew)
    deadline: float = 0.0  # loop time after which the session has expired
    timer: asyncio.TimerHandle | None = None

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in
                                                         self.protocols]

    def vote(self, candidates: set[str]) -> str:
        """The member's first preference among the protocols every member has."""
        return next(name for name, _ in self.protocols if name in candidates)


@dataclass(eq=False)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader_id: str | None = None
    current_state_timestamp: int = -1
    members: dict[str, Member] = field(default_factory=dict)  # in join order
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    # Member ids handed out with MEMBER_ID_REQUIRED and not joined yet -> expiry deadline.
    pending_members: dict[str, asyncio.TimerHandle | None] = field(default_factory=dict)
    # Members answered a JoinGroup of this generation that have not sent their
    # SyncGroup yet (Kafka's pendingSyncMembers), and the deadline they must meet.
    pending_sync: set[str] = field(default_factory=set)
    sync_timer: asyncio.TimerHandle | None = None
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    new_member_added: bool = False  # during the initial rebalance delay
    rebalance_timer: asyncio.TimerHandle | None = None
    initial_delay_remaining_ms: int = 0
    in_initial_delay: bool = False
    # The last of the group's writes still waiting for the in-sync replicas
    # (pylog.coordinator.acked): the next one takes effect after it, so the
    # cache changes in the order the log does.
    applying: asyncio.Future | None = None

    # -- state -----------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(f"group {self.group_id}: invalid transition from "
                               f"{self.state} to {state}")
        self.state = state
        self.current_state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in (S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY)

    # -- members ---------------------------------------------------------------

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id  # the first joiner leads

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and \
                self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_sync.discard(member_id)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new: Member) -> Member:
        """A static member restarted: the new member id takes the old one's place,
        assignment included, so the group need not rebalance."""
        old = self.members.pop(old_id)
        new.assignment = old.assignment
        new.is_new = False
        self.members[new.member_id] = new
        self.static_members[instance_id] = new.member_id
        if self.leader_id == old_id:
            self.leader_id = new.member_id
        if old_id in self.pending_sync:
            # The SyncGroup still owed is now the new incarnation's to send.
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new.member_id)
        return old

    def is_static_member_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """A known instance id now held by another member id: the caller is a zombie."""
        if instance_id is None:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    def member_error(self, member_id: str, instance_id: str | None) -> int:
        """Kafka's validateCurrentMember: NONE (0) when ``member_id`` is a member and
        ``instance_id``, if given, is the instance id that member holds;
        FENCED_INSTANCE_ID when the instance id is another member's; else
        UNKNOWN_MEMBER_ID (an instance id the group does not know included)."""
        if instance_id is not None:
            current = self.static_members.get(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        return ErrorCode.NONE if member_id in self.members else ErrorCode.UNKNOWN_MEMBER_ID

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def all_members_joined(self) -> bool:
        return (not self.pending_members
                and all(m.awaiting_join for m in self.members.values()))

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    # -- protocols -------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        names: set[str] | None = None
        for m in self.members.values():
            mine = set(m.protocol_names())
            names = mine if names is None else names & mine
        return names or set()

    def supports_protocols(self, protocol_type: str, protocols: list[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        return protocol_type == self.protocol_type and bool(
            self.candidate_protocols() & set(protocols))

    def select_protocol(self) -> str:
        """The common protocol with most first-preference votes (Kafka's
        selectProtocol); ties go to the leader's earlier preference."""
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        order = self.members[self.leader_id].protocol_names() if self.leader_id in \
            self.members else sorted(candidates)
        return next(name for name in order if votes.get(name) == best)

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer groups); None when unknown."""
        if self.protocol_type != "consumer" or not self.members:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            found = subscription_topics(m.metadata(self.protocol))
            if found is None:
                return None
            topics |= found
        return topics

    def init_next_generation(self, now_ms: int) -> None:
        self.generation += 1
        if self.members:
            self.protocol = self.select_protocol()
            self.transition(S.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol = None
            self.transition(S.EMPTY, now_ms)

    # -- persistence -----------------------------------------------------------

    def stored(self, assignments: dict[str, bytes] | None = None) -> StoredGroup:
        assignments = assignments or {}
        return StoredGroup(
            self.protocol_type or "", self.generation, self.protocol, self.leader_id,
            self.current_state_timestamp,
            [StoredMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                          m.rebalance_timeout_ms, m.session_timeout_ms,
                          m.metadata(self.protocol),
                          assignments.get(m.member_id, m.assignment))
             for m in self.members.values()])

    @classmethod
    def from_stored(cls, group_id: str, stored: StoredGroup) -> Group:
        """A group as loaded: Empty without members, else Stable (members keep
        heartbeating with the same generation after a coordinator restart)."""
        group = cls(group_id, generation=stored.generation,
                    protocol_type=stored.protocol_type or None, protocol=stored.protocol,
                    current_state_timestamp=stored.current_state_timestamp)
        group.state = S.STABLE if stored.members else S.EMPTY
        for sm in stored.members:
            group.add(Member(sm.member_id, sm.group_instance_id, sm.client_id, sm.client_host,
                             sm.rebalance_timeout_ms, sm.session_timeout_ms,
                             stored.protocol_type, [(stored.protocol or "", sm.subscription)],
                             sm.assignment, is_new=False))
        group.leader_id = stored.leader if stored.leader in group.members else \
            next(iter(group.members), None)
        return group
