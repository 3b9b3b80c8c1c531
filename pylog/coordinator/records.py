"""The key and value layouts of ``__consumer_offsets`` records, as Kafka writes them.

Kafka's GroupMetadataManager stores two kinds of records in the offsets topic,
told apart by the version that starts the key:

* key v0/v1 ``OffsetCommitKey``: group, topic, partition -> ``OffsetCommitValue``
  (v0: offset, metadata, commit ts; v1: + expire ts; v2: offset, metadata,
  commit ts; v3: offset, leader epoch, metadata, commit ts; v4: v3 flexible);
* key v2 ``GroupMetadataKey``: group -> ``GroupMetadataValue`` v0-v4 (protocol
  type, generation, protocol, leader, state timestamp (v2+), members).

A null value is a tombstone: the offset or the group was deleted.  pylog writes
offset values v3 (v1 when the commit carried a retention time, as Kafka does)
and group values v3, and reads every version, so a log written by either side
loads on the other.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(slots=True)
class OffsetAndMetadata:
    """One committed offset (Kafka's ``OffsetAndMetadata`` plus its timestamps)."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int | None = None  # only from v1 commits with a retention time


@dataclass(slots=True)
class StoredMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class StoredGroup:
    """A ``GroupMetadataValue``: what the coordinator needs to rebuild a group."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[StoredMember] = field(default_factory=list)


# -- writing ------------------------------------------------------------------

def _string(value: str | None) -> bytes:
    if value is None:
        return _I16.pack(-1)
    data = value.encode("utf-8")
    return _I16.pack(len(data)) + data


def _bytes(value: bytes | None) -> bytes:
    if value is None:
        return _I32.pack(-1)
    return _I32.pack(len(value)) + bytes(value)


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return (_I16.pack(OFFSET_KEY_VERSION) + _string(group) + _string(topic)
            + _I32.pack(partition))


def group_key(group: str) -> bytes:
    return _I16.pack(GROUP_KEY_VERSION) + _string(group)


def offset_value(value: OffsetAndMetadata) -> bytes:
    if value.expire_timestamp is not None:
        # Kafka keeps v1 for commits that set their own retention (OffsetCommit v2-v4).
        return (_I16.pack(1) + _I64.pack(value.offset) + _string(value.metadata)
                + _I64.pack(value.commit_timestamp) + _I64.pack(value.expire_timestamp))
    return (_I16.pack(OFFSET_VALUE_VERSION) + _I64.pack(value.offset)
            + _I32.pack(value.leader_epoch) + _string(value.metadata)
            + _I64.pack(value.commit_timestamp))


def group_value(group: StoredGroup) -> bytes:
    parts = [_I16.pack(GROUP_VALUE_VERSION), _string(group.protocol_type),
             _I32.pack(group.generation), _string(group.protocol), _string(group.leader),
             _I64.pack(group.current_state_timestamp), _I32.pack(len(group.members))]
    for m in group.members:
        parts += [_string(m.member_id), _string(m.group_instance_id), _string(m.client_id),
                  _string(m.client_host), _I32.pack(m.rebalance_timeout_ms),
                  _I32.pack(m.session_timeout_ms), _bytes(m.subscription),
                  _bytes(m.assignment)]
    return b"".join(parts)


# -- reading ------------------------------------------------------------------

class Reader:
    """Big-endian fields of one key or value; ``flexible`` for the v4 value layouts."""

    def __init__(self, data: bytes | memoryview, flexible: bool = False) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.flexible = flexible

    def _fixed(self, s: struct.Struct) -> int:
        value, = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return value

    def i8(self) -> int:
        return self._fixed(_I8)

    def i16(self) -> int:
        return self._fixed(_I16)

    def i32(self) -> int:
        return self._fixed(_I32)

    def i64(self) -> int:
        return self._fixed(_I64)

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    def _length(self, wide: bool) -> int:
        if self.flexible:
            return self.uvarint() - 1
        return self.i32() if wide else self.i16()

    def string(self) -> str | None:
        n = self._length(False)
        if n < 0:
            return None
        value = str(self.data[self.pos:self.pos + n], "utf-8")
        self.pos += n
        return value

    def bytes_(self) -> bytes:
        n = self._length(True)
        if n < 0:
            return b""
        value = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return value

    def array_length(self) -> int:
        return self._length(True)

    def skip_tags(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()


def parse_key(data: bytes | memoryview) -> OffsetKey | GroupKey | None:
    """The key of a ``__consumer_offsets`` record; None for a kind pylog does not
    keep (Kafka >= 3.7 writes new-protocol records with key versions 3+)."""
    r = Reader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string() or "", r.string() or "", r.i32())
    if version == GROUP_KEY_VERSION:
        return GroupKey(r.string() or "")
    return None


def parse_offset_value(data: bytes | memoryview) -> OffsetAndMetadata:
    version = _I16.unpack_from(data, 0)[0]
    r = Reader(data, flexible=version >= 4)
    r.pos = 2
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.string() or ""
    commit_ts = r.i64()
    expire = r.i64() if version == 1 else None
    return OffsetAndMetadata(offset, epoch, metadata, commit_ts,
                             expire if expire is not None and expire >= 0 else None)


def parse_group_value(data: bytes | memoryview) -> StoredGroup:
    version = _I16.unpack_from(data, 0)[0]
    r = Reader(data, flexible=version >= 4)
    r.pos = 2
    group = StoredGroup(r.string() or "", r.i32(), r.string(), r.string())
    if version >= 2:
        group.current_state_timestamp = r.i64()
    for _ in range(max(r.array_length(), 0)):
        member_id = r.string() or ""
        instance_id = r.string() if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        session = r.i32()
        rebalance = session
        if version >= 1:
            rebalance, session = session, r.i32()
        group.members.append(StoredMember(member_id, instance_id, client_id, client_host,
                                          rebalance, session, r.bytes_(), r.bytes_()))
        r.skip_tags()
    r.skip_tags()
    return group


def java_string_hash(value: str) -> int:
    """``String.hashCode()``: over UTF-16 code units, in int32 arithmetic."""
    h = 0
    data = value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions``."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions
