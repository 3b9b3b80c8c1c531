"""One ``__consumer_offsets`` partition read back into groups and offsets.

Kafka's ``GroupMetadataManager.doLoadGroupsAndOffsets``: the last value of a
key wins, a tombstone removes it, a transaction's offsets count at its COMMIT
marker (those of a transaction still open are kept pending).  Pure data work,
safe on any thread: the coordinator applies the result on its loop.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from pylog.coordinator import records as fmt
from pylog.coordinator.group import Group
from pylog.coordinator.offsets_store import OFFSETS_TOPIC, Event, Pending, committed_entries
from pylog.coordinator.records import OffsetAndMetadata

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass
class LoadedGroups:
    partition: int
    groups: dict[str, Group] = field(default_factory=dict)
    # Offsets of transactions open at the end of what was read:
    # (partition, producer id) -> their records.
    pending: Pending = field(default_factory=dict)


def read_groups(partition: int, events: Iterable[Event]) -> LoadedGroups:
    """The groups (with their offsets) of one partition's records."""
    loaded = LoadedGroups(partition)
    stored: dict[str, fmt.StoredGroup | None] = {}
    offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
    tagged = ((partition, event) for event in events)
    for _, (key_bytes, value) in committed_entries(tagged, loaded.pending):
        try:
            key = fmt.parse_key(key_bytes)
            if isinstance(key, fmt.OffsetKey):
                parsed = None if value is None else fmt.parse_offset_value(value)
            elif isinstance(key, fmt.GroupKey):
                parsed = None if value is None else fmt.parse_group_value(value)
        except (struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
            # One unreadable record must not keep the partition from loading.
            log.warning("skipping an unreadable record in %s-%d: %s",
                        OFFSETS_TOPIC, partition, exc)
            continue
        if isinstance(key, fmt.OffsetKey):
            mine = offsets.setdefault(key.group, {})
            if parsed is None:
                mine.pop((key.topic, key.partition), None)
            else:
                mine[(key.topic, key.partition)] = parsed
        elif isinstance(key, fmt.GroupKey):
            stored[key.group] = parsed
    for group_id in stored.keys() | offsets.keys():
        found = stored.get(group_id)
        group_offsets = offsets.get(group_id, {})
        if found is None and not group_offsets:
            continue  # deleted
        group = Group.from_stored(group_id, found) if found else Group(group_id)
        group.offsets = group_offsets
        loaded.groups[group_id] = group
    return loaded
