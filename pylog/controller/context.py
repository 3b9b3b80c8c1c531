"""What the active controller knows (Kafka's ControllerContext).

Loaded from ZooKeeper when a node becomes controller and kept current by the
events it handles: the live brokers (with their epochs), each topic's id and
replica assignment, each partition's leader and ISR as stored in its state
znode (with the znode's version, the compare-and-set fence), the brokers in
controlled shutdown, and the topics queued for deletion.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from pylog.protocol.uuids import parse_uuid
from pylog.zk.znodes import BrokerInfo, LeaderIsrState, TopicAssignment

TopicPartition = tuple[str, int]
NO_LEADER = -1
# Kafka's LeaderAndIsr.LeaderDuringDelete: UpdateMetadata's leader for a
# partition being deleted (brokers drop it from their metadata cache).
LEADER_DURING_DELETE = -2


@dataclass
class ControllerContext:
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    assignments: dict[str, TopicAssignment] = field(default_factory=dict)
    states: dict[TopicPartition, LeaderIsrState] = field(default_factory=dict)
    # topic -> the (broker, partition) StopReplicas not yet acknowledged
    deleting: dict[str, set[tuple[int, int]]] = field(default_factory=dict)

    # -- brokers ---------------------------------------------------------------------

    @property
    def live(self) -> set[int]:
        """Brokers that may lead: registered and not shutting down."""
        return set(self.brokers) - self.shutting_down

    def is_live(self, broker_id: int) -> bool:
        return broker_id in self.brokers

    # -- topics and partitions ----------------------------------------------------------

    def topic_id(self, topic: str) -> uuid.UUID:
        a = self.assignments.get(topic)
        if a is None or not a.topic_id:
            return uuid.UUID(int=0)
        try:
            return parse_uuid(a.topic_id)
        except ValueError:
            return uuid.UUID(int=0)

    def replicas(self, tp: TopicPartition) -> list[int]:
        a = self.assignments.get(tp[0])
        return list(a.partitions.get(tp[1], [])) if a is not None else []

    def partitions(self, topic: str | None = None) -> list[TopicPartition]:
        topics = [topic] if topic is not None else list(self.assignments)
        return [(t, p) for t in topics if t in self.assignments
                for p in sorted(self.assignments[t].partitions)]

    def partitions_on(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp in self.partitions() if broker_id in self.replicas(tp)]

    def partitions_led_by(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp, st in self.states.items() if st.leader == broker_id]

    def offline(self) -> list[TopicPartition]:
        """Partitions with a state whose leader is not live."""
        live = self.live
        return [tp for tp, st in self.states.items()
                if st.leader not in live and tp[0] not in self.deleting]

    def remove_topic(self, topic: str) -> None:
        a = self.assignments.pop(topic, None)
        if a is not None:
            for p in a.partitions:
                self.states.pop((topic, p), None)
        self.deleting.pop(topic, None)
