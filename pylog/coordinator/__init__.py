"""Consumer groups: the classic group protocol and committed offsets.

``group`` holds one group's state machine, ``coordinator`` drives joins,
syncs, heartbeats and timeouts (Kafka's GroupCoordinator), ``offsets_store``
and ``records`` read and write ``__consumer_offsets`` in Kafka's formats.
"""

from pylog.coordinator.coordinator import CoordinatorConfig, GroupCoordinator
from pylog.coordinator.group import Group, GroupState, Member

__all__ = ["CoordinatorConfig", "Group", "GroupCoordinator", "GroupState", "Member"]
